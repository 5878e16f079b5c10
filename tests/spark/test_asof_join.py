"""``asof_join``: a streaming stream-table as-of join over micro-batches.

Inputs are parquet files, one per side per micro-batch (``streams.py``); every query runs with
``trigger(availableNow=True)`` and its output is compared with a pandas ``merge_asof`` oracle
computed per batch against every table update seen so far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from verstore.spark import asof_join

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    OUT_COLUMNS,
    Batch,
    Collector,
    batch_input_rows,
    gen_join,
    gen_oracle,
    gen_schemas,
    generate,
    normalized,
    read_sources,
    run_available_now,
    ts,
    write_batches,
)

pytestmark = pytest.mark.connect

ORDERS_DDL = "order_id LONG, customer STRING, item STRING, qty INT, t TIMESTAMP"
ORDERS = pa.schema(
    [
        ("order_id", pa.int64()),
        ("customer", pa.string()),
        ("item", pa.string()),
        ("qty", pa.int32()),
        ("t", pa.timestamp("us", tz="UTC")),
    ]
)
PRICES_DDL = "item STRING, price DOUBLE, valid_from TIMESTAMP"
PRICES = pa.schema(
    [("item", pa.string()), ("price", pa.float64()), ("valid_from", pa.timestamp("us", tz="UTC"))]
)


def sec(s: float) -> Any:
    return ts(int(s * 1000))


def test_restaurant_late_order_pays_the_price_valid_at_its_time(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Seed 001: Candace's t=3 order arrives after the t=4 price change: $24, not $30."""
    batches = [
        Batch(
            stream=[{"order_id": 1, "customer": "Anna", "item": "curry", "qty": 2, "t": sec(1)}],
            table=[{"item": "curry", "price": 8.0, "valid_from": sec(0)}],
        ),
        Batch(
            stream=[{"order_id": 2, "customer": "Bob", "item": "curry", "qty": 1, "t": sec(5)}],
            table=[{"item": "curry", "price": 10.0, "valid_from": sec(4)}],
        ),
        Batch(
            stream=[
                {"order_id": 3, "customer": "Candace", "item": "curry", "qty": 3, "t": sec(3)},
                {"order_id": 4, "customer": "Dan", "item": "soup", "qty": 1, "t": sec(9)},
            ],
        ),
    ]
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, ORDERS, PRICES)
    orders, prices = read_sources(
        spark, tmp_path / "orders", tmp_path / "prices", ORDERS_DDL, PRICES_DDL
    )
    joined = asof_join(
        orders, prices, on="item", stream_time="t", table_time="valid_from", how="left"
    )
    assert joined.columns == [
        "order_id", "customer", "item", "qty", "t", "price", "table_valid_from", "table_valid_to"
    ]  # fmt: skip
    assert joined.schema["table_valid_from"].dataType.simpleString() == "timestamp"
    charged = joined.selectExpr("*", "qty * price AS total")
    sink = Collector()
    query = run_available_now(charged, tmp_path / "chk", sink)

    # one micro-batch per file pair, on both sides
    assert batch_input_rows(query, tmp_path / "orders") == {0: 1, 1: 1, 2: 2}
    assert batch_input_rows(query, tmp_path / "prices") == {0: 1, 1: 1, 2: 0}
    got = {
        b: sorted((r["customer"], r["total"], r["table_valid_from"], r["table_valid_to"])
                  for r in rows)
        for b, rows in sink.batches.items()
    }  # fmt: skip
    assert got == {
        0: [("Anna", 16.0, sec(0), None)],
        1: [("Bob", 10.0, sec(4), None)],
        2: [("Candace", 24.0, sec(0), sec(4)), ("Dan", None, None, None)],
    }


def run_generated(
    spark: Any,
    tmp_path: Path,
    batches: list[Batch],
    *,
    how: str,
    tie_breaker: str | None,
    timestamps: bool,
    num_partitions: int | None = None,
    history_retention: str | int = "7 days",
) -> tuple[Collector, Any]:
    _, stream_pa, _, table_pa = gen_schemas(timestamps)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    joined = gen_join(
        spark,
        tmp_path,
        timestamps=timestamps,
        how=how,
        tie_breaker=tie_breaker,
        num_partitions=num_partitions,
        history_retention=history_retention,
    )
    sink = Collector()
    query = run_available_now(joined, tmp_path / "chk", sink)
    return sink, query


