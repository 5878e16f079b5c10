"""A streaming query whose Python workers cannot import verstore, run by ``test_workers.py``.

A separate process: its workers run another interpreter (``PYSPARK_PYTHON``), which a session
takes when it starts. Usage: ``python worker_without_verstore_job.py <work dir> <verstore's
parent dir>``: the driver imports verstore from there; the workers' Python has PySpark and
pyarrow but not verstore. Prints one line ``RESULT <json>``: the error the query ended with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(work: Path) -> None:
    import verstore.spark
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("verstore-worker-without-verstore")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    verstore.spark.configure(spark, str(work / "verstore"), local_dir=str(work / "local"))
    events = spark.readStream.schema("k string, t long").parquet(str(work / "input"))

    def passthrough(ctx: verstore.spark.PartitionContext, batches: object) -> object:
        return list(batches)  # type: ignore[call-overload]

    out = verstore.spark.map_partitions_with_stores(
        events, keys=["k"], num_partitions=1,
        stores={"s": verstore.spark.StoreSpec(history_retention_ms=1000)},
        fn=passthrough, schema="k string, t long",
    )  # fmt: skip
    query = (
        out.writeStream.format("noop")
        .option("checkpointLocation", str(work / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    error = ""
    try:
        query.awaitTermination(300)
    except Exception as e:
        error = str(e)
    print("RESULT " + json.dumps({"error": error}), flush=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[2])  # verstore for the driver only
    main(Path(sys.argv[1]))
