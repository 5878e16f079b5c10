"""A stopped query's store rewritten under other settings (``verstore.checkpoint.repartition``
with a new ``StoreConfig``, what ``verstore.spark.change_store_settings`` runs), without Spark:
keys keep their partition (the count does not change) and are routed by a hash of their bytes.

Each change keeps every version the new settings read: a lower or new TTL reads as a store that
always had it; a higher TTL, or none, keeps ended keys ended and lets live ones live by the new
TTL; another retention reads as before within both horizons. A process killed at any step
leaves the old settings or the new ones, whole; the record of new settings is hostile input; and
opens with the old settings are refused naming the command.
"""

from __future__ import annotations

import json
import os
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
from verstore.checkpoint.partitionings import StoreConfig, record_path
from verstore.checkpoint.settings import read_settings
from verstore.location import Location

STORE, LINEAGE, N = "readings", "q1", 2
RETENTION = 400
KEYS = [f"d{i:02d}".encode() for i in range(24)]
Writes = list[list[tuple[bytes, bytes | None, int]]]


def route(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


def open_partition(root: Path, p: int, version: int, config: StoreConfig, **kw: Any) -> Any:
    return PartitionStore.open(
        str(root), STORE, p, version, str(root.parent / f"local-{root.name}"),
        history_retention_ms=config.history_retention_ms,
        segment_interval_ms=config.segment_interval_ms, latest_ttl_ms=config.latest_ttl_ms,
        lineage=LINEAGE, num_partitions=N, **kw,
    )  # fmt: skip


def writes(batches: int, seed: int = 1) -> Writes:
    """Per micro-batch: keys updated now and then (so some stop changing and a TTL ends them),
    a few deletes, a few late writes within retention."""
    import random

    rng = random.Random(seed)
    out = []
    for b in range(batches):
        batch = []
        for _ in range(30):
            key = rng.choice(KEYS[: 8 + 4 * b])  # newer keys join, older ones go quiet
            t = max(0, 100 * b + rng.randrange(-150, 100))
            batch.append((key, None if rng.random() < 0.1 else rng.randbytes(3), t))
        out.append(batch)
    return out


def run_batches(root: Path, batches: Writes, first: int, config: StoreConfig) -> None:
    for b, batch in enumerate(batches, start=first):
        for p in range(N):
            with open_partition(root, p, b, config) as opened:
                for key, value, t in batch:
                    if route(key, N) == p:
                        opened.store.put(key, value, t)
                opened.commit()


def change(root: Path, version: int, config: StoreConfig) -> steps.Plan:
    """The steps as ``change_store_settings`` runs them (keys stay in their partition)."""
    location = Location.resolve(str(root))
    plan = steps.plan(location, STORE, LINEAGE, version, config=config)
    assert plan is not None
    run_in_process(location, plan, route, str(root.parent / f"scratch-{root.name}"))
    return plan


def model(batches: Writes, config: StoreConfig) -> list[verstore.VersionedStore]:
    """One in-memory store per partition with ``config`` from the start, fed every write."""
    stores = [
        verstore.VersionedStore.in_memory(
            history_retention_ms=config.history_retention_ms,
            segment_interval_ms=config.segment_interval_ms,
            latest_ttl_ms=config.latest_ttl_ms,
        )
        for _ in range(N)
    ]
    for batch in batches:
        for key, value, t in batch:
            stores[route(key, N)].put(key, value, t)
    return stores


def view(stores: list[Any], low: int) -> dict[Any, Any]:
    """What each key reads from ``low`` on: its latest value, every version that ends above
    ``low``, and its record as of every time from ``low`` to its partition's stream time."""
    out: dict[Any, Any] = {}
    for key in KEYS:
        store = stores[route(key, N)]
        stream_time = store.observed_stream_time
        versions = store.versions(key)
        out[key] = (
            store.get(key),
            [r for r in versions if r.valid_to is None or r.valid_to > low],
            [store.get(key, t) for t in range(low, stream_time + 1, 7)],
        )
    out["stream_times"] = [s.observed_stream_time for s in stores]
    return out


def opened_view(root: Path, version: int, config: StoreConfig, low: int) -> dict[Any, Any]:
    parts = [open_partition(root, p, version, config, read_only=True) for p in range(N)]
    try:
        return view([p.store for p in parts], low)
    finally:
        for p in parts:
            p.abort()


def test_a_new_or_lower_ttl_reads_as_a_store_that_always_had_it(tmp_path: Path) -> None:
    batches = writes(6)
    for before, after in ((None, 250), (300, 120)):
        root = tmp_path / f"root-{before}"
        old = StoreConfig(RETENTION, None, before)
        new = StoreConfig(RETENTION, None, after)
        run_batches(root, batches[:4], 0, old)
        change(root, 4, new)
        horizon = max(t for b in batches[:4] for _, _, t in b) - RETENTION
        assert opened_view(root, 4, new, horizon) == view(model(batches[:4], new), horizon)
        # the query goes on with the new TTL, and still reads as the model
        run_batches(root, batches[4:], 4, new)
        horizon = max(t for b in batches for _, _, t in b) - RETENTION
        assert opened_view(root, 6, new, horizon) == view(model(batches, new), horizon)


def test_a_higher_ttl_or_none_keeps_ended_keys_ended_and_live_keys_live_longer(
    tmp_path: Path,
) -> None:
    batches = writes(5, seed=2)
    old = StoreConfig(RETENTION, None, 150)
    for after in (600, None):
        root = tmp_path / f"root-{after}"
        run_batches(root, batches, 0, old)
        horizon = max(t for b in batches for _, _, t in b) - RETENTION
        before = opened_view(root, 5, old, horizon)
        new = StoreConfig(RETENTION, None, after)
        change(root, 5, new)
        # every read at every time is what it was: what had ended stays ended
        assert opened_view(root, 5, new, horizon) == before
        # stream time moves on 300 ms: keys alive at the change live by the new TTL
        live = [k for k in KEYS if before[k][0] is not None]
        assert live and any(before[k][0] is None for k in KEYS)
        for p in range(N):
            with open_partition(root, p, 5, new) as opened:
                store = opened.store
                store.advance_stream_time(store.observed_stream_time + 300)
                for key in (k for k in live if route(k, N) == p):
                    assert store.get(key) == before[key][0], key
                for key in (k for k in KEYS if route(k, N) == p and k not in live):
                    assert store.get(key) is None, key


def test_another_retention_and_segment_interval_read_as_before_within_both_horizons(
    tmp_path: Path,
) -> None:
    batches = writes(6, seed=3)
    old = StoreConfig(RETENTION, None, None)
    for new in (StoreConfig(1_000, 50, None), StoreConfig(150, None, None)):
        root = tmp_path / f"root-{new.history_retention_ms}"
        run_batches(root, batches[:5], 0, old)
        stream_time = max(t for b in batches[:5] for _, _, t in b)
        low = stream_time - min(RETENTION, new.history_retention_ms)
        before = opened_view(root, 5, old, low)
        at_four = opened_view(root, 4, old, 0)
        change(root, 5, new)
        assert opened_view(root, 5, new, low) == before
        settings = read_settings(LineageFiles(Location.resolve(str(root)), STORE, LINEAGE))
        assert settings is not None and settings.config == new
        assert [p.config for p in settings.partitionings] == [old, new]
        # a late write is accepted or dropped by the new retention
        with open_partition(root, 0, 5, new) as opened:
            shorter, longer = sorted((RETENTION, new.history_retention_ms))
            late = stream_time - (shorter + min(longer, stream_time)) // 2  # between them
            code = opened.store.put(b"late", b"x", late)
            assert (code == verstore.NOT_PUT) == (new.history_retention_ms < RETENTION)
        # the version before the change still reads with the settings that wrote it
        assert opened_view(root, 4, new, 0) == at_four


def test_an_open_with_the_old_settings_is_refused_naming_the_command(tmp_path: Path) -> None:
    root = tmp_path / "root"
    old, new = StoreConfig(RETENTION, None, 300), StoreConfig(2 * RETENTION, None, 300)
    run_batches(root, writes(2), 0, old)
    change(root, 2, new)
    with pytest.raises(
        verstore.IncompatibleConfigError,
        match=r"has history_retention_ms=800, cannot open it with history_retention_ms=400: to "
        r"change it and keep the store's history, stop the query, run verstore\.spark\."
        r"change_store_settings\(spark, checkpoint_root, 'readings', history_retention=400",
    ):
        open_partition(root, 0, 2, old)
    with pytest.raises(verstore.FencedError, match="repartitioned at version 2"):
        open_partition(root, 0, 1, new)
    run_batches(root, writes(1, seed=9), 2, new)


def test_nothing_to_change_plans_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    config = StoreConfig(RETENTION, None, 300)
    run_batches(root, writes(1), 0, config)
    location = Location.resolve(str(root))
    assert steps.plan(location, STORE, LINEAGE, 1, config=config) is None
    assert steps.plan(location, STORE, LINEAGE, 1, N, config) is None


def test_the_record_of_new_settings_is_hostile_input(tmp_path: Path) -> None:
    root = tmp_path / "root"
    run_batches(root, writes(2), 0, StoreConfig(RETENTION))
    plan = change(root, 2, StoreConfig(RETENTION, None, 200))
    files = plan.files(Location.resolve(str(root)))
    path = Path(record_path(files, 1))
    good = json.loads(path.read_text())
    assert (good["history_retention_ms"], good["latest_ttl_ms"]) == (RETENTION, 200)
    for field, value in [
        ("history_retention_ms", -1),
        ("history_retention_ms", "400"),
        ("segment_interval_ms", 0),
        ("latest_ttl_ms", 0),
        ("latest_ttl_ms", True),
        ("latest_ttl_ms", 2**63),
    ]:
        path.write_text(json.dumps({**good, field: value}))
        with pytest.raises(verstore.CorruptionError, match=r"_partitioning-1\.json"):
            read_settings(files)
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "latest_ttl_ms"}))
    with pytest.raises(verstore.CorruptionError, match="not a partitioning record"):
        read_settings(files)


