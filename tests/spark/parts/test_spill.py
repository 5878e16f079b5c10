"""Bounded memory in partition mode (``verstore.spark._spill``): the buffers and the external sort,
and the helpers' partition functions, which must give the same output and the same stored state
whether their micro-batch fits the task's memory budget or spills to disk many times over.

The partition functions run here without Spark, on in-memory stores, against a run of the same
function with an unbounded budget (the in-memory path every Spark test exercises).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
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
from verstore.spark._kernels import whole_runs
from verstore.spark._runtime import PartitionContext
from verstore.spark._spill import SORT_KEY, ExternalSorter, RowBuffer, SpillArea
from verstore.spark.joins import _AsofPartition
from verstore.spark.latest_by_timestamp import _LatestPartition
from verstore.spark.table_join import _JoinPartition

UNBOUNDED = 1 << 40
TINY = 3_000  # bytes: every few rows spill


def batches_of(rows: list[dict[str, Any]], schema: pa.Schema, size: int) -> list[pa.RecordBatch]:
    return [
        pa.RecordBatch.from_pylist(rows[i : i + size], schema=schema)
        for i in range(0, len(rows), size)
    ]


# --- the building blocks --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.binary(max_size=6), max_size=300),
    budget=st.sampled_from([64, 500, 4_000, UNBOUNDED]),
    size=st.integers(1, 50),
)
def test_the_external_sort_yields_every_row_in_key_order(
    tmp_path_factory: pytest.TempPathFactory, keys: list[bytes], budget: int, size: int
) -> None:
    tmp = tmp_path_factory.mktemp("sort")
    schema = pa.schema([(SORT_KEY, pa.binary()), ("i", pa.int64())])
    with SpillArea(tmp, budget) as area:
        sorter = ExternalSorter(area)
        rows = [{SORT_KEY: k, "i": i} for i, k in enumerate(keys)]
        for batch in batches_of(rows, schema, size):
            sorter.add(batch)
        out = [r for chunk in sorter.chunks() for r in chunk.to_pylist()]
    assert [r[SORT_KEY] for r in out] == sorted(keys)
    assert sorted(r["i"] for r in out) == list(range(len(keys)))
    assert not any(tmp.iterdir())  # the spill files are gone


def test_a_row_buffer_spills_past_its_budget_and_gives_rows_back_in_order(tmp_path: Path) -> None:
    schema = pa.schema([("i", pa.int64()), ("s", pa.string())])
    rows = [{"i": i, "s": "x" * (i % 17)} for i in range(5_000)]
    with SpillArea(tmp_path, 10_000) as area:
        buffer = RowBuffer(area)
        for batch in batches_of(rows, schema, 333):
            buffer.add(batch)
        assert area.spilled_bytes > 0
        assert [r for b in buffer.batches() for r in b.to_pylist()] == rows


@pytest.mark.parametrize("budget", [UNBOUNDED, 10_000])
def test_row_buffer_chunks_join_batches_in_order_up_to_max_rows(
    tmp_path: Path, budget: int
) -> None:
    schema = pa.schema([("i", pa.int64()), ("s", pa.string())])
    rows = [{"i": i, "s": "x" * (i % 17)} for i in range(5_000)]
    with SpillArea(tmp_path, budget) as area:
        buffer = RowBuffer(area)
        for batch in batches_of(rows, schema, 333):
            buffer.add(batch)
        assert (area.spilled_bytes > 0) == (budget != UNBOUNDED)
        chunks = list(buffer.chunks(max_rows=1_000, max_bytes=1 << 30))
        assert [r for c in chunks for r in c.to_pylist()] == rows
        assert [c.num_rows for c in chunks] == [999] * 5 + [5]  # 3 batches of 333 a chunk
        # by default a chunk is at most the buffer's share of the budget
        default = list(buffer.chunks())
        assert [r for c in default for r in c.to_pylist()] == rows
        assert len(default) == (1 if budget == UNBOUNDED else 15)  # the 5-row tail joins
        whole = list(buffer.chunks(max_rows=10_000, max_bytes=1 << 30))
        assert [c.num_rows for c in whole] == [5_000]
        small = list(buffer.chunks(max_rows=10_000, max_bytes=8_000))  # bytes bound too
        assert [r for c in small for r in c.to_pylist()] == rows
        assert len(small) == 15  # one 333-row batch is 6.6 kB: no two fit in 8 kB


def test_whole_runs_never_splits_a_run_across_chunks() -> None:
    values = sorted(random.Random(5).choices(range(20), k=500))
    chunks = [pa.record_batch({"g": values[i : i + 7]}) for i in range(0, 500, 7)]
    out = list(whole_runs(iter(chunks), ["g"]))
    # every run, in order, in one chunk (one longer than a chunk as its first and last rows)
    assert [v for c in out for v in dict.fromkeys(c.column("g").to_pylist())] == sorted(set(values))
    lasts = [c.column("g")[-1].as_py() for c in out]
    firsts = [c.column("g")[0].as_py() for c in out]
    assert all(a != b for a, b in zip(lasts, firsts[1:], strict=False))


# --- the partition functions ----------------------------------------------------------------------


def run_batches(
    make_fn: Callable[[], Callable[[PartitionContext, Iterator[Any]], Iterator[Any]]],
    stores: dict[str, pa.Schema],
    micro_batches: list[list[pa.RecordBatch]],
    budget: int,
    tmp: Path,
) -> tuple[list[list[dict[str, Any]]], list[Any], int]:
    """Output rows (sorted, per micro-batch), a dump of every store after the last batch, and
    the bytes spilled."""
    opened = {
        s: verstore.VersionedStore.in_memory(history_retention_ms=25, segment_interval_ms=5)
        for s in stores
    }
    codecs = {s: codec(values) for s, values in stores.items()}
    outputs = []
    spilled = 0
    for b, batches in enumerate(micro_batches):
        with SpillArea(tmp, budget) as area:
            ctx = PartitionContext(
                stores=opened, batch_id=b, partition=0, rebuilt={}, spill=area, codecs=codecs
            )
            out = [r for batch in make_fn()(ctx, iter(batches)) for r in batch.to_pylist()]
            spilled += area.spilled_bytes
        outputs.append(sorted(out, key=repr))
    dumps = [
        (s.observed_stream_time, [s.versions(k) for k in sorted(_keys_written(micro_batches))])
        for s in opened.values()
    ]
    return outputs, dumps, spilled


def _keys_written(micro_batches: list[list[pa.RecordBatch]]) -> set[bytes]:
    from verstore._core import encode_rows

    keys: set[bytes] = set()
    for batches in micro_batches:
        for batch in batches:
            keys.update(encode_rows(batch, ["__vs_k0"]).to_pylist())
    return keys


def codec(values: pa.Schema) -> ValueCodec:
    """The values of a store that never evolved (its keys do not matter here)."""
    layout = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("k", pa.binary())]), values)
    return ValueCodec(StoreSettings(25, 5, None, layout))


def assert_budget_does_not_matter(
    make_fn: Callable[[], Any],
    stores: dict[str, pa.Schema],
    micro_batches: list[list[pa.RecordBatch]],
    tmp: Path,
) -> None:
    big_out, big_state, big_spilled = run_batches(make_fn, stores, micro_batches, UNBOUNDED, tmp)
    tiny_out, tiny_state, tiny_spilled = run_batches(make_fn, stores, micro_batches, TINY, tmp)
    assert (tiny_out, tiny_state) == (big_out, big_state)
    assert any(big_out)  # the workload produces output at all
    assert big_spilled == 0 and tiny_spilled > 0


ASOF_SCHEMA = pa.schema(
    [
        ("__vs_side", pa.int8()),
        ("__vs_k0", pa.string()),
        ("__vs_t", pa.int64()),
        ("__vs_s0", pa.int64()),
        ("__vs_v0", pa.float64()),
        ("__vs_b0", pa.int32()),
    ]
)


def asof_rows(rng: random.Random, n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        table = rng.random() < 0.5
        rows.append(
            {
                "__vs_side": 0 if table else 1,
                "__vs_k0": rng.choice(["a", "b", "c", "d", None]),
                "__vs_t": rng.choice([rng.randrange(60), None]) if table else rng.randrange(70),
                "__vs_s0": None if table else i,
                "__vs_v0": float(rng.randrange(5)) if table else None,
                "__vs_b0": rng.randrange(3) if table else None,
            }
        )
    return rows


@pytest.mark.parametrize("inner", [False, True])
@pytest.mark.parametrize("tie_breaker", [False, True])
def test_asof_join_partition_is_the_same_with_any_memory_budget(
    tmp_path: Path, inner: bool, tie_breaker: bool
) -> None:
    rng = random.Random(11)
    micro_batches = [batches_of(asof_rows(rng, 400), ASOF_SCHEMA, 37) for _ in range(4)]
    stored = ["__vs_v0", "__vs_b0"] if tie_breaker else ["__vs_v0"]

    def make() -> Any:
        return _AsofPartition(
            store="asof",
            keys=["__vs_k0"],
            stream_cols=["__vs_s0"],
            values=["__vs_v0"],
            tie_breakers=["__vs_b0"] if tie_breaker else [],
            out_names=["order", "price", "from", "to"],
            inner=inner,
        )

    values = pa.schema([ASOF_SCHEMA.field(c) for c in stored])
    assert_budget_does_not_matter(make, {"asof": values}, micro_batches, tmp_path)


LATEST_SCHEMA = pa.schema(
    [
        ("__vs_k0", pa.string()),
        ("t", pa.int64()),
        ("v", pa.string()),
        ("gone", pa.bool_()),
        ("__vs_ts", pa.int64()),
    ]
)


@pytest.mark.parametrize("emit", ["changes", "latest", "all"])
@pytest.mark.parametrize("previous", [False, True])
def test_latest_by_timestamp_partition_is_the_same_with_any_memory_budget(
    tmp_path: Path, emit: str, previous: bool
) -> None:
    rng = random.Random(12)

    def rows(n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            t = rng.randrange(60)
            out.append(
                {
                    "__vs_k0": rng.choice("abcdef"),
                    "t": t,
                    "v": rng.choice(["x", "y", None]),
                    "gone": rng.random() < 0.15,
                    "__vs_ts": t,
                }
            )
        return out

    micro_batches = [batches_of(rows(300), LATEST_SCHEMA, 41) for _ in range(4)]
    names = ["__vs_k0", "t", "v", "change", *(["previous_v"] if previous else [])]

    def make() -> Any:
        return _LatestPartition(
            store="latest", keys=["__vs_k0"], time_col="t", values=["v"], deletes="gone",
            emit=emit, previous=previous, out_names=names,
        )  # fmt: skip

    values = pa.schema([pa.field("v", pa.string())])
    assert_budget_does_not_matter(make, {"latest": values}, micro_batches, tmp_path)


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
@pytest.mark.parametrize("lookup", ["as_of", "latest"])
def test_table_join_partition_is_the_same_with_any_memory_budget(
    tmp_path: Path, how: str, lookup: str
) -> None:
    side_type = pa.struct([("x", pa.int64())])
    schema = pa.schema(
        [
            ("__vs_k0", pa.string()),
            ("__vs_side", pa.int8()),
            ("__vs_ts", pa.int64()),
            ("__vs_left", side_type),
            ("__vs_right", pa.struct([("y", pa.string())])),
        ]
    )
    rng = random.Random(13)

    def rows(n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            left = rng.random() < 0.5
            out.append(
                {
                    "__vs_k0": rng.choice("abcde"),
                    "__vs_side": 0 if left else 1,
                    "__vs_ts": rng.randrange(50),
                    "__vs_left": {"x": rng.randrange(4)} if left else None,
                    "__vs_right": None if left else {"y": rng.choice("pqr")},
                }
            )
        return out

    micro_batches = [batches_of(rows(300), schema, 29) for _ in range(4)]

    def make() -> Any:
        return _JoinPartition(
            stores=("j_left", "j_right"), keys=["__vs_k0"], how=how, lookup=lookup,
            out_names=["k", "x", "y"], key_schema=pa.schema([pa.field("__vs_k0", pa.string())]),
        )  # fmt: skip

    sides = {"j_left": pa.schema([("x", pa.int64())]), "j_right": pa.schema([("y", pa.string())])}
    assert_budget_does_not_matter(make, sides, micro_batches, tmp_path)
