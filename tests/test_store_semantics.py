"""Port of Kafka's ``RocksDBVersionedStoreTest`` store-semantics cases to the Python API.

Kafka's constants are kept: history retention (= grace period) 300 000 ms, segment interval
``HISTORY_RETENTION / 3`` = 100 000 ms, base timestamp 10. Kafka's ``ResultOrder.ANY`` is
newest-first, which is verstore's default order; every multi-version query is also checked in
ascending order. Kafka's restore cases (``restoreBatch``) are ported to ``put_batch``, which is
specified as "``put`` row by row", and to reopening a persistent store. Every test runs against
the persistent store and the in-memory variant, except the reopen tests (persistent only).

See docs/semantics.md §2 (operations), §3 (put algorithm), §5 (segment expiry).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
import verstore
from verstore import NOT_PUT, VALID_TO_UNDEFINED, VersionedRecord, VersionedStore

MakeStore = Callable[..., VersionedStore]

HISTORY_RETENTION = 300_000
GRACE_PERIOD = HISTORY_RETENTION  # the grace period is the history retention
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
BASE_TIMESTAMP = 10
SI = SEGMENT_INTERVAL


def rec(value: bytes, timestamp: int, valid_to: int | None = None) -> VersionedRecord:
    """The expected record; ``valid_to=None`` means the latest version."""
    return VersionedRecord(value=value, timestamp=timestamp, valid_to=valid_to)


def assert_versions(
    store: VersionedStore,
    key: bytes,
    from_time: int | None,
    to_time: int | None,
    newest_first: list[VersionedRecord],
) -> None:
    """``versions()`` returns ``newest_first`` by default and its reverse with ascending=True."""
    assert store.versions(key, from_time, to_time) == newest_first
    assert store.versions(key, from_time, to_time, ascending=False) == newest_first
    assert store.versions(key, from_time, to_time, ascending=True) == newest_first[::-1]


def batch_rows(batch: pa.RecordBatch) -> list[VersionedRecord | None]:
    """The rows of a get_batch / delete_batch result as records (None for an all-null row)."""
    columns = batch.to_pydict()
    rows: list[VersionedRecord | None] = []
    for value, timestamp, valid_to in zip(
        columns["value"], columns["timestamp"], columns["valid_to"], strict=True
    ):
        if timestamp is None:
            assert value is None
            assert valid_to is None
            rows.append(None)
        else:
            rows.append(rec(value, timestamp, valid_to))
    return rows


# --------------------------------------------------------------------------------------------
# configuration


def test_store_uses_kafka_test_configuration(store: VersionedStore) -> None:
    """The shared fixture has Kafka's test configuration and starts with no stream time."""
    assert store.history_retention_ms == HISTORY_RETENTION
    assert store.segment_interval_ms == SEGMENT_INTERVAL
    assert store.observed_stream_time == -1


def test_return_code_constants() -> None:
    """The two named put() return codes are Kafka's."""
    assert verstore.VALID_TO_UNDEFINED == -1
    assert verstore.NOT_PUT == -(2**63)


# --------------------------------------------------------------------------------------------
# put: new latest, replace latest, out-of-order, replace older


def test_put_latest(store: VersionedStore) -> None:
    """shouldPutLatest: in-order puts return VALID_TO_UNDEFINED; older versions get a valid-to."""
    assert store.put(b"k", b"v", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", BASE_TIMESTAMP + 1) == VALID_TO_UNDEFINED

    assert store.get(b"k") == rec(b"v2", BASE_TIMESTAMP + 1)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"v", BASE_TIMESTAMP, BASE_TIMESTAMP + 1)
    assert store.get(b"k", BASE_TIMESTAMP + 1) == rec(b"v2", BASE_TIMESTAMP + 1)
    assert store.get(b"k", BASE_TIMESTAMP + 2) == rec(b"v2", BASE_TIMESTAMP + 1)


def test_put_null_as_latest(store: VersionedStore) -> None:
    """shouldPutNullAsLatest: tombstones as newest versions return VALID_TO_UNDEFINED, read None."""
    assert store.put(b"k", None, BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, BASE_TIMESTAMP + 1) == VALID_TO_UNDEFINED

    assert store.get(b"k") is None
    assert store.get(b"k", BASE_TIMESTAMP) is None
    assert store.get(b"k", BASE_TIMESTAMP + 1) is None
    assert store.get(b"k", BASE_TIMESTAMP + 2) is None
    assert store.versions(b"k") == []


