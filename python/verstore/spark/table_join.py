"""Table-table joins of two versioned tables on Structured Streaming: the join's change stream.

Each side is a versioned table given as a stream of updates ``(key, time, value)``, kept in a
store of its own (see :mod:`verstore.spark.latest_by_timestamp` for versioned tables and
KIP-914). An update that becomes its key's newest version (``put`` returns
``VALID_TO_UNDEFINED``) is joined with the other side's version and emitted; an out-of-order
update only rewrites its side's history, and one older than the grace period is dropped
(``NOT_PUT``).

The join runs in partition mode (``_runtime``): per micro-batch and partition, both sides'
updates are processed in one canonical order, (time, side, key), a chunk at a time with one
``get_batch`` and one ``put_batch`` per side and chunk, then vectorized bookkeeping over whole
Arrow columns. Equal (key, time) updates of one side in one micro-batch collapse to one
winner, the largest encoded value bytes, so that the result does not depend on the order in
which Spark delivers rows (exactly-once rests on it, see ``docs/spark.md``).
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

_TIME_MS = "__vs_ts"
_SIDE = "__vs_side"
_LEFT, _RIGHT = "__vs_left", "__vs_right"
_LEFT_SIDE, _RIGHT_SIDE = 0, 1


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
    latest_ttl: str | int | timedelta | None = None,
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
    * The stores are the query's for the life of its checkpoint; ``num_partitions`` changes
      only through :func:`verstore.spark.repartition_store` (both stores), with the query
      stopped.

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
        latest_ttl: How long a key stays in each side's table after its newest update, in
            event time (docs/spark.md, "State that ends"; text, ms or a timedelta, >= 1 ms);
            None: forever. An update then joins only the other side's versions that still
            live; an expiry emits no row (a result is not retracted). A query keeps the TTL
            it started with.

    Returns:
        A streaming DataFrame: the ``on`` columns, the left side's other columns (including
        ``left_time``), then the right side's; a name present on both sides is prefixed with
        ``left_`` / ``right_``.

    Raises:
        ValueError: Unknown columns, a bad ``how``, ``lookup``, ``store``, ``num_partitions``,
            ``history_retention`` or ``latest_ttl``, or an output name clash.
        TypeError: A time column that is neither a timestamp nor an integer.
    """
    on_cols = _check_join_arguments(on, how, lookup, store)
    retention_ms = arguments.parse_duration_ms(history_retention, name="history_retention")
    ttl_ms = arguments.parse_ttl_ms(latest_ttl)
    columns = _JoinColumns(
        on_cols, arguments.fields_by_name(left_updates), arguments.fields_by_name(right_updates)
    )
    arguments.require_columns(columns.left, [*on_cols, left_time], "left_updates")
    arguments.require_columns(columns.right, [*on_cols, right_time], "right_updates")
    left_ms, _ = arguments.epoch_ms(columns.left[left_time], "left_time")
    right_ms, _ = arguments.epoch_ms(columns.right[right_time], "right_time")
    partitions = arguments.num_partitions(left_updates, num_partitions)
    out_names = columns.out_names()
    arguments.check_unique(out_names, "versioned_table_join")
    tagged = columns.tagged(left_updates, left_ms, _LEFT_SIDE).unionByName(
        columns.tagged(right_updates, right_ms, _RIGHT_SIDE)
    )
    user_keys = arguments.arrow_schema([columns.left[c] for c in on_cols])
    key_schema = arguments.arrow_schema([columns.left[c] for c in on_cols], columns.keys)
    value_schemas = (columns.value_schema(_LEFT_SIDE), columns.value_schema(_RIGHT_SIDE))
    fn = _JoinPartition(
        stores=(f"{store}_left", f"{store}_right"),
        keys=columns.keys,
        how=how,
        lookup=lookup,
        out_names=out_names,
        key_schema=key_schema,
    )
    specs = {
        name: StoreSpec(
            retention_ms,
            columns=arguments.column_layout(user_keys, values),
            latest_ttl_ms=ttl_ms,
        )
        for name, values in zip(fn.stores, value_schemas, strict=True)
    }
    return map_partitions_with_stores(
        tagged,
        keys=columns.keys,
        num_partitions=partitions,
        stores=specs,
        fn=fn,
        schema=columns.out_schema(),
    )


def _check_join_arguments(on: str | Sequence[str], how: str, lookup: str, store: str) -> list[str]:
    """The key columns, once ``how``, ``lookup`` and ``store`` are known to be good."""
    on_cols = arguments.column_names(on, "on")
    if not on_cols:
        raise ValueError("on must name at least one key column")
    if how not in ("inner", "left", "outer"):
        raise ValueError(f"how must be 'inner', 'left' or 'outer', got {how!r}")
    if lookup not in ("as_of", "latest"):
        raise ValueError(f"lookup must be 'as_of' or 'latest', got {lookup!r}")
    arguments.check_store_name(store)
    return on_cols


