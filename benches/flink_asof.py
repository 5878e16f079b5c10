"""The peer: Flink SQL's event-time temporal join on the rows of ``spark_asof.py``.

What a Flink user writes for a streaming as-of join: the price updates as a versioned table (a
primary key and a watermark on the price's time), the orders with a watermark on theirs, and ::

    INSERT INTO joined
    SELECT o.order_id, o.symbol, o.order_ts, o.quantity, p.price, p.price_ts
    FROM orders AS o
    LEFT JOIN prices FOR SYSTEM_TIME AS OF o.rt AS p ON o.symbol = p.symbol

on PyFlink's local MiniCluster, parallelism 2, with RocksDB or heap (``hashmap``) state. The
inputs are the Parquet files of ``spark_asof.write_inputs``, rewritten as CSV before the clock
starts (PyFlink's package has no Parquet format); the output is a CSV file sink. The clock is the
job's net runtime (scheduling, reading, the join, the sink: the whole query over every batch,
not the gateway's or the MiniCluster's start); rows/s = orders over it.

Two differences from ``asof_join`` that the check accounts for:

* **Event time, not arrival.** Flink answers each order with the newest price at or before its
  time among every update it has when the watermark passes the order, whichever micro-batch's
  file the update came in. ``asof_join`` answers with the updates that arrived with the order or
  before. The data's late rows reach back to the first window, so Flink's answer is exact only if
  its watermark waits for the whole input (the default delay here): it holds every order until
  the end of the input, then joins. With a shorter delay, orders behind the watermark are joined
  after their versions were cleaned up and come out wrong. Flink's output is checked against the
  same ``merge_asof`` oracle with every price update as the table (``check(event_time=True)``);
  ``differs_from_arrival`` counts the orders where that answer is not ``asof_join``'s.
* **No valid-to.** The temporal join returns the version (its price and time), not when the
  next version starts: ``price`` and ``table_valid_from`` are checked.

The ``ROW_NUMBER()`` versioned view (``--versioned row_number``: Flink's documented way to make a
versioned view of an append-only stream) is not exact on these rows: its deduplication keeps a
row only if it is newer than the newest of its key so far, in arrival order, and drops the rest
(late rows, and every row of a file read after a later file: the file source reads files in no
fixed order), so the join loses their versions.

Runs in PyFlink's own environment (``make flink-env``: PyFlink pins a pyarrow and pandas of its
own) and prints one JSON line::

    .venv-flink/bin/python -m benches.flink_asof DATA_DIR WORK_DIR --backend rocksdb

:func:`run` does that from the main environment (``test_bench_spark.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: ``make flink-env``'s interpreter; ``VERSTORE_FLINK_PYTHON`` overrides it.
PYTHON = Path(os.environ.get("VERSTORE_FLINK_PYTHON", ROOT / ".venv-flink" / "bin" / "python"))
#: Flink's names of the state backends, by the benchmark's.
BACKENDS = {"rocksdb": "rocksdb", "heap": "hashmap"}
#: Checkpoints every so many seconds: the job's state is durable, as ``asof_join``'s is at each
#: micro-batch's commit.
CHECKPOINT_INTERVAL_S = 10.0
#: RocksDB's memory per slot (Flink's managed memory): verstore's budget per Python worker.
MANAGED_MB_PER_SLOT = 512
JOINED = ["order_id", "symbol", "order_ts", "quantity", "price", "table_valid_from"]


def run(
    data_dir: Path,
    work: Path,
    backend: str,
    parallelism: int = 2,
    python: Path = PYTHON,
    options: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Runs the job in a child process of ``python`` and returns its JSON line."""
    done = subprocess.run(
        [
            str(python),
            "-m",
            "benches.flink_asof",
            str(data_dir),
            str(work),
            "--backend",
            backend,
            "--parallelism",
            str(parallelism),
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=4 * 3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benches.flink_asof failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- in PyFlink's environment --------------------------------------------------------------------


def _interval(ms: int) -> str:
    """A day-time interval literal (Flink takes no SECOND field of more than two digits)."""
    hms = f"{ms // 3_600_000}:{ms // 60_000 % 60:02}:{ms // 1000 % 60:02}.{ms % 1000:03}"
    return f"INTERVAL '{hms}' HOUR TO SECOND(3)"


def _csv_inputs(data_dir: Path, csv_dir: Path) -> tuple[list[Any], int]:
    """The batches of ``data_dir`` (``spark_asof.Batch``) and their rows as CSV files, one per
    batch and stream; and the latest event time in them."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from .spark_asof import Batch

    tables: dict[str, list[Any]] = {}
    latest = 0
    for name, time_column in (("orders", "order_ts"), ("prices", "price_ts")):
        (csv_dir / name).mkdir(parents=True)
        tables[name] = []
        for path in sorted((data_dir / name).glob("batch-*.parquet")):
            table = pq.read_table(path)
            tables[name].append(table)
            latest = max(latest, table.column(time_column).to_numpy().max(initial=0))
            pacsv.write_csv(
                table,
                csv_dir / name / f"{path.stem}.csv",
                pacsv.WriteOptions(include_header=False),
            )
    batches = [Batch(o, p) for o, p in zip(tables["orders"], tables["prices"], strict=True)]
    return batches, int(latest)


def _statements(csv_dir: Path, out_dir: Path, delay_ms: int, versioned: str) -> list[str]:
    def files(name: str) -> str:
        return f"'connector' = 'filesystem', 'path' = 'file://{name}', 'format' = 'csv'"

    watermark = _interval(delay_ms)
    key = ", PRIMARY KEY (symbol) NOT ENFORCED" if versioned == "primary_key" else ""
    statements = [
        f"""CREATE TABLE orders (
              order_id BIGINT, symbol STRING, order_ts BIGINT, quantity BIGINT,
              rt AS TO_TIMESTAMP_LTZ(order_ts, 3),
              WATERMARK FOR rt AS rt - {watermark}
            ) WITH ({files(str(csv_dir / "orders"))})""",
        f"""CREATE TABLE price_updates (
              symbol STRING NOT NULL, price_ts BIGINT, price DOUBLE,
              rt AS TO_TIMESTAMP_LTZ(price_ts, 3),
              WATERMARK FOR rt AS rt - {watermark}{key}
            ) WITH ({files(str(csv_dir / "prices"))})""",
        f"""CREATE TABLE joined (
              order_id BIGINT, symbol STRING, order_ts BIGINT, quantity BIGINT,
              price DOUBLE, table_valid_from BIGINT
            ) WITH ({files(str(out_dir))})""",
    ]
    if versioned == "primary_key":
        statements.append("CREATE VIEW prices AS SELECT * FROM price_updates")
    else:
        statements.append(
            """CREATE VIEW prices AS
               SELECT symbol, price_ts, price, rt FROM (
                 SELECT *, ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY rt DESC) AS rownum
                 FROM price_updates)
               WHERE rownum = 1"""
        )
    return statements


QUERY = """
INSERT INTO joined
SELECT o.order_id, o.symbol, o.order_ts, o.quantity, p.price, p.price_ts
FROM orders AS o
LEFT JOIN prices FOR SYSTEM_TIME AS OF o.rt AS p ON o.symbol = p.symbol
"""


def _outputs(out_dir: Path, batches: list[Any]) -> dict[int, Any]:
    """The sink's rows, split by the batch their order came in."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    parts = [
        pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=JOINED))
        for path in sorted(out_dir.glob("part-*"))
    ]
    joined = pa.concat_tables(parts) if parts else pa.table({name: [] for name in JOINED})
    out = {}
    for b, batch in enumerate(batches):
        ids = batch.orders.column("order_id")
        out[b] = joined.filter(pc.is_in(joined.column("order_id"), ids))
    return out


