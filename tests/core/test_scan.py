"""Scans and store statistics through the Python API (``VersionedStore.scan``,
``scan_versions``, ``stats``).

* Hypothesis: random histories (tombstones, out-of-order writes, writes at the retention horizon
  and at segment boundaries, expiring segments, reopens) on both store kinds; every scan, over
  all keys, key ranges and prefixes with edge bytes (``b""``, ``b"\\x00"``, ``b"\\xff"``), as of
  times around the horizon and segment boundaries or of the latest, and every version scan,
  equals the reference model read key by key; ``stats().latest_keys`` equals the model's count.
* Consistency: a scan sees the state of its start while another thread writes to the store.
* Lifecycle: ``close()``, the context manager, closing the store under an open scan, arguments.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from reference_model import ReferenceModel, trunc_div

#: ``VERSTORE_LONG_TESTS=1``: the long run, every property test at its full size (``make test``
#: and CI run the small size; README.md, tests).
LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"

# Prefixes of one another, the empty key, runs of 0x00 and 0xff.
KEYS = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"a\xff", b"ab", b"\xff", b"\xff\xff"]
BOUNDS = [b"", b"\x00", b"\x00\x01", b"a", b"a\x00", b"ab", b"b", b"\xff", b"\xff\xff\xff"]
PREFIXES = [b"", b"\x00", b"a", b"a\xff", b"\xff", b"\xff\xff", b"z"]

Row = tuple[bytes, bytes, int, int | None]
MakeStore = Callable[..., verstore.VersionedStore]


def rows(batches: Iterable[pa.RecordBatch], batch_rows: int | None = None) -> list[Row]:
    """Every row of a scan's batches (checking their schema and size)."""
    out: list[Row] = []
    for batch in batches:
        assert batch.schema.names == ["key", "value", "timestamp", "valid_to"]
        assert batch.num_rows > 0
        if batch_rows is not None:
            assert batch.num_rows <= batch_rows
        d = batch.to_pydict()
        out += zip(d["key"], d["value"], d["timestamp"], d["valid_to"], strict=True)
    return out


def in_range(key: bytes, start: bytes | None, end: bytes | None, prefix: bytes | None) -> bool:
    if prefix is not None:
        return key.startswith(prefix)
    return (start is None or key >= start) and (end is None or key < end)


def model_as_of(model: ReferenceModel, keys: dict[str, Any], as_of: int | None) -> list[Row]:
    out: list[Row] = []
    for key in sorted(k for k in model.keys() if in_range(k, **keys)):
        r = model.get(key, as_of)
        if r is not None:
            out.append((key, r.value, r.timestamp, r.valid_to))
    return out


def model_versions(
    model: ReferenceModel, keys: dict[str, Any], f: int | None, t: int | None, asc: bool
) -> list[Row]:
    return [
        (key, r.value, r.timestamp, r.valid_to)
        for key in sorted(k for k in model.keys() if in_range(k, **keys))
        for r in model.versions(key, f, t, asc)
    ]


# --- hypothesis: scans equal the model, key by key ---------------------------------------------

write_st = st.tuples(
    st.sampled_from(KEYS),
    st.one_of(st.none(), st.sampled_from([b"", b"x", b"\x00\xff"])),
    st.one_of(
        *[st.integers(-6, 3)] * 4, st.integers(-25, -7), st.integers(4, 12), st.integers(25, 60)
    ),
)
op_st = st.one_of(write_st, write_st, write_st, st.just("reopen"))
keys_st = st.one_of(
    st.just({"start": None, "end": None, "prefix": None}),
    st.builds(
        lambda a, b: (
            {"start": min(a, b), "end": max(a, b), "prefix": None}
            if a is not None and b is not None
            else {"start": a, "end": b, "prefix": None}
        ),
        st.one_of(st.none(), st.sampled_from(BOUNDS)),
        st.one_of(st.none(), st.sampled_from(BOUNDS)),
    ),
    st.builds(
        lambda p: {"start": None, "end": None, "prefix": p},
        st.sampled_from(PREFIXES),
    ),
)


