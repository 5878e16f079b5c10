"""Throughput of single-record and batch calls, against a pure-Python versioned history.

Each benchmark asserts its result, then times it. Groups answer one question each:

* put: writing n new keys (one version each), row by row and as one Arrow batch;
* get: reading n keys back (latest), row by row and as one batch;
* get_as_of: point-in-time reads of a key with history.

The baseline is what a user writes without verstore: a dict of per-key sorted version lists
with `bisect` for as-of reads (in memory, no durability, no retention).
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

import pytest
import verstore

from .conftest import KEYS, RETENTION_MS, Workload


def _fresh_store(tmp_path: Path, name: str) -> verstore.VersionedStore:
    return verstore.VersionedStore(tmp_path / name, history_retention_ms=RETENTION_MS)


class DictHistory:
    """The pure-Python baseline: per key, parallel sorted lists of timestamps and values."""

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[list[int], list[bytes]]] = {}

    def put(self, key: bytes, value: bytes, ts: int) -> None:
        times, values = self.data.setdefault(key, ([], []))
        i = bisect.bisect_right(times, ts)
        times.insert(i, ts)
        values.insert(i, value)

    def get(self, key: bytes, as_of: int | None = None) -> bytes | None:
        entry = self.data.get(key)
        if entry is None:
            return None
        times, values = entry
        i = len(times) if as_of is None else bisect.bisect_right(times, as_of)
        return values[i - 1] if i else None


@pytest.mark.benchmark(group="put")
def test_put_single_rocksdb(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    counter = iter(range(1_000_000))

    def setup() -> tuple[tuple[verstore.VersionedStore], dict[str, Any]]:
        return (_fresh_store(tmp_path, f"single-{next(counter)}"),), {}

    def run(store: verstore.VersionedStore) -> None:
        put = store.put
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            put(k, v, t)
        assert store.observed_stream_time == KEYS - 1
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3)


@pytest.mark.benchmark(group="put")
def test_put_batch_rocksdb(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    counter = iter(range(1_000_000))

    def setup() -> tuple[tuple[verstore.VersionedStore], dict[str, Any]]:
        return (_fresh_store(tmp_path, f"batch-{next(counter)}"),), {}

    def run(store: verstore.VersionedStore) -> None:
        codes = store.put_batch(workload.keys, workload.values, workload.timestamps)
        assert codes.null_count == 0 and len(codes) == KEYS
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3)


@pytest.mark.benchmark(group="put")
def test_put_baseline_dict(benchmark: Any, workload: Workload) -> None:
    def run() -> DictHistory:
        history = DictHistory()
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            history.put(k, v, t)
        return history

    history = benchmark.pedantic(run, rounds=3)
    assert len(history.data) == KEYS


@pytest.fixture(scope="module")
def loaded_store(
    workload: Workload, tmp_path_factory: pytest.TempPathFactory
) -> verstore.VersionedStore:
    store = _fresh_store(tmp_path_factory.mktemp("loaded"), "store")
    store.put_batch(workload.keys, workload.values, workload.timestamps)
    store.flush()
    return store


@pytest.mark.benchmark(group="get")
def test_get_single_rocksdb(
    benchmark: Any, workload: Workload, loaded_store: verstore.VersionedStore
) -> None:
    def run() -> int:
        get = loaded_store.get
        return sum(1 for k in workload.key_list if get(k) is not None)

    assert benchmark.pedantic(run, rounds=3) == KEYS


@pytest.mark.benchmark(group="get")
def test_get_batch_rocksdb(
    benchmark: Any, workload: Workload, loaded_store: verstore.VersionedStore
) -> None:
    def run() -> int:
        batch = loaded_store.get_batch(workload.keys)
        return len(batch) - batch.column("value").null_count

    assert benchmark.pedantic(run, rounds=3) == KEYS


@pytest.mark.benchmark(group="get")
def test_get_baseline_dict(benchmark: Any, workload: Workload) -> None:
    history = DictHistory()
    for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
        history.put(k, v, t)

    def run() -> int:
        return sum(1 for k in workload.key_list if history.get(k) is not None)

    assert benchmark.pedantic(run, rounds=3) == KEYS


HOT_KEYS = 1_000
VERSIONS_PER_KEY = 50


@pytest.fixture(scope="module")
def history_store(tmp_path_factory: pytest.TempPathFactory) -> verstore.VersionedStore:
    store = _fresh_store(tmp_path_factory.mktemp("history"), "store")
    keys = [f"sym-{i:05d}".encode() for i in range(HOT_KEYS)] * VERSIONS_PER_KEY
    times = [10 * (i // HOT_KEYS) for i in range(len(keys))]
    store.put_batch(keys, [str(t).encode() for t in times], times)
    store.flush()
    return store


@pytest.mark.benchmark(group="get_as_of")
def test_get_as_of_batch_rocksdb(benchmark: Any, history_store: verstore.VersionedStore) -> None:
    keys = [f"sym-{i % HOT_KEYS:05d}".encode() for i in range(50_000)]
    as_of = [(i * 7) % (10 * VERSIONS_PER_KEY) for i in range(50_000)]

    def run() -> int:
        batch = history_store.get_batch(keys, as_of=as_of)
        return len(batch) - batch.column("value").null_count

    assert benchmark.pedantic(run, rounds=3) == 50_000
