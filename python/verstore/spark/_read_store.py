"""``read_store``: a store's committed state as a batch DataFrame, for debugging, backfills and
audits ("every price as of 10:00"), or its change feed ("what did micro-batch 41 write").

One Spark task per store partition: each rebuilds its partition at the requested version from
the checkpoint into a private temporary directory (never the running query's local copies),
scans it from a consistent snapshot and decodes keys and values back to the columns that wrote
them (``verstore.committed``). This is what Spark 4's ``statestore`` source is for Spark's own
state. The tasks are those of a Python data source (``spark.read.format("verstore")``,
``_datasource``) from PySpark 4.0; PySpark 3.5 has no data sources, and runs the same reads
through ``mapInArrow`` over one row per partition. Either way the request (``_request``) holds
only public storage options; the secret ones travel pickled with the reading code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from verstore.changes import partitions_of_changes
from verstore.committed import NEWEST, encode_key, resolve
from verstore.spark import _compat
from verstore.spark._conf import StorageCredentials, split_options
from verstore.spark._request import arrow_schema, read_part
from verstore.spark._worker import portable


def read_store(
    spark: Any,
    store: str,
    *,
    checkpoint_root: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    query_id: str | None = None,
    version: int | None = None,
    as_of: int | datetime | None = None,
    history: bool = False,
    from_time: int | datetime | None = None,
    to_time: int | datetime | None = None,
    start: Any = None,
    end: Any = None,
    prefix: Any = None,
    changes: bool = False,
    from_batch: int | None = None,
    to_batch: int | None = None,
) -> Any:
    """A store's committed state, or with ``changes`` its change feed, as a (batch) DataFrame.

    Without ``history``: one row per key, its version valid at ``as_of`` (default: the newest),
    as ``get(key, as_of=...)`` answers. With ``history``: every stored version whose validity
    meets ``[from_time, to_time]``. Columns: the store's key and value columns as the helper
    that wrote them stored them (for ``asof_join``, the ``on`` columns and the table values,
    tie-breakers included), then ``valid_from`` and ``valid_to`` (epoch milliseconds;
    ``valid_to`` null while the version is the newest) and ``partition``.

    Args:
        spark: The SparkSession.
        store: The store's name (the helper's ``store`` argument; a ``versioned_table_join``
            keeps ``<store>_left`` and ``<store>_right``).
        checkpoint_root: The verstore root; default: the one :func:`configure` set.
        storage_options: Filesystem options of a URI root; default: :func:`configure`'s.
            Credentials among them never enter the plan (see the module).
        query_id: The lineage to read, a streaming query's id; default: the only one.
        version: The committed version to read, the state after micro-batch ``version - 1``
            (default: each partition's newest).
        as_of: A time (epoch ms or a datetime): each key's version valid then.
        history: Every version instead of one per key.
        from_time: With ``history``: the earliest time of interest.
        to_time: With ``history``: the latest time of interest.
        start: The smallest key to read (inclusive): a tuple of key column values or raw bytes.
        end: The key to stop before (exclusive), likewise.
        prefix: Only keys beginning with these key column values (a prefix of the key columns).
        changes: Instead of the state, what each micro-batch wrote (``verstore.changes``): one
            row per accepted write of micro-batches ``from_batch`` to ``to_batch``, with
            ``batch_id``, ``partition``, ``change_seq`` (its order in the batch),
            ``change_type`` (``put`` or ``delete``), the key and value columns and
            ``valid_from`` (the write's time).
        from_batch: With ``changes``: the first micro-batch (default: the oldest kept).
        to_batch: With ``changes``: the last micro-batch, inclusive (default: the newest).

    Raises:
        ValueError: Bad arguments, or several lineages and no ``query_id``.
        MissingVersionError: No such store, lineage or version.
    """
    from verstore.spark._conf import CHECKPOINT_ROOT, session_storage_options

    if checkpoint_root is None:
        checkpoint_root = spark.conf.get(CHECKPOINT_ROOT, None)
        if not checkpoint_root:
            raise ValueError("checkpoint_root: none given and verstore.spark.configure not called")
        if storage_options is None:
            storage_options = session_storage_options(spark)
    state_args = {"version": version, "as_of": as_of, "history": history, "from_time": from_time}
    state_args |= {"to_time": to_time, "start": start, "end": end, "prefix": prefix}
    if changes:
        _check_change_args(state_args, from_batch, to_batch)
    else:
        _check_state_args(history, as_of, from_time, to_time, start, end, prefix, version)
        if from_batch is not None or to_batch is not None:
            raise ValueError("from_batch and to_batch go with changes=True")
    ref, settings = resolve(checkpoint_root, store, query_id, storage_options)
    public, hidden = split_options(dict(storage_options or {}))
    request = {
        "root": checkpoint_root,
        "store": ref.store,
        "lineage": ref.lineage,
        "storage_options": public,
        "version": NEWEST if version is None else version,
        "as_of": _ms(as_of, "as_of"),
        "history": history,
        "from_time": _ms(from_time, "from_time"),
        "to_time": _ms(to_time, "to_time"),
        "start": _hex(encode_key(settings.columns, start)),
        "end": _hex(encode_key(settings.columns, end)),
        "prefix": _hex(encode_key(settings.columns, prefix)),
        "partitions": (
            partitions_of_changes(ref, settings, from_batch, to_batch)
            if changes
            else settings.partitioning_at(NEWEST if version is None else version).partitions(
                ref.files
            )
        ),
        "changes": {"from_batch": from_batch, "to_batch": to_batch} if changes else None,
    }
    if _compat.has(_compat.DATA_SOURCES):
        from verstore.spark import _datasource

        return _datasource.load(spark, request, hidden)
    return _read_by_map(spark, request, {**public, **hidden})


def _read_by_map(spark: Any, request: Mapping[str, Any], storage_options: dict[str, Any]) -> Any:
    """The request read by ``mapInArrow`` over one row per store partition (PySpark 3.5, which
    has no Python data sources): row ``i``'s task reads ``request["partitions"][i]``. The
    storage options travel in the pickled function, never in a conf or the plan's text."""
    from pyspark.sql.pandas.types import from_arrow_schema

    parts = list(request["partitions"])
    carried = StorageCredentials("read_store", storage_options)
    schema = from_arrow_schema(arrow_schema(request, storage_options))

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from read_part(request, carried.options, parts[index])

    slices = max(1, len(parts))
    return spark.range(0, len(parts), 1, slices).mapInArrow(portable(read), schema)


def _check_state_args(
    history: bool,
    as_of: Any,
    from_time: Any,
    to_time: Any,
    start: Any,
    end: Any,
    prefix: Any,
    version: Any,
) -> None:
    if history and as_of is not None:
        raise ValueError("as_of reads one version per key; with history=True use from_time/to_time")
    if not history and (from_time is not None or to_time is not None):
        raise ValueError("from_time and to_time go with history=True; use as_of for one version")
    if prefix is not None and (start is not None or end is not None):
        raise ValueError("prefix cannot be combined with start or end")
    _check_count(version, "version")


def _check_change_args(state_args: Mapping[str, Any], from_batch: Any, to_batch: Any) -> None:
    given = [k for k, v in state_args.items() if v is not None and v is not False]
    if given:
        raise ValueError(
            f"changes=True reads the change feed between from_batch and to_batch; "
            f"{', '.join(given)} read the state and cannot be combined with it"
        )
    _check_count(from_batch, "from_batch")
    _check_count(to_batch, "to_batch")
    if from_batch is not None and to_batch is not None and from_batch > to_batch:
        raise ValueError(f"from_batch ({from_batch}) is after to_batch ({to_batch})")


def _check_count(value: Any, name: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value is not None and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _ms(value: int | datetime | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:  # naive: UTC, as Spark sessions in UTC write them
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be epoch milliseconds (int) or a datetime, got {value!r}")


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


__all__ = ["read_store"]
