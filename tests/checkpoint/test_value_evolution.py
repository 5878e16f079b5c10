"""Value schema evolution (``verstore.checkpoint.layouts``, ``.values``): a lineage reopened with
added, dropped or widened value columns keeps every stored version readable, through reopen,
rebuild, the reader, the change feed and the CLI; key changes and narrowing stay refused with
both schemas named; the evolution files are hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from verstore import cli, committed
from verstore._core import TUPLE_ENCODING
from verstore.changes import read_changes
from verstore.checkpoint import CheckpointOptions, ColumnLayout, PartitionStore, StoreSettings
from verstore.checkpoint.values import ValueCodec
from verstore.exceptions import CorruptionError, IncompatibleConfigError

KEYS = pa.schema([("sym", pa.string())])
V0 = pa.schema([("price", pa.float32()), ("qty", pa.int32()), ("note", pa.string())])
# price and qty widened, note dropped, venue added
V1 = pa.schema([("price", pa.float64()), ("qty", pa.int64()), ("venue", pa.string())])
L0 = ColumnLayout.of(TUPLE_ENCODING, KEYS, V0)
L1 = ColumnLayout.of(TUPLE_ENCODING, KEYS, V1)
OPTIONS = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=100)


def open_at(root: Path, local: Path, version: int, layout: ColumnLayout, **kw: Any) -> Any:
    return PartitionStore.open(
        str(root), "prices", 0, version, str(local), history_retention_ms=10**9,
        options=OPTIONS, columns=layout, **kw,
    )  # fmt: skip


def write(part: Any, rows: list[dict[str, Any]], values: pa.Schema) -> None:
    from verstore._core import encode_rows

    codec = ValueCodec(part.settings)
    keys = encode_rows(pa.RecordBatch.from_pylist(rows, schema=KEYS))
    encoded = codec.encode(pa.RecordBatch.from_pylist(rows, schema=values))
    part.store.put_batch(keys, encoded, [r["t"] for r in rows])
    part.commit()


@pytest.fixture
def evolved(tmp_path: Path) -> Path:
    """Versions 1-2 written as V0, version 3 as V1."""
    root, local = tmp_path / "root", tmp_path / "local"
    write(
        open_at(root, local, 0, L0),
        [{"sym": "A", "price": 1.5, "qty": 1, "note": "x", "t": 10}],
        V0,
    )
    write(
        open_at(root, local, 1, L0),
        [{"sym": "B", "price": 2.5, "qty": 2, "note": "y", "t": 20}],
        V0,
    )
    part = open_at(root, local, 2, L1)
    assert len(part.settings.layouts) == 2 and part.settings.columns == L1
    write(part, [{"sym": "A", "price": 3.25, "qty": 2**40, "venue": "X", "t": 30}], V1)
    return root


HISTORY = [
    ("A", 1.5, 1, None, 10, 30),
    ("A", 3.25, 2**40, "X", 30, None),
    ("B", 2.5, 2, None, 20, None),
]


def history(root: Path, version: int = committed.NEWEST) -> list[tuple[Any, ...]]:
    ref, settings = committed.resolve(str(root), "prices")
    rows = [
        r for b in committed.read_partition(ref, settings, 0, version=version, history=True)
        for r in b.to_pylist()
    ]  # fmt: skip
    return [
        (r["sym"], r["price"], r["qty"], r["venue"], r["valid_from"], r["valid_to"]) for r in rows
    ]


def test_every_version_reads_in_the_newest_columns(evolved: Path, tmp_path: Path) -> None:
    assert history(evolved) == HISTORY
    assert history(evolved, version=2) == [
        ("A", 1.5, 1, None, 10, None),
        ("B", 2.5, 2, None, 20, None),
    ]
    assert json.loads((evolved / "prices" / "q=default" / "_columns-1.json").read_text())["id"] == 1


def test_a_new_executor_rebuilds_the_evolved_store_and_continues(
    evolved: Path, tmp_path: Path
) -> None:
    part = open_at(evolved, tmp_path / "other", 3, L1)
    assert part.rebuilt
    write(part, [{"sym": "B", "price": 4.0, "qty": 3, "venue": None, "t": 40}], V1)
    assert history(evolved)[-2:] == [("B", 2.5, 2, None, 20, 40), ("B", 4.0, 3, None, 40, None)]


def test_the_change_feed_and_the_cli_decode_both_layouts(evolved: Path, tmp_path: Path) -> None:
    ref, settings = committed.resolve(str(evolved), "prices")
    feed = [r for b in read_changes(ref, settings, 0) for r in b.to_pylist()]
    assert [(r["batch_id"], r["sym"], r["price"], r["venue"]) for r in feed] == [
        (0, "A", 1.5, None), (1, "B", 2.5, None), (2, "A", 3.25, "X"),
    ]  # fmt: skip
    out = tmp_path / "scan.parquet"
    assert cli.main(["scan", str(evolved), "--store", "prices", "--parquet", str(out)]) == 0
    assert pq.read_table(out).column("venue").to_pylist() == ["X", None]


def test_narrowing_and_key_changes_are_refused_naming_both_schemas(
    evolved: Path, tmp_path: Path
) -> None:
    narrow = ColumnLayout.of(TUPLE_ENCODING, KEYS, pa.schema([("price", pa.float32())]))
    with pytest.raises(IncompatibleConfigError, match=r"price.*from double to float.*widening"):
        open_at(evolved, tmp_path / "l2", 3, narrow)
    other_keys = ColumnLayout.of(TUPLE_ENCODING, pa.schema([("sym", pa.int64())]), V1)
    with pytest.raises(IncompatibleConfigError, match=r"key \(sym: string\).*key \(sym: int64\)"):
        open_at(evolved, tmp_path / "l3", 3, other_keys)
    lineage = evolved / "prices" / "q=default"
    assert sorted(p.name for p in lineage.glob("_columns-*")) == ["_columns-1.json"]
    assert history(evolved) == HISTORY  # nothing changed


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda obj: b"{not json", id="not-json"),
        pytest.param(lambda obj: json.dumps({**obj, "id": 2}).encode(), id="wrong-id"),
        pytest.param(
            lambda obj: json.dumps(
                {**obj, "columns": {**obj["columns"], "key": [["sym", "int64"]]}}
            ).encode(),
            id="changes-keys",
        ),
        pytest.param(lambda obj: b" " * (2 << 20), id="too-large"),
    ],
)
def test_a_damaged_evolution_file_is_a_corruption_error(
    evolved: Path, tmp_path: Path, damage: Any
) -> None:
    path = evolved / "prices" / "q=default" / "_columns-1.json"
    path.write_bytes(damage(json.loads(path.read_text())))
    with pytest.raises(CorruptionError, match=r"_columns-1\.json"):
        committed.resolve(str(evolved), "prices")


def test_values_of_a_layout_the_lineage_never_recorded_are_refused() -> None:
    codec = ValueCodec(StoreSettings(1, None, None, L1, (L0, L1)))
    stranger = pa.array([b"\xfe\x00\x07\x01"], pa.binary())
    with pytest.raises(CorruptionError, match="layout 7"):
        codec.decode(stranger)
    with pytest.raises(CorruptionError, match="cut short"):
        codec.decode(pa.array([b"\xfe\x00"], pa.binary()))


def test_mixed_layouts_decode_in_row_order() -> None:
    old = ValueCodec(StoreSettings(1, None, None, L0, (L0,)))
    new = ValueCodec(StoreSettings(1, None, None, L1, (L0, L1)))
    a = old.encode(
        pa.RecordBatch.from_pylist([{"price": 1.0, "qty": 1, "note": "n"}] * 2, schema=V0)
    )
    b = new.encode(pa.RecordBatch.from_pylist([{"price": 2.0, "qty": 2, "venue": "v"}], schema=V1))
    mixed = pa.concat_arrays([a.slice(0, 1), b, pa.nulls(1, pa.binary()), a.slice(1, 1)])
    assert new.decode(mixed).to_pylist() == [
        {"price": 1.0, "qty": 1, "venue": None},
        {"price": 2.0, "qty": 2, "venue": "v"},
        {"price": None, "qty": None, "venue": None},
        {"price": 1.0, "qty": 1, "venue": None},
    ]
