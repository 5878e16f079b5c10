"""The CLI by key (docs/spark.md, Operating a store): ``verstore get`` and ``scan --prefix`` take
key values as the store's column layout types them and find the key's partition as the helpers
route it, Spark's ``pmod(hash(key columns), num_partitions)``, which ``verstore.keys``
computes without Spark: checked here against Spark's own ``hash()`` for every key type the
helpers store, and end to end on a store an as-of join wrote."""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import verstore.spark
from verstore import keys
from verstore.cli import main
from verstore.spark._args import arrow_schema

pytest.register_assert_rewrite("streams")
from streams import BASE_MTIME, Collector, read_sources, run_available_now, to_arrow  # noqa: E402

#: Spark SQL type -> values of it, edge cases first (Spark Connect and classic alike).
TYPED: dict[str, list[Any]] = {
    "string": ["", "d", "d0", "d03", "sensor-0042", "Zürich ✓", "x" * 37],
    "int": [0, -1, 1, 2**31 - 1, -(2**31), 123_456],
    "bigint": [0, -1, 2**63 - 1, -(2**63), 1_772_359_200_000],
    "smallint": [0, -1, 2**15 - 1, -(2**15)],
    "tinyint": [0, -1, 127, -128],
    "boolean": [True, False],
    "double": [0.0, -0.0, 1.5, -2.25e300, float("nan"), float("inf")],
    "float": [0.0, -0.0, 1.5, -3.25, float("nan")],
    "date": [date(1970, 1, 1), date(1969, 12, 31), date(2026, 3, 1)],
    "timestamp": [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 10, 0, 0, 123_456, tzinfo=UTC),
        datetime(1960, 5, 4, 3, 2, 1, tzinfo=UTC),
    ],
    "timestamp_ntz": [datetime(2026, 3, 1, 10), datetime(1960, 5, 4, 3, 2, 1, 7)],
    "decimal(10,2)": [Decimal("0.00"), Decimal("-1.28"), Decimal("12345678.99")],
    "decimal(25,5)": [
        Decimal("0.00000"),
        Decimal("-0.00128"),
        Decimal("-1.28000"),
        Decimal("0.00255"),
        Decimal("12345678901234567890.12345"),
        Decimal("-99999999999999999999.99999"),
    ],
    "binary": [b"", b"\x00", b"\xff\x80\x7f", b"0123456789"],
}


def _rows(n: int) -> list[dict[str, Any]]:
    """Each value of each type at least once, then random combinations."""
    rng = random.Random(45)
    longest = max(len(v) for v in TYPED.values())
    rows = [{t: vs[i % len(vs)] for t, vs in TYPED.items()} for i in range(longest)]
    rows += [{t: rng.choice(vs) for t, vs in TYPED.items()} for _ in range(n)]
    return rows


def _columns(types: list[str]) -> list[str]:
    return [f"c{i}" for i in range(len(types))]


@pytest.mark.parametrize("num_partitions", [1, 4, 7, 200])
def test_the_partition_of_each_key_type_is_sparks(spark: Any, num_partitions: int) -> None:
    types = list(TYPED)
    names = _columns(types)
    ddl = ", ".join(f"{c} {t}" for c, t in zip(names, types, strict=True))
    data = [tuple(row.values()) for row in _rows(60)]
    df = spark.createDataFrame(data, ddl)
    # One column at a time, and tuples of every column (the hash of one feeds the next).
    cases = [[c] for c in names] + [names, names[::-1], ["c0", "c2"]]
    spark_parts = df.selectExpr(
        *names,
        *[
            f"pmod(hash({', '.join(case)}), {num_partitions}) AS p{i}"
            for i, case in enumerate(cases)
        ],
    )
    table = to_arrow(spark_parts)
    fields = {f.name: f for f in df.schema.fields}
    for i, case in enumerate(cases):
        schema = arrow_schema([fields[c] for c in case])
        got = [
            keys.partition([row[c] for c in case], schema, num_partitions)
            for row in table.select(case).to_pylist()
        ]
        assert got == table.column(f"p{i}").to_pylist(), case


def test_key_text_parses_to_the_partition_spark_routes_it_to(spark: Any) -> None:
    """The texts an operator types (not Python values) land on Spark's partition."""
    texts = {
        "string": "d03",
        "bigint": "1772359200000",
        "date": "2026-03-01",
        "timestamp": "2026-03-01T11:00:00.123456+01:00",
        "timestamp_ntz": "2026-03-01T10:00:00",
        "decimal(25,5)": "-1.28",
        "boolean": "true",
        "binary": "ff807f",
    }
    literal = {
        "string": "'d03'",
        "bigint": "1772359200000L",
        "date": "DATE'2026-03-01'",
        "timestamp": "TIMESTAMP'2026-03-01 10:00:00.123456 UTC'",
        "timestamp_ntz": "TIMESTAMP_NTZ'2026-03-01 10:00:00'",
        "decimal(25,5)": "CAST(-1.28 AS DECIMAL(25,5))",
        "boolean": "true",
        "binary": "X'FF807F'",
    }
    names = _columns(list(texts))
    df = spark.sql(
        "SELECT " + ", ".join(f"{literal[t]} AS {c}" for t, c in zip(texts, names, strict=True))
    )
    expected = df.selectExpr(f"pmod(hash({', '.join(names)}), 13) AS p").collect()[0]["p"]
    schema = arrow_schema(df.schema.fields)
    assert keys.partition(keys.parse(list(texts.values()), schema), schema, 13) == expected


