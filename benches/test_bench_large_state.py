"""Large state beside its same-run ceiling: verstore and raw RocksDB (rocksdict) at millions of
keys, each run in a fresh process (``benches/large_state.py``: the workload, the baseline and
what is measured), raw first, then raw_rmw (Kafka's read-before-write put on raw RocksDB: the
ceiling of any store that reads a key's newest version before writing), then verstore, per size.

Reported per run (``extra_info``): put and as-of read rows/s (warm, at version times; and on
the reopened store at random times, against raw's point reads of the newest entries), the ratio
of each to raw's in the same run, the process's CPU time a put and a reopened read, peak RSS
over the process's baseline, RSS after every store closed, disk bytes per version. The
benchmark's own time is the whole child (data generation included): read the figures, not it.

Sizes: ``VERSTORE_BENCH_LARGE_KEYS`` (comma-separated, default ``1000000,4000000``; add
``16000000`` for issue 33's long size), the memory limit ``VERSTORE_BENCH_LARGE_BUDGET_MB``
(default 256).

    VERSTORE_BENCH_LARGE_KEYS=1000000,4000000,16000000 .venv/bin/python -m pytest \\
        benches/test_bench_large_state.py --benchmark-only -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

KEYS = [int(k) for k in os.environ.get("VERSTORE_BENCH_LARGE_KEYS", "1000000,4000000").split(",")]
BUDGET_MB = int(os.environ.get("VERSTORE_BENCH_LARGE_BUDGET_MB", "256"))
ROOT = Path(__file__).resolve().parent.parent

#: The raw contenders' results per size and kind, for the ratios of the runs that follow them.
_RAW: dict[tuple[int, str], dict[str, Any]] = {}


def _child(kind: str, keys: int, work: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benches.large_state", kind, str(keys), f"--budget-mb={BUDGET_MB}"],
        cwd=ROOT,
        env={**os.environ, "VERSTORE_BENCH_DIR": str(work)},
        capture_output=True,
        text=True,
        timeout=6 * 3600,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("kind", ["raw", "raw_rmw", "verstore"])
@pytest.mark.parametrize("keys", KEYS)
def test_large_state(benchmark: Any, keys: int, kind: str, tmp_path: Path) -> None:
    benchmark.group = "large_state"
    result: dict[str, Any] = {}

    def run() -> None:
        result.update(_child(kind, keys, tmp_path))

    benchmark.pedantic(run, rounds=1, iterations=1)
    if not result:  # --benchmark-disable: the function ran outside pedantic's timing
        run()
    if kind in ("raw", "raw_rmw"):
        _RAW[keys, kind] = result
    if kind != "raw" and (keys, "raw") in _RAW:
        raw = _RAW[keys, "raw"]
        result["put_x_raw"] = result["put_rows_per_s"] / raw["put_rows_per_s"]
        result["disk_x_raw"] = result["disk_bytes_per_version"] / raw["disk_bytes_per_version"]
        if result["read_rows_per_s"]:
            result["read_x_raw"] = result["read_rows_per_s"] / raw["read_rows_per_s"]
        if result.get("reopened_read_rows_per_s"):
            cold = raw["reopened_read_rows_per_s"]
            result["reopened_read_x_raw"] = result["reopened_read_rows_per_s"] / cold
    if kind == "verstore" and (keys, "raw_rmw") in _RAW:
        rmw = _RAW[keys, "raw_rmw"]["put_rows_per_s"]
        result["put_x_raw_rmw"] = result["put_rows_per_s"] / rmw
    benchmark.extra_info.update(result)
    assert result["put_rows_per_s"] > 0
    assert kind == "raw_rmw" or result["read_rows_per_s"] > 0
