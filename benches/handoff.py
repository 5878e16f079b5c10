"""A kept store's handoff between two processes, alone: what a task waits when Spark gives it
to the Python worker that does not hold its partition's store (docs/checkpoint.md, Handoff).

``python -m benches.handoff [--opens N] [--keys K]`` starts a second process; the two take
turns with one partition's checkpointed store, each keeping it open between its turns
(``Keeper``), so that every open after the first two is a handoff from the other process: a
request, the holder's close keeping its write buffer, the lock, the open and the buffer's load.
Each turn writes ``K`` keys (a 10 000-key table's share of one of 4 partitions by default) and
commits. Prints the median and 90th percentile of the opens, as the task sees them (from the
call to ``PartitionStore.open`` to its return), without Spark and the JVM beside them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def take_turns(role: int, directory: Path, opens: int, keys: int) -> list[float]:
    """Opens the versions ``role, role + 2, ...`` below ``opens``, each after the other process
    committed the one before; returns the opens' durations in seconds."""
    from verstore.checkpoint import CheckpointOptions, PartitionStore
    from verstore.checkpoint.kept import Keeper

    keeper = Keeper.for_process()
    marks = directory / "committed"
    marks.mkdir(exist_ok=True)
    names = [b"k%06d" % i for i in range(keys)]
    took = []
    try:
        for version in range(role, opens, 2):
            deadline = time.monotonic() + 120
            while version > 0 and not (marks / str(version - 1)).exists():
                if time.monotonic() > deadline:
                    sys.exit(f"the other process did not commit version {version - 1}")
                time.sleep(0.0005)
            started = time.perf_counter()
            part = PartitionStore.open(
                str(directory / "root"),
                "prices",
                0,
                version,
                directory / "local",
                history_retention_ms=86_400_000,
                options=CheckpointOptions(lock_timeout_s=60),
                keeper=keeper,
            )
            took.append(time.perf_counter() - started)
            times = [version * 1_000_000 + i for i in range(keys)]
            part.store.put_batch(names, [b"p" * 16] * keys, times)
            part.commit()
            (marks / str(version)).touch()
    finally:
        keeper.stop()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=80)
    parser.add_argument("--keys", type=int, default=2_500)
    parser.add_argument("--role", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == 1:
        take_turns(1, args.dir, args.opens, args.keys)
        return
    with tempfile.TemporaryDirectory(prefix="verstore-handoff-") as tmp:
        sizes = ["--opens", str(args.opens), "--keys", str(args.keys)]
        other = subprocess.Popen(
            [sys.executable, "-m", "benches.handoff", "--role", "1", "--dir", tmp, *sizes]
        )
        took = take_turns(0, Path(tmp), args.opens, args.keys)
        if other.wait() != 0:
            sys.exit("the other process failed")
    handoffs = sorted(took[1:])  # the first open of this process rebuilt or created the copy
    ms = [1000 * t for t in handoffs]
    print(
        f"{len(ms)} handoffs, {args.keys} keys a turn: open median {statistics.median(ms):.1f} ms, "
        f"90th percentile {ms[int(0.9 * (len(ms) - 1))]:.1f} ms"
    )


if __name__ == "__main__":
    main()
