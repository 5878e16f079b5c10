"""The bounds of ``verstore.spark._spill`` that a large backfill leans on: the external sort keeps
a bounded number of run files open however many runs it spilled, and one key at one time with
many rows stays within the task's memory budget. Results are checked against the in-memory
path (an unbounded budget), which every Spark test exercises.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
from hypothesis import given, settings
from hypothesis import strategies as st
from verstore._core import TUPLE_ENCODING
from verstore.checkpoint import ColumnLayout, StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.spark import _spill
from verstore.spark._kernels import whole_runs
from verstore.spark._runtime import PartitionContext
from verstore.spark._spill import MERGE_FAN_IN, SORT_KEY, ExternalSorter, RowBuffer, SpillArea
from verstore.spark.joins import _AsofPartition
from verstore.spark.latest_by_timestamp import _LatestPartition

UNBOUNDED = 1 << 40
SORT_SCHEMA = pa.schema([(SORT_KEY, pa.binary()), ("i", pa.int64())])


def sort_batches(keys: list[bytes], size: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, len(keys), size):
        part = keys[start : start + size]
        yield pa.record_batch([pa.array(part, pa.binary()), range(start, start + len(part))],
                              schema=SORT_SCHEMA)  # fmt: skip


def stable_order(keys: list[bytes]) -> list[tuple[bytes, int]]:
    """What a stable in-memory sort gives: by key, equal keys in the order added."""
    return sorted(((k, i) for i, k in enumerate(keys)), key=lambda row: row[0])


def rows_of(chunks: Iterator[pa.RecordBatch]) -> list[tuple[bytes, int]]:
    return [(r[SORT_KEY], r["i"]) for chunk in chunks for r in chunk.to_pylist()]


# --- fan-in ---------------------------------------------------------------------------------------


def open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def fd_limit_allowing(more: int) -> int:
    """An RLIMIT_NOFILE under which ``more`` descriptors can still be opened: new ones take the
    lowest free numbers, and those open above the limit stay valid."""
    used, limit = set(open_fds()), 0
    while more:
        more -= limit not in used
        limit += 1
    return limit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts fds in /proc/self/fd")
@pytest.mark.parametrize(
    ("budget", "fan_in", "min_rows"),
    # as it is (a budget this small merges 2 runs at a time); and the full fan-in, made small
    # (a test at 64 would spill 64 runs of 64 slices of the minimum: too slow for a unit test)
    [(4_000, MERGE_FAN_IN, _spill.MERGE_MIN_ROWS), (8_000, 8, 16)],
    ids=["small-budget", "full-fan-in"],
)
def test_the_external_sort_keeps_a_bounded_number_of_run_files_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int, fan_in: int, min_rows: int
) -> None:
    """Three times the fan-in of spilled runs merge with the process allowed only the fan-in
    and a few more descriptors: before the bound, the merge opened every run at once."""
    import resource

    monkeypatch.setattr(_spill, "MERGE_FAN_IN", fan_in)
    monkeypatch.setattr(_spill, "MERGE_MIN_ROWS", min_rows)
    most_open = 0
    read = _spill._read

    def counting_read(path: Path, *args: Any) -> Iterator[pa.RecordBatch]:
        nonlocal most_open
        for batch in read(path, *args):
            most_open = max(most_open, len(open_fds()) - len(before))
            yield batch

    monkeypatch.setattr(_spill, "_read", counting_read)
    runs = 3 * fan_in + 5
    rng = random.Random(3)
    keys = [rng.randbytes(4) for _ in range(runs * budget // 25)]
    with SpillArea(tmp_path, budget) as area:
        sorter = ExternalSorter(area)
        for batch in sort_batches(keys, 50):
            sorter.add(batch)
        spilled = sum(1 for _ in tmp_path.glob("spill-*/run-*.arrow"))
        assert spilled >= runs
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        before = open_fds()
        # the fan-in's run files, the merged run a pass writes, and a few to spare
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit_allowing(fan_in + 8), hard))
        try:
            out = rows_of(sorter.chunks())
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert out == stable_order(keys)
    assert most_open <= fan_in + 1  # the runs read, and the one a pass writes
    print(f"{spilled} runs merged with at most {most_open} spill files open at once")


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.sampled_from([b"", b"a", b"ab", b"b", b"c\x00"]), max_size=400),
    budget=st.sampled_from([64, 600, 5_000, UNBOUNDED]),
    size=st.integers(1, 60),
)
def test_the_external_sort_gives_equal_keys_in_the_order_added_whatever_the_budget(
    tmp_path_factory: pytest.TempPathFactory, keys: list[bytes], budget: int, size: int
) -> None:
    tmp = tmp_path_factory.mktemp("ties")
    with SpillArea(tmp, budget) as area:
        sorter = ExternalSorter(area)
        for batch in sort_batches(keys, size):
            sorter.add(batch)
        assert rows_of(sorter.chunks()) == stable_order(keys)


# --- one key at one time --------------------------------------------------------------------------


@contextmanager
def arrow_peak() -> Iterator[Callable[[], int]]:
    """The peak of pyarrow's allocations while inside (the sorts' and merges' copies, the
    re-cut chunks; not the Rust-encoded columns, which the buffers count against their share
    before they spill)."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    pa.set_memory_pool(pool)
    try:
        yield pool.max_memory
    finally:
        pa.set_memory_pool(previous)


