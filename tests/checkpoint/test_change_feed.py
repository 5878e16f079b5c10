"""The change feed (``verstore.changes``, ``verstore changes``): each micro-batch's accepted
writes, from the changelogs of the winning chain, checked against the writes a golden
checkpoint recorded (``tests/golden``) and against hostile changelog files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import verstore
from verstore import cli
from verstore._core import NOT_PUT, read_changelog
from verstore.changes import DELETE, PUT, read_changes
from verstore.committed import resolve
from verstore.exceptions import CorruptionError, MissingVersionError

sys.path.insert(0, str(Path(__file__).parents[1] / "golden"))
import make_golden as golden  # the generator's own writes and settings

GOLDEN = Path(__file__).parents[1] / "golden" / "verstore-0.1.0"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(GOLDEN / "root", tmp_path / "root")
    return tmp_path / "root"


def accepted(ops_by_version: dict[str, list[list[Any]]]) -> list[tuple[Any, ...]]:
    """``(batch, seq, change, key hex, value hex, time)`` of the writes a store accepted, by
    Kafka's rule: a write older than stream time minus the history retention is dropped."""
    store = verstore.VersionedStore.in_memory(
        history_retention_ms=golden.RETENTION_MS, segment_interval_ms=golden.SEGMENT_MS
    )
    out = []
    for version in sorted(ops_by_version, key=int):
        seq = 0
        for kind, key, value, ts in ops_by_version[version]:
            too_old = ts < store.observed_stream_time - golden.RETENTION_MS
            if kind == "put":
                code = store.put(
                    bytes.fromhex(key), None if value is None else bytes.fromhex(value), ts
                )
                assert (code == NOT_PUT) == too_old
            else:
                store.delete(bytes.fromhex(key), ts)
                value = None
            if not too_old:
                change = DELETE if value is None else PUT
                out.append((int(version) - 1, seq, change, key, value, ts))
                seq += 1
    return out


def feed(root: Path, partition: int, **bounds: Any) -> list[tuple[Any, ...]]:
    ref, settings = resolve(str(root), "kv", golden.LINEAGE)
    rows = [r for b in read_changes(ref, settings, partition, **bounds) for r in b.to_pylist()]
    assert all(r["partition"] == partition for r in rows)
    return [
        (
            r["batch_id"],
            r["change_seq"],
            r["change_type"],
            r["key"].hex(),
            None if r["value"] is None else r["value"].hex(),
            r["valid_from"],
        )
        for r in rows
    ]


def test_the_feed_is_every_accepted_write_of_every_batch_in_order(root: Path) -> None:
    g = json.loads((GOLDEN / "golden.json").read_text())
    for p, data in g["kv"]["partitions_data"].items():
        want = accepted(data["ops"])
        assert feed(root, int(p)) == want
        assert feed(root, int(p), from_batch=2, to_batch=4) == [w for w in want if 2 <= w[0] <= 4]
        assert feed(root, int(p), from_batch=6) == [w for w in want if w[0] == 6]
        assert feed(root, int(p), from_batch=9) == []


def test_typed_columns_come_back_decoded(root: Path) -> None:
    ref, settings = resolve(str(root), "prices", golden.LINEAGE)
    rows = [
        r for b in read_changes(ref, settings, 0, from_batch=0, to_batch=0) for r in b.to_pylist()
    ]
    g = json.loads((GOLDEN / "golden.json").read_text())
    written = g["prices"]["rows"]["1"]
    assert [(r["symbol"], r["venue"], r["size"], r["valid_from"]) for r in rows] == [
        (w["symbol"], w["venue"], w["size"], w["t"]) for w in written
    ]
    assert {r["change_type"] for r in rows} == {PUT}


def test_the_cli_writes_the_feed(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "changes.parquet"
    args = ["changes", str(root), "--store", "kv", "--partition", "1", "--from-batch", "1"]
    assert cli.main([*args, "--parquet", str(out)]) == 0
    assert pq.read_table(out).column("batch_id").to_pylist() == [
        r[0] for r in feed(root, 1, from_batch=1)
    ]
    backwards = ["changes", str(root), "--store", "kv", "--from-batch", "3", "--to-batch", "2"]
    assert cli.main(backwards) == 2  # a bad argument


def test_batches_whose_changelogs_cleanup_removed_are_named(tmp_path: Path) -> None:
    from verstore.checkpoint import CheckpointOptions, PartitionStore

    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2)
    for version in range(8):
        part = PartitionStore.open(
            str(tmp_path / "r"),
            "s",
            0,
            version,
            str(tmp_path / "l"),
            history_retention_ms=1000,
            options=options,
        )
        part.store.put(b"k", b"v%d" % version, 10 * version)
        part.commit()
    ref, settings = resolve(str(tmp_path / "r"), "s")
    with pytest.raises(MissingVersionError, match=r"micro-batch 0 are gone.*oldest micro-batch"):
        list(read_changes(ref, settings, 0, from_batch=0))
    rows = [r for b in read_changes(ref, settings, 0) for r in b.to_pylist()]
    assert [r["batch_id"] for r in rows] == list(range(rows[0]["batch_id"], 8))
    assert [r["value"] for r in rows] == [b"v%d" % r["batch_id"] for r in rows]


def test_a_damaged_or_misnamed_changelog_is_a_corruption_error(root: Path) -> None:
    changelogs = sorted((root / "kv" / f"q={golden.LINEAGE}" / "p=0").glob("*.changelog"))
    data = changelogs[1].read_bytes()
    header, records = read_changelog(data, "c")
    assert header.version == 2 and records.schema.names == ["key", "value", "timestamp"]
    for bad in (data[:-3], data[:70] + bytes([data[70] ^ 1]) + data[71:], data[:64]):
        with pytest.raises(CorruptionError, match="c"):
            read_changelog(bad, "c")
    changelogs[1].write_bytes(changelogs[2].read_bytes())  # a valid file under another name
    ref, settings = resolve(str(root), "kv", golden.LINEAGE)
    with pytest.raises(CorruptionError, match="names another commit"):
        list(read_changes(ref, settings, 0))
