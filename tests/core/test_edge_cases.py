"""The edge cases of docs/semantics.md §8 (E1 to E13), each as its own test(s).

Unless a test says otherwise it uses the shared ``store`` fixture (history retention R = 300 000,
segment interval I = 100 000) and runs against the persistent store and the in-memory variant.
Reopen tests run against the persistent store only.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
import verstore
from verstore import NOT_PUT, VALID_TO_UNDEFINED, VersionedRecord, VersionedStore

MakeStore = Callable[..., VersionedStore]

R = 300_000
I = 100_000  # noqa: E741 - Kafka's name for the segment interval
Write = tuple[bytes | None, int]


def rec(value: bytes, timestamp: int, valid_to: int | None = None) -> VersionedRecord:
    """The expected record; ``valid_to=None`` means the latest version."""
    return VersionedRecord(value=value, timestamp=timestamp, valid_to=valid_to)


def read_all(store: VersionedStore, keys: list[bytes], times: list[int]) -> dict[str, object]:
    """Every read the API offers for ``keys`` at ``times``, to compare two stores."""
    return {
        "observed_stream_time": store.observed_stream_time,
        "latest": [store.get(key) for key in keys],
        "as_of": [[store.get(key, t) for t in times] for key in keys],
        "versions": [store.versions(key) for key in keys],
        "versions_ascending": [store.versions(key, ascending=True) for key in keys],
        "versions_windows": [[store.versions(key, t, t + 7) for t in times] for key in keys],
    }


# ============================================================================================
# §E1 (§Q1): a tombstone replacing the latest value at the same timestamp, then an older write

# (setup writes as (value, timestamp, expected code), tombstone timestamp T, older timestamp)
Q1_CASES = {
    "semantics-example": ([(b"v", 10, -1), (None, 10, -1)], 10, 5),
    "previous-version-tombstone": ([(None, 1, -1), (b"v", 10, -1), (None, 10, -1)], 10, 5),
    "previous-version-value": ([(b"a", 1, -1), (b"v", 10, -1), (None, 10, -1)], 10, 5),
    "repeated-tombstone": ([(b"v", 10, -1), (None, 10, -1), (None, 10, -1)], 10, 5),
    "across-segments": ([(b"v", I + 10, -1), (None, I + 10, -1)], I + 10, I - 10),
    "two-segments-apart": ([(b"v", 2 * I + 10, -1), (None, 2 * I + 10, -1)], 2 * I + 10, 10),
    "previous-tombstone-across-segments": (
        [(None, I - 20, -1), (b"v", I + 10, -1), (None, I + 10, -1)],
        I + 10,
        I - 10,
    ),
}


@pytest.mark.parametrize("case", list(Q1_CASES), ids=list(Q1_CASES))
def test_q1_tombstone_replacing_latest_bounds_older_write(store: VersionedStore, case: str) -> None:
    """Q1: put(k,v,T); put(k,None,T); put(k,w,t<T) returns T and get(k) stays None."""
    setup, tombstone_ts, older_ts = Q1_CASES[case]
    for value, timestamp, expected in setup:
        assert store.put(b"k", value, timestamp) == expected

    assert store.put(b"k", b"w", older_ts) == tombstone_ts
    assert store.get(b"k") is None
    assert store.get(b"k", tombstone_ts) is None
    assert store.get(b"k", tombstone_ts + 1) is None
    assert store.get(b"k", older_ts) == rec(b"w", older_ts, tombstone_ts)
    assert store.get(b"k", tombstone_ts - 1) == rec(b"w", older_ts, tombstone_ts)
    assert store.versions(b"k", older_ts, None)[0] == rec(b"w", older_ts, tombstone_ts)
    assert store.versions(b"k", tombstone_ts, None) == []


def test_q1_delete_at_latest_timestamp_bounds_older_write(store: VersionedStore) -> None:
    """Q1 via delete(): deleting at the latest value's own timestamp keeps the tombstone."""
    assert store.put(b"k", b"v", 10) == VALID_TO_UNDEFINED
    assert store.delete(b"k", 10) == rec(b"v", 10)
    assert store.put(b"k", b"w", 5) == 10
    assert store.get(b"k") is None
    assert store.get(b"k", 7) == rec(b"w", 5, 10)
    assert store.versions(b"k") == [rec(b"w", 5, 10)]


