"""How costs grow with history: per-read cost against versions per key and live segments, and
per-version cost of one hot key.

* ``as_of_versions``: ``VERSTORE_BENCH_VERSIONS`` versions in all (default 200 000) spread over
  ``versions / v`` keys, ``v`` in 1, 10, 100, 1 000, one segment; random as-of reads, each at a
  time where its key has a version (batches of 10 000, and single calls);
* ``as_of_versions_raw_multi_get``: raw RocksDB (rocksdict ``MultiGet``) of values as large as
  what verstore reads for 1 and 1 000 versions per key, same key counts: RocksDB's own growth;
* ``as_of_segments``: the same 4-versions-per-key data with 1, 10 and 50 live segments (the
  segment interval divides the run's time span);
* ``hot_key``: one key written 5 000, 20 000 and 100 000 times by single puts inside one
  segment, then its oldest version read. Linear time is a flat per-version cost (Kafka's row
  rewrite grows with the row).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import verstore

from .baselines import RawRocks
from .conftest import BATCH_ROWS, RETENTION_MS, per_row

TOTAL = int(os.environ.get("VERSTORE_BENCH_VERSIONS", "200000"))
PROBES = min(20_000, TOTAL)
_fresh = itertools.count()


def _load(
    path: Path, keys: int, versions: int, segment_interval_ms: int
) -> verstore.VersionedStore:
    """``keys`` keys with ``versions`` versions each, round r writing every key at r*keys + i."""
    store = verstore.VersionedStore(
        path,
        history_retention_ms=RETENTION_MS,
        segment_interval_ms=segment_interval_ms,
        write_ahead_log=False,
    )
    names = [f"key-{i:09d}".encode() for i in range(keys)]
    key_array = pa.array(names * versions, type=pa.binary())
    times = pa.array(np.arange(keys * versions, dtype=np.int64))
    values = pa.array([b"v" * 32] * (keys * versions), type=pa.binary())
    for start in range(0, keys * versions, BATCH_ROWS):
        store.put_batch(
            key_array.slice(start, BATCH_ROWS),
            values.slice(start, BATCH_ROWS),
            times.slice(start, BATCH_ROWS),
        )
    store.flush()
    return store


def _probes(keys: int, versions: int) -> tuple[pa.BinaryArray, pa.Int64Array]:
    """Random keys, each at a random time from its first version to the end of the run."""
    rng = np.random.default_rng(3)
    key_ids = rng.integers(0, keys, PROBES)
    times = key_ids + (rng.random(PROBES) * (keys * versions - key_ids)).astype(np.int64)
    names = pa.array([f"key-{i:09d}".encode() for i in key_ids], type=pa.binary())
    return names, pa.array(times, type=pa.int64())


def _read_batches(
    store: verstore.VersionedStore, keys: pa.BinaryArray, times: pa.Int64Array
) -> int:
    found = 0
    for start in range(0, len(keys), BATCH_ROWS):
        batch = store.get_batch(keys.slice(start, BATCH_ROWS), as_of=times.slice(start, BATCH_ROWS))
        found += len(batch) - batch.column("value").null_count
    return found


@pytest.fixture(scope="module", params=[1, 10, 100, 1_000], ids=lambda v: f"{v}v")
def by_versions(
    request: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[verstore.VersionedStore, int, pa.BinaryArray, pa.Int64Array]:
    versions = min(request.param, TOTAL)
    keys = TOTAL // versions
    store = _load(tmp_path_factory.mktemp("versions") / "store", keys, versions, RETENTION_MS)
    names, times = _probes(keys, versions)
    return store, versions, names, times


@pytest.mark.benchmark(group="as_of_versions")
def test_as_of_versions_batch(benchmark: Any, by_versions: Any) -> None:
    store, versions, names, times = by_versions
    assert benchmark.pedantic(_read_batches, args=(store, names, times), rounds=5) == PROBES
    per_row(benchmark, PROBES)
    benchmark.extra_info["versions_per_key"] = versions


@pytest.fixture(scope="module", params=[1, 1_000], ids=lambda v: f"{v}v")
def raw_rows(
    request: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RawRocks, pa.BinaryArray]:
    """Raw RocksDB holding one value per key as large as verstore's stored value for ``v``
    versions per key (1: a 40-byte latest-value entry; 1 000: a 1 000-version row, 44 KB),
    flushed, for the same number of keys as ``by_versions``."""
    versions = min(request.param, TOTAL)
    keys = TOTAL // versions
    size = 8 + 32 if versions == 1 else 16 + versions * (12 + 32)
    raw = RawRocks(tmp_path_factory.mktemp("raw_rows") / "raw")
    names = [f"key-{i:09d}".encode() for i in range(keys)]
    for start in range(0, keys, BATCH_ROWS):
        chunk = names[start : start + BATCH_ROWS]
        raw.put_batch(chunk, [b"v" * size] * len(chunk))
    raw.db.flush()
    probe_names, _ = _probes(keys, versions)
    return raw, probe_names


@pytest.mark.benchmark(group="as_of_versions")
def test_as_of_versions_raw_multi_get(benchmark: Any, raw_rows: Any) -> None:
    """What RocksDB itself pays for the value sizes of 1 and 1 000 versions per key: a batch
    MultiGet of the same number of keys, no cache in front (verstore answers a read at or after
    a key's newest version from its latest-value cache)."""
    raw, names = raw_rows
    keys = names.to_pylist()

    def run() -> int:
        found: int = raw.count_found(keys, BATCH_ROWS)
        return found

    assert benchmark.pedantic(run, rounds=5) == PROBES
    per_row(benchmark, PROBES)


@pytest.mark.benchmark(group="as_of_versions_single")
def test_as_of_versions_single(benchmark: Any, by_versions: Any) -> None:
    store, versions, names, times = by_versions
    pairs = list(zip(names.to_pylist(), times.to_pylist(), strict=True))

    def run() -> int:
        get = store.get
        return sum(1 for k, t in pairs if get(k, t) is not None)

    assert benchmark.pedantic(run, rounds=5) == PROBES
    per_row(benchmark, PROBES)
    benchmark.extra_info["versions_per_key"] = versions


@pytest.mark.benchmark(group="as_of_segments")
@pytest.mark.parametrize("segments", [1, 10, 50])
def test_as_of_segments_batch(benchmark: Any, tmp_path: Path, segments: int) -> None:
    versions = 4
    keys = TOTAL // versions
    interval = -(-(keys * versions) // segments)  # ceil: `segments` segments span the run
    store = _load(tmp_path / "store", keys, versions, interval)
    names, times = _probes(keys, versions)
    assert benchmark.pedantic(_read_batches, args=(store, names, times), rounds=5) == PROBES
    store.close()
    per_row(benchmark, PROBES)
    benchmark.extra_info["segments"] = segments


@pytest.mark.benchmark(group="hot_key")
@pytest.mark.parametrize("versions", [5_000, 20_000, 100_000])
def test_hot_key_single_puts(benchmark: Any, tmp_path: Path, versions: int) -> None:
    versions = min(versions, TOTAL)
    value = b"v" * 32

    def setup() -> tuple[tuple[verstore.VersionedStore], dict[str, Any]]:
        store = verstore.VersionedStore(
            tmp_path / f"hot-{next(_fresh)}",
            history_retention_ms=RETENTION_MS,
            segment_interval_ms=RETENTION_MS,
            write_ahead_log=False,
        )
        return (store,), {}

    def run(store: verstore.VersionedStore) -> None:
        put = store.put
        for t in range(versions):
            put(b"hot", value, t)
        # one read of the oldest version: the whole row is in the answer's path
        assert store.get(b"hot", as_of=0) == verstore.VersionedRecord(value, 0, 1)
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3)
    per_row(benchmark, versions)
    benchmark.extra_info["versions"] = versions
