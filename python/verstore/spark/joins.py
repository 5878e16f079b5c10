"""Stream-table as-of (temporal) join over a versioned store.

Spark has no streaming as-of join: ``_joinAsOf`` and SQL ``ASOF JOIN`` refuse a streaming
right side, and a stream-static join sees only the table's current snapshot. :func:`asof_join`
keeps every partition's table history in a verstore partition store, so that each stream row is
joined with the table version that was valid *at the row's event time*, however late the row
or the table update arrives.

Per micro-batch and partition (partition mode, see ``_runtime``):

1. The batch's table updates are applied to the store: key = the ``on`` columns, value = the
   ``table_values`` columns (and tie-breakers), both in verstore's tuple encoding, timestamp =
   ``table_time`` in epoch milliseconds. Updates are applied in a canonical order, by (time,
   key, tie-breaker, value), so equal (key, time) pairs have a defined winner and expiry
   depends only on earlier micro-batches, whatever order Spark delivers rows in (exactly-once
   rests on this). The sort spills to local disk past the task's memory budget.
2. Every stream row of the batch is looked up with ``get_batch(keys, as_of=times)``, a chunk
   at a time.

Both steps are batch calls on whole Arrow columns; no Python code runs per row. The encoding
of an input chunk's table rows, the puts of a sorted chunk's winners and the lookups of a chunk
of stream rows are one call each of the Rust kernel (``rust/asof.rs``, GIL released); the sort
between them is :class:`ExternalSorter`'s, in bounded memory. With tie-breakers, the check
against stored versions decodes them in Python (through the store's value codec, which reads
every recorded layout) before the puts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from verstore.checkpoint.values import ValueCodec
from verstore.spark import _args as arguments
from verstore.spark import _kernels as kernels
from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark._spill import READ_ROWS, SORT_KEY, ExternalSorter, RowBuffer

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
    tolerance: str | int | timedelta | None = None,
    allow_exact_matches: bool = True,
    latest_ttl: str | int | timedelta | None = None,
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
    * ``tolerance`` (pandas ``merge_asof``, polars ``join_asof``): a version that took effect
      more than this long before the stream row does not match it (the row is unmatched).
      ``allow_exact_matches=False``: only versions that took effect strictly before the
      row's time match (at millisecond resolution).
    * The store (``store``, in the checkpoint root set by :func:`verstore.spark.configure`)
      is the query's for the life of its checkpoint: use a distinct ``store`` name for each
      as-of join of one checkpoint root. ``num_partitions`` changes only through
      :func:`verstore.spark.repartition_store`, with the query stopped.

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
            updates): a duration (``"7 days"``, ``"30m"``, ``"PT12H"``, an int in ms or a
            ``timedelta``; docs/spark.md, Durations).
        num_partitions: Partitions of the store; default ``spark.sql.shuffle.partitions``.
        tie_breaker: Table column(s) that order updates of equal (key, time): largest wins.
        store: The store's name under the checkpoint root.
        tolerance: The largest staleness of a match, a duration (``"5 minutes"``, an int in
            ms or a ``timedelta``); None (default) for any.
        allow_exact_matches: Whether a version that took effect at exactly the row's time
            matches (default True, as in ``merge_asof``).
        latest_ttl: How long a table key stays after its newest update, in event time
            (docs/spark.md, "State that ends"; text, ms or a timedelta, >= 1 ms); None:
            forever. A version then matches only stream rows within the TTL of its time (as a
            ``tolerance`` below the TTL would, and with one: the smaller wins), and the
            store's state stays bounded by the keys updated within the TTL. A query keeps the
            TTL it started with.

    Returns:
        A streaming DataFrame: the stream's columns, the ``table_values`` columns, and
        ``table_valid_from`` / ``table_valid_to`` (the matched version's validity interval,
        of ``table_time``'s type: timestamp, or long ms; ``table_valid_to`` is null while the
        version is the newest one, and is as known when the row is emitted).

    Raises:
        ValueError: Unknown columns, an output column name clash, a bad ``how``,
            ``num_partitions``, ``store``, ``history_retention``, ``tolerance`` or
            ``latest_ttl``.
        TypeError: A time column that is neither a timestamp nor an integer.
    """
    on_cols, tie_cols = _check_asof_arguments(on, tie_breaker, how, allow_exact_matches, store)
    retention_ms = arguments.parse_duration_ms(history_retention, name="history_retention")
    tolerance_ms = (
        None if tolerance is None else arguments.parse_duration_ms(tolerance, name="tolerance")
    )
    ttl_ms = arguments.parse_ttl_ms(latest_ttl)
    if ttl_ms is not None:
        # Stream rows past a version's end must not match it, also while the table's stream
        # time has not reached that end yet.
        lives = arguments.ttl_staleness_ms(ttl_ms)
        tolerance_ms = lives if tolerance_ms is None else min(tolerance_ms, lives)
    stream_fields = arguments.fields_by_name(stream)
    table_fields = arguments.fields_by_name(table_updates)
    arguments.require_columns(stream_fields, [*on_cols, stream_time], "stream")
    arguments.require_columns(table_fields, [*on_cols, table_time, *tie_cols], "table_updates")
    if table_values is None:
        value_cols = [c for c in table_fields if c not in on_cols and c != table_time]
    else:
        value_cols = arguments.column_names(table_values, "table_values")
        arguments.require_columns(table_fields, value_cols, "table_updates")
    columns = _AsofColumns(on_cols, stream_fields, table_fields, stream_time, value_cols, tie_cols)
    out_names = columns.out_names()
    arguments.check_unique(out_names, "asof_join")
    stream_ms, _ = arguments.epoch_ms(stream_fields[stream_time], "stream_time")
    table_ms, time_is_timestamp = arguments.epoch_ms(table_fields[table_time], "table_time")
    partitions = arguments.num_partitions(stream, num_partitions)
    tagged = columns.stream_side(stream, stream_ms).unionByName(
        columns.table_side(table_updates, table_ms), allowMissingColumns=True
    )
    layout = columns.layout()
    fn = _AsofPartition(
        store=store,
        keys=columns.keys,
        stream_cols=columns.stream_names(),
        values=columns.value_names(),
        tie_breakers=columns.tie_breaker_names(),
        out_names=out_names,
        inner=how == "inner",
        tolerance_ms=tolerance_ms,
        strict=not allow_exact_matches,
    )
    joined = map_partitions_with_stores(
        tagged,
        keys=columns.keys,
        num_partitions=partitions,
        stores={
            store: StoreSpec(
                history_retention_ms=retention_ms, columns=layout, latest_ttl_ms=ttl_ms
            )
        },
        fn=fn,
        schema=columns.out_schema(),
    )
    return _valid_times_as_timestamps(joined, out_names) if time_is_timestamp else joined