def test_q1_tombstone_then_newer_value(store: VersionedStore) -> None:
    """Q1 follow-up: a newer value after the replacing tombstone leaves a gap at [T, newer)."""
    assert store.put(b"k", b"v", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"x", 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", 5) == 10
    assert store.get(b"k", 15) is None
    assert store.versions(b"k") == [rec(b"x", 20), rec(b"w", 5, 10)]


def test_q1_tombstone_survives_reopen(make_store: MakeStore, tmp_path: Path) -> None:
    """Q1 after a reopen: the tombstone at the latest timestamp is persisted."""
    path = tmp_path / "q1"
    store = make_store(path)
    assert store.put(b"k", b"v", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, 10) == VALID_TO_UNDEFINED
    store.close()

    reopened = make_store(path)
    assert reopened.get(b"k") is None
    assert reopened.put(b"k", b"w", 5) == 10
    assert reopened.get(b"k") is None
    assert reopened.get(b"k", 5) == rec(b"w", 5, 10)


# ============================================================================================
# §E2 (§Q2): versions() across a segment boundary agrees with get(k, as_of)


def test_q2_versions_finds_version_stored_in_later_segment(store: VersionedStore) -> None:
    """Q2: v1@10, v2@I+10 -> versions(k, 0, 50) == [v1] like get(k, 50) (the §Q2 example)."""
    assert store.put(b"k", b"v1", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", I + 10) == VALID_TO_UNDEFINED

    assert store.get(b"k", 50) == rec(b"v1", 10, I + 10)
    assert store.versions(b"k", 0, 50) == [rec(b"v1", 10, I + 10)]
    assert store.versions(b"k", 50, 50) == [rec(b"v1", 10, I + 10)]
    assert store.versions(b"k", 0, I + 9, ascending=True) == [rec(b"v1", 10, I + 10)]
    assert store.versions(b"k", 0, I + 10) == [rec(b"v2", I + 10), rec(b"v1", 10, I + 10)]


@pytest.mark.parametrize(
    ("newer_ts", "tombstone_ts"),
    [(2 * I + 10, None), (3 * I - 1, None), (I + 20, I + 10), (2 * I + 20, 2 * I + 10)],
)
def test_q2_versions_spanning_several_segments(
    store: VersionedStore, newer_ts: int, tombstone_ts: int | None
) -> None:
    """Q2: a version whose valid-to lies one or more segments later is found by versions()."""
    assert store.put(b"k", b"v1", 10) == VALID_TO_UNDEFINED
    if tombstone_ts is not None:
        assert store.put(b"k", None, tombstone_ts) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", newer_ts) == VALID_TO_UNDEFINED
    valid_to = newer_ts if tombstone_ts is None else tombstone_ts

    assert store.get(b"k", 50) == rec(b"v1", 10, valid_to)
    assert store.versions(b"k", 0, 50) == [rec(b"v1", 10, valid_to)]
    assert store.versions(b"k", valid_to - 1, valid_to - 1) == [rec(b"v1", 10, valid_to)]


def test_q2_point_ranges_agree_with_point_reads(store: VersionedStore) -> None:
    """Q2: for every t >= ST - R, versions(k, t, t) is [get(k, t)] (or [] when None)."""
    writes: list[Write] = [
        (b"a", 10),
        (b"b", I - 5),
        (None, I + 5),
        (b"c", I + 50),
        (b"d", 2 * I + 1),
        (b"e", 40),
        (None, 2 * I - 1),
        (b"", 3 * I - 1),
    ]
    for value, timestamp in writes:
        store.put(b"k", value, timestamp)

    horizon = store.observed_stream_time - R
    for t in sorted(
        {
            0,
            9,
            10,
            39,
            40,
            41,
            I - 6,
            I - 5,
            I - 1,
            I,
            I + 4,
            I + 5,
            I + 49,
            I + 50,
            2 * I - 2,
            2 * I - 1,
            2 * I,
            2 * I + 1,
            3 * I - 2,
            3 * I - 1,
            3 * I,
            10**9,
        }
    ):
        assert t >= horizon
        point = store.get(b"k", t)
        assert store.versions(b"k", t, t) == ([] if point is None else [point]), t


# ============================================================================================
# §E3 exact boundaries: ST - R for writes, as_of and to_time


@pytest.mark.parametrize("retention", [0, 1, 1_000, R])
def test_write_boundary_at_st_minus_r(
    make_store: MakeStore, store_kind: str, retention: int
) -> None:
    """A write at ST - R is accepted, at ST - R - 1 rejected (put and delete)."""
    store = make_store(history_retention_ms=retention, segment_interval_ms=I, kind=store_kind)
    stream_time = retention + 1_000
    assert store.put(b"other", b"x", stream_time) == VALID_TO_UNDEFINED
    assert store.put(b"old", b"o", stream_time - retention) == VALID_TO_UNDEFINED

    assert store.put(b"k", b"v", stream_time - retention) == VALID_TO_UNDEFINED
    assert store.put(b"k2", b"v", stream_time - retention - 1) == NOT_PUT
    assert store.put(b"k2", None, stream_time - retention - 1) == NOT_PUT
    assert store.delete(b"old", stream_time - retention - 1) is None
    assert store.get(b"old") == rec(b"o", stream_time - retention)
    assert store.get(b"k2") is None
    assert store.observed_stream_time == stream_time

    assert store.delete(b"old", stream_time - retention) == rec(b"o", stream_time - retention)
    assert store.get(b"old") is None
    assert store.observed_stream_time == stream_time


def test_as_of_boundary_at_st_minus_r(store: VersionedStore) -> None:
    """get(k, ST - R) reads history; get(k, ST - R - 1) only sees a qualifying latest value."""
    assert store.put(b"k", b"a", 5) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", 15) == VALID_TO_UNDEFINED
    assert store.put(b"m", b"c", 3) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", R + 10) == VALID_TO_UNDEFINED  # ST - R = 10

    assert store.get(b"k", 10) == rec(b"a", 5, 15)
    assert store.get(b"k", 9) is None
    assert store.get(b"k", 5) is None
    assert store.get(b"k", 15) == rec(b"b", 15)
    assert store.get(b"m", 9) == rec(b"c", 3)
    assert store.get(b"m", 2) is None


def test_to_time_boundary_at_st_minus_r(store: VersionedStore) -> None:
    """versions(k, f, ST - R) reads history; to_time = ST - R - 1 only a qualifying latest."""
    assert store.put(b"k", b"a", 5) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", 15) == VALID_TO_UNDEFINED
    assert store.put(b"m", b"c", 3) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", R + 10) == VALID_TO_UNDEFINED  # ST - R = 10

    assert store.versions(b"k", 0, 10) == [rec(b"a", 5, 15)]
    assert store.versions(b"k", None, 10) == [rec(b"a", 5, 15)]
    assert store.versions(b"k", 0, 9) == []
    assert store.versions(b"k", None, 9) == []
    assert store.versions(b"k", 0, 15) == [rec(b"b", 15), rec(b"a", 5, 15)]
    assert store.versions(b"m", 0, 9) == [rec(b"c", 3)]
    # from_time is not consulted for an expired query: the latest interval is open-ended
    assert store.versions(b"m", 8, 9) == [rec(b"c", 3)]
    assert store.versions(b"m", 0, 2) == []


# ============================================================================================
# §E4 the latest value never expires


def test_latest_value_never_expires(store: VersionedStore) -> None:
    """get(k), get(k, old as_of) and versions with an old to_time still see the latest value."""
    assert store.put(b"k", b"v", 1) == VALID_TO_UNDEFINED
    assert store.put(b"j", b"a", 1) == VALID_TO_UNDEFINED
    assert store.put(b"j", b"b", 2) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", 10**12) == VALID_TO_UNDEFINED

    assert store.get(b"k") == rec(b"v", 1)
    assert store.get(b"k", 1) == rec(b"v", 1)
    assert store.get(b"k", 5) == rec(b"v", 1)
    assert store.get(b"k", 0) is None
    assert store.versions(b"k") == [rec(b"v", 1)]
    assert store.versions(b"k", 0, 5) == [rec(b"v", 1)]
    assert store.versions(b"k", None, 1) == [rec(b"v", 1)]
    assert store.versions(b"k", None, 0) == []

    # the older version of j expired (and its segment was dropped); the latest did not
    assert store.get(b"j") == rec(b"b", 2)
    assert store.get(b"j", 1) is None
    assert store.get(b"j", 2) == rec(b"b", 2)
    assert store.versions(b"j") == [rec(b"b", 2)]


def test_latest_value_never_expires_after_reopen(make_store: MakeStore, tmp_path: Path) -> None:
    """The latest value of a long-idle key survives expiry and a reopen."""
    path = tmp_path / "latest"
    store = make_store(path)
    assert store.put(b"k", b"v", 1) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", 10**12) == VALID_TO_UNDEFINED
    store.close()

    reopened = make_store(path)
    assert reopened.get(b"k") == rec(b"v", 1)
    assert reopened.get(b"k", 3) == rec(b"v", 1)
    assert reopened.versions(b"k") == [rec(b"v", 1)]


# ============================================================================================
# §E5 delete


def test_delete_returns_pre_delete_record(store: VersionedStore) -> None:
    """delete returns the record valid at its timestamp with the old valid-to (None if latest)."""
    assert store.put(b"k", b"a", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", 20) == VALID_TO_UNDEFINED

    assert store.delete(b"k", 15) == rec(b"a", 10, 20)
    assert store.get(b"k", 12) == rec(b"a", 10, 15)
    assert store.get(b"k", 15) is None
    assert store.get(b"k", 20) == rec(b"b", 20)

    assert store.delete(b"k", 25) == rec(b"b", 20)
    assert store.get(b"k") is None
    assert store.get(b"k", 22) == rec(b"b", 20, 25)

    # deleting at an existing version's own timestamp returns that version
    assert store.delete(b"k", 10) == rec(b"a", 10, 15)
    assert store.get(b"k", 12) is None
    assert store.versions(b"k") == [rec(b"b", 20, 25)]


def test_delete_expired_returns_none_although_data_exists(store: VersionedStore) -> None:
    """An expired delete returns None, writes nothing, and leaves observed_stream_time alone."""
    assert store.put(b"k", b"a", 5) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", R + 10) == VALID_TO_UNDEFINED

    assert store.delete(b"k", 9) is None
    assert store.get(b"k") == rec(b"a", 5)
    assert store.get(b"k", 9) == rec(b"a", 5)
    assert store.versions(b"k") == [rec(b"a", 5)]
    assert store.observed_stream_time == R + 10


def test_delete_unknown_key_writes_tombstone(store: VersionedStore) -> None:
    """Deleting an unknown key returns None but writes a tombstone that bounds older writes."""
    assert store.delete(b"u", 50) is None
    assert store.observed_stream_time == 50
    assert store.get(b"u") is None

    assert store.put(b"u", b"v", 40) == 50
    assert store.get(b"u") is None
    assert store.get(b"u", 45) == rec(b"v", 40, 50)
    assert store.get(b"u", 50) is None
    assert store.versions(b"u") == [rec(b"v", 40, 50)]


def test_delete_where_no_record_is_valid_writes_tombstone(store: VersionedStore) -> None:
    """Deleting a known key at a time with no valid record returns None and still writes."""
    assert store.put(b"k", b"a", 100) == VALID_TO_UNDEFINED
    assert store.delete(b"k", 50) is None
    assert store.put(b"k", b"b", 40) == 50
    assert store.get(b"k", 60) is None
    assert store.get(b"k", 45) == rec(b"b", 40, 50)
    assert store.get(b"k") == rec(b"a", 100)


# ============================================================================================
# §E6 empty value vs tombstone


def test_empty_value_in_latest_store(store: VersionedStore) -> None:
    """b"" as the latest value is a record; None as the latest version is not."""
    assert store.put(b"k", b"", 5) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"", 5)
    assert store.get(b"k", 5) == rec(b"", 5)
    assert store.versions(b"k") == [rec(b"", 5)]

    assert store.delete(b"k", 6) == rec(b"", 5)
    assert store.get(b"k") is None
    assert store.get(b"k", 5) == rec(b"", 5, 6)
    assert store.versions(b"k") == [rec(b"", 5, 6)]

    assert store.put(b"k", b"", 6) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"", 6)


def test_empty_value_in_segment_rows(store: VersionedStore) -> None:
    """Empty values and tombstones alternate in rows and are read back distinctly."""
    writes: list[Write] = [(b"", 5), (None, 6), (b"", 7), (b"x", 8), (None, I + 1), (b"", I + 2)]
    for value, timestamp in writes:
        assert store.put(b"k", value, timestamp) == VALID_TO_UNDEFINED

    assert store.get(b"k", 5) == rec(b"", 5, 6)
    assert store.get(b"k", 6) is None
    assert store.get(b"k", 7) == rec(b"", 7, 8)
    assert store.get(b"k", 8) == rec(b"x", 8, I + 1)
    assert store.get(b"k", I + 1) is None
    assert store.get(b"k") == rec(b"", I + 2)
    assert store.versions(b"k", ascending=True) == [
        rec(b"", 5, 6),
        rec(b"", 7, 8),
        rec(b"x", 8, I + 1),
        rec(b"", I + 2),
    ]
    # replacing an empty value with a tombstone and back, in place
    assert store.put(b"k", None, 7) == 8
    assert store.get(b"k", 7) is None
    assert store.put(b"k", b"", 7) == 8
    assert store.get(b"k", 7) == rec(b"", 7, 8)


def test_empty_value_vs_missing_in_batches(store: VersionedStore) -> None:
    """get_batch returns b"" (not null) for an empty value and nulls for no record."""
    codes = store.put_batch([b"e", b"t"], [b"", None], [5, 5])
    assert codes.to_pylist() == [VALID_TO_UNDEFINED, VALID_TO_UNDEFINED]

    batch = store.get_batch([b"e", b"t", b"missing"])
    assert batch.column("value").to_pylist() == [b"", None, None]
    assert batch.column("timestamp").to_pylist() == [5, None, None]
    assert batch.column("valid_to").to_pylist() == [None, None, None]


# ============================================================================================
# §E7 degenerate rows: the first write of a key is a tombstone


@pytest.mark.parametrize(
    ("tombstone_ts", "older_ts"),
    [(100, 50), (I + 10, I - 10), (I, I - 1), (2 * I + 5, 5)],
)
@pytest.mark.parametrize("via", ["put", "delete"])
def test_degenerate_row_bounds_older_write(
    store: VersionedStore, via: str, tombstone_ts: int, older_ts: int
) -> None:
    """A first write that is a tombstone gives later older writes valid-to = its timestamp."""
    if via == "put":
        assert store.put(b"k", None, tombstone_ts) == VALID_TO_UNDEFINED
    else:
        assert store.delete(b"k", tombstone_ts) is None
    assert store.get(b"k") is None
    assert store.versions(b"k") == []

    assert store.put(b"k", b"v", older_ts) == tombstone_ts
    assert store.get(b"k") is None
    assert store.get(b"k", older_ts) == rec(b"v", older_ts, tombstone_ts)
    assert store.get(b"k", tombstone_ts) is None
    assert store.versions(b"k") == [rec(b"v", older_ts, tombstone_ts)]


def test_degenerate_row_rewritten_by_inserts(store: VersionedStore) -> None:
    """Inserting around a degenerate tombstone row keeps every valid-to right."""
    assert store.put(b"k", None, 100) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", 50) == 100
    assert store.put(b"k", b"w", 200) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"x", 150) == 200
    assert store.put(b"k", b"y", 120) == 150
    assert store.put(b"k", b"z", 60) == 100
    assert store.put(b"k", None, 90) == 100
    assert store.put(b"k", None, 95) == 100

    assert store.get(b"k", 110) is None
    assert store.get(b"k", 92) is None
    assert store.versions(b"k") == [
        rec(b"w", 200),
        rec(b"x", 150, 200),
        rec(b"y", 120, 150),
        rec(b"z", 60, 90),
        rec(b"v", 50, 60),
    ]