@dataclass(frozen=True)
class _JoinColumns:
    """The columns of a join: the keys, each side's values, and the output's names and types
    (the keys' types are the left side's)."""

    on: list[str]
    left: dict[str, Any]  # the left updates' Spark fields by name
    right: dict[str, Any]

    @property
    def keys(self) -> list[str]:
        """The key columns' names between the shuffle and the partition function."""
        return [f"__vs_k{i}" for i in range(len(self.on))]

    def fields(self, side: int) -> dict[str, Any]:
        return self.left if side == _LEFT_SIDE else self.right

    def values(self, side: int) -> list[str]:
        return [c for c in self.fields(side) if c not in self.on]

    def out_values(self, side: int) -> list[str]:
        """The side's value columns in the output: a name both sides have gets a prefix."""
        both = set(self.values(_LEFT_SIDE)) & set(self.values(_RIGHT_SIDE))
        prefix = "left_" if side == _LEFT_SIDE else "right_"
        return [prefix + c if c in both else c for c in self.values(side)]

    def out_names(self) -> list[str]:
        return [*self.on, *self.out_values(_LEFT_SIDE), *self.out_values(_RIGHT_SIDE)]

    def out_schema(self) -> Any:
        from pyspark.sql import types as T

        fields = [T.StructField(c, self.left[c].dataType, True) for c in self.on]
        for side in (_LEFT_SIDE, _RIGHT_SIDE):
            schema = self.fields(side)
            fields += [
                T.StructField(out, schema[c].dataType, True)
                for out, c in zip(self.out_values(side), self.values(side), strict=True)
            ]
        return T.StructType(fields)

    def value_schema(self, side: int) -> Any:
        """The Arrow schema of the side's value columns, as its store holds them."""
        return arguments.arrow_schema([self.fields(side)[c] for c in self.values(side)])

    def tagged(self, updates: Any, time_ms: Any, side: int) -> Any:
        """One side's storable updates as the rows of the shuffle: keys, side, time, and the
        side's values as a struct in its own column (the other side's column null)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        own = F.struct(*[arguments.col(c) for c in self.values(side)])
        structs = [
            T.StructType([self.fields(s)[c] for c in self.values(s)])
            for s in (_LEFT_SIDE, _RIGHT_SIDE)
        ]
        left, right = (
            own if s == side else F.lit(None).cast(structs[s]) for s in (_LEFT_SIDE, _RIGHT_SIDE)
        )
        return updates.select(
            *arguments.keys_as(self.on, self.keys, self.fields(side), self.left),
            F.lit(side).cast("byte").alias(_SIDE),
            time_ms.alias(_TIME_MS),
            left.alias(_LEFT),
            right.alias(_RIGHT),
        ).where(arguments.storable(self.on, _TIME_MS))


# Columns of the compact rows the join's sort holds: encoded key, time, side, encoded value.
_ROW_KEY, _ROW_TIME, _ROW_SIDE, _ROW_VALUE = "k", "t", "s", "v"


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

    def __call__(self, ctx: PartitionContext, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        stores = (ctx.store(self.stores[0]), ctx.store(self.stores[1]))
        codecs = (ctx.codec(self.stores[0]), ctx.codec(self.stores[1]))
        updates = ExternalSorter(ctx.spill, share=0.4)
        for batch in batches:
            for s, column in enumerate((_LEFT, _RIGHT)):
                part = batch.filter(pc.equal(batch.column(_SIDE), s))
                if part.num_rows:
                    updates.add(self._compact(part, column, codecs[s], s))
        for chunk in kernels.whole_runs(updates.chunks(), [_ROW_TIME, _ROW_SIDE, _ROW_KEY]):
            yield self._join(stores, codecs, chunk, ctx.metrics)

    def _compact(self, part: Any, column: str, codec: ValueCodec, side: int) -> Any:
        """(sort key, k, t, s, v): the sort key orders by (time, side, key, value), so a run of
        equal (time, side, key) ends with its winner, the largest value."""
        import numpy as np
        import pyarrow as pa

        struct = part.column(column)
        own = pa.RecordBatch.from_arrays(struct.flatten(), schema=pa.schema(list(struct.type)))
        v = codec.encode(own, [f.name for f in struct.type])
        s = pa.array(np.full(part.num_rows, side, dtype=np.int8))
        keyed = pa.RecordBatch.from_arrays(
            [part.column(_TIME_MS), s, *[part.column(c) for c in self.keys], v],
            names=[_TIME_MS, _ROW_SIDE, *self.keys, _ROW_VALUE],
        )
        return pa.RecordBatch.from_pydict(
            {
                SORT_KEY: kernels.encode(keyed, [_TIME_MS, _ROW_SIDE, *self.keys, _ROW_VALUE]),
                _ROW_KEY: kernels.encode(part, self.keys),
                _ROW_TIME: part.column(_TIME_MS),
                _ROW_SIDE: s,
                _ROW_VALUE: v,
            }
        )

    def _join(
        self,
        stores: tuple[Any, Any],
        codecs: tuple[ValueCodec, ValueCodec],
        chunk: Any,
        metrics: TaskMetrics,
    ) -> Any:
        """The results of a chunk's updates: each side's winners looked up in the other side's
        store, then put in their own; the results in (key, time, side) order."""
        sides = _winners_by_side(chunk)
        # The other side's version before the chunk, then this chunk's puts.
        before = [self._look_up(stores[1 - s], rows) for s, rows in enumerate(sides)]
        codes = [
            kernels.put_in_order(
                stores[s], rows.column(_ROW_KEY), rows.column(_ROW_VALUE), rows.column(_ROW_TIME)
            )
            for s, rows in enumerate(sides)
        ]
        updates = _Processed.of(sides, before, codes)
        metrics.expired(updates.code)
        return self._results(updates, self._other_value(updates), codecs)

    def _look_up(self, other: Any, rows: Any) -> Any:
        """The other side's versions of the rows' keys: at the rows' times, or the newest."""
        times = rows.column(_ROW_TIME) if self.lookup == "as_of" else None
        return other.get_batch(rows.column(_ROW_KEY), as_of=times)

    def _other_value(self, updates: _Processed) -> Any:
        """Per update, the other side's value it joins: the other side's version in this chunk
        processed before it, if any (and, as of, not older than the stored one), else the
        stored version found before the chunk."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        side, code = updates.side, updates.code
        seen = code != NOT_PUT if self.lookup == "as_of" else code == -1
        first = kernels.group_start(kernels.run_starts([updates.key]))
        last = [kernels.last_before(seen & (side == s), first) for s in (0, 1)]
        other = np.where(side == _LEFT_SIDE, last[_RIGHT_SIDE], last[_LEFT_SIDE])
        in_chunk = other >= 0
        if self.lookup == "as_of":
            # a stored version at a later time than the in-chunk one is the one valid at t
            stored_time = pc.fill_null(updates.stored_time, -1).to_numpy()
            in_chunk &= updates.time[np.maximum(other, 0)] >= stored_time
        in_chunk_value = updates.value.take(np.maximum(other, 0))
        return pc.if_else(pa.array(in_chunk), in_chunk_value, updates.stored_value)

    def _results(
        self, updates: _Processed, other_value: Any, codecs: tuple[ValueCodec, ValueCodec]
    ) -> Any:
        """The output rows of the updates that changed their side and join per ``how``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        side = updates.side
        found = pc.is_valid(other_value).to_numpy(zero_copy_only=False)
        emit = updates.code == -1
        if self.how == "inner":
            emit &= found
        elif self.how == "left":
            emit &= found | (side == _LEFT_SIDE)
        mask = pa.array(emit)
        is_left = pa.array(side == _LEFT_SIDE).filter(mask)
        own, other = updates.value.filter(mask), other_value.filter(mask)
        left_value = pc.if_else(is_left, own, other)
        right_value = pc.if_else(is_left, other, own)
        columns = kernels.decode(updates.key.filter(mask), self.key_schema).columns
        for encoded, codec in zip((left_value, right_value), codecs, strict=True):
            if len(codec.schema):
                columns += codec.decode(encoded).columns
        return pa.RecordBatch.from_arrays(columns, names=self.out_names)