# --- end to end ---------------------------------------------------------------------------------

#: 2026-03-01T10:00:00Z, where the calibrations start.
T0 = 1_772_359_200_000
SENSORS = [f"d{i:02d}" for i in range(30)]
READINGS = pa.schema([("reading_id", pa.int64()), ("sensor", pa.string()), ("t", pa.int64())])
CALIBRATIONS = pa.schema([("sensor", pa.string()), ("t", pa.int64()), ("offset", pa.float64())])


def _write(work: Path, name: str, i: int, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    (work / name).mkdir(parents=True, exist_ok=True)
    path = work / name / f"part-{i:03}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    os.utime(path, (BASE_MTIME + i, BASE_MTIME + i))


@pytest.fixture(scope="module")
def calibrated(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict[str, Any]]]:
    """Sensor readings joined to the calibration valid at their time, in 2 micro-batches on 4
    partitions; returns the checkpoint root and every calibration."""
    work = tmp_path_factory.mktemp("cli-keys")
    rng = random.Random(4503)
    calibrations: list[dict[str, Any]] = []
    for i in range(2):
        batch = [
            {
                "sensor": s,
                "t": T0 + 1000 * (2 * i + k) + rng.randrange(1000),
                "offset": rng.random(),
            }
            for s in SENSORS
            for k in range(2)
        ]
        readings = [{"reading_id": i * 100 + j, "sensor": SENSORS[j], "t": T0} for j in range(30)]
        _write(work, "calibrations", i, batch, CALIBRATIONS)
        _write(work, "readings", i, readings, READINGS)
        calibrations += batch
    verstore.spark.configure(
        spark, str(work / "verstore"), local_dir=str(work / "local"), kept_stores_per_worker=0
    )
    stream, table = read_sources(
        spark, work / "readings", work / "calibrations",
        "reading_id long, sensor string, t long", "sensor string, t long, offset double",
    )  # fmt: skip
    joined = verstore.spark.asof_join(
        stream, table, on="sensor", stream_time="t", table_time="t", num_partitions=4,
        store="calibrated",
    )  # fmt: skip
    run_available_now(joined, work / "chk", Collector())
    return work / "verstore", calibrations


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _iso(ms: int) -> str:
    return (
        (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def test_get_finds_a_key_by_its_string_in_its_partition_as_of_an_iso_time(
    spark: Any, calibrated: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root, calibrations = calibrated
    d03 = sorted((c["t"], c["offset"]) for c in calibrations if c["sensor"] == "d03")
    as_of = d03[1][0] + 1  # the second calibration of d03 is valid then, until the third
    state = to_arrow(verstore.spark.read_store(spark, "calibrated", checkpoint_root=str(root)))
    partition = {r["sensor"]: r["partition"] for r in state.to_pylist()}["d03"]
    argv = ["get", str(root), "--store", "calibrated", "--as-of", _iso(as_of), "d03"]
    code, out, err = _cli(capsys, *argv)
    assert code == 0, err
    assert out.splitlines() == [
        f"partition   {partition}",
        "sensor      d03",
        f"offset      {d03[1][1]}",
        f"valid_from  {_iso(d03[1][0])} ({d03[1][0]})",
        f"valid_to    {_iso(d03[2][0])} ({d03[2][0]})",
    ]
    code, out, _ = _cli(capsys, *argv[:-1], "--json", "d03")
    assert (code, json.loads(out)) == (0, {
        "found": True, "partition": partition, "key": {"sensor": "d03"},
        "value": {"offset": d03[1][1]},
        "valid_from": d03[1][0], "valid_from_iso": _iso(d03[1][0]),
        "valid_to": d03[2][0], "valid_to_iso": _iso(d03[2][0]),
    })  # fmt: skip
    # in another partition it is not found, and the message says where the CLI looked
    other = (partition + 1) % 4
    code, out, err = _cli(capsys, *argv[:-1], "--partition", str(other), "d03")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        f"no version of key sensor='d03' as of {_iso(as_of)} ({as_of}) in partition {other} "
        "of store 'calibrated'"
    )


def test_scan_prefix_takes_the_key_values(
    spark: Any, calibrated: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root, calibrations = calibrated
    d03 = sorted((c["t"], c["offset"]) for c in calibrations if c["sensor"] == "d03")
    argv = ["scan", str(root), "--store", "calibrated", "--history", "--prefix", "d03", "--json"]
    code, out, err = _cli(capsys, *argv)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["sensor"], r["offset"], r["valid_from"], r["valid_to"]) for r in rows] == [
        ("d03", offset, t, d03[i + 1][0] if i + 1 < len(d03) else None)
        for i, (t, offset) in enumerate(d03)
    ]
    assert rows[-1]["valid_to_iso"] is None and rows[0]["valid_from_iso"] == _iso(d03[0][0])


def test_a_raw_key_not_found_is_told_the_encoding(
    calibrated: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = calibrated
    argv = ["get", str(root), "--store", "calibrated", "--partition", "0", "--hex", b"d03".hex()]
    code, out, err = _cli(capsys, *argv)
    assert (code, out) == (1, "")
    encoded = keys.encode(["d03"], pa.schema([("sensor", pa.string())])).hex()
    assert err.splitlines()[-1] == (
        f"no version of key key={b'd03'!r} in partition 0 of store 'calibrated': its keys are "
        "the tuple encoding of (sensor: string); give the key's values instead of raw bytes "
        f"(KEY 'd03' is --hex {encoded})"
    )