def test_two_degenerate_tombstones(store: VersionedStore) -> None:
    """Two tombstones as the only versions: writes between them get the right valid-to."""
    assert store.put(b"k", None, 100) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, 90) == 100
    assert store.put(b"k", b"v", 95) == 100
    assert store.put(b"k", b"u", 80) == 90
    assert store.get(b"k", 95) == rec(b"v", 95, 100)
    assert store.get(b"k", 85) == rec(b"u", 80, 90)
    assert store.get(b"k", 90) is None


# ============================================================================================
# §E8 moving a version to an older segment when a write splits it


def test_split_moves_version_to_older_segment(store: VersionedStore) -> None:
    """Splitting v [I-10, I+20) at I-5 moves v to segment 0: it expires with segment 0."""
    assert store.put(b"k", b"v", I - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", I + 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"x", I - 5) == I + 20

    assert store.get(b"k", I - 6) == rec(b"v", I - 10, I - 5)
    assert store.get(b"k", I - 5) == rec(b"x", I - 5, I + 20)
    assert store.get(b"k", I + 19) == rec(b"x", I - 5, I + 20)
    expected = [rec(b"w", I + 20), rec(b"x", I - 5, I + 20), rec(b"v", I - 10, I - 5)]
    assert store.versions(b"k") == expected

    # ST - R = I - 1: segment 0 is still live
    assert store.put(b"other", b"o", R + I - 1) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == expected
    # ST - R = I: segment 0 (valid-to in [0, I)) is dropped; x (valid-to I + 20) stays
    assert store.put(b"other", b"o", R + I) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == expected[:2]
    assert store.get(b"k", I) == rec(b"x", I - 5, I + 20)


def test_split_with_tombstone_moves_version_to_older_segment(store: VersionedStore) -> None:
    """A tombstone splitting v [I-10, I+20) gives v valid-to I-5, stored in segment 0."""
    assert store.put(b"k", b"v", I - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, I + 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, I - 5) == I + 20
    assert store.versions(b"k") == [rec(b"v", I - 10, I - 5)]

    assert store.put(b"other", b"o", R + I) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == []
    assert store.put(b"k", b"late", I + 1) == I + 20


def test_split_version_spanning_three_segments(store: VersionedStore) -> None:
    """Splitting v [I-10, 2I+10) at I+5 moves v to segment 1; expiry shows the placement."""
    assert store.put(b"k", b"v", I - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", 2 * I + 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"x", I + 5) == 2 * I + 10
    expected = [rec(b"w", 2 * I + 10), rec(b"x", I + 5, 2 * I + 10), rec(b"v", I - 10, I + 5)]
    assert store.versions(b"k") == expected

    assert store.put(b"other", b"o", R + I) == VALID_TO_UNDEFINED  # drops segment 0
    assert store.versions(b"k") == expected
    assert store.put(b"other", b"o", R + 2 * I) == VALID_TO_UNDEFINED  # drops segment 1
    assert store.versions(b"k") == expected[:2]


# ============================================================================================
# §E9 segment-granular expiry in versions() and the default segment interval


def test_versions_segment_granular_expiry_example(store: VersionedStore) -> None:
    """§E9: v_old@0, v@99 990, ST = 399 990 -> versions(k, 0, 99 990) has v_old and v."""
    assert store.put(b"k", b"v_old", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", 99_990) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"o", 399_990) == VALID_TO_UNDEFINED  # H = 99 990

    both = [rec(b"v", 99_990), rec(b"v_old", 0, 99_990)]
    # v_old's valid-to 99 990 <= H, but its segment 0 is live: no extra valid_to > H filter
    assert store.versions(b"k", 0, 99_990) == both
    assert store.versions(b"k") == both
    assert store.versions(b"k", ascending=True) == both[::-1]
    assert store.versions(b"k", 0, 99_989) == []
    # point reads do not depend on physical presence
    assert store.get(b"k", 0) is None
    assert store.get(b"k", 99_990) == rec(b"v", 99_990)

    assert store.put(b"other", b"o", 399_999) == VALID_TO_UNDEFINED  # H = 99 999, segment 0
    assert store.versions(b"k") == both
    assert store.put(b"other", b"o", 400_000) == VALID_TO_UNDEFINED  # H = 100 000, segment 1
    assert store.versions(b"k") == [rec(b"v", 99_990)]
    assert store.versions(b"k", 0, 100_000) == [rec(b"v", 99_990)]


def test_versions_expiry_with_uneven_interval(make_store: MakeStore, store_kind: str) -> None:
    """R = 10, I = 7: a version leaves versions() when ST - R reaches the next segment's start."""
    store = make_store(history_retention_ms=10, segment_interval_ms=7, kind=store_kind)
    assert store.put(b"k", b"a", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", 5) == VALID_TO_UNDEFINED  # a: valid-to 5, segment 0
    assert store.put(b"k", b"c", 13) == VALID_TO_UNDEFINED  # b: valid-to 13, segment 1
    everything = [rec(b"c", 13), rec(b"b", 5, 13), rec(b"a", 0, 5)]
    assert store.versions(b"k") == everything

    assert store.put(b"o", b"x", 16) == VALID_TO_UNDEFINED  # H = 6, segment 0 live
    assert store.versions(b"k") == everything
    assert store.put(b"o", b"x", 17) == VALID_TO_UNDEFINED  # H = 7, segment 0 dropped
    assert store.versions(b"k") == everything[:2]
    assert store.put(b"o", b"x", 23) == VALID_TO_UNDEFINED  # H = 13, segment 1 live
    assert store.versions(b"k") == everything[:2]
    assert store.put(b"o", b"x", 24) == VALID_TO_UNDEFINED  # H = 14, segment 1 dropped
    assert store.versions(b"k") == everything[:1]
    assert store.get(b"k") == rec(b"c", 13)


DEFAULT_INTERVALS = [
    (0, 2_000),
    (6_000, 2_000),
    (30_000, 10_000),
    (60_000, 20_000),
    (100_000, 20_000),
    (200_000, 40_000),
    (300_000, 60_000),
    (720_000, 60_000),
    (1_200_000, 100_000),
    (3_600_000, 300_000),
    (7_200_000, 300_000),
    (86_400_000, 3_600_000),
]


@pytest.mark.parametrize(("retention", "interval"), DEFAULT_INTERVALS)
def test_default_segment_interval(
    make_store: MakeStore, store_kind: str, retention: int, interval: int
) -> None:
    """segment_interval_ms=None applies Kafka's default rule (§1.5 check list)."""
    store = make_store(history_retention_ms=retention, segment_interval_ms=None, kind=store_kind)
    assert store.history_retention_ms == retention
    assert store.segment_interval_ms == interval


@pytest.mark.parametrize(
    ("retention", "interval"),
    [
        (59_999, 19_999),
        (60_001, 20_000),
        (300_001, 60_000),
        (3_600_001, 300_000),
        (4_000, 2_000),
        (12_000_000, 500_000),
    ],
)
def test_default_segment_interval_between_checks(
    make_store: MakeStore, store_kind: str, retention: int, interval: int
) -> None:
    """The default rule between Kafka's check points (integer division, tier edges)."""
    store = make_store(history_retention_ms=retention, segment_interval_ms=None, kind=store_kind)
    assert store.segment_interval_ms == interval


@pytest.mark.parametrize(("retention", "interval"), DEFAULT_INTERVALS)
def test_default_segment_interval_function(retention: int, interval: int) -> None:
    """verstore.default_segment_interval_ms applies the same rule as the store."""
    assert verstore.default_segment_interval_ms(retention) == interval


def test_default_interval_survives_reopen(make_store: MakeStore, tmp_path: Path) -> None:
    """A store opened with the default interval reopens with the same interval."""
    path = tmp_path / "default"
    store = make_store(path, history_retention_ms=R, segment_interval_ms=None)
    assert store.segment_interval_ms == 60_000
    store.close()
    reopened = make_store(path, history_retention_ms=R, segment_interval_ms=None)
    assert reopened.segment_interval_ms == 60_000


def test_zero_retention_expiry_uses_default_interval(
    make_store: MakeStore, store_kind: str
) -> None:
    """§E13: R = 0, default I = 2 000: old versions stay in versions() until their segment
    drops."""
    store = make_store(history_retention_ms=0, segment_interval_ms=None, kind=store_kind)
    assert store.put(b"k", b"a", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", 20) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == [rec(b"b", 20), rec(b"a", 10, 20)]
    assert store.get(b"k", 15) is None
    assert store.versions(b"k", 0, 15) == []
    assert store.get(b"k", 20) == rec(b"b", 20)

    assert store.put(b"k", b"c", 1_999) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == [rec(b"c", 1_999), rec(b"b", 20, 1_999), rec(b"a", 10, 20)]
    assert store.put(b"k", b"d", 2_000) == VALID_TO_UNDEFINED
    assert store.versions(b"k") == [rec(b"d", 2_000), rec(b"c", 1_999, 2_000)]


# ============================================================================================
# §E10 reopen: data, stream time, grace decisions, history across many segments, replay order


def many_segment_writes(seed: int) -> list[tuple[bytes, bytes | None, int]]:
    """Writes for three keys over 12 segments of 1 000 ms (R = 5 000), partly out of order."""
    rng = random.Random(seed)
    writes: list[tuple[bytes, bytes | None, int]] = []
    for step in range(120):
        base = step * 100
        key = [b"a", b"b", b"c"][step % 3]
        value = None if rng.random() < 0.2 else f"v{step}".encode()
        timestamp = max(0, base - rng.randrange(0, 4_000)) if rng.random() < 0.3 else base
        writes.append((key, value, timestamp))
    return writes


def test_reopen_preserves_history_across_many_segments(
    make_store: MakeStore, tmp_path: Path
) -> None:
    """Reopening gives identical reads, stream time and grace decisions over many segments."""
    path = tmp_path / "many"
    store = make_store(path, history_retention_ms=5_000, segment_interval_ms=1_000)
    for key, value, timestamp in many_segment_writes(seed=1):
        store.put(key, value, timestamp)
    keys = [b"a", b"b", b"c", b"missing"]
    times = list(range(0, 12_500, 97))
    before = read_all(store, keys, times)
    stream_time = store.observed_stream_time
    assert stream_time == max(timestamp for _, _, timestamp in many_segment_writes(seed=1))
    store.close()

    reopened = make_store(path, history_retention_ms=5_000, segment_interval_ms=1_000)
    assert read_all(reopened, keys, times) == before
    assert reopened.put(b"a", b"late", stream_time - 5_001) == NOT_PUT
    assert reopened.delete(b"b", stream_time - 5_001) is None
    assert reopened.put(b"new", b"edge", stream_time - 5_000) == VALID_TO_UNDEFINED
    assert reopened.observed_stream_time == stream_time


def test_reopen_after_every_write_matches_uninterrupted_store(
    make_store: MakeStore, tmp_path: Path
) -> None:
    """Reopening after each write changes no return code and no read."""
    config = {"history_retention_ms": 5_000, "segment_interval_ms": 1_000}
    reference = make_store(**config)
    path = tmp_path / "reopened"
    keys = [b"a", b"b", b"c"]
    for index, (key, value, timestamp) in enumerate(many_segment_writes(seed=2)[:60]):
        reopened = make_store(path, **config)
        if index % 4 == 3:
            deleted = reference.delete(key, timestamp)
            assert reopened.delete(key, timestamp) == deleted
        else:
            code = reference.put(key, value, timestamp)
            assert reopened.put(key, value, timestamp) == code
        reopened.close()
    final = make_store(path, **config)
    times = list(range(0, 7_000, 53))
    assert read_all(final, keys, times) == read_all(reference, keys, times)


def accepted_writes_in_any_order() -> list[tuple[bytes, bytes | None, int]]:
    """Distinct (key, timestamp) writes all within R = 300 000 of the newest one."""
    rng = random.Random(7)
    writes: dict[tuple[bytes, int], bytes | None] = {}
    while len(writes) < 150:
        key = rng.choice([b"a", b"b", b"ab", b""])
        timestamp = rng.randrange(100_000, 400_001)
        value = None if rng.random() < 0.25 else rng.randbytes(rng.randrange(0, 6))
        writes[(key, timestamp)] = value
    writes[(b"a", 400_000)] = b"newest"
    writes[(b"a", 100_000)] = b"oldest"
    return [(key, value, timestamp) for (key, timestamp), value in writes.items()]


def test_replay_in_another_order_gives_same_reads(make_store: MakeStore, store_kind: str) -> None:
    """The same accepted writes applied in three orders give identical reads."""
    writes = accepted_writes_in_any_order()
    orders = [
        sorted(writes, key=lambda w: w[2]),
        sorted(writes, key=lambda w: -w[2]),
        random.Random(3).sample(writes, len(writes)),
    ]
    keys = [b"a", b"b", b"ab", b""]
    times = list(range(99_000, 401_000, 1_999))
    results = []
    for order in orders:
        store = make_store(kind=store_kind)
        for key, value, timestamp in order:
            assert store.put(key, value, timestamp) != NOT_PUT
        results.append(read_all(store, keys, times))
    assert results[0] == results[1]
    assert results[0] == results[2]


def test_replay_in_another_order_with_reopens(make_store: MakeStore, tmp_path: Path) -> None:
    """Replaying in another order, reopening every 25 writes, gives the same reads."""
    writes = accepted_writes_in_any_order()
    keys = [b"a", b"b", b"ab", b""]
    times = list(range(99_000, 401_000, 2_999))
    reference = make_store()
    for key, value, timestamp in sorted(writes, key=lambda w: w[2]):
        reference.put(key, value, timestamp)

    path = tmp_path / "replay"
    store = make_store(path)
    for index, (key, value, timestamp) in enumerate(random.Random(5).sample(writes, len(writes))):
        if index % 25 == 24:
            store.close()
            store = make_store(path)
        assert store.put(key, value, timestamp) != NOT_PUT
    assert read_all(store, keys, times) == read_all(reference, keys, times)


# ============================================================================================
# §E11 keys that are prefixes of each other, binary keys, the empty key


def test_prefix_keys_are_independent(store: VersionedStore) -> None:
    """Keys that are prefixes of one another never see each other's versions."""
    keys = [b"", b"a", b"ab", b"abc", b"a\x00", b"a\x00\x00", b"b"]
    for index, key in enumerate(keys):
        assert store.put(key, b"first-" + key, 10 + index) == VALID_TO_UNDEFINED
        assert store.put(key, b"second-" + key, I + 10 + index) == VALID_TO_UNDEFINED

    for index, key in enumerate(keys):
        assert store.get(key) == rec(b"second-" + key, I + 10 + index)
        assert store.versions(key) == [
            rec(b"second-" + key, I + 10 + index),
            rec(b"first-" + key, 10 + index, I + 10 + index),
        ]

    assert store.delete(b"ab", I + 50) == rec(b"second-ab", I + 12)
    assert store.get(b"ab") is None
    for index, key in enumerate(keys):
        if key != b"ab":
            assert store.get(key) == rec(b"second-" + key, I + 10 + index)


BINARY_KEYS = [
    b"\x00",
    b"\x00" * 8,
    b"\x00" * 9,
    b"\xff",
    b"\xff" * 8,  # the latest-value store's segment prefix in Kafka's layout
    b"\xff" * 8 + b"k",
    (1).to_bytes(8, "big") + b"k",  # looks like "segment 1 || k"
    b"k",
    bytes(range(256)),
    b"\x80\x00\x7f",
]


def test_binary_keys_and_values(store: VersionedStore) -> None:
    """Arbitrary bytes (NUL, 0xFF runs, segment-prefix look-alikes) round-trip as keys/values."""
    for index, key in enumerate(BINARY_KEYS):
        value = bytes(reversed(key)) + b"\x00\xff"
        assert store.put(key, value, 5 + index) == VALID_TO_UNDEFINED
        assert store.put(key, b"\x00", I + 5 + index) == VALID_TO_UNDEFINED

    for index, key in enumerate(BINARY_KEYS):
        old = rec(bytes(reversed(key)) + b"\x00\xff", 5 + index, I + 5 + index)
        assert store.get(key) == rec(b"\x00", I + 5 + index)
        assert store.get(key, I) == old
        assert store.versions(key) == [rec(b"\x00", I + 5 + index), old]
    assert batch_values(store.get_batch(BINARY_KEYS, I)) == [
        bytes(reversed(key)) + b"\x00\xff" for key in BINARY_KEYS
    ]


def batch_values(batch: pa.RecordBatch) -> list[bytes | None]:
    """The value column of a get_batch result."""
    values: list[bytes | None] = batch.column("value").to_pylist()
    return values


def test_empty_key(store: VersionedStore) -> None:
    """b"" is a legal key, distinct from b"\\x00", in single and batch calls."""
    assert store.put(b"", b"empty-key", 10) == VALID_TO_UNDEFINED
    assert store.put(b"\x00", b"nul-key", 10) == VALID_TO_UNDEFINED
    assert store.put(b"", b"", 20) == VALID_TO_UNDEFINED

    assert store.get(b"") == rec(b"", 20)
    assert store.get(b"", 15) == rec(b"empty-key", 10, 20)
    assert store.get(b"\x00") == rec(b"nul-key", 10)
    assert store.versions(b"") == [rec(b"", 20), rec(b"empty-key", 10, 20)]
    assert batch_values(store.get_batch([b"", b"\x00"], 15)) == [b"empty-key", b"nul-key"]

    assert store.delete(b"", 30) == rec(b"", 20)
    assert store.get(b"") is None
    assert store.get(b"\x00") == rec(b"nul-key", 10)
    assert store.put_batch([b""], [b"again"], [40]).to_pylist() == [VALID_TO_UNDEFINED]
    assert store.get(b"") == rec(b"again", 40)


def test_large_keys_and_values(store: VersionedStore) -> None:
    """A 64 KiB key and a 4 MiB value round-trip through rows and the latest store."""
    key = bytes(range(256)) * 256
    big = random.Random(11).randbytes(4 * 1024 * 1024)
    assert store.put(key, big, 10) == VALID_TO_UNDEFINED
    assert store.put(key, b"small", I + 10) == VALID_TO_UNDEFINED
    assert store.get(key, 10) == rec(big, 10, I + 10)
    assert store.get(key[:-1]) is None


def test_prefix_keys_survive_reopen(make_store: MakeStore, tmp_path: Path) -> None:
    """Prefix, binary and empty keys stay distinct after a reopen."""
    path = tmp_path / "keys"
    store = make_store(path)
    keys = [b"", b"a", b"ab", *BINARY_KEYS]
    for index, key in enumerate(keys):
        store.put(key, key + b"!", 10 + index)
        store.put(key, None, I + 10 + index)
    store.close()

    reopened = make_store(path)
    for index, key in enumerate(keys):
        assert reopened.get(key) is None
        assert reopened.versions(key) == [rec(key + b"!", 10 + index, I + 10 + index)]


# ============================================================================================
# §E12 negative timestamps, null / non-bytes keys and values, from > to, bad config
# (the full table is in test_bad_input.py; these are the representative cases)


def test_negative_write_timestamp_rejected(store: VersionedStore) -> None:
    """A negative put/delete timestamp raises ValueError naming it (§Q5) and writes nothing."""
    with pytest.raises(ValueError, match="timestamp"):
        store.put(b"k", b"v", -1)
    with pytest.raises(ValueError, match="timestamp"):
        store.delete(b"k", -1)
    assert store.get(b"k") is None
    assert store.observed_stream_time == -1


def test_null_and_non_bytes_key_and_value_rejected(store: VersionedStore) -> None:
    """None / str keys and str values raise TypeError naming the argument."""
    with pytest.raises(TypeError, match="key"):
        store.put(None, b"v", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        store.get("k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value"):
        store.put(b"k", "v", 1)  # type: ignore[arg-type]
    assert store.observed_stream_time == -1


def test_from_time_greater_than_to_time_rejected(store: VersionedStore) -> None:
    """versions(k, 5, 3) raises ValueError; from_time == to_time is allowed."""
    store.put(b"k", b"v", 4)
    with pytest.raises(ValueError, match="from_time"):
        store.versions(b"k", 5, 3)
    assert store.versions(b"k", 4, 4) == [rec(b"v", 4)]


def test_bad_config_rejected(tmp_path: Path) -> None:
    """Negative retention and segment interval < 1 raise ValueError naming the argument."""
    with pytest.raises(ValueError, match="history_retention_ms"):
        VersionedStore.in_memory(history_retention_ms=-1)
    with pytest.raises(ValueError, match="segment_interval_ms"):
        VersionedStore(tmp_path / "s", history_retention_ms=1, segment_interval_ms=0)


def test_negative_as_of_returns_none(store: VersionedStore) -> None:
    """get(k, as_of < 0) returns None (§2.3, §Q5), with or without data."""
    assert store.get(b"k", -1) is None
    store.put(b"k", b"v", 0)
    assert store.get(b"k", -1) is None
    assert store.get(b"k", -(2**63)) is None
    assert store.get(b"k", 0) == rec(b"v", 0)
    assert store.get(b"k", 2**63 - 1) == rec(b"v", 0)
    assert store.get_batch([b"k", b"k"], [-5, 0]).column("timestamp").to_pylist() == [None, 0]


def test_versions_accepts_negative_bounds(store: VersionedStore) -> None:
    """versions() bounds may be negative (from = MIN is the default)."""
    store.put(b"k", b"v0", 0)
    store.put(b"k", b"v1", 10)
    assert store.versions(b"k", -100, -1) == []
    assert store.versions(b"k", -(2**63), -1) == []
    assert store.versions(b"k", -100, 0) == [rec(b"v0", 0, 10)]
    assert store.versions(b"k", -(2**63), 2**63 - 1) == [rec(b"v1", 10), rec(b"v0", 0, 10)]
    assert store.versions(b"k", None, -1) == []
    assert store.versions(b"k", -1, None, ascending=True) == [rec(b"v0", 0, 10), rec(b"v1", 10)]


def test_timestamp_zero_is_valid(store: VersionedStore) -> None:
    """0 is the smallest legal write timestamp, for put and delete."""
    assert store.put(b"k", b"v", 0) == VALID_TO_UNDEFINED
    assert store.delete(b"j", 0) is None
    assert store.put(b"j", b"w", 0) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"v", 0)
    assert store.observed_stream_time == 0


# ============================================================================================
# VersionedRecord (§Q3: equality by all three fields)


def test_versioned_record_equality_and_repr() -> None:
    """Q3: records are equal iff value, timestamp and valid_to are; repr names the fields."""
    a = rec(b"v", 1, 5)
    assert a == rec(b"v", 1, 5)
    assert a != rec(b"v", 1, None)
    assert a != rec(b"v", 1, 6)
    assert a != rec(b"w", 1, 5)
    assert a != rec(b"v", 2, 5)
    assert (a.value, a.timestamp, a.valid_to) == (b"v", 1, 5)
    assert rec(b"v", 1).valid_to is None
    text = repr(a)
    assert "VersionedRecord" in text
    assert "timestamp" in text
    assert "valid_to" in text


def test_versioned_record_is_immutable() -> None:
    """VersionedRecord attributes cannot be reassigned."""
    a = rec(b"v", 1, 5)
    with pytest.raises(AttributeError):
        a.value = b"w"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.timestamp = 2  # type: ignore[misc]
    assert a == rec(b"v", 1, 5)


def test_error_hierarchy() -> None:
    """Every verstore error derives from VerstoreError."""
    for error in (
        verstore.StoreClosedError,
        verstore.StoreLockedError,
        verstore.IncompatibleConfigError,
        verstore.CorruptionError,
        verstore.StorageError,
    ):
        assert issubclass(error, verstore.VerstoreError)
    assert issubclass(verstore.VerstoreError, Exception)


# ============================================================================================
# the largest time, 2**63 - 1 (a write there keeps the key readable), and the int64 bounds

MAX = 2**63 - 1


@pytest.fixture(params=["memory", "rocksdb"])
def small_store(request: pytest.FixtureRequest, tmp_path: Path) -> verstore.VersionedStore:
    """A store of each kind with a history retention of 1 s."""
    if request.param == "memory":
        return verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    return verstore.VersionedStore(tmp_path / "store", history_retention_ms=1_000)


def test_delete_at_the_largest_time_keeps_the_key_readable(
    small_store: verstore.VersionedStore,
) -> None:
    store = small_store
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


def test_times_at_the_int64_bounds_are_accepted_where_valid() -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    assert store.get(b"k", as_of=-(2**63)) is None
    assert store.versions(b"k", from_time=-(2**63), to_time=MAX) == []
    with pytest.raises(ValueError, match=">= 0"):
        store.put(b"k", b"v", -(2**63))
    codes = store.put_batch(pa.array([b"a", b"b"]), pa.array([b"1", b"2"]), pa.array([0, MAX]))
    assert codes.to_pylist() == [-1, -1]
