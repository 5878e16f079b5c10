"""Failed writes to storage: a store persists what it acknowledged or raises (semantics §2.8).

Two kinds of failure, both real to the store: a full disk (a 6 MiB tmpfs, when the tests run
as root and may mount one) and an I/O error injected into every RocksDB write of the stores
under one directory (``verstore._core._fail_storage_writes``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import verstore
from verstore import _core

RETENTION_MS = 1 << 40


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB filesystem of its own (tmpfs), unmounted after the test."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def injected(tmp_path: Path) -> Iterator[Path]:
    """Stores under the yielded directory fail their writes once ``fail_after`` is called."""
    root = tmp_path / "failing"
    root.mkdir()
    try:
        yield root
    finally:
        _core._fail_storage_writes(None)


def fail_after(root: Path, writes: int) -> None:
    _core._fail_storage_writes(writes, str(root))


def batch(first: int, rows: int, value_bytes: int = 16) -> tuple[list[bytes], list[bytes]]:
    """Keys ``first..first+rows`` and incompressible values."""
    keys = [b"key-%08d" % i for i in range(first, first + rows)]
    return keys, [os.urandom(value_bytes) for _ in keys]


def fill(store: verstore.VersionedStore, calls: int, rows: int) -> dict[bytes, bytes]:
    """``calls`` put_batch calls of ``rows`` rows at times 0, 1, ...; the rows of the calls
    that returned. Stops at the first StorageError."""
    acknowledged: dict[bytes, bytes] = {}
    for call in range(calls):
        keys, values = batch(call * rows, rows)
        try:
            store.put_batch(keys, values, [call] * rows)
        except verstore.StorageError:
            break
        acknowledged.update(zip(keys, values, strict=True))
    return acknowledged


def stored_values(path: Path, keys: list[bytes], wal: bool) -> list[bytes | None]:
    with verstore.VersionedStore(
        path, history_retention_ms=RETENTION_MS, write_ahead_log=wal
    ) as store:
        found = store.get_batch(keys)
    return [v.as_py() for v in found.column("value")]


@pytest.mark.parametrize("wal", [False, True], ids=["wal_off", "wal_on"])
def test_a_full_disk_raises_or_persists_every_acknowledged_write(
    small_disk: Path, tmp_path: Path, wal: bool
) -> None:
    """400 calls of 500 rows on a 6 MiB disk. Before, with the log off, every
    call and ``close`` returned and all 200 000 keys were gone after reopening."""
    path = small_disk / "store"
    store = verstore.VersionedStore(path, history_retention_ms=RETENTION_MS, write_ahead_log=wal)
    acknowledged = fill(store, calls=400, rows=500)
    raised = len(acknowledged) < 400 * 500
    try:
        store.close()
    except verstore.StorageError:
        raised = True
    assert raised, "200 000 rows of 16 random bytes cannot fit on a 6 MiB disk"
    # Reopened on a disk with room (a full one cannot even open RocksDB): what a returned
    # close acknowledged is all there; with the log, so is every returned call.
    copy = tmp_path / "copy"
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("verstore.lock"))
    keys = sorted(acknowledged)
    found = stored_values(copy, keys, wal)
    missing = sum(1 for key, value in zip(keys, found, strict=True) if value != acknowledged[key])
    if wal:
        assert missing == 0, f"{missing} of {len(keys)} acknowledged rows lost with the log on"


def test_a_close_that_returns_on_a_small_disk_kept_everything(
    small_disk: Path, tmp_path: Path
) -> None:
    """The same disk with room to spare: close returns, and every row is there after it."""
    path = small_disk / "store"
    store = verstore.VersionedStore(path, history_retention_ms=RETENTION_MS, write_ahead_log=False)
    acknowledged = fill(store, calls=20, rows=500)
    assert len(acknowledged) == 10_000
    store.close()
    keys = sorted(acknowledged)
    assert stored_values(path, keys, wal=False) == [acknowledged[k] for k in keys]


def test_a_store_whose_buffer_write_failed_on_a_full_disk_serves_nothing(
    small_disk: Path,
) -> None:
    """On a real full disk: small memtables fill the disk, a flush fails, RocksDB
    refuses the next write of the buffer. Before, that call raised and the store went on
    answering reads without the writes of the buffer, which earlier calls had returned."""
    path = small_disk / "store"
    store = verstore.VersionedStore(
        path, history_retention_ms=RETENTION_MS, write_ahead_log=False, memory_limit_mb=8
    )
    acknowledged = fill(store, calls=2_000, rows=500)
    assert len(acknowledged) < 2_000 * 500, "1M rows cannot fit on a 6 MiB disk"
    with pytest.raises(verstore.StorageError, match="must be reopened"):
        store.get(max(acknowledged))
    with pytest.raises(verstore.StorageError, match="must be reopened"):
        store.close()


def test_a_failed_buffer_write_fails_the_store_until_it_is_reopened(injected: Path) -> None:
    """The write buffer was drained before its write, so a failed write lost the
    writes of earlier, acknowledged calls while the store went on serving without them."""
    path = injected / "store"
    store = verstore.VersionedStore(
        path, history_retention_ms=RETENTION_MS, write_ahead_log=False, memory_limit_mb=8
    )
    flushed = fill(store, calls=2, rows=500)
    store.flush()
    fail_after(injected, 0)
    later = {}
    with pytest.raises(verstore.StorageError, match="injected I/O error"):
        for call in range(2, 400):
            keys, values = batch(call * 500, 500)
            store.put_batch(keys, values, [call] * 500)
            later.update(zip(keys, values, strict=True))
    assert later, "calls before the buffer filled were acknowledged"
    some_later_key = next(iter(later))
    for call in (
        lambda: store.get(some_later_key),
        lambda: store.get(b"key-00000000", as_of=0),
        lambda: store.get_batch([some_later_key]),
        lambda: store.put(b"k", b"v", 10_000),
        lambda: store.stats(),
        lambda: store.observed_stream_time,
        lambda: store.flush(),
    ):
        with pytest.raises(verstore.StorageError, match="must be reopened"):
            call()
    with pytest.raises(verstore.StorageError, match="must be reopened"):
        store.close()
    assert store.closed
    _core._fail_storage_writes(None)

    with verstore.VersionedStore(
        path, history_retention_ms=RETENTION_MS, write_ahead_log=False
    ) as reopened:
        assert reopened.observed_stream_time == 1
        assert reopened.stats().latest_keys == len(flushed)
        keys = sorted(flushed)
        assert reopened.get_batch(keys).column("value").to_pylist() == [flushed[k] for k in keys]
        assert reopened.get(some_later_key) is None


def test_with_the_log_a_failed_write_fails_only_its_call(injected: Path) -> None:
    path = injected / "store"
    with verstore.VersionedStore(path, history_retention_ms=RETENTION_MS) as store:
        kept = fill(store, calls=3, rows=100)
        fail_after(injected, 0)
        keys, values = batch(10_000, 100)
        with pytest.raises(verstore.StorageError, match="injected I/O error"):
            store.put_batch(keys, values, [50] * 100)
        _core._fail_storage_writes(None)
        assert store.get(keys[0]) is None
        assert store.observed_stream_time == 2
        store.put_batch(keys, values, [50] * 100)
        kept.update(zip(keys, values, strict=True))
    with verstore.VersionedStore(path, history_retention_ms=RETENTION_MS) as store:
        every = sorted(kept)
        assert store.get_batch(every).column("value").to_pylist() == [kept[k] for k in every]


def test_close_reports_a_failed_flush_without_the_log(injected: Path) -> None:
    """RocksDB flushes a store without a log while it closes and keeps a failure to itself; the
    store's close flushes first, so the failure reaches the caller."""
    store = verstore.VersionedStore(
        injected / "store", history_retention_ms=RETENTION_MS, write_ahead_log=False
    )
    fill(store, calls=1, rows=10)
    fail_after(injected, 1)  # the buffer's write, then the flush fails
    with pytest.raises(verstore.StorageError, match="injected I/O error"):
        store.close()
    assert store.closed


def test_injected_failures_name_their_directory_only(injected: Path, tmp_path: Path) -> None:
    fail_after(injected, 0)
    with verstore.VersionedStore(tmp_path / "elsewhere", history_retention_ms=10) as store:
        store.put_batch(*batch(0, 10), pa.array([1] * 10, pa.int64()))
