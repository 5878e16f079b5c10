"""Exactly-once ``asof_join`` under failures: no duplicates, no losses, equal to the oracle.

* A task fails right after committing its store version (fault injection), and Spark retries it.
* A query fails after a batch's output was computed and its stores committed, and is restarted
  from its Spark checkpoint with every local verstore directory deleted.
* The same restart with the verstore checkpoint on an S3-compatible server (``moto_server``).
* The same restart with every local copy's files damaged instead of deleted.

The sink is ``foreachBatch`` keyed by batch id (``streams.Collector``): a replayed batch
replaces its output, as an idempotent sink does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
import verstore.spark
from verstore.spark._faults import FAIL_AFTER_COMMIT

pytest.register_assert_rewrite("streams", "checkpoint_helpers")
from checkpoint_helpers import cut_in_half, largest_file  # noqa: E402 (as below)
from streams import (  # noqa: E402 (imported once marked for rewriting)
    CONNECT,
    OUT_COLUMNS,
    Batch,
    Collector,
    gen_join,
    gen_oracle,
    gen_schemas,
    generate,
    normalized,
    run_available_now,
    wipe_local,
    write_batches,
)

pytest_plugins = ["checkpoint_helpers"]  # the session's moto_server (fixture s3_server)


def start(spark: Any, tmp_path: Path, *, tie_breaker: str | None = "seq") -> Any:
    return gen_join(spark, tmp_path, tie_breaker=tie_breaker)


def write(tmp_path: Path, batches: list[Batch], start_at: int = 0) -> None:
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(
        tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa, start=start_at
    )


def assert_matches_oracle(sink: Collector, batches: list[Batch]) -> None:
    assert sorted(sink.batches) == list(range(len(batches)))
    expected = gen_oracle(batches, how="left", tie_breaker="seq")
    assert normalized(sink.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
    assert len(sink.rows()) == sum(len(b.stream) for b in batches)  # no losses, no duplicates


def failed_tasks(spark: Any, query: Any) -> int:
    """Failed task attempts of a query's jobs (a streaming query's job group is its run id)."""
    tracker = spark.sparkContext.statusTracker()
    total = 0
    for job in tracker.getJobIdsForGroup(str(query.runId)):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            total += stage_info.numFailedTasks if stage_info else 0
    return total


def test_task_failing_after_its_commit_is_retried_exactly_once(spark: Any, tmp_path: Path) -> None:
    verstore.spark.configure(
        spark, str(tmp_path / "verstore"), local_dir=str(tmp_path / "local"), snapshot_interval=2
    )
    batches = generate(21, batches=4)
    write(tmp_path, batches)
    sink = Collector()
    spark.conf.set(FAIL_AFTER_COMMIT, "true")
    try:
        joined = start(spark, tmp_path)
        query = run_available_now(joined, tmp_path / "chk", sink)
    finally:
        spark.conf.unset(FAIL_AFTER_COMMIT)
    # every store task of every batch failed once after committing (2 partitions x 4 batches)
    assert failed_tasks(spark, query) == 2 * len(batches)
    assert sink.calls == [0, 1, 2, 3]
    assert_matches_oracle(sink, batches)


def run_with_restart(spark: Any, tmp_path: Path, local: Path) -> tuple[Collector, list[Any]]:
    """Batches 0-2 run, the sink fails on batch 2 after its output (and stores) were computed;
    every local store directory is deleted; the query restarts with batches 3-4 added."""
    batches = generate(31, batches=5)
    write(tmp_path, batches[:3])
    sink = Collector(fail_on_batch=2)
    with pytest.raises(Exception, match="failing after batch 2"):
        run_available_now(start(spark, tmp_path), tmp_path / "chk", sink)
    first_run_batch_2 = sink.batches[2]
    assert sink.calls == [0, 1, 2]
    assert local.is_dir()
    wipe_local(local)

    write(tmp_path, batches[3:], start_at=3)
    sink.fail_on_batch = None
    run_available_now(start(spark, tmp_path), tmp_path / "chk", sink)
    assert sink.calls == [0, 1, 2, 2, 3, 4]  # batch 2 replayed from Spark's offset log
    assert normalized(sink.batches[2], OUT_COLUMNS) == normalized(first_run_batch_2, OUT_COLUMNS)
    assert_matches_oracle(sink, batches)
    return sink, batches


def test_restart_from_checkpoint_with_local_state_deleted(spark: Any, tmp_path: Path) -> None:
    local = tmp_path / "local"
    verstore.spark.configure(
        spark, str(tmp_path / "verstore"), local_dir=str(local), snapshot_interval=2
    )
    run_with_restart(spark, tmp_path, local)
    assert_versions_and_snapshots(str(tmp_path / "verstore"), None)


def damage_local_copies(local: Path) -> int:
    """Cuts the largest SST file of every local copy under ``local`` in half, as a failing disk
    or a file system that lost writes would; returns how many copies it damaged."""
    damaged = 0
    for db in local.rglob("db-*"):
        if any(db.glob("*.sst")):
            cut_in_half(largest_file(db, "*.sst"))
            damaged += 1
    return damaged


def test_restart_with_damaged_local_copies_rebuilds_them(spark: Any, tmp_path: Path) -> None:
    """The query stops after batch 2 with every partition's local copy clean at batch 2's
    commit; their SST files are then damaged. The restarted query's tasks rebuild the copies
    from the checkpoint at their open, without a failed task, and the output is the oracle's.
    (Stores are closed at each commit here: a store a worker kept open would be adopted
    without reading its files.)"""
    local = tmp_path / "local"
    verstore.spark.configure(
        spark,
        str(tmp_path / "verstore"),
        local_dir=str(local),
        snapshot_interval=2,
        kept_stores_per_worker=0,
    )
    batches = generate(37, batches=5)
    write(tmp_path, batches[:3])
    sink = Collector()
    run_available_now(start(spark, tmp_path), tmp_path / "chk", sink)
    assert damage_local_copies(local) == 2  # both partitions, clean at batch 2's commit
    write(tmp_path, batches[3:], start_at=3)
    query = run_available_now(start(spark, tmp_path), tmp_path / "chk", sink)
    assert failed_tasks(spark, query) == 0
    assert sink.calls == [0, 1, 2, 3, 4]
    assert_matches_oracle(sink, batches)


def assert_versions_and_snapshots(root: str, storage_options: dict[str, Any] | None) -> None:
    """Versions 1..5 of each partition are on its winning chain, with snapshots every 2."""
    files = verstore.spark.inspect(root, "asof", storage_options=storage_options).to_pylist()
    for p in (0, 1):
        winning = [f for f in files if f["partition"] == p and f["winning"]]
        assert {f["version"] for f in winning if f["kind"] == "changelog"} >= set(range(1, 6))
        assert {f["version"] for f in winning if f["kind"] == "snapshot"} >= {2, 4}


def test_restart_with_checkpoint_on_s3(
    spark: Any, tmp_path: Path, s3_server: dict[str, Any]
) -> None:
    prefix = f"bucket/{uuid.uuid4().hex}"
    local = tmp_path / "local"
    verstore.spark.configure(
        spark,
        f"s3://{prefix}",
        storage_options=s3_server,
        local_dir=str(local),
        snapshot_interval=2,
    )
    run_with_restart(spark, tmp_path, local)
    assert_versions_and_snapshots(f"s3://{prefix}", s3_server)


def python_workers(spark: Any) -> list[int]:
    """The session's Python worker processes: the children of the PySpark daemon that its JVM
    started (``pyspark.daemon`` forks one per worker)."""
    jvm = spark.sparkContext._gateway.proc.pid
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"pyspark.daemon" not in (entry / "cmdline").read_bytes():
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    daemons = {pid for pid, parent in parents.items() if parent == jvm}
    return [pid for pid, parent in parents.items() if parent in daemons]


class KillingCollector(Collector):
    """Kills every Python worker of the session with SIGKILL once a batch's output is in,
    while they keep the batch's stores open (the sink runs on the driver)."""

    def __init__(self, spark: Any) -> None:
        super().__init__()
        self.spark = spark
        self.killed = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        super().__call__(df, batch_id)
        for pid in python_workers(self.spark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                self.killed += 1


@pytest.mark.skipif(CONNECT, reason="the sink kills from the driver's foreachBatch")
def test_python_workers_killed_holding_kept_stores(spark: Any, tmp_path: Path) -> None:
    """The Python workers that keep the stores open are killed with SIGKILL after every
    micro-batch: each next batch starts new workers, rebuilds what was not settled, and the
    output is exactly the oracle's."""
    root = tmp_path / "verstore"
    verstore.spark.configure(
        spark, str(root), local_dir=str(tmp_path / "local"), snapshot_interval=1
    )
    batches = generate(43, batches=3)
    write(tmp_path, batches)
    sink = KillingCollector(spark)
    query = run_available_now(start(spark, tmp_path), tmp_path / "chk", sink)
    assert sink.killed >= 2 * len(batches) - 2, "the workers were there to kill"
    assert_matches_oracle(sink, batches)
    opened = [
        verstore.spark.progress_metrics(p, "verstore.asof")
        for p in query.recentProgress
        if p.batchId > 0
    ]
    assert all(m is not None and m["kept_open"] == 0 for m in opened)
    assert sum(m["rebuilt"] + m["reused"] for m in opened if m) == 2 * (len(batches) - 1)
    # Every version is on the winning chain. A snapshot the keeper defers may die with its
    # worker here; one overdue by a whole interval is taken on the task's path, so the newest
    # snapshot is never two intervals (of 1) behind the tip.
    files = verstore.spark.inspect(str(root), "asof").to_pylist()
    for p in (0, 1):
        mine = [f for f in files if f["partition"] == p]
        winning = {f["version"] for f in mine if f["winning"] and f["kind"] == "changelog"}
        assert winning >= set(range(1, len(batches) + 1))
        newest = max(f["version"] for f in mine if f["kind"] == "snapshot")
        assert newest > len(batches) - 2