STEPS = [
    "repartition_marked",
    "repartition_writing",
    "after_changelog",
    "repartition_before_publish",
    "repartition_published",
]
OLD, NEW = StoreConfig(RETENTION, None, 300), StoreConfig(RETENTION, None, 120)


@pytest.mark.parametrize("step", STEPS)
def test_a_change_killed_at_any_step_leaves_one_whole_state(tmp_path: Path, step: str) -> None:
    root = tmp_path / "root"
    batches = writes(4, seed=6)
    run_batches(root, batches[:2], 0, OLD)
    child = subprocess.run(
        [sys.executable, __file__, str(root), step], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    settings = read_settings(LineageFiles(Location.resolve(str(root)), STORE, LINEAGE))
    assert settings is not None
    config = NEW if step == "repartition_published" else OLD
    assert settings.config == config
    horizon = max(t for b in batches[:2] for _, _, t in b) - RETENTION
    assert opened_view(root, 2, config, horizon) == view(model(batches[:2], config), horizon)
    if config == OLD:
        change(root, 2, NEW)
    run_batches(root, batches[2:], 2, NEW)
    horizon = max(t for b in batches for _, _, t in b) - RETENTION
    assert opened_view(root, 4, NEW, horizon) == view(model(batches, NEW), horizon)


def _child(root: str, step: str) -> None:
    """The change in a process that kills itself at ``step``."""

    def kill(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    faults.set_hook(kill)
    change(Path(root), 2, NEW)


if __name__ == "__main__":
    _child(*sys.argv[1:3])
