"""The streaming as-of join three ways on the same generated data, in one SparkSession.

* ``asof_join`` — ``verstore.spark.asof_join`` (partition stores, checkpointed);
* ``pandas_state`` — the baseline a Spark user writes today: both streams unioned, grouped by
  key, ``applyInPandasWithState`` keeping each key's price history as numpy arrays in
  ``GroupState`` (their bytes: pyspark 4 fails to read array-typed state back) and looking
  orders up with ``np.searchsorted``;
* ``passthrough`` — the floor: the same union, repartition by key and ``mapInArrow``, with no
  state at all (stream rows out, table columns null).

Data (seeded): ``keys`` symbols; per micro-batch ``rows`` orders and ``rows / 2`` price updates
(batch 0 also one initial price per symbol), 10% of each arriving late (event time in an earlier
batch's window). Each input is one Parquet file per batch, read with ``maxFilesPerTrigger=1``.
The sink collects each batch to the driver (``toArrow``). Throughput is stream rows over the
summed ``triggerExecution`` of batches 1.. (batch 0 also starts Python workers). The two joins
are checked against a pandas ``merge_asof`` oracle per batch (orders of the batch against every
price update so far); the pass-through is checked to return every order.

``python benches/spark_asof.py [--keys K --rows R --batches B]`` profiles instead: it times one
partition's micro-batches of the join outside Spark, phase by phase, against the pass-through's
partition function on the same rows (:func:`profile_partition`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

WINDOW_MS = 60_000
ORDERS_DDL = "order_id long, symbol string, order_ts long, quantity long"
PRICES_DDL = "symbol string, price_ts long, price double"
OUT_COLUMNS = [
    "order_id",
    "symbol",
    "order_ts",
    "quantity",
    "price",
    "table_valid_from",
    "table_valid_to",
]


@dataclass(frozen=True)
class Scale:
    keys: int
    rows: int
    batches: int


@dataclass
class Batch:
    orders: pa.Table
    prices: pa.Table


def session(partitions: int, driver_memory: str, warehouse: Path | None = None) -> Any:
    """The benchmarks' SparkSession: ``local[2]``, Arrow on, the JVM's defaults as users run
    it (only the smoke run of ``make test``, which times nothing, passes the tests' settings)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("verstore-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", driver_memory)
    )
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(warehouse))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generate(scale: Scale, seed: int = 11) -> list[Batch]:
    """Orders and price updates per batch; (symbol, price time) pairs are distinct."""
    rng = np.random.default_rng(seed)
    symbols = np.array([f"SYM{i:06d}" for i in range(scale.keys)], dtype=object)
    used: set[tuple[int, int]] = set()
    out = []
    for b in range(scale.batches):

        def times(n: int, b: int = b) -> np.ndarray[Any, Any]:
            on_time = b * WINDOW_MS + rng.integers(0, WINDOW_MS, n)
            if b == 0:
                return on_time
            late = rng.integers(0, b * WINDOW_MS, n)
            return np.where(rng.random(n) < 0.1, late, on_time)

        n = scale.rows // 2
        sym = rng.integers(0, scale.keys, n)
        ts = times(n)
        if b == 0:
            sym = np.concatenate([np.arange(scale.keys), sym])
            ts = np.concatenate([rng.integers(0, 1_000, scale.keys), ts])
        pairs = sym.astype(np.int64) * (1 << 32) + ts
        _, first = np.unique(pairs, return_index=True)
        keep = np.zeros(len(pairs), dtype=bool)
        keep[first] = True
        keep &= np.array(
            [(s, t) not in used for s, t in zip(sym.tolist(), ts.tolist(), strict=True)]
        )
        used.update(zip(sym[keep].tolist(), ts[keep].tolist(), strict=True))
        prices = pa.table(
            {
                "symbol": symbols[sym[keep]],
                "price_ts": pa.array(ts[keep], pa.int64()),
                "price": np.round(rng.uniform(10, 500, int(keep.sum())), 2),
            }
        )
        m = scale.rows
        orders = pa.table(
            {
                "order_id": np.arange(b * m, (b + 1) * m, dtype=np.int64),
                "symbol": symbols[rng.integers(0, scale.keys, m)],
                "order_ts": pa.array(times(m), pa.int64()),
                "quantity": rng.integers(1, 100, m),
            }
        )
        out.append(Batch(orders, prices))
    return out


