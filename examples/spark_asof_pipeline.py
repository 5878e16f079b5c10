"""A streaming as-of join on local Spark: orders priced at the price valid at the order's time.

`make run` runs this job. It generates price updates per symbol and orders, writes them as one
Parquet file per micro-batch for each of two file streams, and joins every order with the price
of its symbol valid at the order's event time (`verstore.spark.asof_join`). Out-of-order data
arrives on both sides across micro-batches:

* late orders: an order placed at an earlier time than prices already seen is charged the price
  valid at its own time, not the newest one (Candace's bill from the Kafka article, at scale);
* late price updates: a price update older than the symbol's newest one rewrites history for
  the orders that arrive after it, and is never taken for the current price.

Halfway through, the query stops, its executors' local disk is wiped, and it restarts from the
checkpoint with the next files (a new executor picking up the job): the partition stores are
rebuilt from the durable checkpoint (snapshot + changelogs) and the results do not change.

Each micro-batch prints Spark's own progress figures (input rows, duration), the output rows,
the size of the verstore checkpoint, and the store's metrics from the query progress (rows put
and dropped as too late, keys, history, segments, bytes on disk, changelog and snapshot bytes,
and how many partition stores were reused from the local copy or rebuilt from the checkpoint).
At the end the whole output is checked against an
oracle: per batch, pandas ``merge_asof`` of that batch's orders against every price update seen
so far (this batch's included). The job prints MATCHES ORACLE, or MISMATCH and exits with 1.

Run: `make run`, or `python examples/spark_asof_pipeline.py --symbols 2000 --rows-per-batch
50000` once verstore[spark] is installed (Java 17 on the PATH).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

STORE = "prices_asof"
#: Event time of batch b's on-time rows: [START + b * WINDOW_MS, START + (b + 1) * WINDOW_MS).
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
WINDOW_MS = 60_000

ORDERS_SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("symbol", pa.string()),
        ("order_ts", pa.timestamp("ms", tz="UTC")),
        ("quantity", pa.int64()),
    ]
)
PRICES_SCHEMA = pa.schema(
    [
        ("symbol", pa.string()),
        ("price_ts", pa.timestamp("ms", tz="UTC")),
        ("price", pa.float64()),
    ]
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--symbols", type=int, default=200, help="distinct symbols (keys)")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches")
    parser.add_argument(
        "--rows-per-batch", type=int, default=20_000, help="orders per micro-batch (output rows)"
    )
    parser.add_argument(
        "--price-updates-per-batch",
        type=int,
        default=None,
        help="price updates per micro-batch (default: half the orders; batch 0 also sets an "
        "initial price for every symbol)",
    )
    parser.add_argument(
        "--late-fraction",
        type=float,
        default=0.1,
        help="share of orders and of price updates whose event time falls in an earlier batch",
    )
    parser.add_argument(
        "--restart-after",
        type=int,
        default=None,
        help="stop after this many batches, wipe the local disk and restart from the checkpoint "
        "(default: half the batches; 0: no restart)",
    )
    parser.add_argument("--partitions", type=int, default=4, help="store partitions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", default=None, help="keep files here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.symbols < 1 or args.batches < 1 or args.rows_per_batch < 0 or args.partitions < 1:
        parser.error("--symbols, --batches and --partitions must be >= 1, --rows-per-batch >= 0")
    if not 0 <= args.late_fraction <= 1:
        parser.error("--late-fraction must be in [0, 1]")
    if args.price_updates_per_batch is None:
        args.price_updates_per_batch = args.rows_per_batch // 2
    if args.restart_after is None:
        args.restart_after = args.batches // 2
    return args


# --- data ----------------------------------------------------------------------------------------


@dataclass
class Batch:
    orders: pa.Table
    prices: pa.Table


def event_times(
    rng: np.random.Generator, batch: int, n: int, late_fraction: float
) -> np.ndarray[Any, Any]:
    """Event times (ms) of n rows of batch ``batch``: on time, or late (an earlier batch's)."""
    on_time = START_MS + batch * WINDOW_MS + rng.integers(0, WINDOW_MS, n)
    if batch == 0:
        return on_time
    late = START_MS + rng.integers(0, batch * WINDOW_MS, n)
    return np.where(rng.random(n) < late_fraction, late, on_time)


def generate(args: argparse.Namespace) -> list[Batch]:
    """Seeded orders and price updates, one Batch per micro-batch.

    Price updates have distinct (symbol, time) pairs, so that the oracle needs no tie-breaking
    rule. About 2% of orders carry exactly the time of a price update already generated for
    their symbol (the as-of bound is inclusive: they get that price).
    """
    rng = np.random.default_rng(args.seed)
    symbols = np.array([f"SYM{i:05d}" for i in range(args.symbols)], dtype=object)
    seen: set[tuple[int, int]] = set()
    price_sym: list[np.ndarray[Any, Any]] = []
    price_ts: list[np.ndarray[Any, Any]] = []
    batches = []
    next_order = 0
    for b in range(args.batches):
        n = args.price_updates_per_batch
        sym = rng.integers(0, args.symbols, n)
        ts = event_times(rng, b, n, args.late_fraction)
        if b == 0:  # an initial price per symbol in the batch's first seconds
            sym = np.concatenate([np.arange(args.symbols), sym])
            ts = np.concatenate([START_MS + rng.integers(0, 5_000, args.symbols), ts])
        keep = np.zeros(len(sym), dtype=bool)
        for i, pair in enumerate(zip(sym.tolist(), ts.tolist(), strict=True)):
            if pair not in seen:
                seen.add(pair)
                keep[i] = True
        sym, ts = sym[keep], ts[keep]
        price_sym.append(sym)
        price_ts.append(ts)
        prices = pa.table(
            {
                "symbol": symbols[sym],
                "price_ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
                "price": np.round(rng.uniform(10, 500, len(sym)), 2),
            },
            schema=PRICES_SCHEMA,
        )

        m = args.rows_per_batch
        osym = rng.integers(0, args.symbols, m)
        ots = event_times(rng, b, m, args.late_fraction)
        exact = rng.random(m) < 0.02
        all_sym, all_ts = np.concatenate(price_sym), np.concatenate(price_ts)
        pick = rng.integers(0, len(all_sym), int(exact.sum()))
        osym[exact], ots[exact] = all_sym[pick], all_ts[pick]
        orders = pa.table(
            {
                "order_id": np.arange(next_order, next_order + m, dtype=np.int64),
                "symbol": symbols[osym],
                "order_ts": pa.array(ots, pa.timestamp("ms", tz="UTC")),
                "quantity": rng.integers(1, 100, m),
            },
            schema=ORDERS_SCHEMA,
        )
        next_order += m
        batches.append(Batch(orders, prices))
    return batches


def write_batch(data_dir: Path, index: int, batch: Batch) -> None:
    """One file per stream per batch. The file source takes the oldest file first, so each
    file's modification time is set to its batch number."""
    for name, table in (("orders", batch.orders), ("prices", batch.prices)):
        directory = data_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".batch-{index:05d}.parquet.tmp"
        pq.write_table(table, tmp)
        final = directory / f"batch-{index:05d}.parquet"
        os.utime(tmp, (1_000_000_000 + index, 1_000_000_000 + index))
        os.replace(tmp, final)  # the source never sees a half-written file


# --- the oracle ----------------------------------------------------------------------------------


def to_ms(column: pd.Series) -> pd.Series:
    """Timestamps (any unit, tz-aware or not) or integers as nullable int64 milliseconds."""
    if pd.api.types.is_datetime64_any_dtype(column):
        naive = column.dt.tz_convert("UTC").dt.tz_localize(None) if column.dt.tz else column
        out = pd.Series(pd.NA, index=column.index, dtype="Int64")
        mask = naive.notna()
        out[mask] = naive[mask].astype("datetime64[ms]").astype("int64")
        return out
    return column.astype("Int64")


def oracle(orders: pa.Table, prices_so_far: pa.Table) -> pd.DataFrame:
    """Every order with the latest price update of its symbol at or before the order's time."""
    left = orders.to_pandas()
    left["t"] = to_ms(left["order_ts"]).astype("int64")
    right = prices_so_far.to_pandas()
    right["t"] = to_ms(right["price_ts"]).astype("int64")
    right = right.sort_values(["symbol", "t"])
    right["valid_to"] = right.groupby("symbol")["t"].shift(-1).astype("Int64")
    right = right.rename(columns={"t": "valid_from"})
    merged = pd.merge_asof(
        left.sort_values("t"),
        right[["symbol", "valid_from", "valid_to", "price"]]
        .assign(t=right["valid_from"].astype("int64"))
        .sort_values("t"),
        on="t",
        by="symbol",
        direction="backward",
        allow_exact_matches=True,
    )
    merged["valid_from"] = merged["valid_from"].astype("Int64")
    return merged.sort_values("order_id").reset_index(drop=True)


def latest_price_differs(expected: pd.DataFrame, prices_so_far: pa.Table) -> int:
    """Orders whose as-of price differs from the symbol's newest price at processing time:
    what a stream-table join against the latest value (no history) gets wrong."""
    latest = (
        prices_so_far.to_pandas()
        .sort_values("price_ts")
        .groupby("symbol")["price"]
        .last()
        .rename("latest")
    )
    joined = expected.join(latest, on="symbol")
    return int((joined["price"].notna() & (joined["price"] != joined["latest"])).sum())


def late_rows(times: pa.ChunkedArray, batch: int) -> int:
    """Rows of batch ``batch`` whose event time falls in an earlier batch's window."""
    return int(pc.sum(pc.less(times.cast(pa.int64()), START_MS + batch * WINDOW_MS)).as_py() or 0)


def compare(batch_id: int, got: pa.Table, expected: pd.DataFrame) -> list[str]:
    """Differences between a batch's output and the oracle (empty: identical)."""
    out = got.to_pandas().sort_values("order_id").reset_index(drop=True)
    problems = []
    if (
        len(out) != len(expected)
        or not (out["order_id"].to_numpy() == expected["order_id"].to_numpy()).all()
    ):
        return [
            f"batch {batch_id}: {len(out)} output rows, oracle has {len(expected)} "
            "(different orders)"
        ]
    columns = {
        "symbol": (out["symbol"], expected["symbol"]),
        "order_ts": (to_ms(out["order_ts"]), expected["t"].astype("Int64")),
        "quantity": (out["quantity"].astype("Int64"), expected["quantity"].astype("Int64")),
        "price": (out["price"], expected["price"]),
        "table_valid_from": (to_ms(out["table_valid_from"]), expected["valid_from"]),
        "table_valid_to": (to_ms(out["table_valid_to"]), expected["valid_to"]),
    }
    for name, (a, b) in columns.items():
        a, b = a.reset_index(drop=True), b.reset_index(drop=True)
        same = (a == b).fillna(False) | (a.isna() & b.isna())
        if not same.all():
            i = int(np.flatnonzero(~same.to_numpy())[0])
            problems.append(
                f"batch {batch_id}: {int((~same).sum())} rows differ in {name}; first: order "
                f"{out['order_id'][i]} ({out['symbol'][i]} at {to_ms(out['order_ts'])[i]}) "
                f"got {a[i]!r}, oracle {b[i]!r}"
            )
    return problems


# --- measurements --------------------------------------------------------------------------------


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except FileNotFoundError:
                pass  # a temporary file renamed meanwhile
    return total


@dataclass
class BatchStats:
    output: pa.Table
    checkpoint_bytes: int


@dataclass
class Run:
    """What the foreachBatch sink and the progress listener share."""

    local_dir: Path
    checkpoint_root: Path
    stats: dict[int, BatchStats] = field(default_factory=dict)
    progress: dict[int, Any] = field(default_factory=dict)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def sink(self, df: Any, batch_id: int) -> None:
        output = df.toArrow()  # one action: the join runs once per batch
        stats = BatchStats(output, tree_bytes(self.checkpoint_root / STORE))
        with self.cond:
            self.stats[batch_id] = stats

    def on_progress(self, progress: Any) -> None:
        with self.cond:
            stats = self.stats.get(progress.batchId)
        try:
            if stats is not None:  # else an idle trigger with no batch
                self._print_batch(progress, stats)
        finally:
            # Only once its lines are out: `wait_for` lets the main thread print next (the
            # restart's line fell between a batch's two lines otherwise).
            with self.cond:
                self.progress[progress.batchId] = progress
                self.cond.notify_all()

    def _print_batch(self, progress: Any, stats: BatchStats) -> None:
        # FileStreamSource[file:/.../input/orders] -> "orders"
        sources = {
            s.description.rstrip("]").rsplit("/", 1)[-1]: s.numInputRows for s in progress.sources
        }
        print(
            f"batch {progress.batchId}: in {progress.numInputRows:,} rows "
            f"({sources.get('orders', 0):,} orders + {sources.get('prices', 0):,} price updates), "
            f"out {stats.output.num_rows:,} rows, "
            f"{progress.durationMs['triggerExecution'] / 1000:.2f} s, "
            f"checkpoint {stats.checkpoint_bytes / 1e6:.2f} MB",
            flush=True,
        )
        # The store's metrics of this batch, summed over its partitions (see docs/spark.md).
        from verstore.spark import progress_metrics

        m = progress_metrics(progress, f"verstore.{STORE}")
        if m is not None:
            print(
                f"  store: {m['rows_put']:,} rows put, {m['rows_expired']:,} too late, "
                f"{m['latest_keys']:,} keys, {m['history_rows']:,} history rows, "
                f"{m['live_segments']} segments, {m['disk_bytes'] / 1e6:.1f} MB on disk; "
                f"changelogs {m['changelog_bytes'] / 1e3:.0f} kB, "
                f"snapshots {m['snapshot_bytes'] / 1e6:.2f} MB; partitions reused "
                f"{m['reused']} (still open {m['kept_open']}) / caught up {m['caught_up']} / "
                f"rebuilt {m['rebuilt']} ({m['rebuild_ms']} ms)",
                flush=True,
            )

    def wait_for(self, batch_ids: range, timeout_s: float = 60) -> None:
        """Listener events are asynchronous: wait until every batch's progress is printed."""
        with self.cond:
            self.cond.wait_for(lambda: all(b in self.progress for b in batch_ids), timeout_s)


def progress_listener(run: Run) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            run.on_progress(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return Listener()


# --- the job -------------------------------------------------------------------------------------


def build_query(spark: Any, data_dir: Path, partitions: int) -> Any:
    """The streaming as-of join: orders priced as of their event time."""
    from verstore.spark import asof_join

    orders = (
        spark.readStream.schema("order_id long, symbol string, order_ts timestamp, quantity long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(data_dir / "orders"))
    )
    prices = (
        spark.readStream.schema("symbol string, price_ts timestamp, price double")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(data_dir / "prices"))
    )
    return asof_join(
        orders,
        prices,
        on="symbol",
        stream_time="order_ts",
        table_time="price_ts",
        table_values=["price"],
        how="left",
        history_retention="7 days",  # history kept, and the grace period for late updates
        num_partitions=partitions,
        store=STORE,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="verstore-spark-"))
    try:
        return run_job(args, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def wipe(local_dir: Path) -> None:
    """Deletes the executors' local store copies, as a lost disk does. The Python workers that
    kept stores open in them live on here (a lost disk takes its workers along), and one may be
    closing such a store, which writes into it, while it goes: delete until nothing is left."""
    for _ in range(100):
        shutil.rmtree(local_dir, ignore_errors=True)
        if not local_dir.exists():
            return
        time.sleep(0.05)


def run_job(args: argparse.Namespace, workdir: Path) -> int:
    import verstore.spark
    from pyspark.sql import SparkSession

    data_dir = workdir / "input"
    checkpoint = workdir / "checkpoint"  # the query's checkpoint location
    verstore_root = checkpoint / "verstore"  # verstore's, beside Spark's own files
    local_dir = workdir / "executor-local"

    t0 = time.perf_counter()
    batches = generate(args)
    n_prices = sum(b.prices.num_rows for b in batches)
    print(
        f"generated {args.batches} batches: {args.batches * args.rows_per_batch:,} orders and "
        f"{n_prices:,} price updates over {args.symbols:,} symbols "
        f"({args.late_fraction:.0%} late on each side), seed {args.seed} "
        f"({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )

    t0 = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("verstore-asof-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"spark {spark.version} started on local[2] ({time.perf_counter() - t0:.1f} s)")
    # Snapshots every 2 versions (default 10) so that the restart below rebuilds from a
    # snapshot plus changelogs rather than from changelogs only.
    verstore.spark.configure(
        spark, str(verstore_root), local_dir=str(local_dir), snapshot_interval=2
    )

    run = Run(local_dir, verstore_root)
    listener = progress_listener(run)
    spark.streams.addListener(listener)
    restart = args.restart_after if 0 < args.restart_after < args.batches else args.batches
    try:
        for first, stop in ((0, restart), (restart, args.batches)):
            if first == stop:
                continue
            if first > 0:
                wipe(local_dir)
                print(
                    f"-- query stopped after batch {first - 1}; executor local disk wiped; "
                    "restarting from the checkpoint --",
                    flush=True,
                )
            for b in range(first, stop):
                write_batch(data_dir, b, batches[b])
            query = (
                build_query(spark, data_dir, args.partitions)
                .writeStream.foreachBatch(run.sink)
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            run.wait_for(range(first, stop))
    finally:
        spark.streams.removeListener(listener)

    # The oracle: batch b's orders against every price update of batches 0..b.
    problems = []
    total_rows = stale = 0
    for b in range(args.batches):
        stats = run.stats.get(b)
        if stats is None or b not in run.progress:
            problems.append(f"batch {b}: no output or no progress report")
            continue
        total_rows += stats.output.num_rows
        seen = pa.concat_tables([x.prices for x in batches[: b + 1]])
        expected = oracle(batches[b].orders, seen)
        problems += compare(b, stats.output, expected)
        stale += latest_price_differs(expected, seen)
    duration_s = sum(p.durationMs["triggerExecution"] for p in run.progress.values()) / 1000
    late_orders = sum(late_rows(b.orders["order_ts"], i) for i, b in enumerate(batches))
    late_prices = sum(late_rows(b.prices["price_ts"], i) for i, b in enumerate(batches))
    print(
        f"{total_rows:,} orders priced as of their time ({late_orders:,} late orders, "
        f"{late_prices:,} late price updates); with only each symbol's newest price (no "
        f"history), {stale:,} orders would have been charged a different price"
    )
    print(
        f"throughput: {total_rows:,} output rows in {duration_s:.2f} s of batch time "
        f"({len(run.progress)} batches): {total_rows / max(duration_s, 1e-9):,.0f} rows/s"
    )
    if len(run.progress) > 1 and 0 in run.progress and 0 in run.stats:
        # Batch 0 also starts the Python workers and warms up the JVM.
        rest_s = duration_s - run.progress[0].durationMs["triggerExecution"] / 1000
        rest_rows = total_rows - run.stats[0].output.num_rows
        print(
            f"throughput after batch 0 (Python workers started): {rest_rows:,} rows in "
            f"{rest_s:.2f} s: {rest_rows / max(rest_s, 1e-9):,.0f} rows/s"
        )
    spark.stop()
    if problems:
        for line in problems[:20]:
            print(line)
        print("MISMATCH")
        return 1
    print("MATCHES ORACLE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