def run_partition(
    fn: Callable[[PartitionContext, Iterator[Any]], Iterator[Any]],
    store: tuple[str, pa.Schema],
    batches: Callable[[], Iterator[pa.RecordBatch]],
    budget: int,
    tmp: Path,
) -> tuple[list[dict[str, Any]], int, int]:
    """The output rows of one micro-batch (sorted: their order follows the chunks), pyarrow's
    peak bytes, and the bytes spilled. The input is made batch by batch, as Spark hands it
    over, so that it is not counted whole."""
    name, values = store
    opened = {name: verstore.VersionedStore.in_memory(history_retention_ms=1_000)}
    layout = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("k", pa.binary())]), values)
    codecs = {name: ValueCodec(StoreSettings(1_000, None, None, layout))}
    with SpillArea(tmp, budget) as area, arrow_peak() as peak:
        ctx = PartitionContext(
            stores=opened, batch_id=0, partition=0, rebuilt={}, spill=area, codecs=codecs
        )
        out = [r for batch in fn(ctx, batches()) for r in batch.to_pylist()]
        return sorted(out, key=repr), peak(), area.spilled_bytes


HOT_ROWS = 120_000
BUDGET = 200_000  # bytes: the hot key's rows are about 50 times that
SLACK = 2  # the sort's share (0.4) and its transient copies stay within twice the budget


def assert_bounded_and_same(
    fn: Callable[[PartitionContext, Iterator[Any]], Iterator[Any]],
    store: tuple[str, pa.Schema],
    batches: Callable[[], Iterator[pa.RecordBatch]],
    tmp: Path,
) -> None:
    expected, _, _ = run_partition(fn, store, batches, UNBOUNDED, tmp)
    out, peak, spilled = run_partition(fn, store, batches, BUDGET, tmp)
    print(f"peak {peak} pyarrow bytes with a budget of {BUDGET}, {spilled} bytes spilled")
    assert spilled > 20 * BUDGET
    assert peak <= SLACK * BUDGET
    assert out == expected


LATEST_SCHEMA = pa.schema(
    [("__vs_k0", pa.string()), ("t", pa.int64()), ("v", pa.string()), ("__vs_ts", pa.int64())]
)


def hot_updates(schema: pa.Schema, row: Callable[[random.Random, int], dict[str, Any]]) -> Any:
    """Batches of 1 000 rows, nine in ten of them key "hot" at time 7, the rest spread."""

    def batches() -> Iterator[pa.RecordBatch]:
        rng = random.Random(18)
        for start in range(0, HOT_ROWS, 1_000):
            rows = [row(rng, i) for i in range(start, start + 1_000)]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return batches


