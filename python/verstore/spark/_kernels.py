"""Vectorized Arrow/numpy kernels shared by the partition functions of the Spark helpers.

No Python code runs per row: every function here takes and returns whole columns. Row order
conventions are stated per function ("rows sorted by ..."); a *run* is a maximal block of
consecutive rows equal in the given columns, a *group* the rows of one key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from verstore.spark._spill import SORT_KEY, concat_batches


def encode(batch: Any, columns: list[str]) -> Any:
    """The tuple encoding of ``columns`` of ``batch``, one binary value per row."""
    from verstore._core import encode_rows

    return encode_rows(batch, columns)


def decode(encoded: Any, schema: Any) -> Any:
    """Typed columns back from :func:`encode` (a null row decodes to nulls)."""
    from verstore._core import decode_rows

    return decode_rows(encoded, schema)


def nullable_schema(schema: Any, columns: list[str]) -> Any:
    import pyarrow as pa

    return pa.schema([schema.field(c).with_nullable(True) for c in columns])


def all_valid(batch: Any, columns: list[str]) -> Any:
    """True where every one of ``columns`` is non-null."""
    import pyarrow.compute as pc

    ok = pc.is_valid(batch.column(columns[0]))
    for c in columns[1:]:
        ok = pc.and_(ok, pc.is_valid(batch.column(c)))
    return ok


def with_sort_key(batch: Any, columns: Sequence[str]) -> Any:
    """``batch`` plus the :data:`SORT_KEY` column: the tuple encoding of ``columns``, whose
    byte order is the columns' natural order (nulls first)."""
    import pyarrow as pa

    key = encode(batch, list(columns))
    return pa.RecordBatch.from_arrays([*batch.columns, key], names=[*batch.schema.names, SORT_KEY])


def run_starts(columns: Sequence[Any]) -> Any:
    """For rows sorted so that equal tuples of ``columns`` are adjacent: true where a run of
    equal tuples starts (numpy bool)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(columns[0])
    starts = np.zeros(n, dtype=bool)
    starts[:1] = True
    if n > 1:
        for column in columns:
            if isinstance(column, np.ndarray):
                starts[1:] |= column[1:] != column[:-1]
            else:
                column = column if isinstance(column, pa.Array) else column.combine_chunks()
                differ = pc.not_equal(column.slice(1), column.slice(0, n - 1))
                starts[1:] |= pc.fill_null(differ, True).to_numpy(zero_copy_only=False)
    return starts


def last_run_start(columns: Sequence[Any]) -> int:
    """The index where the last run of equal tuples of ``columns`` starts (0 when empty)."""
    import numpy as np

    if not len(columns[0]):
        return 0
    return int(np.flatnonzero(run_starts(columns))[-1])


def whole_runs(chunks: Iterator[Any], columns: list[str]) -> Iterator[Any]:
    """Sorted chunks re-cut so that no run of equal ``columns`` spans two of them: the last
    run of a chunk is held back and prepended to the next.

    Every caller reads a run only through its first and last rows (a winner is a run's last
    row, the value before a key's changes its first row's), so a run that outgrows a whole
    chunk (one hot key at one time) is held back as just those two rows: what is held stays
    within a chunk however long the run, and what is read from the run is the same."""
    carry = None
    for chunk in chunks:
        if carry is not None:
            chunk = concat_batches([carry, chunk])
        cut = last_run_start([chunk.column(c) for c in columns])
        carry = chunk.slice(cut)
        if cut:
            yield chunk.slice(0, cut)
        elif carry.num_rows > 2:
            carry = concat_batches([carry.slice(0, 1), carry.slice(carry.num_rows - 1)])
    if carry is not None and carry.num_rows:
        yield carry


def run_ends(starts: Any) -> Any:
    """True on the last row of each run, for the run starts of :func:`run_starts`."""
    import numpy as np

    return np.append(starts[1:], True) if len(starts) else starts


def group_start(starts: Any) -> Any:
    """For each row, the index of the first row of its group."""
    import numpy as np

    idx = np.arange(len(starts))
    return np.maximum.accumulate(np.where(starts, idx, 0)) if len(starts) else idx


def group_end(first: Any) -> Any:
    """For each row, the index of the last row of its group (``first`` from
    :func:`group_start`)."""
    import numpy as np

    n = len(first)
    starts = np.flatnonzero(np.append(True, first[1:] != first[:-1]))
    ends = np.append(starts[1:] - 1, n - 1)
    return ends[np.searchsorted(starts, first)]


def last_before(flags: Any, first: Any) -> Any:
    """For each row i, the largest j < i of i's group with ``flags[j]``, else -1."""
    import numpy as np

    n = len(flags)
    upto = np.maximum.accumulate(np.where(flags, np.arange(n), -1)) if n else flags
    before = np.concatenate([[-1], upto[:-1]]) if n else np.zeros(0, dtype=np.int64)
    return np.where(before >= first, before, -1)


def sort_indices(columns: dict[str, Any], by: list[str]) -> Any:
    """Indices that sort the aligned ``columns`` by ``by`` (ascending, nulls last), numpy."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table(columns)
    return pc.sort_indices(table, sort_keys=[(c, "ascending") for c in by]).to_numpy()


def put_in_order(store: Any, keys: Any, values: Any, times: Any) -> Any:
    """``put_batch`` of rows already in the order they must be applied; numpy return codes."""
    return store.put_batch(keys, values, times).to_numpy()


__all__ = [
    "all_valid",
    "decode",
    "encode",
    "group_end",
    "group_start",
    "last_before",
    "last_run_start",
    "nullable_schema",
    "put_in_order",
    "run_ends",
    "run_starts",
    "sort_indices",
    "whole_runs",
    "with_sort_key",
]
