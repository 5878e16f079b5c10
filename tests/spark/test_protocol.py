"""The checkpoint protocol under what Spark does to it (docs/checkpoint.md).

* A no-data micro-batch (the watermark advanced, no input) runs no verstore task: the next
  batch must still open its state.
* ``foreachBatch`` with ``take(1)`` runs only some partitions of a batch.
* A new query (a fresh Spark checkpoint) on a root that already holds a store of the same name
  gets its own lineage: exact results, and the old query's files untouched; the old query
  then continues exactly where it was.
* A partition function that leaves input unread fails its task and commits nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import verstore.spark
from verstore.checkpoint.layout import lineages
from verstore.location import Location

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    OUT_COLUMNS,
    Batch,
    Collector,
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

ORDERS_DDL = "order_id LONG, item STRING, qty INT, t TIMESTAMP"
ORDERS = pa.schema(
    [
        ("order_id", pa.int64()),
        ("item", pa.string()),
        ("qty", pa.int32()),
        ("t", pa.timestamp("us", tz="UTC")),
    ]
)
PRICES_DDL = "item STRING, price DOUBLE, valid_from TIMESTAMP"
PRICES = pa.schema(
    [("item", pa.string()), ("price", pa.float64()), ("valid_from", pa.timestamp("us", tz="UTC"))]
)
ITEMS = ["curry", "naan", "dal", "tea", "rice", "soup"]


def sec(s: float) -> Any:
    return ts(int(s * 1000))


def windowed_batches(first: int, count: int) -> list[Batch]:
    """Batch i: orders inside the 10-second window [10 i, 10 i + 10) and a price update per
    item at its start, so the watermark (event time, no delay) closes a window per batch."""
    out = []
    for i in range(first, first + count):
        out.append(
            Batch(
                stream=[
                    {"order_id": 100 * i + j, "item": item, "qty": j + 1, "t": sec(10 * i + j)}
                    for j, item in enumerate(ITEMS)
                ],
                table=[
                    {"item": item, "price": float(i + k), "valid_from": sec(10 * i)}
                    for k, item in enumerate(ITEMS)
                ],
            )
        )
    return out


def window_totals(batches: list[Batch]) -> dict[int, float]:
    """window start (s) -> sum of qty * price, with the price valid at each order's time."""
    prices: dict[str, list[tuple[Any, float]]] = {}
    totals: dict[int, float] = {}
    for batch in batches:
        for row in batch.table:
            prices.setdefault(row["item"], []).append((row["valid_from"], row["price"]))
        for order in batch.stream:
            valid = [p for t, p in sorted(prices[order["item"]]) if t <= order["t"]]
            start = int(order["t"].timestamp()) // 10 * 10
            totals[start] = totals.get(start, 0.0) + order["qty"] * valid[-1]
    return totals


