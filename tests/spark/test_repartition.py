"""A running as-of join repartitioned: 4 partitions for three micro-batches, ``repartition_store``
to 7, two more, then to 2, two more. Every result equals ``merge_asof`` over every table update
so far, ``read_store`` and the change feed see every version and every batch across both moves,
and the old count is refused once the store moved. A repartition killed at any step leaves the
query able to continue on the old count (before the publish) or the new one (after), exactly.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import verstore.spark

pytest.register_assert_rewrite("streams")
from streams import BASE_MTIME, Collector, read_sources, run_available_now  # noqa: E402

HERE = Path(__file__).parent
ORDERS = "order_id long, sym string, t long"
PRICES = "sym string, t long, price double"
O_SCHEMA = pa.schema([("order_id", pa.int64()), ("sym", pa.string()), ("t", pa.int64())])
P_SCHEMA = pa.schema([("sym", pa.string()), ("t", pa.int64()), ("price", pa.float64())])
SYMBOLS = [f"S{i}" for i in range(40)]


class Feed:
    """Micro-batches of orders and prices written as parquet files, and the oracle."""

    def __init__(self, work: Path, seed: int) -> None:
        self.work, self.rng = work, random.Random(seed)
        self.orders: list[list[dict[str, Any]]] = []
        self.prices: list[list[dict[str, Any]]] = []
        self.used: set[tuple[str, int]] = set()

    def add(self, batches: int) -> None:
        for _ in range(batches):
            i, base, rng = len(self.orders), 100 * len(self.orders), self.rng
            # Late prices (below the batch's times), within retention; one update per
            # (symbol, time), so that the oracle needs no tie rule.
            prices = []
            while len(prices) < 60:
                sym, t = rng.choice(SYMBOLS), max(0, base + rng.randrange(-150, 100))
                if (sym, t) not in self.used:
                    self.used.add((sym, t))
                    prices.append({"sym": sym, "t": t, "price": rng.randrange(1, 400) / 4})
            orders = [
                {
                    "order_id": i * 1000 + j,
                    "sym": rng.choice(SYMBOLS),
                    "t": base + rng.randrange(100),
                }
                for j in range(50)
            ]
            self.orders.append(orders)
            self.prices.append(prices)
            for name, rows, schema in (("orders", orders, O_SCHEMA), ("prices", prices, P_SCHEMA)):
                (self.work / name).mkdir(parents=True, exist_ok=True)
                path = self.work / name / f"part-{i:03}.parquet"
                pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
                # Spark's file source takes files oldest first: no two may tie.
                os.utime(path, (BASE_MTIME + i, BASE_MTIME + i))

    def oracle(self, batches: range) -> list[tuple[Any, ...]]:
        """Per micro-batch, ``merge_asof`` of its orders against every price update so far."""
        out = []
        for b in batches:
            table = pd.DataFrame([p for ps in self.prices[: b + 1] for p in ps])
            table = table.sort_values("t")
            stream = pd.DataFrame(self.orders[b]).sort_values("t")
            joined = pd.merge_asof(stream, table, on="t", by="sym", direction="backward")
            out += [
                (r.order_id, None if pd.isna(r.price) else r.price) for r in joined.itertuples()
            ]
        return sorted(out)


def run(spark: Any, work: Path, partitions: int) -> list[tuple[Any, ...]]:
    """The query on ``partitions`` partitions until every file is processed: its results."""
    orders, prices = read_sources(spark, work / "orders", work / "prices", ORDERS, PRICES)
    joined = verstore.spark.asof_join(
        orders, prices, on="sym", stream_time="t", table_time="t",
        num_partitions=partitions, history_retention="1 day",
    )  # fmt: skip
    sink = Collector()
    run_available_now(joined, work / "chk", sink)
    return sorted((r["order_id"], r["price"]) for r in sink.rows())


def repartition(spark: Any, root: Path, work: Path, partitions: int) -> dict[str, Any]:
    return verstore.spark.repartition_store(
        spark, str(root), "asof", partitions, checkpoint_location=str(work / "chk")
    )


@pytest.mark.connect
def test_a_query_repartitioned_from_4_to_7_to_2_partitions_stays_exact(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    feed = Feed(tmp_path, seed=11)
    feed.add(3)
    got = run(spark, tmp_path, 4)
    report = repartition(spark, verstore_root, tmp_path, 7)
    assert report["version"] == 3 and report["from_partitions"] == 4
    assert report["to_partitions"] == 7 and report["versions"] > 0
    feed.add(2)
    got += run(spark, tmp_path, 7)
    assert repartition(spark, verstore_root, tmp_path, 2)["version"] == 5
    feed.add(2)
    got += run(spark, tmp_path, 2)
    assert sorted(got) == feed.oracle(range(7))

    history = verstore.spark.read_store(spark, "asof", history=True).toArrow()
    written = {(p["sym"], p["t"]) for ps in feed.prices for p in ps}
    assert len(history) == len(written)
    assert set(history.column("partition").to_pylist()) <= {0, 1}
    changes = verstore.spark.read_store(spark, "asof", changes=True).toArrow()
    per_batch = pd.Series(changes.column("batch_id").to_pylist()).value_counts().to_dict()
    assert per_batch == {b: len(feed.prices[b]) for b in range(7)}
    files = verstore.spark.inspect(str(verstore_root), "asof").to_pylist()
    assert {(f["partitioning"], f["partition"]) for f in files} == {
        *((0, p) for p in range(4)),
        *((1, p) for p in range(7)),
        *((2, p) for p in range(2)),
    }


def test_the_old_count_is_refused_once_the_store_moved(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    feed = Feed(tmp_path, seed=12)
    feed.add(2)
    run(spark, tmp_path, 4)
    repartition(spark, verstore_root, tmp_path, 3)
    feed.add(1)
    with pytest.raises(Exception, match=r"num_partitions=3.*num_partitions=4.*repartition_store"):
        run(spark, tmp_path, 4)
    # Repartitioning to the count it has changes nothing.
    assert repartition(spark, verstore_root, tmp_path, 3)["versions"] == 0


# The driver's steps, and one in the tasks that write the new partitions (the steps inside a
# partition's commit are killed in tests/checkpoint/test_repartition_steps.py, without Spark).
KILL_STEPS = [
    "repartition_marked",
    "repartition_writing",
    "repartition_before_publish",
    "repartition_published",
]


@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_repartition_killed_at_any_step_leaves_one_usable_state(
    spark: Any, verstore_root: Path, tmp_path: Path, step: str
) -> None:
    feed = Feed(tmp_path, seed=13)
    feed.add(2)
    got = run(spark, tmp_path, 4)
    job = [sys.executable, str(HERE / "repartition_job.py"), str(verstore_root), "asof", "5"]
    env = {
        **os.environ,
        "VERSTORE_KILL_AT": step,
        "PYTHONPATH": os.pathsep.join([str(HERE / "kill_at"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([*job, str(tmp_path / "chk")], env=env, capture_output=True, text=True)
    assert done.returncode != 0, done.stdout
    feed.add(1)
    published = step == "repartition_published"
    got += run(spark, tmp_path, 5 if published else 4)
    if not published:
        # Run again, it completes; the query goes on exactly on the new count.
        assert repartition(spark, verstore_root, tmp_path, 5)["to_partitions"] == 5
        feed.add(1)
        got += run(spark, tmp_path, 5)
    assert sorted(got) == feed.oracle(range(len(feed.orders)))
    keys = {p["sym"] for ps in feed.prices for p in ps}
    assert verstore.spark.read_store(spark, "asof").count() == len(keys)
