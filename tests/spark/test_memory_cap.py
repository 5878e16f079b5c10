"""An ``asof_join`` with 2 million table keys per partition, its Python workers under a memory
cap as a container platform applies one (a memory cgroup), matches its oracle, no worker is
killed, and docs/spark.md's sizing formula predicts the workers' peak RSS within 20%.

Why a cgroup and not ``spark.executor.pyspark.memory``: Spark applies that one as
``RLIMIT_AS``, a cap on address space, and RocksDB's threads and allocators reserve address
space far beyond what they use (a worker whose RSS peaked at 368 MB needed an address-space
limit above 1 GB; at the formula's size RocksDB's allocation fails and aborts the process).
YARN and Kubernetes cap a container's memory with a cgroup, which counts memory used.

Behind ``VERSTORE_LONG_TESTS=1`` (about ten minutes); needs a writable memory cgroup (v1 or v2)
under the test process's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("VERSTORE_LONG_TESTS") != "1", reason="long test: VERSTORE_LONG_TESTS=1"
)

JOB = Path(__file__).with_name("memory_cap_job.py")
KEYS = 4_000_000  # two partitions: 2 million keys each
UPDATED = 200_000
LOOKUPS = 200_000
MEMORY_LIMIT_MB = 512  # configure()'s default
WORKERS = 2  # local-cluster[1,2,...]: one executor with two cores


def _predicted_worker_mb(memory_limit_mb: int) -> float:
    """docs/spark.md, Memory per Python worker: 1.1 x memoryLimitMb + 32 MB + 140 MB."""
    return 1.1 * memory_limit_mb + 32 + 140


def _notes(keys: np.ndarray) -> pa.Array:
    """A 100-character text per key: table rows of the size of a small record, so that the first
    micro-batch's 2 million rows per partition fill the Arrow half of ``memoryLimitMb``."""
    return pa.array([f"{k:0100d}" for k in keys.tolist()], pa.string())


def _write_inputs(work: Path) -> dict[int, float | None]:
    """Three micro-batches: every key's first version; new versions of some keys; lookups at
    random times. Returns the oracle: lookup id -> the price valid at its time (None: none)."""
    rng = np.random.default_rng(33)
    keys = rng.permutation(KEYS).astype(np.int64)
    first = 1_000 + keys % 1_000
    updated = rng.choice(KEYS, UPDATED, replace=False).astype(np.int64)
    prices = [
        pa.table({"key": keys, "valid_from": first, "price": keys * 1.0, "note": _notes(keys)}),
        pa.table({"key": updated, "valid_from": np.full(UPDATED, 5_000), "price": updated + 0.5,
                  "note": _notes(updated)}),
        pa.table({"key": pa.array([], pa.int64()), "valid_from": pa.array([], pa.int64()),
                  "price": pa.array([], pa.float64()), "note": pa.array([], pa.string())}),
    ]  # fmt: skip
    lookup_keys = rng.integers(0, KEYS, LOOKUPS).astype(np.int64)
    times = rng.integers(0, 6_000, LOOKUPS).astype(np.int64)
    ids = np.arange(LOOKUPS, dtype=np.int64)
    empty = pa.table({n: pa.array([], pa.int64()) for n in ("id", "key", "t")})
    orders = [empty, empty, pa.table({"id": ids, "key": lookup_keys, "t": times})]
    for name, tables in (("prices", prices), ("orders", orders)):
        (work / name).mkdir()
        for i, table in enumerate(tables):
            pq.write_table(table, work / name / f"part-{i:05d}.parquet")
            os.utime(work / name / f"part-{i:05d}.parquet", (1_700_000_000 + i,) * 2)
    is_updated = np.zeros(KEYS, dtype=bool)
    is_updated[updated] = True
    oracle: dict[int, float | None] = {}
    for i, k, t in zip(ids.tolist(), lookup_keys.tolist(), times.tolist(), strict=True):
        if t >= 5_000 and is_updated[k]:
            oracle[i] = k + 0.5
        elif t >= 1_000 + k % 1_000:
            oracle[i] = k * 1.0
        else:
            oracle[i] = None
    return oracle


