"""Puts that skip the read (docs/semantics.md §2.16): a value put at or after the observed stream
time into a store whose latest values outgrow its cache is a push, and the version it replaces
stays beside the new one until it is settled. Every read answers as the reference model does, on
the read-free path, after puts that read and settle, after ``settle()``, after a reopen, and after
a writer killed between its pushes and their settling; ``stats().latest_keys`` is exact once the
store is settled and at most ``unsettled_puts`` too low before.

The stores here have a 1 MB memory cap, whose cache of latest values holds a few thousand keys:
a few thousand keys take the read-free path, as millions do with the default budget.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import verstore
from reference_model import ReferenceModel, as_tuple

KEYS = 6_000
RETENTION = 100_000
INTERVAL = 10_000


def keys_of(n: int) -> list[bytes]:
    return [f"key-{i:05d}".encode() for i in range(n)]


def open_store(path: Path, *, wal: bool = True) -> verstore.VersionedStore:
    return verstore.VersionedStore(
        path,
        history_retention_ms=RETENTION,
        segment_interval_ms=INTERVAL,
        write_ahead_log=wal,
        memory_limit_mb=1,
    )


def in_order_rounds(rounds: int, start: int = 0) -> list[tuple[bytes, bytes, int]]:
    """Every key once per round, in time order: one time step per row."""
    rows = []
    t = start
    for r in range(rounds):
        for key in keys_of(KEYS):
            rows.append((key, f"{key.decode()}@{r}".encode(), t))
            t += 3
    return rows


def put_rows(store: verstore.VersionedStore, model: ReferenceModel, rows: list) -> list[int]:
    codes = []
    for start in range(0, len(rows), 2_500):
        chunk = rows[start : start + 2_500]
        got = store.put_batch(
            pa.array([k for k, _, _ in chunk], pa.binary()),
            pa.array([v for _, v, _ in chunk], pa.binary()),
            pa.array([t for _, _, t in chunk], pa.int64()),
        )
        codes.extend(got.to_pylist())
    expected = [model.put(k, v, t) for k, v, t in rows]
    assert codes == expected
    return codes


def check_reads(store: verstore.VersionedStore, model: ReferenceModel, seed: int) -> None:
    """Point reads at random times and in the history, batch reads, versions: as the model."""
    rng = random.Random(seed)
    st = model.observed_stream_time
    sample = rng.sample(keys_of(KEYS), 150)
    for key in sample:
        assert as_tuple(store.get(key)) == as_tuple(model.get(key))
        for t in [rng.randint(0, st + 1) for _ in range(4)] + [st - RETENTION - 1, st]:
            assert as_tuple(store.get(key, as_of=t)) == as_tuple(model.get(key, as_of=t)), t
        got = [as_tuple(r) for r in store.versions(key)]
        assert got == [as_tuple(r) for r in model.versions(key)], key
    probes = [rng.choice(keys_of(KEYS)) for _ in range(2_000)]
    times = [rng.randint(0, st) for _ in probes]
    batch = store.get_batch(pa.array(probes, pa.binary()), as_of=pa.array(times, pa.int64()))
    for i, (key, t) in enumerate(zip(probes, times, strict=True)):
        expected = model.get(key, as_of=t)
        value = batch.column("value")[i].as_py()
        assert value == (None if expected is None else expected.value), (key, t)


def live_keys(model: ReferenceModel) -> int:
    return sum(model.get(key) is not None for key in keys_of(KEYS))


@pytest.mark.parametrize("wal", [True, False], ids=["wal_on", "wal_off"])
def test_pushes_read_as_the_model_then_settle_exactly(tmp_path: Path, wal: bool) -> None:
    model = ReferenceModel(history_retention_ms=RETENTION, segment_interval_ms=INTERVAL)
    store = open_store(tmp_path / "s", wal=wal)
    put_rows(store, model, in_order_rounds(3))
    stats = store.stats()
    assert stats.unsettled_puts > 0, stats
    assert stats.latest_keys <= live_keys(model) <= stats.latest_keys + stats.unsettled_puts
    check_reads(store, model, 1)
    # Late writes and deletes read their keys and settle them on the way.
    rng = random.Random(5)
    late = sorted(rng.sample(keys_of(KEYS), 300))
    st = model.observed_stream_time
    late_rows = [(k, b"late", st - rng.randint(1, 3 * INTERVAL)) for k in late]
    put_rows(store, model, late_rows)
    for key in late[:50]:
        assert as_tuple(store.delete(key, st + 5)) == as_tuple(model.delete(key, st + 5))
    put_rows(store, model, in_order_rounds(1, start=st + 10))
    check_reads(store, model, 2)
    store.settle()
    assert (store.stats().latest_keys, store.stats().unsettled_puts) == (live_keys(model), 0)
    check_reads(store, model, 3)
    store.close()
    store = open_store(tmp_path / "s", wal=wal)
    assert store.stats().latest_keys == live_keys(model)
    check_reads(store, model, 4)
    store.close()


def test_settle_is_exact_and_changes_no_read_in_memory_too() -> None:
    store = verstore.VersionedStore.in_memory(
        history_retention_ms=RETENTION, segment_interval_ms=INTERVAL
    )
    model = ReferenceModel(history_retention_ms=RETENTION, segment_interval_ms=INTERVAL)
    put_rows(store, model, in_order_rounds(2))
    assert store.stats().unsettled_puts == 0, "in memory every put reads its key"
    store.settle()
    check_reads(store, model, 6)


WRITER = """
import sys, pyarrow as pa, verstore
path, keys, retention, interval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = verstore.VersionedStore(path, history_retention_ms=retention,
                                segment_interval_ms=interval, memory_limit_mb=1)
