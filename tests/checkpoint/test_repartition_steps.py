"""Repartitioning a checkpointed store, step by step (``verstore.checkpoint.repartition``),
without Spark: keys are routed here by a hash of their bytes, as the Spark job routes them by
Spark's hash of their columns. The state moves exactly (every key's versions and tombstones,
reads at every time, later out-of-order writes); a process killed at any step leaves the old
partitioning or the new one, whole; partitioning records are hostile input; and the opens of
a repartitioned lineage find the right directory, fence stale writers and read older versions
where they are."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import verstore
from repartition_helpers import run_in_process
from verstore.checkpoint import PartitionStore, faults
from verstore.checkpoint import repartition as steps
from verstore.checkpoint.layout import LineageFiles
from verstore.checkpoint.partitionings import record_path
from verstore.checkpoint.settings import read_settings
from verstore.location import Location

RETENTION = 500
STORE, LINEAGE = "prices", "q1"
#: Keys and values are bytes here: the store records no column layout (the Spark job needs one).
COLUMNS = None
KEYS = [f"key-{i}".encode() for i in range(30)]


def route(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


def open_partition(root: Path, p: int, version: int, n: int | None, **kw: Any) -> PartitionStore:
    return PartitionStore.open(
        str(root), STORE, p, version, str(root.parent / "local" / f"{n}"),
        history_retention_ms=RETENTION, lineage=LINEAGE, num_partitions=n, columns=COLUMNS,
        **kw,
    )  # fmt: skip


def writes(seed: int, batches: int) -> list[list[tuple[bytes, bytes | None, int]]]:
    """Per micro-batch: puts and deletes, out of order now and then, some too old."""
    rng = random.Random(seed)
    out = []
    for b in range(batches):
        batch = []
        for _ in range(40):
            t = 100 * b + rng.randrange(-300, 100)
            value = None if rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 6))
            batch.append((rng.choice(KEYS), value, max(t, 0)))
        out.append(batch)
    return out


def run_batches(root: Path, batches: list[Any], first: int, n: int) -> None:
    """Micro-batches ``first``... on ``n`` partitions (every partition runs every batch)."""
    for b, batch in enumerate(batches, start=first):
        for p in range(n):
            with open_partition(root, p, b, n) as opened:
                for key, value, t in batch:
                    if route(key, n) == p:
                        opened.store.put(key, value, t)
                opened.commit()


def reads(root: Path, version: int, n: int) -> dict[bytes, Any]:
    """Every key's versions (tombstones included) and stream time of its partition."""
    out = {}
    for p in range(n):
        opened = open_partition(root, p, version, None, read_only=True)
        try:
            store = opened.store
            for key in KEYS:
                if route(key, n) == p:
                    out[key] = [(r.value, r.timestamp, r.valid_to) for r in store.versions(key)]
            out[p] = store.observed_stream_time
        finally:
            opened.abort()
    return out


def repartition(root: Path, version: int, n: int) -> steps.Plan:
    """The steps as ``verstore.spark.repartition_store`` runs them, routed by :func:`route`."""
    location = Location.resolve(str(root))
    plan = steps.plan(location, STORE, LINEAGE, version, n)
    assert plan is not None
    run_in_process(location, plan, route, str(root.parent / "scratch"))
    return plan


def expected(batches: list[Any], n: int) -> dict[bytes, Any]:
    """Every key's versions as one in-memory store per partition of ``n`` builds them."""
    stores = [verstore.VersionedStore.in_memory(history_retention_ms=RETENTION) for _ in range(n)]
    for batch in batches:
        for key, value, t in batch:
            stores[route(key, n)].put(key, value, t)
    out: dict[bytes, Any] = {}
    for key in KEYS:
        out[key] = [(r.value, r.timestamp, r.valid_to) for r in stores[route(key, n)].versions(key)]
    return out


def keys_only(found: dict[Any, Any], horizon: int = -1) -> dict[bytes, Any]:
    """Every key's versions from ``horizon`` on (below it, what a store still holds depends on
    its own stream time, which a move may raise)."""
    return {k: [x for x in v if x[1] >= horizon] for k, v in found.items() if isinstance(k, bytes)}


def horizon_of(batches: list[Any]) -> int:
    return max(t for b in batches for _, _, t in b) - RETENTION


def test_the_state_moves_exactly_and_the_query_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "root"
    batches = writes(seed=1, batches=6)
    run_batches(root, batches[:3], 0, 4)
    before = reads(root, 3, 4)
    repartition(root, 3, 7)
    after = reads(root, 3, 7)
    horizon = horizon_of(batches[:3])
    assert keys_only(after, horizon) == keys_only(before, horizon)
    # Each new partition starts at the highest stream time of the old ones its keys came from.
    assert {after[p] for p in range(7)} <= {before[p] for p in range(4)} | {-1}
    run_batches(root, batches[3:5], 3, 7)
    repartition(root, 5, 2)
    run_batches(root, batches[5:], 5, 2)
    settings = read_settings(LineageFiles(Location.resolve(str(root)), STORE, LINEAGE))
    assert settings is not None and settings.num_partitions == 2
    assert [p.num_partitions for p in settings.partitionings] == [4, 7, 2]
    # Within retention, the reads are those of stores that had seen every write.
    horizon = horizon_of(batches)
    assert keys_only(reads(root, 6, 2), horizon) == keys_only(expected(batches, 2), horizon)


