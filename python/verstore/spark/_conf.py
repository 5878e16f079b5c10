"""``spark.verstore.*`` settings: written on the driver by :func:`configure`, read in tasks.

Every session conf whose name starts with ``spark.`` reaches Python tasks as a local property,
so tasks read their settings from ``TaskContext.getLocalProperty`` and no closure carries them.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

PREFIX = "spark.verstore."
CHECKPOINT_ROOT = PREFIX + "checkpointRoot"
STORAGE_OPTIONS = PREFIX + "storageOptions"
LOCAL_DIR = PREFIX + "localDir"
SNAPSHOT_INTERVAL = PREFIX + "snapshotInterval"
MIN_VERSIONS_TO_RETAIN = PREFIX + "minVersionsToRetain"
LOCK_TIMEOUT_S = PREFIX + "lockTimeoutSeconds"
MEMORY_LIMIT_MB = PREFIX + "memoryLimitMb"
PROGRESS_METRICS = PREFIX + "progressMetrics"
DEFAULT_MEMORY_LIMIT_MB = 512


def configure(
    spark: Any,
    checkpoint_root: str,
    *,
    storage_options: dict[str, Any] | None = None,
    local_dir: str | None = None,
    snapshot_interval: int | None = None,
    min_versions_to_retain: int | None = None,
    lock_timeout_s: float | None = None,
    memory_limit_mb: int | None = None,
    progress_metrics: bool | None = None,
) -> None:
    """Points verstore at a checkpoint location for this Spark session.

    Args:
        spark: The SparkSession.
        checkpoint_root: Where stores keep their durable versions: a path reachable from every
            executor or a ``pyarrow.fs`` URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``).
            A ``verstore/`` folder inside the query's checkpoint location is a good choice:
            deleting the checkpoint to rerun a query from scratch then deletes its state too.
            Each query keeps its state under its own query id, so a new query on a root that
            already holds state starts empty and never reads or deletes the other's files.
        storage_options: Filesystem options for a URI (e.g. S3 credentials, endpoint).
        local_dir: Where executors keep local working copies (default: the first of
            ``SPARK_LOCAL_DIRS``, else the system temp directory).
        snapshot_interval: Commits between incremental snapshots (default 10).
        min_versions_to_retain: Versions kept rebuildable by cleanup (default 100, at least 2).
        lock_timeout_s: How long a task waits for a partition's local directory held by a
            previous task of the same partition (default 60).
        memory_limit_mb: The memory a task's verstore work may use (default 512): half for
            Arrow data (its micro-batch's input while table updates are applied, its output
            until the commit), beyond which it spills to ``local_dir``; half for its open
            stores' own memory (RocksDB memtables and the cache of latest values), shared among
            them. RocksDB's block cache is one per Python worker, apart (docs/spark.md, sizing).
        progress_metrics: Whether partition-mode queries built after this call report their
            store metrics in the query progress (``observedMetrics``; default True). Spark's
            ``observe`` costs every output row some time (docs/spark.md, metrics); with False
            the metrics are still collected per partition (``partition_metrics``).
    """
    if not checkpoint_root:
        raise ValueError("checkpoint_root must be a non-empty path or URI")
    from verstore.checkpoint import CheckpointOptions

    # Refuse bad values here, on the driver, rather than in every task.
    if memory_limit_mb is not None and (
        not isinstance(memory_limit_mb, int)
        or isinstance(memory_limit_mb, bool)
        or memory_limit_mb < 1
    ):
        raise ValueError(f"memory_limit_mb must be an int >= 1, got {memory_limit_mb!r}")
    if progress_metrics is not None and not isinstance(progress_metrics, bool):
        raise TypeError(f"progress_metrics must be a bool, got {progress_metrics!r}")
    CheckpointOptions(
        snapshot_interval=10 if snapshot_interval is None else snapshot_interval,
        min_versions_to_retain=100 if min_versions_to_retain is None else min_versions_to_retain,
        lock_timeout_s=60.0 if lock_timeout_s is None else lock_timeout_s,
    )
    spark.conf.set(CHECKPOINT_ROOT, str(checkpoint_root))
    spark.conf.set(STORAGE_OPTIONS, json.dumps(storage_options or {}))
    for key, value in (
        (LOCAL_DIR, local_dir),
        (SNAPSHOT_INTERVAL, snapshot_interval),
        (MIN_VERSIONS_TO_RETAIN, min_versions_to_retain),
        (LOCK_TIMEOUT_S, lock_timeout_s),
        (MEMORY_LIMIT_MB, memory_limit_mb),
        (PROGRESS_METRICS, None if progress_metrics is None else str(progress_metrics).lower()),
    ):
        if value is not None:
            spark.conf.set(key, str(value))
        else:
            spark.conf.unset(key)


def progress_metrics_enabled(spark: Any) -> bool:
    """Whether a query built now reports store metrics in its progress (see configure)."""
    return str(spark.conf.get(PROGRESS_METRICS, "true")).strip().lower() != "false"


@dataclass(frozen=True)
class TaskConf:
    """What a task needs to open its partition stores."""

    checkpoint_root: str
    storage_options: dict[str, Any]
    local_dir: str
    batch_id: int
    partition: int
    query_id: str
    snapshot_interval: int
    min_versions_to_retain: int
    lock_timeout_s: float
    memory_limit_bytes: int

    @property
    def arrow_budget_bytes(self) -> int:
        """The Arrow data a task holds before it spills: half of the memory limit."""
        return self.memory_limit_bytes // 2

    def store_memory_mb(self, stores: int) -> int:
        """Each open store's own memory when ``stores`` are open: the other half, shared."""
        return max(8, (self.memory_limit_bytes // 2 >> 20) // max(1, stores))

    @staticmethod
    def current() -> TaskConf:
        """Reads the settings of the running task.

        Raises:
            RuntimeError: Not inside a Spark task, not in a streaming query, or
                :func:`configure` was not called.
        """
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("verstore.spark: not running inside a Spark task")

        def prop(name: str) -> str | None:
            value = ctx.getLocalProperty(name)
            return None if value in (None, "") else str(value)

        root = prop(CHECKPOINT_ROOT)
        if root is None:
            raise RuntimeError(
                "verstore.spark: no checkpoint location; call "
                "verstore.spark.configure(spark, checkpoint_root) before starting the query"
            )
        batch = prop("streaming.sql.batchId")
        if batch is None:
            raise RuntimeError(
                "verstore.spark: no micro-batch id; verstore's stateful operators run in "
                "streaming queries only"
            )
        query_id = prop("sql.streaming.queryId")
        if query_id is None:
            raise RuntimeError(
                "verstore.spark: no streaming query id; verstore's stateful operators run in "
                "streaming queries only"
            )
        local = prop(LOCAL_DIR)
        if local is None:
            dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
            base = dirs.split(",")[0] if dirs else tempfile.gettempdir()
            local = os.path.join(base, "verstore")
        return TaskConf(
            checkpoint_root=root,
            storage_options=json.loads(prop(STORAGE_OPTIONS) or "{}"),
            local_dir=local,
            batch_id=int(batch),
            partition=ctx.partitionId(),
            query_id=query_id,
            snapshot_interval=int(prop(SNAPSHOT_INTERVAL) or 10),
            min_versions_to_retain=int(prop(MIN_VERSIONS_TO_RETAIN) or 100),
            lock_timeout_s=float(prop(LOCK_TIMEOUT_S) or 60),
            memory_limit_bytes=int(prop(MEMORY_LIMIT_MB) or DEFAULT_MEMORY_LIMIT_MB) << 20,
        )
