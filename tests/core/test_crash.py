"""Crash safety: a writer process killed with SIGKILL loses no write it reported as done.

A child process (``sys.executable -c``) opens a persistent store (WAL on, the default), writes a
seeded stream of out-of-order puts and deletes over several keys, and prints each op's index
after the call returns. The parent kills it with SIGKILL at some point, reopens the store and
compares every read with the reference model replaying exactly the ops up to the last printed
index; the op in flight at the kill may or may not have been applied, so one of the two
candidate models must match exactly (docs/semantics.md §2.9: reopening restores every version
and observed_stream_time; §Q4 on persisting ST, which the killed store had deferred and its
reopening recomputes). One run kills the child in the middle of a large ``put_batch``: the
store must then hold a prefix of the batch's rows.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import verstore
from reference_model import NOT_PUT, VALID_TO_UNDEFINED, ReferenceModel, as_tuple

STREAM_KEYS = [b"", b"k", b"k\x00", b"ka", b"z" * 20, b"\xff"]


def generate_ops(
    seed: int, n: int, retention: int, interval: int
) -> list[tuple[str, bytes, bytes | None, int]]:
    """The seeded op stream, shared verbatim with the child process (via inspect.getsource).

    Timestamps trail the running stream time by up to R + 3 (so some writes are rejected) or
    lead it by up to 2 I, with an occasional jump past R that expires segments.
    """
    import random

    keys = [b"", b"k", b"k\x00", b"ka", b"z" * 20, b"\xff"]
    rng = random.Random(seed)
    stream_time = -1
    ops: list[tuple[str, bytes, bytes | None, int]] = []
    for i in range(n):
        if rng.random() < 0.03:
            ts = max(stream_time, 0) + retention + rng.randint(0, 2 * interval)
        else:
            ts = max(0, stream_time + rng.randint(-retention - 3, 2 * interval))
        key = rng.choice(keys)
        roll = rng.random()
        if roll < 0.2:
            ops.append(("delete", key, None, ts))
        elif roll < 0.28:
            ops.append(("put", key, None, ts))
        elif roll < 0.32:
            ops.append(("put", key, b"", ts))
        else:
            ops.append(("put", key, b"v%d" % i, ts))
        if ts >= stream_time - retention:
            stream_time = max(stream_time, ts)
    return ops


STREAM_CHILD = """
import json, sys
import verstore

{generate_ops}

cfg = json.loads(sys.argv[1])
ops = generate_ops(cfg["seed"], cfg["n"], cfg["retention"], cfg["interval"])
store = verstore.VersionedStore(
    cfg["path"], history_retention_ms=cfg["retention"], segment_interval_ms=cfg["interval"]
)
out = sys.stdout
out.write("open\\n")
out.flush()
for i, (kind, key, value, ts) in enumerate(ops):
    if kind == "put":
        store.put(key, value, ts)
    else:
        store.delete(key, ts)
    out.write(f"{{i}}\\n")
    out.flush()
out.write("done\\n")
out.flush()
sys.stdin.read()  # wait for the kill with the store still open
"""

BATCH_CHILD = """
import json, sys, time
import verstore

cfg = json.loads(sys.argv[1])
n = cfg["n"]
store = verstore.VersionedStore(
    cfg["path"], history_retention_ms=cfg["retention"], segment_interval_ms=cfg["interval"]
)

def rows(base):
    keys = [b"k%02d" % (i % 16) for i in range(n)]
    values = [b"%d" % (base + i) for i in range(n)]
    return keys, values, [base + i for i in range(n)]

for base in (0, n):  # the first batch is slower (segment creation): time the second
    keys, values, stamps = rows(base)
    start = time.perf_counter()
    store.put_batch(keys, values, stamps)
print("calibrated", time.perf_counter() - start, flush=True)
keys, values, stamps = rows(2 * n)
print("start", flush=True)
store.put_batch(keys, values, stamps)
print("end", flush=True)
sys.stdin.read()
"""


def spawn(script: str, cfg: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(cfg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> list[str]:
    """SIGKILL the child, reap it, and return the complete lines it printed but we had not read."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.stdout is not None
    assert proc.stderr is not None
    rest = proc.stdout.read()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return [line for line in rest.splitlines(keepends=True) if line.endswith("\n")]


def read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        assert proc.stderr is not None
        pytest.fail(f"child exited early ({proc.returncode}): {proc.stderr.read()}")
    return line


def open_store(path: Path, retention: int, interval: int) -> Any:
    return verstore.VersionedStore(
        path, history_retention_ms=retention, segment_interval_ms=interval
    )


