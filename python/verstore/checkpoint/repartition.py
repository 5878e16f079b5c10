"""Rewriting a stopped query's state under another partition count or other settings, step by
step.

First :func:`plan`: the partitioning in force at version ``V`` (the version the query's next
micro-batch opens) and the new one, numbered next, in a fresh directory, with its partition
count and its settings (history retention, segment interval, latest TTL). Then the steps of
docs/checkpoint.md, "Repartitioning" (which has the files, and why a crash leaves one usable
state), in order:

1. :func:`mark_sources`: a mark in every partition directory of the old partitioning;
2. :func:`read_source`: one old partition at ``V``, every version of every key with its
   tombstones, and its observed stream time (a read-only open: the checkpoint is untouched);
3. :func:`write_target`: one new partition, as one commit at ``V`` on the empty state: the
   versions it receives, put oldest first (so every write is accepted and builds exactly the
   history it had), then its observed stream time raised to the highest among the old
   partitions its keys came from;
4. :func:`publish`: the new partitioning's record, once every new partition has its commit.

Which partition a key goes to is the caller's (``verstore.spark.repartition_store`` routes rows
as the Spark helpers do); these steps move bytes and never decode a value, so values of every
recorded column layout move as they are.

New settings apply as the store's reads define them: the versions are put again under the new
retention and segment interval, and a lower or new TTL ends what it ends. A higher TTL, or none,
must not bring back a key the old TTL ended (some partitions may have reclaimed such keys,
others not): every version the old TTL ended gets a tombstone at its end
(:func:`ttl_ends`), so it stays ended, and the keys alive at ``V`` live by the new TTL.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from verstore.checkpoint import faults
from verstore.checkpoint.chain import Graph
from verstore.checkpoint.layout import LineageFiles
from verstore.checkpoint.partitionings import Partitioning, StoreConfig, mark, new_dir
from verstore.checkpoint.partitionings import publish as write_record
from verstore.checkpoint.session import CheckpointOptions
from verstore.checkpoint.settings import StoreSettings, check_or_create, read_settings
from verstore.checkpoint.store import PartitionStore
from verstore.exceptions import IncompatibleConfigError, MissingVersionError
from verstore.location import Location


@dataclass(frozen=True)
class Plan:
    """A repartition of one store's lineage: ``source`` at ``version`` becomes ``target``."""

    root: str
    store: str
    lineage: str
    version: int
    settings: StoreSettings
    source: Partitioning
    target: Partitioning

    def files(self, location: Location) -> LineageFiles:
        return LineageFiles(location, self.store, self.lineage)

    @property
    def source_config(self) -> StoreConfig:
        return self.source.config or self.settings.config

    @property
    def target_config(self) -> StoreConfig:
        return self.target.config or self.source_config


def plan(
    location: Location,
    store: str,
    lineage: str,
    version: int,
    num_partitions: int | None = None,
    config: StoreConfig | None = None,
) -> Plan | None:
    """The rewrite of ``store``'s lineage at ``version`` to ``num_partitions`` partitions with
    the settings ``config`` (None: those in force); ``None`` when the partitioning in force
    there already has them.

    Raises:
        MissingVersionError: The lineage does not exist.
        IncompatibleConfigError: ``version`` is below the newest partitioning's (a stale Spark
            checkpoint), or the lineage recorded no partition count.
    """
    location.require_conditional_create()
    files = LineageFiles(location, store, lineage)
    settings = read_settings(files)
    if settings is None:
        raise MissingVersionError(f"{location.describe(files.dir)} holds no state of {store!r}")
    source = settings.partitioning
    if source.num_partitions is None:
        raise IncompatibleConfigError(
            f"store {store!r} recorded no partition count: only stores of the verstore.spark "
            "helpers, which record how their keys are partitioned, can be repartitioned"
        )
    if version < source.version:
        raise IncompatibleConfigError(
            f"store {store!r} was repartitioned at version {source.version}; the query's "
            f"checkpoint is at version {version}, older than that"
        )
    count = source.num_partitions if num_partitions is None else num_partitions
    before = source.config or settings.config
    after = before if config is None else config
    if count == source.num_partitions and after == before:
        return None
    target_id = source.id + 1
    target = Partitioning(target_id, count, version, new_dir(target_id), after)
    return Plan(location.uri, store, lineage, version, settings, source, target)


