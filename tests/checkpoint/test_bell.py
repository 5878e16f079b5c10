"""The handoff's doorbell (``verstore.checkpoint.bell``): a waiting task's ring wakes the keeper
that holds the copy's store, and nothing else at the bell's path is written or trusted."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from verstore.checkpoint import CheckpointOptions, PartitionStore
from verstore.checkpoint.bell import BELL, Doorbells, ring
from verstore.checkpoint.kept import Keeper
from verstore.checkpoint.local import LocalCopy


def _open(tmp_path: Path, version: int, keeper: Keeper | None) -> PartitionStore:
    return PartitionStore.open(
        str(tmp_path / "root"),
        "prices",
        0,
        version,
        tmp_path / "local",
        history_retention_ms=1_000,
        options=CheckpointOptions(lock_timeout_s=20),
        keeper=keeper,
    )


def _later(delay_s: float, call: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        time.sleep(delay_s)
        call()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _woken(bells: Doorbells) -> bool:
    started = time.monotonic()
    bells.wait(0.05)
    return time.monotonic() - started < 0.04


def test_a_ring_ends_a_wait_on_the_copys_bell(tmp_path: Path) -> None:
    bells = Doorbells()
    try:
        bells.listen([tmp_path])
        assert stat.S_ISFIFO((tmp_path / BELL).lstat().st_mode)
        assert stat.S_IMODE((tmp_path / BELL).lstat().st_mode) == 0o600
        ringer = _later(0.05, lambda: ring(tmp_path))
        started = time.monotonic()
        bells.wait(60)
        assert time.monotonic() - started < 30
        ringer.join()
        # The ring was taken in: the next wait runs its whole timeout.
        assert not _woken(bells)
    finally:
        bells.close()


def test_a_wake_ends_a_wait_and_is_harmless_after_close(tmp_path: Path) -> None:
    bells = Doorbells()
    waker = _later(0.05, bells.wake)
    started = time.monotonic()
    bells.wait(60)
    assert time.monotonic() - started < 30
    waker.join()
    bells.close()
    bells.wake()  # after close: writes nothing, raises nothing


def test_a_ring_with_no_bell_or_no_listener_does_nothing(tmp_path: Path) -> None:
    ring(tmp_path)  # no bell
    ring(tmp_path / "missing")  # no directory
    os.mkfifo(tmp_path / BELL, 0o600)
    ringer = threading.Thread(target=ring, args=(tmp_path,), daemon=True)
    ringer.start()  # a bell nobody listens on: no wait for a reader
    ringer.join(timeout=10)
    assert not ringer.is_alive()


def test_a_pipe_others_may_open_or_a_link_to_one_is_no_bell(tmp_path: Path) -> None:
    """A pipe anyone may write to (rung without end, a round of the keeper's each time) or
    read from (the rings read away), or a link to a pipe, is not listened to; a ring does not
    follow the link."""
    shared, linked = tmp_path / "shared", tmp_path / "linked"
    for directory in (shared, linked):
        directory.mkdir()
    os.mkfifo(shared / BELL, 0o600)
    os.chmod(shared / BELL, 0o666)
    target = tmp_path / "target"
    os.mkfifo(target, 0o600)
    (linked / BELL).symlink_to(target)
    reader = os.open(target, os.O_RDWR | os.O_NONBLOCK)
    bells = Doorbells()
    try:
        bells.listen([shared, linked])
        ring(linked)
        with pytest.raises(BlockingIOError):
            os.read(reader, 1)  # nothing went through the link
        for pipe in (shared / BELL, target):
            fd = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)  # its own reader: never ENXIO
            os.write(fd, b"\0")
            os.close(fd)
        assert not _woken(bells)
    finally:
        bells.close()
        os.close(reader)


def test_a_bell_made_again_with_its_directory_is_listened_to(tmp_path: Path) -> None:
    copy = tmp_path / "p=0"
    copy.mkdir()
    bells = Doorbells()
    try:
        bells.listen([copy])
        shutil.rmtree(copy)  # a wiped local disk; the copy rebuilt in the same place
        copy.mkdir()
        bells.listen([copy])
        assert stat.S_ISFIFO((copy / BELL).lstat().st_mode)
        ring(copy)
        assert _woken(bells)
    finally:
        bells.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_every_descriptor_is_closed_when_bells_stop(tmp_path: Path) -> None:
    def count() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = count()
    bells = Doorbells()
    bells.listen([tmp_path])
    assert count() == before + 3  # its own pipe's two ends, the copy's bell
    bells.listen([])
    assert count() == before + 2
    bells.close()
    assert count() == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_forked_child_wakes_nothing_of_its_parents_keeper(tmp_path: Path) -> None:
    """The child has the parent's descriptors but not its keeper's thread: its wake writes into
    neither the parent's pipe nor a file that took the pipe's number in the child."""
    bells = Doorbells()
    try:
        assert bells._own is not None
        write_end = bells._own[1]
        pid = os.fork()
        if pid == 0:  # the child: nothing but os calls, and _exit
            code = 1
            try:
                with contextlib.suppress(OSError):
                    os.close(write_end)
                fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT, 0o600)
                bells.wake()
                code = 0 if os.fstat(fd).st_size == 0 else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert not _woken(bells)  # the parent's pipe got nothing from the child
    finally:
        bells.close()


def test_a_bell_stops_being_listened_to_when_its_store_is_gone(tmp_path: Path) -> None:
    bells = Doorbells()
    try:
        bells.listen([tmp_path])
        bells.listen([])
        ring(tmp_path)  # no listener now
        assert not _woken(bells)
    finally:
        bells.close()


def test_something_else_at_the_bells_path_is_not_written_or_listened_to(tmp_path: Path) -> None:
    """A file or a link where the bell should be (a hostile local disk) is not a bell: a ring
    writes nothing into it or its target, and the keeper's wait only times out."""
    plain, linked, target = tmp_path / "plain", tmp_path / "linked", tmp_path / "target"
    for directory in (plain, linked):
        directory.mkdir()
    (plain / BELL).write_bytes(b"data")
    target.write_bytes(b"data")
    (linked / BELL).symlink_to(target)
    bells = Doorbells()
    try:
        bells.listen([plain, linked])
        for directory in (plain, linked):
            ring(directory)
        assert not _woken(bells)
    finally:
        bells.close()
    assert (plain / BELL).read_bytes() == b"data"
    assert target.read_bytes() == b"data"
    assert (linked / BELL).is_symlink()


def test_a_kept_store_is_handed_over_at_the_ring_not_at_the_keepers_poll(tmp_path: Path) -> None:
    """With a poll of a minute, only the bell can start the handoff in time: the waiter gets
    the lock within its timeout, and the store it then opens holds every commit."""
    keeper = Keeper(poll_s=60, settle_s=600, flush_s=600)
    try:
        for batch in range(3):
            part = _open(tmp_path, batch, keeper)
            part.store.put(f"k{batch}".encode(), b"x", batch)
            part.commit()
        assert keeper.held()
        time.sleep(0.1)  # the thread is in its minute-long wait now
        copy = LocalCopy(tmp_path / "local", "prices", "default", 0)
        started = time.monotonic()
        copy.lock(timeout_s=30)
        assert time.monotonic() - started < 30
        assert keeper.held() == []
        copy.unlock()
        part = _open(tmp_path, 3, None)
        assert part.stats.reused and not part.stats.rebuilt
        found = [part.store.get(f"k{b}".encode()) for b in range(3)]
        assert [record.value if record else None for record in found] == [b"x"] * 3
        part.abort()
    finally:
        keeper.stop()


def test_without_descriptors_for_its_own_pipe_a_keeper_still_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of file descriptors when the keeper's thread starts: no error on the task's path
    (``keep``), wakes do nothing and the thread's waits run to the poll."""

    def no_pipe() -> tuple[int, int]:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_pipe)
    bells = Doorbells()
    monkeypatch.undo()
    try:
        bells.wake()
        assert not _woken(bells)
    finally:
        bells.close()
