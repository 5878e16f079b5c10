"""Stream-table as-of (temporal) join over a versioned store.

Spark has no streaming as-of join: ``_joinAsOf`` and SQL ``ASOF JOIN`` refuse a streaming
right side, and a stream-static join sees only the table's current snapshot. :func:`asof_join`
keeps every partition's table history in a verstore partition store, so that each stream row is
joined with the table version that was valid *at the row's event time*, however late the row
or the table update arrives.

Per micro-batch and partition (partition mode, see ``_runtime``):

1. The batch's table updates are applied to the store: key = the ``on`` columns, value = the
   ``table_values`` columns, both encoded to bytes in Rust (arrow-row format), timestamp =
   ``table_time`` in epoch milliseconds. Updates are applied sorted by (key, time, tie-breaker,
   value bytes), so equal (key, time) pairs have a defined winner whatever order Spark delivers
   rows in (exactly-once rests on this).
2. Every stream row of the batch is looked up with one ``get_batch(keys, as_of=times)``.

Both steps are batch calls on whole Arrow columns; no Python code runs per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark._util import column_names, parse_duration_ms, require_columns

VALID_FROM = "table_valid_from"
VALID_TO = "table_valid_to"

_SIDE = "__vs_side"
_TIME = "__vs_t"
_TABLE, _STREAM = 0, 1


def asof_join(
    stream: Any,
    table_updates: Any,
    *,
    on: str | Sequence[str],
    stream_time: str,
    table_time: str,
    table_values: Sequence[str] | None = None,
    how: str = "left",
    history_retention: str | int | timedelta = "7 days",
    num_partitions: int | None = None,
    tie_breaker: str | Sequence[str] | None = None,
    store: str = "asof",
) -> Any:
    """Joins each stream row with the table version valid at the row's event time.

    Both inputs are streaming DataFrames of one query; ``table_updates`` is the table's change
    stream (one row per new version of a key). For a stream row with key ``k`` and time ``t``
    the result carries the value of the newest update of ``k`` with ``table_time <= t`` among
    all table updates of this and earlier micro-batches (as pandas' ``merge_asof`` with
    ``direction="backward"`` would find it): an order placed at t=3 that arrives after the
    price set at t=4 is still charged the price valid at t=3.

    Semantics and limits:

    * Within a micro-batch, table updates are applied before stream rows are looked up. A
      stream row never sees a table update of a *later* micro-batch: the join does not revise
      emitted rows.
    * Times are milliseconds: timestamps are truncated to ms (``unix_millis``); integer time
      columns are read as epoch milliseconds.
    * Equal (key, table_time) updates: with ``tie_breaker``, the largest tie-breaker value wins,
      also against a version stored by an earlier micro-batch (an update that loses is
      ignored); among equal tie-breakers the later micro-batch wins, and within one
      micro-batch the largest encoded value bytes win. Without ``tie_breaker``, an update
      replaces the version of an earlier micro-batch at the same time (Kafka's rule), and
      within one micro-batch the update with the largest encoded value bytes wins: an
      arbitrary but deterministic choice, since Spark gives no order within a micro-batch.
    * Retention: each store partition keeps history for ``history_retention`` behind the
      largest table time it has seen (its observed stream time, shared by all keys of the
      partition, as in a Kafka Streams task), and that is also the grace period. A table
      update more than ``history_retention`` older than the largest table time its partition
      saw in earlier micro-batches is dropped (the store's ``put`` returns ``NOT_PUT``; a
      batch's updates are applied in time order, so the batch's own newer updates do not
      push its older ones out). A stream row older than that horizon only finds the key's
      newest version, and only if it is at or before the row's time: give the retention the
      lateness you expect on either side.
    * Nulls: a row with a null in any ``on`` column never matches (as in SQL); table updates
      with a null key or null time are ignored, and so are updates with a time before the
      epoch (the store holds non-negative times); a stream row with a null time is unmatched.
    * Table key columns are cast to the stream's key types when they differ.
    * The store (``store``, in the checkpoint root set by :func:`verstore.spark.configure`)
      and ``num_partitions`` are fixed for the life of the query's checkpoint: use a distinct
      ``store`` name for each as-of join of one checkpoint root.

    Args:
        stream: The streaming DataFrame of events to enrich.
        table_updates: The streaming DataFrame of table versions.
        on: Key column(s), present in both inputs.
        stream_time: The event-time column of ``stream`` (timestamp or integer ms).
        table_time: The valid-from column of ``table_updates`` (timestamp or integer ms).
        table_values: Table columns to carry into the output; default: every column of
            ``table_updates`` except ``on`` and ``table_time``.
        how: ``"left"`` keeps unmatched stream rows (table columns null), ``"inner"`` drops
            them.
        history_retention: How long table history is kept (and the grace period for late
            updates): ``"7 days"``-style text (ms, seconds, minutes, hours, days, weeks), an
            int in ms or a ``timedelta``.
        num_partitions: Partitions of the store; default ``spark.sql.shuffle.partitions``.
        tie_breaker: Table column(s) that order updates of equal (key, time): largest wins.
        store: The store's name under the checkpoint root.

    Returns:
        A streaming DataFrame: the stream's columns, the ``table_values`` columns, and
        ``table_valid_from`` / ``table_valid_to`` (the matched version's validity interval,
        of ``table_time``'s type: timestamp, or long ms; ``table_valid_to`` is null while the
        version is the newest one, and is as known when the row is emitted).

    Raises:
        ValueError: Unknown columns, an output column name clash, a bad ``how``,
            ``num_partitions``, ``store`` or ``history_retention``.
        TypeError: A time column that is neither a timestamp nor an integer.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    on_cols = column_names(on, "on")
    if not on_cols:
        raise ValueError("on must name at least one key column")
    tie_cols = column_names(tie_breaker, "tie_breaker") if tie_breaker is not None else []
    if how not in ("left", "inner"):
        raise ValueError(f"how must be 'left' or 'inner', got {how!r}")
    if not store or "/" in store or store.startswith("."):
        raise ValueError(f"store must be a plain directory name, got {store!r}")
    retention_ms = parse_duration_ms(history_retention, name="history_retention")

    s_schema = {f.name: f for f in stream.schema.fields}
    t_schema = {f.name: f for f in table_updates.schema.fields}
    require_columns(s_schema, [*on_cols, stream_time], "stream")
    require_columns(t_schema, [*on_cols, table_time, *tie_cols], "table_updates")
    if table_values is None:
        value_cols = [c for c in t_schema if c not in on_cols and c != table_time]
    else:
        value_cols = column_names(table_values, "table_values")
        require_columns(t_schema, value_cols, "table_updates")
    stream_cols = list(s_schema)
    out_names = [*stream_cols, *value_cols, VALID_FROM, VALID_TO]
    clashes = sorted({n for n in out_names if out_names.count(n) > 1})
    if clashes:
        raise ValueError(
            f"asof_join output would have duplicate columns {clashes}: rename them in stream or "
            "table_updates, or choose table_values"
        )

    s_time_ms, _ = _epoch_ms(s_schema[stream_time], "stream_time")
    t_time_ms, time_is_ts = _epoch_ms(t_schema[table_time], "table_time")

    spark = stream.sparkSession
    n = (
        num_partitions
        if num_partitions is not None
        else int(spark.conf.get("spark.sql.shuffle.partitions"))
    )
    if n < 1:
        raise ValueError(f"num_partitions must be >= 1, got {n}")

    keys = [f"__vs_k{i}" for i in range(len(on_cols))]
    s_names = [f"__vs_s{i}" for i in range(len(stream_cols))]
    v_names = [f"__vs_v{i}" for i in range(len(value_cols))]
    b_names = [f"__vs_b{i}" for i in range(len(tie_cols))]
    stream_side = stream.select(
        F.lit(_STREAM).cast("byte").alias(_SIDE),
        *[_col(c).alias(k) for c, k in zip(on_cols, keys, strict=True)],
        s_time_ms.alias(_TIME),
        *[_col(c).alias(s) for c, s in zip(stream_cols, s_names, strict=True)],
    )
    table_side = table_updates.select(
        F.lit(_TABLE).cast("byte").alias(_SIDE),
        *[
            _col(c).cast(s_schema[c].dataType).alias(k)
            if t_schema[c].dataType != s_schema[c].dataType
            else _col(c).alias(k)
            for c, k in zip(on_cols, keys, strict=True)
        ],
        t_time_ms.alias(_TIME),
        *[_col(c).alias(v) for c, v in zip(value_cols, v_names, strict=True)],
        *[_col(c).alias(b) for c, b in zip(tie_cols, b_names, strict=True)],
    )
    tagged = stream_side.unionByName(table_side, allowMissingColumns=True)

    out_schema = T.StructType(
        [
            *[s_schema[c] for c in stream_cols],
            *[T.StructField(c, t_schema[c].dataType, True) for c in value_cols],
            T.StructField(VALID_FROM, T.LongType(), True),
            T.StructField(VALID_TO, T.LongType(), True),
        ]
    )
    fn = _AsofPartition(
        store=store,
        keys=keys,
        stream_cols=s_names,
        values=v_names,
        tie_breakers=b_names,
        out_names=out_names,
        inner=how == "inner",
    )
    joined = map_partitions_with_stores(
        tagged,
        keys=keys,
        num_partitions=n,
        stores={store: StoreSpec(history_retention_ms=retention_ms)},
        fn=fn,
        schema=out_schema,
    )
    if not time_is_ts:
        return joined
    return joined.select(
        *[_col(c) for c in out_names[:-2]],
        F.timestamp_millis(_col(VALID_FROM)).alias(VALID_FROM),
        F.timestamp_millis(_col(VALID_TO)).alias(VALID_TO),
    )


@dataclass(frozen=True, kw_only=True)
class _AsofPartition:
    """The partition function (a picklable object: no closure over driver state)."""

    store: str
    keys: list[str]
    stream_cols: list[str]
    values: list[str]
    tie_breakers: list[str]
    out_names: list[str]
    inner: bool

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> list[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        received = list(batches)  # all table updates must be applied before any lookup
        if not received:
            return []
        data = _one_batch(pa.Table.from_batches(received))
        store = ctx.store(self.store)
        side = data.column(_SIDE)
        updates = data.filter(pc.equal(side, _TABLE))
        if updates.num_rows:
            self._apply(store, updates)
        lookups = data.filter(pc.equal(side, _STREAM))
        if not lookups.num_rows:
            return []
        return [self._lookup(store, lookups)]

    def _stored_columns(self) -> list[str]:
        return [*self.values, *self.tie_breakers]

    def _encode_values(self, batch: Any) -> Any:
        import pyarrow as pa

        from verstore._core import encode_rows

        stored = self._stored_columns()
        if not stored:  # arrow-row needs a column; every version carries the same empty value
            return pa.repeat(pa.scalar(b"", pa.binary()), batch.num_rows)
        return encode_rows(batch, stored)

    def _apply(self, store: Any, updates: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import decode_rows, encode_rows

        time = updates.column(_TIME)
        ok = pc.and_(_all_valid(updates, [*self.keys, _TIME]), pc.greater_equal(time, 0))
        updates = updates.filter(pc.fill_null(ok, False))
        if not updates.num_rows:
            return
        sortable = {
            "k": encode_rows(updates, self.keys),
            "t": updates.column(_TIME),
            "v": self._encode_values(updates),
        }
        order = [("k", "ascending"), ("t", "ascending")]
        if self.tie_breakers:
            # arrow-row bytes order like the typed values, nulls first (smallest)
            sortable["b"] = encode_rows(updates, self.tie_breakers)
            order.append(("b", "ascending"))
        order.append(("v", "ascending"))
        table = pa.table(sortable)
        table = _one_batch(table.take(pc.sort_indices(table, sort_keys=order)))
        if table.num_rows > 1:
            # keep the last (winning) update of each (key, time)
            k, t = table.column("k"), table.column("t")
            same_as_next = pc.and_(
                pc.equal(k.slice(0, len(k) - 1), k.slice(1)),
                pc.equal(t.slice(0, len(t) - 1), t.slice(1)),
            )
            keep = pa.concat_arrays([pc.invert(same_as_next), pa.array([True])])
            table = table.filter(keep)
        if self.tie_breakers:
            # an update loses to a stored version at the same time with a larger tie-breaker
            existing = store.get_batch(table.column("k"), as_of=table.column("t"))
            stored_schema = pa.schema([updates.schema.field(c) for c in self._stored_columns()])
            stored_b = encode_rows(
                decode_rows(existing.column("value"), stored_schema), self.tie_breakers
            )
            same_slot = pc.fill_null(
                pc.equal(existing.column("timestamp"), table.column("t")), False
            )
            beaten = pc.and_(same_slot, pc.greater(stored_b, table.column("b")))
            table = table.filter(pc.invert(beaten))
        # Apply in time order: whether a late update is within the grace period then depends
        # only on the table times of earlier micro-batches, not on how keys sort.
        table = table.take(
            pc.sort_indices(table, sort_keys=[("t", "ascending"), ("k", "ascending")])
        )
        store.put_batch(table.column("k"), table.column("v"), table.column("t"))

    def _lookup(self, store: Any, rows: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import decode_rows, encode_rows

        ok = pc.fill_null(_all_valid(rows, [*self.keys, _TIME]), False)
        as_of = pc.if_else(ok, rows.column(_TIME), 0)
        found = store.get_batch(encode_rows(rows, self.keys), as_of=as_of)
        value = pc.if_else(ok, found.column("value"), pa.scalar(None, pa.binary()))
        valid_from = pc.if_else(ok, found.column("timestamp"), pa.scalar(None, pa.int64()))
        valid_to = pc.if_else(ok, found.column("valid_to"), pa.scalar(None, pa.int64()))
        columns = [rows.column(c) for c in self.stream_cols]
        if self.values:
            schema = pa.schema([rows.schema.field(c) for c in self._stored_columns()])
            decoded = decode_rows(value, schema)
            columns += [decoded.column(c) for c in self.values]
        out = pa.RecordBatch.from_arrays([*columns, valid_from, valid_to], names=self.out_names)
        if self.inner:
            out = out.filter(pc.is_valid(value))
        return out


def _one_batch(table: Any) -> Any:
    import pyarrow as pa

    chunks = table.combine_chunks().to_batches()
    if len(chunks) == 1:
        return chunks[0]
    if not chunks:
        return pa.RecordBatch.from_arrays(
            [pa.array([], type=f.type) for f in table.schema], schema=table.schema
        )
    raise ValueError(TOO_LARGE)


TOO_LARGE = (
    "a partition's micro-batch holds more than 2 GiB in one column: use more partitions "
    "(num_partitions) or smaller micro-batches (maxOffsetsPerTrigger / maxFilesPerTrigger)"
)


def _all_valid(batch: Any, columns: list[str]) -> Any:
    import pyarrow.compute as pc

    ok = pc.is_valid(batch.column(columns[0]))
    for c in columns[1:]:
        ok = pc.and_(ok, pc.is_valid(batch.column(c)))
    return ok


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _epoch_ms(field: Any, arg: str) -> tuple[Any, bool]:
    """``(epoch-ms long column, is_timestamp)`` for a time column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(field.dataType, T.TimestampType):
        return F.unix_millis(_col(field.name)), True
    if isinstance(field.dataType, T.LongType | T.IntegerType | T.ShortType | T.ByteType):
        return _col(field.name).cast("long"), False
    raise TypeError(
        f"{arg} column {field.name!r} must be a timestamp or an integer (epoch ms), "
        f"got {field.dataType.simpleString()}"
    )