def _memory_cgroup(name: str, limit_bytes: int) -> Path:
    """A child of this process's memory cgroup, capped at ``limit_bytes``."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and Path("/sys/fs/cgroup/memory").is_dir():
            group = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / name
            group.mkdir()
            (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if (group / "memory.memsw.limit_in_bytes").exists():  # no swapping past the cap
                (group / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
            return group
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").is_file():
            root = Path("/sys/fs/cgroup") / path.lstrip("/")
            if "memory" in (root / "cgroup.controllers").read_text().split():
                group = root / name
                group.mkdir()
                (group / "memory.max").write_text(str(limit_bytes))
                (group / "memory.swap.max").write_text("0")
                return group
    raise AssertionError("no writable memory cgroup under this process's own (v1 or v2)")


def _oom_kills(group: Path) -> int:
    for events in ("memory.events", "memory.oom_control"):
        if (group / events).is_file():
            for line in (group / events).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    return 0


class _PeakWatcher:
    """Polls the cgroup's processes for their peak RSS (``VmHWM``, the kernel's own high-water
    mark, so polling misses no peak of a process it saw)."""

    def __init__(self, group: Path) -> None:
        self.group = group
        self.peaks_kb: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _PeakWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid in (self.group / "cgroup.procs").read_text().split():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue  # exited
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        kb = int(line.split()[1])
                        self.peaks_kb[int(pid)] = max(self.peaks_kb.get(int(pid), 0), kb)


@pytest.fixture
def capped_group(tmp_path: Path) -> Iterator[Path]:
    # The Python side's share of the executor's memoryOverhead by the formula: the workers and
    # the daemon they fork from.
    limit = int((WORKERS * _predicted_worker_mb(MEMORY_LIMIT_MB) + 50) * 2**20)
    group = _memory_cgroup(f"verstore-test-{os.getpid()}-{tmp_path.name}", limit)
    yield group
    for _ in range(100):  # the workers exit with the job's executor
        if not (group / "cgroup.procs").read_text().split():
            break
        time.sleep(0.1)
    group.rmdir()


@pytest.mark.usefixtures("local_cluster_work")
def test_asof_join_with_millions_of_keys_per_partition_under_a_memory_cap(
    tmp_path: Path, capped_group: Path
) -> None:
    oracle = _write_inputs(tmp_path)
    wrapper = tmp_path / "capped-python"
    wrapper.write_text(
        f'#!/bin/sh\necho $$ > {capped_group / "cgroup.procs"}\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    # PySpark takes the workers' interpreter from the driver's PYSPARK_PYTHON.
    env = {**os.environ, "PYSPARK_PYTHON": str(wrapper), "PYSPARK_DRIVER_PYTHON": sys.executable}
    with _PeakWatcher(capped_group) as watcher:
        done = subprocess.run(
            [sys.executable, str(JOB), str(tmp_path), str(MEMORY_LIMIT_MB)],
            capture_output=True,
            text=True,
            timeout=3600,
            env=env,
            cwd=tmp_path,
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"memory-capped job failed (exit {done.returncode}, OOM kills in its cgroup "
        f"{_oom_kills(capped_group)}):\n{done.stderr[-6000:]}"
    )
    assert _oom_kills(capped_group) == 0
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["calls"] == [0, 1, 2]

    with pa.memory_map(str(tmp_path / "out.arrow")) as source:
        out = pa.ipc.open_file(source).read_all()
    got = dict(zip(out["id"].to_pylist(), out["price"].to_pylist(), strict=True))
    assert len(got) == out.num_rows == LOOKUPS
    columns = (out[name].to_pylist() for name in ("key", "price", "note"))
    notes = zip(*columns, strict=True)
    assert all(n == (None if p is None else f"{k:0100d}") for k, p, n in notes)
    wrong = {i: (got[i], p) for i, p in oracle.items() if got[i] != p}
    assert not wrong, f"{len(wrong)} lookups differ from the oracle, e.g. {list(wrong.items())[:5]}"

    predicted = _predicted_worker_mb(MEMORY_LIMIT_MB)
    assert watcher.peaks_kb, "no Python worker ran in the capped cgroup"
    worker_peak = max(watcher.peaks_kb.values()) / 1024
    print(f"\nworker peak RSS {worker_peak:.0f} MB, predicted {predicted:.0f} MB "
          f"(peaks by pid: { {p: kb // 1024 for p, kb in watcher.peaks_kb.items()} })")  # fmt: skip
    assert abs(worker_peak - predicted) <= 0.2 * predicted, (worker_peak, predicted)