def _differs_from_arrival(batches: list[Any]) -> int:
    """Orders whose newest price by event time is not the newest that arrived with them."""
    import pyarrow as pa

    from .spark_asof import oracle

    every = pa.concat_tables([b.prices for b in batches])
    differ = 0
    for i, batch in enumerate(batches):
        by_time = oracle(batch.orders, every)["table_valid_from"]
        arrived = oracle(batch.orders, pa.concat_tables([b.prices for b in batches[: i + 1]]))
        same = (by_time == arrived["table_valid_from"]).fillna(False) | (
            by_time.isna() & arrived["table_valid_from"].isna()
        )
        differ += int((~same).sum())
    return differ


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir", type=Path, help="spark_asof.write_inputs' directory")
    parser.add_argument("work", type=Path, help="emptied, then the CSV files, output, state")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="rocksdb")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--versioned",
        choices=["primary_key", "row_number"],
        default="primary_key",
        help="the versioned table: the updates with a primary key, or a ROW_NUMBER() view",
    )
    parser.add_argument(
        "--watermark-delay-ms",
        type=int,
        default=None,
        help="behind the latest time seen (default: past the latest time of the input)",
    )
    parser.add_argument(
        "--checkpoint-interval-s",
        type=float,
        default=CHECKPOINT_INTERVAL_S,
        help="Flink checkpoints every so many seconds (0: none)",
    )
    args = parser.parse_args()

    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment
    from pyflink.version import __version__ as flink_version

    from .spark_asof import check

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    batches, latest = _csv_inputs(args.data_dir.resolve(), work / "input")
    delay_ms = latest + 1 if args.watermark_delay_ms is None else args.watermark_delay_ms

    conf = Configuration()
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("state.backend.type", BACKENDS[args.backend])
    conf.set_string("taskmanager.memory.managed.size", f"{MANAGED_MB_PER_SLOT * args.parallelism}m")
    if args.checkpoint_interval_s > 0:
        conf.set_string(
            "execution.checkpointing.interval", f"{round(args.checkpoint_interval_s * 1000)}ms"
        )
        conf.set_string("execution.checkpointing.dir", f"file://{work / 'checkpoints'}")
        conf.set_string("execution.checkpointing.incremental", "true")
    settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf)
    env = TableEnvironment.create(settings.build())
    for statement in _statements(work / "input", work / "out", delay_ms, args.versioned):
        env.execute_sql(statement)

    started = time.perf_counter()
    result = env.execute_sql(QUERY)
    result.wait()
    wall = time.perf_counter() - started
    client = result.get_job_client()
    seconds = client.get_job_execution_result().result().get_net_runtime() / 1000

    outputs = _outputs(work / "out", batches)
    problems = check(
        batches, outputs, joins=True, columns=("price", "table_valid_from"), event_time=True
    )
    rows = sum(b.orders.num_rows for b in batches)
    print(
        json.dumps(
            {
                "flink": flink_version,
                "backend": args.backend,
                "parallelism": args.parallelism,
                "versioned": args.versioned,
                "watermark_delay_ms": delay_ms,
                "checkpoint_interval_s": args.checkpoint_interval_s,
                "rows": rows,
                "seconds": seconds,
                "wall_seconds": wall,
                "rows_per_s": rows / max(seconds, 1e-9),
                "problems": problems,
                "differs_from_arrival": _differs_from_arrival(batches),
            }
        )
    )


if __name__ == "__main__":
    main()
