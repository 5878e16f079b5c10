"""Versioned tables on Structured Streaming: latest-by-timestamp tables and table-table joins.

A *versioned table* is a stream of updates ``(key, time, value | delete)`` whose state is, for
each key, the version with the largest time: an update older than the key's newest version
must not override it. KIP-914 defines what the operators of Kafka Streams do with such a table,
and the store's ``put`` return code is what tells them apart: ``VALID_TO_UNDEFINED`` (-1) means
the update became the key's newest version, so it changes the table and is forwarded; any other
valid-to means it was out of order and only rewrote history, so it is not forwarded (and an
aggregation or a table-table join ignores it); ``NOT_PUT`` means it was older than the grace
period and was dropped.

Both helpers run in partition mode (``_runtime``): per micro-batch and partition, one batch
``get_batch`` before and one ``put_batch``, then vectorized bookkeeping over whole Arrow
columns (no Python code per key or row). Keys and values are encoded to bytes in Rust
(arrow-row format) and decoded back to typed columns for the output.

Determinism (exactly-once rests on it, see ``docs/spark.md``): Spark gives no order within a
micro-batch, so every batch is processed in a defined order:

* Updates of equal (key, time) in one micro-batch collapse to one winner: a delete wins over
  values, and among values the largest encoded value bytes (the value columns' natural order,
  column by column, nulls first) win. Across micro-batches a later update at the same time
  replaces the stored one (Kafka's rule).
* Updates are applied in time order (then key order): a batch's updates can then only expire
  (``NOT_PUT``) against the stream time of earlier micro-batches, never because a later update
  of another key happened to be applied first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from verstore._core import NOT_PUT
from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark._util import column_names, parse_duration_ms, require_columns

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

    key_cols = column_names(key, "key")
    if not key_cols:
        raise ValueError("key must name at least one column")
    if emit not in ("changes", "latest", "all"):
        raise ValueError(f"emit must be 'changes', 'latest' or 'all', got {emit!r}")
    _check_store_name(store)
    retention_ms = parse_duration_ms(history_retention, name="history_retention")
    schema = {f.name: f for f in updates.schema.fields}
    require_columns(schema, [*key_cols, time_col, *([deletes] if deletes else [])], "updates")
    special = {*key_cols, time_col, *([deletes] if deletes else [])}
    if value_cols is None:
        values = [c for c in schema if c not in special]
    else:
        values = column_names(value_cols, "value_cols")
        require_columns(schema, values, "updates")
        overlap = [c for c in values if c in special]
        if overlap:
            raise ValueError(f"value_cols must not repeat key, time or deletes columns: {overlap}")
    if deletes is not None and not isinstance(schema[deletes].dataType, T.BooleanType):
        raise TypeError(
            f"deletes column {deletes!r} must be boolean, got "
            f"{schema[deletes].dataType.simpleString()}"
        )
    time_ms = _epoch_ms(schema[time_col], "time_col")
    n = _partitions(updates, num_partitions)

    prev_names = [PREVIOUS_PREFIX + c for c in values] if previous else []
    out_names = [*key_cols, time_col, *values, CHANGE, *prev_names]
    _check_unique(out_names, "latest_by_timestamp")
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
        valid = valid & _col(c).isNotNull()
    prepared = updates.select(
        *[_col(c) for c in dict.fromkeys([*key_cols, time_col, *values])],
        *([_col(deletes)] if deletes else []),
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
    )
    return map_partitions_with_stores(
        prepared,
        keys=key_cols,
        num_partitions=n,
        stores={store: StoreSpec(history_retention_ms=retention_ms)},
        fn=fn,
        schema=out_schema,
    )


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

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> list[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import encode_rows

        data = _one_batch(batches)
        if data is None:
            return []
        store = ctx.store(self.store)
        n = data.num_rows
        keys = encode_rows(data, self.keys)
        ts = data.column(_TS).to_numpy()
        if self.deletes is None:
            deleted = np.zeros(n, dtype=bool)
        else:
            deleted = pc.fill_null(data.column(self.deletes), False).to_numpy(zero_copy_only=False)
        values = _encode_values(data, self.values)
        values = pc.if_else(pa.array(deleted), pa.scalar(None, pa.binary()), values)

        # The winner of each (key, time): sort by (key, time, delete, value), keep the last.
        winners = _winners({"k": keys, "t": ts, "d": pa.array(deleted), "v": values})
        k, t, v, d = keys.take(winners), ts[winners], values.take(winners), deleted[winners]
        m = len(winners)
        group_start = _group_start(_run_starts(k, None))

        need_before = self.previous or self.emit == "latest"
        before = store.get_batch(k).column("value") if need_before else None
        codes = _put_time_ordered(store, k, v, t)

        latest = codes == -1
        idx = np.arange(m)
        if self.emit == "latest":
            last_latest = np.maximum.accumulate(np.where(latest, idx, -1))
            group_end = _group_end(group_start)
            sel = latest & (last_latest[group_end] == idx)
            prev = before
        else:
            sel = np.ones(m, dtype=bool) if self.emit == "all" else latest
            prev = None
            if self.previous:
                assert before is not None
                last = _last_before(latest, group_start)
                prev = pc.if_else(pa.array(last >= 0), v.take(np.maximum(last, 0)), before)
                if self.emit == "all":
                    prev = pc.if_else(pa.array(latest), prev, pa.scalar(None, pa.binary()))

        rows = winners[sel]
        change = np.where(d[sel], DELETE, UPSERT).astype(object)
        if self.emit == "all":
            c = codes[sel]
            change[c == NOT_PUT] = EXPIRED
            change[(c != -1) & (c != NOT_PUT)] = OUT_OF_ORDER
        columns = [data.column(c).take(rows) for c in self.keys]
        columns.append(data.column(self.time_col).take(rows))
        value_schema = _nullable_schema(data.schema, self.values)
        if self.values:
            decoded = _decode(v.filter(pa.array(sel)), value_schema)
            columns += decoded.columns
        columns.append(pa.array(change, pa.string()))
        if self.previous and self.values:
            assert prev is not None
            columns += _decode(prev.filter(pa.array(sel)), value_schema).columns
        return [pa.RecordBatch.from_arrays(columns, names=self.out_names)]


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

    on_cols = column_names(on, "on")
    if not on_cols:
        raise ValueError("on must name at least one key column")
    if how not in ("inner", "left", "outer"):
        raise ValueError(f"how must be 'inner', 'left' or 'outer', got {how!r}")
    if lookup not in ("as_of", "latest"):
        raise ValueError(f"lookup must be 'as_of' or 'latest', got {lookup!r}")
    _check_store_name(store)
    retention_ms = parse_duration_ms(history_retention, name="history_retention")
    l_schema = {f.name: f for f in left_updates.schema.fields}
    r_schema = {f.name: f for f in right_updates.schema.fields}
    require_columns(l_schema, [*on_cols, left_time], "left_updates")
    require_columns(r_schema, [*on_cols, right_time], "right_updates")
    l_ms = _epoch_ms(l_schema[left_time], "left_time")
    r_ms = _epoch_ms(r_schema[right_time], "right_time")
    n = _partitions(left_updates, num_partitions)

    l_cols = [c for c in l_schema if c not in on_cols]
    r_cols = [c for c in r_schema if c not in on_cols]
    both = set(l_cols) & set(r_cols)
    l_out = [f"left_{c}" if c in both else c for c in l_cols]
    r_out = [f"right_{c}" if c in both else c for c in r_cols]
    out_names = [*on_cols, *l_out, *r_out]
    _check_unique(out_names, "versioned_table_join")

    l_struct = T.StructType([l_schema[c] for c in l_cols])
    r_struct = T.StructType([r_schema[c] for c in r_cols])
    keys = [f"__vs_k{i}" for i in range(len(on_cols))]

    def side(df: Any, schema: dict[str, Any], cols: list[str], t: Any, tag: int) -> Any:
        valid = F.lit(True)
        for c in on_cols:
            valid = valid & _col(c).isNotNull()
        own = F.struct(*[_col(c) for c in cols])
        none_l, none_r = F.lit(None).cast(l_struct), F.lit(None).cast(r_struct)
        return df.select(
            *[
                _col(c).cast(l_schema[c].dataType).alias(k)
                if schema[c].dataType != l_schema[c].dataType
                else _col(c).alias(k)
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
        n_left=len(l_cols),
    )
    spec = StoreSpec(history_retention_ms=retention_ms)
    return map_partitions_with_stores(
        tagged,
        keys=keys,
        num_partitions=n,
        stores={f"{store}_left": spec, f"{store}_right": spec},
        fn=fn,
        schema=out_schema,
    )


@dataclass(frozen=True, kw_only=True)
class _JoinPartition:
    """The partition function of :func:`versioned_table_join`."""

    stores: tuple[str, str]
    keys: list[str]
    how: str
    lookup: str
    out_names: list[str]
    n_left: int

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> list[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import encode_rows

        data = _one_batch(batches)
        if data is None:
            return []
        stores = [ctx.store(s) for s in self.stores]
        key_schema = _nullable_schema(data.schema, self.keys)
        value_schemas = [
            pa.schema([f.with_nullable(True) for f in data.schema.field(c).type])
            for c in (_LEFT, _RIGHT)
        ]

        # Per side: the winner of each (key, time), sorted by (key, time).
        sides = []
        tags = data.column(_SIDE).to_numpy()
        for s, column in enumerate((_LEFT, _RIGHT)):
            part = data.filter(pa.array(tags == s))
            k = encode_rows(part, self.keys)
            t = part.column(_TS).to_numpy()
            struct = part.column(column)
            v = _encode_values(
                pa.RecordBatch.from_arrays(struct.flatten(), schema=pa.schema(list(struct.type))),
                [f.name for f in struct.type],
            )
            winners = _winners({"k": k, "t": t, "v": v})
            sides.append((k.take(winners), t[winners], v.take(winners)))

        # The other side's version before the batch, then this batch's puts.
        before = []
        for s, (k, t, _) in enumerate(sides):
            other = stores[1 - s]
            found = other.get_batch(k, as_of=t if self.lookup == "as_of" else None)
            before.append((found.column("value"), found.column("timestamp")))
        codes = [_put_time_ordered(stores[s], k, v, t) for s, (k, t, v) in enumerate(sides)]

        # Both sides in processing order per key: (key, time, side), left first at equal times.
        k = pa.concat_arrays([sides[0][0], sides[1][0]])
        t = np.concatenate([sides[0][1], sides[1][1]])
        v = pa.concat_arrays([sides[0][2], sides[1][2]])
        side = np.concatenate(
            [np.zeros(len(sides[0][1]), np.int8), np.ones(len(sides[1][1]), np.int8)]
        )
        code = np.concatenate(codes)
        pre_v = pa.concat_arrays([before[0][0], before[1][0]])
        pre_t = pa.concat_arrays([before[0][1], before[1][1]])
        order = _sort({"k": k, "t": t, "s": side}, ["k", "t", "s"])
        k, t, v, side, code = k.take(order), t[order], v.take(order), side[order], code[order]
        pre_v, pre_t = pre_v.take(order), pre_t.take(order)
        group_start = _group_start(_run_starts(k, None))

        # The other side's version in this batch, processed before the row, if any.
        seen = code != NOT_PUT if self.lookup == "as_of" else code == -1
        last = [_last_before(seen & (side == s), group_start) for s in (0, 1)]
        other = np.where(side == 0, last[1], last[0])
        in_batch = other >= 0
        if self.lookup == "as_of":
            # a stored version at a later time than the in-batch one is the one valid at t
            stored_t = pc.fill_null(pre_t, -1).to_numpy()
            in_batch &= t[np.maximum(other, 0)] >= stored_t
        other_v = pc.if_else(pa.array(in_batch), v.take(np.maximum(other, 0)), pre_v)

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
        columns = _decode(k.filter(mask), key_schema).columns
        for encoded, schema in ((left_v, value_schemas[0]), (right_v, value_schemas[1])):
            if len(schema):
                columns += _decode(encoded, schema).columns
        return [pa.RecordBatch.from_arrays(columns, names=self.out_names)]


# --- shared vectorized helpers -------------------------------------------------------------------


def _one_batch(batches: Iterator[Any]) -> Any:
    """All of the partition's input as one RecordBatch, or None when there is none."""
    import pyarrow as pa

    received = [b for b in batches if b.num_rows]
    if not received:
        return None
    chunks = pa.Table.from_batches(received).combine_chunks().to_batches()
    if len(chunks) != 1:
        from verstore.spark.joins import TOO_LARGE

        raise ValueError(TOO_LARGE)
    return chunks[0]


