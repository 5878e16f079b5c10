"""Store metrics per micro-batch (observed metrics in the query progress) and per partition
(``verstore.spark.partition_metrics``), checked against what the checkpoint says happened."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import verstore.spark
from verstore.spark._metrics import TaskMetrics

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    Collector,
    gen_join,
    gen_schemas,
    generate,
    run_available_now,
    run_join_matching_oracle,
    wipe_local,
    write_batches,
)


def test_each_batch_reports_its_store_metrics(spark: Any, tmp_path: Path) -> None:
    local = tmp_path / "local"
    root = tmp_path / "verstore"
    # Stores closed at each commit: every snapshot then counts in its own batch's metrics
    # (test_stores_kept_open_between_batches has the default).
    verstore.spark.configure(
        spark, str(root), local_dir=str(local), snapshot_interval=2, kept_stores_per_worker=0
    )
    batches = generate(93, batches=4)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches[:2], stream_pa, table_pa)
    first = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk", Collector())
    wipe_local(local)  # the next run rebuilds every partition store
    write_batches(
        tmp_path / "orders", tmp_path / "prices", batches[2:], stream_pa, table_pa, start=2
    )
    second = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk", Collector())

    progress = {p["batchId"]: p for q in (first, second) for p in q.recentProgress}
    metrics = {
        b: SimpleNamespace(**verstore.spark.progress_metrics(p, "verstore.asof"))
        for b, p in progress.items()
    }
    assert sorted(metrics) == [0, 1, 2, 3]
    files = verstore.spark.inspect(str(root), "asof").to_pylist()
    for b, m in metrics.items():
        changelogs = [f for f in files if f["kind"] == "changelog" and f["version"] == b + 1]
        assert m.partitions == 2
        assert m.rows_put == sum(f["records"] for f in changelogs)  # what the commits wrote
        assert m.changelog_bytes == sum(f["bytes"] for f in changelogs)
        assert m.rows_put + m.rows_expired <= len(batches[b].table)
        assert m.latest_keys > 0 and m.live_segments >= 0 and m.disk_bytes > 0
    snapshots = {f["version"] for f in files if f["kind"] == "snapshot"}
    assert {b + 1 for b, m in metrics.items() if m.snapshot_bytes > 0} == snapshots
    opened = {b: (m.reused, m.caught_up, m.rebuilt) for b, m in metrics.items()}
    assert opened == {0: (0, 0, 0), 1: (2, 0, 0), 2: (0, 0, 2), 3: (2, 0, 0)}
    assert metrics[2].rebuild_ms > 0

    # The progress's per-partition rows are the driver's partition_metrics rows.
    per_partition = verstore.spark.partition_metrics("verstore.asof").to_pylist()
    mine = [r for r in per_partition if r["batch_id"] in metrics][-8:]
    assert sorted((r["batch_id"], r["partition"]) for r in mine) == [
        (b, p) for b in range(4) for p in (0, 1)
    ]
    for b, p in progress.items():
        tasks = verstore.spark.progress_metrics(p, "verstore.asof", by_partition=True)
        rows = sorted((r for r in mine if r["batch_id"] == b), key=lambda r: r["partition"])
        driver = [{k: v for k, v in r.items() if k not in ("name", "batch_id")} for r in rows]
        assert tasks == driver


def test_stores_kept_open_between_batches(spark: Any, tmp_path: Path) -> None:
    """By default a Python worker keeps its stores open after their commits: every later
    batch finds its stores open in its worker or handed over by the other, never rebuilt; the
    snapshots and cleanup that commits deferred still happen; the output is the oracle's."""
    root = tmp_path / "verstore"
    verstore.spark.configure(
        spark,
        str(root),
        local_dir=str(tmp_path / "local"),
        snapshot_interval=2,
        min_versions_to_retain=2,
    )
    try:
        batches = generate(95, batches=6)
        query = run_join_matching_oracle(spark, tmp_path, batches)
    finally:
        verstore.spark.configure(spark, str(root), local_dir=str(tmp_path / "local"))
    metrics = {
        p.batchId: SimpleNamespace(**verstore.spark.progress_metrics(p, "verstore.asof"))
        for p in query.recentProgress
    }
    assert sorted(metrics) == list(range(6))
    for b, m in metrics.items():
        if b > 0:
            assert (m.reused, m.caught_up, m.rebuilt) == (2, 0, 0), b
        assert 0 <= m.kept_open <= m.reused and m.commit_ms >= 0
    files = verstore.spark.inspect(str(root), "asof").to_pylist()
    snapshots = {f["version"] for f in files if f["kind"] == "snapshot"}
    assert snapshots, "the deferred snapshots ran"
    assert min(f["version"] for f in files if f["kind"] == "changelog") > 1, "cleanup ran"


def test_the_progress_holds_one_observed_list_per_store(spark: Any, tmp_path: Path) -> None:
    """``observe`` costs a fixed price per aggregate in every task and micro-batch: verstore
    observes one list of task rows, not a sum per metric (BENCHMARKS.md, progress metrics)."""
    verstore.spark.configure(spark, str(tmp_path / "verstore"), local_dir=str(tmp_path / "l"))
    batches = generate(97, batches=1)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    query = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk", Collector())
    (progress,) = query.recentProgress
    row = progress.observedMetrics["verstore.asof"].asDict()
    assert list(row) == ["tasks"]
    tasks = [json.loads(t) for t in row["tasks"]]
    assert sorted(t["partition"] for t in tasks) == [0, 1]
    assert all(set(t) == {"partition", *TaskMetrics().as_dict()} for t in tasks)
    # The progress as JSON (what a listener forwards) reads the same.
    as_json = json.loads(progress.json)
    assert verstore.spark.progress_metrics(
        as_json, "verstore.asof"
    ) == verstore.spark.progress_metrics(progress, "verstore.asof")


def test_progress_metrics_off_leaves_the_progress_and_keeps_partition_metrics(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "verstore"
    verstore.spark.configure(
        spark, str(root), local_dir=str(tmp_path / "local"), progress_metrics=False
    )
    try:
        batches = generate(94, batches=2)
        query = run_join_matching_oracle(spark, tmp_path, batches)
    finally:
        verstore.spark.configure(spark, str(root), local_dir=str(tmp_path / "local"))
    assert all("verstore.asof" not in p.observedMetrics for p in query.recentProgress)
    batch_ids = {p.batchId for p in query.recentProgress}
    per_partition = verstore.spark.partition_metrics("verstore.asof").to_pylist()
    mine = [r for r in per_partition if r["batch_id"] in batch_ids][-4:]
    assert sorted((r["batch_id"], r["partition"]) for r in mine) == [
        (b, p) for b in range(2) for p in (0, 1)
    ]


def test_configure_refuses_a_progress_metrics_that_is_not_a_bool(spark: Any) -> None:
    with pytest.raises(TypeError, match="progress_metrics"):
        verstore.spark.configure(spark, "/tmp/x", progress_metrics="no")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_configure_refuses_a_bad_kept_stores_per_worker(spark: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="kept_stores_per_worker"):
        verstore.spark.configure(spark, "/tmp/x", kept_stores_per_worker=bad)
