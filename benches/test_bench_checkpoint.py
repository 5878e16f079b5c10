"""Rebuild time of a checkpointed partition store: from changelogs only and from a snapshot.

A store of ``VERSIONS`` writes (versions of keys, out of order within a batch) is committed
as ``COMMITS`` changelogs of one lineage; the benchmark opens the last version in an empty local
directory, which rebuilds it: by replaying every changelog, or by downloading the snapshot taken
at the last commit (``OpenStats`` says which it did). Replay throughput is VERSIONS / median
seconds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from verstore.checkpoint import CheckpointOptions, OpenStats, PartitionStore

VERSIONS = int(os.environ.get("VERSTORE_BENCH_VERSIONS", "200000"))
COMMITS = 20
KEYS = max(VERSIONS // 20, 1)
RETENTION_MS = 10**12  # nothing expires: every version stays


def _build(root: Path, work: Path, snapshot_interval: int) -> int:
    rng = np.random.default_rng(7)
    per_commit = VERSIONS // COMMITS
    options = CheckpointOptions(snapshot_interval=snapshot_interval)
    for version in range(COMMITS):
        part = PartitionStore.open(
            str(root), "bench", 0, version, work, history_retention_ms=RETENTION_MS, options=options
        )
        keys = [f"k{k:08d}".encode() for k in rng.integers(0, KEYS, per_commit)]
        base = version * per_commit
        times = (base + rng.permutation(per_commit)).tolist()
        part.store.put_batch(keys, [t.to_bytes(8, "big") for t in times], times)
        part.commit()
    return COMMITS


@pytest.fixture(scope="module", params=["changelogs", "snapshot"])
def checkpoint(request: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp(f"ckpt-{request.param}")
    interval = COMMITS if request.param == "snapshot" else 10**9
    version = _build(root / "root", root / "build-local", interval)
    return root / "root", version


@pytest.mark.benchmark(group="rebuild")
def test_rebuild(benchmark: Any, checkpoint: tuple[Path, int], tmp_path: Path) -> None:
    root, version = checkpoint
    local = tmp_path / "local"

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        shutil.rmtree(local, ignore_errors=True)
        return (), {}

    stats: list[OpenStats] = []

    def rebuild() -> int:
        part = PartitionStore.open(
            str(root), "bench", 0, version, local, history_retention_ms=RETENTION_MS
        )
        stats.append(part.stats)
        n = part.store.observed_stream_time
        part.abort()
        return n

    assert benchmark.pedantic(rebuild, setup=setup, rounds=3) == VERSIONS - 1
    last = stats[-1]
    assert last.rebuilt
    if snapshot_taken(root):
        assert (last.snapshot is not None, last.replayed) == (True, 0)
    else:
        assert (last.snapshot, last.replayed) == (None, COMMITS)
    benchmark.extra_info["versions"] = VERSIONS
    benchmark.extra_info["replayed_bytes"] = last.replayed_bytes
    benchmark.extra_info["downloaded_bytes"] = last.downloaded_bytes


def snapshot_taken(root: Path) -> bool:
    return any(root.glob("bench/q=*/p=0/*.snapshot"))
