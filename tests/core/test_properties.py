"""Property tests: the persistent stores, the in-memory store and ``reference_model`` agree.

A hypothesis state machine drives a persistent store with the write-ahead log, one without it
(its write buffer in front of RocksDB), an in-memory store and the model with random puts,
deletes, point reads, range reads, scans, reopens, rounds of fresh keys that expire, and
reclamations of expired latest values; a second test replays the accepted writes of a random
history in another order (docs/semantics.md §2.9, order independence) and checks that no read
changes. Retention and segment interval are tiny, and timestamps cluster around the grace
horizon and segment boundaries, so expiry (§2.6, §5) and segment moves (§3, §E8) happen in
almost every example. Most examples also have a time-to-live of newest versions (§2.15) below
or above the retention, and times cluster around ``t + L`` and the end of a key's TTL bucket.
"""

from __future__ import annotations

import copy
import itertools
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import verstore
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from reference_model import (
    NOT_PUT,
    VALID_TO_UNDEFINED,
    ReferenceModel,
    as_tuple,
    default_segment_interval,
    segment_id,
    trunc_div,
)

# Keys that prefix one another (b"a" < b"a\x00" < b"ab"), the empty key, and 0x00 / 0xff bytes
# next to the store's own 8-byte segment prefixes.
KEYS = [b"", b"a", b"a\x00", b"ab", b"\x00", b"\xff"]
RETENTIONS = [0, 5, 20, 50]
INTERVALS: list[int | None] = [1, 3, 10, 25, None]  # None: Kafka's default rule (2 000 here)
TTLS: list[int | None] = [None, 1, 7, 30]  # latest_ttl_ms: below, between and above RETENTIONS

# Two keys (a prefix pair) get most writes so that histories grow long.
keys_st = st.one_of(st.sampled_from(KEYS[1:4:2]), st.sampled_from(KEYS))
values_st = st.one_of(
    st.none(),
    st.sampled_from([b"", b"x", b"yy", b"\x00", b"\xff" * 3]),
    st.binary(max_size=6),
)

#: ``VERSTORE_LONG_TESTS=1``: the long run, every property test at its full size (``make test``
#: and CI run the small size; README.md, tests).
LONG = os.environ.get("VERSTORE_LONG_TESTS") == "1"

