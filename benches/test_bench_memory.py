"""Peak memory of a partition-mode task over one large micro-batch: bounded by the task's budget.

``asof_join``'s partition function runs over one partition's micro-batch (half price updates,
half orders, arriving as Spark delivers them: 10k-row Arrow batches in no order) against a
persistent store, in a fresh child process, once with the default memory budget (256 MB) and
once with an unbounded one (everything held in memory, as before spilling existed). The child
reports its peak RSS. ``VERSTORE_BENCH_MEMORY_ROWS`` sets the size (default 200,000, a smoke
size; the figure in docs/spark.md is from 5,000,000).

    VERSTORE_BENCH_MEMORY_ROWS=5000000 .venv/bin/python -m pytest benches/test_bench_memory.py -s
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from .child import PEAK_RSS, run_json

ROWS = int(os.environ.get("VERSTORE_BENCH_MEMORY_ROWS", "200000"))
BUDGET_MB = 256

CHILD = PEAK_RSS + textwrap.dedent(
    """
    import json, sys, tempfile, time
    import numpy as np
    import pyarrow as pa
    import verstore
    from verstore._core import TUPLE_ENCODING
    from verstore.checkpoint import ColumnLayout, StoreSettings
    from verstore.checkpoint.values import ValueCodec
    from verstore.spark._runtime import PartitionContext
    from verstore.spark._spill import SpillArea
    from verstore.spark.joins import _AsofPartition

    rows, budget, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(7)
    schema = pa.schema([("__vs_side", pa.int8()), ("__vs_k0", pa.string()), ("__vs_t", pa.int64()),
                        ("__vs_s0", pa.int64()), ("__vs_v0", pa.float64())])
    symbols = np.array([f"SYM{i:06d}" for i in range(100_000)], dtype=object)

    def batches():
        for start in range(0, rows, 10_000):
            n = min(10_000, rows - start)
            side = rng.integers(0, 2, n).astype(np.int8)
            yield pa.RecordBatch.from_arrays([
                pa.array(side), pa.array(symbols[rng.integers(0, len(symbols), n)]),
                pa.array(rng.integers(0, 86_400_000, n)),
                pa.array(np.where(side == 1, np.arange(start, start + n), 0)),
                pa.array(np.where(side == 0, rng.random(n) * 100, np.nan)),
            ], schema=schema)

    store = verstore.VersionedStore(work + "/db", history_retention_ms=86_400_000,
                                    write_ahead_log=False)
    fn = _AsofPartition(store="asof", keys=["__vs_k0"], stream_cols=["__vs_s0"],
                        values=["__vs_v0"], tie_breakers=[], out_names=["id", "price", "f", "t"],
                        inner=False)
    layout = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("k", pa.string())]),
                             pa.schema([("__vs_v0", pa.float64())]))
    codecs = {"asof": ValueCodec(StoreSettings(86_400_000, None, None, layout))}
    start = time.perf_counter()
    out_rows = 0
    with SpillArea(work, budget) as area:
        ctx = PartitionContext(stores={"asof": store}, batch_id=0, partition=0, rebuilt={},
                               spill=area, codecs=codecs)
        for out in fn(ctx, batches()):
            out_rows += out.num_rows
        spilled = area.spilled_bytes
    print(json.dumps({"peak_rss_mb": peak_rss_mb(),
                      "seconds": time.perf_counter() - start, "output_rows": out_rows,
                      "spilled_mb": spilled / 2**20}))
    """
)


def run_child(rows: int, budget_bytes: int, work: Path) -> dict[str, float]:
    return run_json(CHILD, rows, budget_bytes, work)


@pytest.mark.benchmark(group="memory")
def test_peak_rss_of_a_large_micro_batch_is_bounded(tmp_path: Path) -> None:
    bounded = run_child(ROWS, BUDGET_MB << 20, tmp_path / "bounded")
    unbounded = run_child(ROWS, 1 << 50, tmp_path / "unbounded")
    print(
        f"\n{ROWS:,} rows, budget {BUDGET_MB} MB: peak RSS {bounded['peak_rss_mb']:.0f} MB "
        f"({bounded['seconds']:.1f} s, {bounded['spilled_mb']:.0f} MB spilled); unbounded: "
        f"{unbounded['peak_rss_mb']:.0f} MB ({unbounded['seconds']:.1f} s)"
    )
    assert bounded["output_rows"] == unbounded["output_rows"] > 0
    if ROWS >= 1_000_000:
        # The interpreter, pyarrow and RocksDB's memtable and block cache, plus the budget.
        assert bounded["peak_rss_mb"] < 2 * BUDGET_MB + 512
        assert bounded["spilled_mb"] > 0