def _check_asof_arguments(
    on: str | Sequence[str],
    tie_breaker: str | Sequence[str] | None,
    how: str,
    allow_exact_matches: bool,
    store: str,
) -> tuple[list[str], list[str]]:
    """The key and tie-breaker columns, once the other arguments are known to be good."""
    on_cols = arguments.column_names(on, "on")
    if not on_cols:
        raise ValueError("on must name at least one key column")
    tie_cols = arguments.column_names(tie_breaker, "tie_breaker") if tie_breaker is not None else []
    if how not in ("left", "inner"):
        raise ValueError(f"how must be 'left' or 'inner', got {how!r}")
    if not isinstance(allow_exact_matches, bool):
        raise TypeError(f"allow_exact_matches must be a bool, got {allow_exact_matches!r}")
    arguments.check_store_name(store)
    return on_cols, tie_cols


def _valid_times_as_timestamps(joined: Any, out_names: list[str]) -> Any:
    """The join with ``table_valid_from`` / ``table_valid_to`` as timestamps (the table's time
    column is one), not epoch ms."""
    from pyspark.sql import functions as F

    return joined.select(
        *[arguments.col(c) for c in out_names[:-2]],
        F.timestamp_millis(arguments.col(VALID_FROM)).alias(VALID_FROM),
        F.timestamp_millis(arguments.col(VALID_TO)).alias(VALID_TO),
    )


