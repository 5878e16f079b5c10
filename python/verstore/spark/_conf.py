"""``spark.verstore.*`` settings: written on the driver by :func:`configure`, read in tasks.

Every session conf whose name starts with ``spark.`` reaches Python tasks as a local property,
so tasks read their settings from ``TaskContext.getLocalProperty``.

Secrets are the exception. A session conf is copied into every job's properties, which Spark
writes in clear to its event log (what the history server and the Spark UI show): only storage
options named in :data:`PUBLIC_OPTIONS` go there. The others (credentials, tokens, proxy
settings, anything verstore does not know to be harmless) stay in a registry of the driver's
Python process, under a random id that the conf names with the keys but not the values. Each
helper takes them from there when it builds its plan and carries them inside its partition
function, which Spark pickles into the task and never into conf, properties or logs (on Spark
Connect the client pickles it, where ``configure`` ran). A task checks that the credentials it
carries are the ones the conf names, so a query built before ``configure`` or with other
credentials fails with a clear error instead of writing with the wrong identity. Two ways need
no secret on the driver at all: storage options without credentials (the filesystem's own
chain on each executor: environment, instance profile, Azure identity) and a provider function
run on the executors (``spark.verstore.storageOptionsProvider``).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verstore._checks import check_whole

PREFIX = "spark.verstore."
CHECKPOINT_ROOT = PREFIX + "checkpointRoot"
CHECKPOINT_LOCATION = PREFIX + "checkpointLocation"
STORAGE_OPTIONS = PREFIX + "storageOptions"
STORAGE_CREDENTIALS = PREFIX + "storageCredentials"
STORAGE_OPTIONS_PROVIDER = PREFIX + "storageOptionsProvider"
LOCAL_DIR = PREFIX + "localDir"
SNAPSHOT_INTERVAL = PREFIX + "snapshotInterval"
MIN_VERSIONS_TO_RETAIN = PREFIX + "minVersionsToRetain"
LOCK_TIMEOUT_S = PREFIX + "lockTimeoutSeconds"
MEMORY_LIMIT_MB = PREFIX + "memoryLimitMb"
PROGRESS_METRICS = PREFIX + "progressMetrics"
KEPT_STORES = PREFIX + "keptStoresPerWorker"
DEFAULT_KEPT_STORES = 4
DEFAULT_MEMORY_LIMIT_MB = 512
#: Twice the smallest store budget `verstore.set_memory_limit` takes.
MIN_MEMORY_LIMIT_MB = 32

#: Storage options that are never secret (``pyarrow.fs`` filesystems' endpoints, regions,
#: timeouts, names): these travel in the session conf. Every other option is treated as a
#: secret and never written to it.
PUBLIC_OPTIONS = frozenset(
    {
        # S3
        "region",
        "endpoint_override",
        "scheme",
        "anonymous",
        "connect_timeout",
        "request_timeout",
        "background_writes",
        "allow_bucket_creation",
        "allow_bucket_deletion",
        "check_directory_existence_before_creation",
        "force_virtual_addressing",
        "load_frequency",
        "role_arn",
        "session_name",
        "tls_ca_file_path",
        # GCS
        "default_bucket_location",
        "project_id",
        "retry_time_limit",
        "target_service_account",
        # Azure
        "account_name",
        "blob_storage_authority",
        "dfs_storage_authority",
        "blob_storage_scheme",
        "dfs_storage_scheme",
        "client_id",
        "tenant_id",
    }
)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Storage options split into those that may be shown (:data:`PUBLIC_OPTIONS` with plain
    JSON values) and the rest, to be kept out of confs, plans and files."""
    public: dict[str, Any] = {}
    hidden: dict[str, Any] = {}
    for key, value in options.items():
        plain = value is None or isinstance(value, str | int | float | bool)
        (public if key in PUBLIC_OPTIONS and plain else hidden)[key] = value
    return public, hidden