def test_a_hot_key_at_one_time_stays_within_the_budget_in_latest_by_timestamp(
    tmp_path: Path,
) -> None:
    def row(rng: random.Random, i: int) -> dict[str, Any]:
        hot = rng.random() < 0.9
        t = 7 if hot else rng.randrange(50)
        key = "hot" if hot else rng.choice("abcdef")
        return {"__vs_k0": key, "t": t, "v": f"value-{rng.randrange(10**6)}", "__vs_ts": t}

    fn = _LatestPartition(
        store="latest", keys=["__vs_k0"], time_col="t", values=["v"], deletes=None,
        emit="changes", previous=True, out_names=["__vs_k0", "t", "v", "change", "previous_v"],
    )  # fmt: skip
    store = ("latest", pa.schema([pa.field("v", pa.string())]))
    assert_bounded_and_same(fn, store, hot_updates(LATEST_SCHEMA, row), tmp_path)


ASOF_SCHEMA = pa.schema(
    [
        ("__vs_side", pa.int8()),
        ("__vs_k0", pa.string()),
        ("__vs_t", pa.int64()),
        ("__vs_s0", pa.int64()),
        ("__vs_v0", pa.float64()),
    ]
)


def test_a_hot_key_at_one_time_stays_within_the_budget_in_asof_join(tmp_path: Path) -> None:
    def row(rng: random.Random, i: int) -> dict[str, Any]:
        if i % 200:  # a table update; the same update many times over, as a replay sends it
            hot = rng.random() < 0.9
            key = "hot" if hot else rng.choice("abcdef")
            value = 1.5 if hot else float(rng.randrange(5))
            return {"__vs_side": 0, "__vs_k0": key, "__vs_t": 7 if hot else rng.randrange(50),
                    "__vs_s0": None, "__vs_v0": value}  # fmt: skip
        key = rng.choice(["hot", "a", "b"])
        return {"__vs_side": 1, "__vs_k0": key, "__vs_t": rng.randrange(60), "__vs_s0": i,
                "__vs_v0": None}  # fmt: skip

    fn = _AsofPartition(
        store="asof", keys=["__vs_k0"], stream_cols=["__vs_s0"], values=["__vs_v0"],
        tie_breakers=[], out_names=["order", "price", "from", "to"], inner=False,
    )  # fmt: skip
    store = ("asof", pa.schema([ASOF_SCHEMA.field("__vs_v0")]))
    assert_bounded_and_same(fn, store, hot_updates(ASOF_SCHEMA, row), tmp_path)


def test_whole_runs_holds_back_only_the_ends_of_a_run_longer_than_a_chunk() -> None:
    values = [1] * 3 + [2] * 1_000 + [3] * 2
    chunks = [
        pa.record_batch({"g": values[i : i + 10], "i": range(i, min(i + 10, len(values)))})
        for i in range(0, len(values), 10)
    ]
    out = list(whole_runs(iter(chunks), ["g"]))
    assert max(c.num_rows for c in out) <= 20  # a held-back run, then a chunk
    rows = [(r["g"], r["i"]) for c in out for r in c.to_pylist()]
    hot = [i for g, i in rows if g == 2]
    assert (hot[0], hot[-1]) == (3, 1_002)  # the run's first and last rows
    assert [r for r in rows if r[0] != 2] == [(1, 0), (1, 1), (1, 2), (3, 1_003), (3, 1_004)]


# --- pyarrow 14 -----------------------------------------------------------------------------------


def test_spill_chunks_and_run_cuts_work_without_pyarrow_19s_concat_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyproject.toml allows pyarrow 14; ``pa.concat_batches`` came in 19."""
    monkeypatch.delattr(pa, "concat_batches", raising=False)
    schema = pa.schema([("i", pa.int64())])
    with SpillArea(tmp_path, 1_000) as area:
        buffer = RowBuffer(area, schema)
        for start in range(0, 1_000, 10):
            buffer.add(pa.record_batch([pa.array(range(start, start + 10))], schema=schema))
        chunks = list(buffer.chunks(max_rows=100, max_bytes=1 << 20))
    assert [c.num_rows for c in chunks] == [100] * 10
    assert [i for c in chunks for i in c["i"].to_pylist()] == list(range(1_000))
    runs = [pa.record_batch({"g": [1, 1, 2]}), pa.record_batch({"g": [2, 3]})]
    assert [c["g"].to_pylist() for c in whole_runs(iter(runs), ["g"])] == [[1, 1], [2, 2], [3]]