@dataclass(frozen=True)
class _AsofColumns:
    """The columns of an as-of join: the inputs' (Spark fields by name), the names they have
    between the shuffle and the partition function, and the output's."""

    on: list[str]
    stream: dict[str, Any]
    table: dict[str, Any]
    stream_time: str
    values: list[str]
    tie_breakers: list[str]

    @property
    def keys(self) -> list[str]:
        return [f"__vs_k{i}" for i in range(len(self.on))]

    def shared(self) -> dict[str, str]:
        """A stream column that is a key column, or the time column when it already is epoch
        ms (a long), is shuffled once: the partition function outputs the key or time column
        for it. Stream column -> the column shuffled for it."""
        from pyspark.sql import types as T

        same_as = dict(zip(self.on, self.keys, strict=True))
        if isinstance(self.stream[self.stream_time].dataType, T.LongType):
            same_as.setdefault(self.stream_time, _TIME)
        return same_as

    def stream_names(self) -> list[str]:
        shared = self.shared()
        return [shared.get(c, f"__vs_s{i}") for i, c in enumerate(self.stream)]

    def value_names(self) -> list[str]:
        return [f"__vs_v{i}" for i in range(len(self.values))]

    def tie_breaker_names(self) -> list[str]:
        return [f"__vs_b{i}" for i in range(len(self.tie_breakers))]

    def out_names(self) -> list[str]:
        return [*self.stream, *self.values, VALID_FROM, VALID_TO]

    def stream_side(self, stream: Any, time_ms: Any) -> Any:
        from pyspark.sql import functions as F

        shared = self.shared()
        return stream.select(
            F.lit(_STREAM).cast("byte").alias(_SIDE),
            *[arguments.col(c).alias(k) for c, k in zip(self.on, self.keys, strict=True)],
            time_ms.alias(_TIME),
            *[
                arguments.col(c).alias(name)
                for c, name in zip(self.stream, self.stream_names(), strict=True)
                if c not in shared
            ],
        )

    def table_side(self, table_updates: Any, time_ms: Any) -> Any:
        """The table's rows, keys cast to the stream's key types."""
        from pyspark.sql import functions as F

        stored = zip([*self.values, *self.tie_breakers], self.stored_names(), strict=True)
        return table_updates.select(
            F.lit(_TABLE).cast("byte").alias(_SIDE),
            *arguments.keys_as(self.on, self.keys, self.table, self.stream),
            time_ms.alias(_TIME),
            *[arguments.col(c).alias(name) for c, name in stored],
        )

    def stored_names(self) -> list[str]:
        return [*self.value_names(), *self.tie_breaker_names()]

    def out_schema(self) -> Any:
        from pyspark.sql import types as T

        return T.StructType(
            [
                *self.stream.values(),
                *[T.StructField(c, self.table[c].dataType, True) for c in self.values],
                T.StructField(VALID_FROM, T.LongType(), True),
                T.StructField(VALID_TO, T.LongType(), True),
            ]
        )

    def layout(self) -> Any:
        """The store's recorded layout: the stream's key types, the stored table columns."""
        stored = [self.table[c] for c in [*self.values, *self.tie_breakers]]
        return arguments.column_layout(
            arguments.arrow_schema([self.stream[c] for c in self.on]),
            arguments.arrow_schema(stored),
        )