names = [f"key-{i:05d}".encode() for i in range(keys)]
t = 0
for r in range(1_000):
    for start in range(0, keys, 1_000):
        chunk = names[start:start + 1_000]
        times = list(range(t, t + 3 * len(chunk), 3))
        t += 3 * len(chunk)
        store.put_batch(pa.array(chunk, pa.binary()),
                        pa.array([n + b"@" + str(r).encode() for n in chunk], pa.binary()),
                        pa.array(times, pa.int64()))
        print(r, start, flush=True)
"""


def test_a_writer_killed_between_its_pushes_and_their_settling_loses_nothing(
    tmp_path: Path,
) -> None:
    """Pushes with the write-ahead log are acknowledged writes: a SIGKILL after them (nothing
    settled, the key count deferred) leaves a store that reads every acknowledged write and,
    recounted at the open, counts every key."""
    path = tmp_path / "s"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(KEYS), str(RETENTION), str(INTERVAL)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    done = []
    deadline = time.monotonic() + 120
    while len(done) < 3 * (KEYS // 1_000) + 2 and time.monotonic() < deadline:
        done.append(tuple(int(x) for x in child.stdout.readline().split()))
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    last_round, last_start = done[-1]
    store = open_store(path)
    stats = store.stats()
    assert stats.unsettled_puts == 0, "the open after a crash counts every key"
    assert stats.latest_keys == KEYS
    # Every acknowledged call is there, and the writer may have finished more than it told us
    # (lines still in the pipe, the call in flight): calls are atomic, so the store holds a
    # prefix of them, the calls up to its stream time.
    applied = store.observed_stream_time
    model = ReferenceModel(history_retention_ms=RETENTION, segment_interval_ms=INTERVAL)
    t, acknowledged = 0, -1
    for r in range(1_000):
        for start in range(0, KEYS, 1_000):
            chunk = keys_of(KEYS)[start : start + 1_000]
            if t + 3 * (len(chunk) - 1) > applied:
                break
            for name in chunk:
                model.put(name, name + b"@" + str(r).encode(), t)
                t += 3
            if (r, start) <= (last_round, last_start):
                acknowledged = model.observed_stream_time
        else:
            continue
        break
    assert applied == model.observed_stream_time, "the store holds whole calls"
    assert applied >= acknowledged >= 0, "every acknowledged call is there"
    rng = random.Random(9)
    for key in rng.sample(keys_of(KEYS), 200):
        for at in [rng.randint(0, applied) for _ in range(3)]:
            assert as_tuple(store.get(key, as_of=at)) == as_tuple(model.get(key, as_of=at))
    store.settle()
    assert store.stats().latest_keys == KEYS
    store.close()
