"""Issue 8, point 2: edge inputs of the core give clear errors or work.

* a write at the largest time, ``2**63 - 1``, keeps the key readable (it made every later call
  on the key raise ``CorruptionError``);
* a batch whose values total more than 2 GiB is a ``ValueError`` (it was a ``PanicException``,
  a ``BaseException`` that ``except Exception`` misses);
* ``True`` is not a time (``put(k, v, True)`` was accepted as time 1);
* a time beyond the 64-bit range is a ``ValueError`` (it was an ``OverflowError``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import verstore

MAX = 2**63 - 1


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> verstore.VersionedStore:
    if request.param == "memory":
        return verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    return verstore.VersionedStore(tmp_path / "store", history_retention_ms=1_000)


def test_delete_at_the_largest_time_keeps_the_key_readable(
    store: verstore.VersionedStore,
) -> None:
    # a put then a delete at 2**63 - 1, and a delete of a key never written
    store.put(b"k", b"v", MAX - 10)
    assert store.delete(b"k", MAX) == verstore.VersionedRecord(b"v", MAX - 10, None)
    assert store.delete(b"fresh", MAX) is None
    for key in (b"k", b"fresh"):
        assert store.get(key) is None
        assert store.get(key, as_of=MAX) is None
        assert store.versions(key, to_time=MAX - 1) == (
            [verstore.VersionedRecord(b"v", MAX - 10, MAX)] if key == b"k" else []
        )
    assert store.get(b"k", as_of=MAX - 1) == verstore.VersionedRecord(b"v", MAX - 10, MAX)
    # a value at the same largest time replaces the tombstone, and reads still work
    assert store.put(b"k", b"w", MAX) == verstore.VALID_TO_UNDEFINED
    assert store.get(b"k") == verstore.VersionedRecord(b"w", MAX, None)
    assert store.put(b"fresh", b"x", MAX) == verstore.VALID_TO_UNDEFINED
    batch = store.get_batch([b"k", b"fresh"], as_of=MAX)
    assert batch.column("value").to_pylist() == [b"w", b"x"]
    assert store.observed_stream_time == MAX


def test_put_at_the_largest_time_then_reopen(tmp_path: Path) -> None:
    with verstore.VersionedStore(tmp_path / "s", history_retention_ms=10) as store:
        store.put(b"k", b"v", 5)
        store.delete(b"k", MAX)
    with verstore.VersionedStore(tmp_path / "s", history_retention_ms=10) as store:
        assert store.get(b"k") is None
        assert store.observed_stream_time == MAX


def test_batch_of_values_over_2_gib_is_a_value_error() -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    big = bytes(2**29)  # five references to one 512 MiB value: 2.5 GiB in the batch
    with pytest.raises(ValueError, match="2 GiB"):
        store.put_batch([b"k"] * 5, [big] * 5, [1, 2, 3, 4, 5])
    assert store.get(b"k") is None
    assert store.observed_stream_time == -1
    with pytest.raises(ValueError, match="2 GiB"):
        store.put_batch([big] * 5, [None] * 5, [1, 2, 3, 4, 5])


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put(b"k", b"v", True),
        lambda s: s.delete(b"k", False),
        lambda s: s.get(b"k", as_of=True),
        lambda s: s.versions(b"k", from_time=True),
        lambda s: s.versions(b"k", to_time=False),
        lambda s: s.get_batch([b"k"], as_of=True),
        lambda s: s.put_batch([b"k"], [b"v"], [True]),
    ],
    ids=["put", "delete", "get", "versions_from", "versions_to", "get_batch", "put_batch"],
)
def test_a_bool_is_not_a_time(call: object) -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    with pytest.raises(TypeError, match="bool"):
        call(store)  # type: ignore[operator]
    assert store.observed_stream_time == -1


def test_group_history_refuses_bool_times() -> None:
    history = verstore.GroupHistory(history_retention_ms=1_000)
    with pytest.raises(TypeError, match="bool"):
        history.put(b"v", True)
    with pytest.raises(TypeError, match="bool"):
        history.get(as_of=False)


@pytest.mark.parametrize("time", [2**63, -(2**63) - 1, 2**100])
@pytest.mark.parametrize(
    "call",
    [
        lambda s, t: s.put(b"k", b"v", t),
        lambda s, t: s.delete(b"k", t),
        lambda s, t: s.get(b"k", as_of=t),
        lambda s, t: s.versions(b"k", from_time=t),
        lambda s, t: s.get_batch([b"k"], as_of=t),
        lambda s, t: s.put_batch([b"k"], [b"v"], [t]),
        lambda s, t: s.delete_batch([b"k"], [t]),
        lambda s, t: s.get_batch([b"k"], as_of=[t]),
    ],
    ids=["put", "delete", "get", "versions", "get_batch", "put_batch", "delete_batch", "as_of"],
)
def test_a_time_beyond_64_bits_is_a_value_error(call: object, time: int) -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    with pytest.raises(ValueError, match="64 bits"):
        call(store, time)  # type: ignore[operator]
    assert store.observed_stream_time == -1


def test_times_at_the_int64_bounds_are_accepted_where_valid() -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    assert store.get(b"k", as_of=-(2**63)) is None
    assert store.versions(b"k", from_time=-(2**63), to_time=MAX) == []
    with pytest.raises(ValueError, match=">= 0"):
        store.put(b"k", b"v", -(2**63))
    codes = store.put_batch(pa.array([b"a", b"b"]), pa.array([b"1", b"2"]), pa.array([0, MAX]))
    assert codes.to_pylist() == [-1, -1]
