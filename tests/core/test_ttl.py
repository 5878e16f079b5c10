"""Time-to-live of newest versions (``latest_ttl_ms``, docs/semantics.md §2.15, §E14-§E18).

Each worked example of the docs runs against the reference model and against every store kind:
persistent with the write-ahead log, persistent without it (a 1 MiB memory limit, so the write
buffer is small), and in memory. A wrong model is caught without a store; a store that differs
from the docs is caught by the same assertions. The random checks are in ``test_properties.py``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import verstore
from reference_model import NOT_PUT, VALID_TO_UNDEFINED, ReferenceModel, as_tuple

KINDS = ["model", "memory", "disk", "disk-no-wal"]
STORE_KINDS = KINDS[1:]


def open_kind(kind: str, path: Path, retention: int, interval: int | None, ttl: int | None) -> Any:
    config = {
        "history_retention_ms": retention,
        "segment_interval_ms": interval,
        "latest_ttl_ms": ttl,
    }
    if kind == "model":
        return ReferenceModel(**config)
    if kind == "memory":
        return verstore.VersionedStore.in_memory(**config)
    if kind == "disk":
        return verstore.VersionedStore(path / "store", **config)
    return verstore.VersionedStore(
        path / "store", write_ahead_log=False, memory_limit_mb=1, **config
    )


def get(store: Any, key: bytes, as_of: int | None = None) -> tuple[bytes, int, int | None] | None:
    return as_tuple(store.get(key, as_of))


def versions(
    store: Any, key: bytes, lo: int | None = None, hi: int | None = None
) -> list[tuple[bytes, int, int | None] | None]:
    return [as_tuple(r) for r in store.versions(key, lo, hi)]


def latest_keys(store: Any) -> int:
    if isinstance(store, ReferenceModel):
        return store.counted_keys()
    return int(store.stats().latest_keys)


def expired_keys(store: Any) -> int:
    if isinstance(store, ReferenceModel):
        return store.ttl_expired_keys
    return int(store.stats().ttl_expired_keys)


# ------------------------------------------------------------------------------------ §E14


@pytest.mark.parametrize("late_first", [False, True], ids=["in-order", "late-write-last"])
@pytest.mark.parametrize("kind", KINDS)
def test_e14_late_write_to_an_expired_key(kind: str, late_first: bool, tmp_path: Path) -> None:
    """R = 50, L = 100: ``k@850, x@960, k@955``. ``k@850`` has expired at ST = 960 (850 + 100),
    but the write at 955 is within the grace period (H = 910) and is accepted; the key was alive
    at 955 in event time only until 950, so the old version ends at 950 and 950-954 is a gap.
    Both arrival orders store the same versions and give the same reads (§2.9)."""
    store = open_kind(kind, tmp_path, 50, 10, 100)
    assert store.latest_ttl_ms == 100
    assert store.put(b"k", b"v", 850) == VALID_TO_UNDEFINED
    if late_first:
        assert store.put(b"k", b"w", 955) == VALID_TO_UNDEFINED
        assert store.put(b"x", b"x", 960) == VALID_TO_UNDEFINED
    else:
        assert store.put(b"x", b"x", 960) == VALID_TO_UNDEFINED
        assert get(store, b"k") is None  # expired: 850 + 100 <= 960
        # as of a past time an expired key answers while its life covered that time
        assert get(store, b"k", 930) == (b"v", 850, 950)
        assert get(store, b"k", 950) is None
        assert versions(store, b"k") == [(b"v", 850, 950)]  # its end 950 is above H = 910
        assert store.put(b"k", b"w", 955) == VALID_TO_UNDEFINED  # 955 + 100 > 960: live
    assert store.observed_stream_time == 960
    assert get(store, b"k") == (b"w", 955, None)
    assert get(store, b"k", 949) == (b"v", 850, 950)
    for gap in (950, 952, 954):
        assert get(store, b"k", gap) is None
    assert get(store, b"k", 955) == (b"w", 955, None)
    assert get(store, b"k", 909) is None  # below H: only a live newest value at or before it
    assert versions(store, b"k") == [(b"w", 955, None), (b"v", 850, 950)]
    assert versions(store, b"k", 950, 954) == []
    assert versions(store, b"k", 949, 954) == [(b"v", 850, 950)]
    assert versions(store, b"k", 0, 909) == []
    # the bucket width is max(I, L // 32) = 10; k@850's bucket [850, 860) retires at ST = 960
    assert latest_keys(store) == 2
    assert expired_keys(store) == (0 if late_first else 1)
    store.reclaim_expired()
    assert versions(store, b"k") == [(b"w", 955, None), (b"v", 850, 950)]
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_e14_an_expired_key_answers_as_of_its_life(kind: str, tmp_path: Path) -> None:
    """``v@920``, L = 50: once ST reaches 970 ``get(k)`` is None, ``get(k, 930)`` is ``v``
    valid to 970 while 930 is at or above the horizon, and None below it."""
    store = open_kind(kind, tmp_path, 40, 10, 50)
    store.put(b"k", b"v", 920)
    assert store.put(b"x", b"x", 969) == VALID_TO_UNDEFINED
    assert get(store, b"k") == (b"v", 920, None)  # 920 + 50 > 969: still live
    assert get(store, b"k", 925) == (b"v", 920, None)  # below H = 929: the live newest
    store.put(b"x", b"y", 970)
    assert get(store, b"k") is None
    assert get(store, b"k", 930) == (b"v", 920, 970)
    assert get(store, b"k", 969) == (b"v", 920, 970)
    assert get(store, b"k", 970) is None
    assert get(store, b"k", 929) is None  # below H = 930: only a live newest version
    assert versions(store, b"k") == [(b"v", 920, 970)]
    store.close()


# ------------------------------------------------------------------------------------ §E15


@pytest.mark.parametrize("offset", [-1, 0, 1], ids=["t+L-1", "t+L", "t+L+1"])
@pytest.mark.parametrize("other_key", [False, True], ids=["own-writes", "other-key"])
@pytest.mark.parametrize("kind", KINDS)
def test_e15_a_write_at_t_plus_l_minus_1_continues_at_t_plus_l_starts_anew(
    kind: str, offset: int, other_key: bool, tmp_path: Path
) -> None:
    """R = 50, L = 50, ``v@100``. A write at 149 continues the history (``v`` valid to 149); one
    at 150 starts a new one where the old ended, with no gap; one at 151 leaves a gap at 150.
    The same whether ST reached 150 through another key or through the write itself."""
    store = open_kind(kind, tmp_path, 50, 10, 50)
    store.put(b"k", b"v", 100)
    if other_key:
        store.put(b"x", b"x", 150)
        assert get(store, b"k") is None
    ts = 150 + offset
    assert store.put(b"k", b"w", ts) == VALID_TO_UNDEFINED
    end = min(ts, 150)
    assert get(store, b"k") == (b"w", ts, None)
    assert get(store, b"k", 120) == (b"v", 100, end)
    assert get(store, b"k", end - 1) == (b"v", 100, end)
    assert versions(store, b"k") == [(b"w", ts, None), (b"v", 100, end)]
    if offset > 0:
        assert get(store, b"k", 150) is None  # the gap [t + L, ts)
        assert versions(store, b"k", 150, 150) == []
    else:
        assert get(store, b"k", end) == (b"w", ts, None)
    store.close()


# ------------------------------------------------------------------------------------ §E16


@pytest.mark.parametrize("kind", KINDS)
def test_e16_ttl_below_retention_and_writes_expired_on_arrival(kind: str, tmp_path: Path) -> None:
    """R = 100, L = 10: a write in the grace period can be expired when it arrives. As the
    newest version its put returns ``ts + L`` (not -1, so a KIP-914 consumer does not forward
    it); written into history it returns ``min(next, ts + L)``."""
    store = open_kind(kind, tmp_path, 100, 10, 10)
    store.put(b"k", b"v", 50)
    store.put(b"x", b"x", 200)  # H = 100
    assert get(store, b"k") is None
    assert versions(store, b"k") == []  # k@50 ended at 60 <= H
    assert store.put(b"j", b"v", 105) == 115  # the newest, expired on arrival
    assert get(store, b"j") is None
    assert get(store, b"j", 105) == (b"v", 105, 115)
    assert get(store, b"j", 114) == (b"v", 105, 115)
    assert get(store, b"j", 115) is None
    assert get(store, b"j", 200) is None
    assert versions(store, b"j") == [(b"v", 105, 115)]
    assert store.put(b"m", b"new", 180) == 190  # 180 + 10 <= 200: expired as it arrived
    assert get(store, b"m") is None
    assert store.put(b"m", b"old", 101) == 111  # valid [101, 180), cut at 111
    assert get(store, b"m", 110) == (b"old", 101, 111)
    assert get(store, b"m", 111) is None
    assert get(store, b"m", 185) == (b"new", 180, 190)
    assert versions(store, b"m") == [(b"new", 180, 190), (b"old", 101, 111)]
    assert as_tuple(store.delete(b"j", 112)) == (b"v", 105, 115)  # as get(j, 112) gave it
    assert get(store, b"j", 111) == (b"v", 105, 112)
    assert store.put(b"x", b"y", 215) == VALID_TO_UNDEFINED  # H = 115
    # m@101 was cut at 111 <= H: gone, exactly; j@105 was ended by the tombstone at 112, so
    # it stays until its segment drops (§Q7), as without TTL
    assert versions(store, b"m") == [(b"new", 180, 190)]
    assert versions(store, b"j") == [(b"v", 105, 112)]
    assert get(store, b"j", 115) is None
    assert store.put(b"late", b"v", 115) == 125
    assert store.put(b"late", b"v", 114) == NOT_PUT
    # a tombstone has no TTL end: its put reports Kafka's valid-to, -1 as the newest version
    assert store.put(b"t", None, 120) == VALID_TO_UNDEFINED
    assert store.put(b"t", b"v", 130) == 140
    assert store.put(b"t", None, 125) == 130
    assert store.put(b"t", b"old", 118) == 120
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_e16_ttl_above_retention(kind: str, tmp_path: Path) -> None:
    """R = 10, L = 100: every accepted newest write is live when it arrives (ts >= ST - R >
    ST - L); an expired key answers reads at or above H until its end, none below."""
    store = open_kind(kind, tmp_path, 10, 10, 100)
    store.put(b"k", b"v", 50)
    store.put(b"x", b"x", 149)
    assert get(store, b"k") == (b"v", 50, None)
    store.put(b"x", b"x", 150)  # H = 140
    assert get(store, b"k") is None
    assert get(store, b"k", 149) == (b"v", 50, 150)
    assert get(store, b"k", 140) == (b"v", 50, 150)
    assert get(store, b"k", 139) is None  # below H
    assert get(store, b"k", 100) is None
    assert versions(store, b"k") == [(b"v", 50, 150)]
    assert versions(store, b"k", 0, 139) == []
    assert store.put(b"j", b"v", 140) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", 145) == VALID_TO_UNDEFINED  # 145 < 150: continues
    assert get(store, b"k", 144) == (b"v", 50, 145)
    assert versions(store, b"k") == [(b"w", 145, None), (b"v", 50, 145)]
    store.close()


# ------------------------------------------------------------------------------------ §E17


@pytest.mark.parametrize("stream_time", [129, 130], ids=["end=H+1", "end=H"])
@pytest.mark.parametrize("kind", KINDS)
def test_e17_versions_of_a_ttl_cut_version_at_the_horizon(
    kind: str, stream_time: int, tmp_path: Path
) -> None:
    """R = 20, L = 10, I = 100 (one segment holds everything, so segment expiry never drops
    anything here). A TTL-cut version ends at t + L, not at its stored valid-to, and is returned
    exactly while that end is above H; a version ended by its successor (even one starting at
    exactly t + L: it is not cut) stays until its segment drops (§Q7)."""
    store = open_kind(kind, tmp_path, 20, 100, 10)
    store.put(b"k", b"a", 100)
    store.put(b"k", b"b", 120)  # a: stored valid to 120, cut at 110
    store.put(b"j", b"a", 100)
    store.put(b"j", b"b", 110)  # a: valid to 110 = 100 + L, ended by its successor
    store.put(b"n", b"a", 100)  # the newest, expired at 110
    store.put(b"x", b"x", stream_time)
    horizon = stream_time - 20
    cut_visible = 110 > horizon
    assert versions(store, b"k") == [(b"b", 120, 130 if stream_time >= 130 else None)] + (
        [(b"a", 100, 110)] if cut_visible else []
    )
    assert versions(store, b"n") == ([(b"a", 100, 110)] if cut_visible else [])
    assert versions(store, b"j") == [(b"b", 110, 120), (b"a", 100, 110)]
    assert get(store, b"n", 109) == ((b"a", 100, 110) if cut_visible else None)
    assert get(store, b"j", 109) == ((b"a", 100, 110) if cut_visible else None)
    store.close()


# ------------------------------------------------------------------------------------ §E18


def churn(store: Any, rounds: int, keys_per_round: int, step: int) -> None:
    """Rounds of fresh keys, some with a second version and a tombstone, time moving on."""
    for r in range(rounds):
        for i in range(keys_per_round):
            key = b"key-%d-%d" % (r, i)
            ts = r * step + i
            store.put(key, b"v%d" % i, ts)
            if i % 3 == 0:
                store.put(key, b"w%d" % i, ts + 2)
            if i % 5 == 0:
                store.delete(key, ts + 4)


def full_reads(store: verstore.VersionedStore, keys: list[bytes]) -> dict[str, Any]:
    st = store.observed_stream_time
    horizon = st - store.history_retention_ms
    times = [None, *range(max(0, horizon - 3), st + 2)]
    bounds = [None, 0, horizon - 1, horizon, horizon + 1, st]
    out: dict[str, Any] = {"st": st, "latest_keys": store.stats().latest_keys}
    for key in keys:
        out[f"{key!r} get"] = [get(store, key, t) for t in times]
        out[f"{key!r} versions"] = [
            versions(store, key, lo, hi)
            for lo, hi in itertools.product(bounds, bounds)
            if lo is None or hi is None or lo <= hi
        ]
    for t in times:
        with store.scan(as_of=t) as scan:
            out[f"scan {t}"] = [b.to_pydict() for b in scan]
        out[f"get_batch {t}"] = store.get_batch(keys, as_of=t).to_pydict()
    with store.scan_versions(tombstones=True) as scan:
        out["scan_versions"] = [b.to_pydict() for b in scan]
    with store.scan_versions(from_time=horizon) as scan:
        out["scan_versions from H"] = [b.to_pydict() for b in scan]
    return out


def assert_only_reclaimed_values_left(
    before: list[dict[str, Any]], after: list[dict[str, Any]], retention_ms: int
) -> None:
    """A scan with tombstones shows what is stored: after a reclamation, the rows it lost are
    latest values (no newer version of their key) that ended at or below the horizon."""

    def rows(batches: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            row
            for b in batches
            for row in zip(b["key"], b["value"], b["timestamp"], b["valid_to"], strict=True)
        ]

    kept, gone = rows(after), rows(before)
    lost = [row for row in gone if row not in kept]
    assert all(row in gone for row in kept)
    newest = {}
    for key, _, timestamp, _ in gone:
        newest[key] = max(newest.get(key, timestamp), timestamp)
    st = max((r[2] for r in gone), default=-1)
    for key, value, timestamp, valid_to in lost:
        assert value is not None and timestamp == newest[key], (key, timestamp)
        assert valid_to is not None and valid_to <= st - retention_ms, (key, valid_to)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_e18_reclamation_changes_no_read(kind: str, tmp_path: Path) -> None:
    """R = 20, L = 10, I = 5: rounds of fresh keys that expire. ``reclaim_expired()`` drops the
    expired latest values in bulk and changes no read, no later put or delete result and no
    ``latest_keys``; the same after a reopen, and with every read equal to the model's."""
    store = open_kind(kind, tmp_path, 20, 5, 10)
    model = ReferenceModel(history_retention_ms=20, segment_interval_ms=5, latest_ttl_ms=10)
    churn(store, 12, 8, 15)
    churn(model, 12, 8, 15)
    keys = [*sorted(model.keys())[::5], b"key-11-0", b"key-11-7", b"missing"]
    before = full_reads(store, keys)
    assert before["latest_keys"] == model.counted_keys()
    store.reclaim_expired()
    assert store.stats().ttl_reclaims >= 1
    after = full_reads(store, keys)
    assert_only_reclaimed_values_left(before.pop("scan_versions"), after.pop("scan_versions"), 20)
    assert after == before
    for key in keys:
        assert versions(store, key) == versions(model, key)
        assert get(store, key, store.observed_stream_time - 20) == get(
            model, key, model.observed_stream_time - 20
        )
    # later writes: late writes to reclaimed keys, new keys, a jump in time
    late = [(b"key-9-1", 160), (b"key-10-0", 161), (b"key-3-3", 163), (b"new", 164)]
    for key, ts in late:
        assert store.put(key, b"late", ts) == model.put(key, b"late", ts)
        assert as_tuple(store.delete(key, ts + 1)) == as_tuple(model.delete(key, ts + 1))
    if kind != "memory":
        store.close()
        store = open_kind(kind, tmp_path, 20, 5, 10)
        again = full_reads(store, keys)
        store.reclaim_expired()
        after = full_reads(store, keys)
        assert_only_reclaimed_values_left(
            again.pop("scan_versions"), after.pop("scan_versions"), 20
        )
        assert after == again
    for key in [*keys, *(k for k, _ in late)]:
        assert versions(store, key) == versions(model, key)
        for t in range(140, 170):
            assert get(store, key, t) == get(model, key, t)
    assert store.stats().latest_keys == model.counted_keys()
    store.close()


