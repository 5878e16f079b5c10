"""Scans: throughput, and peak memory that does not grow with the store.

A persistent store of ``VERSTORE_BENCH_SCAN_KEYS`` random 8-byte keys with 32-byte values (every
tenth key has a second version, so as-of and version scans read history rows too) is scanned
whole. Throughput is timed in process (``scan``: every key's latest value; ``scan_as_of``:
every key as of the first version's time; ``scan_versions``: every version). Peak memory is
measured in fresh child processes, one per kind of scan, against a child that only opens the
store: the difference is what a scan costs, and it stays within a few batches whatever the size.
The default size is a smoke size; the figure in the closing note of issue 11 is from 10M keys:

    VERSTORE_BENCH_SCAN_KEYS=10000000 .venv/bin/python -m pytest benches/test_bench_scan.py -s
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import verstore

from .child import PEAK_RSS, run_json

KEYS = int(os.environ.get("VERSTORE_BENCH_SCAN_KEYS", "200000"))
BATCH_ROWS = 65_536
RETENTION_MS = 10**12
CHUNK = 1_000_000


def fixed_width(data: bytes, width: int) -> pa.BinaryArray:
    n = len(data) // width
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def build(path: Path, keys: int) -> None:
    """Every key at t=1 in random order, every tenth key again at t=2."""
    rng = np.random.default_rng(11)
    with verstore.VersionedStore(
        path, history_retention_ms=RETENTION_MS, write_ahead_log=False
    ) as store:
        for t, step in ((1, 1), (2, 10)):
            for start in range(0, keys, CHUNK):
                ids = np.arange(start, min(start + CHUNK, keys), step, dtype=np.uint64)
                # A bijection of the ids: keys arrive in no particular order.
                mixed = (ids * np.uint64(0x9E3779B97F4A7C15)).astype(">u8")
                n = len(ids)
                store.put_batch(
                    fixed_width(mixed.tobytes(), 8),
                    fixed_width(rng.bytes(32 * n), 32),
                    pa.array(np.full(n, t, dtype=np.int64)),
                )
        store.flush()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scan") / "store"
    started = time.perf_counter()
    build(path, KEYS)
    print(f"\nbuilt {KEYS:,} keys in {time.perf_counter() - started:.1f} s")
    return path


EXPECTED = {"scan": KEYS, "scan_as_of": KEYS, "scan_versions": KEYS + (KEYS + 9) // 10}


def run_scan(store: verstore.VersionedStore, kind: str) -> int:
    scan: Iterator[pa.RecordBatch]
    if kind == "scan":
        scan = store.scan(batch_rows=BATCH_ROWS)
    elif kind == "scan_as_of":
        scan = store.scan(as_of=1, batch_rows=BATCH_ROWS)
    else:
        scan = store.scan_versions(batch_rows=BATCH_ROWS)
    return sum(batch.num_rows for batch in scan)


@pytest.mark.parametrize("kind", ["scan", "scan_as_of", "scan_versions"])
@pytest.mark.benchmark(group="scan")
def test_scan_throughput(benchmark: Any, store_path: Path, kind: str) -> None:
    with verstore.VersionedStore(store_path, history_retention_ms=RETENTION_MS) as store:
        assert run_scan(store, kind) == EXPECTED[kind]
        rows = benchmark.pedantic(run_scan, args=(store, kind), rounds=3, iterations=1)
        assert rows == EXPECTED[kind]


CHILD = PEAK_RSS + textwrap.dedent(
    """
    import json, sys, time
    import pyarrow  # batches arrive as pyarrow objects: the baseline imports it too
    import verstore

    path, kind, batch_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = verstore.VersionedStore(path, history_retention_ms=10**12)
    started = time.perf_counter()
    rows = batches = 0
    if kind != "open":
        if kind == "scan":
            scan = store.scan(batch_rows=batch_rows)
        elif kind == "scan_as_of":
            scan = store.scan(as_of=1, batch_rows=batch_rows)
        else:
            scan = store.scan_versions(batch_rows=batch_rows)
        with scan:
            for batch in scan:
                rows += batch.num_rows
                batches += 1
    seconds = time.perf_counter() - started
    store.close()
    print(json.dumps({"peak_rss_mb": peak_rss_mb(), "seconds": seconds, "rows": rows,
                      "batches": batches}))
    """
)


def run_child(path: Path, kind: str) -> dict[str, float]:
    return run_json(CHILD, path, kind, BATCH_ROWS)


@pytest.mark.benchmark(group="scan-memory")
def test_scan_peak_rss_does_not_grow_with_the_store(store_path: Path) -> None:
    opened = run_child(store_path, "open")
    lines = [f"\n{KEYS:,} keys, batch_rows={BATCH_ROWS}: open only {opened['peak_rss_mb']:.0f} MB"]
    for kind, expected in EXPECTED.items():
        got = run_child(store_path, kind)
        assert got["rows"] == expected
        extra = got["peak_rss_mb"] - opened["peak_rss_mb"]
        lines.append(
            f"{kind}: peak RSS {got['peak_rss_mb']:.0f} MB (+{extra:.0f} MB over open), "
            f"{got['rows'] / got['seconds'] / 1e6:.2f}M rows/s, {got['seconds']:.1f} s, "
            f"{got['batches']:.0f} batches"
        )
        if KEYS >= 1_000_000:
            # Three batches of 65 536 rows (about 4 MB each) plus iterators and allocator slack:
            # nowhere near the store's size (500+ MB of keys and values at 10M keys).
            assert extra < 256, lines
    print("\n".join(lines))
