"""Queries with secret storage options and Spark's event log on, run by ``test_credentials.py``.

A separate process: the event log is set when a SparkContext starts, and the test session
already has one. Usage: ``python credentials_job.py <work dir>`` with a JSON object on stdin
(never in a file or the command line, where the test's search would find it): ``s3``, the
storage options of a bucket prefix (credentials included), ``s3_root``, the verstore root there,
and ``azure``, Azure storage options whose endpoints refuse connections. The work dir holds the
input directories ``orders/`` and ``prices/``; Spark writes its event log to ``events/`` and
its local files to ``spark-local/``.

1. An ``asof_join`` on the S3 root, run to the end, then ``read_store`` of its store.
2. The same join on an ``abfs://`` root: its tasks pass the Azure options to the filesystem,
   whose first request fails (nothing listens), so the query fails with the task's error.

Prints one JSON line: the S3 query's output rows, the rows ``read_store`` found, and whether
the Azure query failed as expected.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from streams import Collector, gen_join, run_available_now


def main(work: Path, secrets: dict[str, Any]) -> None:
    import verstore.spark
    from pyspark.sql import SparkSession

    (work / "events").mkdir(exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("verstore-credentials")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.task.maxFailures", "1")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(work / "events"))
        .config("spark.eventLog.compress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    result: dict[str, Any] = {}
    try:
        verstore.spark.configure(
            spark,
            secrets["s3_root"],
            storage_options=secrets["s3"],
            local_dir=str(work / "local"),
            snapshot_interval=2,
        )
        sink = Collector()
        run_available_now(gen_join(spark, work, num_partitions=2), work / "chk-s3", sink)
        result["s3_rows"] = len(sink.rows())
        result["read_store_rows"] = verstore.spark.read_store(spark, "asof").count()

        verstore.spark.configure(
            spark,
            "abfs://container/verstore",
            storage_options=secrets["azure"],
            local_dir=str(work / "local"),
        )
        try:
            run_available_now(
                gen_join(spark, work, num_partitions=1), work / "chk-azure", Collector()
            )
            result["azure_failed"] = False
        except Exception as e:  # the task's error, as the driver reports it
            result["azure_failed"] = True
            result["azure_error"] = str(e)
    finally:
        spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), json.loads(sys.stdin.read()))