# ------------------------------------------------------------------------------------ stats


@pytest.mark.parametrize("kind", KINDS)
def test_latest_keys_counts_live_keys_exact_to_one_bucket(kind: str, tmp_path: Path) -> None:
    """L = 64, I = 1: buckets are max(1, 64 // 32) = 2 wide. A key stops counting when its whole
    bucket has expired, (b + 1) W + L <= ST, one bucket after its own expiry at most; a
    key whose newest version is replaced or deleted is not an expiry."""
    store = open_kind(kind, tmp_path, 100, 1, 64)
    store.put(b"a", b"v", 10)  # bucket 5: [10, 12), retires at ST = 76
    store.put(b"b", b"v", 11)  # bucket 5
    store.put(b"c", b"v", 12)  # bucket 6: retires at ST = 78
    store.put(b"d", b"v", 13)
    store.delete(b"d", 14)  # not counted, never expired
    assert latest_keys(store) == 3
    store.put(b"x", b"x", 75)
    assert get(store, b"a") is None  # 10 + 64 <= 75
    assert latest_keys(store) == 4  # a's bucket has not retired yet
    assert expired_keys(store) == 0
    store.put(b"x", b"y", 76)
    assert get(store, b"b") is None
    assert latest_keys(store) == 2  # c and x
    assert expired_keys(store) == 2
    store.put(b"c", b"w", 77)  # c's newest replaced: no expiry, it counts in a new bucket
    store.advance_stream_time(80)
    assert latest_keys(store) == 2
    assert expired_keys(store) == 2
    store.put(b"a", b"again", 79)  # a new history for a
    assert latest_keys(store) == 3
    store.advance_stream_time(200)
    assert latest_keys(store) == 0
    assert expired_keys(store) == 5
    store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_without_ttl_nothing_expires(kind: str, tmp_path: Path) -> None:
    store = open_kind(kind, tmp_path, 10, 5, None)
    assert store.latest_ttl_ms is None
    store.put(b"k", b"v", 1)
    store.advance_stream_time(10**9)
    assert get(store, b"k") == (b"v", 1, None)
    store.reclaim_expired()
    stats = store.stats()
    assert (stats.latest_keys, stats.ttl_expired_keys, stats.ttl_reclaims) == (1, 0, 0)
    store.close()


