"""Bounded memory for partition-mode tasks: buffers and sorts that spill to local disk.

A task holds its partition's micro-batch while it works: the input until the table updates are
applied, the output until the stores are committed. A backfill can make that far larger than a
Python worker's memory, so every such buffer here keeps at most a budget of Arrow data in memory
and spills the rest to Arrow IPC files in the task's local directory:

* :class:`RowBuffer`: batches kept in arrival order (stream rows waiting for their lookups, a
  task's output waiting for the commit).
* :class:`ExternalSorter`: rows in the order of a binary sort key (table updates, which are
  applied in a canonical order: that is what makes a task deterministic whatever order Spark
  delivers rows in). Runs that fit the budget are sorted in memory and spilled; a vectorized
  k-way merge yields them back in chunks. The merge reads at most :data:`MERGE_FAN_IN` runs at
  once (more are first merged into longer runs, in passes), so a backfill of any size keeps a
  bounded number of files open, and it reads each run a slice at a time, so that what it holds
  stays within the sorter's share of the budget.

When everything fits (the common case) nothing touches the disk and the cost is that of one
in-memory sort, as without these classes.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: The sort key column :class:`ExternalSorter` orders by.
SORT_KEY = "__vs_sk"
#: Rows per batch when spilled data is read back.
READ_ROWS = 65_536
#: Sorted runs a merge reads at once at most: each holds a file descriptor and a slice of the
#: budget.
MERGE_FAN_IN = 64
#: Rows a merge reads from a run at a time at least. A merge round goes only as far as its
#: runs' smallest last read key, so shorter slices make rounds too short to pay for themselves:
#: a smaller budget merges fewer runs at once instead (in more passes), and a budget below two
#: runs of this many rows is exceeded by them.
MERGE_MIN_ROWS = 128


def concat_batches(batches: list[Any]) -> Any:
    """One record batch of ``batches`` (same schema), copied together: ``pa.concat_batches``,
    which pyarrow only has from version 19."""
    import pyarrow as pa

    table = pa.Table.from_batches(batches).combine_chunks()
    joined = table.to_batches()
    return joined[0] if joined else pa.RecordBatch.from_pylist([], schema=table.schema)


class SpillArea:
    """A directory for one task's spill files, removed when the task is done."""

    def __init__(self, parent: str | Path | None, budget_bytes: int) -> None:
        if budget_bytes < 1:
            raise ValueError(f"budget_bytes must be >= 1, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._parent = Path(parent) if parent is not None else Path(tempfile.gettempdir())
        self._dir: Path | None = None
        self.spilled_bytes = 0

    def new_file(self, stem: str) -> Path:
        if self._dir is None:
            self._dir = self._parent / f"spill-{uuid.uuid4().hex}"
            self._dir.mkdir(parents=True)
        return self._dir / f"{stem}-{uuid.uuid4().hex}.arrow"

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> SpillArea:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write(area: SpillArea, stem: str, batches: Iterable[Any], schema: Any) -> Path:
    import pyarrow as pa

    path = area.new_file(stem)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            for offset in range(0, batch.num_rows, READ_ROWS):
                writer.write_batch(batch.slice(offset, READ_ROWS))
    area.spilled_bytes += path.stat().st_size
    return path


def _read(path: Path, max_bytes: int | None = None) -> Iterator[Any]:
    """The batches of a spill file, memory-mapped: reading does not copy them into the heap.
    With ``max_bytes``, each batch comes in slices of about that size (at least
    :data:`MERGE_MIN_ROWS` rows)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if max_bytes is None or batch.nbytes <= max_bytes:
                yield batch
                continue
            rows = max(MERGE_MIN_ROWS, batch.num_rows * max_bytes // batch.nbytes)
            for offset in range(0, batch.num_rows, rows):
                yield batch.slice(offset, rows)


class _Spilling:
    """Batches held in memory up to a share of the budget; past it, :meth:`_spill` writes what
    is held to a file (how, and in which order, is the subclass's business)."""

    def __init__(self, area: SpillArea, share: float, schema: Any = None) -> None:
        self._area = area
        self._limit = max(1, int(area.budget_bytes * share))
        self._schema = schema
        self._memory: list[Any] = []
        self._bytes = 0
        self._files: list[Path] = []
        self.num_rows = 0
        self.num_bytes = 0

    def add(self, batch: Any) -> None:
        if not batch.num_rows:
            return
        if self._schema is None:
            self._schema = batch.schema
        self._memory.append(batch)
        self._bytes += batch.nbytes
        self.num_rows += batch.num_rows
        self.num_bytes += batch.nbytes
        if self._bytes > self._limit:
            self._files.append(self._spill())
            self._memory, self._bytes = [], 0

    def _spill(self) -> Path:
        raise NotImplementedError


class RowBuffer(_Spilling):
    """Batches in arrival order, in memory up to the budget, then in spill files."""

    def __init__(self, area: SpillArea, schema: Any = None, *, share: float = 1.0) -> None:
        super().__init__(area, share, schema)

    def _spill(self) -> Path:
        return _write(self._area, "rows", self._memory, self._schema)

    def batches(self) -> Iterator[Any]:
        for path in self._files:
            yield from _read(path)
        yield from self._memory

    def chunks(self, max_rows: int = READ_ROWS * 4, max_bytes: int | None = None) -> Iterator[Any]:
        """The rows in arrival order, consecutive batches joined into chunks of up to
        ``max_rows`` rows and ``max_bytes`` bytes (default: this buffer's share of the budget;
        a batch larger than that comes whole): fewer, larger batch calls. A chunk is a copy of
        its rows, so this adds at most one chunk's worth of memory."""
        limit = self._limit if max_bytes is None else max_bytes
        held: list[Any] = []
        rows = size = 0
        for batch in self.batches():
            if held and (rows + batch.num_rows > max_rows or size + batch.nbytes > limit):
                yield held[0] if len(held) == 1 else concat_batches(held)
                held, rows, size = [], 0, 0
            held.append(batch)
            rows += batch.num_rows
            size += batch.nbytes
        if held:
            yield held[0] if len(held) == 1 else concat_batches(held)


class ExternalSorter(_Spilling):
    """Rows ordered by their binary :data:`SORT_KEY` column, in bounded memory.

    ``add`` batches that carry the sort key; ``chunks`` yields every row once, in sort-key order
    (rows with equal sort keys in the order they were added, as a stable in-memory sort would
    give them, whatever the budget), as batches of bounded size. Each spill file is a sorted
    run.
    """

    def __init__(self, area: SpillArea, *, share: float = 0.5) -> None:
        super().__init__(area, share)

    def _spill(self) -> Path:
        return _write(self._area, "run", [self._sorted_memory()], self._schema)

    def _sorted_memory(self) -> Any:
        import pyarrow as pa

        table = pa.Table.from_batches(self._memory, schema=self._schema)
        table = table.take(_sort_indices(table.column(SORT_KEY)))
        return table.combine_chunks().to_batches()[0] if table.num_rows else None

    def chunks(self) -> Iterator[Any]:
        """Every row, sorted, as batches (each at most about the sorter's share of the budget)."""
        import pyarrow as pa

        if not self._files:
            if self._memory:
                table = pa.Table.from_batches(self._memory, schema=self._schema)
                table = table.take(_sort_indices(table.column(SORT_KEY)))
                yield from table.to_batches(max_chunksize=READ_ROWS * 4)
            return
        if self._memory:
            self._files.append(self._spill())
            self._memory, self._bytes = [], 0
        fan_in = self._fan_in()
        while len(self._files) > fan_in:
            self._files = self._merge_pass(self._files, fan_in)
        yield from self._merged(self._files)

    def _fan_in(self) -> int:
        """Runs merged at once: :data:`MERGE_FAN_IN`, or fewer if the budget cannot give each
        a slice of :data:`MERGE_MIN_ROWS` rows (see :meth:`_merged`)."""
        row_bytes = max(1, self.num_bytes // max(1, self.num_rows))
        return max(2, min(MERGE_FAN_IN, self._limit // (2 * MERGE_MIN_ROWS * row_bytes)))

    def _merged(self, runs: list[Path]) -> Iterator[Any]:
        # A run's buffer is topped up to one and a half slices at most (see _merge): slices of
        # half its part of the budget keep the buffers, and so a merge round, within it.
        slice_bytes = max(1, self._limit // (2 * len(runs)))
        return _merge([_read(path, slice_bytes) for path in runs], self._schema)

    def _merge_pass(self, runs: list[Path], fan_in: int) -> list[Path]:
        """Merges consecutive groups of ``fan_in`` runs into one run each. Groups keep the runs'
        order, so rows with equal keys stay in the order they were added."""
        merged = []
        for start in range(0, len(runs), fan_in):
            group = runs[start : start + fan_in]
            if len(group) == 1:
                merged.append(group[0])
                continue
            merged.append(_write(self._area, "run", self._merged(group), self._schema))
            for path in group:
                path.unlink()  # read to the end (and closed) by the merge above
        return merged


def _sort_indices(keys: Any) -> Any:
    from verstore._core import sort_indices

    # a stable sort: rows with equal keys keep their order (see _merge)
    return sort_indices(keys)


def _merge(runs: list[Iterator[Any]], schema: Any) -> Iterator[Any]:
    """A stable k-way merge of sorted runs, a slice of rows at a time.

    Each round takes, from every run's buffered rows, those whose key is below the *bound*, the
    smallest "last buffered key" among the runs not yet exhausted: no row still unread can be
    smaller. Rows equal to the bound are taken from the runs up to the first one that sets it
    (that run may hold more of them unread, and rows of later runs must come after them), so
    rows with equal keys come out in run order. That first run gives up its whole buffer, so
    every round makes progress, and a long stretch of one key is read a buffer at a time.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    buffers: list[Any] = [None] * len(runs)
    exhausted = [False] * len(runs)
    read = [0] * len(runs)  # rows of the slice last read from each run

    def refill(i: int) -> None:
        # A short remainder is topped up with the next slice: as the bound it would let the
        # round take little from the other runs.
        while not exhausted[i] and _rows(buffers[i]) < max(1, read[i] // 2):
            try:
                batch = next(runs[i])
            except StopIteration:
                exhausted[i] = True
                break
            read[i] = batch.num_rows
            held = buffers[i]
            buffers[i] = concat_batches([held, batch]) if _rows(held) else batch

    while True:
        for i in range(len(runs)):
            refill(i)
        live = [i for i in range(len(runs)) if _rows(buffers[i])]
        if not live:
            return
        bound, setter = _bound(buffers, [i for i in live if not exhausted[i]])
        taken = []
        for i in live:
            batch = buffers[i]
            if bound is None:
                n = batch.num_rows
            else:
                below = pc.less_equal if i <= setter else pc.less
                n = pc.sum(below(batch.column(SORT_KEY), bound)).as_py() or 0
            if n:
                taken.append(batch.slice(0, n))
                buffers[i] = batch.slice(n)
        table = pa.Table.from_batches(taken, schema=schema)
        table = table.take(_sort_indices(table.column(SORT_KEY)))
        yield from table.combine_chunks().to_batches()


def _rows(batch: Any) -> int:
    return 0 if batch is None else int(batch.num_rows)


def _bound(buffers: list[Any], open_runs: list[int]) -> tuple[Any, int]:
    """The smallest last buffered key among ``open_runs`` (None when there are none) and the
    first run whose buffer ends with it."""
    bound, setter = None, -1
    for i in open_runs:
        last = buffers[i].column(SORT_KEY)[-1]
        if bound is None or last.as_py() < bound.as_py():
            bound, setter = last, i
    return bound, setter


__all__ = [
    "MERGE_FAN_IN",
    "MERGE_MIN_ROWS",
    "READ_ROWS",
    "SORT_KEY",
    "ExternalSorter",
    "RowBuffer",
    "SpillArea",
    "concat_batches",
]
