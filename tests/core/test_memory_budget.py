"""The process's memory budget: ``set_memory_limit``, ``memory_usage`` and what stores do
within it (the RSS measurements are in ``test_memory_rss.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import verstore

MIB = 1 << 20


@pytest.fixture(autouse=True)
def default_limit() -> Iterator[None]:
    """Every test leaves the process's budget as it found it (the default)."""
    yield
    verstore.set_memory_limit(verstore.DEFAULT_MEMORY_LIMIT_MB)


def _open(path: Path, memory_limit_mb: int | None = None) -> verstore.VersionedStore:
    return verstore.VersionedStore(
        path, history_retention_ms=10**9, write_ahead_log=False, memory_limit_mb=memory_limit_mb
    )


def _fill(
    store: verstore.VersionedStore, rows: int, start: int = 0, value: bytes = b"v", at: int = 0
) -> None:
    keys = pa.array([f"key-{i:08d}".encode() for i in range(start, start + rows)])
    values = pa.array([value * 32] * rows)
    times = pa.array(range(at + start, at + start + rows), type=pa.int64())
    store.put_batch(keys, values, times)


def test_the_default_limit_applies_until_one_is_set() -> None:
    usage = verstore.memory_usage()
    assert usage.limit_bytes == verstore.DEFAULT_MEMORY_LIMIT_MB * MIB
    verstore.set_memory_limit(64)
    assert verstore.memory_usage().limit_bytes == 64 * MIB


@pytest.mark.parametrize(
    ("limit", "error", "match"),
    [
        (15, ValueError, "limit_mb must be at least 16, got 15"),
        (-1, ValueError, "limit_mb must be at least 16, got -1"),
        ("64", TypeError, "limit_mb must be int, got str"),
        (True, TypeError, "limit_mb must be int, got bool"),
        (2**62, ValueError, "limit_mb is too large"),
    ],
)
def test_a_bad_limit_is_refused_naming_it(limit: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        verstore.set_memory_limit(limit)  # type: ignore[arg-type]
    assert verstore.memory_usage().limit_bytes == verstore.DEFAULT_MEMORY_LIMIT_MB * MIB


def test_usage_counts_open_stores_and_ends_at_nothing(tmp_path: Path) -> None:
    before = verstore.memory_usage()
    stores = [_open(tmp_path / f"s{i}") for i in range(3)]
    for store in stores:
        _fill(store, 2_000)
    usage = verstore.memory_usage()
    assert usage.open_stores == before.open_stores + 3
    assert usage.write_buffer_bytes > before.write_buffer_bytes
    for store in stores:
        store.close()
    after = verstore.memory_usage()
    assert after.open_stores == before.open_stores
    assert after.write_buffer_bytes == before.write_buffer_bytes
    if after.open_stores == 0:
        assert after.rocksdb_bytes == 0, "the block cache is emptied once no store is open"


def test_stores_share_the_write_buffers_share(tmp_path: Path) -> None:
    """Four stores under a 16 MiB budget: their write buffers together stay within a
    sixteenth of it, past which each writes its own, give or take the call that added last."""
    verstore.set_memory_limit(16)
    share = 16 * MIB // 16
    stores = [_open(tmp_path / f"s{i}") for i in range(4)]
    try:
        for round_ in range(5):
            for store in stores:
                _fill(store, 1_000, start=round_ * 1_000)
                # one call of 1 000 rows adds about 300 KB to the buffers
                assert verstore.memory_usage().write_buffer_bytes < share + 600_000
        for store in stores:
            assert store.get(b"key-00004999") is not None
    finally:
        for store in stores:
            store.close()


def test_release_memory_writes_the_buffer_and_empties_the_caches(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        _fill(store, 5_000)
        _fill(store, 5_000, value=b"w", at=10_000)  # reads latest values: the cache fills
        before = verstore.memory_usage()
        assert before.write_buffer_bytes > 0
        store.release_memory()
        after = verstore.memory_usage()
        assert after.write_buffer_bytes < before.write_buffer_bytes
        assert after.cache_bytes <= before.cache_bytes
        assert store.stats().write_buffer_bytes == 0
        record = store.get(b"key-00000007")
        assert record is not None and record.value == b"w" * 32
    with _open(tmp_path / "s") as reopened:
        assert reopened.versions(b"key-00000007")[1].value == b"v" * 32


def test_a_store_cap_bounds_its_write_buffer_below_the_budget(tmp_path: Path) -> None:
    """``memory_limit_mb`` caps one store (half of it for its write buffer) within the
    process's budget."""
    with _open(tmp_path / "s", memory_limit_mb=1) as store:
        for round_ in range(4):
            _fill(store, 2_000, start=round_ * 2_000)
            assert store.stats().write_buffer_bytes < MIB // 2 + 700_000


def test_a_lower_limit_takes_effect_on_open_stores(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        _fill(store, 20_000)
        assert verstore.memory_usage().write_buffer_bytes > MIB
        verstore.set_memory_limit(16)
        _fill(store, 100, start=20_000)
        assert verstore.memory_usage().write_buffer_bytes < MIB + 40_000
        assert verstore.memory_usage().rocksdb_bytes <= 16 * MIB
