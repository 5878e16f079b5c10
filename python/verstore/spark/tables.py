"""Versioned tables on Structured Streaming: latest-by-timestamp tables and table-table joins.

A *versioned table* is a stream of updates ``(key, time, value | delete)`` whose state is, for
each key, the version with the largest time: an update older than the key's newest version
must not override it. KIP-914 defines what the operators of Kafka Streams do with such a table,
and the store's ``put`` return code is what tells them apart: ``VALID_TO_UNDEFINED`` (-1) means
the update became the key's newest version, so it changes the table and is forwarded; any other
valid-to means it was out of order and only rewrote history, so it is not forwarded (and an
aggregation or a table-table join ignores it); ``NOT_PUT`` means it was older than the grace
period and was dropped.

Both helpers run in partition mode (``_runtime``): per micro-batch and partition, the updates
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
from verstore.spark import _args as A
from verstore.spark import _kernels as K
from verstore.spark._metrics import TaskMetrics
from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark._spill import SORT_KEY, ExternalSorter

CHANGE = "change"
UPSERT, DELETE = "upsert", "delete"
OUT_OF_ORDER, EXPIRED = "out_of_order", "expired"
PREVIOUS_PREFIX = "previous_"

_TS = "__vs_ts"
_SIDE = "__vs_side"
_LEFT, _RIGHT = "__vs_left", "__vs_right"

# --- latest_by_timestamp -------------------------------------------------------------------------


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
    * The store and ``num_partitions`` are fixed for the life of the query's checkpoint.

    Args:
        updates: The streaming DataFrame of updates.
        key: Key column(s).
        time_col: The update's time (valid-from): a timestamp or integer epoch-ms column.
        value_cols: Value columns; default every column but ``key``, ``time_col`` and
            ``deletes``.
        deletes: A boolean column: true writes a tombstone (the row's values are ignored).
        history_retention: History kept behind the partition's stream time, also the grace
            period for late updates: ``"7 days"``-style text, an int in ms or a timedelta.
        emit: ``"changes"``, ``"latest"`` or ``"all"`` (above).
        store: The store's name under the checkpoint root.
        num_partitions: Partitions of the store; default ``spark.sql.shuffle.partitions``.
        previous: Also output ``previous_<value column>`` for every value column.

    Returns:
        A streaming DataFrame: the key columns, ``time_col``, the value columns, ``change``
        (``"upsert"`` / ``"delete"``, or also ``"out_of_order"`` / ``"expired"`` with
        ``emit="all"``) and with ``previous=True`` the ``previous_`` value columns.

    Raises:
        ValueError: Unknown or repeated columns, an output name clash, a bad ``emit``,
            ``store``, ``num_partitions`` or ``history_retention``.
        TypeError: A time column that is neither a timestamp nor an integer, or a ``deletes``
            column that is not boolean.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    key_cols = A.column_names(key, "key")
    if not key_cols:
        raise ValueError("key must name at least one column")
    if emit not in ("changes", "latest", "all"):
        raise ValueError(f"emit must be 'changes', 'latest' or 'all', got {emit!r}")
    A.check_store_name(store)
    retention_ms = A.parse_duration_ms(history_retention, name="history_retention")
    schema = {f.name: f for f in updates.schema.fields}
    A.require_columns(schema, [*key_cols, time_col, *([deletes] if deletes else [])], "updates")
    special = {*key_cols, time_col, *([deletes] if deletes else [])}
    if value_cols is None:
        values = [c for c in schema if c not in special]
    else:
        values = A.column_names(value_cols, "value_cols")
        A.require_columns(schema, values, "updates")
        overlap = [c for c in values if c in special]
        if overlap:
            raise ValueError(f"value_cols must not repeat key, time or deletes columns: {overlap}")
    if deletes is not None and not isinstance(schema[deletes].dataType, T.BooleanType):
        raise TypeError(
            f"deletes column {deletes!r} must be boolean, got "
            f"{schema[deletes].dataType.simpleString()}"
        )
    time_ms, _ = A.epoch_ms(schema[time_col], "time_col")
    n = A.num_partitions(updates, num_partitions)

    prev_names = [PREVIOUS_PREFIX + c for c in values] if previous else []
    out_names = [*key_cols, time_col, *values, CHANGE, *prev_names]
    A.check_unique(out_names, "latest_by_timestamp")
    value_schema = A.arrow_schema([schema[c] for c in values])
    layout = A.column_layout(A.arrow_schema([schema[c] for c in key_cols]), value_schema)
    out_schema = T.StructType(
        [
            *[schema[c] for c in key_cols],
            schema[time_col],
            *[T.StructField(c, schema[c].dataType, True) for c in values],
            T.StructField(CHANGE, T.StringType(), False),
            *[
                T.StructField(p, schema[c].dataType, True)
                for p, c in zip(prev_names, values if previous else [], strict=True)
            ],
        ]
    )
    valid = F.lit(True)
    for c in key_cols:
        valid = valid & A.col(c).isNotNull()
    prepared = updates.select(
        *[A.col(c) for c in dict.fromkeys([*key_cols, time_col, *values])],
        *([A.col(deletes)] if deletes else []),
        time_ms.alias(_TS),
    ).where(valid & F.col(_TS).isNotNull() & (F.col(_TS) >= 0))
    fn = _LatestPartition(
        store=store,
        keys=key_cols,
        time_col=time_col,
        values=values,
        deletes=deletes,
        emit=emit,
        previous=previous,
        out_names=out_names,
        value_schema=value_schema,
    )
    return map_partitions_with_stores(
        prepared,
        keys=key_cols,
        num_partitions=n,
        stores={store: StoreSpec(history_retention_ms=retention_ms, columns=layout)},
        fn=fn,
        schema=out_schema,
    )


# Columns of the compact rows a latest_by_timestamp sort holds: encoded key, time, deleted flag,
# encoded value (null for a delete), the chunk of a latest-candidate and the value before it.
_K, _T, _D, _V, _CHUNK, _BEFORE = "k", "t", "d", "v", "chunk", "before"


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
    value_schema: Any  # pyarrow.Schema of the value columns

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> Iterator[Any]:
        store = ctx.store(self.store)
        updates = ExternalSorter(ctx.spill, share=0.4)
        for batch in batches:
            if batch.num_rows:
                updates.add(self._compact(batch))
        if self.emit != "latest":
            for chunk in K.whole_runs(updates.chunks(), [_T, _K]):
                yield self._changes(store, chunk, ctx.metrics)
            return
        # emit="latest": each chunk's last change per key is a candidate; a key's row is its
        # last candidate, with the value from before its first (the value before the batch).
        candidates = ExternalSorter(ctx.spill, share=0.2)
        for i, chunk in enumerate(K.whole_runs(updates.chunks(), [_T, _K])):
            candidates.add(self._latest_candidates(store, chunk, i, ctx.metrics))
        for chunk in K.whole_runs(candidates.chunks(), [_K]):
            yield self._latest(chunk)

    def _compact(self, batch: Any) -> Any:
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
            [*batch.columns, deleted], names=[*batch.schema.names, _D]
        )
        values = K.encode(batch, self.values)
        columns = {
            SORT_KEY: K.encode(flagged, [_TS, *self.keys, _D, *self.values]),
            _K: K.encode(batch, self.keys),
            _T: batch.column(_TS),
            _D: deleted,
            _V: pc.if_else(deleted, pa.scalar(None, pa.binary()), values),
        }
        for i, c in enumerate([*self.keys, self.time_col]):
            columns[f"o{i}"] = batch.column(c)
        return pa.RecordBatch.from_pydict(columns)

    def _apply(self, store: Any, chunk: Any, metrics: TaskMetrics) -> tuple[Any, Any, Any, Any]:
        """Puts a chunk's winners in (time, key) order; returns them in (key, time) order with
        their put return codes, the group start of each row's key, and the newest value of each
        before the chunk (when needed)."""
        import pyarrow as pa

        runs = K.run_starts([chunk.column(_T), chunk.column(_K)])
        winners = chunk.filter(pa.array(K.run_ends(runs)))
        need_before = self.previous or self.emit == "latest"
        before = store.get_batch(winners.column(_K)).column("value") if need_before else None
        codes = K.put_in_order(store, winners.column(_K), winners.column(_V), winners.column(_T))
        metrics.expired(codes)
        order = K.sort_indices({"k": winners.column(_K), "t": winners.column(_T)}, ["k", "t"])
        winners = winners.take(order)
        codes = codes[order]
        before = before.take(order) if before is not None else None
        first = K.group_start(K.run_starts([winners.column(_K)]))
        return winners, codes, first, before

    def _output(self, rows: Any, change: Any, prev: Any) -> Any:
        import pyarrow as pa

        columns = [rows.column(f"o{i}") for i in range(len(self.keys) + 1)]
        if self.values:
            columns += K.decode(rows.column(_V), self.value_schema).columns
        columns.append(pa.array(change, pa.string()))
        if self.previous and self.values:
            columns += K.decode(prev, self.value_schema).columns
        return pa.RecordBatch.from_arrays(columns, names=self.out_names)

    def _changes(self, store: Any, chunk: Any, metrics: TaskMetrics) -> Any:
        """emit="changes" / "all": a row per change (per applied update) of the chunk."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        winners, codes, first, before = self._apply(store, chunk, metrics)
        latest = codes == -1
        sel = np.ones(len(codes), dtype=bool) if self.emit == "all" else latest
        prev = None
        if self.previous:
            last = K.last_before(latest, first)
            v = winners.column(_V)
            prev = pc.if_else(pa.array(last >= 0), v.take(np.maximum(last, 0)), before)
            if self.emit == "all":
                prev = pc.if_else(pa.array(latest), prev, pa.scalar(None, pa.binary()))
            prev = prev.filter(pa.array(sel))
        deleted = winners.column(_D).to_numpy(zero_copy_only=False)
        change = np.where(deleted[sel], DELETE, UPSERT).astype(object)
        if self.emit == "all":
            c = codes[sel]
            change[c == NOT_PUT] = EXPIRED
            change[(c != -1) & (c != NOT_PUT)] = OUT_OF_ORDER
        return self._output(winners.filter(pa.array(sel)), change, prev)

    def _latest_candidates(self, store: Any, chunk: Any, index: int, metrics: TaskMetrics) -> Any:
        """The chunk's last change of each key, with the key's newest value before the chunk,
        sorted by (key, chunk)."""
        import numpy as np
        import pyarrow as pa

        winners, codes, first, before = self._apply(store, chunk, metrics)
        latest = codes == -1
        idx = np.arange(len(codes))
        last_latest = np.maximum.accumulate(np.where(latest, idx, -1))
        sel = pa.array(latest & (last_latest[K.group_end(first)] == idx))
        rows = winners.filter(sel)
        chunk_index = pa.array(np.full(rows.num_rows, index, dtype=np.int64))
        keyed = pa.RecordBatch.from_arrays([rows.column(_K), chunk_index], names=[_K, _CHUNK])
        out = {
            SORT_KEY: K.encode(keyed, [_K, _CHUNK]),
            _K: rows.column(_K),
            _D: rows.column(_D),
            _V: rows.column(_V),
            _BEFORE: before.filter(sel),
        }
        for i in range(len(self.keys) + 1):
            out[f"o{i}"] = rows.column(f"o{i}")
        return pa.RecordBatch.from_pydict(out)

    def _latest(self, candidates: Any) -> Any:
        """A key's last candidate, with the value before its first: its newest version after
        the batch, and its newest value before the batch."""
        import numpy as np
        import pyarrow as pa

        starts = K.run_starts([candidates.column(_K)])
        ends = K.run_ends(starts)
        rows = candidates.filter(pa.array(ends))
        prev = candidates.column(_BEFORE).take(pa.array(K.group_start(starts)[ends]))
        deleted = rows.column(_D).to_numpy(zero_copy_only=False)
        change = np.where(deleted, DELETE, UPSERT).astype(object)
        return self._output(rows, change, prev)