def _encode_values(batch: Any, columns: list[str]) -> Any:
    import pyarrow as pa

    from verstore._core import encode_rows

    if not columns:  # arrow-row needs a column: every version stores the same empty value
        return pa.repeat(pa.scalar(b"", pa.binary()), batch.num_rows)
    return encode_rows(batch, columns)


def _decode(encoded: Any, schema: Any) -> Any:
    from verstore._core import decode_rows

    return decode_rows(encoded, schema)


def _nullable_schema(schema: Any, columns: list[str]) -> Any:
    import pyarrow as pa

    return pa.schema([schema.field(c).with_nullable(True) for c in columns])


def _sort(columns: dict[str, Any], by: list[str]) -> Any:
    """Indices that sort the aligned columns by ``by`` (ascending, nulls last), as numpy."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table(columns)
    return pc.sort_indices(table, sort_keys=[(c, "ascending") for c in by]).to_numpy()


def _winners(columns: dict[str, Any]) -> Any:
    """The winner of each (key ``k``, time ``t``) run: indices of the rows that sort last by all
    ``columns`` (in their order) within their run, in (key, time) order."""
    import numpy as np

    order = _sort(columns, list(columns))
    if not len(order):
        return order
    starts = _run_starts(columns["k"].take(order), columns["t"][order])
    return order[np.append(starts[1:], True)]


def _run_starts(keys: Any, times: Any) -> Any:
    """For rows sorted by key (and time): true where a new key (or (key, time)) run starts."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(keys)
    starts = np.ones(n, dtype=bool)
    if n > 1:
        differ = pc.not_equal(keys.slice(1), keys.slice(0, n - 1))
        starts[1:] = differ.to_numpy(zero_copy_only=False)
        if times is not None:
            starts[1:] |= times[1:] != times[:-1]
    return starts


