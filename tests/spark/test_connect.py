"""What differs on Spark Connect (``VERSTORE_SPARK_CONNECT=1``, ``make test`` runs them so).

Everything else of ``verstore.spark`` is the same on both kinds of session: the tests marked
``connect`` run on each. Here: metrics come from the query progress only (a Connect session has
no accumulators), and a ``foreachBatch`` sink gets a clear error instead of a wrong answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import verstore.spark

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    gen_join,
    gen_schemas,
    generate,
    run_join_matching_oracle,
    write_batches,
)

pytestmark = [pytest.mark.connect, pytest.mark.connect_only]


def test_metrics_are_in_the_progress_and_partition_metrics_says_where(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    batches = generate(95, batches=2)
    query = run_join_matching_oracle(spark, tmp_path, batches)
    metrics = {
        p.batchId: verstore.spark.progress_metrics(p, "verstore.asof") for p in query.recentProgress
    }
    assert sorted(metrics) == [0, 1]
    assert all(m and m["partitions"] == 2 and m["latest_keys"] > 0 for m in metrics.values())
    handled = sum(m["rows_put"] + m["rows_expired"] for m in metrics.values() if m)
    assert 0 < handled <= sum(len(b.table) for b in batches)
    for p in query.recentProgress:  # per partition too, from the progress
        tasks = verstore.spark.progress_metrics(p, "verstore.asof", by_partition=True)
        assert [t["partition"] for t in tasks] == [0, 1]
        assert sum(t["rows_put"] for t in tasks) == metrics[p.batchId]["rows_put"]
    with pytest.raises(RuntimeError, match=r"Spark Connect.*by_partition=True"):
        verstore.spark.partition_metrics("verstore.asof")


def test_a_foreach_batch_sink_gets_a_clear_error(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Spark Connect computes a foreachBatch function's DataFrame outside its micro-batch."""
    batches = generate(96, batches=1)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)

    def collect(df: Any, batch_id: int) -> None:
        df.toArrow()

    # Spark starts the foreachBatch function's Python worker and waits a fixed 10 s for it to
    # connect back (PythonWorkerFactory, not a setting); on a loaded machine the worker's start
    # can take longer ("Timed out while waiting for the Python worker to connect back", or
    # "Python worker failed to connect back."). That failure is Spark's, not the one under
    # test: run the query again.
    for attempt in range(3):
        with pytest.raises(Exception) as raised:
            query = (
                gen_join(spark, tmp_path, store=f"asof{attempt}")
                .writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / f"chk{attempt}"))
                .trigger(availableNow=True)
                .start()  # Spark starts the worker here and may time out on it
            )
            try:
                query.awaitTermination(120)
            finally:
                query.stop()
        if "to connect back" not in str(raised.value):
            break
    assert "foreachBatch function receives" in str(raised.value)