def write_inputs(batches: list[Batch], data_dir: Path) -> None:
    """One Parquet file per stream per batch, oldest modification time first."""
    for i, batch in enumerate(batches):
        for name, table in (("orders", batch.orders), ("prices", batch.prices)):
            directory = data_dir / name
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"batch-{i:05d}.parquet"
            pq.write_table(table, path)
            os.utime(path, (1_000_000_000 + i, 1_000_000_000 + i))


def oracle(orders: pa.Table, prices_so_far: pa.Table) -> pd.DataFrame:
    """Each order with the newest price of its symbol at or before its time."""
    right = prices_so_far.to_pandas().sort_values(["symbol", "price_ts"])
    right["table_valid_to"] = right.groupby("symbol")["price_ts"].shift(-1).astype("Int64")
    right = right.rename(columns={"price_ts": "table_valid_from"})
    merged = pd.merge_asof(
        orders.to_pandas().sort_values("order_ts"),
        right.assign(order_ts=right["table_valid_from"]).sort_values("order_ts"),
        on="order_ts",
        by="symbol",
        direction="backward",
    )
    merged["table_valid_from"] = merged["table_valid_from"].astype("Int64")
    return merged.sort_values("order_id").reset_index(drop=True)


def check(
    batches: list[Batch],
    outputs: dict[int, pa.Table],
    joins: bool,
    columns: tuple[str, ...] = ("price", "table_valid_from", "table_valid_to"),
    event_time: bool = False,
) -> list[str]:
    """Differences from the oracle in ``columns`` (or, for the pass-through, missing orders).

    Each batch's orders are looked up in the price updates of that batch and the earlier ones,
    or with ``event_time`` in every update of the run (a join that waits for late updates:
    ``flink_asof.py``)."""
    problems = []
    every = pa.concat_tables([x.prices for x in batches]) if event_time else None
    for b, batch in enumerate(batches):
        got = outputs.get(b)
        if got is None:
            problems.append(f"batch {b}: no output")
            continue
        out = got.to_pandas().sort_values("order_id").reset_index(drop=True)
        ids = batch.orders.column("order_id").to_numpy()
        if len(out) != len(ids) or not (out["order_id"].to_numpy() == np.sort(ids)).all():
            problems.append(f"batch {b}: {len(out)} rows for {len(ids)} orders")
            continue
        if not joins:
            continue
        seen = (
            every if every is not None else pa.concat_tables([x.prices for x in batches[: b + 1]])
        )
        expected = oracle(batch.orders, seen)
        for column in columns:
            a = out[column].astype("Float64")
            e = expected[column].astype("Float64")
            same = (a == e).fillna(False) | (a.isna() & e.isna())
            if not same.all():
                problems.append(f"batch {b}: {int((~same).sum())} rows differ in {column}")
    return problems


# --- the three pipelines ------------------------------------------------------------------------


def _inputs(spark: Any, data_dir: Path) -> tuple[Any, Any]:
    read = spark.readStream.option("maxFilesPerTrigger", 1)
    orders = read.schema(ORDERS_DDL).parquet(str(data_dir / "orders"))
    prices = read.schema(PRICES_DDL).parquet(str(data_dir / "prices"))
    return orders, prices


def _tagged(orders: Any, prices: Any) -> Any:
    """Both streams in one: side 0 = order, 1 = price update (as asof_join unions them)."""
    from pyspark.sql import functions as F

    return orders.select(
        F.lit(0).cast("byte").alias("side"),
        "symbol",
        F.col("order_ts").alias("t"),
        "order_id",
        "quantity",
        F.lit(None).cast("double").alias("price"),
    ).unionByName(
        prices.select(
            F.lit(1).cast("byte").alias("side"),
            "symbol",
            F.col("price_ts").alias("t"),
            F.lit(None).cast("long").alias("order_id"),
            F.lit(None).cast("long").alias("quantity"),
            "price",
        )
    )


