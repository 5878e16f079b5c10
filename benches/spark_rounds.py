"""``asof_join`` against the stateless pass-through, in one SparkSession, over rounds.

``python -m benches.spark_rounds [--keys K] [--rounds N] [--batches B] [--kept 0,4]`` runs the
workload of ``spark_asof.py`` (``K`` keys, ``6 K`` orders per micro-batch, ``B`` micro-batches,
4 partitions on ``local[2]``): one untimed run of the join, then every round the pass-through
and the join with each ``kept_stores_per_worker`` of ``--kept``, in an order that rotates every
round. It prints each round's rows/s, the medians, and for each join the median of the rounds'
own ratios to the pass-through: a shared machine drifts between rounds by more than the
differences measured, and a round's runs drift together. Every run is checked against the
``merge_asof`` oracle (the pass-through: every order returned).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import spark_asof
from .spark_asof import Scale

PARTITIONS = 4
FLOOR = "passthrough"


def run(spark: Any, variant: str, work: Path, batches: list[Any]) -> float:
    """One run of ``variant`` (the pass-through, or ``kept=K``: the join keeping ``K`` stores
    per worker); its rows/s."""
    name, kept = (FLOOR, None) if variant == FLOOR else ("asof_join", int(variant[5:]))
    result = spark_asof.run(
        spark, name, work / "data", work / "run", batches, PARTITIONS, kept_stores_per_worker=kept
    )
    assert not result.problems, result.problems[:3]
    return result.rows_per_s


def workload_parser(description: str | None, *, keys: int, rounds: int, work: str) -> Any:
    """The options every round driver takes: ``--keys``, ``--rounds``, ``--batches``, ``--work``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--keys", type=int, default=keys)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--batches", type=int, default=4, help="micro-batches per run")
    parser.add_argument("--work", type=Path, default=Path(work))
    return parser


def workload(args: Any) -> list[Any]:
    """The generated micro-batches (``--keys`` keys, ``6 --keys`` orders each), written under
    ``--work``/data."""
    shutil.rmtree(args.work, ignore_errors=True)
    batches = spark_asof.generate(Scale(keys=args.keys, rows=6 * args.keys, batches=args.batches))
    spark_asof.write_inputs(batches, args.work / "data")
    return batches


def in_rounds(
    variants: list[str], rounds: int, run_one: Callable[[str], float]
) -> dict[str, list[float]]:
    """Each variant's rows/s of every round, the order rotating every round (no variant always
    runs first, or right after another); prints each round as it ends."""
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(rounds):
        shift = i % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            rates[variant].append(run_one(variant))
        print(i, {v: round(r[-1]) for v, r in rates.items()}, flush=True)
    return rates


def paired(rates: dict[str, list[float]], variant: str, base: str) -> list[float]:
    """Each round's own ratio of ``variant`` to ``base``: a shared machine drifts between
    rounds, and a round's runs drift together, so their median resists the drift better than
    the ratio of the medians."""
    return [a / b for a, b in zip(rates[variant], rates[base], strict=True)]


def main() -> None:
    parser = workload_parser(__doc__, keys=100_000, rounds=5, work="/tmp/verstore-spark-rounds")
    parser.add_argument("--kept", default="4", help="kept_stores_per_worker values (a,b,...)")
    args = parser.parse_args()
    variants = [FLOOR, *(f"kept={k}" for k in args.kept.split(","))]
    batches = workload(args)
    spark = spark_asof.session(PARTITIONS, "4g")
    run(spark, variants[-1], args.work, batches)  # class loading, code generation, workers
    rates = in_rounds(variants, args.rounds, lambda v: run(spark, v, args.work, batches))
    for variant, rate in rates.items():
        ratios = paired(rates, variant, FLOOR)
        print(
            f"{variant}: median {statistics.median(rate):,.0f} rows/s, median of the rounds' "
            f"ratios to the pass-through {statistics.median(ratios):.3f} "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f})"
        )
    spark.stop()
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
