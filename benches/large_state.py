"""One large-state run in this process: puts of ``keys`` keys x 4 versions, then as-of reads, on
verstore or on raw RocksDB (rocksdict), reporting rates, peak RSS and disk use as JSON.

    python -m benches.large_state verstore 1000000 --budget-mb 256 [--stores 4] [--batch 100000]
    python -m benches.large_state raw 1000000

The workload is issue 33's, as a user would write it: 16-byte random keys and 32-byte random
values, every key's 4 versions written in time order (round r writes every key, at times
``r * keys + i``) by ``put_batch`` in batches of ``--batch`` rows, then 200 000 as-of reads of
random keys at random version times by ``get_batch`` in batches of 10 000 on the warm store;
then the store is closed and reopened, and 200 000 as-of reads of random keys at random times
(uniform over the times written: three in four fall into history) read it cold, as a restarted
task reads a table with stream rows. With ``--stores``,
batches go to the stores in turn (each store holds a quarter of the keys), as four partitions'
stores of one Python worker.

Raw RocksDB holds one entry per key and version (key || big-endian time -> value), written by a
``WriteBatch`` with the write-ahead log off, read by ``MultiGet`` of the exact entries: no
versioning, no return codes, no retention; the ceiling. Reopened, it reads each probe's newest
entry by ``MultiGet`` (one point lookup a read: what an as-of read costs at best, when the
answer is a key's newest version).

``raw_rmw`` is the ceiling of any store that reads a key's newest version before it writes one
(Kafka's put, which return codes and out-of-order writes need): per batch, one ``MultiGet`` of
the keys' newest entries (``L`` || key -> time || value), then one ``WriteBatch`` of the new
newest entries and, for keys that had one, the replaced version as a history entry (``H`` ||
key || time -> value); reads as raw's. No segments, no retention, no return codes.

Memory: the baseline is this process's RSS once the keys exist (the caller's data) and each call
ran once on a few rows (so that the code the run executes is paged in), before the measured
stores open; the peak is ``VmHWM`` after the baseline (``/proc/self/clear_refs``) minus it;
``after_close_mb`` is RSS a second after every store closed, minus it. Values are generated per
batch, so the data held beside the stores is the keys alone.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

VERSIONS = 4
PROBES = 200_000
PROBE_BATCH = 10_000


def _status(field: str) -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def _binary(data: bytes, width: int, rows: int) -> pa.BinaryArray:
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows, [None, pa.py_buffer(data)])
    return fixed.cast(pa.binary())


def _disk_bytes(root: str) -> int:
    return sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(root)
        for name in names
    )


class Verstore:
    def __init__(self, root: str, stores: int, budget_mb: int) -> None:
        import verstore

        verstore.set_memory_limit(budget_mb)
        self.paths = [f"{root}/s{i}" for i in range(stores)]
        self.reopen()

    def put(self, batch: int, keys: pa.Array, values: pa.Array, times: pa.Array) -> None:
        self.stores[batch % len(self.stores)].put_batch(keys, values, times)

    def read(self, owner: np.ndarray, keys: pa.Array, times: np.ndarray) -> None:
        for i, store in enumerate(self.stores):
            mine = owner == i
            if mine.all():
                store.get_batch(keys, as_of=pa.array(times))
            elif mine.any():
                store.get_batch(keys.filter(pa.array(mine)), as_of=pa.array(times[mine]))

    def close(self) -> None:
        for store in self.stores:
            store.flush()
            store.close()

    def reopen(self) -> None:
        import verstore

        self.stores = [
            verstore.VersionedStore(path, history_retention_ms=10**12, write_ahead_log=False)
            for path in self.paths
        ]


class Raw:
    def __init__(self, root: str, stores: int, budget_mb: int) -> None:
        from .baselines import RawRocks  # here: a verstore run's process never loads rocksdict

        self.rocks = RawRocks(Path(root) / "raw")
        self.db = self.rocks.db

    def entries(self, keys: pa.Array, times: pa.Array) -> list[bytes]:
        return [
            k + t.to_bytes(8, "big")
            for k, t in zip(keys.to_pylist(), times.to_pylist(), strict=True)
        ]

    def put(self, names: list[bytes], values: list[bytes]) -> None:
        self.rocks.put_batch(names, values)

    def close(self) -> None:
        self.db.flush()
        self.db.close()

    def reopen(self) -> None:
        from .baselines import RawRocks

        self.rocks = RawRocks(self.rocks.path)
        self.db = self.rocks.db


class RawReadWrite(Raw):
    def put_versions(self, keys: list[bytes], values: list[bytes], times: list[int]) -> None:
        newest: list[Any] = [b"L" + k for k in keys]
        olds: list[bytes | None] = self.db.get(newest) or []
        import rocksdict

        batch = rocksdict.WriteBatch(raw_mode=True)
        put = batch.put
        for name, key, value, t, old in zip(newest, keys, values, times, olds, strict=True):
            stamp = t.to_bytes(8, "big")
            put(name, stamp + value)
            if old is not None:
                put(b"H" + key + old[:8], old[8:])
        self.db.write(batch)


KINDS = {"verstore": Verstore, "raw": Raw, "raw_rmw": RawReadWrite}


def _warm_up(kind: str, root: str) -> None:
    """Runs each call once on a few rows, so that the code the run executes is paged in before
    the baseline (a library's code pages are not memory the store holds)."""
    target: Any = KINDS[kind](f"{root}/warm", 1, 64)
    keys = pa.array([b"warm-up"])
    if kind == "verstore":
        target.put(0, keys, keys, pa.array([0]))
        target.read(np.zeros(1, dtype=np.int64), keys, np.zeros(1, dtype=np.int64))
    elif kind == "raw_rmw":
        target.put_versions([b"warm-up"], [b"warm-up"], [0])
        target.db.get([b"warm-up"])
    else:
        target.put([b"warm-up"], [b"warm-up"])
        target.db.get([b"warm-up"])
    target.close()


def run(kind: str, keys: int, budget_mb: int, stores: int, batch_rows: int) -> dict[str, Any]:
    rng = np.random.default_rng(33)
    key_array = _binary(rng.bytes(16 * keys), 16, keys)
    root = tempfile.mkdtemp(prefix="verstore-large-", dir=os.environ.get("VERSTORE_BENCH_DIR"))
    _warm_up(kind, root)
    gc.collect()
    baseline = _status("VmRSS")
    _reset_peak()
    target: Any = KINDS[kind](root, stores, budget_mb)
    put_s, put_cpu, batch = 0.0, 0.0, 0
    for version in range(VERSIONS):
        for start in range(0, keys, batch_rows):
            n = min(batch_rows, keys - start)
            key_slice = key_array.slice(start, n)
            values = _binary(rng.bytes(32 * n), 32, n)
            first = version * keys + start
            times = pa.array(np.arange(first, first + n, dtype=np.int64))
            if kind == "verstore":
                began, cpu = time.perf_counter(), time.process_time()
                target.put(batch, key_slice, values, times)
            elif kind == "raw_rmw":
                rows = key_slice.to_pylist(), values.to_pylist(), times.to_pylist()
                began, cpu = time.perf_counter(), time.process_time()
                target.put_versions(*rows)
            else:
                names, value_list = target.entries(key_slice, times), values.to_pylist()
                began, cpu = time.perf_counter(), time.process_time()
                target.put(names, value_list)
            put_s += time.perf_counter() - began
            put_cpu += time.process_time() - cpu
            batch += 1
    peak_put = _status("VmHWM") - baseline
    probe_keys = rng.integers(0, keys, PROBES)
    probe_times = rng.integers(0, VERSIONS, PROBES) * keys + probe_keys
    # With several stores, batch b went to store b % stores: key i's store.
    owner = (probe_keys // batch_rows) % stores
    read_s = 0.0
    # raw_rmw's reads would be raw's (its history entries are raw's entries): not run again.
    for start in range(0, PROBES if kind != "raw_rmw" else 0, PROBE_BATCH):
        index = probe_keys[start : start + PROBE_BATCH]
        times = probe_times[start : start + PROBE_BATCH]
        probe = key_array.take(pa.array(index))
        if kind == "verstore":
            began = time.perf_counter()
            target.read(owner[start : start + PROBE_BATCH], probe, times)
        else:
            names = target.entries(probe, pa.array(times))
            began = time.perf_counter()
            target.db.get(names)
        read_s += time.perf_counter() - began
    target.close()
    reopened_s, reopened_cpu = 0.0, 0.0
    if kind != "raw_rmw":
        target.reopen()
        probe_keys = rng.integers(0, keys, PROBES)
        probe_times = rng.integers(0, VERSIONS * keys, PROBES)
        newest = (VERSIONS - 1) * keys + probe_keys
        owner = (probe_keys // batch_rows) % stores
        for start in range(0, PROBES, PROBE_BATCH):
            index = probe_keys[start : start + PROBE_BATCH]
            probe = key_array.take(pa.array(index))
            if kind == "verstore":
                times = probe_times[start : start + PROBE_BATCH]
                began, cpu = time.perf_counter(), time.process_time()
                target.read(owner[start : start + PROBE_BATCH], probe, times)
            else:
                names = target.entries(probe, pa.array(newest[start : start + PROBE_BATCH]))
                began, cpu = time.perf_counter(), time.process_time()
                target.db.get(names)
            reopened_s += time.perf_counter() - began
            reopened_cpu += time.process_time() - cpu
        target.close()
    peak = _status("VmHWM") - baseline
    disk = _disk_bytes(root)
    del target
    gc.collect()
    time.sleep(1)
    after_close = _status("VmRSS") - baseline
    shutil.rmtree(root, ignore_errors=True)
    versions = keys * VERSIONS
    return {
        "kind": kind,
        "keys": keys,
        "budget_mb": budget_mb,
        "stores": stores,
        "batch_rows": batch_rows,
        "put_rows_per_s": versions / put_s,
        "read_rows_per_s": PROBES / read_s if read_s else None,
        "reopened_read_rows_per_s": PROBES / reopened_s if reopened_s else None,
        # CPU time of the whole process (RocksDB's threads included) while the calls ran: what
        # a shared machine moves least, where wall rates move with the neighbours' load.
        "put_cpu_us": put_cpu / versions * 1e6,
        "reopened_read_cpu_us": reopened_cpu / PROBES * 1e6 if reopened_s else None,
        "peak_put_mb": peak_put,
        "peak_mb": peak,
        "after_close_mb": after_close,
        "disk_bytes_per_version": disk / versions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("keys", type=int)
    parser.add_argument("--budget-mb", type=int, default=256)
    parser.add_argument("--stores", type=int, default=1)
    parser.add_argument("--batch", type=int, default=100_000)
    args = parser.parse_args()
    print(json.dumps(run(args.kind, args.keys, args.budget_mb, args.stores, args.batch)))


if __name__ == "__main__":
    main()
