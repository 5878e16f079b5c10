"""Store metrics per micro-batch and partition, surfaced through Spark itself.

Every partition-mode task measures its stores: rows written and dropped as too old, the
store's size (latest keys, history rows, live segments, bytes on disk), what the commit wrote
(changelog and snapshot bytes) and how the state was opened (reused, caught up or rebuilt from
the checkpoint, and how long that took). Two ways out, both without reading logs:

* **Observed metrics in the query progress.** The task appends one extra row, after its
  output, that carries only a hidden ``__vs_metrics`` column (its partition and metrics as a
  JSON object); ``observe`` lists them per micro-batch in
  ``query.lastProgress.observedMetrics["verstore.<store>"].tasks`` and the row is filtered out
  before anything downstream sees it; :func:`progress_metrics` sums them, or gives them per
  partition. This is Spark's own per-batch channel, so it works with ``mapInArrow``, with
  every sink and on Spark Connect. The column is a string because every output row carries
  it, null: a null string costs an offset per row, where a struct of 15 longs cost 15 zeroed
  longs per row to build, send and read (measured: the join ran 8% faster at 600 000 rows per
  micro-batch with the string).
* **Per partition**, :func:`partition_metrics`: an accumulator collects each task's row (with
  its micro-batch and partition) on the driver; failed attempts do not count. Spark Connect
  sessions have no accumulators (they live in the driver's JVM, which a Connect client does
  not share): their queries run the same, with the observed metrics in the progress, and
  :func:`partition_metrics` says so for their stores instead of answering.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

METRICS = "__vs_metrics"
#: The observed metric: the list of the micro-batch's task rows (JSON objects).
TASKS = "tasks"
#: How many task rows :func:`partition_metrics` keeps (the newest).
KEEP_ROWS = 10_000


@dataclass
class TaskMetrics:
    """What one task did to its stores in one micro-batch (sums over the task's stores).

    Attributes:
        partitions: 1 per task (summed: the partitions that ran).
        rows_put: Writes the stores accepted (the commits' changelog records).
        rows_expired: Writes dropped as older than the grace period (``NOT_PUT``); not keys
            a ``latest_ttl`` ended (``keys_ttl_expired``).
        latest_keys: Keys with a latest value after the batch (with ``latest_ttl``, a live
            one, exact to one time bucket of the TTL).
        unsettled_puts: Puts that skipped their reads since the stores' key count was last
            exact: ``latest_keys`` is at most that many too low (docs/semantics.md §2.16).
        keys_ttl_expired: Keys whose newest value ``latest_ttl`` ended in this batch, counted
            when their time bucket wholly expired (docs/semantics.md §2.15).
        history_rows: Rows of history (a key's versions within one segment).
        live_segments: Live history segments.
        disk_bytes: The local copies' size on disk.
        changelog_bytes: Bytes of the changelogs written.
        snapshot_bytes: Bytes uploaded by snapshots. A store kept open snapshots after its
            task: those bytes count in the partition's next task in the same worker.
        reused: Stores opened from an up-to-date local copy.
        caught_up: Stores opened by replaying changelogs onto an older local copy.
        rebuilt: Stores rebuilt from the checkpoint (snapshot + changelogs).
        kept_open: Of the stores reused or caught up, those the task found still open, kept by
            its Python worker since the worker's last commit of the partition.
        open_ms: Time to open the stores.
        rebuild_ms: Of that, time spent rebuilding.
        commit_ms: Time to commit the stores (changelog, snapshot, cleanup).
    """

    partitions: int = 1
    rows_put: int = 0
    rows_expired: int = 0
    latest_keys: int = 0
    unsettled_puts: int = 0
    keys_ttl_expired: int = 0
    history_rows: int = 0
    live_segments: int = 0
    disk_bytes: int = 0
    changelog_bytes: int = 0
    snapshot_bytes: int = 0
    reused: int = 0
    caught_up: int = 0
    rebuilt: int = 0
    kept_open: int = 0
    open_ms: int = 0
    rebuild_ms: int = 0
    commit_ms: int = 0
    _started: float = field(default=0.0, repr=False)

    def expired(self, codes: Any) -> None:
        """Counts the ``NOT_PUT`` codes of a ``put_batch`` (numpy or Arrow)."""
        import numpy as np

        from verstore._core import NOT_PUT

        self.rows_expired += int(np.count_nonzero(np.asarray(codes) == NOT_PUT))

    def opened(self, part: Any) -> None:
        """Adds a ``PartitionStore``'s open statistics."""
        stats = part.stats
        self.reused += int(stats.reused)
        self.rebuilt += int(stats.rebuilt)
        self.kept_open += int(stats.kept_open)
        if stats.previous_commit is not None:  # a snapshot taken after the previous task
            self.snapshot_bytes += stats.previous_commit.snapshot_uploaded_bytes
        self.caught_up += int(not stats.reused and not stats.rebuilt and stats.replayed > 0)
        ms = round(stats.seconds * 1000)
        self.open_ms += ms
        self.rebuild_ms += ms if stats.rebuilt else 0
        # A store counts expirations from its open (a kept store's since long before): this
        # batch's are what ``store_state`` finds beyond the count here.
        self.keys_ttl_expired -= part.store.stats().ttl_expired_keys

    def store_state(self, store: Any) -> None:
        """Adds an open store's size before its commit (the bytes on disk as of its last
        flush: a store kept open is flushed after the task)."""
        s = store.stats()
        self.latest_keys += s.latest_keys
        self.unsettled_puts += s.unsettled_puts
        self.keys_ttl_expired += s.ttl_expired_keys
        self.history_rows += s.history_rows
        self.live_segments += s.live_segments
        self.disk_bytes += s.disk_bytes

    def start_commit(self) -> None:
        self._started = time.monotonic()

    def committed(self, part: Any, records: int) -> None:
        """Adds a commit's statistics (``records``: its changelog's records)."""
        stats = part.commit_stats
        self.rows_put += records
        if stats is not None:
            self.changelog_bytes += stats.changelog_bytes
            self.snapshot_bytes += stats.snapshot_uploaded_bytes
        self.commit_ms = round((time.monotonic() - self._started) * 1000)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}


NAMES = [name for name in TaskMetrics().as_dict()]


def spark_type() -> Any:
    """The Spark type of the hidden metrics column: a JSON object of the metrics."""
    from pyspark.sql import types as T

    return T.StringType()


def arrow_type() -> Any:
    import pyarrow as pa

    return pa.string()


def with_null_metrics(batch: Any) -> Any:
    """An output batch with the hidden metrics column, null on every row."""
    import pyarrow as pa

    return batch.append_column(METRICS, pa.nulls(batch.num_rows, arrow_type()))


def metrics_row(schema: Any, partition: int, metrics: TaskMetrics) -> Any:
    """The extra row that carries a task's metrics (every output column null)."""
    import pyarrow as pa

    values = pa.array([json.dumps({"partition": partition, **metrics.as_dict()})], arrow_type())
    return pa.RecordBatch.from_arrays(
        [*(pa.nulls(1, f.type) for f in schema), values], names=[*schema.names, METRICS]
    )


def observed(df: Any, name: str) -> Any:
    """``df`` with its tasks' metrics in the query progress under ``name`` and the metrics rows
    removed.

    One ``collect_list`` of the tasks' JSON, not one ``sum`` per metric: ``observe`` costs a
    fixed price per aggregate in every task and every micro-batch (generated code, planning),
    which 15 sums made about 9% of ``asof_join``'s throughput at 60 000 rows per micro-batch
    (BENCHMARKS.md); one list of a column that is null on every data row costs a null check
    per row. :func:`progress_metrics` sums the list.
    """
    from pyspark.sql import functions as F

    m = F.col(METRICS)
    return df.observe(name, F.collect_list(m).alias(TASKS)).where(m.isNull()).drop(METRICS)


def _task_rows(progress: Any, name: str) -> list[dict[str, int]] | None:
    """The task rows of ``name`` in one progress, or ``None`` when it has none."""
    observed = getattr(progress, "observedMetrics", None)
    if observed is None and isinstance(progress, Mapping):  # the progress as parsed JSON
        observed = progress.get("observedMetrics")
    row = (observed or {}).get(name)
    if row is None:
        return None
    fields = row if isinstance(row, Mapping) else row.asDict()
    if set(fields) == {"values", "schema"}:  # Spark Connect's form of an observed Row
        names = [f["name"] for f in fields["schema"]["fields"]]
        fields = dict(zip(names, fields["values"], strict=True))
    tasks = fields.get(TASKS)
    if not isinstance(tasks, list):
        raise ValueError(
            f"progress_metrics: the progress's observedMetrics[{name!r}] has no {TASKS!r} list "
            f"(fields: {sorted(fields)}); was it written by verstore?"
        )
    return [{k: int(v) for k, v in json.loads(t).items()} for t in tasks]


def progress_metrics(
    progress: Any, name: str, *, by_partition: bool = False
) -> dict[str, int] | list[dict[str, int]] | None:
    """The store metrics ``name`` (``"verstore.<store>"``) of one micro-batch's progress
    (``query.lastProgress``, an item of ``query.recentProgress``, or that progress as parsed
    JSON): a dict of the metrics summed over the partitions that ran, or with
    ``by_partition=True`` one dict per partition task (with its ``partition``), sorted by
    partition. ``None`` when the progress has none (a batch without data, or metrics off).

    The progress holds them as ``observedMetrics[name].tasks``: one JSON object per partition
    task. Classic sessions give that as a ``Row``; Spark Connect clients as
    ``Row(values=[...], schema={...})``; both are read here.
    """
    rows = _task_rows(progress, name)
    if rows is None:
        return None
    if by_partition:
        return sorted(rows, key=lambda r: r["partition"])
    return {n: sum(r.get(n, 0) for r in rows) for n in NAMES}


# --- per partition, on the driver ----------------------------------------------------------------

_accumulators: dict[str, Any] = {}
#: Observed names of queries built in Spark Connect sessions (no accumulator for them).
_connect_names: set[str] = set()
_lock = threading.Lock()


class _NoRows:
    """What a task of a Spark Connect session adds its row to: nothing (see the module)."""

    def add(self, rows: list[dict[str, Any]]) -> None:
        pass


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``sparkContext``, no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def accumulator(spark: Any, name: str) -> Any:
    """The driver's accumulator of task rows for ``name`` (one per observed name); for a Spark
    Connect session, a collector that drops them."""
    if is_connect(spark):
        with _lock:
            _connect_names.add(name)
        return _NoRows()
    from pyspark.accumulators import AccumulatorParam

    class _Rows(AccumulatorParam):  # type: ignore[type-arg]
        def zero(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return []

        def addInPlace(
            self, a: list[dict[str, Any]], b: list[dict[str, Any]]
        ) -> list[dict[str, Any]]:
            return [*a, *b][-KEEP_ROWS:]

    with _lock:
        if name not in _accumulators:
            _accumulators[name] = spark.sparkContext.accumulator([], _Rows())
        return _accumulators[name]


def partition_metrics(name: str | None = None) -> Any:
    """Each task's metrics (its micro-batch, partition and :class:`TaskMetrics` fields) that
    this driver process has seen, newest last: a ``pyarrow.Table``.

    Args:
        name: ``"verstore.<store>"`` as in the query progress; default: every store.

    Raises:
        RuntimeError: ``name``'s queries run in a Spark Connect session, which has no
            accumulators: each micro-batch's rows per partition are in its progress
            (:func:`progress_metrics` with ``by_partition=True``).
    """
    import pyarrow as pa

    if name is not None and name in _connect_names and name not in _accumulators:
        raise RuntimeError(
            f"partition_metrics({name!r}): the queries of {name} run in a Spark Connect "
            "session, which has no accumulators to collect per-partition rows on the driver; "
            "each micro-batch's rows are in its progress: "
            f"verstore.spark.progress_metrics(query.lastProgress, {name!r}, by_partition=True)"
        )
    with _lock:
        chosen: Mapping[str, Any] = (
            _accumulators
            if name is None
            else {name: _accumulators[name]}
            if name in _accumulators
            else {}
        )
        rows = [{"name": n, **row} for n, acc in chosen.items() for row in acc.value]
    schema = pa.schema(
        [("name", pa.string()), ("batch_id", pa.int64()), ("partition", pa.int32())]
        + [(n, pa.int64()) for n in NAMES]
    )
    return pa.Table.from_pylist(rows, schema=schema)


__all__ = ["METRICS", "TaskMetrics", "partition_metrics", "progress_metrics"]