def apply(store: Any, op: tuple[str, bytes, bytes | None, int]) -> None:
    kind, key, value, ts = op
    if kind == "put":
        store.put(key, value, ts)
    else:
        store.delete(key, ts)


def observe(store: Any, keys: list[bytes], times: range) -> dict[str, Any]:
    """Everything a reader can see: ST, and per key the latest, the history, point reads."""
    out: dict[str, Any] = {"observed_stream_time": store.observed_stream_time}
    for key in keys:
        out[f"{key!r} latest"] = as_tuple(store.get(key))
        out[f"{key!r} versions"] = [as_tuple(r) for r in store.versions(key)]
        out[f"{key!r} at"] = [as_tuple(store.get(key, t)) for t in times]
    return out


def check_invariants(store: Any, keys: list[bytes], retention: int) -> None:
    """versions() is sorted and its valid-to chain agrees with point reads; the store's count
    of latest values is exact (``keys`` are all the store's keys)."""
    assert store.stats().latest_keys == sum(store.get(key) is not None for key in keys)
    horizon = store.observed_stream_time - retention
    for key in keys:
        ascending = store.versions(key, ascending=True)
        assert [as_tuple(r) for r in store.versions(key)] == [
            as_tuple(r) for r in reversed(ascending)
        ]
        latest = store.get(key)
        for i, record in enumerate(ascending):
            if i + 1 == len(ascending):
                # only the newest version is open-ended, and it is the latest value
                assert (record.valid_to is None) == (as_tuple(latest) == as_tuple(record))
            else:
                newer = ascending[i + 1]
                assert record.valid_to is not None
                assert record.timestamp < record.valid_to <= newer.timestamp
                if record.valid_to < newer.timestamp and record.valid_to >= horizon:
                    # the gap is a tombstone: nothing is valid there
                    assert store.get(key, record.valid_to) is None
            if record.valid_to is not None:
                assert record.timestamp < record.valid_to
            if record.timestamp >= horizon:
                assert as_tuple(store.get(key, record.timestamp)) == as_tuple(record)


def read_times(models: list[ReferenceModel]) -> range:
    lo = min(m.observed_stream_time - m.history_retention_ms for m in models)
    hi = max(m.observed_stream_time for m in models)
    return range(max(0, lo - 2), max(hi, 0) + 2)


def assert_matches_one(store: Any, candidates: list[ReferenceModel], keys: list[bytes]) -> int:
    """The store must equal one candidate model exactly; returns that candidate's index."""
    times = read_times(candidates)
    seen = observe(store, keys, times)
    for i, model in enumerate(candidates):
        if observe(model, keys, times) == seen:
            return i
    # Show the difference against the first candidate (all ops that were reported done).
    assert seen == observe(candidates[0], keys, times)
    raise AssertionError("unreachable")


def assert_grace_after_reopen(store: Any, model: ReferenceModel) -> None:
    """Grace decisions after a restart use the persisted ST (a fresh key, so only ST matters)."""
    horizon = model.observed_stream_time - model.history_retention_ms
    if horizon >= 1:
        assert store.put(b"fresh", b"late", horizon - 1) == NOT_PUT
        assert model.put(b"fresh", b"late", horizon - 1) == NOT_PUT
    ts = max(horizon, 0)
    assert store.put(b"fresh", b"edge", ts) == VALID_TO_UNDEFINED
    assert model.put(b"fresh", b"edge", ts) == VALID_TO_UNDEFINED
    assert store.observed_stream_time == model.observed_stream_time


@pytest.mark.parametrize(
    ("seed", "retention", "interval", "kill_after"),
    [
        (1, 20, 7, 0),
        (2, 0, 3, 57),
        (3, 50, 1, 700),
        (4, 5, 25, 1_500),
        (5, 20, 7, None),  # killed after the whole stream, store open and idle
    ],
)
def test_sigkill_loses_no_reported_write(
    tmp_path: Path, seed: int, retention: int, interval: int, kill_after: int | None
) -> None:
    path = tmp_path / "store"
    n = 1_500 if kill_after is None else 100_000
    cfg = {"seed": seed, "n": n, "retention": retention, "interval": interval, "path": str(path)}
    proc = spawn(STREAM_CHILD.format(generate_ops=inspect.getsource(generate_ops)), cfg)
    try:
        assert read_line(proc) == "open\n"
        # While the child holds the store, a second opener is refused (docs/semantics.md §2.8).
        with pytest.raises(verstore.StoreLockedError):
            open_store(path, retention, interval)
        last = -1
        target = n - 1 if kill_after is None else kill_after
        while last < target:
            line = read_line(proc)
            if line == "done\n":
                break
            last = int(line)
        if kill_after is None:
            assert read_line(proc) == "done\n"
    finally:
        rest = kill(proc)
    for line in rest:
        if line != "done\n":
            last = max(last, int(line))

    ops = generate_ops(seed, n, retention, interval)
    done = ReferenceModel(history_retention_ms=retention, segment_interval_ms=interval)
    for op in ops[: last + 1]:
        apply(done, op)
    candidates = [done]
    if last + 1 < len(ops):  # the op in flight at the kill may or may not have landed
        in_flight = copy.deepcopy(done)
        apply(in_flight, ops[last + 1])
        candidates.append(in_flight)

    # No StoreLockedError left behind by the dead process.
    with open_store(path, retention, interval) as store:
        which = assert_matches_one(store, candidates, STREAM_KEYS)
        model = candidates[which]
        check_invariants(store, STREAM_KEYS, retention)
        assert_grace_after_reopen(store, model)
    # A second, clean reopen sees the same state (recovery is not a one-off).
    with open_store(path, retention, interval) as store:
        assert_matches_one(store, [model], [*STREAM_KEYS, b"fresh"])
        check_invariants(store, [*STREAM_KEYS, b"fresh"], retention)