class StorageCredentials:
    """Secret storage options on their way to tasks, inside a pickled partition function.

    Its ``repr`` names the keys, never the values.
    """

    __slots__ = ("id", "options")

    def __init__(self, id: str, options: Mapping[str, Any]) -> None:
        self.id = id
        self.options = dict(options)

    def __repr__(self) -> str:
        return f"StorageCredentials(id={self.id!r}, keys={sorted(self.options)})"

    def __getstate__(self) -> tuple[str, dict[str, Any]]:
        return self.id, self.options

    def __setstate__(self, state: tuple[str, dict[str, Any]]) -> None:
        self.id, self.options = state


# The credentials configure() was given, by id: in the driver's (or Spark Connect client's)
# Python process only.
_registry: dict[str, StorageCredentials] = {}


def _register(options: dict[str, Any]) -> StorageCredentials:
    # The same credentials keep their id: configure() run again with them (a notebook cell run
    # twice) does not orphan the queries already built.
    for credentials in _registry.values():
        if credentials.options == options:
            return credentials
    credentials = StorageCredentials(uuid.uuid4().hex, options)
    _registry[credentials.id] = credentials
    return credentials


def plan_credentials(spark: Any) -> StorageCredentials | None:
    """The credentials ``configure`` gave ``spark``, for a partition function to carry (None
    when it gave none, or gave them in another Python process)."""
    ref = spark.conf.get(STORAGE_CREDENTIALS, None)
    return _registry.get(json.loads(ref)["id"]) if ref else None


def active_credentials() -> StorageCredentials | None:
    """:func:`plan_credentials` of the active session; None inside a task or without one."""
    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    if TaskContext.get() is not None:
        return None
    spark = SparkSession.getActiveSession()
    return None if spark is None else plan_credentials(spark)


def session_storage_options(spark: Any) -> dict[str, Any]:
    """All storage options ``configure`` gave ``spark``, as this (driver) process sees them."""
    options: dict[str, Any] = json.loads(spark.conf.get(STORAGE_OPTIONS, "{}") or "{}")
    ref = spark.conf.get(STORAGE_CREDENTIALS, None)
    if ref:
        options.update(_require_credentials(json.loads(ref), plan_credentials(spark)).options)
    provider = spark.conf.get(STORAGE_OPTIONS_PROVIDER, None)
    if provider:
        options.update(call_provider(provider, str(spark.conf.get(CHECKPOINT_ROOT, ""))))
    return options


def _micro_batch(prop: Callable[[str], str | None]) -> tuple[str, str]:
    """The task's micro-batch id and streaming query id, from its local properties."""
    batch = prop("streaming.sql.batchId")
    if batch is None and "SparkConnect" in (prop("spark.job.tags") or ""):
        raise RuntimeError(
            "verstore.spark: no micro-batch id in a Spark Connect job. Spark Connect runs "
            "the DataFrame a foreachBatch function receives from a request of its own, "
            "outside the micro-batch, so a verstore operator cannot be computed there: write "
            "the query to a streaming sink (toTable, parquet, Kafka...) or build it without "
            "foreachBatch (docs/spark.md, Spark Connect)"
        )
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
    return batch, query_id


def _local_dir(prop: Callable[[str], str | None]) -> str:
    """The configured local directory, else ``verstore`` in Spark's first local directory."""
    local = prop(LOCAL_DIR)
    if local is None:
        dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
        base = dirs.split(",")[0] if dirs else tempfile.gettempdir()
        local = os.path.join(base, "verstore")
    return local


def _task_storage_options(
    prop: Callable[[str], str | None], root: str, credentials: StorageCredentials | None
) -> dict[str, Any]:
    """The storage options: the plain ones, the credentials the plan carries, then what the
    provider returns."""
    options: dict[str, Any] = json.loads(prop(STORAGE_OPTIONS) or "{}")
    ref = prop(STORAGE_CREDENTIALS)
    if ref is not None:
        options.update(_require_credentials(json.loads(ref), credentials).options)
    provider = prop(STORAGE_OPTIONS_PROVIDER)
    if provider is not None:
        options.update(call_provider(provider, root))
    return options


