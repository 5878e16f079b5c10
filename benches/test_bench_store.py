"""Throughput of verstore's calls against the baselines, one group per question.

* ``put_single``: one call per row (250k-style workload, see ``conftest.Workload``);
* ``put_batch``: the same rows in calls of 10 000, and (``..._ttl``) with a ``latest_ttl_ms``
  that never fires in the run: what the TTL's accounting costs a put (BENCHMARKS.md, "Latest
  TTL");
* ``put_batch_reopened``: the later rounds in calls of 10 000 on a reopened store holding the
  first (a stream task's micro-batch);
* ``get_as_of_single``: random as-of reads, one call per read;
* ``get_as_of_batch``: the same reads in calls of 10 000.

The ceiling is raw RocksDB through rocksdict (one value per key, no versions); the baselines
are a SQLite temporal table, a dict of sorted lists with ``bisect``, and versioned logic in
Python over rocksdict (``baselines.py``). Each benchmark asserts its result, then is timed; a
round that writes gets a fresh store. Rows per round are in ``extra_info["rows"]``.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import verstore

from .baselines import DictHistory, NaiveRocksHistory, RawRocks, SqliteHistory
from .conftest import BATCH_ROWS, RETENTION_MS, Workload, expected_as_of, per_row

ROUNDS = 3
#: A latest TTL beyond every time the workload writes: nothing expires.
NEVER_MS = 10**12
_fresh = itertools.count()


def _store(
    tmp_path: Path, *, wal: bool = False, latest_ttl_ms: int | None = None
) -> verstore.VersionedStore:
    return verstore.VersionedStore(
        tmp_path / f"store-{next(_fresh)}",
        history_retention_ms=RETENTION_MS,
        write_ahead_log=wal,
        latest_ttl_ms=latest_ttl_ms,
    )


def _each_round(make: Callable[[], Any]) -> Callable[[], tuple[tuple[Any], dict[str, Any]]]:
    return lambda: ((make(),), {})


# --- put_single -------------------------------------------------------------------------------


@pytest.mark.benchmark(group="put_single")
@pytest.mark.parametrize("wal", [False, True], ids=["wal_off", "wal_on"])
def test_put_single_verstore(benchmark: Any, workload: Workload, tmp_path: Path, wal: bool) -> None:
    def run(store: verstore.VersionedStore) -> None:
        put = store.put
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            put(k, v, t)
        assert store.observed_stream_time == workload.rows - 1
        store.close()

    benchmark.pedantic(run, setup=_each_round(lambda: _store(tmp_path, wal=wal)), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_single")
def test_put_single_sqlite(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    def run(db: SqliteHistory) -> None:
        execute = db.db.execute
        sql = db.put_sql
        db.begin()
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            execute(sql, (k, t, v))
        db.commit()
        db.close()

    make = lambda: SqliteHistory(tmp_path / f"sqlite-{next(_fresh)}.db")  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_single")
@pytest.mark.parametrize("wal", [False, True], ids=["wal_off", "wal_on"])
def test_put_single_rocksdict_ceiling(
    benchmark: Any, workload: Workload, tmp_path: Path, wal: bool
) -> None:
    """Raw RocksDB's own rate per call; ``wal_on`` is the ceiling of verstore's ``wal_on``: every
    put goes through RocksDB's write path and its log, as verstore's does."""

    def run(db: RawRocks) -> None:
        put = db.db.put
        for k, v in zip(workload.key_list, workload.value_list, strict=True):
            put(k, v)
        db.close()

    make = lambda: RawRocks(tmp_path / f"raw-{next(_fresh)}", wal=wal)  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_single")
def test_put_single_naive_rocksdict(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    def run(db: NaiveRocksHistory) -> None:
        put = db.put
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            put(k, v, t)
        db.close()

    make = lambda: NaiveRocksHistory(tmp_path / f"naive-{next(_fresh)}")  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_single")
def test_put_single_dict_bisect(benchmark: Any, workload: Workload) -> None:
    def run() -> DictHistory:
        history = DictHistory()
        put = history.put
        for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
            put(k, v, t)
        return history

    history = benchmark.pedantic(run, rounds=ROUNDS)
    assert len(history.data) == len(set(workload.key_list))
    per_row(benchmark, workload.rows)


# --- put_batch --------------------------------------------------------------------------------


@pytest.mark.benchmark(group="put_batch")
@pytest.mark.parametrize(
    ("wal", "latest_ttl_ms"),
    [(False, None), (True, None), (False, NEVER_MS), (True, NEVER_MS)],
    ids=["wal_off", "wal_on", "wal_off_ttl", "wal_on_ttl"],
)
def test_put_batch_verstore(
    benchmark: Any, workload: Workload, tmp_path: Path, wal: bool, latest_ttl_ms: int | None
) -> None:
    def run(store: verstore.VersionedStore) -> None:
        for keys, values, times in workload.batches():
            codes = store.put_batch(keys, values, times)
            assert codes.null_count == 0
        assert store.observed_stream_time == workload.rows - 1
        store.close()

    make = lambda: _store(tmp_path, wal=wal, latest_ttl_ms=latest_ttl_ms)  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_batch")
@pytest.mark.parametrize("latest_ttl_ms", [None, NEVER_MS], ids=["no_ttl", "ttl"])
def test_put_batch_verstore_in_memory(
    benchmark: Any, workload: Workload, latest_ttl_ms: int | None
) -> None:
    def run(store: verstore.VersionedStore) -> None:
        for keys, values, times in workload.batches():
            store.put_batch(keys, values, times)
        assert store.observed_stream_time == workload.rows - 1
        assert store.stats().latest_keys == len(set(workload.key_list))

    make = lambda: verstore.VersionedStore.in_memory(  # noqa: E731
        history_retention_ms=RETENTION_MS, latest_ttl_ms=latest_ttl_ms
    )
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_batch")
def test_put_batch_rocksdict_ceiling(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    def run(db: RawRocks) -> None:
        for start in range(0, workload.rows, BATCH_ROWS):
            end = start + BATCH_ROWS
            db.put_batch(workload.key_list[start:end], workload.value_list[start:end])
        db.close()

    make = lambda: RawRocks(tmp_path / f"raw-{next(_fresh)}")  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


@pytest.mark.benchmark(group="put_batch")
def test_put_batch_sqlite(benchmark: Any, workload: Workload, tmp_path: Path) -> None:
    rows = list(zip(workload.key_list, workload.ts_list, workload.value_list, strict=True))

    def run(db: SqliteHistory) -> None:
        db.begin()
        for start in range(0, workload.rows, BATCH_ROWS):
            db.db.executemany(db.put_sql, rows[start : start + BATCH_ROWS])
        db.commit()
        db.close()

    make = lambda: SqliteHistory(tmp_path / f"sqlite-{next(_fresh)}.db")  # noqa: E731
    benchmark.pedantic(run, setup=_each_round(make), rounds=ROUNDS)
    per_row(benchmark, workload.rows)


# --- put_batch_reopened -----------------------------------------------------------------------
# A store reopened with data, then written in batches: what a stream processor's task does each
# micro-batch (it opens its partition's store, applies the batch, closes). The stores hold the
# workload's first round (every key once); a round copies them, reopens, and writes the other
# rounds (later versions of every key) in calls of 10 000, then closes.


class FirstRound(NamedTuple):
    verstore: Path
    raw: Path
    rows: int


@pytest.fixture(scope="module")
def first_round(workload: Workload, tmp_path_factory: pytest.TempPathFactory) -> FirstRound:
    root = tmp_path_factory.mktemp("first-round")
    n = len(set(workload.key_list))
    store = verstore.VersionedStore(
        root / "verstore", history_retention_ms=RETENTION_MS, write_ahead_log=False
    )
    store.put_batch(
        workload.keys.slice(0, n), workload.values.slice(0, n), workload.timestamps.slice(0, n)
    )
    store.close()
    raw = RawRocks(root / "raw")
    raw.put_batch(workload.key_list[:n], workload.value_list[:n])
    raw.close()
    return FirstRound(root / "verstore", root / "raw", n)


def _reopened(source: Path, tmp_path: Path, open_: Callable[[Path], Any]) -> Callable[[], Any]:
    def make() -> tuple[tuple[Any], dict[str, Any]]:
        copy = tmp_path / f"reopened-{next(_fresh)}"
        shutil.copytree(source, copy)
        return (open_(copy),), {}

    return make


@pytest.mark.benchmark(group="put_batch_reopened")
def test_put_batch_reopened_verstore(
    benchmark: Any, workload: Workload, first_round: FirstRound, tmp_path: Path
) -> None:
    n = first_round.rows

    def run(store: verstore.VersionedStore) -> None:
        for start in range(n, workload.rows, BATCH_ROWS):
            end = min(start + BATCH_ROWS, workload.rows)
            store.put_batch(
                workload.keys.slice(start, end - start),
                workload.values.slice(start, end - start),
                workload.timestamps.slice(start, end - start),
            )
        assert store.observed_stream_time == workload.rows - 1
        store.close()

    def open_(path: Path) -> verstore.VersionedStore:
        return verstore.VersionedStore(
            path, history_retention_ms=RETENTION_MS, write_ahead_log=False
        )

    benchmark.pedantic(run, setup=_reopened(first_round.verstore, tmp_path, open_), rounds=ROUNDS)
    per_row(benchmark, workload.rows - n)


@pytest.mark.benchmark(group="put_batch_reopened")
def test_put_batch_reopened_rocksdict_ceiling(
    benchmark: Any, workload: Workload, first_round: FirstRound, tmp_path: Path
) -> None:
    n = first_round.rows

    def run(db: RawRocks) -> None:
        for start in range(n, workload.rows, BATCH_ROWS):
            end = start + BATCH_ROWS
            db.put_batch(workload.key_list[start:end], workload.value_list[start:end])
        db.close()

    benchmark.pedantic(run, setup=_reopened(first_round.raw, tmp_path, RawRocks), rounds=ROUNDS)
    per_row(benchmark, workload.rows - n)


# --- loaded stores for the reads ----------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(workload: Workload, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every contender holding the workload (persistent ones flushed to files)."""
    root = tmp_path_factory.mktemp("loaded")
    store = _store(root)
    memory = verstore.VersionedStore.in_memory(history_retention_ms=RETENTION_MS)
    for keys, values, times in workload.batches():
        store.put_batch(keys, values, times)
        memory.put_batch(keys, values, times)
    store.flush()
    sqlite = SqliteHistory(root / "sqlite.db")
    sqlite.begin()
    sqlite.db.executemany(
        sqlite.put_sql,
        zip(workload.key_list, workload.ts_list, workload.value_list, strict=True),
    )
    sqlite.commit()
    raw = RawRocks(root / "raw")
    raw.put_batch(workload.key_list, workload.value_list)
    raw.db.flush()
    naive = NaiveRocksHistory(root / "naive")
    history = DictHistory()
    for k, v, t in zip(workload.key_list, workload.value_list, workload.ts_list, strict=True):
        naive.put(k, v, t)
        history.put(k, v, t)
    naive.db.flush()
    return {
        "store": store,
        "memory": memory,
        "sqlite": sqlite,
        "raw": raw,
        "naive": naive,
        "dict": history,
    }