def test_put_older_with_non_null_latest(store: VersionedStore) -> None:
    """shouldPutOlderWithNonNullLatest: out-of-order puts return the next newer timestamp."""
    assert store.put(b"k", b"v", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", BASE_TIMESTAMP - 2) == BASE_TIMESTAMP
    assert store.put(b"k", b"v1", BASE_TIMESTAMP - 1) == BASE_TIMESTAMP
    assert store.put(b"k", b"v4", BASE_TIMESTAMP - 4) == BASE_TIMESTAMP - 2

    assert store.get(b"k") == rec(b"v", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"v", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 1) == rec(b"v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 2) == rec(b"v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP - 1)
    assert store.get(b"k", BASE_TIMESTAMP - 3) == rec(b"v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)
    assert store.get(b"k", BASE_TIMESTAMP - 5) is None


def test_put_older_with_null_latest(store: VersionedStore) -> None:
    """shouldPutOlderWithNullLatest: a newest tombstone bounds the out-of-order versions."""
    assert store.put(b"k", None, BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", BASE_TIMESTAMP - 2) == BASE_TIMESTAMP
    assert store.put(b"k", b"v1", BASE_TIMESTAMP - 1) == BASE_TIMESTAMP
    assert store.put(b"k", b"v4", BASE_TIMESTAMP - 4) == BASE_TIMESTAMP - 2

    assert store.get(b"k") is None
    assert store.get(b"k", BASE_TIMESTAMP) is None
    assert store.get(b"k", BASE_TIMESTAMP - 1) == rec(b"v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 2) == rec(b"v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP - 1)
    assert store.get(b"k", BASE_TIMESTAMP - 3) == rec(b"v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)


def test_put_older_null_with_non_null_latest(store: VersionedStore) -> None:
    """shouldPutOlderNullWithNonNullLatest: out-of-order tombstones and values interleave."""
    assert store.put(b"k", b"v", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, BASE_TIMESTAMP - 2) == BASE_TIMESTAMP
    assert store.put(b"k", None, BASE_TIMESTAMP - 1) == BASE_TIMESTAMP
    assert store.put(b"k", None, BASE_TIMESTAMP - 4) == BASE_TIMESTAMP - 2
    assert store.put(b"k", b"v5", BASE_TIMESTAMP - 5) == BASE_TIMESTAMP - 4
    assert store.put(b"k", b"v3", BASE_TIMESTAMP - 3) == BASE_TIMESTAMP - 2
    assert store.put(b"k", None, BASE_TIMESTAMP - 6) == BASE_TIMESTAMP - 5

    assert store.get(b"k") == rec(b"v", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"v", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None
    assert store.get(b"k", BASE_TIMESTAMP - 2) is None
    assert store.get(b"k", BASE_TIMESTAMP - 3) == rec(b"v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2)
    assert store.get(b"k", BASE_TIMESTAMP - 4) is None
    assert store.get(b"k", BASE_TIMESTAMP - 5) == rec(b"v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4)
    assert store.get(b"k", BASE_TIMESTAMP - 6) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [
            rec(b"v", BASE_TIMESTAMP),
            rec(b"v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2),
            rec(b"v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4),
        ],
    )


def test_put_older_null_with_null_latest(store: VersionedStore) -> None:
    """shouldPutOlderNullWithNullLatest: only tombstones newer than the out-of-order values."""
    assert store.put(b"k", None, BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, BASE_TIMESTAMP - 2) == BASE_TIMESTAMP
    assert store.put(b"k", None, BASE_TIMESTAMP - 1) == BASE_TIMESTAMP
    assert store.put(b"k", None, BASE_TIMESTAMP - 4) == BASE_TIMESTAMP - 2
    assert store.put(b"k", b"v3", BASE_TIMESTAMP - 3) == BASE_TIMESTAMP - 2
    assert store.put(b"k", b"v5", BASE_TIMESTAMP - 5) == BASE_TIMESTAMP - 4
    assert store.put(b"k", None, BASE_TIMESTAMP - 6) == BASE_TIMESTAMP - 5

    assert store.get(b"k") is None
    assert store.get(b"k", BASE_TIMESTAMP) is None
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None
    assert store.get(b"k", BASE_TIMESTAMP - 2) is None
    assert store.get(b"k", BASE_TIMESTAMP - 3) == rec(b"v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2)
    assert store.get(b"k", BASE_TIMESTAMP - 4) is None
    assert store.get(b"k", BASE_TIMESTAMP - 5) == rec(b"v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4)
    assert store.get(b"k", BASE_TIMESTAMP - 6) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [
            rec(b"v3", BASE_TIMESTAMP - 3, BASE_TIMESTAMP - 2),
            rec(b"v5", BASE_TIMESTAMP - 5, BASE_TIMESTAMP - 4),
        ],
    )


# --------------------------------------------------------------------------------------------
# repeated timestamps


def test_put_repeat_timestamp_as_latest(store: VersionedStore) -> None:
    """shouldPutRepeatTimestampAsLatest: rewriting the newest timestamp replaces it (-1 each)."""
    assert store.put(b"k", b"to_be_replaced", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"b", BASE_TIMESTAMP) == VALID_TO_UNDEFINED

    assert store.get(b"k") == rec(b"b", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"b", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None

    assert store.put(b"k", None, BASE_TIMESTAMP) == VALID_TO_UNDEFINED

    assert store.get(b"k") is None
    assert store.get(b"k", BASE_TIMESTAMP) is None
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None

    assert store.put(b"k", None, BASE_TIMESTAMP) == VALID_TO_UNDEFINED

    assert store.get(b"k") is None
    assert store.get(b"k", BASE_TIMESTAMP) is None
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None

    assert store.put(b"k", b"b", BASE_TIMESTAMP) == VALID_TO_UNDEFINED

    assert store.get(b"k") == rec(b"b", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"b", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP - 1) is None
    assert_versions(store, b"k", None, None, [rec(b"b", BASE_TIMESTAMP)])


# The writes of Kafka's shouldPutRepeatTimestamps / shouldRestoreWithNullsAndRepeatTimestamps:
# (value, timestamp, expected put() return code).
REPEAT_TIMESTAMP_WRITES: list[tuple[bytes | None, int, int]] = [
    (b"to_be_replaced", SI + 20, VALID_TO_UNDEFINED),
    (None, SI - 10, SI + 20),
    # replace existing null with non-null, with timestamps spanning segments
    (b"to_be_replaced", SI - 10, SI + 20),
    # replace existing non-null with null
    (None, SI - 10, SI + 20),
    (b"to_be_replaced", SI - 1, SI + 20),
    (b"to_be_replaced", SI + 1, SI + 20),
    # replace existing non-null with null
    (None, SI - 1, SI + 1),
    # replace existing non-null with null, with timestamps spanning segments
    (None, SI + 1, SI + 20),
    (None, SI + 10, SI + 20),
    (None, SI + 5, SI + 10),
    # replace existing null with non-null
    (b"vp5", SI + 5, SI + 10),
    (b"to_be_replaced", SI - 5, SI - 1),
    # replace existing non-null with non-null
    (b"vn5", SI - 5, SI - 1),
    # replace existing non-null (latest value) with null
    (None, SI + 20, VALID_TO_UNDEFINED),
    # replace existing null with null
    (None, SI + 20, VALID_TO_UNDEFINED),
    (b"vn6", SI - 6, SI - 5),
]


def verify_repeat_timestamps_state(store: VersionedStore) -> None:
    """The reads Kafka checks after the repeat-timestamp writes."""
    assert store.get(b"k") is None
    assert store.get(b"k", SI + 30) is None
    assert store.get(b"k", SI + 15) is None
    assert store.get(b"k", SI + 6) == rec(b"vp5", SI + 5, SI + 10)
    assert store.get(b"k", SI + 2) is None
    assert store.get(b"k", SI) is None
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 5) == rec(b"vn5", SI - 5, SI - 1)
    assert store.get(b"k", SI - 6) == rec(b"vn6", SI - 6, SI - 5)
    assert store.get(b"k", SI - 8) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [rec(b"vp5", SI + 5, SI + 10), rec(b"vn5", SI - 5, SI - 1), rec(b"vn6", SI - 6, SI - 5)],
    )


def test_put_repeat_timestamps(store: VersionedStore) -> None:
    """shouldPutRepeatTimestamps: replacing a version at its own timestamp returns its valid-to."""
    for value, timestamp, expected in REPEAT_TIMESTAMP_WRITES:
        assert store.put(b"k", value, timestamp) == expected, (value, timestamp)

    verify_repeat_timestamps_state(store)
    assert store.observed_stream_time == SI + 20


# --------------------------------------------------------------------------------------------
# segment boundaries


def test_put_into_multiple_segments(store: VersionedStore) -> None:
    """shouldPutIntoMultipleSegments: in-order values and tombstones across a segment boundary."""
    assert store.put(b"k", None, SI - 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"vn10", SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI - 1) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI + 1) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"vp10", SI + 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI + 20) == VALID_TO_UNDEFINED

    verify_multiple_segments_state(store)


def verify_multiple_segments_state(store: VersionedStore) -> None:
    """The reads Kafka checks after shouldPutIntoMultipleSegments' writes."""
    assert store.get(b"k") is None
    assert store.get(b"k", SI + 30) is None
    assert store.get(b"k", SI + 15) == rec(b"vp10", SI + 10, SI + 20)
    assert store.get(b"k", SI + 5) is None
    assert store.get(b"k", SI + 2) is None
    assert store.get(b"k", SI) is None
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 5) == rec(b"vn10", SI - 10, SI - 1)
    assert store.get(b"k", SI - 15) is None
    assert_versions(
        store, b"k", None, None, [rec(b"vp10", SI + 10, SI + 20), rec(b"vn10", SI - 10, SI - 1)]
    )


# The writes of shouldMoveRecordToOlderSegmentDuringPut / shouldRestore:
# (value, timestamp, expected put() return code).
MOVE_TO_OLDER_SEGMENT_WRITES: list[tuple[bytes | None, int, int]] = [
    (b"vp20", SI + 20, VALID_TO_UNDEFINED),
    (b"vp10", SI + 10, SI + 20),
    (b"vn10", SI - 10, SI + 10),
    (b"vn2", SI - 2, SI + 10),
    (b"vn1", SI - 1, SI + 10),
    (b"vp1", SI + 1, SI + 10),
]


def verify_move_to_older_segment_state(store: VersionedStore) -> None:
    """The reads Kafka checks after shouldMoveRecordToOlderSegmentDuringPut's writes."""
    assert store.get(b"k") == rec(b"vp20", SI + 20)
    assert store.get(b"k", SI + 30) == rec(b"vp20", SI + 20)
    assert store.get(b"k", SI + 15) == rec(b"vp10", SI + 10, SI + 20)
    assert store.get(b"k", SI + 5) == rec(b"vp1", SI + 1, SI + 10)
    assert store.get(b"k", SI) == rec(b"vn1", SI - 1, SI + 1)
    assert store.get(b"k", SI - 1) == rec(b"vn1", SI - 1, SI + 1)
    assert store.get(b"k", SI - 2) == rec(b"vn2", SI - 2, SI - 1)
    assert store.get(b"k", SI - 5) == rec(b"vn10", SI - 10, SI - 2)
    assert store.get(b"k", SI - 11) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [
            rec(b"vp20", SI + 20),
            rec(b"vp10", SI + 10, SI + 20),
            rec(b"vp1", SI + 1, SI + 10),
            rec(b"vn1", SI - 1, SI + 1),
            rec(b"vn2", SI - 2, SI - 1),
            rec(b"vn10", SI - 10, SI - 2),
        ],
    )


def test_move_record_to_older_segment_during_put(store: VersionedStore) -> None:
    """shouldMoveRecordToOlderSegmentDuringPut: splitting a version that spans two segments."""
    for value, timestamp, expected in MOVE_TO_OLDER_SEGMENT_WRITES:
        assert store.put(b"k", value, timestamp) == expected, (value, timestamp)

    verify_move_to_older_segment_state(store)


# The writes of shouldMoveRecordToOlderSegmentWithNullsDuringPut / shouldRestoreWithNulls.
MOVE_WITH_NULLS_WRITES: list[tuple[bytes | None, int, int]] = [
    (None, SI + 20, VALID_TO_UNDEFINED),
    (None, SI - 1, SI + 20),
    (None, SI + 1, SI + 20),
    (None, SI - 10, SI - 1),
    (None, SI + 10, SI + 20),
    (b"vp5", SI + 5, SI + 10),
    (b"vn5", SI - 5, SI - 1),
    (b"vn6", SI - 6, SI - 5),
]


def verify_move_with_nulls_state(store: VersionedStore) -> None:
    """The reads Kafka checks after shouldMoveRecordToOlderSegmentWithNullsDuringPut's writes."""
    assert store.get(b"k") is None
    assert store.get(b"k", SI + 30) is None
    assert store.get(b"k", SI + 15) is None
    assert store.get(b"k", SI + 6) == rec(b"vp5", SI + 5, SI + 10)
    assert store.get(b"k", SI + 2) is None
    assert store.get(b"k", SI) is None
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 5) == rec(b"vn5", SI - 5, SI - 1)
    assert store.get(b"k", SI - 6) == rec(b"vn6", SI - 6, SI - 5)
    assert store.get(b"k", SI - 8) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [rec(b"vp5", SI + 5, SI + 10), rec(b"vn5", SI - 5, SI - 1), rec(b"vn6", SI - 6, SI - 5)],
    )


def test_move_record_to_older_segment_with_nulls_during_put(store: VersionedStore) -> None:
    """shouldMoveRecordToOlderSegmentWithNullsDuringPut: tombstones spanning two segments."""
    for value, timestamp, expected in MOVE_WITH_NULLS_WRITES:
        assert store.put(b"k", value, timestamp) == expected, (value, timestamp)

    verify_move_with_nulls_state(store)


def test_fall_through_to_existing_older_segment_as_latest_during_put(
    store: VersionedStore,
) -> None:
    """shouldFallThroughToExistingOlderSegmentAsLatestDuringPut: writes behind a tombstone row."""
    assert store.put(b"k", None, SI - 5) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"vn6", SI - 6) == SI - 5
    assert store.put(b"k", b"vp20", SI + 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI + 10) == SI + 20
    assert store.put(b"k", None, SI - 1) == SI + 10
    assert store.put(b"k", b"vn2", SI - 2) == SI - 1

    assert store.get(b"k") == rec(b"vp20", SI + 20)
    assert store.get(b"k", SI + 30) == rec(b"vp20", SI + 20)
    assert store.get(b"k", SI + 12) is None
    assert store.get(b"k", SI) is None
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 2) == rec(b"vn2", SI - 2, SI - 1)
    assert store.get(b"k", SI - 5) is None
    assert store.get(b"k", SI - 6) == rec(b"vn6", SI - 6, SI - 5)
    assert_versions(
        store,
        b"k",
        None,
        None,
        [rec(b"vp20", SI + 20), rec(b"vn2", SI - 2, SI - 1), rec(b"vn6", SI - 6, SI - 5)],
    )


