"""verstore on PySpark Structured Streaming (needs the ``verstore[spark]`` extra).

Partition mode (``repartition`` + ``mapInArrow``) runs the store next to the data: each task
opens its partition's stores at the micro-batch's version and commits when done. See
``docs/spark.md``.
"""

from verstore.spark._conf import configure
from verstore.spark._inspect import inspect
from verstore.spark._metrics import partition_metrics, progress_metrics
from verstore.spark._read_store import read_store
from verstore.spark._repartition import change_store_settings, repartition_store
from verstore.spark._runtime import PartitionContext, StoreSpec, map_partitions_with_stores
from verstore.spark.joins import asof_join
from verstore.spark.latest_by_timestamp import latest_by_timestamp
from verstore.spark.stateful import (
    HISTORY_STATE_SCHEMA,
    GroupHistory,
    VersionedStatefulProcessor,
    load_history,
    save_history,
)
from verstore.spark.table_join import versioned_table_join

__all__ = [
    "HISTORY_STATE_SCHEMA",
    "GroupHistory",
    "PartitionContext",
    "StoreSpec",
    "VersionedStatefulProcessor",
    "asof_join",
    "change_store_settings",
    "configure",
    "inspect",
    "latest_by_timestamp",
    "load_history",
    "map_partitions_with_stores",
    "partition_metrics",
    "progress_metrics",
    "read_store",
    "repartition_store",
    "save_history",
    "versioned_table_join",
]