def test_a_no_data_batch_between_batches_does_not_wedge_the_query(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Enrich, then aggregate by event-time window in append mode: the watermark advances after
    the last input, so Spark runs a no-data batch in which no verstore task runs. The batches
    after it (a restart with new input) must open their state and stay exact."""
    from pyspark.sql import functions as F

    def run(batches: list[Batch], start: int, sink: Collector) -> Any:
        write_batches(
            tmp_path / "orders", tmp_path / "prices", batches, ORDERS, PRICES, start=start
        )
        orders, prices = read_sources(
            spark, tmp_path / "orders", tmp_path / "prices", ORDERS_DDL, PRICES_DDL
        )
        joined = verstore.spark.asof_join(
            orders, prices, on="item", stream_time="t", table_time="valid_from",
            num_partitions=2, store="prices",
        )  # fmt: skip
        windows = (
            joined.withWatermark("t", "0 seconds")
            .groupBy(F.window("t", "10 seconds"))
            .agg(F.sum(F.col("qty") * F.col("price")).alias("total"))
            .select(F.unix_seconds(F.col("window.start")).alias("start"), "total")
        )
        return run_available_now(windows.coalesce(1), tmp_path / "chk", sink)

    first, second = windowed_batches(0, 2), windowed_batches(2, 2)
    sink = Collector()
    query = run(first, 0, sink)
    ran = [(p.batchId, p.numInputRows) for p in query.recentProgress]
    assert (len(first), 0) in ran, f"no no-data batch ran: {ran}"  # the premise of the test
    run(second, len(first), sink)
    emitted = {row["start"]: row["total"] for row in sink.rows()}
    expected = window_totals(first + second)
    assert emitted, "no window was emitted"
    assert emitted == {start: expected[start] for start in emitted}
    assert set(emitted) >= {0, 10, 20}  # windows closed by the second run's watermark


def test_foreach_batch_running_only_some_partitions_does_not_wedge_the_query(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """``take(1)`` runs the first partition only: later batches still open every partition."""
    batches = generate(71, batches=4)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    seen: list[tuple[int, int]] = []

    def sink(df: Any, batch_id: int) -> None:
        rows = df.take(1) if batch_id < 3 else df.collect()
        seen.append((batch_id, len(rows)))

    query = (
        gen_join(spark, tmp_path).writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert [b for b, _ in seen] == [0, 1, 2, 3]
    assert seen[-1] == (3, len(batches[3].stream))  # the full batch after the partial ones
    files = verstore.spark.inspect(str(verstore_root), "asof").to_pylist()
    versions = {(r["partition"], r["version"]) for r in files if r["kind"] == "changelog"}
    assert (0, 4) in versions and (1, 4) in versions


def test_a_new_query_on_an_old_root_gets_its_own_lineage(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """Query A runs; its Spark checkpoint is put aside and query B starts from scratch on the
    same verstore root and store name: B is exact from an empty state, A's files are untouched,
    and A, restarted from its own checkpoint, continues exactly."""
    batches = generate(72, batches=5)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches[:3], stream_pa, table_pa)
    sink_a = Collector()
    query_a = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk-a", sink_a)
    root = verstore_root / "asof"
    listing_a = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())

    sink_b = Collector()
    query_b = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk-b", sink_b)
    assert str(query_b.id) != str(query_a.id)
    location = Location.resolve(str(verstore_root))
    assert lineages(location, "asof") == sorted([str(query_a.id), str(query_b.id)])
    expected = gen_oracle(batches[:3], how="left", tie_breaker="seq")
    assert normalized(sink_b.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
    after_b = sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] == f"q={query_a.id}"
    )
    assert after_b == listing_a

    write_batches(
        tmp_path / "orders", tmp_path / "prices", batches[3:], stream_pa, table_pa, start=3
    )
    run_available_now(gen_join(spark, tmp_path), tmp_path / "chk-a", sink_a)
    expected = gen_oracle(batches, how="left", tie_breaker="seq")
    assert sorted(sink_a.batches) == list(range(5))
    assert normalized(sink_a.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)


def test_a_partition_function_that_leaves_input_unread_commits_nothing(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    from verstore.spark import StoreSpec, map_partitions_with_stores

    def first_batch_only(ctx: Any, batches: Any) -> list[Any]:
        first = next(batches, None)
        return [] if first is None else [first.select(["id"])]

    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"id": list(range(50_000))}), source / "part-0.parquet")
    df = spark.readStream.schema("id LONG").parquet(str(source))
    out = map_partitions_with_stores(
        df.withColumn("k", df.id % 7), keys=["k"], num_partitions=1,
        stores={"s": StoreSpec(history_retention_ms=1000)}, fn=first_batch_only, schema="id long",
    )  # fmt: skip
    with pytest.raises(Exception, match="without reading all of its input"):
        run_available_now(out, tmp_path / "chk", Collector())
    assert verstore.spark.inspect(str(verstore_root), "s").num_rows == 0


def test_a_restarted_query_whose_store_keys_changed_is_refused(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    """The same query (same Spark checkpoint) restarted with other key columns for its store
    must not read the stored bytes as the new layout: IncompatibleConfigError names both.
    (Value columns may evolve: tests/spark/test_schema_evolution.py.)"""
    from verstore.spark import asof_join

    batches = generate(73, batches=2)
    stream_ddl, stream_pa, table_ddl, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches[:1], stream_pa, table_pa)
    run_available_now(gen_join(spark, tmp_path), tmp_path / "chk", Collector())
    write_batches(
        tmp_path / "orders", tmp_path / "prices", batches[1:], stream_pa, table_pa, start=1
    )
    orders, prices = read_sources(
        spark, tmp_path / "orders", tmp_path / "prices", stream_ddl, table_ddl
    )
    changed = asof_join(  # keyed by region alone
        orders, prices, on="region", stream_time="t", table_time="valid_from",
        table_values=["price", "currency"], tie_breaker="seq",
    )  # fmt: skip
    with pytest.raises(Exception, match="IncompatibleConfigError") as failure:
        run_available_now(changed, tmp_path / "chk", Collector())
    message = str(failure.value)
    assert "key (region: int32, item: string)" in message  # stored
    assert "key (region: int32) value" in message  # what the query asked for
    assert "the encoding and the key columns cannot change" in message
