"""Micro-batch streams for the Spark tests, and the as-of join oracle.

A test describes its input as a list of :class:`Batch` (stream rows and table rows of one
micro-batch). :func:`write_batches` writes batch ``i`` as one parquet file in each of two input
directories (an empty file when a side has no rows, so both sides stay aligned) with increasing
modification times; :func:`read_sources` reads them with ``maxFilesPerTrigger=1``, and a query
run with ``trigger(availableNow=True)`` then makes file pair ``i`` micro-batch ``i`` (checked by
:func:`batch_input_rows` from the query's progress).

:class:`Collector` is a ``foreachBatch`` sink keyed by batch id (a replayed batch replaces its
rows: the idempotent sink exactly-once needs), and :func:`asof_oracle` computes the expected
join per batch with pandas ``merge_asof`` against every table row of batches <= the current one.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import random
import shutil
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: Modification time of the first input file; file i gets BASE_MTIME + i seconds.
BASE_MTIME = 1_700_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Batch:
    """The input rows of one micro-batch."""

    stream: list[dict[str, Any]] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)


def write_batches(
    stream_dir: Path,
    table_dir: Path,
    batches: list[Batch],
    stream_schema: pa.Schema,
    table_schema: pa.Schema,
    *,
    start: int = 0,
) -> None:
    """Writes batch ``start + i`` as ``part-<n>.parquet`` in both directories."""
    for offset, batch in enumerate(batches):
        index = start + offset
        for directory, rows, schema in (
            (stream_dir, batch.stream, stream_schema),
            (table_dir, batch.table, table_schema),
        ):
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"part-{index:05d}.parquet"
            tmp = directory / f".tmp-part-{index:05d}.parquet"  # hidden: Spark skips dot files
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
            os.utime(tmp, (BASE_MTIME + index, BASE_MTIME + index))
            os.replace(tmp, path)


def read_sources(
    spark: Any, stream_dir: Path, table_dir: Path, stream_ddl: str, table_ddl: str
) -> tuple[Any, Any]:
    """The two streaming DataFrames, one input file per micro-batch each."""

    def read(directory: Path, ddl: str) -> Any:
        return spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(directory))

    return read(stream_dir, stream_ddl), read(table_dir, table_ddl)


#: Whether the tests run on Spark Connect (``conftest.py``).
CONNECT = os.environ.get("VERSTORE_SPARK_CONNECT") == "1"


def wipe_local(local: Path) -> None:
    """Deletes the executors' local store copies, as a lost disk does. The Python workers that
    kept stores open in them live on in a test session (a lost disk takes its workers along):
    a worker's keeper may close such a store while the directory goes, and RocksDB's close
    writes into it, so this deletes until nothing is left."""
    for _ in range(100):
        shutil.rmtree(local, ignore_errors=True)
        if not local.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{local} could not be deleted")


class Collector:
    """The test sink: each micro-batch's rows (as Arrow-converted dicts) by batch id.

    Classic sessions write through ``foreachBatch`` (this object is the function), one Arrow
    file per batch id in a directory of its own. On Spark Connect a ``foreachBatch`` function
    runs the batch's DataFrame from a request thread of the server, outside the micro-batch, so
    verstore's tasks would not know their batch (docs/spark.md, Spark Connect): there the query
    writes to Spark's parquet sink in the same directory, whose log of files per batch id gives
    the batches back. A replayed batch replaces its rows either way.

    Attributes:
        batches: batch id -> rows of its latest execution.
        calls: batch ids in the order the sink saw them (a replayed batch appears twice;
            classic sessions only).
    """

    def __init__(self, fail_on_batch: int | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="verstore-sink-"))
        self.fail_on_batch = fail_on_batch
        # Registered in the process that made the sink only (unpickling skips __init__).
        atexit.register(shutil.rmtree, self.directory, True)

    def start(self, df: Any) -> Any:
        """``df.writeStream`` into this sink."""
        if CONNECT:
            return df.writeStream.format("parquet").option("path", str(self.directory / "out"))
        return df.writeStream.foreachBatch(self)

    def __call__(self, df: Any, batch_id: int) -> None:
        table = to_arrow(df)
        tmp = self.directory / f".tmp-{batch_id}-{os.getpid()}.arrow"
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, self.directory / f"{batch_id}.arrow")
        with open(self.directory / "calls", "a") as calls:
            calls.write(f"{batch_id}\n")
        if batch_id == self.fail_on_batch:
            raise RuntimeError(f"test sink: failing after batch {batch_id}'s output was computed")

    @property
    def batches(self) -> dict[int, list[dict[str, Any]]]:
        if CONNECT:
            return self._sink_batches()
        out = {}
        for path in self.directory.glob("*.arrow"):
            if not path.name.startswith("."):
                with pa.memory_map(str(path)) as source:
                    out[int(path.stem)] = pa.ipc.open_file(source).read_all().to_pylist()
        return out

    def _sink_batches(self) -> dict[int, list[dict[str, Any]]]:
        """The parquet sink's batches, from its log (``_spark_metadata/<batch id>``: a version
        line, then one JSON line per file written)."""
        out: dict[int, list[dict[str, Any]]] = {}
        log = self.directory / "out" / "_spark_metadata"
        for entry in log.glob("[0-9]*") if log.is_dir() else ():
            files = [json.loads(line)["path"] for line in entry.read_text().splitlines()[1:]]
            tables = [pq.read_table(f.removeprefix("file:")) for f in files]
            out[int(entry.name)] = [row for t in tables for row in t.to_pylist()]
        return out

    @property
    def calls(self) -> list[int]:
        log = self.directory / "calls"
        return [int(line) for line in log.read_text().split()] if log.exists() else []

    def rows(self) -> list[dict[str, Any]]:
        batches = self.batches
        return [row for b in sorted(batches) for row in batches[b]]


def run_available_now(df: Any, checkpoint: Path, sink: Collector, *, timeout_s: float = 120) -> Any:
    """Runs ``df`` into ``sink`` until every input file is processed; returns the query."""
    query = (
        sink.start(df)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(timeout_s)
    except Exception:
        query.stop()
        raise
    if not finished:
        query.stop()
        raise AssertionError(f"query did not finish within {timeout_s} s")
    return query


def batch_input_rows(query: Any, directory: Path) -> dict[int, int]:
    """batch id -> input rows the source reading ``directory`` contributed (from progress;
    read as the dicts that PySpark 3.5 returns and 4's progress objects still are)."""
    wanted = str(directory)
    out: dict[int, int] = {}
    for progress in query.recentProgress:
        for source in progress["sources"]:
            if wanted in source["description"]:
                out[progress["batchId"]] = int(source["numInputRows"])
    return out


def to_arrow(df: Any) -> pa.Table:
    """``df.toArrow()``, which PySpark has from 4.0; on 3.5 the Arrow batches its
    ``toPandas`` collects. PySpark before 4.1 leaves closing the socket they came through to
    the garbage collector (``_load_from_socket``): collected here, its ResourceWarning is not a
    test's error at some later moment."""
    from verstore.spark._compat import to_arrow_schema

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        if hasattr(df, "toArrow"):
            table: pa.Table = df.toArrow()
        else:
            batches = df._collect_as_arrow()
            table = (
                pa.Table.from_batches(batches)
                if batches
                else to_arrow_schema(df.schema).empty_table()
            )
        gc.collect()
    return table


# --- data --------------------------------------------------------------------------------------


def ms(value: Any) -> Any:
    """Epoch milliseconds of a datetime (naive = UTC); other values unchanged."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return (value - EPOCH) // timedelta(milliseconds=1)
    return value


def ts(millis: int) -> datetime:
    return EPOCH + timedelta(milliseconds=millis)


def normalized(rows: list[dict[str, Any]], columns: list[str]) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset of tuples over ``columns``, times as epoch ms."""
    return Counter(tuple(ms(row[c]) for c in columns) for row in rows)


def generate(
    seed: int,
    *,
    batches: int = 5,
    stream_rows: int = 14,
    table_rows: int = 6,
    max_time: int = 60,
    timestamps: bool = False,
) -> list[Batch]:
    """Orders and price updates, out of order within and across batches.

    Keys are ``(region, item)``; times are drawn from the whole range in every batch, so late
    orders and late price updates are common, and so are equal (key, time) updates, within a
    batch and across batches (with equal and unequal ``seq`` tie-breakers). Some currency values
    are null.
    """
    rng = random.Random(seed)
    keys = [(r, i) for r in (1, 2) for i in ("curry", "naan", "dal")]
    out = []
    order_id = 0
    for b in range(batches):
        batch = Batch()
        for _ in range(stream_rows):
            region, item = rng.choice(keys)
            t = rng.randrange(max_time + 10)
            batch.stream.append(
                {
                    "order_id": order_id,
                    "region": region,
                    "item": item,
                    "qty": rng.randint(1, 5),
                    "t": ts(t) if timestamps else t,
                    "batch": b,
                }
            )
            order_id += 1
        for _ in range(table_rows):
            region, item = rng.choice(keys)
            t = rng.randrange(0, max_time, 5)  # few distinct times: equal (key, time) pairs
            batch.table.append(
                {
                    "region": region,
                    "item": item,
                    "price": float(rng.randint(1, 20)),
                    "currency": rng.choice(["EUR", "USD", None]),
                    "seq": rng.randrange(3),
                    "valid_from": ts(t) if timestamps else t,
                }
            )
        out.append(batch)
    return out


GEN_STREAM_DDL = "order_id LONG, region INT, item STRING, qty INT, t {time}, batch INT"
GEN_TABLE_DDL = "region INT, item STRING, price DOUBLE, currency STRING, seq INT, valid_from {time}"


def gen_schemas(timestamps: bool) -> tuple[str, pa.Schema, str, pa.Schema]:
    time_ddl = "TIMESTAMP" if timestamps else "LONG"
    time_pa = pa.timestamp("us", tz="UTC") if timestamps else pa.int64()
    stream = pa.schema(
        [
            ("order_id", pa.int64()),
            ("region", pa.int32()),
            ("item", pa.string()),
            ("qty", pa.int32()),
            ("t", time_pa),
            ("batch", pa.int32()),
        ]
    )
    table = pa.schema(
        [
            ("region", pa.int32()),
            ("item", pa.string()),
            ("price", pa.float64()),
            ("currency", pa.string()),
            ("seq", pa.int32()),
            ("valid_from", time_pa),
        ]
    )
    return (
        GEN_STREAM_DDL.format(time=time_ddl),
        stream,
        GEN_TABLE_DDL.format(time=time_ddl),
        table,
    )


# --- the oracle --------------------------------------------------------------------------------


def asof_oracle(
    batches: list[Batch],
    *,
    on: list[str],
    stream_time: str,
    table_time: str,
    values: list[str],
    table_schema: pa.Schema,
    how: str,
    tie_breaker: str | None,
    tolerance: int | None = None,
    allow_exact_matches: bool = True,
) -> list[dict[str, Any]]:
    """The expected as-of join: per batch, pandas ``merge_asof`` of the batch's stream rows
    against the winners of every table row of batches <= the current one, with ``merge_asof``'s
    own ``tolerance`` (ms) and ``allow_exact_matches``.

    The winner of an equal (key, time) group, as ``asof_join`` documents it: with a
    tie-breaker the largest tie-breaker, then the latest batch, then the largest encoded value
    bytes; without one the latest batch, then the largest encoded value bytes. Times come out
    as epoch ms.
    """
    import pandas as pd
    from verstore._core import encode_rows

    stored = [*values, *([tie_breaker] if tie_breaker else [])]
    seen: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for b, batch in enumerate(batches):
        if batch.table:
            encoded = encode_rows(
                pa.RecordBatch.from_pylist(batch.table, schema=table_schema), stored
            ).to_pylist()
            for row, vbytes in zip(batch.table, encoded, strict=True):
                if all(row[c] is not None for c in on) and row[table_time] is not None:
                    seen.append({**row, "_t": ms(row[table_time]), "_batch": b, "_vbytes": vbytes})
        if not batch.stream:
            continue
        stream = pd.DataFrame(
            [{**r, "_t": ms(r[stream_time]), "_i": i} for i, r in enumerate(batch.stream)]
        )
        table = pd.DataFrame([r for r in seen if r["_t"] >= 0])
        if len(table):
            order = [*on, "_t", *([tie_breaker] if tie_breaker else []), "_batch", "_vbytes"]
            table = table.sort_values(order, kind="stable")
            table = table.drop_duplicates([*on, "_t"], keep="last")
            table = table.sort_values([*on, "_t"])
            table["_to"] = table.groupby(on)["_t"].shift(-1)
            right = table[[*on, "_t", "_to", *values]].rename(
                columns={"_t": "_from_r", **{v: f"_v_{v}" for v in values}}
            )
            right["_tt"] = right["_from_r"]
            joined = pd.merge_asof(
                stream.sort_values("_t"),
                right.sort_values("_tt"),
                left_on="_t",
                right_on="_tt",
                by=on,
                direction="backward",
                allow_exact_matches=allow_exact_matches,
                tolerance=tolerance,
            ).sort_values("_i")
        else:
            joined = stream.assign(_from_r=None, _to=None, **{f"_v_{v}": None for v in values})
        for rec in joined.to_dict("records"):
            matched = _present(rec["_from_r"])
            if how == "inner" and not matched:
                continue
            row = {k: batch.stream[rec["_i"]][k] for k in batch.stream[0]}
            for v in values:
                row[v] = rec[f"_v_{v}"] if matched and _present(rec[f"_v_{v}"]) else None
            row["table_valid_from"] = int(rec["_from_r"]) if matched else None
            row["table_valid_to"] = int(rec["_to"]) if matched and _present(rec["_to"]) else None
            out.append({k: ms(v) for k, v in row.items()})
    return out


def _present(value: Any) -> bool:
    import pandas as pd

    return value is not None and not (isinstance(value, float) and pd.isna(value))


def gen_join(spark: Any, work: Path, *, timestamps: bool = False, **options: Any) -> Any:
    """The as-of join of the generated workload read from ``work/orders`` and
    ``work/prices`` (the join :func:`gen_oracle` checks); ``options`` go to ``asof_join``."""
    from verstore.spark import asof_join

    stream_ddl, _, table_ddl, _ = gen_schemas(timestamps)
    orders, prices = read_sources(spark, work / "orders", work / "prices", stream_ddl, table_ddl)
    return asof_join(
        orders,
        prices,
        on=["region", "item"],
        stream_time="t",
        table_time="valid_from",
        table_values=["price", "currency"],
        **{"how": "left", "tie_breaker": "seq", **options},
    )


def gen_oracle(
    batches: list[Batch],
    *,
    how: str,
    tie_breaker: str | None,
    timestamps: bool = False,
    tolerance: int | None = None,
    allow_exact_matches: bool = True,
) -> list[Any]:
    _, _, _, table_pa = gen_schemas(timestamps)
    return asof_oracle(
        batches,
        on=["region", "item"],
        stream_time="t",
        table_time="valid_from",
        values=["price", "currency"],
        table_schema=table_pa,
        how=how,
        tie_breaker=tie_breaker,
        tolerance=tolerance,
        allow_exact_matches=allow_exact_matches,
    )


OUT_COLUMNS = [
    "order_id", "region", "item", "qty", "t", "batch",
    "price", "currency", "table_valid_from", "table_valid_to",
]  # fmt: skip


def run_join_matching_oracle(spark: Any, tmp_path: Path, batches: list[Batch]) -> Any:
    """Runs ``gen_join`` over ``batches`` (written under ``tmp_path``) into a sink, checks its
    output against the oracle and returns the query."""
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    sink = Collector()
    query = run_available_now(gen_join(spark, tmp_path), tmp_path / "chk", sink)
    expected = gen_oracle(batches, how="left", tie_breaker="seq")
    assert normalized(sink.rows(), OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
    return query
