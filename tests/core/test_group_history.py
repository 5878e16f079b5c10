"""GroupHistory: one key's history, same semantics as a store, serialized whole."""

from __future__ import annotations

import pytest
import verstore


def test_history_has_store_semantics_and_survives_bytes() -> None:
    h = verstore.GroupHistory(history_retention_ms=100, segment_interval_ms=10)
    assert h.put(b"8", 0) == verstore.VALID_TO_UNDEFINED
    assert h.put(b"10", 4) == verstore.VALID_TO_UNDEFINED
    assert h.put(b"9", 2) == 4  # out of order: rewrites history, not the latest
    restored = verstore.GroupHistory.from_bytes(
        h.to_bytes(), history_retention_ms=100, segment_interval_ms=10
    )
    assert restored.get(as_of=3) == verstore.VersionedRecord(b"9", 2, 4)
    assert restored.get() == verstore.VersionedRecord(b"10", 4, None)
    assert [r.value for r in restored.versions(ascending=True)] == [b"8", b"9", b"10"]
    assert restored.observed_stream_time == 4
    assert restored.delete(5) == verstore.VersionedRecord(b"10", 4, None)
    assert restored.get() is None


def test_matches_a_store_over_many_writes() -> None:
    h = verstore.GroupHistory(history_retention_ms=50, segment_interval_ms=7)
    s = verstore.VersionedStore.in_memory(history_retention_ms=50, segment_interval_ms=7)
    for i in range(300):
        ts = (i * 37) % 400 + i // 2
        value = None if i % 11 == 0 else str(i).encode()
        assert h.put(value, ts) == s.put(b"", value, ts)
        if i % 25 == 0:
            h = verstore.GroupHistory.from_bytes(
                h.to_bytes(), history_retention_ms=50, segment_interval_ms=7
            )
    for t in range(0, 600, 3):
        assert h.get(as_of=t) == s.get(b"", as_of=t)
    assert h.versions() == s.versions(b"")


def test_damaged_bytes_or_other_config_are_refused() -> None:
    h = verstore.GroupHistory(history_retention_ms=100)
    h.put(b"v", 1)
    data = h.to_bytes()
    with pytest.raises(verstore.CorruptionError):
        verstore.GroupHistory.from_bytes(data[:-1], history_retention_ms=100)
    with pytest.raises(verstore.IncompatibleConfigError):
        verstore.GroupHistory.from_bytes(data, history_retention_ms=99)
