"""Checkpoints written by earlier verstore releases open, read and continue exactly.

Each golden set under ``tests/golden/verstore-<version>/`` was written once by a release that
changed an on-disk format (``tests/golden/make_golden.py``) and is never regenerated: its
``golden.json`` holds every commit's writes and what each version read then. Every set is
opened from a copy (the committed files stay as they are), at every version, by a fresh
executor (rebuilt from snapshots and changelogs); continued with a further commit; rebuilt
again; and read through ``verstore.committed`` and the ``verstore`` CLI.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import verstore
from verstore import cli, committed
from verstore.changes import partitions_of_changes, read_changes

sys.path.insert(0, str(Path(__file__).parents[1] / "golden"))
import make_golden as golden  # the generator's own reads and encodings

SETS = sorted(Path(__file__).parents[1].joinpath("golden").glob("verstore-*"))


def test_the_formats_this_build_writes_have_a_golden_set() -> None:
    from verstore._core import TUPLE_ENCODING
    from verstore.checkpoint.layout import FORMAT_VERSION
    from verstore.checkpoint.settings import META_FORMAT_WITH_TTL

    written = set()
    for s in SETS:
        g = json.loads((s / "golden.json").read_text())
        written.add((g["format_version"], g["tuple_encoding"]))
        if "sessions" in g:  # a lineage with a latest TTL: its _meta.json's own format
            written.add((META_FORMAT_WITH_TTL, g["tuple_encoding"]))
    for version in (FORMAT_VERSION, META_FORMAT_WITH_TTL):
        assert (version, TUPLE_ENCODING) in written, "run tests/golden/make_golden.py"


@pytest.fixture(params=SETS, ids=[s.name for s in SETS])
def golden_set(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A copy of one golden set's root, and its ``golden.json``."""
    root = tmp_path / "root"
    shutil.copytree(request.param / "root", root)
    return root, json.loads((request.param / "golden.json").read_text())