def mark_sources(location: Location, plan: Plan) -> None:
    """Step 1: a mark in every old partition directory, so that no process keeps writing there
    on what it remembers of the settings."""
    files = plan.files(location)
    for partition in plan.source.partitions(files):
        mark(plan.source.files(files, partition))
    faults.step("repartition_marked")


@contextmanager
def read_source(
    location: Location, plan: Plan, partition: int, local_dir: str, batch_rows: int = 65_536
) -> Iterator[tuple[int, Iterator[Any]]]:
    """Step 2: ``(observed stream time, batches)`` of old partition ``partition`` at the plan's
    version, rebuilt in a directory of its own under ``local_dir`` (removed after); the batches
    have columns ``key``, ``value`` (null: a tombstone) and ``timestamp``, each key's versions
    oldest first."""
    with _scratch(local_dir, plan, "read", partition) as scratch:
        opened = _open(
            location,
            plan,
            partition,
            plan.version,
            scratch,
            read_only=True,
            partitioning=plan.source,  # never what this process may remember
        )
        try:
            store = opened.store
            scan = store.scan_versions(ascending=True, tombstones=True, batch_rows=batch_rows)
            ended = _ends_to_keep(plan)
            with scan:
                rows = (_with_ttl_ends(b, ended) for b in scan)
                yield store.observed_stream_time, rows
        finally:
            opened.abort()


def _ends_to_keep(plan: Plan) -> int | None:
    """The old TTL when the new one would outlive it (a higher TTL, or none): the ends it made
    must be written as tombstones. None: the new settings end no later."""
    old, new = plan.source_config.latest_ttl_ms, plan.target_config.latest_ttl_ms
    return old if old is not None and (new is None or new > old) else None


def _with_ttl_ends(batch: Any, ttl_ms: int | None) -> Any:
    """``batch`` as ``key, value, timestamp``, and with ``ttl_ms`` a tombstone after it at the
    end of every version that TTL ended (:func:`ttl_ends`)."""
    import pyarrow as pa

    rows = batch.select(["key", "value", "timestamp"])
    if ttl_ms is None:
        return rows
    ends = ttl_ends(batch, ttl_ms)
    return pa.Table.from_batches([rows, ends]).combine_chunks().to_batches()[0]


def ttl_ends(batch: Any, ttl_ms: int) -> Any:
    """Tombstones (``key, value, timestamp``, the value null) at the end of every value of
    ``batch`` (a scan of versions with ``valid_to``) that the TTL ``ttl_ms`` ended: a value
    whose end is its time plus the TTL (docs/semantics.md §2.15). Its next version, if one
    starts exactly there, replaces the tombstone: the writer puts tombstones first at equal
    times."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lived = pc.subtract(batch.column("valid_to"), batch.column("timestamp"))
    cut = pc.and_(pc.is_valid(batch.column("value")), pc.equal(lived, ttl_ms))
    ended = batch.filter(pc.fill_null(cut, False))
    value = batch.schema.field("value").type
    return pa.RecordBatch.from_arrays(
        [ended.column("key"), pa.nulls(ended.num_rows, value), ended.column("valid_to")],
        schema=batch.select(["key", "value", "timestamp"]).schema,
    )


def write_order(row: tuple[Any, ...]) -> tuple[int, bool]:
    """How the writer orders rows ``(key, value, timestamp, ...)``: by time, and a tombstone
    before a value at the same time (so that a version replaces a TTL end written there)."""
    return row[2], row[1] is not None


def write_target(
    location: Location, plan: Plan, partition: int, local_dir: str, batches: Iterable[Any]
) -> tuple[int, int]:
    """Step 3: new partition ``partition`` committed at the plan's version from ``batches``
    (columns key, value, timestamp and the observed stream time of the old partition each row
    came from: every version it receives, in timestamp order); then its observed stream time
    raised to the highest of those. Works in a directory of its own under ``local_dir``,
    removed after (no query reuses it). Returns the versions written and that stream time."""
    with _scratch(local_dir, plan, "write", partition) as scratch:
        opened = _open(
            location,
            plan,
            partition,
            plan.version - 1,
            scratch,
            columns=plan.settings.columns,
            partitioning=plan.target,
            # One commit holds the partition's whole state: snapshot it at once.
            options=CheckpointOptions(snapshot_interval=1),
        )
        with opened:
            written, stream_time = _put_all(opened.store, batches)
            opened.commit()
        return written, stream_time


def _put_all(store: Any, batches: Iterable[Any]) -> tuple[int, int]:
    """Puts every version (in timestamp order, so each is accepted), then raises the stream
    time to the highest of the rows' sources."""
    import pyarrow.compute as pc

    written, stream_time = 0, -1
    for batch in batches:
        if not batch.num_rows:
            continue
        store.put_batch(batch.column(0), batch.column(1), batch.column(2))
        written += batch.num_rows
        stream_time = max(stream_time, pc.max(batch.column(3)).as_py())
        faults.step("repartition_writing")
    if stream_time >= 0:
        store.advance_stream_time(stream_time)
    return written, stream_time