def _group_start(starts: Any) -> Any:
    """For each row, the index of the first row of its group."""
    import numpy as np

    idx = np.arange(len(starts))
    return np.maximum.accumulate(np.where(starts, idx, 0)) if len(starts) else idx


def _group_end(group_start: Any) -> Any:
    """For each row, the index of the last row of its group."""
    import numpy as np

    n = len(group_start)
    starts = np.flatnonzero(np.append(True, group_start[1:] != group_start[:-1]))
    ends = np.append(starts[1:] - 1, n - 1)
    return ends[np.searchsorted(starts, group_start)]


def _last_before(flags: Any, group_start: Any) -> Any:
    """For each row i, the largest j < i of i's group with ``flags[j]``, else -1."""
    import numpy as np

    n = len(flags)
    upto = np.maximum.accumulate(np.where(flags, np.arange(n), -1)) if n else flags
    before = np.concatenate([[-1], upto[:-1]]) if n else np.zeros(0, dtype=np.int64)
    return np.where(before >= group_start, before, -1)


def _put_time_ordered(store: Any, keys: Any, values: Any, times: Any) -> Any:
    """``put_batch`` in (time, key) order for rows sorted by (key, time); the return codes in
    the rows' order."""
    import numpy as np

    order = np.argsort(times, kind="stable")  # stable: key order within equal times
    returned = store.put_batch(keys.take(order), values.take(order), times[order])
    codes = np.empty(len(order), dtype=np.int64)
    codes[order] = returned.to_numpy()
    return codes


# --- argument helpers ----------------------------------------------------------------------------


def _check_unique(names: list[str], what: str) -> None:
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise ValueError(f"{what} output would have duplicate columns {clashes}: rename them")


def _check_store_name(store: str) -> None:
    if not store or "/" in store or store.startswith("."):
        raise ValueError(f"store must be a plain directory name, got {store!r}")


def _partitions(df: Any, num_partitions: int | None) -> int:
    n = (
        num_partitions
        if num_partitions is not None
        else int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    )
    if n < 1:
        raise ValueError(f"num_partitions must be >= 1, got {n}")
    return n


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _epoch_ms(field: Any, arg: str) -> Any:
    """An epoch-ms long column for a timestamp or integer time column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(field.dataType, T.TimestampType):
        return F.unix_millis(_col(field.name))
    if isinstance(field.dataType, T.LongType | T.IntegerType | T.ShortType | T.ByteType):
        return _col(field.name).cast("long")
    raise TypeError(
        f"{arg} column {field.name!r} must be a timestamp or an integer (epoch ms), "
        f"got {field.dataType.simpleString()}"
    )