# Columns of the compact update rows the sort holds: encoded key, time, encoded stored value,
# encoded tie-breakers (a fraction of the input's size for wide tables).
_ROW_KEY, _ROW_TIME, _ROW_VALUE, _ROW_TIE_BREAKER = "k", "t", "v", "b"


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
    tolerance_ms: int | None = None
    strict: bool = False
    #: Stream rows per ``get_batch`` at most (the store reads each distinct key once a call).
    lookup_rows: int = READ_ROWS * 4

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        store, codec = ctx.store(self.store), ctx.codec(self.store)
        # Every table update of the batch is applied before any lookup: updates go to a
        # sort (in the canonical order), stream rows wait in a buffer.
        updates = ExternalSorter(ctx.spill, share=0.4)
        lookups = RowBuffer(ctx.spill, share=0.2)
        for batch in batches:
            updates.add(self._compact(batch, codec))
            stream_rows = batch.filter(pc.equal(batch.column(_SIDE), _STREAM))
            if stream_rows.num_rows:
                lookups.add(stream_rows.select(self._lookup_columns()))
        for chunk in kernels.whole_runs(updates.chunks(), [_ROW_TIME, _ROW_KEY]):
            ctx.metrics.expired(self._apply(store, codec, chunk))
        # Whole chunks per get_batch: the store reads each distinct key once per call.
        for rows in lookups.chunks(self.lookup_rows):
            yield self._lookup(store, codec, rows)

    def _lookup_columns(self) -> list[str]:
        """The columns a lookup needs, each once (a stream column may be a key or the time)."""
        return list(dict.fromkeys([*self.keys, _TIME, *self.stream_cols]))

    def _stored_columns(self) -> list[str]:
        return [*self.values, *self.tie_breakers]

    def _row_names(self) -> list[str]:
        names = [SORT_KEY, _ROW_KEY, _ROW_TIME, _ROW_VALUE]
        return [*names, _ROW_TIE_BREAKER] if self.tie_breakers else names

    def _compact(self, batch: Any, codec: ValueCodec) -> Any:
        """The table rows of ``batch`` that can be stored, as (sort key, k, t, v, b): the sort
        key orders by (time, key, tie-breaker, value), whose runs of equal (time, key) end
        with the winner. One call of the Rust kernel (``rust/asof.rs``)."""
        from verstore._core import asof_compact

        return asof_compact(
            batch,
            side=_SIDE,
            table_side=_TABLE,
            keys=self.keys,
            time=_TIME,
            tie_breakers=self.tie_breakers,
            values=self.values,
            value_prefix=codec.prefix,
            names=self._row_names(),
        )

    def _apply(self, store: Any, codec: ValueCodec, chunk: Any) -> Any:
        """Applies a chunk of updates sorted by the sort key, whose (time, key) runs are whole;
        returns the put return codes."""
        if not self.tie_breakers:
            from verstore._core import asof_apply

            k, t, v = (chunk.column(c) for c in (_ROW_KEY, _ROW_TIME, _ROW_VALUE))
            return asof_apply(store, k, t, v)
        return _apply_with_tie_breakers(self, store, codec, chunk)

    def _lookup(self, store: Any, codec: ValueCodec, rows: Any) -> Any:
        from verstore._core import asof_lookup

        found = asof_lookup(
            store,
            rows,
            keys=self.keys,
            time=_TIME,
            strict=self.strict,
            tolerance_ms=self.tolerance_ms,
        )
        return self._output(codec, rows, *found.columns)

    def _output(
        self, codec: ValueCodec, rows: Any, value: Any, valid_from: Any, valid_to: Any
    ) -> Any:
        """The output rows: the stream's columns, the matched version's values and validity
        (all null where unmatched; without them, with ``inner``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        columns = [rows.column(c) for c in self.stream_cols]
        if self.values:
            decoded = codec.decode(value).rename_columns(self._stored_columns())
            columns += [decoded.column(c) for c in self.values]
        out = pa.RecordBatch.from_arrays([*columns, valid_from, valid_to], names=self.out_names)
        if self.inner:
            out = out.filter(pc.is_valid(value))
        return out


def _winners(chunk: Any) -> Any:
    """The last row of each run of equal (time, key) of a sorted chunk."""
    import pyarrow as pa

    k, t = chunk.column(_ROW_KEY), chunk.column(_ROW_TIME)
    return chunk.filter(pa.array(kernels.run_ends(kernels.run_starts([t, k]))))


def _apply_with_tie_breakers(fn: _AsofPartition, store: Any, codec: ValueCodec, chunk: Any) -> Any:
    """``_apply`` with tie-breakers: an update loses to a stored version at the same time with
    a larger tie-breaker (its stored value decoded by ``codec``, whatever layout wrote it)."""
    import pyarrow.compute as pc

    winners = _winners(chunk)
    k, t = winners.column(_ROW_KEY), winners.column(_ROW_TIME)
    existing = store.get_batch(k, as_of=t)
    stored = codec.decode(existing.column("value")).rename_columns(fn._stored_columns())
    stored_b = kernels.encode(stored, fn.tie_breakers)
    same_slot = pc.fill_null(pc.equal(existing.column("timestamp"), t), False)
    beaten = pc.and_(same_slot, pc.greater(stored_b, winners.column(_ROW_TIE_BREAKER)))
    winners = winners.filter(pc.invert(pc.fill_null(beaten, False)))
    return store.put_batch(
        winners.column(_ROW_KEY), winners.column(_ROW_VALUE), winners.column(_ROW_TIME)
    )