def publish(location: Location, plan: Plan) -> StoreSettings:
    """Step 4: makes the new partitioning the lineage's. Every new partition must have its
    commit at the plan's version (a partition that received no key has an empty one).

    Raises:
        MissingVersionError: A new partition has no commit.
        IncompatibleConfigError: Another repartition published first (the record is a
            conditional create: of two repartitions publishing at once, exactly one wins).
    """
    files = plan.files(location)
    for partition in range(plan.target.num_partitions or 0):
        listing = plan.target.files(files, partition).listing()
        if not any(ref.version == plan.version for ref in listing.commits):
            raise MissingVersionError(
                f"the repartition of {plan.store!r} wrote no commit for new partition "
                f"{partition}: nothing was published, the query's state is unchanged"
            )
    _check_sources_still(location, plan)
    current = read_settings(files)
    if current is None or current.partitioning != plan.source:
        raise IncompatibleConfigError(
            f"store {plan.store!r} was repartitioned by someone else meanwhile: nothing was "
            "published by this repartition"
        )
    faults.step("repartition_before_publish")
    try:
        write_record(files, plan.target, with_config=plan.target_config != plan.source_config)
    except FileExistsError:
        raise IncompatibleConfigError(
            f"store {plan.store!r}: another repartition published partitioning "
            f"{plan.target.id} first, and its partitioning is the one in force: nothing was "
            "published by this repartition"
        ) from None
    faults.step("repartition_published")
    config = plan.target_config
    wanted = StoreSettings(
        config.history_retention_ms,
        config.segment_interval_ms,
        plan.target.num_partitions,
        plan.settings.columns,
        latest_ttl_ms=config.latest_ttl_ms,
    )
    settings = check_or_create(files, wanted, create=False, fresh=True)
    if settings.partitioning != plan.target:
        raise IncompatibleConfigError(
            f"store {plan.store!r}: another repartition published partitioning "
            f"{plan.target.id} at the same time; its partitioning is the one in force"
        )
    return settings


def _check_sources_still(location: Location, plan: Plan) -> None:
    """No old partition went past the plan's version meanwhile: a commit of version ``V + 2``
    or later means the query ran on (it was not stopped), and moving the state read at ``V``
    would lose that batch. (``V + 1`` may be a batch that ran but that Spark never committed;
    the query reruns it.)"""
    files = plan.files(location)
    for partition in plan.source.partitions(files):
        source = plan.source.files(files, partition)
        tip = Graph(source, source.listing()).tip()
        if tip.version > plan.version + 1:
            raise IncompatibleConfigError(
                f"{source.describe()} has version {tip.version} committed: the query ran on "
                f"past version {plan.version} during the repartition. Stop it first; nothing "
                "was published"
            )


def _open(
    location: Location, plan: Plan, partition: int, version: int, scratch: str, **extra: Any
) -> PartitionStore:
    """A partition of the plan's lineage opened at ``version`` in ``scratch``, checked against
    the lineage's settings, with ``extra``; its store has the settings of the partitioning
    ``extra`` pins (the source's, or the target's new ones)."""
    return PartitionStore.open(
        location,
        plan.store,
        partition,
        version,
        scratch,
        history_retention_ms=plan.settings.history_retention_ms,
        segment_interval_ms=plan.settings.segment_interval_ms,
        latest_ttl_ms=plan.settings.latest_ttl_ms,
        lineage=plan.lineage,
        **extra,
    )


@contextmanager
def _scratch(local_dir: str, plan: Plan, role: str, partition: int) -> Iterator[str]:
    """A step's own directory under ``local_dir`` (never a running query's working copy),
    removed when the step ends, failed or not (no query reuses it)."""
    path = os.path.join(local_dir, "repartition", plan.target.dir, f"{role}-{partition}")
    os.makedirs(path, exist_ok=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


__all__ = [
    "Plan",
    "mark_sources",
    "plan",
    "publish",
    "read_source",
    "ttl_ends",
    "write_order",
    "write_target",
]