def _winners_by_side(chunk: Any) -> list[Any]:
    """Per side, the winner of each (key, time) of the chunk, in (time, key) order."""
    import pyarrow as pa

    runs = kernels.run_starts(
        [chunk.column(_ROW_TIME), chunk.column(_ROW_SIDE), chunk.column(_ROW_KEY)]
    )
    winners = chunk.filter(pa.array(kernels.run_ends(runs)))
    tags = winners.column(_ROW_SIDE).to_numpy()
    return [winners.filter(pa.array(tags == s)) for s in (_LEFT_SIDE, _RIGHT_SIDE)]


@dataclass(frozen=True)
class _Processed:
    """Both sides' updates of a chunk in processing order per key, (key, time, side): left
    first at equal times. Per update: its encoded key, time, encoded value, side, put return
    code, and the other side's stored version found before the chunk (value and time)."""

    key: Any
    time: Any
    value: Any
    side: Any
    code: Any
    stored_value: Any
    stored_time: Any

    @staticmethod
    def of(sides: list[Any], before: list[Any], codes: list[Any]) -> _Processed:
        import numpy as np
        import pyarrow as pa

        left, right = sides
        key = pa.concat_arrays([left.column(_ROW_KEY), right.column(_ROW_KEY)])
        time = np.concatenate(
            [left.column(_ROW_TIME).to_numpy(), right.column(_ROW_TIME).to_numpy()]
        )
        side = np.concatenate([np.zeros(left.num_rows, np.int8), np.ones(right.num_rows, np.int8)])
        order = kernels.sort_indices({"k": key, "t": time, "s": side}, ["k", "t", "s"])
        return _Processed(
            key=key.take(order),
            time=time[order],
            value=pa.concat_arrays([left.column(_ROW_VALUE), right.column(_ROW_VALUE)]).take(order),
            side=side[order],
            code=np.concatenate(codes)[order],
            stored_value=pa.concat_arrays([f.column("value") for f in before]).take(order),
            stored_time=pa.concat_arrays([f.column("timestamp") for f in before]).take(order),
        )


__all__ = ["versioned_table_join"]