def test_put_non_latest_tombstone_into_new_segment_with_valid_to(store: VersionedStore) -> None:
    """shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo: an old tombstone gets a valid-to."""
    assert store.put(b"k", b"vp30", SI + 30) == VALID_TO_UNDEFINED
    # this put results in a tombstone with valid-to SI + 30
    assert store.put(b"k", None, SI - 10) == SI + 30
    assert store.put(b"k", b"vn5", SI - 5) == SI + 30
    assert store.put(b"k", b"vn1", SI - 1) == SI + 30
    assert store.put(b"k", None, SI - 2) == SI - 1

    assert store.get(b"k") == rec(b"vp30", SI + 30)
    assert store.get(b"k", SI + 10) == rec(b"vn1", SI - 1, SI + 30)
    assert store.get(b"k", SI - 1) == rec(b"vn1", SI - 1, SI + 30)
    assert store.get(b"k", SI - 2) is None
    assert store.get(b"k", SI - 5) == rec(b"vn5", SI - 5, SI - 2)
    assert store.get(b"k", SI - 10) is None


# --------------------------------------------------------------------------------------------
# delete


def test_delete(store: VersionedStore) -> None:
    """shouldDelete: delete returns the pre-delete record valid at its timestamp (old valid-to)."""
    assert store.put(b"k", b"vp20", SI + 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"vp10", SI + 10) == SI + 20
    assert store.put(b"k", b"vn10", SI - 10) == SI + 10
    assert store.put(b"k", b"vn2", SI - 2) == SI + 10

    # delete from segment
    assert store.delete(b"k", SI - 5) == rec(b"vn10", SI - 10, SI - 2)
    # delete an existing timestamp
    assert store.delete(b"k", SI + 10) == rec(b"vp10", SI + 10, SI + 20)
    # delete the same timestamp again
    assert store.delete(b"k", SI + 10) is None
    # delete from the latest value store: the returned record had no valid-to
    assert store.delete(b"k", SI + 25) == rec(b"vp20", SI + 20)

    assert store.get(b"k") is None
    assert store.get(b"k", SI - 6) == rec(b"vn10", SI - 10, SI - 5)
    assert store.get(b"k", SI - 5) is None
    assert store.get(b"k", SI - 2) == rec(b"vn2", SI - 2, SI + 10)
    assert store.get(b"k", SI + 10) is None
    assert store.get(b"k", SI + 20) == rec(b"vp20", SI + 20, SI + 25)
    assert store.get(b"k", SI + 25) is None
    assert store.observed_stream_time == SI + 25


