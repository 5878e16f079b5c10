"""Stores kept open between tasks (``verstore.checkpoint.kept``, docs/checkpoint.md "Stores
kept open"): reuse in the same process, handoff to another process, a holder killed with
SIGKILL, a kept store that the partition moved past, failures of the deferred commit work.

The simulation (tests/checkpoint/test_simulation.py) interleaves these with every other event
of the protocol; these tests pin each one down with real processes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import verstore
from checkpoint_helpers import cut_in_half, flip_byte
from keeper_helpers import discard_all, kept_store
from verstore.checkpoint import CheckpointOptions, PartitionStore, faults
from verstore.checkpoint.kept import Keeper, KeptState
from verstore.checkpoint.local import HANDOFF, LocalCopy, LocalState
from verstore.exceptions import FencedError, StoreLockedError

OPTIONS = CheckpointOptions(snapshot_interval=3, lock_timeout_s=20)


def open_store(
    root: Path, local: Path, version: int, keeper: Keeper | None = None, **kw: object
) -> PartitionStore:
    return PartitionStore.open(
        str(root),
        "prices",
        0,
        version,
        local,
        history_retention_ms=1_000,
        options=kw.pop("options", OPTIONS),  # type: ignore[arg-type]
        keeper=keeper,
        **kw,  # type: ignore[arg-type]
    )


def commit_batches(root: Path, local: Path, start: int, count: int, keeper: Keeper | None) -> None:
    """Commits versions ``start + 1 .. start + count``: key k holds the batch number."""
    for batch in range(start, start + count):
        part = open_store(root, local, batch, keeper)
        write_batch(part, batch)
        part.commit()


def write_batch(part: PartitionStore, batch: int) -> None:
    part.store.put(b"k", str(batch).encode(), batch)
    part.store.put(f"k{batch}".encode(), b"x", batch)


def expect_state(part: PartitionStore, last_batch: int) -> None:
    assert part.store.get(b"k").value == str(last_batch).encode()
    for batch in range(last_batch + 1):
        assert part.store.get(f"k{batch}".encode()).value == b"x"
    assert part.store.get(f"k{last_batch + 1}".encode()) is None


def copy_state(local: Path) -> dict[str, object]:
    return json.loads((local / "prices" / "q=default" / "p=0" / "LOCAL.json").read_text())


def test_the_next_task_in_the_process_finds_the_store_open(tmp_path: Path) -> None:
    keeper = Keeper(background=False)
    try:
        commit_batches(tmp_path / "root", tmp_path / "local", 0, 5, keeper)
        part = open_store(tmp_path / "root", tmp_path / "local", 5, keeper)
        assert part.stats.kept_open and part.stats.reused and not part.stats.rebuilt
        expect_state(part, 4)
        write_batch(part, 5)
        part.commit()
        # The commit deferred its flush: the copy on disk is not clean until the keeper
        # settles the store (idle for settle_s, handed over or closed).
        keeper.run_maintenance()
        assert copy_state(tmp_path / "local")["clean"] is False
        keeper.run_maintenance(settle=True)
        state = copy_state(tmp_path / "local")
        assert state["clean"] is True and state["version"] == 6
        keeper.close_all()
        # Closed: the lock is free and the copy on disk serves the next open as it is.
        part = open_store(tmp_path / "root", tmp_path / "local", 6)
        assert part.stats.reused and not part.stats.kept_open
        expect_state(part, 5)
        part.abort()
    finally:
        keeper.stop()


def copy_dir(local: Path) -> Path:
    return local / "prices" / "q=default" / "p=0"


def hand_over_with_buffer(tmp_path: Path) -> dict[str, object]:
    """Commits versions 1-5 keeping the store (the last two after its snapshot, so in its
    write buffer only), closes it as a handoff does, and returns ``LOCAL.json``."""
    keeper = Keeper(background=False)
    try:
        commit_batches(tmp_path / "root", tmp_path / "local", 0, 5, keeper)
        keeper.close_all()
    finally:
        keeper.stop()
    return copy_state(tmp_path / "local")


def test_a_handoff_moves_the_write_buffer_in_a_file(tmp_path: Path) -> None:
    """A kept store closes with its write buffer saved beside db/: LOCAL.json is clean at its
    commit and names the file; the next open reuses the copy with the buffer, and removes it
    once LOCAL.json says dirty."""
    state = hand_over_with_buffer(tmp_path)
    # Clean only with the buffer: a build that does not know saved buffers rebuilds the copy.
    assert state["clean"] is False and state["clean_with_buffer"] is True
    assert state["version"] == 5
    buffer = state["buffer"]
    assert isinstance(buffer, dict)
    saved = copy_dir(tmp_path / "local") / str(buffer["name"])
    assert saved.stat().st_size == buffer["size"] > 100
    part = open_store(tmp_path / "root", tmp_path / "local", 5)
    assert part.stats.reused and not part.stats.rebuilt
    assert part.stats.saved_buffer_bytes == buffer["size"]
    expect_state(part, 4)
    assert copy_state(tmp_path / "local")["clean"] is False
    assert list(copy_dir(tmp_path / "local").glob("buffer-*")) == []
    write_batch(part, 5)
    part.commit()
    part = open_store(tmp_path / "root", tmp_path / "local", 6)
    assert part.stats.reused
    expect_state(part, 5)
    part.abort()


def _edit_state(local: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    state_file = copy_dir(local) / "LOCAL.json"
    state = json.loads(state_file.read_text())
    edit(state["buffer"])
    state_file.write_text(json.dumps(state))


DAMAGES: dict[str, Callable[[Path, Path], None]] = {
    "removed": lambda saved, local: saved.unlink(),
    "cut short": lambda saved, local: cut_in_half(saved),
    "a byte flipped": lambda saved, local: saved.write_bytes(
        flip_byte(saved.read_bytes(), saved.stat().st_size // 2)
    ),
    "another checksum": lambda saved, local: _edit_state(
        local, lambda b: b.update(crc32=b["crc32"] ^ 1)
    ),
    "a name of another directory": lambda saved, local: _edit_state(
        local, lambda b: b.update(name="../" + b["name"])
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_saved_buffer_makes_the_open_rebuild(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A saved buffer that is not what LOCAL.json records (a failing disk, a crash of the
    machine before the file reached it, an edit) is never loaded: the copy is rebuilt from
    the checkpoint, exactly."""
    state = hand_over_with_buffer(tmp_path)
    assert isinstance(state["buffer"], dict)
    saved = copy_dir(tmp_path / "local") / str(state["buffer"]["name"])
    DAMAGES[damage](saved, tmp_path / "local")
    with caplog.at_level(logging.WARNING, logger="verstore.checkpoint"):
        part = open_store(tmp_path / "root", tmp_path / "local", 5)
    assert part.stats.rebuilt and not part.stats.reused
    expect_state(part, 4)
    if damage != "a name of another directory":  # not ours: LOCAL.json says nothing usable
        assert "is damaged; rebuilding it" in caplog.text and "buffer" in caplog.text
    part.abort()