def _require_credentials(
    wanted: Mapping[str, Any], carried: StorageCredentials | None
) -> StorageCredentials:
    if carried is None or carried.id != wanted["id"]:
        keys = ", ".join(wanted.get("keys", []))
        raise RuntimeError(
            f"verstore.spark: configure() was given storage credentials ({keys}) that did not "
            "reach this code: build the query (or call read_store) after "
            "verstore.spark.configure(...), in the same Python process, and start it without "
            "calling configure() with other credentials in between; or let the filesystem find "
            "its credentials on the executors (docs/spark.md, credentials)"
        )
    return carried


_PROVIDER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def call_provider(spec: str, checkpoint_root: str) -> dict[str, Any]:
    """Storage options from the provider ``module:function`` (called with the root)."""
    module, _, name = spec.partition(":")
    try:
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise RuntimeError(
            f"verstore.spark: cannot load the storage options provider {spec!r}: {e}"
        ) from None
    fn: Callable[[str], Any] = target
    options = fn(checkpoint_root)
    if not isinstance(options, Mapping):
        raise TypeError(
            f"verstore.spark: the storage options provider {spec!r} returned a "
            f"{type(options).__name__}, not a mapping"
        )
    return dict(options)


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
    storage_options_provider: str | None = None,
    kept_stores_per_worker: int | None = None,
    checkpoint_location: str | None = None,
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
        storage_options: Filesystem options for a URI (endpoint, region, credentials). Those
            of :data:`PUBLIC_OPTIONS` go into the session conf; the others (credentials) never
            do: they stay in this Python process and travel to tasks inside the partition
            functions of queries built after this call (docs/spark.md, credentials). Without
            credentials the filesystem uses its own chain on each executor.
        local_dir: Where executors keep local working copies (default: a ``verstore`` folder
            in the first of ``SPARK_LOCAL_DIRS``, else in the system temp directory).
        snapshot_interval: Commits between incremental snapshots (default 10).
        min_versions_to_retain: Versions kept rebuildable by cleanup (default 100, at least 2).
        lock_timeout_s: How long a task waits for a partition's local directory held by a
            previous task of the same partition (default 60).
        memory_limit_mb: The memory of a Python worker's verstore work (default 512, at
            least 32): half for the Arrow data of its task (its micro-batch's input while
            table updates are applied, its output until the commit), beyond which it spills
            to ``local_dir``; half the worker's memory budget for stores
            (``verstore.set_memory_limit``), shared by every store it holds, open or kept:
            RocksDB's block cache and memtables, write buffers, caches and their headroom
            (docs/spark.md, sizing).
        progress_metrics: Whether partition-mode queries built after this call report their
            store metrics in the query progress (``observedMetrics``; default True). Spark's
            ``observe`` costs every output row some time (docs/spark.md, metrics); with False
            the metrics are still collected per partition (``partition_metrics``).
        storage_options_provider: ``"module:function"``, importable on the executors: tasks
            call ``function(checkpoint_root)`` and add the storage options it returns to the
            others (for credentials that only executors can read).
        kept_stores_per_worker: How many partition stores a Python worker keeps open after
            their commits, for its next tasks of those partitions (default 4; 0 closes each
            store at its commit). A kept store skips the next open and moves the commit's
            memtable flush and snapshot off the task's path; they hold their memory within
            the worker's budget, which closes them when it is needed (docs/spark.md, sizing).
        checkpoint_location: The Spark checkpoint location of the query built next (default:
            the parent of ``checkpoint_root`` when it is one, as with a ``verstore/`` folder
            inside it). Its query id tells the helpers which state the query will open, so
            they check every store's recorded settings when they build the query, before it
            starts (docs/spark.md, Changing a running query).
    """
    if not checkpoint_root:
        raise ValueError("checkpoint_root must be a non-empty path or URI")
    from verstore.checkpoint import CheckpointOptions

    # Refuse bad values here, on the driver, rather than in every task.
    if memory_limit_mb is not None:
        check_whole(memory_limit_mb, "memory_limit_mb", MIN_MEMORY_LIMIT_MB)
    if kept_stores_per_worker is not None:
        check_whole(kept_stores_per_worker, "kept_stores_per_worker", 0)
    if progress_metrics is not None and not isinstance(progress_metrics, bool):
        raise TypeError(f"progress_metrics must be a bool, got {progress_metrics!r}")
    if storage_options_provider is not None and not (
        isinstance(storage_options_provider, str) and _PROVIDER.fullmatch(storage_options_provider)
    ):
        raise ValueError(
            f"storage_options_provider must be 'module:function', got {storage_options_provider!r}"
        )
    public, hidden = split_options(dict(storage_options or {}))
    CheckpointOptions(
        snapshot_interval=10 if snapshot_interval is None else snapshot_interval,
        min_versions_to_retain=100 if min_versions_to_retain is None else min_versions_to_retain,
        lock_timeout_s=60.0 if lock_timeout_s is None else lock_timeout_s,
    )
    spark.conf.set(CHECKPOINT_ROOT, str(checkpoint_root))
    spark.conf.set(STORAGE_OPTIONS, json.dumps(public))
    credentials = _register(hidden) if hidden else None
    for key, value in (
        (
            STORAGE_CREDENTIALS,
            None
            if credentials is None
            else json.dumps({"id": credentials.id, "keys": sorted(hidden)}),
        ),
        (STORAGE_OPTIONS_PROVIDER, storage_options_provider),
        (CHECKPOINT_LOCATION, checkpoint_location),
        (LOCAL_DIR, local_dir),
        (SNAPSHOT_INTERVAL, snapshot_interval),
        (MIN_VERSIONS_TO_RETAIN, min_versions_to_retain),
        (LOCK_TIMEOUT_S, lock_timeout_s),
        (MEMORY_LIMIT_MB, memory_limit_mb),
        (KEPT_STORES, kept_stores_per_worker),
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
    storage_options: dict[str, Any] = field(repr=False)
    local_dir: str
    batch_id: int
    partition: int
    query_id: str
    snapshot_interval: int
    min_versions_to_retain: int
    lock_timeout_s: float
    memory_limit_bytes: int
    kept_stores: int = DEFAULT_KEPT_STORES

    @property
    def arrow_budget_bytes(self) -> int:
        """The Arrow data a task holds before it spills: half of the memory limit."""
        return self.memory_limit_bytes // 2

    @property
    def store_budget_mb(self) -> int:
        """The worker's memory budget for stores (``verstore.set_memory_limit``): the other
        half, shared by every store the worker holds."""
        return self.memory_limit_bytes // 2 >> 20

    @staticmethod
    def current(credentials: StorageCredentials | None = None) -> TaskConf:
        """Reads the settings of the running task.

        Args:
            credentials: The secret storage options the partition function carries
                (:func:`plan_credentials` when its plan was built).

        Raises:
            RuntimeError: Not inside a Spark task, not in a streaming query,
                :func:`configure` was not called, or it was given credentials that
                ``credentials`` are not.
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
        batch, query_id = _micro_batch(prop)
        options = _task_storage_options(prop, root, credentials)
        return TaskConf(
            checkpoint_root=root,
            storage_options=options,
            local_dir=_local_dir(prop),
            batch_id=int(batch),
            partition=ctx.partitionId(),
            query_id=query_id,
            snapshot_interval=int(prop(SNAPSHOT_INTERVAL) or 10),
            min_versions_to_retain=int(prop(MIN_VERSIONS_TO_RETAIN) or 100),
            lock_timeout_s=float(prop(LOCK_TIMEOUT_S) or 60),
            memory_limit_bytes=int(prop(MEMORY_LIMIT_MB) or DEFAULT_MEMORY_LIMIT_MB) << 20,
            kept_stores=int(prop(KEPT_STORES) or DEFAULT_KEPT_STORES),
        )