OUT_DDL = (
    "order_id long, symbol string, order_ts long, quantity long, price double, "
    "table_valid_from long, table_valid_to long"
)


def asof_query(spark: Any, data_dir: Path, partitions: int) -> Any:
    from verstore.spark import asof_join

    orders, prices = _inputs(spark, data_dir)
    return asof_join(
        orders,
        prices,
        on="symbol",
        stream_time="order_ts",
        table_time="price_ts",
        table_values=["price"],
        how="left",
        history_retention="7 days",
        num_partitions=partitions,
        store="bench_asof",
    ).select(*OUT_COLUMNS)


def _passthrough_partition(batches: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        rows = batch.filter(pc.equal(batch.column("side"), 0))
        n = rows.num_rows
        yield pa.RecordBatch.from_arrays(
            [
                rows.column("order_id"),
                rows.column("symbol"),
                rows.column("t"),
                rows.column("quantity"),
                pa.nulls(n, pa.float64()),
                pa.nulls(n, pa.int64()),
                pa.nulls(n, pa.int64()),
            ],
            names=OUT_COLUMNS,
        )


def passthrough_query(spark: Any, data_dir: Path, partitions: int) -> Any:
    tagged = _tagged(*_inputs(spark, data_dir))
    return tagged.repartition(partitions, "symbol").mapInArrow(_passthrough_partition, OUT_DDL)


def _pandas_state(key: Any, pdfs: Any, state: Any) -> Any:
    """One key's batch: apply its price updates, then look its orders up in the history."""
    import numpy as np
    import pandas as pd

    if state.exists:
        times_bytes, prices_bytes = state.get
        times = np.frombuffer(times_bytes, np.int64)
        prices = np.frombuffer(prices_bytes, np.float64)
    else:
        times, prices = np.empty(0, np.int64), np.empty(0, np.float64)
    pdf = pd.concat(list(pdfs), ignore_index=True)
    updates = pdf[pdf["side"] == 1]
    if len(updates):
        times = np.concatenate([times, updates["t"].to_numpy(np.int64)])
        prices = np.concatenate([prices, updates["price"].to_numpy(np.float64)])
        order = np.argsort(times, kind="stable")
        times, prices = times[order], prices[order]
        state.update((times.tobytes(), prices.tobytes()))
    orders = pdf[pdf["side"] == 0]
    if not len(orders):
        return
    t = orders["t"].to_numpy(np.int64)
    i = np.searchsorted(times, t, side="right") - 1
    found = i >= 0
    has_next = found & (i + 1 < len(times))
    price = np.full(len(t), np.nan)
    valid_from = pd.array(np.zeros(len(t), np.int64), dtype="Int64")
    valid_to = pd.array(np.zeros(len(t), np.int64), dtype="Int64")
    price[found] = prices[i[found]]
    valid_from[found] = times[i[found]]
    valid_to[has_next] = times[i[has_next] + 1]
    valid_from[~found] = pd.NA
    valid_to[~has_next] = pd.NA
    yield pd.DataFrame(
        {
            "order_id": orders["order_id"].to_numpy(),
            "symbol": orders["symbol"].to_numpy(),
            "order_ts": t,
            "quantity": orders["quantity"].to_numpy(),
            "price": price,
            "table_valid_from": valid_from,
            "table_valid_to": valid_to,
        }
    )


def pandas_state_query(spark: Any, data_dir: Path, partitions: int) -> Any:
    from pyspark.sql import types as T

    state = T.StructType(
        [T.StructField("times", T.BinaryType()), T.StructField("prices", T.BinaryType())]
    )
    tagged = _tagged(*_inputs(spark, data_dir))
    return tagged.groupBy("symbol").applyInPandasWithState(
        _pandas_state,
        outputStructType=OUT_DDL,
        stateStructType=state,
        outputMode="append",
        timeoutConf="NoTimeout",
    )


QUERIES = {
    "asof_join": asof_query,
    "pandas_state": pandas_state_query,
    "passthrough": passthrough_query,
}


@dataclass
class Result:
    rows_per_s: float
    stream_rows: int
    seconds: float
    problems: list[str]


_RUNS = itertools.count()


def _fresh_run_directory(work: Path) -> Path:
    """A directory no earlier run of this process used. The session's Python workers keep the
    stores of the run before open (``keptStoresPerWorker``): deleting their directories under
    them would make the next run pay for their drop, where RocksDB's close fails to flush into
    the deleted directory and pauses the process's flush thread a second, on the path of that
    run's handoffs (0.5-1 s opens in batch 1 of every run but the first). A user's next query
    does not delete the last one's local copies while it runs."""
    fresh = work.with_name(f"{work.name}-{next(_RUNS)}")
    shutil.rmtree(fresh, ignore_errors=True)
    return fresh


def _close_kept_stores(spark: Any) -> int:
    """Closes the stores that the session's Python workers keep from the run that ended, so
    that each run starts as a new query on its own would: kept from an earlier run, they would
    share the workers' memory budget with the next run's stores until evicted, and their
    closes (flushes) would fall in its time. A ``mapInArrow`` task, as the helpers' tasks are:
    Spark reuses a Python worker only for tasks of the same kind (an RDD task gets workers of
    another daemon, which keep nothing). One task per slot, each held long enough that they all
    run at once: every worker gets one. Returns how many stores were closed."""
    slots = spark.sparkContext.defaultParallelism

    def close(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import time

        from verstore.checkpoint import kept

        for _ in batches:
            pass
        time.sleep(0.5)
        keeper, closed = kept._PROCESS_KEEPER, 0
        if keeper is not None and keeper._pid == os.getpid():
            closed = len(keeper.held())
            keeper.close_all()
        yield pa.RecordBatch.from_pydict({"closed": [closed]})

    rows = spark.range(slots, numPartitions=slots).mapInArrow(close, "closed long").collect()
    return sum(row.closed for row in rows)


def run(
    spark: Any,
    name: str,
    data_dir: Path,
    work: Path,
    batches: list[Batch],
    partitions: int,
    kept_stores_per_worker: int | None = None,
) -> Result:
    """Runs one pipeline over every input file (availableNow) and checks its output, in a new
    directory beside ``work`` (``work-<n>``) that the next run leaves alone."""
    import verstore.spark

    work = _fresh_run_directory(work)
    verstore.spark.configure(
        spark,
        str(work / "verstore"),
        local_dir=str(work / "local"),
        kept_stores_per_worker=kept_stores_per_worker,
    )
    outputs: dict[int, pa.Table] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = df.toArrow()

    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    query = (
        QUERIES[name](spark, data_dir, partitions)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    closed = _close_kept_stores(spark)
    if os.environ.get("VERSTORE_PROFILE_TASKS"):
        print(f"{name}: {closed} kept stores closed after the run", file=sys.stderr)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    timed = [p for p in progress if p["batchId"] > 0] or progress
    seconds = sum(p["durationMs"]["triggerExecution"] for p in timed) / 1000
    stream_rows = sum(batches[p["batchId"]].orders.num_rows for p in timed)
    problems = check(batches, outputs, joins=name != "passthrough")
    return Result(stream_rows / max(seconds, 1e-9), stream_rows, seconds, problems)


# --- one partition outside Spark -----------------------------------------------------------------

# The join's shuffled columns (side 0 = table, 1 = stream; the key and the long time are shuffled
# once, see asof_join) and the pass-through's (side 0 = order).
JOIN_NAMES = ["__vs_side", "__vs_k0", "__vs_t", "__vs_s0", "__vs_s3", "__vs_v0"]
FLOOR_NAMES = ["side", "symbol", "t", "order_id", "quantity", "price"]


def mine(table: pa.Table, partitions: int, partition: int) -> pa.Table:
    """The rows of ``table`` whose symbol's CRC-32 falls in ``partition``."""
    import zlib

    symbols = table.column("symbol").to_pylist()
    keep = [zlib.crc32(s.encode()) % partitions == partition for s in symbols]
    return table.filter(pa.array(keep))


def tagged(part: Batch) -> list[pa.RecordBatch]:
    """A partition's micro-batch as Spark hands it to ``mapInArrow``: table rows (side 0) and
    stream rows (side 1) in 10 000-row Arrow batches, with the pass-through's column names."""
    o, p = part.orders, part.prices
    stream = {
        "side": pa.array(np.ones(o.num_rows, np.int8)),
        "k": o["symbol"],
        "t": o["order_ts"],
        "order_id": o["order_id"],
        "quantity": o["quantity"],
        "price": pa.nulls(o.num_rows, pa.float64()),
    }
    table = {
        "side": pa.array(np.zeros(p.num_rows, np.int8)),
        "k": p["symbol"],
        "t": p["price_ts"],
        "order_id": pa.nulls(p.num_rows, pa.int64()),
        "quantity": pa.nulls(p.num_rows, pa.int64()),
        "price": p["price"],
    }
    both = pa.concat_tables([pa.table(table), pa.table(stream)]).combine_chunks()
    batches: list[pa.RecordBatch] = both.to_batches(max_chunksize=10_000)
    return batches


def partition_function(reference: bool = False) -> Any:
    """The join's partition function as ``asof_query`` builds it (``reference``: the pyarrow
    path the Rust kernel replaced, which the tests keep: ``tests/asof_reference.py``)."""
    from verstore.spark.joins import _AsofPartition

    cls = _AsofPartition
    if reference:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from asof_reference import AsofPartitionArrow

        cls = AsofPartitionArrow
    return cls(
        store="bench_asof",
        keys=["__vs_k0"],
        stream_cols=["__vs_s0", "__vs_k0", "__vs_t", "__vs_s3"],
        values=["__vs_v0"],
        tie_breakers=[],
        out_names=OUT_COLUMNS,
        inner=False,
    )


def store_specs() -> dict[str, Any]:
    from verstore.spark import _args as A
    from verstore.spark import _runtime as R

    layout = A.column_layout(
        pa.schema([pa.field("symbol", pa.string())]), pa.schema([pa.field("price", pa.float64())])
    )
    return {"bench_asof": R.StoreSpec(history_retention_ms=7 * 86_400_000, columns=layout)}


class _TimedStore:
    """A store whose batch calls add their time to ``timings``; the join's kernel calls
    (``asof_apply``, ``asof_lookup``, which take the store itself) are timed by
    :func:`_timed_kernels` as ``put_batch`` and ``get_batch``."""

    def __init__(self, store: Any, timings: dict[str, float]) -> None:
        self._store, self._timings = store, timings

    def __getattr__(self, name: str) -> Any:
        import time

        method = getattr(self._store, name)
        if name not in ("get_batch", "put_batch"):
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self._timings[name] = self._timings.get(name, 0.0) + spent

        return timed


@contextmanager
def _timed_kernels(timings: dict[str, float]) -> Iterator[None]:
    """Within: ``verstore._core.asof_apply`` and ``asof_lookup`` (which the join imports at
    each call) take a :class:`_TimedStore` and add their time to ``timings`` as
    ``put_batch`` and ``get_batch``."""
    import time

    import verstore._core as core

    saved = {name: getattr(core, name) for name in ("asof_apply", "asof_lookup")}

    def timed(name: str, as_name: str) -> Any:
        def call(store: Any, *args: Any, **kwargs: Any) -> Any:
            raw = store._store if isinstance(store, _TimedStore) else store
            started = time.perf_counter()
            try:
                return saved[name](raw, *args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                timings[as_name] = timings.get(as_name, 0.0) + spent

        return call

    setattr(core, "asof_apply", timed("asof_apply", "put_batch"))  # noqa: B010
    setattr(core, "asof_lookup", timed("asof_lookup", "get_batch"))  # noqa: B010
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(core, name, function)


def _kept_in_memory() -> Any:
    """Stand-in for ``_runtime._partition_stores``: one in-memory store for every micro-batch,
    never opened, committed or closed."""
    from contextlib import contextmanager

    import verstore
    from verstore.checkpoint import StoreSettings
    from verstore.checkpoint.values import ValueCodec
    from verstore.spark import _runtime as R
    from verstore.spark._metrics import TaskMetrics

    kept = verstore.VersionedStore.in_memory(history_retention_ms=7 * 86_400_000)

    @contextmanager
    def stores(conf: Any, specs: Any, partitions: int, spill: Any) -> Any:
        yield R.PartitionContext(
            stores={name: kept for name in specs},
            batch_id=conf.batch_id,
            partition=conf.partition,
            rebuilt=dict.fromkeys(specs, False),
            spill=spill,
            metrics=TaskMetrics(),
            codecs={
                name: ValueCodec(StoreSettings(7 * 86_400_000, None, None, spec.columns))
                for name, spec in specs.items()
            },
        )

    return stores


def profile_partition(
    scale: Scale,
    partitions: int = 4,
    partition: int = 0,
    in_memory: bool = False,
    kept_stores: int = 4,
    memory_limit_mb: int = 512,
    held: int = 1,
) -> list[dict[str, float]]:
    """Times one partition's micro-batches of ``asof_join`` outside Spark, with the code its
    tasks run (``_runtime._partition_stores`` and the join's partition function, on a real
    checkpoint in a temporary directory), and the pass-through's partition function on the same
    input: what the join's Python worker does beyond the floor, without Spark and its noise.

    The partition holds the keys whose CRC-32 falls in it (not Spark's murmur3: the load per
    partition is what matters), as 10 000-row Arrow batches, as Spark hands them over.

    With ``in_memory`` the partition function gets one in-memory store that lives through all
    micro-batches and is never opened or committed: the join's state work without any
    durability, a bound on what a faster durable store could reach. ``kept_stores`` is
    ``keptStoresPerWorker``: the profile is one reused Python worker, so with the default the
    store stays open between micro-batches and the work its commit defers runs in the keeper's
    thread, timed apart (``deferred``) before the next micro-batch.

    ``memory_limit_mb`` is ``configure(memory_limit_mb=...)``: half of it the process's store
    budget. With ``held`` above 1 the process runs, each micro-batch, the tasks of partitions
    ``partition`` to ``partition + held - 1`` in turn, as one Python worker that Spark gives
    every partition's task: the stores it keeps between them share its budget. Each task is one
    row (``partition``), with what the budget's holders used when it began (``usage_*``, MB).

    The join's output is checked against the ``merge_asof`` oracle of each partition's rows.

    Returns:
        Per task (one a micro-batch when ``held`` is 1): ``rows`` (input rows), and
        milliseconds: ``open`` (opening the store), ``function`` (the partition function,
        including) ``put_batch`` and ``get_batch``, ``commit`` (metrics, flush, changelog,
        close), ``task`` (all of it), ``deferred`` (the kept store's flush, snapshot and
        cleanup after the task) and ``floor`` (the pass-through's function).
    """
    import os
    import tempfile

    from verstore.checkpoint.kept import Keeper
    from verstore.spark import _runtime as R

    fn = partition_function()
    specs = store_specs()
    stores = _kept_in_memory() if in_memory else contextmanager(R._partition_stores)
    reuse = os.environ.get("SPARK_REUSE_WORKER")
    os.environ["SPARK_REUSE_WORKER"] = "1"  # what Spark sets in the Python workers it reuses
    root = Path(tempfile.mkdtemp(prefix="verstore-profile-"))
    out = []
    held_partitions = range(partition, partition + held)
    parts: dict[int, list[Batch]] = {p: [] for p in held_partitions}
    outputs: dict[int, dict[int, pa.Table]] = {p: {} for p in held_partitions}
    try:
        for b, batch in enumerate(generate(scale)):
            for p in held_partitions:
                parts[p].append(
                    Batch(*(mine(x, partitions, p) for x in (batch.orders, batch.prices)))
                )
                task = _Task(root, b, p, partitions, kept_stores, memory_limit_mb)
                out.append(_profile_task(fn, specs, stores, task, parts[p][-1], outputs[p]))
    finally:
        Keeper.for_process().close_all()
        if reuse is None:
            del os.environ["SPARK_REUSE_WORKER"]
        shutil.rmtree(root, ignore_errors=True)
    for p in held_partitions:
        problems = check(parts[p], outputs[p], joins=True)
        if problems:
            raise AssertionError(f"the profiled join differs from the oracle: {problems[:5]}")
    return out


@dataclass(frozen=True)
class _Task:
    """Which task :func:`_profile_task` runs, and its settings."""

    root: Path
    batch: int
    partition: int
    partitions: int
    kept_stores: int
    memory_limit_mb: int


def _profile_task(
    fn: Any, specs: Any, stores: Any, task: _Task, part: Batch, outputs: dict[int, pa.Table]
) -> dict[str, float]:
    """One task of :func:`profile_partition`, its output added to ``outputs``; its row."""
    import time

    import pyarrow.compute as pc
    from verstore import memory_usage, set_memory_limit
    from verstore.checkpoint.kept import Keeper
    from verstore.spark._conf import TaskConf
    from verstore.spark._spill import RowBuffer, SpillArea

    inputs = tagged(part)
    b = task.batch
    conf = TaskConf(
        checkpoint_root=str(task.root / "checkpoint"),
        storage_options={},
        local_dir=str(task.root / "local"),
        batch_id=b,
        partition=task.partition,
        query_id="profile",
        snapshot_interval=10,
        min_versions_to_retain=100,
        lock_timeout_s=60.0,
        memory_limit_bytes=task.memory_limit_mb << 20,
        kept_stores=task.kept_stores,
    )
    set_memory_limit(conf.store_budget_mb)  # as _runtime.partition_stores does
    usage = memory_usage()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    with SpillArea(conf.local_dir, conf.arrow_budget_bytes) as spill:
        output = RowBuffer(spill, share=0.25)
        with stores(conf, specs, task.partitions, spill) as ctx, _timed_kernels(timings):
            t1 = time.perf_counter()
            timed: Any = _TimedStore(ctx.store("bench_asof"), timings)
            ctx.stores["bench_asof"] = timed
            for result in fn(ctx, iter(x.rename_columns(JOIN_NAMES) for x in inputs)):
                output.add(result)
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        joined = list(output.batches())
    t4 = time.perf_counter()
    while Keeper.for_process().working():
        time.sleep(0.001)
    t4b = time.perf_counter()
    if joined:
        outputs[b] = pa.Table.from_batches(joined)
    floor = [  # the pass-through's sides are the other way round
        x.rename_columns(FLOOR_NAMES).set_column(
            0, "side", pc.subtract(pa.scalar(1, pa.int8()), x.column(0))
        )
        for x in inputs
    ]
    t5 = time.perf_counter()
    for _ in _passthrough_partition(iter(floor)):
        pass
    t6 = time.perf_counter()
    spans = {"open": t1 - t0, "function": t2 - t1, "commit": t3 - t2, "task": t4 - t0}
    spans["deferred"] = t4b - t4
    spans |= timings
    spans["floor"] = t6 - t5
    return (
        {"batch": b, "partition": task.partition, "rows": sum(x.num_rows for x in inputs)}
        | {k: round(v * 1000, 1) for k, v in spans.items()}
        | {
            "usage_buffers": usage.write_buffer_bytes >> 20,
            "usage_caches": usage.cache_bytes >> 20,
            "usage_rocksdb": usage.rocksdb_bytes >> 20,
            "usage_memtables": usage.memtable_bytes >> 20,
        }
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=profile_partition.__doc__)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument(
        "--in-memory", action="store_true", help="an in-memory store, never opened or committed"
    )
    parser.add_argument(
        "--kept-stores", type=int, default=4, help="keptStoresPerWorker (0: close at commit)"
    )
    parser.add_argument("--memory-limit-mb", type=int, default=512, help="memory_limit_mb")
    parser.add_argument(
        "--held", type=int, default=1, help="partitions whose tasks this process runs in turn"
    )
    args = parser.parse_args()
    scale = Scale(args.keys, args.rows, args.batches)
    rows = profile_partition(
        scale,
        in_memory=args.in_memory,
        kept_stores=args.kept_stores,
        memory_limit_mb=args.memory_limit_mb,
        held=args.held,
    )
    for row in rows:
        print("  ".join(f"{k}={v}" for k, v in row.items()))