def test_an_open_that_fails_after_loading_a_saved_buffer_never_applies_it_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open loads the buffer, then fails (here: writing LOCAL.json at the serving commit);
    closing its store writes the buffer into db/. The copy must not still be named with the
    file, or the next open would apply the buffer's appends a second time."""
    hand_over_with_buffer(tmp_path)
    write_state = LocalCopy.write_state

    def failing(self: LocalCopy, state: LocalState) -> None:
        if state.commit is not None and not state.clean:
            raise OSError("simulated: LOCAL.json cannot be written")
        write_state(self, state)

    monkeypatch.setattr(LocalCopy, "write_state", failing)
    with pytest.raises(OSError, match="simulated"):
        open_store(tmp_path / "root", tmp_path / "local", 5)
    monkeypatch.setattr(LocalCopy, "write_state", write_state)
    part = open_store(tmp_path / "root", tmp_path / "local", 5)
    assert not part.stats.saved_buffer_bytes
    expect_state(part, 4)
    for batch in range(4):  # every version of k, once each
        assert part.store.get(b"k", as_of=batch).value == str(batch).encode()
    part.abort()


def test_a_holder_that_dies_handing_over_leaves_a_copy_that_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after its buffer was saved and before LOCAL.json named it: the copy is dirty, as
    it was since its task opened it; the next open rebuilds and removes the file."""
    keeper = Keeper(background=False)

    def crash(step: str) -> None:
        if step == "during_handoff":
            raise SystemExit(step)

    try:
        commit_batches(tmp_path / "root", tmp_path / "local", 0, 5, keeper)
        faults.set_hook(crash)
        # A killed process marks nothing: what LOCAL.json says is what the task left.
        monkeypatch.setattr(LocalCopy, "forget", lambda self: None)
        with pytest.raises(SystemExit):
            keeper.close_all()
    finally:
        faults.set_hook(None)
        monkeypatch.undo()
        discard_all(keeper)
    assert copy_state(tmp_path / "local")["clean"] is False
    assert len(list(copy_dir(tmp_path / "local").glob("buffer-*"))) == 1
    part = open_store(tmp_path / "root", tmp_path / "local", 5)
    assert part.stats.rebuilt
    expect_state(part, 4)
    assert list(copy_dir(tmp_path / "local").glob("buffer-*")) == []
    part.abort()


def test_snapshots_and_cleanup_run_after_the_task(tmp_path: Path) -> None:
    keeper = Keeper(background=False)
    root = tmp_path / "root"
    options = CheckpointOptions(snapshot_interval=2, min_versions_to_retain=2, orphan_grace_s=0)
    try:
        for batch in range(6):
            part = open_store(root, tmp_path / "local", batch, keeper, options=options)
            part.store.put(b"k", str(batch).encode(), batch)
            part.commit()
            assert not part.commit_stats.snapshot  # type: ignore[union-attr]
            keeper.run_maintenance()
        names = sorted(p.name for p in (root / "prices" / "q=default" / "p=0").iterdir())
        assert [n for n in names if n.endswith(".snapshot")], names
        assert not any(n.startswith("1-") for n in names), "cleanup ran"
        keeper.close_all()
        fresh = open_store(root, tmp_path / "elsewhere", 6, read_only=True)
        assert fresh.stats.snapshot is not None and fresh.store.get(b"k").value == b"5"
        fresh.abort()
    finally:
        keeper.stop()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from verstore.checkpoint import CheckpointOptions, PartitionStore
    from verstore.checkpoint.kept import Keeper

    root, local, batches, maintain = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    keeper = Keeper(maintain=maintain == "maintain", settle_s=0.05)
    for batch in range(batches):
        part = PartitionStore.open(root, "prices", 0, batch, local, history_retention_ms=1_000,
                                   options=CheckpointOptions(snapshot_interval=3), keeper=keeper)
        part.store.put(b"k", str(batch).encode(), batch)
        part.store.put(f"k{batch}".encode(), b"x", batch)
        part.commit()
    if maintain == "maintain":
        while Path(local, "prices/q=default/p=0/LOCAL.json").read_text().find('"clean": true') < 0:
            time.sleep(0.01)
    print("holding", flush=True)
    sys.stdin.readline()
    print("held" if keeper.held() else "handed over", flush=True)
    """
)


