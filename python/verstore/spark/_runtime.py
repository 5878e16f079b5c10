"""Partition mode: each task opens its partition's stores at the micro-batch's version, hands
the partition's Arrow batches to a function, and commits when the input is exhausted.

Task ``(batch b, partition p)`` opens version ``b`` of every store it uses and commits
``b + 1`` after the function has consumed all input and produced all output. A retried task
(any failure before or after the commit) opens version ``b`` again, never "latest", so it
recomputes exactly the same output from exactly the same state (``docs/checkpoint.md`` has the
protocol that makes retries, zombies and skipped micro-batches safe). Output is buffered before
the commit (spilling to local disk past the task's memory budget) and yielded after it: a task
never commits state for output it did not produce, and never emits output of state it did not
commit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from verstore._core import VersionedStore, set_memory_limit
from verstore.checkpoint import CheckpointOptions, ColumnLayout, PartitionStore
from verstore.checkpoint.kept import Keeper
from verstore.checkpoint.settings import StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.spark import _args as arguments
from verstore.spark import _faults, _metrics
from verstore.spark._compat import to_arrow_schema
from verstore.spark._conf import (
    StorageCredentials,
    TaskConf,
    plan_credentials,
    progress_metrics_enabled,
)
from verstore.spark._metrics import TaskMetrics
from verstore.spark._query import check_before_start
from verstore.spark._spill import RowBuffer, SpillArea
from verstore.spark._worker import portable


@dataclass(frozen=True)
class StoreSpec:
    """A store a partition function uses: its name and semantics settings (picklable).

    Attributes:
        history_retention_ms: History retention, also the grace period for writes.
        segment_interval_ms: Segment interval; None applies Kafka's default rule.
        columns: How keys and values are encoded (recorded in the store and checked on every
            open, so that a query with other key or value types never misreads its bytes);
            None for stores whose bytes are the function's own business.
        latest_ttl_ms: The time-to-live of keys' newest versions, in event time
            (docs/semantics.md §2.15); None: keys never expire. Recorded by the store's
            lineage: a query keeps the TTL it started with.
    """

    history_retention_ms: int
    segment_interval_ms: int | None = None
    columns: ColumnLayout | None = None
    latest_ttl_ms: int | None = None


@dataclass
class PartitionContext:
    """What a partition function gets besides its input: the open stores and where it runs.

    Attributes:
        stores: Store name -> the open store.
        batch_id: The micro-batch.
        partition: The partition.
        rebuilt: Store name -> whether it was rebuilt from the checkpoint (not reused locally).
        spill: Where buffers that outgrow the task's memory budget spill to.
        metrics: The task's store metrics; a partition function adds what only it knows, e.g.
            ``ctx.metrics.expired(codes)`` after a ``put_batch``.
    """

    stores: dict[str, VersionedStore]
    batch_id: int
    partition: int
    rebuilt: dict[str, bool]
    spill: SpillArea
    metrics: TaskMetrics = field(default_factory=TaskMetrics)
    codecs: dict[str, ValueCodec] = field(default_factory=dict)

    def store(self, name: str) -> VersionedStore:
        try:
            return self.stores[name]
        except KeyError:
            have = sorted(self.stores)
            raise KeyError(f"no store named {name!r}; this task has {have}") from None

    def codec(self, name: str) -> ValueCodec:
        """How store ``name`` (one with ``StoreSpec.columns``) encodes and decodes its values,
        across the value schema evolutions its lineage recorded."""
        self.store(name)
        if name not in self.codecs:
            raise KeyError(f"store {name!r} records no column layout: its values are bytes")
        return self.codecs[name]


@contextmanager
def partition_stores(
    specs: Mapping[str, StoreSpec],
    *,
    num_partitions: int | None,
    spill: SpillArea | None = None,
    credentials: StorageCredentials | None = None,
) -> Iterator[PartitionContext]:
    """Opens the task's partition of every store at the batch's version; commits all on a clean
    exit, aborts all on an exception. ``credentials``: the secret storage options the caller's
    partition function carries (``_conf.plan_credentials`` when its plan was built)."""
    conf = TaskConf.current(credentials)
    set_memory_limit(conf.store_budget_mb)
    with SpillArea(conf.local_dir, conf.arrow_budget_bytes) as own_spill:
        yield from _partition_stores(conf, specs, num_partitions, spill or own_spill)


def _open_one(
    conf: TaskConf, name: str, spec: StoreSpec, num_partitions: int | None
) -> PartitionStore:
    """Store ``name`` of the task's partition, open at the task's micro-batch (from the
    worker's keeper when it kept the store open since its last commit there)."""
    keeper = Keeper.for_process(max_stores=conf.kept_stores) if _keeps_stores(conf) else None
    return PartitionStore.open(
        conf.checkpoint_root,
        name,
        conf.partition,
        conf.batch_id,
        conf.local_dir,
        history_retention_ms=spec.history_retention_ms,
        segment_interval_ms=spec.segment_interval_ms,
        latest_ttl_ms=spec.latest_ttl_ms,
        lineage=conf.query_id,
        storage_options=conf.storage_options,
        options=CheckpointOptions(
            snapshot_interval=conf.snapshot_interval,
            min_versions_to_retain=conf.min_versions_to_retain,
            lock_timeout_s=conf.lock_timeout_s,
        ),
        num_partitions=num_partitions,
        columns=spec.columns,
        keeper=keeper,
    )


def _keeps_stores(conf: TaskConf) -> bool:
    """Whether this worker keeps stores open between its tasks: only a worker that Spark
    reuses (``spark.python.worker.reuse``, on by default) runs another task; one that ends
    after its task would end with its kept stores' deferred work undone."""
    return conf.kept_stores > 0 and bool(os.environ.get("SPARK_REUSE_WORKER"))


def _commit_all(opened: Mapping[str, PartitionStore], metrics: TaskMetrics) -> None:
    """Commits every store (their sizes measured first); on a failure, releases the rest."""
    try:
        for p in opened.values():
            if not p.keeps_open:
                # The commit's flush, done first so that the size counts this batch's writes.
                p.store.flush()
            metrics.store_state(p.store)
        metrics.start_commit()
        for p in opened.values():
            p.commit()
            metrics.committed(p, p.commit_stats.records if p.commit_stats else 0)
    except BaseException:
        for p in opened.values():  # release the stores not committed yet (no-op for the others)
            p.abort()
        raise


def _partition_stores(
    conf: TaskConf, specs: Mapping[str, StoreSpec], num_partitions: int | None, spill: SpillArea
) -> Iterator[PartitionContext]:
    opened: dict[str, PartitionStore] = {}
    metrics = TaskMetrics()
    try:
        for name, spec in specs.items():
            opened[name] = _open_one(conf, name, spec, num_partitions)
            metrics.opened(opened[name])
        yield PartitionContext(
            stores={name: p.store for name, p in opened.items()},
            batch_id=conf.batch_id,
            partition=conf.partition,
            rebuilt={name: p.rebuilt for name, p in opened.items()},
            spill=spill,
            metrics=metrics,
            codecs={
                name: ValueCodec(p.settings)
                for name, p in opened.items()
                if p.settings.columns is not None
            },
        )
    except BaseException:
        for p in opened.values():
            p.abort()
        raise
    _commit_all(opened, metrics)
    _faults.after_commit()


_open_stores = contextmanager(_partition_stores)


def _nullable_schema(schema: Any) -> Any:
    """The output schema with every column nullable: the metrics row (see _metrics) is null
    in all of them."""
    from pyspark.sql import types as T

    if isinstance(schema, str):
        schema = T._parse_datatype_string(schema)
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


def _task(
    df: Any,
    specs: dict[str, StoreSpec],
    num_partitions: int,
    fn: PartitionFn,
    user: Any,
    name: str,
    progress: bool,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each task runs: the partition function between the stores' open and
    commit, its output held until the commit, then the metrics row."""
    # configure()'s secret storage options ride in ``run``'s pickled closure, never in a conf.
    credentials = plan_credentials(df.sparkSession)
    out_arrow = to_arrow_schema(user)
    accumulator = _metrics.accumulator(df.sparkSession, name)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        conf = TaskConf.current(credentials)
        set_memory_limit(conf.store_budget_mb)
        with SpillArea(conf.local_dir, conf.arrow_budget_bytes) as spill:
            output = RowBuffer(spill, share=0.25)
            with _open_stores(conf, specs, num_partitions, spill) as ctx:
                source = _Input(batches)
                for batch in fn(ctx, source):
                    output.add(batch)
                source.require_exhausted()
            if progress:
                for batch in output.batches():
                    yield _metrics.with_null_metrics(batch)
                yield _metrics.metrics_row(out_arrow, ctx.partition, ctx.metrics)
            else:
                yield from output.batches()
            accumulator.add(
                [{"batch_id": ctx.batch_id, "partition": ctx.partition, **ctx.metrics.as_dict()}]
            )

    return run


PartitionFn = Callable[[PartitionContext, Iterator[Any]], Iterable[Any]]


class _Input:
    """The partition's input batches, checked for being read to the end: state committed for
    part of a micro-batch would be silently missing the rest on every later batch."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = iter(batches)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def require_exhausted(self) -> None:
        for batch in self._batches:
            raise RuntimeError(
                "verstore.spark: the partition function returned without reading all of its "
                f"input (a batch of {batch.num_rows} rows was left); nothing was committed. "
                "Read every batch of the iterator, even when you do not need the rows"
            )


def map_partitions_with_stores(
    df: Any,
    *,
    keys: list[str],
    num_partitions: int,
    stores: Mapping[str, StoreSpec],
    fn: PartitionFn,
    schema: Any,
) -> Any:
    """The escape hatch: run ``fn(ctx, batches)`` once per partition per micro-batch.

    ``df`` is repartitioned by ``keys`` into ``num_partitions`` (recorded in each store; a
    change across restarts is refused), then ``fn`` receives a :class:`PartitionContext` with
    the partition's stores open at the batch's version and an iterator of
    ``pyarrow.RecordBatch``; it returns or yields ``pyarrow.RecordBatch`` of ``schema``. Use
    batch store calls only. ``fn`` must be deterministic for exactly-once results, and must
    read its input to the end (a task that leaves input unread fails and commits nothing).
    Output is buffered until the stores are committed, in memory up to the task's memory
    budget (``configure(memory_limit_mb=...)``) and on local disk beyond it; use
    ``ctx.spill`` (``verstore.spark._spill``) to bound your own buffers likewise.

    Args:
        df: A streaming DataFrame.
        keys: Columns that decide the partition of a row (all rows of a key meet in one task).
        num_partitions: The number of partitions (recorded in the stores; changed only by
            :func:`verstore.spark.repartition_store`).
        stores: Store name -> :class:`StoreSpec`.
        fn: The partition function.
        schema: The output schema (a ``StructType`` or DDL string).
    """
    arguments.check_num_partitions(num_partitions)
    specs = dict(stores)
    # A restart with changed settings fails here, once, before the query starts.
    check_before_start(
        df.sparkSession,
        {
            name: StoreSettings(
                spec.history_retention_ms,
                spec.segment_interval_ms,
                num_partitions,
                spec.columns,
                latest_ttl_ms=spec.latest_ttl_ms,
            )
            for name, spec in specs.items()
        },
    )
    user = _nullable_schema(schema)
    name = "verstore." + "+".join(specs)
    # Spark's observe() costs every output row (docs/spark.md, metrics): it can be turned off.
    progress = progress_metrics_enabled(df.sparkSession)
    run = _task(df, specs, num_partitions, fn, user, name, progress)
    shuffled = df.repartition(num_partitions, *keys)
    if not progress:
        return shuffled.mapInArrow(portable(run), user)
    # A copy: StructType.add changes the schema it is called on.
    with_metrics = type(user)(list(user.fields)).add(_metrics.METRICS, _metrics.spark_type(), True)
    return _metrics.observed(shuffled.mapInArrow(portable(run), with_metrics), name)
