"""Peak memory of committing and replaying a large changelog: bounded, whatever its size.

A partition store takes ``VERSTORE_BENCH_CHANGELOG_ROWS`` writes (default 200,000, a smoke
size; the figures in docs/checkpoint.md are from 2,000,000: 8-byte keys over 1,000,000
distinct keys, 48-byte values, 137 MB of changelog) and commits them; a second store rebuilds
that version from the checkpoint by replaying the changelog. Each runs in a fresh child
process, which reports its peak RSS (``VmHWM``, reset before each phase) for the writes, the
commit and the replay. The child uses only the ``PartitionStore`` API, so it measures older
builds too:

    VERSTORE_BENCH_CHANGELOG_ROWS=2000000 .venv/bin/python -m pytest \\
        benches/test_bench_changelog_memory.py -s
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from .child import run_json

ROWS = int(os.environ.get("VERSTORE_BENCH_CHANGELOG_ROWS", "200000"))

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import pyarrow as pa
    from verstore.checkpoint import CheckpointOptions, PartitionStore

    phase, rows, root, local = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    options = CheckpointOptions(snapshot_interval=1_000_000)
    # A small store budget (memtables, cache of latest values), so that what a changelog costs
    # stands out; the process-wide block cache (128 MB) is apart.
    settings = dict(history_retention_ms=10**12, options=options, memory_limit_mb=32)

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def binary(data, width, n):
        offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])

    out = {"phase": phase, "rows": rows}
    if phase == "commit":
        part = PartitionStore.open(root, "mem", 0, 0, local, **settings)
        rng = np.random.default_rng(7)
        reset_peak()
        out["rss_before_writes_mb"] = status("VmRSS:")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            keys = rng.integers(0, max(rows // 2, 1), n).astype(">u8").tobytes()
            values = rng.integers(0, 256, 48 * n, dtype=np.uint8).tobytes()
            part.store.put_batch(binary(keys, 8, n), binary(values, 48, n),
                                 np.arange(start, start + n, dtype=np.int64))
        out["writes_peak_mb"] = status("VmHWM:")
        reset_peak()
        out["rss_before_commit_mb"] = status("VmRSS:")
        started = time.perf_counter()
        part.commit()
        out["commit_seconds"] = time.perf_counter() - started
        out["commit_peak_mb"] = status("VmHWM:")
        out["changelog_mb"] = part.commit_stats.changelog_bytes / 2**20
    else:
        reset_peak()
        out["rss_before_replay_mb"] = status("VmRSS:")
        started = time.perf_counter()
        part = PartitionStore.open(root, "mem", 0, 1, local, read_only=True, **settings)
        out["replay_seconds"] = time.perf_counter() - started
        out["replay_peak_mb"] = status("VmHWM:")
        out["replayed"] = part.stats.replayed
        out["observed_stream_time"] = part.store.observed_stream_time
        part.abort()
    print(json.dumps(out))
    """
)


def run_child(phase: str, rows: int, root: Path, local: Path) -> dict[str, float]:
    return run_json(CHILD, phase, rows, root, local)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
@pytest.mark.benchmark(group="memory")
def test_commit_and_replay_of_a_large_changelog_hold_no_changelog_in_memory(
    tmp_path: Path,
) -> None:
    committed = run_child("commit", ROWS, tmp_path / "checkpoint", tmp_path / "writer")
    replayed = run_child("replay", ROWS, tmp_path / "checkpoint", tmp_path / "reader")
    print(f"\n{json.dumps(committed)}\n{json.dumps(replayed)}")
    assert replayed["replayed"] == 1
    assert replayed["observed_stream_time"] == ROWS - 1
    if ROWS >= 1_000_000:
        # Neither holds anything of the size of the changelog: a commit adds a few buffers to
        # what the writes left, and a replay needs no more than writing the same rows did (the
        # store's own memory and RocksDB's block cache) plus one chunk.
        assert committed["changelog_mb"] > 100
        assert committed["commit_peak_mb"] - committed["rss_before_commit_mb"] < 64
        writes = committed["writes_peak_mb"] - committed["rss_before_writes_mb"]
        assert replayed["replay_peak_mb"] - replayed["rss_before_replay_mb"] < writes + 32
