"""Python workers that cannot import verstore (docs/spark.md, Shipping verstore to executors):
a venv on the driver, another interpreter on the workers. The query fails with one error that
names the interpreter the workers ran and how to point them at one that has verstore, not a
``ModuleNotFoundError`` inside a JVM stack trace.

The query runs in a subprocess (``worker_without_verstore_job.py``): a session takes its
workers' interpreter when it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import verstore

JOB = Path(__file__).with_name("worker_without_verstore_job.py")


def python_without_verstore(where: Path) -> Path:
    """A real environment with this one's packages (PySpark, pyarrow, pandas) but not
    verstore: a venv whose one ``.pth`` line names this environment's site-packages (``.pth``
    files there, such as an editable install's, are not read through it)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    (site,) = where.glob("lib/python*/site-packages")
    (site / "packages.pth").write_text(purelib + "\n")
    python = where / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([str(python), "-c", "import verstore"], env=env, capture_output=True)
    assert found.returncode != 0, "the workers' Python must not find verstore"
    return python


def test_workers_without_verstore_fail_with_one_error_naming_their_python(tmp_path: Path) -> None:
    python = python_without_verstore(tmp_path / "env")
    (tmp_path / "input").mkdir()
    rows = pa.table({"k": ["a", "b"], "t": [1, 2]})
    pq.write_table(rows, tmp_path / "input" / "part-0.parquet")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": sys.executable}
    tree = str(Path(verstore.__file__).parents[1])
    done = subprocess.run(
        [sys.executable, str(JOB), str(tmp_path), tree],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-6000:]
    error = json.loads(lines[-1].removeprefix("RESULT "))["error"]
    assert (
        f"verstore.spark: the Spark worker's Python {python} cannot import verstore "
        f"(No module named 'verstore'; PYSPARK_PYTHON is '{python}'). Install verstore "
        f"{verstore.__version__} there, or run the workers with a Python that has it: set "
        "PYSPARK_PYTHON (or spark.pyspark.python) to it before the session starts"
    ) in error, error[-3000:]
    assert "ModuleNotFoundError" not in error
