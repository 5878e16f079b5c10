"""``VersionedStatefulProcessor`` (transformWithStateInPandas) and ``GroupHistory``
(applyInPandasWithState): the hooks Spark calls, and an as-of join written with each, checked
against a pandas ``merge_asof`` oracle over every price update seen so far."""

from __future__ import annotations

import json
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
import verstore.spark
from verstore.spark import (
    HISTORY_STATE_SCHEMA,
    GroupHistory,
    StoreSpec,
    VersionedStatefulProcessor,
    load_history,
    save_history,
)
from verstore.spark._faults import FAIL_AFTER_COMMIT

pytest.register_assert_rewrite("streams", "table_streams")
from pyspark import cloudpickle  # noqa: E402
from streams import (  # noqa: E402
    Collector,
    asof_oracle,
    batch_input_rows,
    read_sources,
    run_available_now,
    write_batches,
)
from table_streams import generate_asof, read_stream, write_stream  # noqa: E402

# Every case here runs on classic and Spark Connect sessions alike (conftest.py).
pytestmark = pytest.mark.connect

# Spark's Python workers cannot import this test module: ship its classes and functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ORDERS_DDL = "order_id LONG, item STRING, qty INT, t LONG"
ORDERS = pa.schema(
    [("order_id", pa.int64()), ("item", pa.string()), ("qty", pa.int32()), ("t", pa.int64())]
)
PRICES_DDL = "item STRING, price DOUBLE, valid_from LONG"
PRICES = pa.schema([("item", pa.string()), ("price", pa.float64()), ("valid_from", pa.int64())])
OUT_DDL = (
    "order_id LONG, item STRING, qty INT, t LONG, price DOUBLE, "
    "table_valid_from LONG, table_valid_to LONG"
)
OUT_COLUMNS = ["order_id", "item", "qty", "t", "price", "table_valid_from", "table_valid_to"]
RETENTION_MS = 3_600_000
PRICE_UPDATE, ORDER = 0, 1


def tagged_input(spark: Any, tmp_path: Path, batches: list[Any]) -> Any:
    """Orders and price updates in one stream: ``item, side, t, order_id, qty, price``."""
    from pyspark.sql import functions as F

    write_batches(tmp_path / "orders", tmp_path / "prices", batches, ORDERS, PRICES)
    orders, prices = read_sources(
        spark, tmp_path / "orders", tmp_path / "prices", ORDERS_DDL, PRICES_DDL
    )
    return orders.select(
        "item",
        F.lit(ORDER).alias("side"),
        "t",
        "order_id",
        "qty",
        F.lit(None).cast("double").alias("price"),
    ).unionByName(
        prices.select(
            "item",
            F.lit(PRICE_UPDATE).alias("side"),
            F.col("valid_from").alias("t"),
            F.lit(None).cast("long").alias("order_id"),
            F.lit(None).cast("int").alias("qty"),
            "price",
        )
    )


def expected_join(batches: list[Any]) -> Counter[tuple[Any, ...]]:
    rows = asof_oracle(
        batches,
        on=["item"],
        stream_time="t",
        table_time="valid_from",
        values=["price"],
        table_schema=PRICES,
        how="left",
        tie_breaker=None,
    )
    assert any(r["table_valid_to"] is not None for r in rows)  # late orders hit history
    assert any(r["table_valid_from"] is None for r in rows)
    return Counter(tuple(r[c] for c in OUT_COLUMNS) for r in rows)


def got_join(sink: Collector) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r[c] for c in OUT_COLUMNS) for r in sink.rows())


def split(pdfs: Iterator[Any]) -> tuple[Any, Any]:
    """A key's price updates (sorted by time, then price: a defined order) and orders."""
    import pandas as pd

    pdf = pd.concat(list(pdfs), ignore_index=True)
    updates = pdf[pdf["side"] == PRICE_UPDATE].sort_values(["t", "price"], kind="stable")
    return updates, pdf[pdf["side"] == ORDER]


def output(orders: Any, price: list[Any], valid_from: list[Any], valid_to: list[Any]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {
            "order_id": orders["order_id"].astype("int64").to_numpy(),
            "item": orders["item"].to_numpy(),
            "qty": orders["qty"].astype("int32").to_numpy(),
            "t": orders["t"].astype("int64").to_numpy(),
            "price": pd.array(price, dtype="Float64"),
            "table_valid_from": pd.array(valid_from, dtype="Int64"),
            "table_valid_to": pd.array(valid_to, dtype="Int64"),
        }
    )


def price_bytes(price: float) -> bytes:
    return struct.pack(">d", price)


