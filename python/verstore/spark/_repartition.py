"""``repartition_store`` and ``change_store_settings``: a stopped query's store rewritten under
another number of partitions or other settings (history retention, segment interval, TTL).

Two Spark jobs between driver steps (``verstore.checkpoint.repartition`` has the steps and
docs/checkpoint.md, "Repartitioning", why a crash anywhere leaves the old state or the new one):
the driver marks the old partitions; one job reads every old partition at the version the query
resumes from, routes each key's versions with the partitioning the helpers use
(``DataFrame.repartition(n, *key columns)`` on the decoded key columns: Spark's hash of the
same typed values) and writes each new partition as one commit; the driver then publishes the
new partitioning, which makes it the store's in one step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from verstore.checkpoint import repartition as steps
from verstore.checkpoint.layout import LineageFiles
from verstore.checkpoint.partitionings import StoreConfig
from verstore.checkpoint.settings import read_settings
from verstore.exceptions import MissingVersionError
from verstore.location import Location
from verstore.spark import _args as arguments
from verstore.spark._conf import StorageCredentials, _local_dir
from verstore.spark._query import query_position
from verstore.spark._worker import portable

Duration = str | int | timedelta

# The columns of the routed rows besides the decoded key columns.
_KEY, _VALUE, _TIME, _STREAM_TIME = (
    "_verstore_key",
    "_verstore_value",
    "_verstore_ts",
    "_verstore_st",
)
_REPORT = "partition int, versions long, stream_time long"


def repartition_store(
    spark: Any,
    checkpoint_root: str,
    store: str,
    num_partitions: int,
    *,
    checkpoint_location: str,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Moves the state of ``store`` to ``num_partitions`` partitions, for a query restarted
    with that count (``num_partitions=`` of the helper, or ``spark.sql.shuffle.partitions``).

    Stop the query first, and restart it once this returns. The state moved is the store's at
    the query's last committed micro-batch (read from ``checkpoint_location``): current values,
    history within retention and tombstones, every key routed as the helpers route it. Each new
    partition's observed stream time is the highest among the old partitions its keys came from
    (docs/checkpoint.md). A crash or failure anywhere leaves the store as it was or wholly
    repartitioned, never a mix; run it again after a failure. A query of several stores (a
    table-table join) needs each of them repartitioned.

    Args:
        spark: The Spark session that runs the two jobs.
        checkpoint_root: The verstore checkpoint root of the query (``configure``'s).
        store: The store name.
        num_partitions: The new number of partitions, >= 1.
        checkpoint_location: The query's Spark checkpoint location: its id names the store's
            lineage and its commit log the version the query resumes from.
        storage_options: Filesystem options for ``checkpoint_root`` and ``checkpoint_location``.

    Returns:
        ``{"version", "from_partitions", "to_partitions", "versions"}``; ``from_partitions`` ==
        ``to_partitions`` when the store already had that count (nothing changed).

    Raises:
        ValueError: A bad argument, or the Spark checkpoint has no committed micro-batch.
        MissingVersionError: The store holds no state of the query.
        IncompatibleConfigError: The store records no partitioning of the helpers' kind, or it
            was repartitioned after the Spark checkpoint's last batch.
    """
    arguments.check_num_partitions(num_partitions)
    return _rewrite(
        spark, "repartition_store", checkpoint_root, store, checkpoint_location,
        storage_options, num_partitions, None,
    )  # fmt: skip


