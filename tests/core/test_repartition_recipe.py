"""The two core features of offline repartitioning (docs/semantics.md §2.12, §2.14).

``scan_versions(tombstones=True)`` returns each key's history with the tombstones still stored,
and ``advance_stream_time`` raises the observed stream time as a write that stores no version.
The acceptance property: a store's rows with tombstones, sorted by timestamp and put into an
empty store with the same settings, followed by ``advance_stream_time`` to the source's stream
time, give a store that reads as the source (``get`` at every time, ``versions``) and answers
later writes, out of order too, as the source does. Histories mix in-order and late puts,
deletes of unknown keys, consecutive tombstones, deletes at a version's own timestamp, writes
rejected as too old and jumps that expire segments, on both backends, with and without a
time-to-live of newest versions (§2.15: the copy ends every version where the source does).

The advance is recorded in the changelog as a stream-time record (``format.md``): replay
reproduces it, the change feed leaves it out, and only such a changelog is format version 2.
"""

from __future__ import annotations

import itertools
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verstore import NOT_PUT, CorruptionError, VersionedStore
from verstore._core import read_changelog, verify_changelog

KEYS = [b"", b"a", b"a\x00", b"ab", b"\xff"]
ATTEMPT = b"\x01" * 16
PARENT = b"\x02" * 16

LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"
SETTINGS = settings(
    max_examples=500 if LONG else 100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# One operation: (kind, key, value, time offset from the stream time). "own" deletes at the
# timestamp of one of the key's versions (§Q1), "advance" is advance_stream_time.
ops_st = st.lists(
    st.tuples(
        st.sampled_from(["put"] * 6 + ["delete"] * 2 + ["own", "advance"]),
        st.sampled_from(KEYS),
        st.one_of(st.none(), st.sampled_from([b"", b"x", b"yy"]), st.binary(max_size=4)),
        st.one_of(st.integers(-6, 3), st.integers(-30, -7), st.integers(4, 40)),
    ),
    max_size=40,
)
config_st = st.fixed_dictionaries(
    {
        "history_retention_ms": st.sampled_from([0, 5, 20]),
        "segment_interval_ms": st.sampled_from([1, 3, 10]),
    }
)
# With a time-to-live of newest versions too (§2.15): below, between and above the retentions.
ttl_config_st = st.fixed_dictionaries(
    {
        "history_retention_ms": st.sampled_from([0, 5, 20]),
        "segment_interval_ms": st.sampled_from([1, 3, 10]),
        "latest_ttl_ms": st.sampled_from([None, 1, 7, 30]),
    }
)
backends_st = st.tuples(
    st.sampled_from(["memory", "wal", "buffered"]), st.sampled_from(["memory", "wal", "buffered"])
)


@contextmanager
def opened(backend: str, config: dict[str, Any]) -> Iterator[VersionedStore]:
    """A fresh store on ``backend``: in memory, RocksDB with or without its write-ahead log."""
    if backend == "memory":
        yield VersionedStore.in_memory(**config)
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = VersionedStore(tmp, write_ahead_log=backend == "wal", **config)
        try:
            yield store
        finally:
            store.close()


def apply(store: VersionedStore, op: tuple[str, bytes, bytes | None, int]) -> Any:
    """Applies one operation; returns what the call returned."""
    kind, key, value, dt = op
    at = max(0, store.observed_stream_time + dt)
    if kind == "put":
        return store.put(key, value, at)
    if kind == "delete":
        return store.delete(key, at)
    if kind == "own":
        own = [r.timestamp for r in store.versions(key)]
        return store.delete(key, own[dt % len(own)] if own else at)
    return store.advance_stream_time(at)


def rows_with_tombstones(store: VersionedStore, **bounds: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with store.scan_versions(tombstones=True, batch_rows=7, **bounds) as scan:
        assert scan.schema.field("value").nullable
        for batch in scan:
            rows.extend(batch.to_pylist())
    return rows


def repartition(source: VersionedStore, target: VersionedStore) -> None:
    """The repartitioning recipe: every row with tombstones, by time, then the stream time."""
    rows = sorted(rows_with_tombstones(source, ascending=True), key=lambda r: r["timestamp"])
    for row in rows:
        assert target.put(row["key"], row["value"], row["timestamp"]) != NOT_PUT, row
    if source.observed_stream_time >= 0:
        target.advance_stream_time(source.observed_stream_time)


def assert_same_reads(a: VersionedStore, b: VersionedStore) -> None:
    stream_time = a.observed_stream_time
    assert b.observed_stream_time == stream_time
    bounds = [None, 0, stream_time - a.history_retention_ms, stream_time]
    for key in KEYS:
        assert a.get(key) == b.get(key), key
        for t in range(-1, stream_time + 3):
            assert a.get(key, as_of=t) == b.get(key, as_of=t), (key, t)
        for low in bounds:
            for ascending in (False, True):
                got = b.versions(key, from_time=low, ascending=ascending)
                assert got == a.versions(key, from_time=low, ascending=ascending), (key, low)


@SETTINGS
@given(config=ttl_config_st, backends=backends_st, history=ops_st, later=ops_st)
def test_a_repartitioned_store_reads_and_takes_writes_as_its_source(
    config: dict[str, Any],
    backends: tuple[str, str],
    history: list[tuple[str, bytes, bytes | None, int]],
    later: list[tuple[str, bytes, bytes | None, int]],
) -> None:
    with opened(backends[0], config) as source, opened(backends[1], config) as target:
        for op in history:
            apply(source, op)
        repartition(source, target)
        assert_same_reads(source, target)
        for op in later:
            assert apply(source, op) == apply(target, op), op
        assert_same_reads(source, target)


@SETTINGS
@given(config=config_st, history=ops_st)
def test_rows_with_tombstones_hold_the_values_and_chain_their_validity(
    config: dict[str, int], history: list[tuple[str, bytes, bytes | None, int]]
) -> None:
    """Without tombstones the rows are the values of the rows with them; each key's rows
    follow one another (a row ends where the next begins) up to its newest, and a window
    selects the tombstones as it selects values."""
    with opened("memory", config) as store:
        for op in history:
            apply(store, op)
        rows = rows_with_tombstones(store, ascending=True)
        with store.scan_versions(ascending=True) as scan:
            assert not scan.schema.field("value").nullable
            values = [row for batch in scan for row in batch.to_pylist()]
        assert values == [r for r in rows if r["value"] is not None]
        for key in KEYS:
            mine = [r for r in rows if r["key"] == key]
            for older, newer in itertools.pairwise(mine):
                assert older["valid_to"] == newer["timestamp"], mine
            assert not mine or mine[-1]["valid_to"] is None
        horizon = store.observed_stream_time - store.history_retention_ms
        for low, high in [(horizon, None), (horizon - 2, horizon + 2)]:
            window = rows_with_tombstones(store, from_time=low, to_time=high, ascending=True)
            expected = [
                r
                for r in rows
                if (high is None or r["timestamp"] <= high)
                and (r["valid_to"] is None or r["valid_to"] > low)
            ]
            assert window == expected


def test_tombstones_of_every_kind_in_their_place() -> None:
    """An implicit tombstone (a row's end), a degenerate row (a first write that deletes),
    consecutive tombstones, a delete at a value's own time and an explicit entry."""
    store = VersionedStore.in_memory(history_retention_ms=1_000, segment_interval_ms=10)
    store.delete(b"d", 4)
    store.put(b"d", b"x", 25)
    store.put(b"e", b"a", 1)
    store.put(b"e", b"b", 5)
    store.delete(b"e", 5)
    store.delete(b"e", 7)
    store.put(b"e", b"c", 8)
    store.put(b"e", b"d", 9)
    rows = [
        (r["key"], r["value"], r["timestamp"], r["valid_to"]) for r in rows_with_tombstones(store)
    ]
    assert rows == [
        (b"d", b"x", 25, None),
        (b"d", None, 4, 25),
        (b"e", b"d", 9, None),
        (b"e", b"c", 8, 9),
        (b"e", None, 7, 8),
        (b"e", None, 5, 7),
        (b"e", b"a", 1, 5),
    ]


def test_advance_stream_time_expires_as_a_put_and_is_a_no_op_below() -> None:
    store = VersionedStore.in_memory(history_retention_ms=10, segment_interval_ms=5)
    store.put(b"k", b"a", 1)
    store.put(b"k", b"b", 3)
    assert store.advance_stream_time(3) == 3
    assert store.advance_stream_time(0) == 3
    assert len(store.versions(b"k")) == 2
    # H = 10: segment 0, holding a@1 (valid to 3), is dropped; b is the latest value
    assert store.advance_stream_time(20) == 20
    assert store.observed_stream_time == 20
    assert [r.timestamp for r in store.versions(b"k")] == [3]
    assert store.put(b"k", b"z", 9) == NOT_PUT
    assert store.stats().observed_stream_time == 20


@pytest.mark.parametrize(
    ("timestamp", "error", "message"),
    [
        (-1, ValueError, "timestamp must be >= 0, got -1"),
        (2**63, ValueError, "timestamp must fit in 64 bits"),
        ("5", TypeError, "timestamp"),
        (1.5, TypeError, "timestamp"),
        (None, TypeError, "timestamp"),
        (True, TypeError, "timestamp must be int, got bool"),
    ],
)
def test_advance_stream_time_refuses_bad_times(timestamp: Any, error: type, message: str) -> None:
    store = VersionedStore.in_memory(history_retention_ms=10)
    store.put(b"k", b"v", 5)
    with pytest.raises(error, match=message):
        store.advance_stream_time(timestamp)
    assert store.observed_stream_time == 5


def test_an_empty_source_repartitions_without_an_advance() -> None:
    """An empty store's stream time is -1, which advance_stream_time refuses: nothing to do."""
    source = VersionedStore.in_memory(history_retention_ms=10)
    target = VersionedStore.in_memory(history_retention_ms=10)
    repartition(source, target)
    assert target.observed_stream_time == -1
    with pytest.raises(ValueError, match="timestamp"):
        target.advance_stream_time(source.observed_stream_time)


def with_format_version(data: bytes, number: int) -> bytes:
    """``data`` with its header's format version set to ``number`` (header checksum fixed)."""
    head = data[:4] + struct.pack(">I", number) + data[8:60]
    return head + struct.pack(">I", zlib.crc32(head)) + data[64:]


@pytest.mark.parametrize("write_ahead_log", [True, False])
def test_an_advance_is_recorded_and_replayed(tmp_path: Path, write_ahead_log: bool) -> None:
    config = {"history_retention_ms": 10, "segment_interval_ms": 5}
    source = VersionedStore(
        tmp_path / "src",
        history_retention_ms=10,
        segment_interval_ms=5,
        record_changes=True,
        write_ahead_log=write_ahead_log,
    )
    source.put(b"k", b"a", 1)
    source.put(b"k", b"b", 3)
    source.put(b"k", b"c", 12)
    assert source.advance_stream_time(20) == 20
    assert source.advance_stream_time(5) == 20  # not recorded
    source.put(b"k", b"late", 9)  # rejected, not recorded
    path = tmp_path / "1.changelog"
    header = source.take_changelog(path, 1, ATTEMPT, PARENT)
    data = path.read_bytes()
    assert data[4:8] == struct.pack(">I", 2)
    assert header.record_count == 4
    assert verify_changelog(data, "1.changelog") == header
    feed_header, writes = read_changelog(data, "1.changelog")
    assert feed_header == header
    assert writes.column("timestamp").to_pylist() == [1, 3, 12]
    for replica in (
        VersionedStore.in_memory(**config),
        VersionedStore(
            tmp_path / "replica",
            history_retention_ms=10,
            segment_interval_ms=5,
            write_ahead_log=write_ahead_log,
        ),
    ):
        assert replica.apply_changelog(path, name="1.changelog", chunk_records=1) == header
        assert_same_reads(source, replica)
        assert replica.put(b"k", b"late", 9) == NOT_PUT
        replica.close()
    # a changelog of writes alone stays format version 1
    source.put(b"k", b"d", 21)
    second = tmp_path / "2.changelog"
    source.take_changelog(second, 2, ATTEMPT, ATTEMPT)
    assert second.read_bytes()[4:8] == struct.pack(">I", 1)
    source.close()


def test_a_stream_time_record_in_a_version_1_changelog_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "ok.changelog"
    recording = VersionedStore(tmp_path / "rec", history_retention_ms=10, record_changes=True)
    recording.put(b"k", b"a", 1)
    recording.advance_stream_time(30)
    recording.take_changelog(path, 1, ATTEMPT, PARENT)
    recording.close()
    damaged = tmp_path / "7.changelog"
    damaged.write_bytes(with_format_version(path.read_bytes(), 1))
    with pytest.raises(CorruptionError, match=r"7\.changelog"):
        verify_changelog(damaged.read_bytes(), "7.changelog")
    with pytest.raises(CorruptionError, match=r"7\.changelog"):
        read_changelog(damaged.read_bytes(), "7.changelog")
    replica = VersionedStore.in_memory(history_retention_ms=10)
    with pytest.raises(CorruptionError, match="format version 1"):
        replica.apply_changelog(damaged, name="7.changelog")
