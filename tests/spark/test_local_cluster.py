"""``asof_join`` on ``local-cluster[2,1,1024]``: two executor processes, so a store partition
runs in one executor in one batch and in the other later (rebuilt from the checkpoint there).

The query runs in a subprocess (``local_cluster_job.py``): only one SparkContext per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    OUT_COLUMNS,
    gen_oracle,
    gen_schemas,
    generate,
    normalized,
    write_batches,
)

JOB = Path(__file__).with_name("local_cluster_job.py")


@pytest.mark.usefixtures("local_cluster_work")
def test_asof_join_on_two_executors_matches_oracle(tmp_path: Path) -> None:
    batches = generate(41, batches=4)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(JOB), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"local-cluster job failed (exit {done.returncode}):\n{done.stderr[-6000:]}"
    )
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))

    assert result["executors"] == 2
    holdings = result["store_partitions_by_executor_dir"]
    assert len(holdings) == 2, holdings  # both executors ran store tasks
    assert set().union(*holdings.values()) == {0, 1, 2, 3}
    assert result["calls"] == [0, 1, 2, 3]
    rows = [row for b in sorted(result["batches"], key=int) for row in result["batches"][b]]
    expected = gen_oracle(batches, how="left", tie_breaker="seq")
    assert normalized(rows, OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
