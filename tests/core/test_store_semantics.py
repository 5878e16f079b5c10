"""Kafka's ``RocksDBVersionedStoreTest`` through the Python API, and what the API adds to it.

Kafka's cases are data, ``tests/data/kafka_scenarios.json`` (its ``format`` entry describes the
steps), shared with the Rust suite (``rust/store/tests/kafka.rs``). Each scenario runs four
ways: on a persistent store, on an in-memory store, restored (the writes go to a store that
records them; before each read after a write, the changelog of those writes is replayed into a
fresh in-memory store, which answers the read) and reopened (before each read after a write,
the persistent store is closed and reopened). Kafka's constants are the default configuration:
history retention (= grace period) 300 000 ms, segment interval 100 000 ms.

The cases below the runner are not expressible as data: Arrow inputs, batch reads and deletes
against single calls, the context manager, and expiry across a reopen.

See docs/semantics.md §2 (operations), §2.10 (recording and replay), §3 (put algorithm) and §5
(segment expiry).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
from verstore import NOT_PUT, VALID_TO_UNDEFINED, VersionedRecord, VersionedStore

MakeStore = Callable[..., VersionedStore]

CATALOGUE: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "data" / "kafka_scenarios.json").read_text()
)
SCENARIOS: dict[str, dict[str, Any]] = {s["name"]: s for s in CATALOGUE["scenarios"]}

HISTORY_RETENTION = CATALOGUE["config"]["history_retention_ms"]
SEGMENT_INTERVAL = CATALOGUE["config"]["segment_interval_ms"]
SI = SEGMENT_INTERVAL

MODES = ("persistent", "in_memory", "restored", "reopened")
ATTEMPT = bytes(16)


def rec(value: bytes, timestamp: int, valid_to: int | None = None) -> VersionedRecord:
    """The expected record; ``valid_to=None`` means the latest version."""
    return VersionedRecord(value=value, timestamp=timestamp, valid_to=valid_to)


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _record(data: list[Any] | None) -> VersionedRecord | None:
    """A record as the scenarios spell it: ``[value, timestamp, valid_to]``."""
    if data is None:
        return None
    value, timestamp, valid_to = data
    return rec(value.encode(), timestamp, valid_to)


def scenario_writes(name: str) -> list[tuple[bytes, bytes | None, int]]:
    """The ``put`` steps of a scenario, as ``(key, value, timestamp)``."""
    return [
        (key.encode(), _bytes(value), timestamp)
        for key, value, timestamp in (s["put"] for s in SCENARIOS[name]["steps"] if "put" in s)
    ]


class Subject:
    """Where a scenario's writes go (``writer``) and which store answers its reads."""

    def __init__(self, mode: str, config: dict[str, Any], tmp_path: Path) -> None:
        self.mode, self.config, self.tmp_path = mode, config, tmp_path
        self.changelogs = 0
        self.dirty = False
        self.writer = self._open(in_memory=mode == "in_memory", record_changes=mode == "restored")
        self.replica = self._open(in_memory=True) if mode == "restored" else None

    def _open(self, *, in_memory: bool, record_changes: bool = False) -> VersionedStore:
        if in_memory:
            return VersionedStore.in_memory(**self.config)
        return VersionedStore(self.tmp_path / "store", record_changes=record_changes, **self.config)

    def write(self) -> VersionedStore:
        self.dirty = True
        return self.writer

    def read(self) -> VersionedStore:
        """The store that answers a read, caught up with the writes before it."""
        if self.dirty and self.mode == "reopened":
            self.writer.close()
            self.writer = self._open(in_memory=False)
        if self.dirty and self.replica is not None:
            self.changelogs += 1
            path = self.tmp_path / f"{self.changelogs}.changelog"
            self.writer.take_changelog(path, self.changelogs, ATTEMPT, ATTEMPT)
            self.replica.apply_changelog(path, name=path.name, chunk_records=2)
        self.dirty = False
        return self.replica or self.writer

    def close(self) -> None:
        self.writer.close()


def run_scenario(scenario: dict[str, Any], subject: Subject) -> None:
    for i, step in enumerate(scenario["steps"]):
        at = f"{scenario['name']} [{subject.mode}] step {i}: {step}"
        expected = step.get("returns")
        if "put" in step:
            key, value, timestamp = step["put"]
            assert subject.write().put(key.encode(), _bytes(value), timestamp) == expected, at
        elif "put_batch" in step:
            keys, values, times = zip(*step["put_batch"], strict=True)
            codes = subject.write().put_batch(
                [k.encode() for k in keys], [_bytes(v) for v in values], list(times)
            )
            assert codes.to_pylist() == expected, at
        elif "delete" in step:
            key, timestamp = step["delete"]
            assert subject.write().delete(key.encode(), timestamp) == _record(expected), at
        elif "get" in step:
            (key,) = step["get"]
            assert subject.read().get(key.encode()) == _record(expected), at
        elif "get_as_of" in step:
            key, as_of = step["get_as_of"]
            assert subject.read().get(key.encode(), as_of) == _record(expected), at
        elif "versions" in step:
            key, from_time, to_time = step["versions"]
            newest_first = [_record(r) for r in expected]
            store = subject.read()
            assert store.versions(key.encode(), from_time, to_time) == newest_first, at
            ascending = store.versions(key.encode(), from_time, to_time, ascending=True)
            assert ascending == newest_first[::-1], at
        elif "observed_stream_time" in step:
            assert subject.read().observed_stream_time == step["observed_stream_time"], at
        else:
            raise AssertionError(f"unknown step: {at}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_kafka_scenario(name: str, mode: str, tmp_path: Path) -> None:
    """One of Kafka's ``RocksDBVersionedStoreTest`` cases (``kafka`` in the data names it)."""
    scenario = SCENARIOS[name]
    subject = Subject(mode, scenario.get("config", CATALOGUE["config"]), tmp_path)
    try:
        run_scenario(scenario, subject)
    finally:
        subject.close()


def test_the_catalogue_names_each_scenario_once() -> None:
    assert len(SCENARIOS) == len(CATALOGUE["scenarios"]) == 33


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
# batches: Arrow inputs, rows equal to single calls


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
    for key, value, timestamp in scenario_writes("move_record_to_older_segment_during_put"):
        store.put(key, value, timestamp)
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
# reopen (persistent only; every scenario also runs reopened above)


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