# --- versioned_table_join ------------------------------------------------------------------------


def versioned_table_join(
    left_updates: Any,
    right_updates: Any,
    *,
    on: str | Sequence[str],
    left_time: str,
    right_time: str,
    how: str = "inner",
    history_retention: str | int | timedelta = "7 days",
    num_partitions: int | None = None,
    store: str = "table_join",
    lookup: str = "latest",
) -> Any:
    """Joins two versioned tables given as update streams: the join's change stream.

    Each side is a versioned table (key = ``on``, time = ``left_time`` / ``right_time``,
    value = the side's other columns) kept in its own store, ``<store>_left`` and
    ``<store>_right``. When an update becomes the newest version of its side's key (``put``
    returns -1), the join of it with the other side's version is emitted; an out-of-order
    update only rewrites its side's history and emits nothing, and an update older than the
    grace period is dropped (KIP-914: table-table joins produce no new result for out-of-order
    updates).

    The other side's version joined with an update at time ``t``:

    * ``lookup="latest"`` (default): the other side's newest version, whatever its time:
      Kafka's table-table join (KIP-914 keeps ``get(key)`` there). The newest result of a key
      is then always the join of both sides' newest versions.
    * ``lookup="as_of"``: the other side's version valid at ``t`` (the newest one with time
      <= ``t``), so every result joins the two versions valid at one instant, the update's
      time; a key's last result may then pair a newest version with an older one.

    Semantics and limits:

    * ``how="inner"`` emits only when the other side has a version; ``"left"`` also emits
      left updates without one (right columns null) and drops right updates without one;
      ``"outer"`` emits every in-order update, with the missing side's columns null.
    * Results are emitted, never revised: an update only sees the other side's updates of
      earlier micro-batches and those processed before it in its own. Within a micro-batch,
      updates are processed in time order, the left update before the right one at equal
      times; a result for a key can therefore come before the other side's late-arriving
      history it would have matched.
    * Equal (key, time) updates of one side in one micro-batch collapse to one winner, the
      largest encoded value bytes; a later micro-batch replaces the version at that time.
    * Times are milliseconds: timestamps are truncated to ms; integer time columns are epoch
      ms. Updates with a null key column, a null time or a time before the epoch are ignored.
    * Key columns of the right side are cast to the left side's types when they differ.
    * Expiry is per side and partition: an update older than its side's largest time minus
      ``history_retention`` is dropped, and an as-of lookup older than the other side's
      horizon only finds that side's newest version, if at or before ``t``.
    * The stores and ``num_partitions`` are fixed for the life of the query's checkpoint.

    Args:
        left_updates: The left table's update stream.
        right_updates: The right table's update stream.
        on: Key column(s), present in both.
        left_time: The left updates' time column (timestamp or integer epoch ms).
        right_time: The right updates' time column (timestamp or integer epoch ms).
        how: ``"inner"``, ``"left"`` or ``"outer"``.
        history_retention: History kept per side, also the grace period for late updates.
        num_partitions: Partitions of the stores; default ``spark.sql.shuffle.partitions``.
        store: Prefix of the two stores' names.
        lookup: ``"as_of"`` or ``"latest"`` (above).

    Returns:
        A streaming DataFrame: the ``on`` columns, the left side's other columns (including
        ``left_time``), then the right side's; a name present on both sides is prefixed with
        ``left_`` / ``right_``.

    Raises:
        ValueError: Unknown columns, a bad ``how``, ``lookup``, ``store``, ``num_partitions``
            or ``history_retention``, or an output name clash.
        TypeError: A time column that is neither a timestamp nor an integer.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    on_cols = A.column_names(on, "on")
    if not on_cols:
        raise ValueError("on must name at least one key column")
    if how not in ("inner", "left", "outer"):
        raise ValueError(f"how must be 'inner', 'left' or 'outer', got {how!r}")
    if lookup not in ("as_of", "latest"):
        raise ValueError(f"lookup must be 'as_of' or 'latest', got {lookup!r}")
    A.check_store_name(store)
    retention_ms = A.parse_duration_ms(history_retention, name="history_retention")
    l_schema = {f.name: f for f in left_updates.schema.fields}
    r_schema = {f.name: f for f in right_updates.schema.fields}
    A.require_columns(l_schema, [*on_cols, left_time], "left_updates")
    A.require_columns(r_schema, [*on_cols, right_time], "right_updates")
    l_ms, _ = A.epoch_ms(l_schema[left_time], "left_time")
    r_ms, _ = A.epoch_ms(r_schema[right_time], "right_time")
    n = A.num_partitions(left_updates, num_partitions)

    l_cols = [c for c in l_schema if c not in on_cols]
    r_cols = [c for c in r_schema if c not in on_cols]
    both = set(l_cols) & set(r_cols)
    l_out = [f"left_{c}" if c in both else c for c in l_cols]
    r_out = [f"right_{c}" if c in both else c for c in r_cols]
    out_names = [*on_cols, *l_out, *r_out]
    A.check_unique(out_names, "versioned_table_join")

    l_struct = T.StructType([l_schema[c] for c in l_cols])
    r_struct = T.StructType([r_schema[c] for c in r_cols])
    keys = [f"__vs_k{i}" for i in range(len(on_cols))]
    user_keys = A.arrow_schema([l_schema[c] for c in on_cols])
    key_schema = A.arrow_schema([l_schema[c] for c in on_cols], keys)
    value_schemas = (
        A.arrow_schema([l_schema[c] for c in l_cols]),
        A.arrow_schema([r_schema[c] for c in r_cols]),
    )

    def side(df: Any, schema: dict[str, Any], cols: list[str], t: Any, tag: int) -> Any:
        valid = F.lit(True)
        for c in on_cols:
            valid = valid & A.col(c).isNotNull()
        own = F.struct(*[A.col(c) for c in cols])
        none_l, none_r = F.lit(None).cast(l_struct), F.lit(None).cast(r_struct)
        return df.select(
            *[
                A.col(c).cast(l_schema[c].dataType).alias(k)
                if schema[c].dataType != l_schema[c].dataType
                else A.col(c).alias(k)
                for c, k in zip(on_cols, keys, strict=True)
            ],
            F.lit(tag).cast("byte").alias(_SIDE),
            t.alias(_TS),
            (own if tag == 0 else none_l).alias(_LEFT),
            (own if tag == 1 else none_r).alias(_RIGHT),
        ).where(valid & F.col(_TS).isNotNull() & (F.col(_TS) >= 0))

    tagged = side(left_updates, l_schema, l_cols, l_ms, 0).unionByName(
        side(right_updates, r_schema, r_cols, r_ms, 1)
    )
    out_schema = T.StructType(
        [
            *[T.StructField(c, l_schema[c].dataType, True) for c in on_cols],
            *[
                T.StructField(o, l_schema[c].dataType, True)
                for o, c in zip(l_out, l_cols, strict=True)
            ],
            *[
                T.StructField(o, r_schema[c].dataType, True)
                for o, c in zip(r_out, r_cols, strict=True)
            ],
        ]
    )
    fn = _JoinPartition(
        stores=(f"{store}_left", f"{store}_right"),
        keys=keys,
        how=how,
        lookup=lookup,
        out_names=out_names,
        key_schema=key_schema,
        value_schemas=value_schemas,
    )
    specs = {
        name: StoreSpec(retention_ms, columns=A.column_layout(user_keys, values))
        for name, values in zip(fn.stores, value_schemas, strict=True)
    }
    return map_partitions_with_stores(
        tagged, keys=keys, num_partitions=n, stores=specs, fn=fn, schema=out_schema
    )


# Columns of the compact rows a versioned_table_join sort holds (besides _K, _T, _V).
_S = "s"


@dataclass(frozen=True, kw_only=True)
class _JoinPartition:
    """The partition function of :func:`versioned_table_join`.

    Both sides' updates are processed in one canonical order, (time, side, key), a chunk at a
    time: each chunk's updates are applied (per side, in (time, key) order) after looking up
    the other side's versions from before the chunk; the other side's versions processed
    earlier in the chunk are found in the chunk itself.
    """

    stores: tuple[str, str]
    keys: list[str]
    how: str
    lookup: str
    out_names: list[str]
    key_schema: Any  # pyarrow.Schema of the key columns (internal names)
    value_schemas: tuple[Any, Any]  # pyarrow.Schema of each side's value columns

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        stores = (ctx.store(self.stores[0]), ctx.store(self.stores[1]))
        updates = ExternalSorter(ctx.spill, share=0.4)
        for batch in batches:
            for s, column in enumerate((_LEFT, _RIGHT)):
                part = batch.filter(pc.equal(batch.column(_SIDE), s))
                if part.num_rows:
                    updates.add(self._compact(part, column, s))
        for chunk in K.whole_runs(updates.chunks(), [_T, _S, _K]):
            yield self._join(stores, chunk, ctx.metrics)

    def _compact(self, part: Any, column: str, side: int) -> Any:
        """(sort key, k, t, s, v): the sort key orders by (time, side, key, value), so a run of
        equal (time, side, key) ends with its winner, the largest value."""
        import numpy as np
        import pyarrow as pa

        struct = part.column(column)
        own = pa.RecordBatch.from_arrays(struct.flatten(), schema=pa.schema(list(struct.type)))
        v = K.encode(own, [f.name for f in struct.type])
        s = pa.array(np.full(part.num_rows, side, dtype=np.int8))
        keyed = pa.RecordBatch.from_arrays(
            [part.column(_TS), s, *[part.column(c) for c in self.keys], v],
            names=[_TS, _S, *self.keys, _V],
        )
        return pa.RecordBatch.from_pydict(
            {
                SORT_KEY: K.encode(keyed, [_TS, _S, *self.keys, _V]),
                _K: K.encode(part, self.keys),
                _T: part.column(_TS),
                _S: s,
                _V: v,
            }
        )

    def _join(self, stores: tuple[Any, Any], chunk: Any, metrics: TaskMetrics) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        # Per side: the winner of each (key, time), in (time, key) order.
        runs = K.run_starts([chunk.column(_T), chunk.column(_S), chunk.column(_K)])
        winners = chunk.filter(pa.array(K.run_ends(runs)))
        tags = winners.column(_S).to_numpy()
        sides = [winners.filter(pa.array(tags == s)) for s in (0, 1)]

        # The other side's version before the chunk, then this chunk's puts.
        before = []
        for s, rows in enumerate(sides):
            times = rows.column(_T) if self.lookup == "as_of" else None
            found = stores[1 - s].get_batch(rows.column(_K), as_of=times)
            before.append((found.column("value"), found.column("timestamp")))
        codes = [
            K.put_in_order(stores[s], rows.column(_K), rows.column(_V), rows.column(_T))
            for s, rows in enumerate(sides)
        ]

        # Both sides in processing order per key: (key, time, side), left first at equal times.
        k = pa.concat_arrays([sides[0].column(_K), sides[1].column(_K)])
        t = np.concatenate([sides[0].column(_T).to_numpy(), sides[1].column(_T).to_numpy()])
        v = pa.concat_arrays([sides[0].column(_V), sides[1].column(_V)])
        side = np.concatenate(
            [np.zeros(sides[0].num_rows, np.int8), np.ones(sides[1].num_rows, np.int8)]
        )
        code = np.concatenate(codes)
        metrics.expired(code)
        pre_v = pa.concat_arrays([before[0][0], before[1][0]])
        pre_t = pa.concat_arrays([before[0][1], before[1][1]])
        order = K.sort_indices({"k": k, "t": t, "s": side}, ["k", "t", "s"])
        k, t, v, side, code = k.take(order), t[order], v.take(order), side[order], code[order]
        pre_v, pre_t = pre_v.take(order), pre_t.take(order)
        first = K.group_start(K.run_starts([k]))

        # The other side's version in this chunk, processed before the row, if any.
        seen = code != NOT_PUT if self.lookup == "as_of" else code == -1
        last = [K.last_before(seen & (side == s), first) for s in (0, 1)]
        other = np.where(side == 0, last[1], last[0])
        in_chunk = other >= 0
        if self.lookup == "as_of":
            # a stored version at a later time than the in-chunk one is the one valid at t
            stored_t = pc.fill_null(pre_t, -1).to_numpy()
            in_chunk &= t[np.maximum(other, 0)] >= stored_t
        other_v = pc.if_else(pa.array(in_chunk), v.take(np.maximum(other, 0)), pre_v)

        found = pc.is_valid(other_v).to_numpy(zero_copy_only=False)
        sel = code == -1
        if self.how == "inner":
            sel &= found
        elif self.how == "left":
            sel &= found | (side == 0)
        mask = pa.array(sel)
        is_left = pa.array(side == 0).filter(mask)
        own, oth = v.filter(mask), other_v.filter(mask)
        left_v = pc.if_else(is_left, own, oth)
        right_v = pc.if_else(is_left, oth, own)
        columns = K.decode(k.filter(mask), self.key_schema).columns
        for encoded, schema in zip((left_v, right_v), self.value_schemas, strict=True):
            if len(schema):
                columns += K.decode(encoded, schema).columns
        return pa.RecordBatch.from_arrays(columns, names=self.out_names)