MACHINE_SETTINGS = settings(
    max_examples=100 if LONG else 25,
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REPLAY_SETTINGS = settings(
    max_examples=100 if LONG else 25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def records(result: list[Any]) -> list[tuple[bytes, int, int | None] | None]:
    return [as_tuple(r) for r in result]


def ttl_times(model: ReferenceModel, key: bytes) -> list[int]:
    """Times where TTL decides (§2.15): each version's t + L - 1 and t + L, the newest's
    t + L + 1 and its bucket's end + L (where it stops being counted), and ST - L, where a
    write starts to be expired on arrival."""
    ttl = model.latest_ttl_ms
    if ttl is None:
        return []
    times = model.timestamps(key)
    out = [t + ttl + d for t in times[-3:] for d in (-1, 0)]
    if times:
        width = model.bucket_ms()
        bucket_end = (times[-1] // width + 1) * width
        out += [times[-1] + ttl + 1, bucket_end + ttl - 1, bucket_end + ttl]
    out += [model.observed_stream_time - ttl + d for d in (-1, 0, 1)]
    return [t for t in out if t >= 0]


def write_times(
    stream_time: int,
    retention: int,
    interval: int,
    existing: list[int] | None = None,
    ttl_candidates: list[int] | None = None,
) -> st.SearchStrategy[int]:
    """Write timestamps: around the grace horizon, around segment boundaries, out of order,
    slightly ahead, the key's own version timestamps (replacements), times where the TTL
    decides, and now and then a jump of more than R that expires segments."""
    base = max(stream_time, 0)
    lo = max(0, stream_time - retention - 5)
    hi = base + min(3 * interval, retention + 3)
    near = [stream_time - retention - 1, stream_time - retention, stream_time, stream_time + 1]
    boundaries = [
        k * interval + d
        for k in range(trunc_div(lo, interval), trunc_div(hi, interval) + 2)
        for d in (-1, 0, 1)
    ]
    candidates = sorted({t for t in near + boundaries if 0 <= t <= base + 3 * interval})
    # one_of picks its branches uniformly, so repeating a branch weights it
    options = [st.integers(lo, hi)] * 3 + [st.sampled_from(candidates)] * 2
    options.append(st.integers(base + retention, base + retention + 2 * interval + 2))
    recent = [t for t in existing or [] if t >= lo]
    if recent:
        # replace a version, replace the newest, or write before the key's newest
        options += [st.sampled_from(recent), st.just(recent[-1])]
        if recent[-1] > lo:
            options += [st.integers(lo, recent[-1] - 1)] * 3
    if ttl_candidates:
        options += [st.sampled_from(ttl_candidates)] * 2
    return st.one_of(options)


def read_times(
    stream_time: int, retention: int, interval: int, extra: list[int] | None = None
) -> st.SearchStrategy[int]:
    """Read bounds (>= 0): around the horizon H (H-1 is expired, H is not), ST, boundaries,
    and ``extra`` (the key's TTL ends)."""
    horizon = stream_time - retention
    base = max(stream_time, 0)
    lo = max(0, horizon - interval - 3)
    hi = base + interval + 2
    near = [0, horizon - 1, horizon, horizon + 1, stream_time, stream_time + 1]
    boundaries = [
        k * interval + d
        for k in range(trunc_div(lo, interval), trunc_div(hi, interval) + 1)
        for d in (-1, 0)
    ]
    candidates = sorted({t for t in near + boundaries + (extra or []) if t >= 0})
    return st.one_of(st.integers(lo, hi), st.sampled_from(candidates))


def range_bounds(
    stream_time: int, retention: int, interval: int, extra: list[int] | None = None
) -> st.SearchStrategy[int | None]:
    """versions() bounds: None, negative values, or read times."""
    return st.one_of(
        st.none(),
        st.integers(-3 * interval - 2, -1),
        read_times(stream_time, retention, interval, extra),
    )


def latest_keys(store: Any) -> int:
    """``stats().latest_keys``, or the model's count of it."""
    if isinstance(store, ReferenceModel):
        return store.counted_keys()
    return int(store.stats().latest_keys)


def scan_rows(scan: Any) -> list[tuple[bytes, bytes, int, int | None]]:
    out: list[tuple[bytes, bytes, int, int | None]] = []
    with scan:
        for batch in scan:
            d = batch.to_pydict()
            out += zip(d["key"], d["value"], d["timestamp"], d["valid_to"], strict=True)
    return out


class StoreMachine(RuleBasedStateMachine):
    """Persistent stores (write-ahead log on and off) and an in-memory store, each checked
    against a model fed the same operations. The models are one until a reopen lowers or adds
    the TTL of a persistent store (§2.15): its model then continues as a copy with that TTL,
    since reads are a function of the versions, ST and L."""

    base_dir: Path
    counter = itertools.count()

    @initialize(
        retention=st.sampled_from(RETENTIONS),
        interval=st.sampled_from(INTERVALS),
        ttl=st.sampled_from(TTLS),
    )
    def open_stores(self, retention: int, interval: int | None, ttl: int | None) -> None:
        self.config = {"history_retention_ms": retention, "segment_interval_ms": interval}
        n = next(self.counter)
        self.paths = {"disk": self.base_dir / f"store{n}", "nowal": self.base_dir / f"nowal{n}"}
        self.model = ReferenceModel(**self.config, latest_ttl_ms=ttl)
        self.models = {"disk": self.model, "nowal": self.model, "memory": self.model}
        self.stores: dict[str, verstore.VersionedStore] = {
            "disk": self._open("disk"),
            "nowal": self._open("nowal"),
            "memory": verstore.VersionedStore.in_memory(**self.config, latest_ttl_ms=ttl),
        }
        self.retention = retention
        self.interval = self.model.segment_interval_ms
        self.fresh = itertools.count()
        # stats().ttl_expired_keys counts from when a store object opened
        self.expired_base = dict.fromkeys(self.stores, 0)
        for store in self.stores.values():
            assert store.history_retention_ms == retention
            assert store.segment_interval_ms == self.interval
            assert store.latest_ttl_ms == ttl

    def _open(self, name: str) -> verstore.VersionedStore:
        ttl = self.models[name].latest_ttl_ms
        if name == "disk":
            return verstore.VersionedStore(self.paths[name], **self.config, latest_ttl_ms=ttl)
        return verstore.VersionedStore(
            self.paths[name],
            write_ahead_log=False,
            memory_limit_mb=1,
            latest_ttl_ms=ttl,
            **self.config,
        )

    def teardown(self) -> None:
        for store in getattr(self, "stores", {}).values():
            store.close()
        for path in getattr(self, "paths", {}).values():
            shutil.rmtree(path, ignore_errors=True)

    @property
    def stream_time(self) -> int:
        return self.model.observed_stream_time

    def _rtime(self, key: bytes) -> st.SearchStrategy[int]:
        extra = ttl_times(self.model, key)
        return read_times(self.stream_time, self.retention, self.interval, extra)

    def _same(
        self,
        what: str,
        expect: Callable[[ReferenceModel], Any],
        call: Callable[[verstore.VersionedStore], Any],
    ) -> None:
        """Every store's ``call`` equals ``expect`` of its model (called once per model)."""
        by_model: dict[int, Any] = {}
        for model in self.models.values():
            if id(model) not in by_model:
                by_model[id(model)] = expect(model)
        got = {name: call(store) for name, store in self.stores.items()}
        note(f"{what} -> models {list(by_model.values())}, stores {got}")
        for name, result in got.items():
            assert result == by_model[id(self.models[name])], name

    # ------------------------------------------------------------------ writes
    # Several write rules so that about half of the steps write.

    def _write_time(self, key: bytes, data: st.DataObject) -> int:
        existing = self.model.timestamps(key)
        strategy = write_times(
            self.stream_time, self.retention, self.interval, existing, ttl_times(self.model, key)
        )
        return data.draw(strategy, label="timestamp")

    def _put(self, key: bytes, value: bytes | None, ts: int) -> None:
        self._same(
            f"put {key!r}@{ts}", lambda m: m.put(key, value, ts), lambda s: s.put(key, value, ts)
        )

    @rule(key=keys_st, value=values_st, data=st.data())
    def put(self, key: bytes, value: bytes | None, data: st.DataObject) -> None:
        self._put(key, value, self._write_time(key, data))

    @rule(key=keys_st, value=st.sampled_from([b"", b"v"]), data=st.data())
    def put_value(self, key: bytes, value: bytes, data: st.DataObject) -> None:
        self._put(key, value, self._write_time(key, data))

    @rule(key=keys_st, data=st.data())
    def put_tombstone(self, key: bytes, data: st.DataObject) -> None:
        self._put(key, None, self._write_time(key, data))

    @rule(key=keys_st, data=st.data())
    def delete(self, key: bytes, data: st.DataObject) -> None:
        ts = self._write_time(key, data)
        self._same(
            f"delete {key!r}@{ts}",
            lambda m: as_tuple(m.delete(key, ts)),
            lambda s: as_tuple(s.delete(key, ts)),
        )

    @rule(count=st.integers(1, 4), late=st.integers(0, 3), past=st.sampled_from([-1, 0, 1]))
    def churn(self, count: int, late: int, past: int) -> None:
        """Fresh keys written once, then stream time advanced to where their bucket retires
        and, past the retention, becomes reclaimable (§2.13, §2.15): the churn TTL is for."""
        ts = max(self.stream_time - late, 0)
        keys = [b"churn%d" % next(self.fresh) for _ in range(count)]
        self._same(
            f"put_batch {keys}@{ts}",
            lambda m: [m.put(key, b"c", ts) for key in keys],
            lambda s: s.put_batch(keys, [b"c"] * count, [ts] * count).to_pylist(),
        )
        ttl = self.model.latest_ttl_ms
        width = self.interval if ttl is None else self.model.bucket_ms()
        target = (ts // width + 1) * width + (ttl or 0) + self.retention + past
        self._same(
            f"advance to {target}",
            lambda m: m.advance_stream_time(target),
            lambda s: s.advance_stream_time(target),
        )

    # One store at a time: a reclamation compacts (and flushes a store without a log).
    @rule(name=st.sampled_from(["disk", "nowal", "memory"]))
    def reclaim(self, name: str) -> None:
        """Dropping expired latest values changes nothing a read can see (§E18)."""
        self.stores[name].reclaim_expired()

    # ------------------------------------------------------------------ reads

    @rule(key=keys_st, latest=st.booleans(), data=st.data())
    def get(self, key: bytes, latest: bool, data: st.DataObject) -> None:
        if latest:
            self._same(
                f"get {key!r}", lambda m: as_tuple(m.get(key)), lambda s: as_tuple(s.get(key))
            )
            self._same(
                f"get {key!r}, None",
                lambda m: as_tuple(m.get(key)),
                lambda s: as_tuple(s.get(key, None)),
            )
            return
        as_of = data.draw(self._rtime(key), label="as_of")
        self._same(
            f"get {key!r} as of {as_of}",
            lambda m: as_tuple(m.get(key, as_of)),
            lambda s: as_tuple(s.get(key, as_of)),
        )

    @rule(key=keys_st, ascending=st.booleans(), data=st.data())
    def versions(self, key: bytes, ascending: bool, data: st.DataObject) -> None:
        extra = ttl_times(self.model, key)
        bounds = range_bounds(self.stream_time, self.retention, self.interval, extra)
        lo = data.draw(bounds, label="from_time")
        hi = data.draw(bounds, label="to_time")
        if lo is not None and hi is not None and lo > hi:
            # from_time > to_time is a ValueError (§2.5); equal bounds are allowed
            for store in self.stores.values():
                with pytest.raises(ValueError, match="time"):
                    store.versions(key, lo, hi, ascending)
            lo, hi = hi, lo
        self._same(
            f"versions {key!r} [{lo}, {hi}]",
            lambda m: records(m.versions(key, lo, hi, ascending)),
            lambda s: records(s.versions(key, from_time=lo, to_time=hi, ascending=ascending)),
        )

    @rule(data=st.data())
    def scan(self, data: st.DataObject) -> None:
        """scan() and get_batch() of every key, churned ones too, equal the model key by key:
        expired keys are left out of scan() (§2.12, §2.15)."""
        as_of = data.draw(st.none() | self._rtime(b"a"), label="as_of")
        keys = sorted(set(self.model.keys()) | set(KEYS))

        def scanned(model: ReferenceModel) -> list[tuple[bytes, bytes, int, int | None]]:
            out = []
            for key in keys:
                record = model.get(key, as_of)
                if record is not None:
                    out.append((key, *record))
            return out

        def batch(model: ReferenceModel) -> dict[str, list[Any]]:
            rows = [model.get(key, as_of) for key in keys]
            return {
                "value": [r and r.value for r in rows],
                "timestamp": [r and r.timestamp for r in rows],
                "valid_to": [r and r.valid_to for r in rows],
            }

        self._same(f"scan as of {as_of}", scanned, lambda s: scan_rows(s.scan(as_of=as_of)))
        self._same("get_batch", batch, lambda s: s.get_batch(keys, as_of).to_pydict())
        bounds = range_bounds(self.stream_time, self.retention, self.interval)
        lo = data.draw(bounds, label="from_time")
        hi = data.draw(bounds, label="to_time")
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo

        def scanned_versions(model: ReferenceModel) -> list[tuple[bytes, bytes, int, int | None]]:
            return [(key, *r) for key in keys for r in model.versions(key, lo, hi)]

        self._same(
            f"scan_versions [{lo}, {hi}]",
            scanned_versions,
            lambda s: scan_rows(s.scan_versions(from_time=lo, to_time=hi)),
        )

    @rule()
    def whole_state(self) -> None:
        """Every key: latest, full history, and the point read at every interesting time."""
        horizon = self.stream_time - self.retention
        times = range(max(0, horizon - 2), max(self.stream_time, 0) + 2)
        for key in KEYS:
            for name, store in self.stores.items():
                model = self.models[name]
                expected = records(model.versions(key))
                history = store.versions(key)
                assert records(history) == expected, name
                for record in history:
                    # Q3: equal (and hashed) by all three fields
                    twin = verstore.VersionedRecord(record.value, record.timestamp, record.valid_to)
                    assert twin == record
                    assert hash(twin) == hash(record)
                assert records(store.versions(key, ascending=True)) == expected[::-1], name
                expected_at = [as_tuple(model.get(key, as_of)) for as_of in times]
                assert [as_tuple(store.get(key, as_of)) for as_of in times] == expected_at, name

    # ------------------------------------------------------------------ lifecycle

    # Opening RocksDB costs tens of ms (file syncs), so the extra open is the rarer case.
    @rule(
        name=st.sampled_from(["disk", "nowal"]),
        with_block=st.sampled_from([False] * 3 + [True]),
        new_ttl=st.sampled_from([False] * 3 + [True]),
        data=st.data(),
    )
    def reopen(self, name: str, with_block: bool, new_ttl: bool, data: st.DataObject) -> None:
        """Reopen, now and then adding or lowering the TTL, as reopening allows (§2.15)."""
        store = self.stores[name]
        store.flush()
        store.close()
        store.close()  # idempotent
        if with_block:
            with self._open(name) as again:
                assert again.observed_stream_time == self.stream_time
        if new_ttl:
            old = self.models[name].latest_ttl_ms
            ttl = data.draw(st.integers(1, old if old is not None else 40), label="new ttl")
            self.models[name] = copy.deepcopy(self.models[name])
            self.models[name].latest_ttl_ms = ttl
        self.stores[name] = self._open(name)
        assert self.stores[name].latest_ttl_ms == self.models[name].latest_ttl_ms
        self.expired_base[name] = self.models[name].ttl_expired_keys

    @invariant()
    def same_stream_time_and_counts(self) -> None:
        if not hasattr(self, "stores"):
            return
        for name, store in self.stores.items():
            model = self.models[name]
            assert store.observed_stream_time == self.stream_time, name
            stats = store.stats()
            assert stats.latest_keys == model.counted_keys(), name
            expired = model.ttl_expired_keys - self.expired_base[name]
            assert stats.ttl_expired_keys == expired, name


def test_stores_match_reference_model(tmp_path: Path) -> None:
    class Machine(StoreMachine):
        base_dir = tmp_path

    run_state_machine_as_test(Machine, settings=MACHINE_SETTINGS)


# ---------------------------------------------------------------------- replay order


Ops = list[tuple[str, bytes, bytes | None, int]]


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], Ops]:
    """(config, ops): a random write history (ops are ("put"|"delete", key, value, ts)).

    With a TTL the times cluster where it decides, so that histories hold late writes to
    expired keys, writes that start a new history and writes expired on arrival (§2.15)."""
    retention = draw(st.sampled_from(RETENTIONS))
    interval = draw(st.sampled_from([1, 3, 10, 25]))
    config = {
        "history_retention_ms": retention,
        "segment_interval_ms": interval,
        "latest_ttl_ms": draw(st.sampled_from(TTLS)),
    }
    model = ReferenceModel(**config)
    ops: Ops = []
    for _ in range(draw(st.integers(0, 40))):
        key = draw(keys_st)
        existing = model.timestamps(key)
        strategy = write_times(
            model.observed_stream_time, retention, interval, existing, ttl_times(model, key)
        )
        ts = draw(strategy)
        if draw(st.integers(0, 4)) == 0:
            ops.append(("delete", key, None, ts))
            model.delete(key, ts)
        else:
            value = draw(values_st)
            ops.append(("put", key, value, ts))
            model.put(key, value, ts)
    return config, ops


def full_reads(store: Any, stream_time: int, retention: int, interval: int) -> dict[str, Any]:
    horizon = stream_time - retention
    times = range(max(0, horizon - 2), max(stream_time, 0) + 2)
    bounds = [None, -1, 0, horizon - 1, horizon, stream_time]
    bounds += [k * interval for k in range(segment_id(max(horizon, 0), interval), 3)]
    out: dict[str, Any] = {
        "observed_stream_time": store.observed_stream_time,
        "latest_keys": latest_keys(store),  # a function of (versions, ST, L) too
    }
    for key in KEYS:
        out[f"{key!r} latest"] = as_tuple(store.get(key))
        out[f"{key!r} at"] = [as_tuple(store.get(key, t)) for t in times]
        for lo, hi in itertools.product(bounds, bounds):
            if lo is None or hi is None or lo <= hi:
                out[f"{key!r} [{lo}, {hi}]"] = records(store.versions(key, lo, hi))
    return out


@REPLAY_SETTINGS
@given(history=histories(), data=st.data())
def test_replay_in_another_order_gives_same_reads(
    tmp_path_factory: pytest.TempPathFactory,
    history: tuple[dict[str, Any], Ops],
    data: st.DataObject,
) -> None:
    """§2.9: replaying the same accepted writes in another order changes no read, with a TTL
    too (§2.15: the end of every version depends on the versions, ST and L alone).

    Writes to one (key, timestamp) replace each other, so their relative order is kept. Any
    order in which every write is still accepted works: sorting by ``ts + u`` with a jitter
    ``0 <= u <= R`` (the same for all writes to one (key, timestamp)) does that, since every
    write sorted before one at ``ts`` has a timestamp ``<= ts + R``, so the running ST never
    passes ``ts + R``.
    """
    config, ops = history
    retention = config["history_retention_ms"]
    interval = config["segment_interval_ms"]
    original = verstore.VersionedStore.in_memory(**config)
    model = ReferenceModel(**config)
    accepted: list[tuple[bytes, bytes | None, int]] = []
    for kind, key, value, ts in ops:
        if kind == "put":
            code = model.put(key, value, ts)
            assert original.put(key, value, ts) == code
            if code != NOT_PUT:
                accepted.append((key, value, ts))
        else:
            grace_ok = ts >= model.observed_stream_time - retention
            expected = as_tuple(model.delete(key, ts))
            assert as_tuple(original.delete(key, ts)) == expected
            if grace_ok:
                accepted.append((key, None, ts))

    slots = sorted({(key, ts) for key, _, ts in accepted})
    jitter = data.draw(
        st.lists(st.integers(0, retention), min_size=len(slots), max_size=len(slots)),
        label="jitter",
    )
    shift = dict(zip(slots, jitter, strict=True))
    replay = sorted(accepted, key=lambda w: w[2] + shift[(w[0], w[2])])
    reopen_at = data.draw(
        st.sets(st.integers(0, max(len(replay) - 1, 0)), max_size=3), label="reopen_at"
    )
    note(f"replay order: {replay}")

    path = tmp_path_factory.mktemp("replay")
    disk = verstore.VersionedStore(path, **config)
    memory = verstore.VersionedStore.in_memory(**config)
    replayed_model = ReferenceModel(**config)
    try:
        for i, (key, value, ts) in enumerate(replay):
            code = replayed_model.put(key, value, ts)
            assert code != NOT_PUT
            assert disk.put(key, value, ts) == code
            assert memory.put(key, value, ts) == code
            if i in reopen_at:
                disk.close()
                disk = verstore.VersionedStore(path, **config)
        stream_time = model.observed_stream_time
        expected = full_reads(model, stream_time, retention, interval)
        assert full_reads(replayed_model, stream_time, retention, interval) == expected
        assert full_reads(original, stream_time, retention, interval) == expected
        assert full_reads(memory, stream_time, retention, interval) == expected
        assert full_reads(disk, stream_time, retention, interval) == expected
        memory.reclaim_expired()  # reclamation changes no read (§E18)
        assert full_reads(memory, stream_time, retention, interval) == expected
        disk.reclaim_expired()
        disk.close()
        with verstore.VersionedStore(path, **config) as reopened:
            assert full_reads(reopened, stream_time, retention, interval) == expected
    finally:
        disk.close()
        memory.close()
        original.close()
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- worked examples
# The examples of docs/semantics.md, run against the model too so that a wrong model is caught
# without a store.

KINDS = ["model", "memory", "disk"]


def open_kind(kind: str, path: Path, retention: int, interval: int | None) -> Any:
    config = {"history_retention_ms": retention, "segment_interval_ms": interval}
    if kind == "model":
        return ReferenceModel(**config)
    if kind == "memory":
        return verstore.VersionedStore.in_memory(**config)
    return verstore.VersionedStore(path / "store", **config)


@pytest.mark.parametrize("kind", KINDS)
def test_example_expired_versions_stay_until_segment_drop(kind: str, tmp_path: Path) -> None:
    """§E9 example: versions whose valid-to <= H are returned until their segment drops."""
    store = open_kind(kind, tmp_path, 300_000, 100_000)
    assert store.put(b"k", b"v_old", 0) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v", 99_990) == VALID_TO_UNDEFINED
    assert store.put(b"other", b"x", 399_990) == VALID_TO_UNDEFINED
    assert store.observed_stream_time == 399_990
    assert records(store.versions(b"k", 0, 99_990)) == [
        (b"v", 99_990, None),
        (b"v_old", 0, 99_990),
    ]
    assert as_tuple(store.get(b"k", 99_989)) is None  # expired query: only the latest
    store.put(b"other", b"y", 400_000)  # H = 100 000 reaches segment 1: segment 0 drops
    assert records(store.versions(b"k", 0, 99_990)) == [(b"v", 99_990, None)]
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_example_q1_tombstone_at_latest_timestamp_is_kept(kind: str, tmp_path: Path) -> None:
    store = open_kind(kind, tmp_path, 100, 10)
    store.put(b"k", b"v", 10)
    assert store.put(b"k", None, 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"w", 5) == 10
    assert store.get(b"k") is None
    assert as_tuple(store.get(b"k", 7)) == (b"w", 5, 10)
    assert records(store.versions(b"k")) == [(b"w", 5, 10)]
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_example_q2_versions_scans_later_segments(kind: str, tmp_path: Path) -> None:
    store = open_kind(kind, tmp_path, 300_000, 100_000)
    store.put(b"k", b"v1", 10)
    store.put(b"k", b"v2", 100_010)
    assert as_tuple(store.get(b"k", 50)) == (b"v1", 10, 100_010)
    assert records(store.versions(b"k", 0, 50)) == [(b"v1", 10, 100_010)]
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_example_return_codes_and_grace(kind: str, tmp_path: Path) -> None:
    """§2.1 table, §2.4 and the exact grace boundary (§E3), with R = 10, I = 4."""
    store = open_kind(kind, tmp_path, 10, 4)
    assert store.delete(b"k", 20) is None  # unknown key: still writes a tombstone
    assert store.put(b"k", b"a", 12) == 20  # bounded by that tombstone (degenerate row)
    assert store.put(b"k", b"b", 25) == VALID_TO_UNDEFINED  # ST = 25, H = 15
    assert store.put(b"k", b"b2", 25) == VALID_TO_UNDEFINED  # replace the newest
    assert store.put(b"k", b"", 16) == 20  # out of order; an empty value is a value
    assert store.put(b"k", b"", 16) == 20  # replace an older version: its valid-to
    assert store.put(b"k", b"c", 15) == 16  # ts == H is accepted
    assert store.put(b"k", b"late", 14) == NOT_PUT  # ts == H - 1 is not
    assert store.delete(b"k", 14) is None
    assert store.observed_stream_time == 25
    assert store.put(b"k", b"z", 30) == VALID_TO_UNDEFINED  # ST = 30, H = 20
    assert store.get(b"k", 19) is None  # expired, and the latest is newer than 19
    assert store.get(b"k", 20) is None  # the tombstone
    assert store.delete(b"k", 20) is None  # replaces the tombstone with a tombstone
    assert as_tuple(store.delete(b"k", 27)) == (b"b2", 25, 30)  # the pre-delete valid-to
    assert as_tuple(store.get(b"k", 26)) == (b"b2", 25, 27)
    assert as_tuple(store.get(b"k")) == (b"z", 30, None)
    # segment_id(H) = 5: a@12 (valid-to 15) and c@15 (16) are dropped, ""@16 (20) is not
    assert records(store.versions(b"k")) == [(b"z", 30, None), (b"b2", 25, 27), (b"", 16, 20)]
    assert records(store.versions(b"k", 0, 19)) == []  # to < H: only the latest counts
    assert records(store.versions(b"k", 0, 20, ascending=True)) == [(b"", 16, 20)]
    assert store.observed_stream_time == 30
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_example_zero_retention(kind: str, tmp_path: Path) -> None:
    """§E13: R = 0 accepts ts == ST, rejects ts < ST; old versions stay until their segment
    drops (I = 2 000 by default)."""
    store = open_kind(kind, tmp_path, 0, None)
    assert store.segment_interval_ms == 2_000
    store.put(b"k", b"a", 100)
    assert store.put(b"k", b"b", 200) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"c", 199) == NOT_PUT
    assert store.put(b"k", b"c", 200) == VALID_TO_UNDEFINED
    assert store.get(b"k", 150) is None  # expired: only the newest, and it is newer
    assert as_tuple(store.get(b"k", 200)) == (b"c", 200, None)
    assert records(store.versions(b"k")) == [(b"c", 200, None), (b"a", 100, 200)]
    assert records(store.versions(b"k", 0, 150)) == []
    store.put(b"j", b"x", 2_000)
    assert records(store.versions(b"k")) == [(b"c", 200, None)]
    store.close()


def test_java_division_and_default_interval() -> None:
    assert [trunc_div(t, 3) for t in (-7, -4, -3, -2, -1, 0, 1, 2, 3, 4)] == [
        -2, -1, -1, 0, 0, 0, 0, 0, 1, 1,
    ]  # fmt: skip
    table = {
        0: 2_000, 6_000: 2_000, 30_000: 10_000, 60_000: 20_000, 100_000: 20_000,
        200_000: 40_000, 300_000: 60_000, 720_000: 60_000, 1_200_000: 100_000,
        3_600_000: 300_000, 7_200_000: 300_000, 86_400_000: 3_600_000,
    }  # fmt: skip
    for retention, interval in table.items():
        assert default_segment_interval(retention) == interval
        assert verstore.default_segment_interval_ms(retention) == interval
        with verstore.VersionedStore.in_memory(history_retention_ms=retention) as store:
            assert store.segment_interval_ms == interval


@settings(max_examples=30 if LONG else 10, deadline=None, database=None)
@given(
    retention=st.integers(0, 60),
    interval=st.integers(1, 7),
    first=st.integers(0, 30),
    second=st.integers(0, 120),
)
def test_expiry_horizon_is_segment_granular(
    retention: int, interval: int, first: int, second: int
) -> None:
    """§5: a version with valid-to vt is present iff segment_id(vt) >= segment_id(ST - R),
    including ST - R < 0 (truncation: -I < x < 0 is segment 0)."""
    config = {"history_retention_ms": retention, "segment_interval_ms": interval}
    with verstore.VersionedStore.in_memory(**config) as store:
        store.put(b"k", b"old", first)
        store.put(b"k", b"new", first + 1)
        code = store.put(b"other", b"x", second)
        model = ReferenceModel(**config)
        model.put(b"k", b"old", first)
        model.put(b"k", b"new", first + 1)
        assert model.put(b"other", b"x", second) == code
        horizon = max(first + 1, second) - retention
        present = segment_id(first + 1, interval) >= segment_id(horizon, interval)
        expected = [(b"new", first + 1, None)] + ([(b"old", first, first + 1)] if present else [])
        assert records(model.versions(b"k")) == expected
        assert records(store.versions(b"k")) == expected
