"""Stored values of typed columns across value schema evolutions (docs/checkpoint.md,
"`_meta.json`").

A lineage's first layout stores each value as its tuple encoding; every later layout ``k``
stores ``FE ‖ k (u16 big-endian) ‖ tuple encoding`` (a tuple-encoded row starts with ``00`` or
``01``, so the mark is unambiguous). :class:`ValueCodec` writes values under the newest layout
and reads values of any recorded layout as the newest layout's columns: a column the older
layout lacked is null, a dropped one is left out, a widened one is cast. Decoding groups rows by
layout, so values of one layout (the usual case) cost one decode, as before any evolution.
"""

from __future__ import annotations

from typing import Any

from verstore.checkpoint.layouts import EVOLVED_MARK
from verstore.checkpoint.settings import StoreSettings
from verstore.exceptions import CorruptionError

PREFIX_LEN = 3


class ValueCodec:
    """Encodes values under a lineage's newest layout, decodes values of any of its layouts."""

    def __init__(self, settings: StoreSettings) -> None:
        if settings.columns is None:
            raise ValueError("the store records no column layout: its values are plain bytes")
        layouts = settings.layouts or (settings.columns,)
        self._schemas = [layout.schemas()[1] for layout in layouts]
        self.schema = self._schemas[-1]
        self.layout_id = len(layouts) - 1
        #: What :meth:`encode` writes before a value's tuple encoding: nothing under a
        #: lineage's first layout, ``FE ‖ layout (u16 big-endian)`` under a later one.
        self.prefix = (
            b""
            if self.layout_id == 0
            else bytes([EVOLVED_MARK]) + self.layout_id.to_bytes(2, "big")
        )

    def encode(self, batch: Any, columns: list[str] | None = None) -> Any:
        """The stored values of ``columns`` of ``batch`` (in the newest layout's order)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import encode_rows

        encoded = encode_rows(batch, columns)
        if self.layout_id == 0:
            return encoded
        return pc.binary_join_element_wise(pa.scalar(self.prefix), encoded, pa.scalar(b""))

    def decode(self, values: Any) -> Any:
        """Stored values (a binary array; a null decodes to nulls) as a batch of the newest
        layout's columns.

        Raises:
            CorruptionError: A value names a layout the lineage never recorded, or its bytes
                are not a row of its layout.
        """
        from verstore._core import decode_rows

        if self.layout_id == 0:
            return decode_rows(values, self.schema)
        groups = _by_layout(values)
        if len(groups) == 1:
            ((layout_id, (_, rows)),) = groups.items()
            return self._read(layout_id, rows)
        return self._merge(values, groups)

    def _read(self, layout_id: int, rows: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from verstore._core import decode_rows

        if layout_id >= len(self._schemas):
            raise CorruptionError(
                f"a stored value names column layout {layout_id}; the lineage records "
                f"{len(self._schemas)} (0 to {len(self._schemas) - 1})"
            )
        if layout_id > 0:
            # An explicit stop: pyarrow's binary_slice without one fails on some arrays.
            rows = pc.binary_slice(rows, PREFIX_LEN, 2**31 - 1)
        stored = decode_rows(rows, self._schemas[layout_id])
        if layout_id == self.layout_id:
            return stored
        have = set(stored.schema.names)
        columns = [
            stored.column(f.name).cast(f.type) if f.name in have else pa.nulls(len(rows), f.type)
            for f in self.schema
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _merge(self, values: Any, groups: dict[int, tuple[Any, Any]]) -> Any:
        """Rows of several layouts, each group decoded apart, put back in their order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        parts = [self._read(layout_id, rows) for layout_id, (_, rows) in groups.items()]
        positions = pa.concat_arrays([where for where, _ in groups.values()])
        merged = pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
        return merged.take(pc.sort_indices(positions))


def _by_layout(values: Any) -> dict[int, tuple[Any, Any]]:
    """Layout id -> (row positions, rows) of the values written under it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    marked = pc.fill_null(
        pc.equal(pc.binary_slice(values, 0, 1), pa.scalar(bytes([EVOLVED_MARK]))), False
    )
    positions = pa.array(range(len(values)), pa.int64())
    groups = {0: (positions.filter(pc.invert(marked)), values.filter(pc.invert(marked)))}
    if not pc.any(marked).as_py():
        return groups
    evolved = values.filter(marked)
    ids = pc.binary_slice(evolved, 1, PREFIX_LEN)
    for raw in pc.unique(ids).to_pylist():
        if len(raw) != 2:
            raise CorruptionError("a stored value is cut short in its layout mark")
        same = pc.equal(ids, pa.scalar(raw))
        groups[int.from_bytes(raw, "big")] = (
            positions.filter(marked).filter(same),
            evolved.filter(same),
        )
    if len(groups[0][0]) == 0:
        del groups[0]
    return groups


__all__ = ["ValueCodec"]