@pytest.mark.parametrize("fraction", [0.3, 0.75, 0.95])
def test_sigkill_mid_put_batch_is_all_or_nothing(tmp_path: Path, fraction: float) -> None:
    """Killed during put_batch, the store holds none or all of the batch's rows.

    The model check is written for a prefix of j rows, all that row-by-row equivalence
    (docs/semantics.md §2.7) would let a non-atomic implementation keep; the final assertion is
    the atomicity of §2.8.

    Two batches of n rows calibrate the timing. Row i of the third batch writes key k{i % 16}
    at timestamp 2n + i, so every row becomes the latest value of its key and j can be read
    back from the latest timestamps.
    """
    path = tmp_path / "store"
    n, retention, interval = 60_000, 40, 10
    cfg = {"n": n, "retention": retention, "interval": interval, "path": str(path)}
    proc = spawn(BATCH_CHILD, cfg)
    try:
        head, seconds = read_line(proc).split()
        assert head == "calibrated"
        assert read_line(proc) == "start\n"
        time.sleep(float(seconds) * fraction)
    finally:
        rest = kill(proc)
    finished = "end\n" in rest

    keys = [b"k%02d" % i for i in range(16)]
    with open_store(path, retention, interval) as store:
        applied = 0
        for key in keys:
            latest = store.get(key)
            assert latest is not None
            if latest.timestamp >= 2 * n:
                applied = max(applied, latest.timestamp - 2 * n + 1)
        assert applied == n or not finished
        model = ReferenceModel(history_retention_ms=retention, segment_interval_ms=interval)
        for i in range(2 * n + applied):
            model.put(b"k%02d" % (i % 16), b"%d" % i, i)
        print(f"killed after {applied} of {n} rows (batch finished: {finished})")
        assert_matches_one(store, [model], keys)
        check_invariants(store, keys, retention)
        # put_batch is "one atomic write" (_core.pyi, docs/semantics.md §2.8): none or all rows
        assert applied in (0, n)
        assert_grace_after_reopen(store, model)


def test_sigkill_during_reopen_recovery(tmp_path: Path) -> None:
    """Kill, then kill again right after the next process reopened and wrote a little."""
    path = tmp_path / "store"
    seed, retention, interval, n = 9, 20, 7, 100_000
    ops = generate_ops(seed, n, retention, interval)
    script = STREAM_CHILD.format(generate_ops=inspect.getsource(generate_ops))
    model = ReferenceModel(history_retention_ms=retention, segment_interval_ms=interval)
    rng = random.Random(seed)
    for _ in range(3):
        # Each round runs the same seeded stream from the start on top of what is stored;
        # many of its writes are now rejected (the persisted ST is already higher).
        cfg = {"seed": seed, "n": n, "retention": retention, "interval": interval}
        proc = spawn(script, {**cfg, "path": str(path)})
        try:
            assert read_line(proc) == "open\n"
            last, target = -1, rng.randint(0, 1_500)
            while last < target:
                last = int(read_line(proc))
        finally:
            rest = kill(proc)
        for line in rest:
            if line != "done\n":
                last = max(last, int(line))
        # The expected state: the model of the earlier runs plus ops 0..last (or 0..last + 1).
        candidates = []
        for extra in (0, 1):
            candidate = copy.deepcopy(model)
            for op in ops[: last + 1 + extra]:
                apply(candidate, op)
            candidates.append(candidate)
        with open_store(path, retention, interval) as store:
            which = assert_matches_one(store, candidates, STREAM_KEYS)
            check_invariants(store, STREAM_KEYS, retention)
        model = candidates[which]