# --- get_as_of_single -------------------------------------------------------------------------


@pytest.mark.benchmark(group="get_as_of_single")
@pytest.mark.parametrize("contender", ["store", "memory"])
def test_get_as_of_single_verstore(
    benchmark: Any, workload: Workload, loaded: dict[str, Any], contender: str
) -> None:
    get = loaded[contender].get

    def run() -> int:
        return sum(
            1
            for k, t in zip(workload.probe_keys, workload.probe_times, strict=True)
            if get(k, t) is not None
        )

    assert benchmark.pedantic(run, rounds=ROUNDS) == expected_as_of(workload)
    per_row(benchmark, len(workload.probe_keys))


@pytest.mark.benchmark(group="get_as_of_single")
def test_get_as_of_single_sqlite(
    benchmark: Any, workload: Workload, loaded: dict[str, Any]
) -> None:
    db: SqliteHistory = loaded["sqlite"]
    execute, sql = db.db.execute, db.get_sql

    def run() -> int:
        return sum(
            1
            for k, t in zip(workload.probe_keys, workload.probe_times, strict=True)
            if execute(sql, (k, t)).fetchone() is not None
        )

    assert benchmark.pedantic(run, rounds=ROUNDS) == expected_as_of(workload)
    per_row(benchmark, len(workload.probe_keys))