def start_holder(tmp_path: Path, batches: int, maintain: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            str(tmp_path / "root"),
            str(tmp_path / "local"),
            str(batches),
            maintain,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    return holder


@pytest.mark.parametrize("maintain", ["maintain", "defer"])
def test_another_process_gets_the_store_handed_over(tmp_path: Path, maintain: str) -> None:
    """A task in another Python worker asks for the kept store and gets the copy, clean,
    without waiting out the lock timeout; the holder no longer holds it."""
    holder = start_holder(tmp_path, 4, maintain)
    try:
        started = time.monotonic()
        part = open_store(tmp_path / "root", tmp_path / "local", 4)
        waited = time.monotonic() - started
        assert part.stats.reused and not part.stats.rebuilt
        expect_state(part, 3)
        part.store.put(b"k", b"4", 4)
        part.commit()
        assert waited < OPTIONS.lock_timeout_s / 2
        assert not (tmp_path / "local" / "prices" / "q=default" / "p=0" / HANDOFF).exists()
        out, _ = holder.communicate("\n", timeout=30)
        assert out.strip() == "handed over"
    finally:
        holder.kill()
        holder.communicate()


@pytest.mark.parametrize("maintain", ["maintain", "defer"])
def test_a_holder_killed_loses_nothing_committed(tmp_path: Path, maintain: str) -> None:
    """SIGKILL of a process holding a store: before its deferred flush the copy is dirty and
    rebuilt; after it the copy is clean and reused. Either way every commit is there."""
    holder = start_holder(tmp_path, 5, maintain)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=30)
    part = open_store(tmp_path / "root", tmp_path / "local", 5)
    if maintain == "maintain":
        assert part.stats.reused
    else:
        assert part.stats.rebuilt
    expect_state(part, 4)
    part.abort()


def test_a_kept_store_the_partition_moved_past(tmp_path: Path) -> None:
    """A worker keeps version 2 while another executor commits 3 and 4: the next open in the
    worker catches the kept store up; a zombie's open of version 2 is fenced and leaves the
    copy usable."""
    keeper = Keeper(background=False)
    root = tmp_path / "root"
    try:
        commit_batches(root, tmp_path / "local", 0, 2, keeper)
        commit_batches(root, tmp_path / "other", 2, 2, None)
        with pytest.raises(FencedError, match="stale"):
            open_store(root, tmp_path / "local", 1, keeper)
        assert keeper.held() == []  # the fenced open closed the kept store
        part = open_store(root, tmp_path / "local", 4, keeper)
        assert part.stats.replayed == 2 and not part.stats.rebuilt
        expect_state(part, 3)
        write_batch(part, 4)
        part.commit()
        commit_batches(root, tmp_path / "other", 5, 1, None)  # moves on without this executor
        part = open_store(root, tmp_path / "local", 6, keeper)
        assert part.stats.kept_open and part.stats.replayed == 1
        expect_state(part, 5)
        part.abort()
        part = open_store(root, tmp_path / "local", 6, keeper)
        assert part.stats.rebuilt and not part.stats.kept_open  # abort dropped the kept store
        expect_state(part, 5)
        part.abort()
    finally:
        keeper.stop()


