"""``repartition_store``: a stopped query's store moved to another number of partitions.

Two Spark jobs between driver steps (``verstore.checkpoint.repartition`` has the steps and
``verstore.checkpoint.lineage`` why a crash anywhere leaves the old state or the new one):
the driver marks the old partitions; one job reads every old partition at the version the query
resumes from, routes each key's versions with the partitioning the helpers use
(``DataFrame.repartition(n, *key columns)`` on the decoded key columns: Spark's hash of the
same typed values) and writes each new partition as one commit; the driver then publishes the
new partitioning, which makes it the store's in one step.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

from verstore.checkpoint import repartition as steps
from verstore.location import Location
from verstore.spark import _args as arguments
from verstore.spark._conf import StorageCredentials, _local_dir

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
    arguments.check_store_name(store)
    options = dict(storage_options or {})
    lineage, version = query_position(Location.resolve(checkpoint_location, options))
    location = Location.resolve(checkpoint_root, options)
    plan = steps.plan(location, store, lineage, version, num_partitions)
    if plan is None:
        return _report(version, num_partitions, num_partitions, 0)
    if plan.settings.columns is None:
        raise ValueError(
            f"store {store!r} records no column layout, so how its keys are partitioned is "
            "not verstore's: only stores of the verstore.spark helpers can be repartitioned"
        )
    steps.mark_sources(location, plan)
    written = _move(spark, plan, StorageCredentials("repartition_store", options))
    if query_position(Location.resolve(checkpoint_location, options)) != (lineage, version):
        raise RuntimeError(
            f"verstore.spark.repartition_store: the query of {checkpoint_location} committed "
            "a micro-batch during the repartition. Stop it first, then run this again; nothing "
            "was published"
        )
    steps.publish(location, plan)
    return _report(version, plan.source.num_partitions, num_partitions, written)


def _report(version: int, before: int | None, after: int, written: int) -> dict[str, Any]:
    return {
        "version": version,
        "from_partitions": before,
        "to_partitions": after,
        "versions": written,
    }


def _move(spark: Any, plan: steps.Plan, credentials: StorageCredentials) -> int:
    """The Spark job: every old partition read, routed, and written as a new partition."""
    from pyspark.sql.pandas.types import from_arrow_schema

    key_schema = plan.settings.columns.schemas()[0]  # type: ignore[union-attr]
    keys = [f.name for f in key_schema]
    rows = _rows_schema(key_schema)
    sources = plan.source.num_partitions or 0
    read = spark.range(0, sources, 1, sources).mapInArrow(
        _source_rows(plan, credentials), from_arrow_schema(rows)
    )
    # As the helpers route rows (_runtime.map_partitions_with_stores): by the key columns.
    by = [arguments.col(k) for k in keys]
    routed = read.repartition(plan.target.num_partitions, *by).sortWithinPartitions(_TIME)
    report = routed.mapInArrow(_writer(plan, credentials), _REPORT).collect()
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


_BATCH_FILE = re.compile(r"(0|[1-9][0-9]{0,18})")


def query_position(checkpoint: Location) -> tuple[str, int]:
    """``(query id, version)`` of a Spark checkpoint: the version its next micro-batch opens,
    one past its last committed batch.

    Raises:
        ValueError: No query metadata, or no committed micro-batch.
    """
    where = checkpoint.describe(checkpoint.root)
    try:
        first = checkpoint.read_bytes(checkpoint.path("metadata"), 1 << 16).split(b"\n")[0]
        query_id = json.loads(first)["id"]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        raise ValueError(
            f"{where} is not a Spark streaming checkpoint (no readable metadata)"
        ) from None
    batches = [
        int(info.base_name)
        for info in checkpoint.list(checkpoint.path("commits"))
        if _BATCH_FILE.fullmatch(posixpath.basename(info.path))
    ]
    if not batches:
        raise ValueError(f"{where} has no committed micro-batch: there is no state to move")
    return str(query_id), max(batches) + 1


__all__ = ["query_position", "repartition_store"]
