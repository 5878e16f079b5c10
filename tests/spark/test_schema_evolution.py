"""A running as-of join whose table side gains a column and widens another: restarted on the
same checkpoint, its state carries over and every result equals ``merge_asof`` over all the
table updates (the older ones with the new column null), and ``read_store`` reads every
version in the new columns. A narrowing restart is refused and leaves the state as it was."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import verstore.spark

pytest.register_assert_rewrite("streams")
from streams import BASE_MTIME, Collector, read_sources, run_available_now  # noqa: E402

pytestmark = pytest.mark.connect

ORDERS = "order_id long, sym string, t long"
PRICES_V0 = "sym string, t long, price float"
PRICES_V1 = "sym string, t long, price double, venue string"
SYMBOLS = ["A", "B", "C"]


def write(directory: Path, index: int, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    """File ``index`` of a source, with a modification time of its own: Spark's file source
    takes files oldest first, and files written within one millisecond would tie."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{index}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    os.utime(path, (BASE_MTIME + index, BASE_MTIME + index))


def batch(rng: random.Random, index: int, evolved: bool) -> tuple[list[Any], list[Any]]:
    base = 100 * index
    prices = [
        {
            "sym": rng.choice(SYMBOLS),
            "t": base + rng.randrange(100),
            "price": float(rng.randrange(1, 50)) / 4,
        }
        | ({"venue": rng.choice(["X", "Y", None])} if evolved else {})
        for _ in range(12)
    ]
    orders = [
        {"order_id": index * 1000 + i, "sym": rng.choice(SYMBOLS), "t": base + rng.randrange(100)}
        for i in range(15)
    ]
    return orders, prices


def join(spark: Any, work: Path, prices_ddl: str) -> Any:
    orders, prices = read_sources(spark, work / "orders", work / "prices", ORDERS, prices_ddl)
    return verstore.spark.asof_join(
        orders, prices, on="sym", stream_time="t", table_time="t", num_partitions=2,
    )  # fmt: skip


def oracle(orders: list[Any], prices: list[Any]) -> list[tuple[Any, ...]]:
    """Per micro-batch, ``merge_asof`` of its orders against every price update so far."""
    out = []
    for b, batch_orders in enumerate(orders):
        table = pd.DataFrame([p for ps in prices[: b + 1] for p in ps])
        table = table.assign(venue=table.get("venue")).sort_values(["t", "price"])
        table = table.drop_duplicates(["sym", "t"], keep="last")
        stream = pd.DataFrame(batch_orders).sort_values("t")
        joined = pd.merge_asof(stream, table, on="t", by="sym", direction="backward")
        out += [
            (
                r.order_id,
                None if pd.isna(r.price) else r.price,
                None if pd.isna(r.venue) else r.venue,
            )
            for r in joined.itertuples()
        ]
    return sorted(out, key=lambda x: x[0])


def test_a_table_column_added_and_widened_keeps_the_state(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    rng = random.Random(5)
    v0 = pa.schema([("sym", pa.string()), ("t", pa.int64()), ("price", pa.float32())])
    v1 = pa.schema([v0.field(0), v0.field(1), ("price", pa.float64()), ("venue", pa.string())])
    o_schema = pa.schema([("order_id", pa.int64()), ("sym", pa.string()), ("t", pa.int64())])
    orders: list[Any] = []
    prices: list[Any] = []

    def add(indices: range, evolved: bool, prices_schema: pa.Schema) -> None:
        for i in indices:
            o, p = batch(rng, i, evolved=evolved)
            orders.append(o)
            prices.append(p)
            write(tmp_path / "orders", i, o, o_schema)
            write(tmp_path / "prices", i, p, prices_schema)

    add(range(2), False, v0)
    first = Collector()
    run_available_now(join(spark, tmp_path, PRICES_V0), tmp_path / "chk", first)

    add(range(2, 4), True, v1)
    second = Collector()
    run_available_now(join(spark, tmp_path, PRICES_V1), tmp_path / "chk", second)

    got = sorted(
        [(r["order_id"], r["price"], None) for r in first.rows()]
        + [(r["order_id"], r["price"], r["venue"]) for r in second.rows()],
        key=lambda x: x[0],
    )
    assert got == oracle(orders, prices)
    state = verstore.spark.read_store(spark, "asof", history=True).toArrow()
    assert state.schema.names[:3] == ["sym", "price", "venue"]
    assert state.schema.field("price").type == pa.float64()
    assert len(state) == len({(p["sym"], p["t"]) for ps in prices for p in ps})


def test_a_narrowing_restart_is_refused_and_changes_nothing(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    rng = random.Random(6)
    v1 = pa.schema(
        [("sym", pa.string()), ("t", pa.int64()), ("price", pa.float64()), ("venue", pa.string())]
    )
    o_schema = pa.schema([("order_id", pa.int64()), ("sym", pa.string()), ("t", pa.int64())])
    o, p = batch(rng, 0, evolved=True)
    write(tmp_path / "orders", 0, o, o_schema)
    write(tmp_path / "prices", 0, p, v1)
    run_available_now(join(spark, tmp_path, PRICES_V1), tmp_path / "chk", Collector())
    before = verstore.spark.read_store(spark, "asof", history=True).toArrow()

    o, p = batch(rng, 1, evolved=False)
    write(tmp_path / "orders", 1, o, o_schema)
    write(
        tmp_path / "prices",
        1,
        p,
        pa.schema([("sym", pa.string()), ("t", pa.int64()), ("price", pa.float32())]),
    )
    # Spark wraps the task's IncompatibleConfigError; its message says what and why.
    with pytest.raises(Exception, match=r"price.*from double to float.*not a widening"):
        run_available_now(join(spark, tmp_path, PRICES_V0), tmp_path / "chk", Collector())
    assert verstore.spark.read_store(spark, "asof", history=True).toArrow() == before