# ------------------------------------------------------------------------------------ history


def test_group_history_applies_the_ttl_and_keeps_it_in_its_bytes() -> None:
    """GroupHistory: the rule of E14 for its one key; from_bytes may lower the TTL."""
    h = verstore.GroupHistory(history_retention_ms=50, segment_interval_ms=10, latest_ttl_ms=100)
    model = ReferenceModel(history_retention_ms=50, segment_interval_ms=10, latest_ttl_ms=100)
    for value, ts in [(b"v", 850), (b"x", 850), (b"w", 955), (None, 956), (b"z", 1060)]:
        assert h.put(value, ts) == model.put(b"", value, ts)
    restored = verstore.GroupHistory.from_bytes(
        h.to_bytes(), history_retention_ms=50, segment_interval_ms=10, latest_ttl_ms=100
    )
    for history in (h, restored):
        assert history.latest_ttl_ms == 100
        for t in [None, *range(840, 1070)]:
            assert as_tuple(history.get(t)) == get(model, b"", t), t
        assert [as_tuple(r) for r in history.versions()] == versions(model, b"")
    lower = verstore.GroupHistory.from_bytes(
        h.to_bytes(), history_retention_ms=50, segment_interval_ms=10, latest_ttl_ms=5
    )
    model.latest_ttl_ms = 5  # reads are a function of (versions, ST, L): the same history
    assert lower.latest_ttl_ms == 5
    for t in [None, *range(840, 1070)]:
        assert as_tuple(lower.get(t)) == get(model, b"", t), t
    assert [as_tuple(r) for r in lower.versions()] == versions(model, b"")
    assert lower.put(b"late", 1020) == model.put(b"", b"late", 1020)