def query_times(model: ReferenceModel, retention: int, interval: int) -> list[int | None]:
    """None (latest), the horizon H +- 1, ST, segment boundaries +- 1, a negative time, and
    every version's timestamp."""
    stream_time = model.observed_stream_time
    horizon = stream_time - retention
    times: set[int] = {-1, 0, horizon - 1, horizon, horizon + 1, stream_time, stream_time + 1}
    times |= {t for k in model.keys() for t in model.timestamps(k)}
    for k in range(max(0, trunc_div(horizon, interval) - 1), trunc_div(stream_time, interval) + 2):
        times |= {k * interval - 1, k * interval, k * interval + 1}
    return [None, *sorted(times)]


@settings(
    max_examples=60 if LONG else 20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    retention=st.sampled_from([0, 5, 20, 50]),
    interval=st.sampled_from([1, 3, 10]),
    ops=st.lists(op_st, min_size=1, max_size=60),
    keys=keys_st,
    batch_rows=st.integers(1, 4),
    ascending=st.booleans(),
)
def test_scans_equal_the_model_read_key_by_key(
    retention: int,
    interval: int,
    ops: list[Any],
    keys: dict[str, Any],
    batch_rows: int,
    ascending: bool,
) -> None:
    config = {"history_retention_ms": retention, "segment_interval_ms": interval}
    model = ReferenceModel(**config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        stores = {
            "persistent": verstore.VersionedStore(path, **config),
            "in_memory": verstore.VersionedStore.in_memory(**config),
        }
        try:
            for op in ops:
                if op == "reopen":
                    stores["persistent"].close()
                    stores["persistent"] = verstore.VersionedStore(path, **config)
                    continue
                key, value, dt = op
                ts = max(model.observed_stream_time + dt, 0)
                expected = model.put(key, value, ts)
                for store in stores.values():
                    assert store.put(key, value, ts) == expected
            st_, h = model.observed_stream_time, model.horizon
            note(f"ST={st_} H={h} keys={keys}")
            latest = sum(model.get(k) is not None for k in model.keys())
            for kind, store in stores.items():
                assert store.stats().latest_keys == latest, kind
                for as_of in query_times(model, retention, interval):
                    scan = store.scan(**keys, as_of=as_of, batch_rows=batch_rows)
                    assert rows(scan, batch_rows) == model_as_of(model, keys, as_of), (kind, as_of)
                windows = [(None, None), (h, None), (None, h - 1), (h - 1, h + 1), (-5, 3)]
                windows += [(t, t) for t in query_times(model, retention, interval)[1::3]]
                for f, t in windows:
                    scan = store.scan_versions(
                        **keys, from_time=f, to_time=t, ascending=ascending, batch_rows=batch_rows
                    )
                    expected_rows = model_versions(model, keys, f, t, ascending)
                    assert rows(scan, batch_rows) == expected_rows, (kind, f, t)
        finally:
            for store in stores.values():
                store.close()


# --- consistency ------------------------------------------------------------------------------


@pytest.mark.parametrize("wal", [True, False])
def test_a_scan_does_not_see_writes_made_by_another_thread_while_it_runs(
    tmp_path: Path, wal: bool
) -> None:
    store = verstore.VersionedStore(
        tmp_path / "s", history_retention_ms=1_000, segment_interval_ms=100, write_ahead_log=wal
    )
    n = 20_000
    keys = [b"k%06d" % i for i in range(n)]
    store.put_batch(keys, [b"old"] * n, [10] * n)
    store.put_batch(keys[::2], [b"older"] * (n // 2), [5] * (n // 2))
    expected_latest = [(k, b"old", 10, None) for k in keys]
    expected_as_of = [(k, b"older", 5, 10) for k in keys[::2]]
    latest = store.scan(batch_rows=500)
    as_of = store.scan(as_of=7, batch_rows=700)
    first = next(latest)
    written = threading.Event()

    def writer() -> None:
        # Rewrites every key, deletes some, adds new ones, and moves stream time far enough to
        # drop every segment the as-of scan reads.
        store.put_batch(keys, [b"new"] * n, [20] * n)
        written.set()
        store.delete_batch(keys[::3], [30] * len(keys[::3]))
        store.put_batch([b"a-new-key", b"zz"], [b"v", b"v"], [40, 5_000])
        store.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    assert written.wait(60)
    got_latest = rows([first, *latest])
    got_as_of = rows(as_of)
    thread.join()
    assert got_latest == expected_latest
    assert got_as_of == expected_as_of
    # ... while a new scan sees the writes.
    after = rows(store.scan(prefix=b"k00000"))
    assert after == [(keys[i], b"new", 20, None) for i in range(10) if i % 3]
    store.close()


def test_a_scan_sees_the_write_buffer(tmp_path: Path) -> None:
    store = verstore.VersionedStore(
        tmp_path / "s", history_retention_ms=100, segment_interval_ms=10, write_ahead_log=False
    )
    store.put(b"a", b"1", 1)
    store.put(b"a", b"2", 5)
    store.delete(b"b", 6)
    assert store.stats().write_buffer_bytes > 0
    assert rows(store.scan()) == [(b"a", b"2", 5, None)]
    assert rows(store.scan(as_of=3)) == [(b"a", b"1", 1, 5)]
    assert store.stats().write_buffer_bytes == 0
    store.close()


# --- lifecycle --------------------------------------------------------------------------------


def fill(store: verstore.VersionedStore, n: int = 100) -> list[bytes]:
    keys = [b"k%04d" % i for i in range(n)]
    store.put_batch(keys, keys, list(range(n)))
    return keys


def test_close_and_context_manager(store: verstore.VersionedStore) -> None:
    keys = fill(store)
    scan = store.scan(batch_rows=10)
    assert not scan.closed
    assert next(scan).num_rows == 10
    scan.close()
    scan.close()
    assert scan.closed
    with pytest.raises(StopIteration):
        next(scan)
    with store.scan(batch_rows=30) as scan:
        assert [b.num_rows for b in scan] == [30, 30, 30, 10]
    assert scan.closed
    assert rows(iter(scan)) == []
    with store.scan(start=keys[5], end=keys[8]) as scan:
        assert [r[0] for r in rows(scan)] == keys[5:8]
    # Dropped without close: nothing is left behind.
    for _ in range(20):
        next(store.scan(batch_rows=1))


def test_closing_the_store_ends_open_scans(make_store: MakeStore, store_kind: str) -> None:
    store = make_store(kind=store_kind)
    fill(store)
    started = store.scan(batch_rows=10)
    idle = store.scan_versions(batch_rows=10)
    next(started)
    store.close()
    with pytest.raises(verstore.StoreClosedError):
        next(started)
    with pytest.raises(verstore.StoreClosedError):
        next(idle)
    with pytest.raises(verstore.StoreClosedError):
        store.scan()
    with pytest.raises(verstore.StoreClosedError):
        store.stats()
    idle.close()
    with pytest.raises(StopIteration):
        next(idle)
    started.close()


def test_a_scan_keeps_its_store_alive(tmp_path: Path) -> None:
    def open_and_scan() -> verstore.Scan:
        store = verstore.VersionedStore(tmp_path / "s", history_retention_ms=100)
        fill(store, 10)
        return store.scan(batch_rows=3)

    scan = open_and_scan()
    assert len(rows(scan)) == 10
    # The store closes when the scan lets it go.
    del scan
    with verstore.VersionedStore(tmp_path / "s", history_retention_ms=100) as again:
        assert again.stats().latest_keys == 10


def test_reopen_right_after_closing_a_store_with_open_scans(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = verstore.VersionedStore(path, history_retention_ms=100)
    fill(store)
    scans = [store.scan(batch_rows=1) for _ in range(3)]
    next(scans[0])
    store.close()
    # The scans' threads let go of RocksDB before close() returned: the directory opens again.
    with verstore.VersionedStore(path, history_retention_ms=100) as again:
        assert again.stats().latest_keys == 100
        assert len(rows(again.scan())) == 100
    del scans


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"prefix": b"a", "start": b"a"}, ValueError, "prefix"),
        ({"prefix": b"a", "end": b"b"}, ValueError, "prefix"),
        ({"start": b"b", "end": b"a"}, ValueError, "end"),
        ({"batch_rows": 0}, ValueError, "batch_rows"),
        ({"batch_rows": -1}, ValueError, "batch_rows"),
        ({"batch_rows": True}, TypeError, "batch_rows"),
        ({"batch_rows": 2.0}, TypeError, "batch_rows"),
        ({"start": "a"}, TypeError, "start"),
        ({"end": 1}, TypeError, "end"),
        ({"prefix": ["a"]}, TypeError, "prefix"),
        ({"as_of": "1"}, TypeError, "as_of"),
        ({"as_of": 2**63}, ValueError, "as_of"),
    ],
)
def test_bad_scan_arguments(
    store: verstore.VersionedStore, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        store.scan(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"from_time": 5, "to_time": 4}, ValueError, "from_time"),
        ({"from_time": "5"}, TypeError, "from_time"),
        ({"prefix": b"", "end": b""}, ValueError, "prefix"),
        ({"batch_rows": 0}, ValueError, "batch_rows"),
    ],
)
def test_bad_scan_versions_arguments(
    store: verstore.VersionedStore, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        store.scan_versions(**kwargs)


def test_scan_arguments_are_keyword_only(store: verstore.VersionedStore) -> None:
    with pytest.raises(TypeError):
        store.scan(b"a")  # type: ignore[misc]


def test_empty_scans_and_the_schema(store: verstore.VersionedStore) -> None:
    assert list(store.scan()) == []
    fill(store, 3)
    assert list(store.scan(prefix=b"x")) == []
    assert list(store.scan(start=b"k0001", end=b"k0001")) == []
    scan = store.scan()
    assert scan.schema == pa.schema(
        [
            pa.field("key", pa.binary(), nullable=False),
            pa.field("value", pa.binary(), nullable=False),
            pa.field("timestamp", pa.int64(), nullable=False),
            pa.field("valid_to", pa.int64()),
        ]
    )
    assert pa.Table.from_batches(list(scan), scan.schema).num_rows == 3


def test_typed_key_ranges_with_the_tuple_encoding(store: verstore.VersionedStore) -> None:
    ids = [-(2**40), -7, -1, 0, 1, 3, 255, 256, 2**40]
    keys = verstore._core.encode_rows(pa.record_batch({"id": pa.array(ids, pa.int64())}))
    store.put_batch(keys, [str(i).encode() for i in ids], [1] * len(ids))

    def encode(i: int) -> bytes:
        key: bytes = verstore._core.encode_rows(pa.record_batch({"id": [i]}))[0].as_py()
        return key

    got = rows(store.scan(start=encode(-7), end=encode(256)))
    assert [int(r[1]) for r in got] == [-7, -1, 0, 1, 3, 255]
    assert [int(r[1]) for r in rows(store.scan())] == ids


# --- statistics -------------------------------------------------------------------------------


def test_statistics(make_store: MakeStore, store_kind: str, tmp_path: Path) -> None:
    store = make_store(tmp_path / "s", kind=store_kind, segment_interval_ms=100)
    empty = store.stats()
    assert (empty.latest_keys, empty.history_rows, empty.live_segments) == (0, 0, 0)
    assert empty.observed_stream_time == -1
    for t in (10, 110, 210):
        store.put_batch([b"a", b"b", b"c"], [b"v"] * 3, [t] * 3)
    store.delete(b"c", 300)
    stats = store.stats()
    assert stats.latest_keys == 2
    assert stats.live_segments == 3
    assert stats.observed_stream_time == 300
    assert stats.write_buffer_bytes == 0
    assert "latest_keys=2" in repr(stats)
    if store_kind == "in_memory":
        # a, b: rows in segments 1 and 2; c: 1, 2 and its tombstone's row in 3.
        assert stats.history_rows == 7
        assert (stats.disk_bytes, stats.memtable_bytes) == (0, 0)
    else:
        assert stats.history_rows > 0
        assert stats.memtable_bytes > 0
        store.flush()
        assert store.stats().disk_bytes > 0
        store.close()
        with verstore.VersionedStore(
            tmp_path / "s", history_retention_ms=300_000, segment_interval_ms=100
        ) as again:
            assert again.stats().latest_keys == 2
    with pytest.raises(AttributeError):
        stats.latest_keys = 3  # type: ignore[misc]