@pytest.mark.parametrize(
    ("how", "tie_breaker", "timestamps"),
    [
        ("left", None, False),
        ("inner", None, True),
        ("left", "seq", True),
        ("inner", "seq", False),
    ],
)
def test_generated_out_of_order_matches_merge_asof_oracle(
    spark: Any,
    verstore_root: Path,
    tmp_path: Path,
    how: str,
    tie_breaker: str | None,
    timestamps: bool,
) -> None:
    batches = generate(11, batches=4, timestamps=timestamps)
    sink, query = run_generated(
        spark, tmp_path, batches, how=how, tie_breaker=tie_breaker, timestamps=timestamps
    )
    # the expected micro-batches happened: batch i read file pair i
    assert batch_input_rows(query, tmp_path / "orders") == {
        i: len(b.stream) for i, b in enumerate(batches)
    }
    assert batch_input_rows(query, tmp_path / "prices") == {
        i: len(b.table) for i, b in enumerate(batches)
    }
    for batch_id, rows in sink.batches.items():
        assert {r["batch"] for r in rows} <= {batch_id}
    expected = gen_oracle(batches, how=how, tie_breaker=tie_breaker, timestamps=timestamps)
    assert normalized(sink.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
    # the data exercises what it should
    matched = [r for r in expected if r["table_valid_from"] is not None]
    assert len(matched) > 20
    assert any(r["table_valid_to"] is not None for r in matched)  # a late order hit history
    if how == "left":
        assert len(expected) > len(matched)


@pytest.mark.parametrize(
    ("tolerance", "allow_exact_matches"), [(7, True), (None, False), (7, False)]
)
def test_tolerance_and_strict_matching_match_merge_asof(
    spark: Any,
    verstore_root: Path,
    tmp_path: Path,
    tolerance: int | None,
    allow_exact_matches: bool,
) -> None:
    """``tolerance`` and ``allow_exact_matches`` mean what they mean in pandas ``merge_asof``."""
    batches = generate(17, batches=3)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    options = {"tolerance": tolerance, "allow_exact_matches": allow_exact_matches}
    sink = Collector()
    run_available_now(gen_join(spark, tmp_path, **options), tmp_path / "chk", sink)
    expected = gen_oracle(batches, how="left", tie_breaker="seq", **options)
    assert normalized(sink.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
    default = gen_oracle(batches, how="left", tie_breaker="seq")
    assert normalized(expected, OUT_COLUMNS) != normalized(default, OUT_COLUMNS)  # it matters


def test_tie_breaker_decides_equal_time_updates_across_batches(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Equal (key, time) updates: largest seq wins, also against an earlier batch's version;
    without a tie-breaker the later batch replaces, within a batch the largest value wins."""
    t0 = 0
    batches = [
        Batch(
            table=[
                {"region": 1, "item": "curry", "price": 9.0, "currency": "EUR", "seq": 2,
                 "valid_from": t0},
                {"region": 1, "item": "curry", "price": 3.0, "currency": "EUR", "seq": 1,
                 "valid_from": t0},
            ],
            stream=[{"order_id": 1, "region": 1, "item": "curry", "qty": 1, "t": 5, "batch": 0}],
        ),
        Batch(
            table=[
                {"region": 1, "item": "curry", "price": 1.0, "currency": "EUR", "seq": 1,
                 "valid_from": t0},
            ],
            stream=[{"order_id": 2, "region": 1, "item": "curry", "qty": 1, "t": 5, "batch": 1}],
        ),
    ]  # fmt: skip
    sink, _ = run_generated(
        spark, tmp_path, batches, how="left", tie_breaker="seq", timestamps=False
    )
    assert [(r["order_id"], r["price"]) for r in sink.rows()] == [(1, 9.0), (2, 9.0)]
    assert normalized(sink.rows(), OUT_COLUMNS) == normalized(
        gen_oracle(batches, how="left", tie_breaker="seq"), OUT_COLUMNS
    )
    assert gen_oracle(batches, how="left", tie_breaker=None)[1]["price"] == 1.0


def test_history_retention_drops_late_updates_and_old_history(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Retention 10 ms, one partition (one observed stream time): after a table time of 100,
    an update at 50 is dropped (< 100 - 10) and a lookup at 40 finds no history."""

    def price(item: str, t: int, p: float) -> dict[str, Any]:
        return {"region": 1, "item": item, "price": p, "currency": None, "seq": 0, "valid_from": t}

    def order(order_id: int, t: int) -> dict[str, Any]:
        return {"order_id": order_id, "region": 1, "item": "dal", "qty": 1, "t": t, "batch": 1}

    batches = [
        Batch(table=[price("curry", 100, 3.0), price("dal", 0, 1.0)]),
        Batch(
            table=[price("dal", 50, 5.0), price("dal", 95, 2.0)],
            stream=[order(1, 92), order(2, 97), order(3, 40)],
        ),
    ]
    sink, _ = run_generated(
        spark, tmp_path, batches, how="left", tie_breaker=None, timestamps=False,
        num_partitions=1, history_retention=10,
    )  # fmt: skip
    got = sorted((r["order_id"], r["price"], r["table_valid_from"], r["table_valid_to"])
                 for r in sink.rows())  # fmt: skip
    assert got == [(1, 1.0, 0, 95), (2, 2.0, 95, None), (3, None, None, None)]


def test_nulls_never_match(spark: Any, verstore_root: Path, tmp_path: Path) -> None:
    batches = [
        Batch(
            table=[
                {"region": None, "item": "curry", "price": 1.0, "currency": None, "seq": 0,
                 "valid_from": 0},
                {"region": 1, "item": "curry", "price": 2.0, "currency": None, "seq": 0,
                 "valid_from": None},
                {"region": 1, "item": "dal", "price": 3.0, "currency": None, "seq": 0,
                 "valid_from": 0},
            ],
            stream=[
                {"order_id": 1, "region": None, "item": "curry", "qty": 1, "t": 5, "batch": 0},
                {"order_id": 2, "region": 1, "item": "curry", "qty": 1, "t": 5, "batch": 0},
                {"order_id": 3, "region": 1, "item": "dal", "qty": 1, "t": None, "batch": 0},
                {"order_id": 4, "region": 1, "item": "dal", "qty": 1, "t": 0, "batch": 0},
            ],
        ),
    ]  # fmt: skip
    sink, _ = run_generated(spark, tmp_path, batches, how="left", tie_breaker=None,
                            timestamps=False)  # fmt: skip
    got = sorted((r["order_id"], r["price"], r["table_valid_from"]) for r in sink.rows())
    assert got == [(1, None, None), (2, None, None), (3, None, None), (4, 3.0, 0)]


def test_argument_errors(spark: Any) -> None:
    orders = spark.createDataFrame([], ORDERS_DDL)
    prices = spark.createDataFrame([], PRICES_DDL)
    kw: dict[str, Any] = {"on": "item", "stream_time": "t", "table_time": "valid_from"}
    with pytest.raises(ValueError, match="how must be"):
        asof_join(orders, prices, **kw, how="right")
    with pytest.raises(ValueError, match=r"table_updates has no column\(s\) \['nope'\]"):
        asof_join(orders, prices, **kw, table_values=["nope"])
    with pytest.raises(ValueError, match=r"stream has no column\(s\) \['x'\]"):
        asof_join(orders, prices, **{**kw, "stream_time": "x"})
    with pytest.raises(ValueError, match=r"duplicate columns \['qty'\]"):
        asof_join(orders, prices.withColumnRenamed("price", "qty"), **kw)
    with pytest.raises(TypeError, match="must be a timestamp or an integer"):
        asof_join(orders, prices.selectExpr("item", "price", "'x' AS valid_from"), **kw)
    with pytest.raises(ValueError, match="unknown unit"):
        asof_join(orders, prices, **kw, history_retention="7 fortnights")
    with pytest.raises(ValueError, match="store must be"):
        asof_join(orders, prices, **kw, store="a/b")
    with pytest.raises(ValueError, match="tolerance must not be negative"):
        asof_join(orders, prices, **kw, tolerance=-1)
    with pytest.raises(TypeError, match="allow_exact_matches must be a bool"):
        asof_join(orders, prices, **kw, allow_exact_matches="no")
    with pytest.raises(TypeError, match=r"column 'ym' of type interval year cannot be stored"):
        asof_join(orders, prices.selectExpr("*", "INTERVAL '1' YEAR AS ym"), **kw)
