"""``repartition_store`` in a process of its own (tests/spark/test_repartition.py kills it):
``python repartition_job.py ROOT STORE NUM_PARTITIONS SPARK_CHECKPOINT``."""

import json
import sys

import verstore.spark
from pyspark.sql import SparkSession

root, store, partitions, checkpoint = sys.argv[1:5]
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
report = verstore.spark.repartition_store(
    spark, root, store, int(partitions), checkpoint_location=checkpoint
)
print(json.dumps(report))
spark.stop()