def test_older_versions_are_read_where_they_were_written(tmp_path: Path) -> None:
    root = tmp_path / "root"
    batches = writes(seed=2, batches=4)
    run_batches(root, batches[:2], 0, 3)
    at_one = reads(root, 1, 3)
    repartition(root, 2, 5)
    run_batches(root, batches[2:], 2, 5)
    assert keys_only(reads(root, 1, 3)) == keys_only(at_one)


def test_a_write_below_the_repartition_is_fenced(tmp_path: Path) -> None:
    root = tmp_path / "root"
    run_batches(root, writes(seed=3, batches=2), 0, 2)
    repartition(root, 2, 3)
    with pytest.raises(verstore.FencedError, match="repartitioned at version 2"):
        open_partition(root, 0, 1, 3)
    with pytest.raises(verstore.IncompatibleConfigError, match="repartition_store"):
        open_partition(root, 0, 2, 2)


def test_a_process_that_remembers_the_old_count_reads_the_settings_again(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    run_batches(root, writes(seed=4, batches=2), 0, 2)  # this process verified 2 partitions
    repartition(root, 2, 3)
    with pytest.raises(verstore.IncompatibleConfigError, match="num_partitions=3"):
        open_partition(root, 0, 2, 2)


def test_repartition_records_are_hostile_input(tmp_path: Path) -> None:
    root = tmp_path / "root"
    run_batches(root, writes(seed=5, batches=2), 0, 2)
    plan = repartition(root, 2, 3)
    files = plan.files(Location.resolve(str(root)))
    path = Path(record_path(files, 1))
    good = json.loads(path.read_text())
    bad = [
        b"{",
        b"[]",
        b" " * (64 << 10) + b"{}",
        json.dumps({**good, "id": 2}).encode(),
        json.dumps({**good, "num_partitions": 0}).encode(),
        json.dumps({**good, "version": 0}).encode(),
        json.dumps({**good, "dir": "../../elsewhere"}).encode(),
        json.dumps({**good, "dir": "partitioning-2-0123456789abcdef"}).encode(),
        json.dumps({**good, "extra": 1}).encode(),
    ]
    for data in bad:
        path.write_bytes(data)
        with pytest.raises(verstore.CorruptionError, match=r"_partitioning-1\.json"):
            read_settings(files)


STEPS = [
    "repartition_marked",
    "repartition_writing",
    "after_changelog",
    "repartition_before_publish",
    "repartition_published",
]


@pytest.mark.parametrize("step", STEPS)
def test_a_repartition_killed_at_any_step_leaves_one_whole_state(tmp_path: Path, step: str) -> None:
    root = tmp_path / "root"
    batches = writes(seed=6, batches=4)
    run_batches(root, batches[:2], 0, 3)
    horizon = horizon_of(batches[:2])
    before = keys_only(reads(root, 2, 3), horizon)
    child = subprocess.run(
        [sys.executable, __file__, str(root), step], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    settings = read_settings(LineageFiles(Location.resolve(str(root)), STORE, LINEAGE))
    assert settings is not None
    n = settings.num_partitions
    assert n == (4 if step == "repartition_published" else 3)
    assert keys_only(reads(root, 2, n), horizon) == before
    run_batches(root, batches[2:3], 2, n)
    if n == 3:
        repartition(root, 3, 4)
    run_batches(root, batches[3:], 3, 4)
    horizon = horizon_of(batches)
    assert keys_only(reads(root, 4, 4), horizon) == keys_only(expected(batches, 4), horizon)


def _child(root: str, step: str) -> None:
    """The repartition in a process that kills itself at ``step``."""

    def kill(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(kill)
    repartition(Path(root), 2, 4)


if __name__ == "__main__":
    _child(*sys.argv[1:3])


def test_the_cli_reads_a_repartitioned_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq
    from verstore import cli

    root = tmp_path / "root"
    batches = writes(seed=7, batches=4)
    run_batches(root, batches[:2], 0, 2)
    repartition(root, 2, 3)
    run_batches(root, batches[2:], 2, 3)
    assert cli.main(["verify", str(root), "--deep"]) == 0
    assert cli.main(["inspect", str(root)]) == 0
    assert "from version 2: 3 partitions in partitioning-1-" in capsys.readouterr().out
    scan = tmp_path / "scan.parquet"
    assert cli.main(["scan", str(root), "--history", "--parquet", str(scan)]) == 0
    rows = pq.read_table(scan).to_pylist()
    assert {r["partition"] for r in rows} <= {0, 1, 2}
    want = keys_only(reads(root, 4, 3))
    assert sorted((r["key"], r["valid_from"]) for r in rows) == sorted(
        (k, v[1]) for k, versions in want.items() for v in versions
    )
    changes = tmp_path / "changes.parquet"
    assert cli.main(["changes", str(root), "--parquet", str(changes)]) == 0
    feed = pq.read_table(changes).to_pylist()
    assert sorted((r["batch_id"], r["key"], r["valid_from"]) for r in feed) == sorted(
        (b, key, t) for b, batch in enumerate(batches) for key, _, t in batch
    )


def test_a_process_remembering_fewer_partitions_reads_the_new_ones(tmp_path: Path) -> None:
    root = tmp_path / "root"
    batches = writes(seed=8, batches=3)
    run_batches(root, batches, 0, 2)
    before = keys_only(reads(root, 3, 2), horizon_of(batches))  # remembers 2 partitions
    repartition(root, 3, 5)
    after: dict[bytes, Any] = {}
    for p in reversed(range(5)):  # new partitions first: their old directories do not exist
        opened = open_partition(root, p, 3, None, read_only=True)
        try:
            for key in KEYS:
                if route(key, 5) == p:
                    found = opened.store.versions(key)
                    after[key] = [(r.value, r.timestamp, r.valid_to) for r in found]
        finally:
            opened.abort()
    assert keys_only(after, horizon_of(batches)) == before
    with pytest.raises(verstore.MissingVersionError, match="no partition 5"):
        open_partition(root, 5, 3, None, read_only=True)


def test_a_query_that_ran_on_during_the_repartition_stops_the_publish(tmp_path: Path) -> None:
    root = tmp_path / "root"
    batches = writes(seed=9, batches=4)
    run_batches(root, batches[:2], 0, 2)
    location = Location.resolve(str(root))
    plan = steps.plan(location, STORE, LINEAGE, 2, 3)
    assert plan is not None
    for p in range(3):
        steps.write_target(location, plan, p, str(tmp_path / "scratch"), [])
    run_batches(root, batches[2:4], 2, 2)  # the query was not stopped
    with pytest.raises(verstore.IncompatibleConfigError, match="ran on past version 2"):
        steps.publish(location, plan)
    settings = read_settings(plan.files(location))
    assert settings is not None and settings.num_partitions == 2


def test_a_partitioning_record_is_created_once(tmp_path: Path) -> None:
    from verstore.checkpoint.partitionings import publish

    root = tmp_path / "root"
    run_batches(root, writes(seed=10, batches=2), 0, 2)
    plan = repartition(root, 2, 3)
    files = plan.files(Location.resolve(str(root)))
    with pytest.raises(FileExistsError):
        publish(files, plan.target)
    # A lost record under a later one is damage, never an older partitioning silently in force.
    second = repartition(root, 2, 4)
    assert second.target.id == 2
    Path(record_path(files, 1)).unlink()
    with pytest.raises(verstore.CorruptionError, match=r"_partitioning-1\.json"):
        read_settings(files)


def test_a_store_with_a_latest_ttl_moves_with_its_ttl(tmp_path: Path) -> None:
    """A lineage with a latest TTL keeps it through a repartition: the new partitions are
    opened with it, their keys end at the TTL of their new partition's stream time, and every
    key reads above the horizon as a store of that partition with every write and the TTL."""
    ttl = 150
    root = tmp_path / "root"
    batches = writes(seed=3, batches=4)

    def run(batch: list[Any], version: int, n: int) -> None:
        for p in range(n):
            with open_partition(root, p, version, n, latest_ttl_ms=ttl) as opened:
                for key, value, t in batch:
                    if route(key, n) == p:
                        opened.store.put(key, value, t)
                opened.commit()

    for b, batch in enumerate(batches[:3]):
        run(batch, b, 3)
    repartition(root, 3, 5)
    run(batches[3], 3, 5)
    settings = read_settings(LineageFiles(Location.resolve(str(root)), STORE, LINEAGE))
    assert settings is not None and settings.latest_ttl_ms == ttl
    got: dict[bytes, Any] = {}
    models = []
    for p in range(5):
        opened = open_partition(root, p, 4, None, latest_ttl_ms=ttl, read_only=True)
        try:
            model = verstore.VersionedStore.in_memory(
                history_retention_ms=RETENTION, latest_ttl_ms=ttl
            )
            for batch in batches:
                for key, value, t in batch:
                    if route(key, 5) == p:
                        model.put(key, value, t)
            model.advance_stream_time(opened.store.observed_stream_time)
            models.append(model)
            for key in KEYS:
                if route(key, 5) == p:
                    got[key] = [
                        (r.value, r.timestamp, r.valid_to) for r in opened.store.versions(key)
                    ]
                    assert opened.store.get(key) == model.get(key), key
        finally:
            opened.abort()
    want = {
        key: [(r.value, r.timestamp, r.valid_to) for r in models[route(key, 5)].versions(key)]
        for key in KEYS
    }
    horizon = horizon_of(batches)
    assert keys_only(got, horizon) == keys_only(want, horizon)
    assert any(r[2] is not None and r[2] == r[1] + ttl for v in got.values() for r in v)