@pytest.mark.benchmark(group="get_as_of_single")
def test_get_as_of_single_rocksdict_ceiling(
    benchmark: Any, workload: Workload, loaded: dict[str, Any]
) -> None:
    get = loaded["raw"].db.get

    def run() -> int:
        return sum(1 for k in workload.probe_keys if get(k) is not None)

    assert benchmark.pedantic(run, rounds=ROUNDS) == len(workload.probe_keys)
    per_row(benchmark, len(workload.probe_keys))


@pytest.mark.benchmark(group="get_as_of_single")
@pytest.mark.parametrize("contender", ["naive", "dict"])
def test_get_as_of_single_python(
    benchmark: Any, workload: Workload, loaded: dict[str, Any], contender: str
) -> None:
    get = loaded[contender].get

    def run() -> int:
        return sum(
            1
            for k, t in zip(workload.probe_keys, workload.probe_times, strict=True)
            if get(k, t) is not None
        )

    assert benchmark.pedantic(run, rounds=ROUNDS) == expected_as_of(workload)
    per_row(benchmark, len(workload.probe_keys))


# --- get_as_of_batch --------------------------------------------------------------------------


@pytest.mark.benchmark(group="get_as_of_batch")
@pytest.mark.parametrize("contender", ["store", "memory"])
def test_get_as_of_batch_verstore(
    benchmark: Any, workload: Workload, loaded: dict[str, Any], contender: str
) -> None:
    store: verstore.VersionedStore = loaded[contender]

    def run() -> int:
        found = 0
        for keys, times in workload.probe_batches():
            batch = store.get_batch(keys, as_of=times)
            found += len(batch) - batch.column("value").null_count
        return found

    assert benchmark.pedantic(run, rounds=ROUNDS) == expected_as_of(workload)
    per_row(benchmark, len(workload.probe_keys))


@pytest.mark.benchmark(group="get_as_of_batch")
def test_get_as_of_batch_rocksdict_ceiling(
    benchmark: Any, workload: Workload, loaded: dict[str, Any]
) -> None:
    raw: RawRocks = loaded["raw"]
    keys = workload.probe_keys

    def run() -> int:
        return raw.count_found(keys, BATCH_ROWS)

    assert benchmark.pedantic(run, rounds=ROUNDS) == len(keys)
    per_row(benchmark, len(keys))