# --------------------------------------------------------------------------------------------
# expiry (grace period = history retention)


def test_not_put_expired(store: VersionedStore) -> None:
    """shouldNotPutExpired: ts == ST - G is accepted, ts == ST - G - 1 returns NOT_PUT."""
    assert store.put(b"k", b"v", HISTORY_RETENTION + 10) == VALID_TO_UNDEFINED

    # grace period has not elapsed
    assert store.put(b"k1", b"v1", HISTORY_RETENTION + 10 - GRACE_PERIOD) == VALID_TO_UNDEFINED
    assert store.get(b"k1") == rec(b"v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)

    # grace period has elapsed, so this put does not take place
    assert store.put(b"k2", b"v2", HISTORY_RETENTION + 9 - GRACE_PERIOD) == NOT_PUT
    assert store.get(b"k2") is None
    assert store.versions(b"k2") == []
    assert store.observed_stream_time == HISTORY_RETENTION + 10


def test_not_delete_expired(store: VersionedStore) -> None:
    """shouldNotDeleteExpired: an expired delete returns None and leaves the record in place."""
    assert store.put(b"k1", b"v1", 1) == VALID_TO_UNDEFINED
    assert store.put(b"k2", b"v2", 1) == VALID_TO_UNDEFINED
    # use a separate key to advance stream time
    assert store.put(b"kother", b"vother", HISTORY_RETENTION + 10) == VALID_TO_UNDEFINED

    # grace period has not elapsed
    assert store.delete(b"k1", HISTORY_RETENTION + 10 - GRACE_PERIOD) == rec(b"v1", 1)
    assert store.get(b"k1") is None

    # grace period has elapsed: returns None although the record exists, nothing is deleted
    assert store.delete(b"k2", HISTORY_RETENTION + 9 - GRACE_PERIOD) is None
    assert store.get(b"k2") == rec(b"v2", 1)
    assert store.observed_stream_time == HISTORY_RETENTION + 10


def test_get_from_older_segments(store: VersionedStore) -> None:
    """shouldGetFromOlderSegments: point reads across several segments of other keys."""
    # use a different key to create three different segments
    assert store.put(b"ko", None, SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"ko", None, 2 * SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"ko", None, 3 * SI - 10) == VALID_TO_UNDEFINED

    # return null after visiting all segments
    assert store.get(b"k", SI - 20) is None

    # insert data to create a non-empty (first) segment
    assert store.put(b"k", b"v", SI - 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI - 10) == VALID_TO_UNDEFINED

    assert store.get(b"k", SI - 30) is None
    assert store.get(b"k", SI - 15) == rec(b"v", SI - 20, SI - 10)
    assert store.get(b"k", SI - 5) is None

    # insert data to create a non-empty (third) segment
    assert store.put(b"k", b"v2", 3 * SI - 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, 3 * SI - 10) == VALID_TO_UNDEFINED

    # a non-empty later segment does not affect reads from the earlier segment
    assert store.get(b"k", SI - 30) is None
    assert store.get(b"k", SI - 15) == rec(b"v", SI - 20, SI - 10)
    assert store.get(b"k", SI - 5) is None
    assert store.get(b"k", 3 * SI - 15) == rec(b"v2", 3 * SI - 20, 3 * SI - 10)


def test_not_get_expired(store: VersionedStore) -> None:
    """shouldNotGetExpired: get(as_of) returns None once as_of < ST - R, exactly at the boundary."""
    assert store.put(b"k", b"v_old", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", SI - 10) == VALID_TO_UNDEFINED

    # old record has not yet expired
    assert store.get(b"k", SI - 11) == rec(b"v_old", 0, SI - 10)

    assert store.put(b"ko", b"vo", HISTORY_RETENTION + SI - 11) == VALID_TO_UNDEFINED

    # old record still has not yet expired (as_of == ST - R)
    assert store.get(b"k", SI - 11) == rec(b"v_old", 0, SI - 10)

    assert store.put(b"ko", b"vo2", HISTORY_RETENTION + SI - 10) == VALID_TO_UNDEFINED

    # old record is expired now (as_of == ST - R - 1)
    assert store.get(b"k", SI - 11) is None
    assert store.get(b"k", SI - 10) == rec(b"v", SI - 10)


def test_get_expired_if_latest_value(store: VersionedStore) -> None:
    """shouldGetExpiredIfLatestValue: an expired as_of still sees a qualifying latest value."""
    assert store.put(b"k", b"v", 1) == VALID_TO_UNDEFINED
    assert store.put(b"ko", b"vo_old", 1) == VALID_TO_UNDEFINED
    assert store.put(b"ko", b"vo_new", HISTORY_RETENTION + 12) == VALID_TO_UNDEFINED

    # expired get on a key whose latest value satisfies the bound still returns data
    assert store.get(b"k", 10) == rec(b"v", 1)
    # the same expired get on a key whose latest value does not satisfy the bound returns None
    assert store.get(b"ko", 10) is None


# --------------------------------------------------------------------------------------------
# tombstones vs empty values


def test_distinguish_empty_and_null(store: VersionedStore) -> None:
    """shouldDistinguishEmptyAndNull: b"" is a value, None is a tombstone, in every segment."""
    assert store.put(b"k", None, SI + 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI - 10) == SI + 20
    assert store.put(b"k", None, SI - 1) == SI + 20
    assert store.put(b"k", None, SI + 1) == SI + 20
    assert store.put(b"k", None, SI + 10) == SI + 20
    # an empty byte string is a value, different from None (tombstone)
    assert store.put(b"k", b"", SI + 5) == SI + 10
    assert store.put(b"k", b"", SI - 5) == SI - 1
    assert store.put(b"k", b"", SI - 6) == SI - 5

    assert store.get(b"k") is None
    assert store.get(b"k", SI + 30) is None
    assert store.get(b"k", SI + 15) is None
    assert store.get(b"k", SI + 6) == rec(b"", SI + 5, SI + 10)
    assert store.get(b"k", SI + 2) is None
    assert store.get(b"k", SI) is None
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 5) == rec(b"", SI - 5, SI - 1)
    assert store.get(b"k", SI - 6) == rec(b"", SI - 6, SI - 5)
    assert store.get(b"k", SI - 8) is None
    assert_versions(
        store,
        b"k",
        None,
        None,
        [rec(b"", SI + 5, SI + 10), rec(b"", SI - 5, SI - 1), rec(b"", SI - 6, SI - 5)],
    )


# --------------------------------------------------------------------------------------------
# versions() (KIP-968 multi-version query)


def test_get_record_versions_from_older_segments(store: VersionedStore) -> None:
    """shouldGetRecordVersionsFromOlderSegments: range queries around values and tombstones."""
    # use a different key to create three different segments
    assert store.put(b"ko", None, SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"ko", None, 2 * SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"ko", None, 3 * SI - 10) == VALID_TO_UNDEFINED

    # nothing after visiting all segments (the key does not exist)
    assert_versions(store, b"k", SI - 20, SI, [])

    # insert data to create a non-empty (first) segment
    assert store.put(b"k", b"v1", SI - 30) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", SI - 25) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI - 20) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, SI - 15) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v3", SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v4", SI - 5) == VALID_TO_UNDEFINED

    all_four = [
        rec(b"v4", SI - 5),
        rec(b"v3", SI - 10, SI - 5),
        rec(b"v2", SI - 25, SI - 20),
        rec(b"v1", SI - 30, SI - 25),
    ]
    # a time range before any value
    assert_versions(store, b"k", SI - 40, SI - 35, [])
    # a range in which values are valid, with several tombstones in between
    assert_versions(store, b"k", SI - 30, SI - 5, all_four)
    # the range (MIN, MAX), spelled out and as missing bounds
    assert_versions(store, b"k", -(2**63), 2**63 - 1, all_four)
    assert_versions(store, b"k", None, None, all_four)
    # only the latest record
    assert_versions(store, b"k", SI - 4, SI, [rec(b"v4", SI - 5)])
    # from_time == to_time
    assert_versions(store, b"k", SI - 5, SI - 5, [rec(b"v4", SI - 5)])
    assert_versions(store, b"k", SI - 4, SI - 4, [rec(b"v4", SI - 5)])
    # values before any tombstone
    assert_versions(
        store, b"k", SI - 31, SI - 21, [rec(b"v2", SI - 25, SI - 20), rec(b"v1", SI - 30, SI - 25)]
    )
    # a range covering both tombstones
    assert_versions(store, b"k", SI - 24, SI - 11, [rec(b"v2", SI - 25, SI - 20)])
    # a range after the tombstones
    assert_versions(store, b"k", SI - 11, SI - 4, [rec(b"v4", SI - 5), rec(b"v3", SI - 10, SI - 5)])
    # every record valid during the range, including ones written before it starts
    assert_versions(store, b"k", SI - 26, SI - 5, all_four)
    # a record whose valid-from equals the upper bound
    assert_versions(store, b"k", SI - 15, SI - 10, [rec(b"v3", SI - 10, SI - 5)])
    # a range in which no value is valid
    assert_versions(store, b"k", SI - 19, SI - 16, [])

    # insert data to create a non-empty (third) segment
    assert store.put(b"k", b"v5", 3 * SI - 30) == VALID_TO_UNDEFINED
    assert store.put(b"k", None, 3 * SI - 20) == VALID_TO_UNDEFINED

    # a non-empty later segment does not affect results from the earlier segment
    assert_versions(store, b"k", SI - 40, SI - 35, [])
    assert_versions(store, b"k", SI - 30, SI - 26, [rec(b"v1", SI - 30, SI - 25)])
    assert_versions(store, b"k", SI - 19, SI - 16, [])
    assert_versions(
        store,
        b"k",
        None,
        None,
        [
            rec(b"v5", 3 * SI - 30, 3 * SI - 20),
            rec(b"v4", SI - 5, 3 * SI - 30),
            rec(b"v3", SI - 10, SI - 5),
            rec(b"v2", SI - 25, SI - 20),
            rec(b"v1", SI - 30, SI - 25),
        ],
    )


def test_get_record_versions_in_ascending_order(store: VersionedStore) -> None:
    """shouldGetRecordVersionsInAscendingOrder: ascending=True returns oldest first."""
    assert store.put(b"k", b"v1", SI - 30) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", SI - 25) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v3", SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v4", SI - 5) == VALID_TO_UNDEFINED

    assert store.versions(b"k", SI - 30, SI - 5, ascending=True) == [
        rec(b"v1", SI - 30, SI - 25),
        rec(b"v2", SI - 25, SI - 10),
        rec(b"v3", SI - 10, SI - 5),
        rec(b"v4", SI - 5),
    ]


def test_get_record_versions_from_multiple_old_segments_in_ascending_order(
    store: VersionedStore,
) -> None:
    """shouldGetRecordVersionsFromMultipleOldSegmentsInAscendingOrder: two segments + latest."""
    assert store.put(b"k", b"v1", SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", SI - 5) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v3", 2 * SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v4", 2 * SI - 5) == VALID_TO_UNDEFINED

    expected = [
        rec(b"v1", SI - 10, SI - 5),
        rec(b"v2", SI - 5, 2 * SI - 10),
        rec(b"v3", 2 * SI - 10, 2 * SI - 5),
        rec(b"v4", 2 * SI - 5),
    ]
    assert store.versions(b"k", -(2**63), 2**63 - 1, ascending=True) == expected
    assert store.versions(b"k", ascending=True) == expected
    assert store.versions(b"k") == expected[::-1]


def test_not_get_expired_record_versions(store: VersionedStore) -> None:
    """shouldNotGetExpiredRecordVersions: to_time == ST - R reads history, ST - R - 1 does not."""
    assert store.put(b"k", b"v_old", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", SI - 10) == VALID_TO_UNDEFINED

    # old record has not yet expired
    assert_versions(store, b"k", 0, SI - 11, [rec(b"v_old", 0, SI - 10)])

    assert store.put(b"ko", b"vo", HISTORY_RETENTION + SI - 11) == VALID_TO_UNDEFINED

    # old record still has not yet expired
    assert_versions(store, b"k", 0, SI - 11, [rec(b"v_old", 0, SI - 10)])

    assert store.put(b"ko", b"vo2", HISTORY_RETENTION + SI - 10) == VALID_TO_UNDEFINED

    # old record is expired now
    assert_versions(store, b"k", 0, SI - 11, [])


def test_get_expired_if_latest_version_value(store: VersionedStore) -> None:
    """shouldGetExpiredIfLatestVersionValue: an expired range still sees a qualifying latest."""
    assert store.put(b"k", b"v", 1) == VALID_TO_UNDEFINED
    assert store.put(b"ko", b"vo_old", 1) == VALID_TO_UNDEFINED
    assert store.put(b"ko", b"vo_new", HISTORY_RETENTION + 12) == VALID_TO_UNDEFINED

    # expired query on a key whose latest value satisfies the bound still returns it
    assert_versions(store, b"k", 0, 10, [rec(b"v", 1)])
    # the same expired query on a key whose latest value does not satisfy the bound
    assert_versions(store, b"ko", 0, 10, [])


# --------------------------------------------------------------------------------------------
# zero history retention


@pytest.mark.parametrize("segment_interval_ms", [SEGMENT_INTERVAL, None])
def test_allow_zero_history_retention(
    make_store: MakeStore, store_kind: str, segment_interval_ms: int | None
) -> None:
    """shouldAllowZeroHistoryRetention: R = 0 accepts ts == ST, rejects ts < ST."""
    store = make_store(
        history_retention_ms=0, segment_interval_ms=segment_interval_ms, kind=store_kind
    )

    # put and get
    assert store.put(b"k", b"v", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"v", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"v", BASE_TIMESTAMP)
    # a query in the "future" is allowed
    assert store.get(b"k", BASE_TIMESTAMP + 1) == rec(b"v", BASE_TIMESTAMP)

    # update the existing record at the same timestamp
    assert store.put(b"k", b"updated", BASE_TIMESTAMP) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"updated", BASE_TIMESTAMP)
    assert store.get(b"k", BASE_TIMESTAMP) == rec(b"updated", BASE_TIMESTAMP)

    # put a new record version
    assert store.put(b"k", b"v2", BASE_TIMESTAMP + 2) == VALID_TO_UNDEFINED
    assert store.get(b"k") == rec(b"v2", BASE_TIMESTAMP + 2)
    assert store.get(b"k", BASE_TIMESTAMP + 2) == rec(b"v2", BASE_TIMESTAMP + 2)

    # a query in the past (history retention expired) returns None
    assert store.get(b"k", BASE_TIMESTAMP + 1) is None

    # delete the existing key
    assert store.delete(b"k", BASE_TIMESTAMP + 3) == rec(b"v2", BASE_TIMESTAMP + 2)
    assert store.get(b"k") is None

    # a put in the past (grace period expired) does not update the store
    assert store.put(b"k2", b"v", BASE_TIMESTAMP + 2) == NOT_PUT
    assert store.get(b"k2") is None
    assert store.observed_stream_time == BASE_TIMESTAMP + 3


# --------------------------------------------------------------------------------------------
# observed stream time


def test_observed_stream_time_tracks_accepted_writes(store: VersionedStore) -> None:
    """observed_stream_time is -1 at first, the max accepted write timestamp, never decreasing."""
    assert store.observed_stream_time == -1
    assert store.get(b"k") is None
    assert store.versions(b"k") == []
    assert store.observed_stream_time == -1

    assert store.put(b"k", b"v", 100) == VALID_TO_UNDEFINED
    assert store.observed_stream_time == 100
    # out-of-order writes do not move it back
    assert store.put(b"k", b"v0", 50) == 100
    assert store.observed_stream_time == 100
    # tombstones (put None and delete) advance it
    assert store.put(b"j", None, 200) == VALID_TO_UNDEFINED
    assert store.observed_stream_time == 200
    assert store.delete(b"unknown", 300) is None
    assert store.observed_stream_time == 300
    # reads do not change it
    assert store.get(b"k", 10**12) == rec(b"v", 100)
    assert store.versions(b"k", 0, 10**12) == [rec(b"v", 100), rec(b"v0", 50, 100)]
    assert store.observed_stream_time == 300


def test_rejected_writes_leave_stream_time_unchanged(store: VersionedStore) -> None:
    """NOT_PUT puts and expired deletes change neither data nor observed_stream_time."""
    assert store.put(b"k", b"v", HISTORY_RETENTION + 100) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"old", 99) == NOT_PUT
    assert store.put(b"k", None, 99) == NOT_PUT
    assert store.delete(b"k", 99) is None
    assert store.observed_stream_time == HISTORY_RETENTION + 100
    assert store.get(b"k") == rec(b"v", HISTORY_RETENTION + 100)
    assert store.versions(b"k") == [rec(b"v", HISTORY_RETENTION + 100)]


# --------------------------------------------------------------------------------------------
# Kafka's restore cases, as put_batch (specified as put() applied row by row)


def put_rows(
    store: VersionedStore, writes: list[tuple[bytes | None, int, int]], key: bytes = b"k"
) -> list[int]:
    """put_batch the (value, timestamp, _) rows for one key; returns the codes as a list."""
    result = store.put_batch(
        [key] * len(writes), [value for value, _, _ in writes], [ts for _, ts, _ in writes]
    )
    assert isinstance(result, pa.Int64Array)
    codes: list[int] = result.to_pylist()
    return codes


def test_batch_restore(store: VersionedStore) -> None:
    """shouldRestore: put_batch of the move-to-older-segment writes equals the sequential puts."""
    codes = put_rows(store, MOVE_TO_OLDER_SEGMENT_WRITES)

    assert codes == [expected for _, _, expected in MOVE_TO_OLDER_SEGMENT_WRITES]
    verify_move_to_older_segment_state(store)


def test_batch_restore_with_nulls(store: VersionedStore) -> None:
    """shouldRestoreWithNulls: put_batch with None values writes tombstones."""
    codes = put_rows(store, MOVE_WITH_NULLS_WRITES)

    assert codes == [expected for _, _, expected in MOVE_WITH_NULLS_WRITES]
    verify_move_with_nulls_state(store)


def test_batch_restore_with_nulls_and_repeat_timestamps(store: VersionedStore) -> None:
    """shouldRestoreWithNullsAndRepeatTimestamps: repeated timestamps inside one batch."""
    codes = put_rows(store, REPEAT_TIMESTAMP_WRITES)

    assert codes == [expected for _, _, expected in REPEAT_TIMESTAMP_WRITES]
    verify_repeat_timestamps_state(store)


def test_batch_restore_multiple_batches(store: VersionedStore) -> None:
    """shouldRestoreMultipleBatches: two consecutive batches equal one sequence of puts."""
    first: list[tuple[bytes | None, int, int]] = [
        (None, SI - 20, VALID_TO_UNDEFINED),
        (b"vn10", SI - 10, VALID_TO_UNDEFINED),
        (None, SI - 1, VALID_TO_UNDEFINED),
    ]
    second: list[tuple[bytes | None, int, int]] = [
        (None, SI + 1, VALID_TO_UNDEFINED),
        (b"vp10", SI + 10, VALID_TO_UNDEFINED),
        (None, SI + 20, VALID_TO_UNDEFINED),
    ]
    assert put_rows(store, first) == [VALID_TO_UNDEFINED] * 3
    assert put_rows(store, second) == [VALID_TO_UNDEFINED] * 3

    verify_multiple_segments_state(store)


def test_batch_not_restore_expired(store: VersionedStore) -> None:
    """shouldNotRestoreExpired: a batch row older than the grace period returns NOT_PUT."""
    codes = store.put_batch(
        [b"k", b"k1", b"k2"],
        [b"v", b"v1", b"v2"],
        [
            HISTORY_RETENTION + 10,
            HISTORY_RETENTION + 10 - GRACE_PERIOD,
            HISTORY_RETENTION + 9 - GRACE_PERIOD,
        ],
    )

    assert codes.to_pylist() == [VALID_TO_UNDEFINED, VALID_TO_UNDEFINED, NOT_PUT]
    assert store.get(b"k") == rec(b"v", HISTORY_RETENTION + 10)
    assert store.get(b"k1") == rec(b"v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    assert store.get(b"k2") is None
    assert store.observed_stream_time == HISTORY_RETENTION + 10


def test_batch_restore_even_if_record_would_be_expired_by_end_of_batch(
    store: VersionedStore,
) -> None:
    """shouldRestoreEvenIfRecordWouldBeExpiredByEndOfBatch: rows use the running stream time."""
    codes = store.put_batch(
        [b"k2", b"k"], [b"v2", b"v"], [HISTORY_RETENTION - GRACE_PERIOD, HISTORY_RETENTION + 10]
    )

    assert codes.to_pylist() == [VALID_TO_UNDEFINED, VALID_TO_UNDEFINED]
    assert store.get(b"k2") == rec(b"v2", HISTORY_RETENTION - GRACE_PERIOD)
    assert store.get(b"k") == rec(b"v", HISTORY_RETENTION + 10)


def test_batch_put_accepts_arrow_arrays(store: VersionedStore) -> None:
    """put_batch takes pyarrow arrays too; a null value is a tombstone."""
    codes = store.put_batch(
        pa.array([b"k", b"k", b"k"], type=pa.binary()),
        pa.array([b"v1", None, b""], type=pa.binary()),
        pa.array([SI - 10, SI + 10, SI - 5], type=pa.int64()),
    )

    assert codes.to_pylist() == [VALID_TO_UNDEFINED, VALID_TO_UNDEFINED, SI + 10]
    assert store.get(b"k") is None
    assert store.get(b"k", SI - 5) == rec(b"", SI - 5, SI + 10)
    assert store.get(b"k", SI - 6) == rec(b"v1", SI - 10, SI - 5)


def test_get_batch_and_delete_batch_rows_equal_single_calls(store: VersionedStore) -> None:
    """Row i of get_batch / delete_batch equals get() / delete() applied in order."""
    for value, timestamp, _ in MOVE_TO_OLDER_SEGMENT_WRITES:
        store.put(b"k", value, timestamp)
    store.put(b"e", b"", 5)
    keys = [b"k", b"k", b"missing", b"e", b"k"]
    as_of = [SI + 5, SI - 2, SI, 5, SI - 11]

    expected_latest = [store.get(key) for key in keys]
    assert batch_rows(store.get_batch(keys)) == expected_latest
    expected_as_of = [store.get(key, t) for key, t in zip(keys, as_of, strict=True)]
    assert batch_rows(store.get_batch(keys, as_of)) == expected_as_of
    assert batch_rows(store.get_batch(keys, SI)) == [store.get(key, SI) for key in keys]
    assert batch_rows(store.get_batch(keys, SI)) == [
        rec(b"vn1", SI - 1, SI + 1),
        rec(b"vn1", SI - 1, SI + 1),
        None,
        rec(b"", 5),
        rec(b"vn1", SI - 1, SI + 1),
    ]

    # delete_batch: the second delete of k at SI - 1 sees the tombstone written by the first
    deleted = batch_rows(
        store.delete_batch([b"k", b"k", b"missing", b"k"], [SI - 1, SI - 1, 7, SI + 25])
    )
    assert deleted == [rec(b"vn1", SI - 1, SI + 1), None, None, rec(b"vp20", SI + 20)]
    assert store.get(b"k", SI - 1) is None
    assert store.get(b"k", SI - 2) == rec(b"vn2", SI - 2, SI - 1)
    assert store.get(b"k") is None
    assert store.put(b"missing", b"x", 6) == 7


# --------------------------------------------------------------------------------------------
# reopen (persistent only)


def test_reopen_restores_versions_and_stream_time(make_store: MakeStore, tmp_path: Path) -> None:
    """Reopening a persistent store restores every version, valid-to and observed_stream_time."""
    path = tmp_path / "reopen"
    store = make_store(path)
    for value, timestamp, expected in MOVE_TO_OLDER_SEGMENT_WRITES:
        assert store.put(b"k", value, timestamp) == expected
    for value, timestamp, expected in MOVE_WITH_NULLS_WRITES:
        assert store.put(b"n", value, timestamp) == expected
    store.flush()
    store.close()

    reopened = make_store(path)
    assert reopened.observed_stream_time == SI + 20
    assert reopened.history_retention_ms == HISTORY_RETENTION
    assert reopened.segment_interval_ms == SEGMENT_INTERVAL
    verify_move_to_older_segment_state(reopened)
    assert reopened.get(b"n") is None
    assert reopened.get(b"n", SI + 6) == rec(b"vp5", SI + 5, SI + 10)
    assert reopened.versions(b"n") == [
        rec(b"vp5", SI + 5, SI + 10),
        rec(b"vn5", SI - 5, SI - 1),
        rec(b"vn6", SI - 6, SI - 5),
    ]
    # writes after reopening see the restored history (the tombstone at SI + 20 bounds them)
    assert reopened.put(b"n", b"late", SI + 15) == SI + 20
    assert reopened.put(b"k", b"late", SI + 15) == SI + 20


def test_reopen_restores_grace_decisions(make_store: MakeStore, tmp_path: Path) -> None:
    """After reopening, the restored stream time still decides which writes are too old."""
    path = tmp_path / "grace"
    store = make_store(path)
    assert store.put(b"k", b"v", HISTORY_RETENTION + 10) == VALID_TO_UNDEFINED
    store.close()

    reopened = make_store(path)
    assert reopened.observed_stream_time == HISTORY_RETENTION + 10
    assert reopened.put(b"k2", b"v2", HISTORY_RETENTION + 9 - GRACE_PERIOD) == NOT_PUT
    assert reopened.delete(b"k", HISTORY_RETENTION + 9 - GRACE_PERIOD) is None
    assert reopened.put(b"k1", b"v1", HISTORY_RETENTION + 10 - GRACE_PERIOD) == VALID_TO_UNDEFINED
    assert reopened.get(b"k2") is None
    assert reopened.get(b"k") == rec(b"v", HISTORY_RETENTION + 10)
    assert reopened.observed_stream_time == HISTORY_RETENTION + 10


def test_reopen_with_context_manager(tmp_path: Path) -> None:
    """A store used as a context manager is closed on exit and reopens with the same data."""
    path = tmp_path / "ctx"
    with VersionedStore(
        path, history_retention_ms=HISTORY_RETENTION, segment_interval_ms=SEGMENT_INTERVAL
    ) as store:
        assert store.put(b"k", b"v1", 1) == VALID_TO_UNDEFINED
        assert store.put(b"k", b"v2", SI + 1) == VALID_TO_UNDEFINED

    with pytest.raises(verstore.StoreClosedError):
        store.get(b"k")

    with VersionedStore(
        path, history_retention_ms=HISTORY_RETENTION, segment_interval_ms=SEGMENT_INTERVAL
    ) as reopened:
        assert reopened.get(b"k") == rec(b"v2", SI + 1)
        assert reopened.get(b"k", SI) == rec(b"v1", 1, SI + 1)
        assert reopened.observed_stream_time == SI + 1


def test_reopen_keeps_expired_segments_dropped(make_store: MakeStore, tmp_path: Path) -> None:
    """Segment expiry survives a reopen: dropped versions stay gone, live ones stay."""
    path = tmp_path / "expiry"
    store = make_store(path)
    assert store.put(b"k", b"v_old", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", SI - 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", SI + 10) == VALID_TO_UNDEFINED
    # ST - R = SI: segment 0 (valid-to in [0, SI)) is dropped, segment 1 is live
    assert store.put(b"ko", b"vo", HISTORY_RETENTION + SI) == VALID_TO_UNDEFINED
    expected = [rec(b"w", SI + 10), rec(b"v", SI - 10, SI + 10)]
    assert store.versions(b"k") == expected
    store.close()

    reopened = make_store(path)
    assert reopened.versions(b"k") == expected
    assert reopened.get(b"k", SI) == rec(b"v", SI - 10, SI + 10)
    assert reopened.get(b"k", SI - 1) is None
    assert reopened.observed_stream_time == HISTORY_RETENTION + SI