def change_store_settings(
    spark: Any,
    checkpoint_root: str,
    store: str,
    *,
    checkpoint_location: str,
    history_retention: Duration | None = None,
    latest_ttl: Duration | None = None,
    remove_latest_ttl: bool = False,
    segment_interval: Duration | None = None,
    num_partitions: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Rewrites the state of ``store`` under new settings, keeping its history, for a query
    restarted with them (docs/spark.md, Changing a running query). A setting not given keeps
    its value.

    Stop the query first, and restart it with the new values once this returns. Like
    :func:`repartition_store`, it reads every partition at the query's last committed
    micro-batch (from ``checkpoint_location``) and writes it again, now with the new settings;
    a crash or failure anywhere leaves the store with the old settings or wholly with the new
    ones. What each change keeps: a lower or new TTL reads as if the store always had it; a
    higher TTL, or none, keeps the keys the old TTL ended ended, and the keys alive now live by
    the new one; a longer retention keeps what the store still holds (history already dropped
    does not come back), a shorter one drops what falls behind it. The query's next micro-batch
    then runs with the new settings only.

    Args:
        spark: The Spark session that runs the two jobs.
        checkpoint_root: The verstore checkpoint root of the query (``configure``'s).
        store: The store name (a ``versioned_table_join`` has two: ``<store>_left`` and
            ``<store>_right``; change both alike).
        checkpoint_location: The query's Spark checkpoint location.
        history_retention: The new history retention (and grace period), a duration.
        latest_ttl: The new time-to-live of keys' newest versions, a duration >= 1 ms.
        remove_latest_ttl: Keys never expire from now on (``latest_ttl`` must then be None).
        segment_interval: The new segment interval, a duration >= 1 ms (a store of the helpers
            has Kafka's default rule, derived from the retention).
        num_partitions: A new partition count as well (:func:`repartition_store`).
        storage_options: Filesystem options for ``checkpoint_root`` and ``checkpoint_location``.

    Returns:
        ``{"version", "from_partitions", "to_partitions", "versions", "from_settings",
        "to_settings"}`` (settings as ``history_retention_ms``, ``segment_interval_ms`` and
        ``latest_ttl_ms``); both settings equal when nothing had to change.

    Raises:
        ValueError: A bad argument, nothing to change, or the Spark checkpoint has no committed
            micro-batch.
        MissingVersionError: The store holds no state of the query.
        IncompatibleConfigError: The store was rewritten after the Spark checkpoint's last
            batch, or records no partitioning of the helpers' kind.
    """
    if num_partitions is not None:
        arguments.check_num_partitions(num_partitions)
    if remove_latest_ttl and latest_ttl is not None:
        raise ValueError("give latest_ttl or remove_latest_ttl=True, not both")
    if not isinstance(remove_latest_ttl, bool):
        raise TypeError(f"remove_latest_ttl must be a bool, got {remove_latest_ttl!r}")
    changes = _SettingsChange(
        None
        if history_retention is None
        else arguments.parse_duration_ms(history_retention, name="history_retention"),
        arguments.parse_ttl_ms(latest_ttl),
        remove_latest_ttl,
        arguments.parse_ttl_ms(segment_interval, name="segment_interval"),
    )
    if changes.empty and num_partitions is None:
        raise ValueError(
            "change_store_settings: give a setting to change (history_retention, latest_ttl, "
            "remove_latest_ttl, segment_interval or num_partitions)"
        )
    return _rewrite(
        spark, "change_store_settings", checkpoint_root, store, checkpoint_location,
        storage_options, num_partitions, changes,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _SettingsChange:
    """The settings ``change_store_settings`` was asked to change (None: keep)."""

    retention: int | None
    ttl: int | None
    no_ttl: bool
    interval: int | None

    @property
    def empty(self) -> bool:
        return (self.retention, self.ttl, self.interval) == (None, None, None) and not self.no_ttl

    def applied(self, config: StoreConfig) -> StoreConfig:
        ttl = None if self.no_ttl else self.ttl if self.ttl is not None else config.latest_ttl_ms
        return StoreConfig(
            config.history_retention_ms if self.retention is None else self.retention,
            config.segment_interval_ms if self.interval is None else self.interval,
            ttl,
        )


def _rewrite(
    spark: Any,
    command: str,
    checkpoint_root: str,
    store: str,
    checkpoint_location: str,
    storage_options: Mapping[str, Any] | None,
    num_partitions: int | None,
    changes: _SettingsChange | None,
) -> dict[str, Any]:
    """The rewrite both commands run: the plan, the marks, the Spark jobs, the publish."""
    arguments.check_store_name(store)
    options = dict(storage_options or {})
    lineage, version = query_position(Location.resolve(checkpoint_location, options))
    location = Location.resolve(checkpoint_root, options)
    settings = read_settings(LineageFiles(location, store, lineage))
    if settings is None:
        raise MissingVersionError(f"{location.describe(store)} holds no state of query {lineage}")
    config = None if changes is None else changes.applied(settings.config)
    plan = steps.plan(location, store, lineage, version, num_partitions, config)
    if plan is None:  # nothing to change
        count = settings.num_partitions
        return _report(version, count, count, 0, config, config)
    if plan.settings.columns is None:
        raise ValueError(
            f"store {store!r} records no column layout, so how its keys are partitioned is "
            f"not verstore's: only stores of the verstore.spark helpers can be rewritten by "
            f"{command}"
        )
    steps.mark_sources(location, plan)
    written = _move(spark, plan, StorageCredentials(command, options))
    if query_position(Location.resolve(checkpoint_location, options)) != (lineage, version):
        raise RuntimeError(
            f"verstore.spark.{command}: the query of {checkpoint_location} committed "
            "a micro-batch during the rewrite. Stop it first, then run this again; nothing "
            "was published"
        )
    steps.publish(location, plan)
    return _report(
        version,
        plan.source.num_partitions,
        plan.target.num_partitions,
        written,
        plan.source_config,
        plan.target_config,
    )


def _report(
    version: int,
    before: int | None,
    after: int | None,
    written: int,
    old: StoreConfig | None,
    new: StoreConfig | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": version,
        "from_partitions": before,
        "to_partitions": after,
        "versions": written,
    }
    if old is not None and new is not None:
        out["from_settings"] = dataclasses.asdict(old)
        out["to_settings"] = dataclasses.asdict(new)
    return out


def _move(spark: Any, plan: steps.Plan, credentials: StorageCredentials) -> int:
    """The Spark job: every old partition read, routed, and written as a new partition."""
    from pyspark.sql.pandas.types import from_arrow_schema

    key_schema = plan.settings.columns.schemas()[0]  # type: ignore[union-attr]
    keys = [f.name for f in key_schema]
    rows = _rows_schema(key_schema)
    sources = plan.source.num_partitions or 0
    read = spark.range(0, sources, 1, sources).mapInArrow(
        portable(_source_rows(plan, credentials)), from_arrow_schema(rows)
    )
    # As the helpers route rows (_runtime.map_partitions_with_stores): by the key columns.
    by = [arguments.col(k) for k in keys]
    # In time order, a tombstone before a value at one time (steps.write_order).
    by_time = [arguments.col(_TIME), arguments.col(_VALUE).isNotNull()]
    routed = read.repartition(plan.target.num_partitions, *by).sortWithinPartitions(*by_time)
    report = routed.mapInArrow(portable(_writer(plan, credentials)), _REPORT).collect()
    done = sorted(r["partition"] for r in report)
    if done != list(range(plan.target.num_partitions or 0)):
        raise RuntimeError(
            f"verstore.spark.repartition_store: new partitions {done} were written, not "
            f"0..{plan.target.num_partitions}: nothing was published"
        )
    return sum(r["versions"] for r in report)


def _rows_schema(key_schema: Any) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            *key_schema,
            pa.field(_KEY, pa.binary()),
            pa.field(_VALUE, pa.binary()),
            pa.field(_TIME, pa.int64()),
            pa.field(_STREAM_TIME, pa.int64()),
        ]
    )


def _task_local_dir() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return _local_dir(ctx.getLocalProperty if ctx is not None else (lambda _: None))


def _source_rows(plan: steps.Plan, credentials: StorageCredentials) -> Any:
    """Each task: its old partitions' versions, with their decoded keys for the routing."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        from verstore._core import decode_rows

        location = Location.resolve(plan.root, credentials.options)
        key_schema = plan.settings.columns.schemas()[0]  # type: ignore[union-attr]
        for batch in batches:
            for partition in batch.column(0).to_pylist():
                local = _task_local_dir()
                with steps.read_source(location, plan, partition, local) as (stream_time, scan):
                    for part in scan:
                        yield _routed(part, decode_rows(part.column(0), key_schema), stream_time)

    return read


def _routed(part: Any, keys: Any, stream_time: int) -> Any:
    import pyarrow as pa

    n = part.num_rows
    return pa.RecordBatch.from_arrays(
        [
            *keys.columns,
            part.column(0),
            part.column(1),
            part.column(2),
            pa.array([stream_time] * n, pa.int64()),
        ],
        schema=_rows_schema(keys.schema),
    )


def _writer(plan: steps.Plan, credentials: StorageCredentials) -> Any:
    """Each task: its new partition, from the versions routed to it (in timestamp order)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("verstore.spark.repartition_store: not in a Spark task")
        partition = ctx.partitionId()
        location = Location.resolve(plan.root, credentials.options)
        stored = (b.select([_KEY, _VALUE, _TIME, _STREAM_TIME]) for b in batches)
        local = _task_local_dir()
        written, stream_time = steps.write_target(location, plan, partition, local, stored)
        yield pa.RecordBatch.from_pydict(
            {"partition": [partition], "versions": [written], "stream_time": [stream_time]},
            schema=pa.schema(
                [("partition", pa.int32()), ("versions", pa.int64()), ("stream_time", pa.int64())]
            ),
        )

    return write


__all__ = ["change_store_settings", "query_position", "repartition_store"]
