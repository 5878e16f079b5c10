"""Latest-by-timestamp tables on Structured Streaming: a versioned table's change stream.

A *versioned table* is a stream of updates ``(key, time, value | delete)`` whose state is, for
each key, the version with the largest time: an update older than the key's newest version
must not override it. KIP-914 defines what the operators of Kafka Streams do with such a table,
and the store's ``put`` return code is what tells them apart: ``VALID_TO_UNDEFINED`` (-1) means
the update became the key's newest version, so it changes the table and is forwarded; any other
valid-to means it was out of order and only rewrote history, so it is not forwarded (and an
aggregation or a table-table join ignores it); ``NOT_PUT`` means it was older than the grace
period and was dropped.

The helper runs in partition mode (``_runtime``): per micro-batch and partition, the updates
are applied in their canonical order a chunk at a time (one ``get_batch`` before and one
``put_batch`` per chunk), then vectorized bookkeeping over whole Arrow columns (no Python code
per key or row). Keys and values are stored in verstore's tuple encoding and decoded back to
typed columns for the output. A micro-batch larger than the task's memory budget is sorted and
buffered on local disk (``_spill``).

Determinism (exactly-once rests on it, see ``docs/spark.md``): Spark gives no order within a
micro-batch, so every batch is processed in a defined order:

* Updates of equal (key, time) in one micro-batch collapse to one winner: a delete wins over
  values, and among values the largest encoded value bytes (the value columns' natural order,
  column by column, nulls first) win. Across micro-batches a later update at the same time
  replaces the stored one (Kafka's rule).
* Updates are applied in time order (then key order): a batch's updates can then only expire
  (``NOT_PUT``) against the stream time of earlier micro-batches, never because a later update
  of another key happened to be applied first. Chunks of that order hold whole (time, key)
  runs, so chunking changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from verstore._core import NOT_PUT
from verstore.checkpoint.values import ValueCodec
from verstore.spark import _args as arguments
from verstore.spark import _kernels as kernels
from verstore.spark._metrics import TaskMetrics
from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark._spill import SORT_KEY, ExternalSorter

CHANGE = "change"
UPSERT, DELETE = "upsert", "delete"
OUT_OF_ORDER, EXPIRED = "out_of_order", "expired"
PREVIOUS_PREFIX = "previous_"

_TIME_MS = "__vs_ts"


def latest_by_timestamp(
    updates: Any,
    *,
    key: str | Sequence[str],
    time_col: str,
    value_cols: Sequence[str] | None = None,
    deletes: str | None = None,
    history_retention: str | int | timedelta = "7 days",
    emit: str = "changes",
    store: str = "latest",
    num_partitions: int | None = None,
    previous: bool = False,
    latest_ttl: str | int | timedelta | None = None,
) -> Any:
    """A latest-by-timestamp table from a stream of updates: its change stream.

    Every update is written to a versioned store (``store``, partitioned by ``key``). An update
    that becomes its key's newest version changes the table and is emitted; an out-of-order
    update (older than the key's newest version, KIP-914) only rewrites the key's history and
    emits nothing; an update older than the grace period (``history_retention`` behind the
    partition's largest time seen) is dropped.

    Aggregating the changes gives a table aggregation with KIP-914 semantics: with
    ``previous=True`` each change carries the value it replaced, so a count per value is
    ``+1`` for the new value and ``-1`` for the previous one, and late updates never count.

    Semantics and limits:

    * ``emit="changes"``: one row per update that became its key's newest version, in time
      order per key. ``emit="latest"``: per micro-batch at most one row per key, its newest
      version after the batch if the batch changed it (for upsert sinks); ``previous`` is
      then the newest value before the batch. ``emit="all"``: every update applied, with
      ``change`` ``"out_of_order"`` or ``"expired"`` for those that did not change the table
      (their ``previous`` columns are null).
    * ``previous`` of a change is the key's newest value just before it: the preceding change
      of the key in the same micro-batch, else the newest value stored before the batch; null
      when the key had none (unknown, or deleted).
    * A delete becomes a tombstone version; its change row has ``change="delete"`` and null
      value columns. A delete of a key without a current value is still emitted (it is the
      key's newest version now and bounds later out-of-order updates).
    * Times are milliseconds: timestamps are truncated to ms (``unix_millis``); integer time
      columns are read as epoch ms. Updates with a null key column, a null time or a time
      before the epoch are ignored (Kafka drops null keys and negative timestamps).
    * Equal (key, time) updates of one micro-batch: one winner (module docstring); a later
      micro-batch replaces the version at the same time, and if that is the newest version the
      replacement is a change (even with an equal value).
    * The store is the query's for the life of its checkpoint; ``num_partitions`` changes only
      through :func:`verstore.spark.repartition_store`, with the query stopped.
    * ``latest_ttl``: a key whose newest version is older than the partition's stream time
      minus the TTL is gone from the table (docs/spark.md, "State that ends"), in event time,
      so a replay gives the same output. No row is emitted for an expiry; an update after
      the key expired has ``previous`` null (the key starts a new history), and so does an
      update more than the TTL after its predecessor; an update that is its key's newest but
      already expired on arrival (older than the stream time minus the TTL) changes nothing
      (``"out_of_order"`` with ``emit="all"``). The store's disk and key count then stay
      bounded by the keys updated within the TTL. A query keeps the TTL it started with.

    Args:
        updates: The streaming DataFrame of updates.
        key: Key column(s).
        time_col: The update's time (valid-from): a timestamp or integer epoch-ms column.
        value_cols: Value columns; default every column but ``key``, ``time_col`` and
            ``deletes``.
        deletes: A boolean column: true writes a tombstone (the row's values are ignored).
        history_retention: History kept behind the partition's stream time, also the grace
            period for late updates: a duration (``"7 days"``, ``"30m"``, ms or a timedelta;
            docs/spark.md, Durations).
        emit: ``"changes"``, ``"latest"`` or ``"all"`` (above).
        store: The store's name under the checkpoint root.
        num_partitions: Partitions of the store; default ``spark.sql.shuffle.partitions``.
        previous: Also output ``previous_<value column>`` for every value column.
        latest_ttl: How long a key stays in the table after its newest update, in event time
            (``"30 days"``-style text, an int in ms or a timedelta, >= 1 ms); None: forever.

    Returns:
        A streaming DataFrame: the key columns, ``time_col``, the value columns, ``change``
        (``"upsert"`` / ``"delete"``, or also ``"out_of_order"`` / ``"expired"`` with
        ``emit="all"``) and with ``previous=True`` the ``previous_`` value columns.

    Raises:
        ValueError: Unknown or repeated columns, an output name clash, a bad ``emit``,
            ``store``, ``num_partitions``, ``history_retention`` or ``latest_ttl``.
        TypeError: A time column that is neither a timestamp nor an integer, or a ``deletes``
            column that is not boolean.
    """
    key_cols = arguments.column_names(key, "key")
    if not key_cols:
        raise ValueError("key must name at least one column")
    if emit not in ("changes", "latest", "all"):
        raise ValueError(f"emit must be 'changes', 'latest' or 'all', got {emit!r}")
    arguments.check_store_name(store)
    retention_ms = arguments.parse_duration_ms(history_retention, name="history_retention")
    ttl_ms = arguments.parse_ttl_ms(latest_ttl)
    schema = arguments.fields_by_name(updates)
    values = _value_columns(schema, key_cols, time_col, value_cols, deletes)
    time_ms, _ = arguments.epoch_ms(schema[time_col], "time_col")
    partitions = arguments.num_partitions(updates, num_partitions)
    prev_names = [PREVIOUS_PREFIX + c for c in values] if previous else []
    out_names = [*key_cols, time_col, *values, CHANGE, *prev_names]
    arguments.check_unique(out_names, "latest_by_timestamp")
    value_schema = arguments.arrow_schema([schema[c] for c in values])
    layout = arguments.column_layout(
        arguments.arrow_schema([schema[c] for c in key_cols]), value_schema
    )
    prepared = updates.select(
        *[arguments.col(c) for c in dict.fromkeys([*key_cols, time_col, *values])],
        *([arguments.col(deletes)] if deletes else []),
        time_ms.alias(_TIME_MS),
    ).where(arguments.storable(key_cols, _TIME_MS))
    fn = _LatestPartition(
        store=store,
        keys=key_cols,
        time_col=time_col,
        values=values,
        deletes=deletes,
        emit=emit,
        previous=previous,
        out_names=out_names,
        latest_ttl_ms=ttl_ms,
    )
    spec = StoreSpec(history_retention_ms=retention_ms, columns=layout, latest_ttl_ms=ttl_ms)
    return map_partitions_with_stores(
        prepared,
        keys=key_cols,
        num_partitions=partitions,
        stores={store: spec},
        fn=fn,
        schema=_output_schema(schema, key_cols, time_col, values, prev_names),
    )


def _value_columns(
    schema: dict[str, Any],
    key_cols: list[str],
    time_col: str,
    value_cols: Sequence[str] | None,
    deletes: str | None,
) -> list[str]:
    """The value columns (by default every column that is not key, time or deletes), once the
    columns named are known to exist and ``deletes`` to be boolean."""
    from pyspark.sql import types as T

    special = [*key_cols, time_col, *([deletes] if deletes else [])]
    arguments.require_columns(schema, special, "updates")
    if value_cols is None:
        values = [c for c in schema if c not in special]
    else:
        values = arguments.column_names(value_cols, "value_cols")
        arguments.require_columns(schema, values, "updates")
        overlap = [c for c in values if c in special]
        if overlap:
            raise ValueError(f"value_cols must not repeat key, time or deletes columns: {overlap}")
    if deletes is not None and not isinstance(schema[deletes].dataType, T.BooleanType):
        raise TypeError(
            f"deletes column {deletes!r} must be boolean, got "
            f"{schema[deletes].dataType.simpleString()}"
        )
    return values


def _output_schema(
    schema: dict[str, Any],
    key_cols: list[str],
    time_col: str,
    values: list[str],
    prev_names: list[str],
) -> Any:
    """Keys and time as the input has them, the values and ``previous_`` values nullable,
    ``change`` not."""
    from pyspark.sql import types as T

    return T.StructType(
        [
            *[schema[c] for c in key_cols],
            schema[time_col],
            *[T.StructField(c, schema[c].dataType, True) for c in values],
            T.StructField(CHANGE, T.StringType(), False),
            *[
                T.StructField(p, schema[c].dataType, True)
                for p, c in zip(prev_names, values[: len(prev_names)], strict=True)
            ],
        ]
    )


# Columns of the compact rows a latest_by_timestamp sort holds: encoded key, time, deleted flag,
# encoded value (null for a delete), the chunk of a latest-candidate and the value before it.
_ROW_KEY, _ROW_TIME, _ROW_DELETED, _ROW_VALUE = "k", "t", "d", "v"
_ROW_CHUNK, _ROW_BEFORE = "chunk", "before"


@dataclass(frozen=True, kw_only=True)
class _LatestPartition:
    """The partition function of :func:`latest_by_timestamp` (picklable, no driver state)."""

    store: str
    keys: list[str]
    time_col: str
    values: list[str]
    deletes: str | None
    emit: str
    previous: bool
    out_names: list[str]
    latest_ttl_ms: int | None = None

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> Iterator[Any]:
        store, codec = ctx.store(self.store), ctx.codec(self.store)
        updates = ExternalSorter(ctx.spill, share=0.4)
        for batch in batches:
            if batch.num_rows:
                updates.add(self._compact(batch, codec))
        if self.emit != "latest":
            for chunk in kernels.whole_runs(updates.chunks(), [_ROW_TIME, _ROW_KEY]):
                yield self._changes(store, codec, chunk, ctx.metrics)
            return
        # emit="latest": each chunk's last change per key is a candidate; a key's row is its
        # last candidate, with the value from before its first (the value before the batch).
        candidates = ExternalSorter(ctx.spill, share=0.2)
        for i, chunk in enumerate(kernels.whole_runs(updates.chunks(), [_ROW_TIME, _ROW_KEY])):
            candidates.add(self._latest_candidates(store, chunk, i, ctx.metrics))
        for chunk in kernels.whole_runs(candidates.chunks(), [_ROW_KEY]):
            yield self._latest(codec, chunk)

    def _compact(self, batch: Any, codec: ValueCodec) -> Any:
        """(sort key, k, t, d, v, the output's key and time columns), ordered by the sort key
        = (time, key, deleted, value): runs of equal (time, key) end with their winner (a delete
        beats values, then the largest value)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.deletes is None:
            deleted = pa.array(np.zeros(batch.num_rows, dtype=bool))
        else:
            deleted = pc.fill_null(batch.column(self.deletes), False)
        flagged = pa.RecordBatch.from_arrays(
            [*batch.columns, deleted], names=[*batch.schema.names, _ROW_DELETED]
        )
        values = codec.encode(batch, self.values)
        columns = {
            SORT_KEY: kernels.encode(flagged, [_TIME_MS, *self.keys, _ROW_DELETED, *self.values]),
            _ROW_KEY: kernels.encode(batch, self.keys),
            _ROW_TIME: batch.column(_TIME_MS),
            _ROW_DELETED: deleted,
            _ROW_VALUE: pc.if_else(deleted, pa.scalar(None, pa.binary()), values),
        }
        for i, c in enumerate([*self.keys, self.time_col]):
            columns[f"o{i}"] = batch.column(c)
        return pa.RecordBatch.from_pydict(columns)

    def _apply(self, store: Any, chunk: Any, metrics: TaskMetrics) -> tuple[Any, Any, Any, Any]:
        """Puts a chunk's winners in (time, key) order; returns them in (key, time) order with
        their put return codes, the group start of each row's key, and the newest value of each
        before the chunk (when needed)."""
        import pyarrow as pa

        runs = kernels.run_starts([chunk.column(_ROW_TIME), chunk.column(_ROW_KEY)])
        winners = chunk.filter(pa.array(kernels.run_ends(runs)))
        need_before = self.previous or self.emit == "latest"
        if self.latest_ttl_ms is not None:
            codes, before = self._put_with_ttl(store, winners)
        else:
            before = (
                store.get_batch(winners.column(_ROW_KEY)).column("value") if need_before else None
            )
            codes = kernels.put_in_order(
                store,
                winners.column(_ROW_KEY),
                winners.column(_ROW_VALUE),
                winners.column(_ROW_TIME),
            )
        metrics.expired(codes)
        order = kernels.sort_indices(
            {"k": winners.column(_ROW_KEY), "t": winners.column(_ROW_TIME)}, ["k", "t"]
        )
        winners = winners.take(order)
        codes = codes[order]
        before = before.take(order) if before is not None else None
        first = kernels.group_start(kernels.run_starts([winners.column(_ROW_KEY)]))
        return winners, codes, first, before

    def _put_with_ttl(self, store: Any, winners: Any) -> tuple[Any, Any]:
        """With a TTL: puts the winners, and gives each its previous value: its key's newest
        version just before its write (``put_batch_with_previous``), while that version lived
        at the winner's time (stream time may not have reached the time yet, so the store's
        own end of it may still be open)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        assert self.latest_ttl_ms is not None
        times = winners.column(_ROW_TIME)
        codes, found = store.put_batch_with_previous(
            winners.column(_ROW_KEY), winners.column(_ROW_VALUE), times
        )
        staleness = pc.subtract(times, found.column("timestamp"))
        lived = pc.less_equal(staleness, arguments.ttl_staleness_ms(self.latest_ttl_ms))
        none = pa.scalar(None, pa.binary())
        return codes.to_numpy(), pc.if_else(pc.fill_null(lived, False), found.column("value"), none)

    def _output(self, codec: ValueCodec, rows: Any, change: Any, prev: Any) -> Any:
        import pyarrow as pa

        columns = [rows.column(f"o{i}") for i in range(len(self.keys) + 1)]
        if self.values:
            columns += codec.decode(rows.column(_ROW_VALUE)).columns
        columns.append(pa.array(change, pa.string()))
        if self.previous and self.values:
            columns += codec.decode(prev).columns
        return pa.RecordBatch.from_arrays(columns, names=self.out_names)

    def _changes(self, store: Any, codec: ValueCodec, chunk: Any, metrics: TaskMetrics) -> Any:
        """emit="changes" / "all": a row per change (per applied update) of the chunk."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        winners, codes, first, before = self._apply(store, chunk, metrics)
        latest = codes == -1
        sel = np.ones(len(codes), dtype=bool) if self.emit == "all" else latest
        prev = None
        if self.previous:
            if self.latest_ttl_ms is None:
                last = kernels.last_before(latest, first)
                v = winners.column(_ROW_VALUE)
                prev = pc.if_else(pa.array(last >= 0), v.take(np.maximum(last, 0)), before)
            else:
                prev = before  # each row's own previous value (_put_with_ttl)
            if self.emit == "all":
                prev = pc.if_else(pa.array(latest), prev, pa.scalar(None, pa.binary()))
            prev = prev.filter(pa.array(sel))
        deleted = winners.column(_ROW_DELETED).to_numpy(zero_copy_only=False)
        change = np.where(deleted[sel], DELETE, UPSERT).astype(object)
        if self.emit == "all":
            c = codes[sel]
            change[c == NOT_PUT] = EXPIRED
            change[(c != -1) & (c != NOT_PUT)] = OUT_OF_ORDER
        return self._output(codec, winners.filter(pa.array(sel)), change, prev)

    def _latest_candidates(self, store: Any, chunk: Any, index: int, metrics: TaskMetrics) -> Any:
        """The chunk's last change of each key, with the key's newest value before the chunk,
        sorted by (key, chunk)."""
        import numpy as np
        import pyarrow as pa

        winners, codes, first, before = self._apply(store, chunk, metrics)
        latest = codes == -1
        idx = np.arange(len(codes))
        last_latest = np.maximum.accumulate(np.where(latest, idx, -1))
        sel = pa.array(latest & (last_latest[kernels.group_end(first)] == idx))
        if self.latest_ttl_ms is not None:
            # The value before the key's first change here, not before its last.
            upto = np.minimum.accumulate(np.where(latest, idx, len(idx))[::-1])[::-1]
            first_change = upto[first]
            before = before.take(pa.array(np.minimum(first_change, len(idx) - 1)))
        rows = winners.filter(sel)
        chunk_index = pa.array(np.full(rows.num_rows, index, dtype=np.int64))
        keyed = pa.RecordBatch.from_arrays(
            [rows.column(_ROW_KEY), chunk_index], names=[_ROW_KEY, _ROW_CHUNK]
        )
        out = {
            SORT_KEY: kernels.encode(keyed, [_ROW_KEY, _ROW_CHUNK]),
            _ROW_KEY: rows.column(_ROW_KEY),
            _ROW_DELETED: rows.column(_ROW_DELETED),
            _ROW_VALUE: rows.column(_ROW_VALUE),
            _ROW_BEFORE: before.filter(sel),
        }
        for i in range(len(self.keys) + 1):
            out[f"o{i}"] = rows.column(f"o{i}")
        return pa.RecordBatch.from_pydict(out)

    def _latest(self, codec: ValueCodec, candidates: Any) -> Any:
        """A key's last candidate, with the value before its first: its newest version after
        the batch, and its newest value before the batch."""
        import numpy as np
        import pyarrow as pa

        starts = kernels.run_starts([candidates.column(_ROW_KEY)])
        ends = kernels.run_ends(starts)
        rows = candidates.filter(pa.array(ends))
        prev = candidates.column(_ROW_BEFORE).take(pa.array(kernels.group_start(starts)[ends]))
        deleted = rows.column(_ROW_DELETED).to_numpy(zero_copy_only=False)
        change = np.where(deleted, DELETE, UPSERT).astype(object)
        return self._output(codec, rows, change, prev)


__all__ = [
    "CHANGE",
    "DELETE",
    "EXPIRED",
    "OUT_OF_ORDER",
    "PREVIOUS_PREFIX",
    "UPSERT",
    "latest_by_timestamp",
]
