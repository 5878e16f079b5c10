"""The as-of join's partition function on one partition, the Rust kernel against the pyarrow path
it replaced, in one process on the same inputs.

``python -m benches.asof_partition [--keys K --rows R --batches B --rounds N]``: the workload of
``spark_asof.py`` (one partition of 4, its rows as 10 000-row Arrow batches), each path with an
in-memory store of its own that lives through the micro-batches and is never opened or
committed (the join's state work alone, as ``spark_asof.py --in-memory``). Every round runs
both paths over every micro-batch, alternating which goes first; each task's output is checked
to be the same Arrow data for both. Prints, per path, the median over rounds of the mean time of
a task over batches 1.. (batch 0 loads every key), and the median of the rounds' own ratios.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pyarrow as pa

from benches import spark_asof as S


def _context(store: Any, batch_id: int, spill: Any) -> Any:
    from verstore.checkpoint import StoreSettings
    from verstore.checkpoint.values import ValueCodec
    from verstore.spark import _runtime as R
    from verstore.spark._metrics import TaskMetrics

    spec = S.store_specs()["bench_asof"]
    return R.PartitionContext(
        stores={"bench_asof": store},
        batch_id=batch_id,
        partition=0,
        rebuilt={"bench_asof": False},
        spill=spill,
        metrics=TaskMetrics(),
        codecs={"bench_asof": ValueCodec(StoreSettings(7 * 86_400_000, None, None, spec.columns))},
    )


def run(scale: S.Scale, rounds: int, partitions: int = 4) -> dict[str, list[float]]:
    """Per path (``kernel``, ``pyarrow``), each round's mean task time (ms) over batches 1.."""
    import tempfile

    import verstore
    from verstore.spark._spill import SpillArea

    inputs = []
    for batch in S.generate(scale):
        part = S.Batch(*(S.mine(x, partitions, 0) for x in (batch.orders, batch.prices)))
        inputs.append([x.rename_columns(S.JOIN_NAMES) for x in S.tagged(part)])
    paths = {"kernel": S.partition_function(), "pyarrow": S.partition_function(reference=True)}
    results: dict[str, list[float]] = {name: [] for name in paths}
    spill_dir = tempfile.mkdtemp(prefix="verstore-asof-partition-")
    for r in range(rounds):
        stores = {
            name: verstore.VersionedStore.in_memory(history_retention_ms=7 * 86_400_000)
            for name in paths
        }
        spent: dict[str, list[float]] = {name: [] for name in paths}
        order = list(paths) if r % 2 == 0 else list(reversed(paths))
        for b, rows in enumerate(inputs):
            outputs = {}
            for name in order:
                with SpillArea(spill_dir, 256 << 20) as spill:
                    ctx = _context(stores[name], b, spill)
                    started = time.perf_counter()
                    out = list(paths[name](ctx, iter(rows)))
                    spent[name].append((time.perf_counter() - started) * 1000)
                outputs[name] = pa.Table.from_batches(out)
            if not outputs["kernel"].equals(outputs["pyarrow"]):
                raise AssertionError(f"round {r}, batch {b}: the kernel's output differs")
        for name in paths:
            results[name].append(statistics.mean(spent[name][1:]))
    return results


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = run(S.Scale(args.keys, args.rows, args.batches), args.rounds)
    for name, times in results.items():
        spread = ", ".join(f"{t:.1f}" for t in times)
        print(f"{name}: median {statistics.median(times):.1f} ms a task ({spread})")
    ratios = [k / p for k, p in zip(results["kernel"], results["pyarrow"], strict=True)]
    print(f"kernel / pyarrow: median of rounds {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