def test_a_failure_of_the_deferred_work_keeps_the_commit(tmp_path: Path) -> None:
    """The deferred work fails (a full disk): the commit stands, the kept store is dropped,
    and the next open reads the committed state from the copy on disk."""
    keeper = Keeper(background=False)
    root = tmp_path / "root"
    try:
        commit_batches(root, tmp_path / "local", 0, 3, keeper)  # the third's snapshot is due

        def fail(step: str) -> None:
            if step == "after_local_state":
                raise OSError("simulated: no space left on device")

        faults.set_hook(fail)
        try:
            with pytest.raises(OSError, match="no space"):
                keeper.run_maintenance()
        finally:
            faults.set_hook(None)
        assert keeper.held() == []
        part = open_store(root, tmp_path / "local", 3, keeper)
        assert not part.stats.kept_open
        expect_state(part, 2)
        part.abort()
    finally:
        keeper.stop()


def test_the_keepers_thread_hands_over_and_closes_idle_stores(tmp_path: Path) -> None:
    keeper = Keeper(idle_s=0.2, poll_s=0.01)
    try:
        commit_batches(tmp_path / "root", tmp_path / "local", 0, 3, keeper)
        deadline = time.monotonic() + 10
        while keeper.held() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert keeper.held() == []
        state = copy_state(tmp_path / "local")
        assert state["clean"] is True and state["version"] == 3
    finally:
        keeper.stop()


def test_a_keeper_holds_at_most_max_stores(tmp_path: Path) -> None:
    keeper = Keeper(background=False, max_stores=2)
    try:
        for partition in range(4):
            part = PartitionStore.open(
                str(tmp_path / "root"),
                "prices",
                partition,
                0,
                tmp_path / "local",
                history_retention_ms=1_000,
                keeper=keeper,
            )
            part.store.put(b"k", b"v", 1)
            part.commit()
        held = sorted(p.name for p in keeper.held())
        assert held == ["p=2", "p=3"]
    finally:
        keeper.stop()


WORKER = textwrap.dedent(
    """
    import random, sys, time
    from pathlib import Path
    from verstore.checkpoint import CheckpointOptions, LineageFiles, Location, PartitionStore
    from verstore.checkpoint.chain import Graph
    from verstore.checkpoint.kept import Keeper
    from verstore.exceptions import FencedError

    root, local, seed = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    keeper = Keeper(settle_s=rng.choice([0.01, 0.2, 10.0]), poll_s=0.005)
    options = CheckpointOptions(
        snapshot_interval=3, min_versions_to_retain=4, orphan_grace_s=0, lock_timeout_s=30
    )
    files = LineageFiles(Location.resolve(root), "prices", "default").partition(0)
    while True:
        listing = files.listing()
        version = Graph(files, listing).tip().version if listing.commits else 0
        try:
            part = PartitionStore.open(root, "prices", 0, version, local,
                                       history_retention_ms=10**12, options=options,
                                       keeper=keeper)
        except FencedError:
            continue  # the other worker committed twice while this one waited
        deleted = None if version % 5 == 0 else "x"
        for key, value, ts in [(f"k{version % 7}", str(version), version * 10),
                               (f"k{version % 3}", deleted, version * 10)]:
            part.store.put(key.encode(), None if value is None else value.encode(), ts)
        part.commit()
        print(version + 1, flush=True)
        time.sleep(rng.random() * 0.005)
    """
)


def test_two_workers_take_turns_and_get_killed(tmp_path: Path) -> None:
    """Two worker processes with keepers commit one partition in turn, each asking the other
    to hand the store over, and are killed with SIGKILL at random and started again: every
    committed version stays exact (siblings of one version write the same), and the
    checkpoint verifies."""
    import random

    import verstore
    from verstore.checkpoint import LineageFiles, Location
    from verstore.checkpoint.chain import Graph
    from verstore.checkpoint.inspect import verify_partition

    root, local = str(tmp_path / "root"), tmp_path / "local"
    rng = random.Random(5)

    def start(seed: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER, root, str(local), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )

    files = LineageFiles(Location.resolve(root), "prices", "default").partition(0)

    def committed() -> int:
        listing = files.listing()
        return Graph(files, listing).tip().version if listing.commits else 0

    workers = [start(0), start(1)]
    kills = 0
    try:
        # 8 s of kills, and on a loaded machine as long as it takes (at most 120 s) for the
        # workers to commit more than 20 versions between them.
        start_s = time.monotonic()
        while time.monotonic() < start_s + 8 or (
            committed() <= 20 and time.monotonic() < start_s + 120
        ):
            time.sleep(rng.uniform(0.1, 0.6))
            victim = rng.randrange(2)
            os.kill(workers[victim].pid, signal.SIGKILL)
            workers[victim].communicate()
            workers[victim] = start(10 + kills)
            kills += 1
    finally:
        for w in workers:
            w.kill()
            w.communicate()
    assert verify_partition(files) == []
    part = PartitionStore.open(
        root, "prices", 0, 10**6, tmp_path / "reader", history_retention_ms=10**12, read_only=True
    )
    try:
        tip = part.opened.version
        assert tip > 20, "the workers took turns"
        model = verstore.VersionedStore.in_memory(history_retention_ms=10**12)
        for version in range(tip):
            for key, value, ts in [
                (f"k{version % 7}", str(version), version * 10),
                (f"k{version % 3}", None if version % 5 == 0 else "x", version * 10),
            ]:
                model.put(key.encode(), None if value is None else value.encode(), ts)
        for k in range(7):
            key = f"k{k}".encode()
            assert part.store.versions(key) == model.versions(key), key
    finally:
        part.abort()


