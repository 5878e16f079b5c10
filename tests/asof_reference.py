"""The as-of join's partition function as it was before the Rust kernel (``rust/asof.rs``): the
reference the kernel is tested against (``tests/spark/parts/test_asof_kernel.py``) and measured
against (``benches/asof_partition.py``, which imports it from here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verstore.checkpoint.values import ValueCodec
from verstore.spark import _kernels as kernels
from verstore.spark._spill import SORT_KEY
from verstore.spark.joins import (
    _ROW_KEY,
    _ROW_TIE_BREAKER,
    _ROW_TIME,
    _ROW_VALUE,
    _SIDE,
    _TABLE,
    _TIME,
    _apply_with_tie_breakers,
    _AsofPartition,
    _winners,
)


@dataclass(frozen=True, kw_only=True)
class AsofPartitionArrow(_AsofPartition):
    """The partition function as it was before the Rust kernel: the same steps as chains of
    pyarrow kernels and store batch calls."""

    def _compact(self, batch: Any, codec: ValueCodec) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        updates = batch.filter(pc.equal(batch.column(_SIDE), _TABLE))
        time = updates.column(_TIME)
        ok = pc.and_(kernels.all_valid(updates, [*self.keys, _TIME]), pc.greater_equal(time, 0))
        updates = updates.filter(pc.fill_null(ok, False))
        columns = {
            SORT_KEY: kernels.encode(
                updates, [_TIME, *self.keys, *self.tie_breakers, *self.values]
            ),
            _ROW_KEY: kernels.encode(updates, self.keys),
            _ROW_TIME: updates.column(_TIME),
            _ROW_VALUE: codec.encode(updates, self._stored_columns()),
        }
        if self.tie_breakers:
            columns[_ROW_TIE_BREAKER] = kernels.encode(updates, self.tie_breakers)
        return pa.RecordBatch.from_pydict(columns)

    def _apply(self, store: Any, codec: ValueCodec, chunk: Any) -> Any:
        if self.tie_breakers:
            return _apply_with_tie_breakers(self, store, codec, chunk)
        winners = _winners(chunk)
        return store.put_batch(
            winners.column(_ROW_KEY), winners.column(_ROW_VALUE), winners.column(_ROW_TIME)
        )

    def _lookup(self, store: Any, codec: ValueCodec, rows: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        ok = pc.fill_null(kernels.all_valid(rows, [*self.keys, _TIME]), False)
        time = rows.column(_TIME)
        # No version is before time 0; compared before subtracting, which would wrap at -2**63.
        ok = pc.and_(ok, pc.fill_null(pc.greater_equal(time, 1 if self.strict else 0), False))
        as_of = pc.subtract(time, 1) if self.strict else time
        found = store.get_batch(kernels.encode(rows, self.keys), as_of=pc.if_else(ok, as_of, 0))
        if self.tolerance_ms is not None:
            fresh = pc.less_equal(pc.subtract(time, found.column("timestamp")), self.tolerance_ms)
            ok = pc.and_(ok, pc.fill_null(fresh, False))
        value = pc.if_else(ok, found.column("value"), pa.scalar(None, pa.binary()))
        valid_from = pc.if_else(ok, found.column("timestamp"), pa.scalar(None, pa.int64()))
        valid_to = pc.if_else(ok, found.column("valid_to"), pa.scalar(None, pa.int64()))
        return self._output(codec, rows, value, valid_from, valid_to)