# ------------------------------------------------------------------------------------ scans


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_scan_with_tombstones_adds_no_row_for_a_ttl_end(kind: str, tmp_path: Path) -> None:
    """Values carry their TTL end; tombstones keep Kafka's valid-to, and a TTL end is not a
    tombstone (§2.15): between a value's end and the next version there is no row."""
    store = open_kind(kind, tmp_path, 100, 10, 10)
    store.put(b"k", b"a", 100)
    store.delete(b"k", 130)  # a: stored valid to 130, cut at 110
    store.put(b"k", b"b", 140)
    store.put(b"x", b"x", 200)  # H = 100; b and x have expired
    with store.scan_versions(tombstones=True) as scan:
        rows = [r for batch in scan for r in batch.to_pylist()]
    assert [(r["key"], r["value"], r["timestamp"], r["valid_to"]) for r in rows] == [
        (b"k", b"b", 140, 150),
        (b"k", None, 130, 140),
        (b"k", b"a", 100, 110),
        (b"x", b"x", 200, None),
    ]
    with store.scan() as scan:
        assert [r["key"] for batch in scan for r in batch.to_pylist()] == [b"x"]
    with store.scan(as_of=145) as scan:
        assert [r for batch in scan for r in batch.to_pylist()] == [
            {"key": b"k", "value": b"b", "timestamp": 140, "valid_to": 150}
        ]
    store.close()