def bytes_price(data: bytes | None) -> float | None:
    return None if data is None else struct.unpack(">d", data)[0]


# --- transformWithStateInPandas -----------------------------------------------------------------


class AsofProcessor(VersionedStatefulProcessor):
    """The as-of join: each key's price history in the partition's ``prices`` store."""

    stores: ClassVar[Mapping[str, StoreSpec]] = {
        "prices": StoreSpec(history_retention_ms=RETENTION_MS)
    }
    num_partitions: ClassVar[int | None] = 2

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import numpy as np

        store = self.store("prices")
        item = key[0].encode()
        updates, orders = split(rows)
        if len(updates):
            store.put_batch(
                [item] * len(updates),
                [price_bytes(p) for p in updates["price"]],
                updates["t"].to_numpy(np.int64),
            )
        if len(orders):
            found = store.get_batch([item] * len(orders), as_of=orders["t"].to_numpy(np.int64))
            yield output(
                orders,
                [bytes_price(v) for v in found.column("value").to_pylist()],
                found.column("timestamp").to_pylist(),
                found.column("valid_to").to_pylist(),
            )


@pytest.mark.requires_pyspark(4, 0, connect=(4, 1))  # transformWithStateInPandas
@pytest.mark.parametrize("fail_after_commit", [False, True])
def test_processor_asof_join_matches_merge_asof(
    spark: Any, verstore_root: Path, tmp_path: Path, fail_after_commit: bool
) -> None:
    batches = generate_asof(3, batches=3 if fail_after_commit else 4)
    joined = (
        tagged_input(spark, tmp_path, batches)
        .groupBy("item")
        .transformWithStateInPandas(
            AsofProcessor(), outputStructType=OUT_DDL, outputMode="Append", timeMode="None"
        )
    )
    sink = Collector()
    if fail_after_commit:  # close() raises after its commit on every task's first attempt
        spark.conf.set(FAIL_AFTER_COMMIT, "true")
    try:
        query = run_available_now(joined, tmp_path / "chk", sink)
    finally:
        spark.conf.unset(FAIL_AFTER_COMMIT)
    assert batch_input_rows(query, tmp_path / "orders") == {
        i: len(b.stream) for i, b in enumerate(batches)
    }
    assert got_join(sink) == expected_join(batches)


class Probe(VersionedStatefulProcessor):
    """Logs every hook call with the task it ran in (one JSON file per call)."""

    stores: ClassVar[Mapping[str, StoreSpec]] = {"probe": StoreSpec(history_retention_ms=1_000)}

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir

    def _log(self, event: str, **extra: Any) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        record = {
            "event": event,
            "driver": ctx is None,
            "batch": None if ctx is None else int(ctx.getLocalProperty("streaming.sql.batchId")),
            "partition": None if ctx is None else ctx.partitionId(),
            "open": getattr(self, "_context", None) is not None,
            "ns": time.time_ns(),
            **extra,
        }
        path = Path(self.log_dir) / f"{uuid.uuid4().hex}.json"
        path.write_text(json.dumps(record))

    def init(self, handle: Any) -> None:
        super().init(handle)
        self._log("init")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd

        n = sum(len(pdf) for pdf in rows)
        ctx = self.context
        self.store("probe").put(key[0].encode(), b"%d" % n, ctx.batch_id)
        self._log("data", key=key[0])
        yield pd.DataFrame({"key": [key[0]], "rows": [n]})

    def close(self) -> None:
        self._log("close")
        super().close()


