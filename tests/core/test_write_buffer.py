"""A store without a write-ahead log buffers writes in memory: reads see them, close, flush and
checkpoints write them, and a failed call leaves what earlier calls wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
import verstore


def _open(path: Path, **kwargs: object) -> verstore.VersionedStore:
    return verstore.VersionedStore(
        path, history_retention_ms=1_000, segment_interval_ms=100, write_ahead_log=False, **kwargs
    )  # type: ignore[arg-type]


def _write(store: verstore.VersionedStore) -> None:
    store.put(b"a", b"1", 10)
    store.put(b"a", b"2", 20)
    store.put_batch([b"b", b"a", b"b"], [b"x", b"3", None], [15, 150, 30])
    store.delete(b"c", 40)
    store.put(b"c", b"late", 35)


def _check(store: verstore.VersionedStore) -> None:
    assert store.get(b"a") == verstore.VersionedRecord(b"3", 150, None)
    assert store.get(b"a", as_of=25) == verstore.VersionedRecord(b"2", 20, 150)
    assert [r.value for r in store.versions(b"a")] == [b"3", b"2", b"1"]
    assert store.get(b"b") is None
    assert store.get(b"b", as_of=20) == verstore.VersionedRecord(b"x", 15, 30)
    assert store.get(b"c", as_of=36) == verstore.VersionedRecord(b"late", 35, 40)
    batch = store.get_batch([b"a", b"b", b"c", b"a"], as_of=[12, 16, 50, 200])
    assert batch.column("value").to_pylist() == [b"1", b"x", None, b"3"]
    assert batch.column("valid_to").to_pylist() == [20, 30, None, None]
    assert store.observed_stream_time == 150


def test_reads_see_buffered_writes_and_close_writes_them(tmp_path: Path) -> None:
    store = _open(tmp_path / "s")
    _write(store)
    _check(store)
    store.close()
    with _open(tmp_path / "s") as reopened:
        _check(reopened)


def test_flush_and_checkpoint_write_the_buffer(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        _write(store)
        store.create_checkpoint(tmp_path / "copy")
        store.flush()
        _check(store)
    with _open(tmp_path / "copy") as copy:
        _check(copy)


def test_a_failed_call_keeps_what_earlier_calls_buffered(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        _write(store)
        with pytest.raises(ValueError, match="timestamps"):
            store.put_batch([b"a", b"d"], [b"9", b"9"], [500, -1])
        _check(store)
        assert store.get(b"d") is None
    with _open(tmp_path / "s") as reopened:
        _check(reopened)


def test_a_small_memory_limit_writes_the_buffer_often(tmp_path: Path) -> None:
    with _open(tmp_path / "s", memory_limit_mb=1) as store:
        for round_ in range(20):
            keys = [f"k{i}".encode() for i in range(500)]
            store.put_batch(keys, [bytes([round_]) * 100] * 500, [round_ * 10] * 500)
        assert store.get(b"k7", as_of=55) == verstore.VersionedRecord(bytes([5]) * 100, 50, 60)
    with _open(tmp_path / "s", memory_limit_mb=1) as reopened:
        assert len(reopened.versions(b"k7")) == 20