def test_a_snapshot_overdue_by_an_interval_is_taken_on_the_tasks_path(tmp_path: Path) -> None:
    """Workers that die right after their commits lose the snapshots they deferred; once the
    chain has gone two intervals without one, the commit takes it itself."""
    keeper = Keeper(background=False)
    root = tmp_path / "root"
    options = CheckpointOptions(snapshot_interval=2)
    try:
        for batch in range(5):
            part = open_store(root, tmp_path / "local", batch, keeper, options=options)
            write_batch(part, batch)
            part.commit()
            discard_all(keeper)  # the worker dies before its deferred work runs
        names = [p.name for p in (root / "prices" / "q=default" / "p=0").iterdir()]
        snapshots = sorted(int(n.split("-")[0]) for n in names if n.endswith(".snapshot"))
        assert snapshots == [4]
    finally:
        keeper.stop()


def test_a_reader_never_asks_for_a_kept_store(tmp_path: Path) -> None:
    """A read-only open takes no lock, so a worker keeps its store open while the partition is
    read on the same executor, and the reader's private copy is gone when it ends."""
    keeper = Keeper(poll_s=0.005)
    try:
        commit_batches(tmp_path / "root", tmp_path / "local", 0, 2, keeper)
        part = open_store(tmp_path / "root", tmp_path / "local", 2, read_only=True)
        expect_state(part, 1)
        part.abort()
        time.sleep(0.05)  # a request would have been answered by now
        copy = tmp_path / "local" / "prices" / "q=default" / "p=0"
        assert keeper.held() == [copy]
        assert not list(copy.glob(".tmp-*"))
    finally:
        keeper.stop()