@pytest.mark.requires_pyspark(4, 0, connect=(4, 1))  # transformWithStateInPandas
def test_processor_hooks_once_per_partition_per_batch(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    log_dir = tmp_path / "log"
    log_dir.mkdir()
    # Batch 1 has one key only: one of the two partitions gets no rows.
    batches = [[("a", 1), ("b", 2)], [("a", 3)], [("a", 4), ("b", 5), ("c", 6)]]
    schema = pa.schema([("key", pa.string()), ("t", pa.int64())])
    write_stream(tmp_path / "in", [[{"key": k, "t": t} for k, t in b] for b in batches], schema)
    counted = (
        read_stream(spark, tmp_path / "in", "key STRING, t LONG")
        .groupBy("key")
        .transformWithStateInPandas(
            Probe(str(log_dir)),
            outputStructType="key STRING, rows LONG",
            outputMode="Append",
            timeMode="None",
        )
        .withColumn("rows", F.col("rows"))
    )
    sink = Collector()
    run_available_now(counted, tmp_path / "chk", sink)
    assert {b: sorted((r["key"], r["rows"]) for r in rows) for b, rows in sink.batches.items()} == {
        0: [("a", 1), ("b", 1)],
        1: [("a", 1)],
        2: [("a", 1), ("b", 1), ("c", 1)],
    }

    log = [json.loads(p.read_text()) for p in log_dir.iterdir()]
    on_driver = [r for r in log if r["driver"]]
    in_tasks = [r for r in log if not r["driver"]]
    # The driver's schema pass: one init and one close, nothing opened.
    assert Counter(r["event"] for r in on_driver) == {"init": 1, "close": 1}
    assert not any(r["open"] for r in on_driver)
    # Tasks: exactly one init and one close per (batch, partition), empty partitions included,
    # stores open throughout, and init < data < close.
    tasks = {(b, p) for b in range(len(batches)) for p in (0, 1)}
    for event in ("init", "close"):
        calls = Counter((r["batch"], r["partition"]) for r in in_tasks if r["event"] == event)
        assert calls == Counter(tasks), event
    assert all(r["open"] for r in in_tasks)
    with_data = {(r["batch"], r["partition"]) for r in in_tasks if r["event"] == "data"}
    assert tasks - with_data, "some partition of some batch had no rows"
    for task in tasks:
        calls = sorted((r["ns"], r["event"]) for r in in_tasks
                       if (r["batch"], r["partition"]) == task)  # fmt: skip
        events = [e for _, e in calls]
        assert events[0] == "init" and events[-1] == "close" and events.count("init") == 1
    # close() committed: version b + 1 of every partition's store exists
    files = verstore.spark.inspect(str(verstore_root), "probe").to_pylist()
    committed = {(f["version"], f["partition"]) for f in files if f["kind"] == "changelog"}
    assert {(b + 1, p) for b, p in tasks} <= committed


@pytest.mark.requires_pyspark(4, 0, connect=(4, 1))  # transformWithStateInPandas
def test_processor_store_outside_a_task_raises() -> None:
    processor = AsofProcessor()
    with pytest.raises(RuntimeError, match="no stores are open"):
        processor.store("prices")
    processor.init(handle=None)  # type: ignore[arg-type]  # no TaskContext: the driver pass
    with pytest.raises(RuntimeError, match="no stores are open"):
        processor.store("prices")
    processor.close()  # nothing open: a no-op


# --- applyInPandasWithState + GroupHistory ------------------------------------------------------


def asof_with_history(key: Any, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    history = load_history(state, history_retention_ms=RETENTION_MS)
    updates, orders = split(pdfs)
    for t, price in zip(updates["t"], updates["price"], strict=True):
        history.put(price_bytes(float(price)), int(t))
    prices, valid_from, valid_to = [], [], []
    for t in orders["t"]:
        record = history.get(as_of=int(t))
        prices.append(None if record is None else bytes_price(record.value))
        valid_from.append(None if record is None else record.timestamp)
        valid_to.append(None if record is None else record.valid_to)
    save_history(state, history)
    if len(orders):
        yield output(orders, prices, valid_from, valid_to)


def test_group_history_asof_join_matches_merge_asof(
    spark: Any, verstore_root: Path, tmp_path: Path
) -> None:
    batches = generate_asof(4)
    joined = (
        tagged_input(spark, tmp_path, batches)
        .groupBy("item")
        .applyInPandasWithState(
            asof_with_history,
            outputStructType=OUT_DDL,
            stateStructType=HISTORY_STATE_SCHEMA,
            outputMode="append",
            timeoutConf="NoTimeout",
        )
    )
    sink = Collector()
    query = run_available_now(joined, tmp_path / "chk", sink)
    assert batch_input_rows(query, tmp_path / "prices") == {
        i: len(b.table) for i, b in enumerate(batches)
    }
    assert got_join(sink) == expected_join(batches)


class FakeState:
    """The part of ``GroupState`` that load/save use."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def test_history_round_trips_through_state() -> None:
    state = FakeState()
    history = load_history(state, history_retention_ms=100)
    assert isinstance(history, GroupHistory) and history.get() is None
    assert history.put(b"8", 0) == -1
    assert history.put(b"10", 4) == -1
    assert history.put(b"9", 2) == 4  # out of order: rewrites history
    save_history(state, history)
    (data,) = state.get
    state.value = (bytearray(data),)  # Spark may hand binary back as bytearray
    again = load_history(state, history_retention_ms=100)
    assert again.get(as_of=3).value == b"9"
    assert [r.value for r in again.versions(ascending=True)] == [b"8", b"9", b"10"]
    assert again.observed_stream_time == 4
    assert again.put(b"11", 1_000) == -1
    assert again.put(b"old", 899) == -(2**63)  # NOT_PUT: older than the grace period
