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

import shutil
import statistics
from pathlib import Path
from typing import Any

from . import spark_asof
from .spark_rounds import in_rounds, paired, workload, workload_parser

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
    parser = workload_parser(__doc__, keys=10_000, rounds=6, work="/tmp/verstore-metrics-cost")
    args = parser.parse_args()
    batches = workload(args)
    spark = spark_asof.session(4, "2g")
    for mode in MODES:
        run(spark, mode, args.work, batches)
    rates = in_rounds(list(MODES), args.rounds, lambda mode: run(spark, mode, args.work, batches))
    medians = {mode: statistics.median(r) for mode, r in rates.items()}
    print("median rows/s", {m: round(v) for m, v in medians.items()}, end=" ")
    print(f"on/off {medians['on'] / medians['off']:.3f}", end=" ")
    print(f"sums/off {medians['sums'] / medians['off']:.3f}")
    for mode in ("on", "sums"):
        ratio = statistics.median(paired(rates, mode, "off"))
        print(f"median of the rounds' {mode}/off {ratio:.3f}")
    spark.stop()
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