STALE_HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from verstore.checkpoint import CheckpointOptions, PartitionStore
    from verstore.checkpoint.kept import Keeper

    root, local = sys.argv[1], Path(sys.argv[2])
    keeper = Keeper(background=False, maintain=False)  # nothing runs until close_all
    for batch in range(3):
        part = PartitionStore.open(root, "prices", 0, batch, local, history_retention_ms=1_000,
                                   options=CheckpointOptions(snapshot_interval=100), keeper=keeper)
        for i in range(3000):
            part.store.put(f"h{i}".encode(), b"holder %d" % batch, batch)
        part.commit()
    print("holding", flush=True)
    sys.stdin.readline()
    keeper.close_all()  # settles: a flush and LOCAL.json, into a directory gone under it
    print("closed", flush=True)
    """
)


def test_a_holder_whose_directory_was_replaced_writes_nothing_into_the_new_copy(
    tmp_path: Path,
) -> None:
    """A worker keeps a store open, unflushed; the local directory is deleted under it (a wiped
    disk) and a task elsewhere rebuilds the copy in the same place and commits. When the old
    worker then settles and closes its store, RocksDB writes by path: into the new copy's
    files, had the rebuild not named its directory anew. Nor does it hand its write buffer
    over into the new copy: ``LOCAL.json`` stays the new copy's, which the next open reuses."""
    root, local = tmp_path / "root", tmp_path / "local"
    holder = subprocess.Popen(
        [sys.executable, "-c", STALE_HOLDER, str(root), str(local)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        shutil.rmtree(local)
        part = open_store(root, local, 3)
        assert part.stats.rebuilt
        for i in range(3000):
            part.store.put(f"h{i}".encode(), b"new copy", 3)
        part.commit()
        out, _ = holder.communicate("\n", timeout=60)
        assert out.strip() == "closed"
        assert not list(local.glob("buffer-*"))
        for reopen in range(2):  # the copy as the holder left it, then as the reopen left it
            part = open_store(root, local, 4)
            assert part.stats.reused or reopen
            assert all(part.store.get(f"h{i}".encode()).value == b"new copy" for i in range(3000))
            assert part.store.get(b"h0", 2).value == b"holder 2"
            part.abort()
    finally:
        holder.kill()
        holder.communicate()


def _open_partition(tmp_path: Path, partition: int, version: int, keeper: Keeper) -> PartitionStore:
    return PartitionStore.open(
        str(tmp_path / "root"), "prices", partition, version, tmp_path / "local",
        history_retention_ms=10**12, keeper=keeper,
    )  # fmt: skip


def _assert_kept_open_with(tmp_path: Path, keeper: Keeper, key: str, value: bytes) -> None:
    """Partitions 0-2 open at version 1 from the stores ``keeper`` kept, each reading ``value``
    under ``p<partition>-<key>``."""
    for partition in range(3):
        part = _open_partition(tmp_path, partition, 1, keeper)
        assert part.stats.kept_open
        assert part.store.get(f"p{partition}-{key}".encode()).value == value
        part.abort()


def test_only_write_buffers_past_their_share_cost_idle_stores_their_buffers(
    tmp_path: Path,
) -> None:
    """The write buffers' pool past its share and nothing else (what a running task's puts
    cause while other stores keep theirs): the keeper's round writes the idle stores' buffers
    into RocksDB and leaves the rest: their caches keep what they hold, their memtables are
    not flushed, and they stay open, unsettled, with every committed write."""
    keeper = Keeper(background=False, max_stores=4)
    try:
        for partition in range(3):
            part = _open_partition(tmp_path, partition, 0, keeper)
            keys = [f"p{partition}-{i:06d}".encode() for i in range(10_000)]
            part.store.put_batch(keys, [b"v" * 64] * len(keys), list(range(len(keys))))
            part.store.release_memory()
            part.store.get_batch(keys, 10**9)  # read from RocksDB into the caches
            for version in range(1, 5):  # buffers of several versions a key: past their share
                times = [version * 10**6 + i for i in range(len(keys))]
                part.store.put_batch(keys, [b"%d" % version * 64] * len(keys), times)
            part.commit()
        before = verstore.memory_usage()
        assert before.cache_bytes > 0, before
        verstore.set_memory_limit(96)  # write buffers' and caches' shares: 6 MiB
        usage = verstore.memory_usage()
        assert usage.write_buffers_over, usage
        assert not usage.caches_over and not usage.rocksdb_over, usage
        keeper.tick()
        after = verstore.memory_usage()
        assert not after.under_pressure, after
        assert after.write_buffer_bytes < before.write_buffer_bytes
        assert after.cache_bytes >= before.cache_bytes  # not emptied
        assert after.memtable_bytes > before.memtable_bytes  # written, not flushed
        assert len(keeper.held()) == 3
        _assert_kept_open_with(tmp_path, keeper, "009999", b"4" * 64)
    finally:
        verstore.set_memory_limit(verstore.DEFAULT_MEMORY_LIMIT_MB)
        keeper.stop()


def test_the_keeper_weighs_only_stores_no_task_took(tmp_path: Path) -> None:
    """The keeper weighs an idle store's buffer as its own work, so a task that took the store
    since the round listed it (its calls would hold the keeper's thread) is not weighed: the
    store is not idle any more, and its buffer is not counted among the idle ones'."""
    keeper = Keeper(background=False, max_stores=4)
    try:
        part = _open_partition(tmp_path, 0, 0, keeper)
        part.store.put_batch([b"k"], [b"v" * 64], [1])
        part.commit()
        with keeper._mutex:
            (held,) = keeper._held.values()
        assert keeper._weigh(held, "write_buffer_bytes") == held.store.write_buffer_bytes > 0
        part = _open_partition(tmp_path, 0, 1, keeper)  # a task takes it
        assert part.stats.kept_open
        assert keeper._weigh(held, "write_buffer_bytes") is None
        part.abort()
    finally:
        keeper.stop()


def _held_with_deleted_directory(tmp_path: Path, keeper: Keeper) -> tuple[Path, Path]:
    """Partitions 0 and 1 committed and kept by ``keeper``, with writes in their buffers;
    partition 0's local directory then deleted under its store. Their directories."""
    directories = []
    for partition in range(2):
        part = _open_partition(tmp_path, partition, 0, keeper)
        keys = [f"p{partition}-{i:05d}".encode() for i in range(5_000)]
        part.store.put_batch(keys, [b"v" * 32] * len(keys), list(range(len(keys))))
        part.commit()
        directories.append(part._local.dir)
    shutil.rmtree(directories[0])
    return directories[0], directories[1]


def test_a_store_whose_directory_was_deleted_holds_up_no_handoff(tmp_path: Path) -> None:
    """Dropping a kept store whose directory was deleted makes RocksDB's close fail to flush
    and pause a second: the keeper's round drops it in a thread of its own, so a handoff asked
    in the same round does not wait for the drop (held here until the handoff is done), and the
    store does end, its lock released."""
    keeper = Keeper(background=False, max_stores=4)
    try:
        gone, asked = _held_with_deleted_directory(tmp_path, keeper)
        with keeper._mutex:
            dropped = keeper._held[gone]
        may_drop = threading.Event()
        drop = dropped.drop

        def held_back_drop(gone: bool = False) -> None:
            assert may_drop.wait(30)
            drop(gone=gone)

        dropped.drop = held_back_drop  # type: ignore[method-assign]
        (asked / HANDOFF).touch()
        keeper.tick()
        assert keeper.held() == []
        handed = json.loads((asked / "LOCAL.json").read_text())
        assert handed["clean_with_buffer"] is True and handed["buffer"]  # closed keeping it
        (dropping,) = keeper._drops
        assert dropping.is_alive()  # the handoff was done while the drop waited
        may_drop.set()
        dropping.join(30)
        assert dropped.state is KeptState.ENDED and dropped.store.closed
        assert dropped.local._lock is None  # unlocked
    finally:
        keeper.stop()


def test_a_task_taking_a_store_whose_directory_was_deleted_does_not_wait_for_its_close(
    tmp_path: Path,
) -> None:
    """A task's open that finds its kept store's directory deleted gets no store at once; the
    store is closed beside it."""
    keeper = Keeper(background=False, max_stores=4)
    try:
        gone, _ = _held_with_deleted_directory(tmp_path, keeper)
        started = time.monotonic()
        assert keeper.take(gone) is None
        assert time.monotonic() - started < 0.5
        keeper.end_task()
    finally:
        keeper.stop()


def _run_script(script: str, tmp_path: Path) -> str:
    """What ``script`` printed, run in a new interpreter with the checkpoint root and local
    directory under ``tmp_path`` as its arguments; it must exit cleanly."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "root"), str(tmp_path / "local")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


GONE_AT_EXIT = textwrap.dedent(
    """
    import atexit, shutil, sys
    from pathlib import Path
    from verstore.checkpoint import PartitionStore
    from verstore.checkpoint.kept import Keeper

    root, local = sys.argv[1], Path(sys.argv[2])
    keeper = Keeper(background=False)
    dropping = []
    atexit.register(lambda: print("drops alive:", any(t.is_alive() for t in dropping)))
    atexit.register(keeper.stop)  # as the process's keeper is (Keeper.for_process)
    part = PartitionStore.open(root, "prices", 0, 0, local, history_retention_ms=1_000,
                               keeper=keeper)
    part.store.put_batch([b"k%d" % i for i in range(5000)], [b"v"] * 5000, list(range(5000)))
    part.commit()
    shutil.rmtree(part._local.dir)
    keeper.tick()  # drops the store in a thread: its close pauses a second
    dropping += keeper._drops  # checked after the keeper's stop (atexit runs last first)
    print("exiting", flush=True)
    """
)


def test_a_store_dropped_at_the_interpreters_exit_is_closed_before_it(tmp_path: Path) -> None:
    """The interpreter exits while a store whose directory was deleted is being dropped in its
    thread: the keeper's close at exit waits for it (a close cut off by RocksDB's teardown
    crashed the interpreter)."""
    assert _run_script(GONE_AT_EXIT, tmp_path).split() == ["exiting", "drops", "alive:", "False"]


FORKED_CHILD_EXITS = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from verstore.checkpoint import PartitionStore
    from verstore.checkpoint.kept import Keeper

    root, local = sys.argv[1], Path(sys.argv[2])
    keeper = Keeper.for_process()  # its stop is registered with atexit
    part = PartitionStore.open(root, "prices", 0, 0, local, history_retention_ms=1_000,
                               keeper=keeper)
    part.store.put_batch([b"k%d" % i for i in range(1000)], [b"v"] * 1000, list(range(1000)))
    part.commit()
    directory = part._local.dir

    def files():  # but the bell, which the keeper's thread makes when it comes to it
        names = sorted(p.name for p in directory.iterdir() if p.name != "HANDOFF.bell")
        return names, (directory / "LOCAL.json").read_text()

    before = files()
    child = os.fork()
    if child == 0:
        sys.exit(0)  # runs the atexit handlers the child inherited
    os.waitpid(child, 0)
    after = files()
    print("unchanged" if after == before else f"changed: {before} -> {after}")
    print("held", len(keeper.held()), flush=True)
    """
)


