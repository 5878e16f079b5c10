"""An ``asof_join`` query on ``local-cluster[2,1,1024]``, run by ``test_local_cluster.py``.

A separate process: one SparkContext per process, and the test session already has one.
Usage: ``python local_cluster_job.py <work dir> [<packed environment>]``; the work dir holds
the input directories ``orders/`` and ``prices/`` (written by the test with
``streams.write_batches``). With a packed environment (a ``venv-pack`` archive), executors run
their Python workers from it, shipped with ``spark.archives`` as ``docs/spark.md`` describes.
Prints one JSON line: the output rows per batch id, per executor the store partitions whose
local copies it holds, and where the executors' Python workers imported verstore from.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from streams import Collector, gen_join, ms, run_available_now


def where_verstore_is(_: Any) -> tuple[str, str]:
    import verstore

    return verstore.__file__, sys.executable


def main(work: Path, environment: Path | None) -> None:
    import verstore.spark
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local-cluster[2,1,1024]")
    if environment is None:
        builder = builder.config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    else:
        # As docs/spark.md ships a packed environment: executors unpack the archive into their
        # working directory and start their Python workers from it; the driver keeps its own.
        os.environ["PYSPARK_PYTHON"] = "./environment/bin/python"
        builder = builder.config("spark.archives", f"{environment}#environment")
    spark = (
        builder.appName("verstore-local-cluster")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.task.maxFailures", "1")
        # Short-lived executors, as the driver (SPARK_SUBMIT_OPTS, tests/spark/conftest.py).
        .config("spark.executor.extraJavaOptions", os.environ.get("SPARK_SUBMIT_OPTS", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # No local_dir: each executor keeps its copies under its own SPARK_LOCAL_DIRS, so a
        # partition that moves to the other executor is rebuilt from the checkpoint.
        verstore.spark.configure(spark, str(work / "verstore"), snapshot_interval=2)
        joined = gen_join(spark, work, num_partitions=4)
        sink = Collector()
        run_available_now(joined, work / "chk", sink, timeout_s=300)
        executors = sorted(
            {
                str(p.relative_to(work / "spark-local")).split("/verstore/")[0]: []
                for p in (work / "spark-local").glob("**/verstore/asof/q=*/p=*")
            }
        )
        holdings: dict[str, list[int]] = {e: [] for e in executors}
        for p in (work / "spark-local").glob("**/verstore/asof/q=*/p=*"):
            executor = str(p.relative_to(work / "spark-local")).split("/verstore/")[0]
            holdings[executor].append(int(p.name.removeprefix("p=")))
        result: dict[str, Any] = {
            "batches": {
                str(b): [{k: ms(v) for k, v in row.items()} for row in rows]
                for b, rows in sink.batches.items()
            },
            "calls": sink.calls,
            "store_partitions_by_executor_dir": {e: sorted(v) for e, v in holdings.items()},
            "executors": spark.sparkContext._jsc.sc().getExecutorIds().size(),
            "executor_verstore": sorted(
                set(spark.sparkContext.parallelize(range(8), 8).map(where_verstore_is).collect())
            ),
        }
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    packed = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    if packed is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(Path(sys.argv[1]), packed)
