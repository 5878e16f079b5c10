"""What the store metrics in the query progress cost ``asof_join``, in one SparkSession.

``python -m benches.spark_metrics_cost [--keys K] [--rounds N]`` runs the workload of
``spark_asof.py`` (``K`` keys, ``6 K`` orders per micro-batch, 4 micro-batches
(``--batches``), 4 partitions on ``local[2]``) with the progress metrics on (the default) and off
(``configure(progress_metrics=False)``) and, for comparison, on with the earlier design of the
observed metrics (``sums``: one ``sum`` per metric, 15 aggregates, where verstore now observes
one ``collect_list``), rotating the order every round after one untimed run of each, and
prints each round's rows/s and the medians. Every run is checked against the
``merge_asof`` oracle.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path
from typing import Any

from . import spark_asof
from .spark_asof import Scale

MODES = ("on", "off", "sums")


def _sums_observed(df: Any, name: str) -> Any:
    """The earlier observed metrics: one ``sum`` per metric over the hidden JSON column."""
    from pyspark.sql import functions as F
    from verstore.spark import _metrics

    m = F.col(_metrics.METRICS)
    sums = [
        F.coalesce(F.sum(F.get_json_object(m, f"$.{n}").cast("long")), F.lit(0)).alias(n)
        for n in _metrics.NAMES
    ]
    return df.observe(name, *sums).where(m.isNull()).drop(_metrics.METRICS)


def run(spark: Any, mode: str, work: Path, batches: list[Any]) -> float:
    """One run of the join with the metrics ``mode``; its rows/s."""
    from unittest import mock

    import verstore.spark
    from verstore.spark import _metrics

    configure = verstore.spark.configure

    def configured(spark: Any, root: str, **options: Any) -> None:
        configure(spark, root, progress_metrics=mode != "off", **options)

    observed = _sums_observed if mode == "sums" else _metrics.observed
    # spark_asof.run configures the session itself, with the default metrics.
    with (
        mock.patch.object(verstore.spark, "configure", configured),
        mock.patch.object(_metrics, "observed", observed),
    ):
        result = spark_asof.run(spark, "asof_join", work / "data", work / mode, batches, 4)
    assert not result.problems, result.problems[:3]
    return result.rows_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batches", type=int, default=4, help="micro-batches per run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/verstore-metrics-cost"))
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    batches = spark_asof.generate(Scale(keys=args.keys, rows=6 * args.keys, batches=args.batches))
    spark_asof.write_inputs(batches, args.work / "data")
    spark = spark_asof.session(4, "2g")
    for mode in MODES:
        run(spark, mode, args.work, batches)
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    for i in range(args.rounds):
        for mode in MODES[i % 3 :] + MODES[: i % 3]:
            rates[mode].append(run(spark, mode, args.work, batches))
        print(i, {mode: round(r[-1]) for mode, r in rates.items()}, flush=True)
    medians = {mode: statistics.median(r) for mode, r in rates.items()}
    print("median rows/s", {m: round(v) for m, v in medians.items()}, end=" ")
    print(f"on/off {medians['on'] / medians['off']:.3f}", end=" ")
    print(f"sums/off {medians['sums'] / medians['off']:.3f}")
    # Each round runs the three side by side: the median of its ratios resists the drift of a
    # shared machine better than the ratio of the medians.
    for mode in ("on", "sums"):
        paired = statistics.median(a / b for a, b in zip(rates[mode], rates["off"], strict=True))
        print(f"median of the rounds' {mode}/off {paired:.3f}")
    spark.stop()
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