def test_a_forked_childs_exit_leaves_the_parents_kept_stores_alone(tmp_path: Path) -> None:
    """A process that keeps a store forks, and the child exits normally: the parent's keeper's
    ``atexit`` stop, inherited by the child, does nothing there, so the child neither hands
    the parent's store over (a buffer file, ``LOCAL.json`` rewritten) nor releases its lock."""
    assert _run_script(FORKED_CHILD_EXITS, tmp_path).splitlines() == ["unchanged", "held 1"]


def test_kept_stores_give_their_memory_back_under_pressure(tmp_path: Path) -> None:
    """A worker's budget under pressure (here: lowered below what its kept stores' write
    buffers hold): the keeper's round has the idle stores write their buffers and empty their
    caches, least recently used first, and they stay open with every committed write."""
    keeper = Keeper(background=False, max_stores=4)
    try:
        for partition in range(3):
            part = _open_partition(tmp_path, partition, 0, keeper)
            keys = [f"p{partition}-{i:06d}".encode() for i in range(20_000)]
            part.store.put_batch(keys, [b"v" * 64] * len(keys), list(range(len(keys))))
            part.commit()
        assert len(keeper.held()) == 3
        held_buffers = verstore.memory_usage().write_buffer_bytes
        assert held_buffers > 1 << 20, held_buffers  # the kept stores hold their buffers
        verstore.set_memory_limit(16)  # write buffers' share: 1 MiB
        assert verstore.memory_usage().under_pressure
        keeper.tick()
        usage = verstore.memory_usage()
        assert not usage.under_pressure, usage
        assert usage.write_buffer_bytes < held_buffers
        assert len(keeper.held()) == 3  # given back, not closed
        _assert_kept_open_with(tmp_path, keeper, "019999", b"v" * 64)
    finally:
        verstore.set_memory_limit(verstore.DEFAULT_MEMORY_LIMIT_MB)
        keeper.stop()