def test_every_version_of_every_partition_reads_as_it_did(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, g = golden_set
    for p, data in g["kv"]["partitions_data"].items():
        for version, expected in data["reads"].items():
            local = tmp_path / f"l-{p}-{version}"
            reads = golden.checkpoint_reads(root, int(p), int(version), local)
            assert reads == expected, (p, version)


def test_a_further_commit_continues_the_golden_chain_and_rebuilds(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, g = golden_set
    rng = random.Random(7)
    for p, data in g["kv"]["partitions_data"].items():
        newest = max(int(v) for v in data["ops"])
        ops = dict(data["ops"])
        stream_time = data["reads"][str(newest)]["observed_stream_time"]
        for version in (newest, newest + 1):  # two more commits, the first on the golden tip
            ops[str(version + 1)] = golden.kv_ops(rng, stream_time)
            part = golden.open_partition(root, "kv", int(p), version, tmp_path / f"exec-{p}")
            golden.apply_kv(part.store, ops[str(version + 1)])
            part.commit()
        for version in (newest, newest + 1, newest + 2):  # a new executor rebuilds each
            with golden.reference(ops, version) as model:
                expected = golden.kv_reads(model, golden.KV_KEYS)
            local = tmp_path / f"new-{p}-{version}"
            assert golden.checkpoint_reads(root, int(p), version, local) == expected, (p, version)


def test_typed_columns_decode_as_they_did_and_continue(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, g = golden_set
    prices = g["prices"]
    for version, expected in prices["reads"].items():
        assert golden.prices_reads(root, int(version)) == expected, version
    newest = max(int(v) for v in prices["rows"])
    rows = golden.prices_rows(random.Random(3), newest + 1)
    layout = golden.prices_layout()
    part = golden.open_partition(root, "prices", 0, newest, tmp_path / "exec", columns=layout)
    part.store.put_batch(*golden.encode_prices(rows))
    part.commit()
    after = golden.prices_reads(root, newest + 1)
    keys = {(r["symbol"], r["venue"]) for r in rows}

    def others(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if (r["symbol"], r["venue"]) not in keys]

    assert others(after["latest"]) == others(prices["reads"][str(newest)]["latest"])
    assert {(r["symbol"], r["venue"]) for r in after["latest"]} >= keys
    assert len(after["history"]) >= len(prices["reads"][str(newest)]["history"])


def test_the_cli_verifies_and_scans_a_golden_root(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, g = golden_set
    assert cli.main(["verify", str(root), "--deep"]) == 0
    out = tmp_path / "prices.parquet"
    scan = ["scan", str(root), "--store", "prices", "--history", "--parquet", str(out)]
    assert cli.main(scan) == 0
    newest = str(max(int(v) for v in g["prices"]["rows"]))
    table = pq.read_table(out)
    assert golden.plain_rows(table.to_batches()) == g["prices"]["reads"][newest]["history"]
    _, settings = committed.resolve(str(root), "kv", g["lineage"])
    assert settings.history_retention_ms == g["history_retention_ms"]


def test_a_value_schema_evolution_reads_and_continues(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, g = golden_set
    if "quotes" not in g:
        pytest.skip(f"{root.parent.name} predates value schema evolution")
    quotes = g["quotes"]
    for version, expected in quotes["reads"].items():
        assert golden.typed_reads(root, "quotes", int(version)) == expected, version
    newest = max(int(v) for v in quotes["rows"])
    _, layout = golden.quotes_layouts()
    rows = golden.quotes_rows(random.Random(4), newest + 1)
    part = golden.open_partition(root, "quotes", 0, newest, tmp_path / "exec", columns=layout)
    assert part.settings.layouts[-1] == layout and len(part.settings.layouts) == 2
    golden.put_typed(part, rows, layout)
    after = golden.typed_reads(root, "quotes", newest + 1)
    assert len(after["history"]) >= len(quotes["reads"][str(newest)]["history"])
    assert {(r["sym"], r["valid_from"]) for r in after["latest"]} >= {
        (r["sym"], r["t"])
        for r in rows
        if r["t"] == max(x["t"] for x in rows if x["sym"] == r["sym"])
    }


def test_a_repartitioned_store_reads_and_continues(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    root, g = golden_set
    if "moved" not in g:
        pytest.skip(f"{root.parent.name} predates repartitioning")
    moved = g["moved"]
    for version, expected in moved["reads"].items():
        assert golden.moved_reads(root, int(version)) == expected, version
    newest = max(int(v) for v in moved["rows"])
    rows = golden.moved_rows(random.Random(5), newest + 1)
    golden.moved_put(root, tmp_path, newest + 1, rows)
    after = golden.moved_reads(root, newest + 1)
    assert {(r["sym"], r["valid_from"]) for r in after["history"]} >= {
        (r["sym"], r["t"]) for r in rows
    }
    with pytest.raises(verstore.IncompatibleConfigError, match="repartition_store"):
        golden.open_partition(root, "moved", 0, newest + 1, tmp_path / "old", num_partitions=2)
    ref, settings = committed.resolve(str(root), "moved", g["lineage"])
    feed = [
        r
        for partitioning, p in partitions_of_changes(ref, settings, None, None)
        for batch in read_changes(ref, settings, p, partitioning=partitioning)
        for r in batch.to_pylist()
    ]
    written = {**moved["rows"], str(newest + 1): rows}
    assert sorted((r["batch_id"], r["sym"], r["valid_from"]) for r in feed) == sorted(
        (int(v) - 1, r["sym"], r["t"]) for v, batch in written.items() for r in batch
    )


TTL_SETS = [s for s in SETS if "sessions" in json.loads((s / "golden.json").read_text())]


@pytest.mark.parametrize("ttl_set", TTL_SETS, ids=[s.name for s in TTL_SETS])
def test_a_store_with_a_latest_ttl_reads_and_continues(ttl_set: Path, tmp_path: Path) -> None:
    """A store with a latest TTL (store format 4, ``_meta.json`` of checkpoint format 3):
    every version rebuilds and reads as it did, with keys the TTL ended and entries reclaimed;
    a further commit continues it, and a rebuild of that reads as the reference does."""
    root = tmp_path / "root"
    shutil.copytree(ttl_set / "root", root)
    data = json.loads((ttl_set / "golden.json").read_text())["sessions"]
    keys = golden.sessions_keys(data["versions"] + 1)
    recorded = golden.sessions_keys(data["versions"])
    for version, expected in data["reads"].items():
        local = tmp_path / f"l-{version}"
        assert golden.sessions_checkpoint_reads(root, int(version), recorded, local) == expected
    newest = data["versions"]
    ops = dict(data["ops"])
    ops[str(newest + 1)] = golden.sessions_ops(random.Random(7), newest + 1)
    part = golden.open_partition(
        root, "sessions", 0, newest, tmp_path / "exec", latest_ttl_ms=data["latest_ttl_ms"]
    )
    golden.apply_kv(part.store, ops[str(newest + 1)])
    part.commit()
    with golden.sessions_reference(ops, newest + 1) as model:
        expected = golden.kv_reads(model, keys)
    local = tmp_path / "rebuilt"
    assert golden.sessions_checkpoint_reads(root, newest + 1, keys, local) == expected


PUSHED_SETS = [s for s in SETS if "pushed" in json.loads((s / "golden.json").read_text())]


def test_a_set_holds_a_store_of_every_store_format() -> None:
    """Store format 5 (unsettled history, docs/format.md) has a set whose writes pushed."""
    assert any(
        max(json.loads((s / "golden.json").read_text())["pushed"]["unsettled_puts"]) > 0
        for s in PUSHED_SETS
    ), "run tests/golden/make_golden.py --add"


@pytest.mark.parametrize("pushed_set", PUSHED_SETS, ids=[s.name for s in PUSHED_SETS])
def test_a_store_of_read_free_puts_reads_and_continues(pushed_set: Path, tmp_path: Path) -> None:
    """A store of format 5, its latest values holding unsettled history in its snapshots and
    changelogs: every version rebuilds and reads as it did; a further commit of in-order puts
    (pushed again) and late writes continues it, and a rebuild of that reads as the reference
    does, before and after the store is settled."""
    root = tmp_path / "root"
    shutil.copytree(pushed_set / "root", root)
    data = json.loads((pushed_set / "golden.json").read_text())["pushed"]
    late = dict(data["late_ops"])
    keys = golden.pushed_recorded_keys(late)
    for version, expected in data["reads"].items():
        local = tmp_path / f"l-{version}"
        assert golden.pushed_checkpoint_reads(root, int(version), keys, local) == expected
    newest = data["versions"]
    late[str(newest + 1)] = golden.pushed_late_ops(random.Random(7), newest + 1)
    keys = golden.pushed_recorded_keys(late)
    part = golden.open_partition(
        root, "pushed", 0, newest, tmp_path / "exec", memory_limit_mb=golden.PUSHED_MEMORY_MB
    )
    golden.apply_pushed(part.store, golden.pushed_ops(late)[str(newest + 1)])
    assert part.store.stats().unsettled_puts > 0
    part.commit()
    with golden.reference(golden.pushed_ops(late), newest + 1) as model:
        expected = golden.pushed_reads(model, keys)
    assert golden.pushed_checkpoint_reads(root, newest + 1, keys, tmp_path / "rebuilt") == expected
    part = golden.open_partition(root, "pushed", 0, newest + 1, tmp_path / "settled")
    part.store.settle()
    assert golden.pushed_reads(part.store, keys) == expected
    assert part.store.stats().unsettled_puts == 0
    part.abort()


def test_read_free_puts_upgrade_an_older_store_and_it_rebuilds(
    golden_set: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """An earlier format's store (``kv``, format 3) continued by puts that skip their reads
    becomes format 5 in that commit: it rebuilds, and reads as the reference does."""
    root, g = golden_set
    p, data = next(iter(g["kv"]["partitions_data"].items()))
    newest = max(int(v) for v in data["ops"])
    stream_time = data["reads"][str(newest)]["observed_stream_time"]
    fresh = [f"up{i:04d}".encode() for i in range(golden.PUSHED["keys"])]
    ops = dict(data["ops"])
    ops[str(newest + 1)] = [
        ["put", k.hex(), k.hex(), stream_time + 1 + (r * len(fresh) + i) // 200]
        for r in range(2)
        for i, k in enumerate(fresh)
    ]
    part = golden.open_partition(
        root, "kv", int(p), newest, tmp_path / "exec", memory_limit_mb=golden.PUSHED_MEMORY_MB
    )
    golden.apply_kv(part.store, ops[str(newest + 1)])
    assert part.store.stats().unsettled_puts > 0
    part.commit()
    keys = golden.KV_KEYS + fresh[::97]
    with golden.reference(ops, newest + 1) as model:
        expected = golden.kv_reads(model, keys)
    local = tmp_path / "rebuilt"
    rebuilt = golden.open_partition(root, "kv", int(p), newest + 1, local, read_only=True)
    try:
        assert golden.kv_reads(rebuilt.store, keys) == expected
    finally:
        rebuilt.abort()
