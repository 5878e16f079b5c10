"""An ``asof_join`` whose table side holds millions of keys per partition, on
``local-cluster[1,2,2048]``, run by ``test_memory_cap.py`` with ``PYSPARK_PYTHON`` its wrapper
that starts the executor's Python workers under a memory cap.

A separate process: one SparkContext per process, and the test session already has one.
Usage: ``python memory_cap_job.py <work dir> <memory_limit_mb>``; the work dir
holds the input directories ``orders/`` and ``prices/``, one file per micro-batch. Writes the
output rows to ``<work>/out.arrow`` and prints one ``RESULT`` JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow as pa


def main(work: Path, memory_limit_mb: int) -> None:
    import verstore.spark
    from pyspark.sql import SparkSession
    from streams import Collector, run_available_now

    spark = (
        SparkSession.builder.master("local-cluster[1,2,2048]")
        .appName("verstore-memory-cap")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.task.maxFailures", "1")
        .config("spark.executor.extraJavaOptions", os.environ.get("SPARK_SUBMIT_OPTS", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        verstore.spark.configure(spark, str(work / "verstore"), memory_limit_mb=memory_limit_mb)

        def read(name: str, ddl: str) -> object:
            return (
                spark.readStream.schema(ddl)
                .option("maxFilesPerTrigger", 1)
                .parquet(str(work / name))
            )

        joined = verstore.spark.asof_join(
            read("orders", "id LONG, key LONG, t LONG"),
            read("prices", "key LONG, valid_from LONG, price DOUBLE, note STRING"),
            on="key",
            stream_time="t",
            table_time="valid_from",
            table_values=["price", "note"],
            how="left",
        )
        sink = Collector()
        run_available_now(joined, work / "chk", sink, timeout_s=1800)
        rows = sink.rows()
        table = pa.Table.from_pylist(rows) if rows else pa.table({})
        with pa.OSFile(str(work / "out.arrow"), "wb") as out:
            with pa.ipc.new_file(out, table.schema) as writer:
                writer.write_table(table)
        print("RESULT " + json.dumps({"rows": len(rows), "calls": sink.calls}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]), int(sys.argv[2]))