def _fill_memtables_and_buffer(part: PartitionStore) -> list[bytes]:
    """Partition ``part.partition``'s keys: their first versions written into RocksDB's
    memtables and read into the caches, a second version of some left in the write buffer."""
    keys = [f"p{part.partition}-{i:06d}".encode() for i in range(10_000)]
    part.store.put_batch(keys, [b"v" * 64] * len(keys), list(range(len(keys))))
    part.store.release_memory(caches=False)  # the buffer into the memtables
    part.store.get_batch(keys, 10**9)
    times = [10**6 + i for i in range(1_000)]
    part.store.put_batch(keys[:1_000], [b"w" * 64] * 1_000, times)
    assert part.store.memtable_bytes > 1 << 20
    assert part.store.write_buffer_bytes > 0
    return keys


def _wait_for_flush(keeper: Keeper, directory: Path) -> int:
    """The bytes the memtables of the store ``keeper`` holds for ``directory`` hold once its
    thread flushed them (or after 10 s)."""
    store = kept_store(keeper, directory)
    deadline = time.monotonic() + 10
    while store.memtable_bytes >= keeper.flush_min_bytes and time.monotonic() < deadline:
        time.sleep(0.01)
    return store.memtable_bytes


def test_the_keepers_thread_flushes_an_idle_stores_memtables_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    """No task of the process holds a store: the keeper's thread flushes the memtables of a
    store unused for ``flush_s`` (what a handoff would flush on the waiting task's path), and
    leaves its write buffer and caches to its next task; the store stays unsettled."""
    keeper = Keeper(flush_s=0.05, settle_s=60, poll_s=0.01)
    try:
        part = _open_partition(tmp_path, 0, 0, keeper)
        keys = _fill_memtables_and_buffer(part)
        directory, buffered = part._local.dir, part.store.write_buffer_bytes
        caches = verstore.memory_usage().cache_bytes
        part.commit()
        assert _wait_for_flush(keeper, directory) < keeper.flush_min_bytes
        assert kept_store(keeper, directory).write_buffer_bytes == buffered
        assert verstore.memory_usage().cache_bytes >= caches
        assert keeper.held() == [directory]
        assert copy_state(tmp_path / "local")["clean"] is False  # db/ lacks the buffer
        part = _open_partition(tmp_path, 0, 1, keeper)
        assert part.stats.kept_open
        assert part.store.get(keys[0]).value == b"w" * 64
        assert part.store.get(keys[-1]).value == b"v" * 64
        part.abort()
    finally:
        keeper.stop()


def test_no_memtables_are_flushed_while_a_task_of_the_process_holds_a_store(
    tmp_path: Path,
) -> None:
    """A task of the process holds a store (here: partition 1's, opened without a kept store),
    so the idle store of partition 0 keeps its memtables; an open that fails waiting for a lock
    holds none after it; once the task ends, the idle store's memtables are flushed."""
    keeper = Keeper(flush_s=0.05, settle_s=60, poll_s=0.01)
    try:
        task = _open_partition(tmp_path, 1, 0, keeper)
        part = _open_partition(tmp_path, 0, 0, keeper)
        _fill_memtables_and_buffer(part)
        directory, in_memtables = part._local.dir, part.store.memtable_bytes
        part.commit()
        time.sleep(0.5)  # ten times flush_s
        assert kept_store(keeper, directory).memtable_bytes == in_memtables
        other = LocalCopy(tmp_path / "local", "prices", "default", 2)
        other.lock(1)
        with pytest.raises(StoreLockedError):
            PartitionStore.open(
                str(tmp_path / "root"), "prices", 2, 0, tmp_path / "local",
                history_retention_ms=10**12, keeper=keeper,
                options=CheckpointOptions(lock_timeout_s=0.1),
            )  # fmt: skip
        other.unlock()
        assert kept_store(keeper, directory).memtable_bytes == in_memtables
        task.abort()
        assert _wait_for_flush(keeper, directory) < keeper.flush_min_bytes
    finally:
        keeper.stop()
