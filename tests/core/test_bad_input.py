"""Bad input: every rejected call raises the documented exception and changes nothing.

Table-driven. Each bad call must raise ``TypeError`` (wrong type, None key), ``ValueError``
(negative write timestamp, ``from_time > to_time``, negative retention, segment interval < 1,
mismatched batch lengths) or a ``verstore`` error, with a message naming the argument; afterwards
every read (and ``observed_stream_time``) equals what it was before the call. Batch calls are
validated before any write, so a bad row anywhere leaves the whole batch unwritten.

See docs/semantics.md §7 (errors and argument checks), §Q5 and §E12.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import verstore
from verstore import VALID_TO_UNDEFINED, VersionedRecord, VersionedStore

try:
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # pragma: no cover - numpy is optional for these tests
    HAVE_NUMPY = False

MakeStore = Callable[..., VersionedStore]
Call = Callable[[VersionedStore], Any]

R = 300_000
I = 100_000  # noqa: E741 - Kafka's name for the segment interval
KEYS = [b"k", b"j", b"e", b"", b"new", b"new1", b"new2"]
TIMES = [-1, 0, 5, 10, 50, I - 1, I, I + 20, I + 25, I + 30, I + 40, 10**9]


def rec(value: bytes, timestamp: int, valid_to: int | None = None) -> VersionedRecord:
    """The expected record; ``valid_to=None`` means the latest version."""
    return VersionedRecord(value=value, timestamp=timestamp, valid_to=valid_to)


def seed(store: VersionedStore) -> None:
    """Values, an empty value, tombstones and two segments; ST = I + 30."""
    assert store.put(b"k", b"v1", 10) == VALID_TO_UNDEFINED
    assert store.put(b"k", b"v2", I + 20) == VALID_TO_UNDEFINED
    assert store.put(b"j", None, 50) == VALID_TO_UNDEFINED
    assert store.put(b"j", b"j1", 5) == 50
    assert store.put(b"e", b"", 5) == VALID_TO_UNDEFINED
    assert store.put(b"", b"empty-key", I + 30) == VALID_TO_UNDEFINED


def snapshot(store: VersionedStore) -> dict[str, object]:
    """Every read over KEYS and TIMES, plus observed_stream_time."""
    return {
        "observed_stream_time": store.observed_stream_time,
        "latest": [store.get(key) for key in KEYS],
        "as_of": [[store.get(key, t) for t in TIMES] for key in KEYS],
        "versions": [store.versions(key) for key in KEYS],
        "versions_ascending": [store.versions(key, ascending=True) for key in KEYS],
    }


EXPECTED_SEEDED = {
    "k": [rec(b"v2", I + 20), rec(b"v1", 10, I + 20)],
    "j": [rec(b"j1", 5, 50)],
    "e": [rec(b"", 5)],
    "": [rec(b"empty-key", I + 30)],
}


def assert_seeded(store: VersionedStore) -> None:
    """The store holds exactly what seed() wrote."""
    assert store.observed_stream_time == I + 30
    for name, versions in EXPECTED_SEEDED.items():
        assert store.versions(name.encode()) == versions
    for key in (b"new", b"new1", b"new2"):
        assert store.versions(key) == []
        assert store.get(key) is None


@pytest.fixture
def seeded(store: VersionedStore) -> VersionedStore:
    """The shared store (both kinds) with seed() applied."""
    seed(store)
    assert_seeded(store)
    return store


needs_numpy = pytest.mark.skipif(not HAVE_NUMPY, reason="numpy not installed")


def _numpy_timestamps(values: list[int]) -> Any:
    return np.array(values, dtype=np.int64)


# (call, expected exception, match on the argument name)
BAD_CALLS = [
    # put: key
    pytest.param(lambda s: s.put(None, b"x", I + 40), TypeError, "key", id="put-key-none"),
    pytest.param(lambda s: s.put("new", b"x", I + 40), TypeError, "key", id="put-key-str"),
    pytest.param(lambda s: s.put(1, b"x", I + 40), TypeError, "key", id="put-key-int"),
    pytest.param(lambda s: s.put([b"new"], b"x", I + 40), TypeError, "key", id="put-key-list"),
    # put: value
    pytest.param(lambda s: s.put(b"new", "x", I + 40), TypeError, "value", id="put-value-str"),
    pytest.param(lambda s: s.put(b"new", 1, I + 40), TypeError, "value", id="put-value-int"),
    pytest.param(lambda s: s.put(b"k", "x", I + 40), TypeError, "value", id="put-value-str-k"),
    # put: timestamp
    pytest.param(lambda s: s.put(b"new", b"x", -1), ValueError, "timestamp", id="put-ts-minus-1"),
    pytest.param(lambda s: s.put(b"k", b"x", -1), ValueError, "timestamp", id="put-ts-minus-1-k"),
    pytest.param(lambda s: s.put(b"new", None, -1), ValueError, "timestamp", id="put-none-ts-neg"),
    pytest.param(lambda s: s.put(b"new", b"x", -I), ValueError, "timestamp", id="put-ts-minus-i"),
    pytest.param(lambda s: s.put(b"new", b"x", -(2**63)), ValueError, "timestamp", id="put-ts-min"),
    pytest.param(lambda s: s.put(b"new", b"x", None), TypeError, "timestamp", id="put-ts-none"),
    pytest.param(lambda s: s.put(b"new", b"x", "5"), TypeError, "timestamp", id="put-ts-str"),
    pytest.param(lambda s: s.put(b"new", b"x", 1.5), TypeError, "timestamp", id="put-ts-float"),
    # get
    pytest.param(lambda s: s.get(None), TypeError, "key", id="get-key-none"),
    pytest.param(lambda s: s.get("k"), TypeError, "key", id="get-key-str"),
    pytest.param(lambda s: s.get(1), TypeError, "key", id="get-key-int"),
    pytest.param(lambda s: s.get(None, 10), TypeError, "key", id="get-as-of-key-none"),
    pytest.param(lambda s: s.get(b"k", "10"), TypeError, "as_of", id="get-as-of-str"),
    pytest.param(lambda s: s.get(b"k", 1.5), TypeError, "as_of", id="get-as-of-float"),
    # delete
    pytest.param(lambda s: s.delete(None, I + 40), TypeError, "key", id="delete-key-none"),
    pytest.param(lambda s: s.delete("k", I + 40), TypeError, "key", id="delete-key-str"),
    pytest.param(lambda s: s.delete(1, I + 40), TypeError, "key", id="delete-key-int"),
    pytest.param(lambda s: s.delete(b"k", -1), ValueError, "timestamp", id="delete-ts-minus-1"),
    pytest.param(lambda s: s.delete(b"k", -(2**63)), ValueError, "timestamp", id="delete-ts-min"),
    pytest.param(lambda s: s.delete(b"k", None), TypeError, "timestamp", id="delete-ts-none"),
    pytest.param(lambda s: s.delete(b"k", "5"), TypeError, "timestamp", id="delete-ts-str"),
    # versions
    pytest.param(lambda s: s.versions(None), TypeError, "key", id="versions-key-none"),
    pytest.param(lambda s: s.versions("k"), TypeError, "key", id="versions-key-str"),
    pytest.param(lambda s: s.versions(1), TypeError, "key", id="versions-key-int"),
    pytest.param(lambda s: s.versions(b"k", 5, 3), ValueError, "from_time", id="versions-5-3"),
    pytest.param(lambda s: s.versions(b"k", 0, -1), ValueError, "from_time", id="versions-0-m1"),
    pytest.param(
        lambda s: s.versions(b"k", 2**63 - 1, -(2**63)),
        ValueError,
        "from_time",
        id="versions-max-min",
    ),
    pytest.param(
        lambda s: s.versions(b"k", I + 21, I + 20, ascending=True),
        ValueError,
        "from_time",
        id="versions-ascending-from-gt-to",
    ),
    pytest.param(lambda s: s.versions(b"k", "0"), TypeError, "from_time", id="versions-from-str"),
    pytest.param(lambda s: s.versions(b"k", 0, "9"), TypeError, "to_time", id="versions-to-str"),
    # put_batch: a bad row after good rows
    pytest.param(
        lambda s: s.put_batch([b"new1", None], [b"x", b"y"], [I + 40, I + 41]),
        TypeError,
        "key",
        id="put-batch-key-none",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", "new2"], [b"x", b"y"], [I + 40, I + 41]),
        TypeError,
        "key",
        id="put-batch-key-str",
    ),
    pytest.param(
        lambda s: s.put_batch(["new1", "new2"], [b"x", b"y"], [I + 40, I + 41]),
        TypeError,
        "key",
        id="put-batch-keys-all-str",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], ["x", "y"], [I + 40, I + 41]),
        TypeError,
        "value",
        id="put-batch-values-all-str",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", 7], [b"x", b"y"], [I + 40, I + 41]),
        TypeError,
        "key",
        id="put-batch-key-int",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", "y"], [I + 40, I + 41]),
        TypeError,
        "value",
        id="put-batch-value-str",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", 5], [I + 40, I + 41]),
        TypeError,
        "value",
        id="put-batch-value-int",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"k", b"new2"], [b"x", b"y", b"z"], [I + 40, I + 50, -1]),
        ValueError,
        "timestamp",
        id="put-batch-ts-negative-last",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", b"y"], [-1, I + 40]),
        ValueError,
        "timestamp",
        id="put-batch-ts-negative-first",
    ),
    pytest.param(
        lambda s: s.put_batch(
            pa.array([b"new1", b"new2"], type=pa.binary()),
            pa.array([b"x", None], type=pa.binary()),
            pa.array([I + 40, -5], type=pa.int64()),
        ),
        ValueError,
        "timestamp",
        id="put-batch-arrow-ts-negative",
    ),
    pytest.param(
        lambda s: s.put_batch(
            pa.array([b"new1", None], type=pa.binary()),
            pa.array([b"x", b"y"], type=pa.binary()),
            pa.array([I + 40, I + 41], type=pa.int64()),
        ),
        (TypeError, ValueError),
        "key",
        id="put-batch-arrow-key-null",
    ),
    pytest.param(
        lambda s: s.put_batch(
            pa.array([b"new1", b"new2"], type=pa.binary()),
            pa.array([b"x", b"y"], type=pa.binary()),
            pa.array([I + 40, None], type=pa.int64()),
        ),
        (TypeError, ValueError),
        "timestamp",
        id="put-batch-arrow-ts-null",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", b"y"], _numpy_timestamps([I + 40, -1])),
        ValueError,
        "timestamp",
        id="put-batch-numpy-ts-negative",
        marks=needs_numpy,
    ),
    # times must be integers: a float is never truncated, in a list or an array
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", b"y"], [I + 40, 1.5]),
        TypeError,
        r"timestamps\[1\] must be int, got float",
        id="put-batch-ts-float-item",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x"], (True,)),
        TypeError,
        r"timestamps\[0\] must be int, got bool",
        id="put-batch-ts-bool-item",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x"], pa.array([1.0])),
        TypeError,
        "timestamps must be integers, got Arrow type Float64",
        id="put-batch-arrow-ts-float",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x"], [2**63]),
        ValueError,
        r"timestamps\[0\] must fit in 64 bits",
        id="put-batch-ts-beyond-int64-item",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x"], pa.array([2**63], pa.uint64())),
        ValueError,
        r"timestamps\[0\] must fit in 64 bits",
        id="put-batch-arrow-ts-beyond-int64",
    ),
    pytest.param(
        lambda s: s.delete_batch([b"k"], [I + 40.0]),
        TypeError,
        r"timestamps\[0\] must be int, got float",
        id="delete-batch-ts-float-item",
    ),
    pytest.param(
        lambda s: s.get_batch([b"k", b"j"], [1, 2.5]),
        TypeError,
        r"as_of\[1\] must be int, got float",
        id="get-batch-as-of-float-item",
    ),
    pytest.param(
        lambda s: s.put_batch(None, [b"x"], [I + 40]), TypeError, "keys", id="put-batch-keys-none"
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x"], None),
        TypeError,
        "timestamps",
        id="put-batch-timestamps-none",
    ),
    # delete_batch
    pytest.param(
        lambda s: s.delete_batch([b"new1", None], [I + 40, I + 41]),
        TypeError,
        "key",
        id="delete-batch-key-none",
    ),
    pytest.param(
        lambda s: s.delete_batch([b"k", "j"], [I + 40, I + 41]),
        TypeError,
        "key",
        id="delete-batch-key-str",
    ),
    pytest.param(
        lambda s: s.delete_batch([b"k", b"j"], [I + 40, -1]),
        ValueError,
        "timestamp",
        id="delete-batch-ts-negative",
    ),
    pytest.param(
        lambda s: s.delete_batch(
            pa.array([b"k", b"j"], type=pa.binary()), pa.array([I + 40, -1], type=pa.int64())
        ),
        ValueError,
        "timestamp",
        id="delete-batch-arrow-ts-negative",
    ),
    # get_batch
    pytest.param(lambda s: s.get_batch([b"k", None]), TypeError, "key", id="get-batch-key-none"),
    pytest.param(lambda s: s.get_batch([b"k", "j"]), TypeError, "key", id="get-batch-key-str"),
    pytest.param(lambda s: s.get_batch([b"k", 1]), TypeError, "key", id="get-batch-key-int"),
    pytest.param(lambda s: s.get_batch([b"k"], "5"), TypeError, "as_of", id="get-batch-as-of-str"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD_CALLS)
def test_bad_argument_raises_and_changes_nothing(
    seeded: VersionedStore, call: Call, error: type[Exception], match: str
) -> None:
    """A bad argument raises the documented error naming it; every read is unchanged."""
    before = snapshot(seeded)
    with pytest.raises(error, match=match):
        call(seeded)
    assert snapshot(seeded) == before
    assert_seeded(seeded)
    # the store still works normally afterwards
    assert seeded.put(b"new", b"ok", I + 40) == VALID_TO_UNDEFINED
    assert seeded.get(b"new") == rec(b"ok", I + 40)


# (call, the two argument names the message must contain)
MISMATCHED_BATCHES = [
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x"], [I + 40, I + 41]),
        ("keys", "values"),
        id="put-batch-values-short",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1"], [b"x", b"y"], [I + 40]),
        ("keys", "values"),
        id="put-batch-values-long",
    ),
    pytest.param(
        lambda s: s.put_batch([b"new1", b"new2"], [b"x", b"y"], [I + 40, I + 41, I + 42]),
        ("keys", "timestamps"),
        id="put-batch-timestamps-long",
    ),
    pytest.param(
        lambda s: s.put_batch(
            pa.array([b"new1", b"new2"], type=pa.binary()),
            pa.array([b"x", b"y"], type=pa.binary()),
            pa.array([I + 40], type=pa.int64()),
        ),
        ("keys", "timestamps"),
        id="put-batch-arrow-timestamps-short",
    ),
    pytest.param(
        lambda s: s.delete_batch([b"k", b"j"], [I + 40]),
        ("keys", "timestamps"),
        id="delete-batch-timestamps-short",
    ),
    pytest.param(
        lambda s: s.get_batch([b"k", b"j"], [10, 20, 30]),
        ("keys", "as_of"),
        id="get-batch-as-of-long",
    ),
    pytest.param(
        lambda s: s.get_batch([b"k", b"j"], pa.array([10], type=pa.int64())),
        ("keys", "as_of"),
        id="get-batch-arrow-as-of-short",
    ),
]


@pytest.mark.parametrize(("call", "names"), MISMATCHED_BATCHES)
def test_mismatched_batch_lengths_raise_value_error(
    seeded: VersionedStore, call: Call, names: tuple[str, str]
) -> None:
    """Batch inputs of different lengths raise ValueError naming both arguments; no write."""
    before = snapshot(seeded)
    with pytest.raises(ValueError, match=names[0]) as excinfo:
        call(seeded)
    assert names[1] in str(excinfo.value)
    assert snapshot(seeded) == before


def test_bad_row_leaves_whole_batch_unwritten(seeded: VersionedStore) -> None:
    """A negative timestamp in the last row: no row is written and the stream time stays."""
    before = snapshot(seeded)
    keys = [b"new1", b"k", b"j", b"new2"]
    with pytest.raises(ValueError, match="timestamp"):
        seeded.put_batch(keys, [b"a", None, b"c", b"d"], [I + 70, I + 50, I + 60, -7])
    assert snapshot(seeded) == before
    with pytest.raises(ValueError, match="timestamp"):
        seeded.delete_batch(keys, [I + 70, I + 50, I + 60, -7])
    assert snapshot(seeded) == before
    # the same batch without the bad row is accepted
    codes = seeded.put_batch(keys[:3], [b"a", None, b"c"], [I + 70, I + 50, I + 60])
    assert codes.to_pylist() == [VALID_TO_UNDEFINED] * 3


def test_expired_write_is_an_outcome_not_an_error(seeded: VersionedStore) -> None:
    """put older than the grace period returns NOT_PUT, delete returns None: no exception."""
    assert seeded.put(b"other", b"x", R + I) == VALID_TO_UNDEFINED
    before = snapshot(seeded)
    assert seeded.put(b"k", b"late", I - 1) == verstore.NOT_PUT
    assert seeded.delete(b"k", I - 1) is None
    assert seeded.put_batch([b"k"], [b"late"], [I - 1]).to_pylist() == [verstore.NOT_PUT]
    assert snapshot(seeded) == before


# --------------------------------------------------------------------------------------------
# configuration


def open_persistent(path: Path, **config: Any) -> VersionedStore:
    return VersionedStore(path, **config)


def open_in_memory(_path: Path, **config: Any) -> VersionedStore:
    return VersionedStore.in_memory(**config)


# (keyword arguments, expected exception, match)
BAD_CONFIGS = [
    pytest.param({"history_retention_ms": -1}, ValueError, "history_retention_ms", id="r-neg"),
    pytest.param(
        {"history_retention_ms": -(2**63)}, ValueError, "history_retention_ms", id="r-min"
    ),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": 0},
        ValueError,
        "segment_interval_ms",
        id="i-zero",
    ),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": -1},
        ValueError,
        "segment_interval_ms",
        id="i-neg",
    ),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": -(2**63)},
        ValueError,
        "segment_interval_ms",
        id="i-min",
    ),
    pytest.param({"history_retention_ms": "300000"}, TypeError, "history_retention_ms", id="r-str"),
    pytest.param({"history_retention_ms": None}, TypeError, "history_retention_ms", id="r-none"),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": 1.5},
        TypeError,
        "segment_interval_ms",
        id="i-float",
    ),
    pytest.param({}, TypeError, "history_retention_ms", id="r-missing"),
    # latest_ttl_ms: None (the default) or an int >= 1 (docs/semantics.md §2.15)
    *[
        pytest.param(
            {"history_retention_ms": R, "latest_ttl_ms": ttl}, error, "latest_ttl_ms", id=name
        )
        for ttl, error, name in [
            (0, ValueError, "ttl-zero"),
            (-1, ValueError, "ttl-neg"),
            (-(2**63), ValueError, "ttl-min"),
            (1.5, TypeError, "ttl-float"),
            (True, TypeError, "ttl-bool"),
            ("5", TypeError, "ttl-str"),
        ]
    ],
]


@pytest.mark.parametrize(
    "opener", [open_persistent, open_in_memory], ids=["persistent", "in_memory"]
)
@pytest.mark.parametrize(("config", "error", "match"), BAD_CONFIGS)
def test_bad_config_raises(
    tmp_path: Path,
    opener: Callable[..., VersionedStore],
    config: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    """Negative retention, interval < 1 and wrong types raise, naming the argument."""
    with pytest.raises(error, match=match):
        opener(tmp_path / "store", **config)


@pytest.mark.parametrize(("config", "error", "match"), BAD_CONFIGS)
def test_bad_config_on_existing_store_changes_nothing(
    make_store: MakeStore,
    tmp_path: Path,
    config: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    """A bad configuration for an existing path raises and leaves its data as it was."""
    path = tmp_path / "existing"
    store = make_store(path)
    seed(store)
    store.close()

    with pytest.raises(error, match=match):
        VersionedStore(path, **config)

    assert_seeded(make_store(path))


@pytest.mark.parametrize("path", [None, 123, 1.5], ids=["none", "int", "float"])
def test_bad_path_raises_type_or_value_error(tmp_path: Path, path: Any) -> None:
    """A path that is not str / os.PathLike raises TypeError naming it."""
    with pytest.raises(TypeError, match="path"):
        VersionedStore(path, history_retention_ms=R)


@pytest.mark.parametrize("as_type", [str, Path], ids=["str", "pathlike"])
def test_path_accepts_str_and_pathlike(tmp_path: Path, as_type: Callable[[Any], Any]) -> None:
    """The path may be a str or an os.PathLike; a missing directory is created."""
    path = tmp_path / "nested" / "dir"
    with VersionedStore(as_type(path), history_retention_ms=R) as store:
        assert store.put(b"k", b"v", 1) == VALID_TO_UNDEFINED
    assert path.is_dir()
    with VersionedStore(os.fspath(path), history_retention_ms=R) as store:
        assert store.get(b"k") == rec(b"v", 1)


# --------------------------------------------------------------------------------------------
# calls after close


CLOSED_CALLS = [
    pytest.param(lambda s: s.put(b"k", b"x", I + 40), id="put"),
    pytest.param(lambda s: s.put(b"k", None, I + 40), id="put-tombstone"),
    pytest.param(lambda s: s.get(b"k"), id="get"),
    pytest.param(lambda s: s.get(b"k", 10), id="get-as-of"),
    pytest.param(lambda s: s.delete(b"k", I + 40), id="delete"),
    pytest.param(lambda s: s.versions(b"k"), id="versions"),
    pytest.param(lambda s: s.versions(b"k", 0, 10, ascending=True), id="versions-bounds"),
    pytest.param(lambda s: s.flush(), id="flush"),
    pytest.param(lambda s: s.put_batch([b"k"], [b"x"], [I + 40]), id="put-batch"),
    pytest.param(lambda s: s.get_batch([b"k"]), id="get-batch"),
    pytest.param(lambda s: s.get_batch([b"k"], 10), id="get-batch-as-of"),
    pytest.param(lambda s: s.delete_batch([b"k"], [I + 40]), id="delete-batch"),
    pytest.param(lambda s: s.observed_stream_time, id="observed-stream-time"),
    pytest.param(lambda s: s.history_retention_ms, id="history-retention-ms"),
    pytest.param(lambda s: s.segment_interval_ms, id="segment-interval-ms"),
]


@pytest.mark.parametrize("call", CLOSED_CALLS)
def test_call_after_close_raises_store_closed(
    make_store: MakeStore, store_kind: str, call: Call
) -> None:
    """Every method and property raises StoreClosedError after close()."""
    store = make_store(kind=store_kind)
    seed(store)
    store.close()
    with pytest.raises(verstore.StoreClosedError):
        call(store)
    # close() stays idempotent
    store.close()


@pytest.mark.parametrize("call", CLOSED_CALLS)
def test_call_after_context_exit_raises_store_closed(tmp_path: Path, call: Call) -> None:
    """Leaving the with-block closes the store; the data is intact on reopen."""
    path = tmp_path / "ctx"
    with VersionedStore(path, history_retention_ms=R, segment_interval_ms=I) as store:
        seed(store)
    with pytest.raises(verstore.StoreClosedError):
        call(store)
    with VersionedStore(path, history_retention_ms=R, segment_interval_ms=I) as reopened:
        assert_seeded(reopened)


def test_close_is_idempotent(make_store: MakeStore, store_kind: str) -> None:
    """close() may be called any number of times, also after leaving a with-block."""
    store = make_store(kind=store_kind)
    assert not store.closed
    store.close()
    assert store.closed
    store.close()
    assert store.closed
    with make_store(kind=store_kind) as other:
        other.close()
    other.close()


def test_close_keeps_data_for_reopen(make_store: MakeStore, tmp_path: Path) -> None:
    """A StoreClosedError call does not write: the reopened store holds the seeded data."""
    path = tmp_path / "closed"
    store = make_store(path)
    seed(store)
    store.close()
    for param in CLOSED_CALLS:
        call: Call = param.values[0]  # type: ignore[assignment]
        with pytest.raises(verstore.StoreClosedError):
            call(store)
    assert_seeded(make_store(path))


# --------------------------------------------------------------------------------------------
# locking


def test_second_open_of_same_path_raises_store_locked(
    make_store: MakeStore, tmp_path: Path
) -> None:
    """A path already open in this process raises StoreLockedError; the first store works."""
    path = tmp_path / "locked"
    first = make_store(path)
    seed(first)
    before = snapshot(first)

    with pytest.raises(verstore.StoreLockedError):
        VersionedStore(path, history_retention_ms=R, segment_interval_ms=I)
    with pytest.raises(verstore.StoreLockedError):
        VersionedStore(str(path), history_retention_ms=R, segment_interval_ms=I)
    with pytest.raises(verstore.StoreLockedError):
        VersionedStore(path / ".." / path.name, history_retention_ms=R, segment_interval_ms=I)
    link = tmp_path / "link"
    link.symlink_to(path, target_is_directory=True)
    with pytest.raises(verstore.StoreLockedError):
        VersionedStore(link, history_retention_ms=R, segment_interval_ms=I)

    assert snapshot(first) == before
    assert first.put(b"new", b"still-works", I + 40) == VALID_TO_UNDEFINED
    first.close()
    # the lock is released by close()
    reopened = make_store(path)
    assert reopened.get(b"new") == rec(b"still-works", I + 40)


LOCK_CHILD = """
import sys
import verstore
try:
    verstore.VersionedStore(sys.argv[1], history_retention_ms=300000, segment_interval_ms=100000)
except verstore.StoreLockedError:
    print("StoreLockedError")
except Exception as error:
    print("other", type(error).__name__, error)
else:
    print("opened")
"""


def test_open_from_another_process_raises_store_locked(
    make_store: MakeStore, tmp_path: Path
) -> None:
    """A path open in this process cannot be opened by another process (StoreLockedError)."""
    path = tmp_path / "locked"
    first = make_store(path)
    seed(first)
    result = subprocess.run(
        [sys.executable, "-c", LOCK_CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.strip() == "StoreLockedError", result.stderr
    assert_seeded(first)


# --------------------------------------------------------------------------------------------
# reopening with another configuration


INCOMPATIBLE = [
    pytest.param(
        {"history_retention_ms": 200_000, "segment_interval_ms": I},
        r"history[_ ]retention",
        id="other-retention",
    ),
    pytest.param(
        {"history_retention_ms": 0, "segment_interval_ms": I},
        r"history[_ ]retention",
        id="zero-retention",
    ),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": 50_000},
        r"segment[_ ]interval",
        id="other-interval",
    ),
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": I + 1},
        r"segment[_ ]interval",
        id="interval-plus-one",
    ),
    # None means Kafka's default rule: 60 000 for R = 300 000, not the stored 100 000
    pytest.param(
        {"history_retention_ms": R, "segment_interval_ms": None},
        r"segment[_ ]interval",
        id="default-interval",
    ),
]


@pytest.mark.parametrize(("config", "match"), INCOMPATIBLE)
def test_reopen_with_other_config_raises_incompatible(
    make_store: MakeStore, tmp_path: Path, config: dict[str, Any], match: str
) -> None:
    """Reopening with another retention or interval raises IncompatibleConfigError, no change."""
    path = tmp_path / "config"
    store = make_store(path)
    seed(store)
    store.close()

    with pytest.raises(verstore.IncompatibleConfigError, match=match):
        VersionedStore(path, **config)
    # the failed open released the path and rewrote nothing
    reopened = make_store(path)
    assert reopened.history_retention_ms == R
    assert reopened.segment_interval_ms == I
    assert_seeded(reopened)


def test_reopen_with_default_interval_spelled_out_is_compatible(
    make_store: MakeStore, tmp_path: Path
) -> None:
    """A store created with the default interval reopens with None or the same explicit value."""
    path = tmp_path / "default"
    store = make_store(path, history_retention_ms=R, segment_interval_ms=None)
    seed(store)
    store.close()

    explicit = make_store(path, history_retention_ms=R, segment_interval_ms=60_000)
    assert explicit.segment_interval_ms == 60_000
    assert_seeded(explicit)
    explicit.close()
    with pytest.raises(verstore.IncompatibleConfigError, match=r"segment[_ ]interval"):
        VersionedStore(path, history_retention_ms=R, segment_interval_ms=I)
    assert_seeded(make_store(path, history_retention_ms=R, segment_interval_ms=None))


# --------------------------------------------------------------------------------------------
# latest_ttl_ms on reopen: a TTL may be added or lowered, never raised or removed (§2.15)

TTL = 10**9  # far beyond the seeded times: nothing expires, so assert_seeded holds


@pytest.mark.parametrize(
    ("created", "reopened", "refused"),
    [
        pytest.param(None, TTL, False, id="add"),
        pytest.param(TTL, TTL // 2, False, id="lower"),
        pytest.param(TTL, TTL, False, id="same"),
        pytest.param(TTL, TTL + 1, True, id="raise"),
        pytest.param(TTL, None, True, id="remove"),
    ],
)
def test_reopen_with_another_latest_ttl(
    make_store: MakeStore,
    tmp_path: Path,
    created: int | None,
    reopened: int | None,
    refused: bool,
) -> None:
    """Adding or lowering a TTL only shortens validity, which reads already allow for; raising
    or removing it would bring back what expired, and may have been reclaimed."""
    path = tmp_path / "ttl"
    store = make_store(path, latest_ttl_ms=created)
    seed(store)
    store.close()
    if refused:
        with pytest.raises(verstore.IncompatibleConfigError, match=r"latest[_ ]ttl"):
            VersionedStore(
                path, history_retention_ms=R, segment_interval_ms=I, latest_ttl_ms=reopened
            )
        again = make_store(path, latest_ttl_ms=created)  # the refused open changed nothing
        assert again.latest_ttl_ms == created
        assert_seeded(again)
        return
    again = make_store(path, latest_ttl_ms=reopened)
    assert again.latest_ttl_ms == reopened
    assert_seeded(again)
    again.close()
    # the new TTL is the store's from now on: going back up is a raise
    if reopened != created:
        with pytest.raises(verstore.IncompatibleConfigError, match=r"latest[_ ]ttl"):
            VersionedStore(
                path, history_retention_ms=R, segment_interval_ms=I, latest_ttl_ms=created
            )
    assert_seeded(make_store(path, latest_ttl_ms=reopened))


@pytest.mark.parametrize(
    ("ttl", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("5", TypeError)],
    ids=["zero", "neg", "float", "bool", "str"],
)
def test_group_history_refuses_a_bad_latest_ttl(ttl: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="latest_ttl_ms"):
        verstore.GroupHistory(history_retention_ms=R, latest_ttl_ms=ttl)
    data = verstore.GroupHistory(history_retention_ms=R).to_bytes()
    with pytest.raises(error, match="latest_ttl_ms"):
        verstore.GroupHistory.from_bytes(data, history_retention_ms=R, latest_ttl_ms=ttl)


@pytest.mark.parametrize(
    ("created", "restored", "refused"),
    [(None, TTL, False), (TTL, TTL // 2, False), (TTL, TTL + 1, True), (TTL, None, True)],
    ids=["add", "lower", "raise", "remove"],
)
def test_group_history_from_bytes_with_another_latest_ttl(
    created: int | None, restored: int | None, refused: bool
) -> None:
    """GroupHistory.from_bytes follows the reopen rule of a store."""
    history = verstore.GroupHistory(history_retention_ms=R, latest_ttl_ms=created)
    history.put(b"v", 10)
    data = history.to_bytes()
    if refused:
        with pytest.raises(verstore.IncompatibleConfigError, match=r"latest[_ ]ttl"):
            verstore.GroupHistory.from_bytes(data, history_retention_ms=R, latest_ttl_ms=restored)
        return
    again = verstore.GroupHistory.from_bytes(data, history_retention_ms=R, latest_ttl_ms=restored)
    assert again.latest_ttl_ms == restored
    assert again.get() == rec(b"v", 10)


# --------------------------------------------------------------------------------------------
# times that are bools or beyond 64 bits, a batch of values over 2 GiB


def test_batch_of_values_over_2_gib_is_a_value_error() -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    big = bytes(2**29)  # five references to one 512 MiB value: 2.5 GiB in the batch
    with pytest.raises(ValueError, match="2 GiB"):
        store.put_batch([b"k"] * 5, [big] * 5, [1, 2, 3, 4, 5])
    assert store.get(b"k") is None
    assert store.observed_stream_time == -1
    with pytest.raises(ValueError, match="2 GiB"):
        store.put_batch([big] * 5, [None] * 5, [1, 2, 3, 4, 5])


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put(b"k", b"v", True),
        lambda s: s.delete(b"k", False),
        lambda s: s.get(b"k", as_of=True),
        lambda s: s.versions(b"k", from_time=True),
        lambda s: s.versions(b"k", to_time=False),
        lambda s: s.get_batch([b"k"], as_of=True),
        lambda s: s.put_batch([b"k"], [b"v"], [True]),
    ],
    ids=["put", "delete", "get", "versions_from", "versions_to", "get_batch", "put_batch"],
)
def test_a_bool_is_not_a_time(call: object) -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    with pytest.raises(TypeError, match="bool"):
        call(store)  # type: ignore[operator]
    assert store.observed_stream_time == -1


def test_group_history_refuses_bool_times() -> None:
    history = verstore.GroupHistory(history_retention_ms=1_000)
    with pytest.raises(TypeError, match="bool"):
        history.put(b"v", True)
    with pytest.raises(TypeError, match="bool"):
        history.get(as_of=False)


@pytest.mark.parametrize("time", [2**63, -(2**63) - 1, 2**100])
@pytest.mark.parametrize(
    "call",
    [
        lambda s, t: s.put(b"k", b"v", t),
        lambda s, t: s.delete(b"k", t),
        lambda s, t: s.get(b"k", as_of=t),
        lambda s, t: s.versions(b"k", from_time=t),
        lambda s, t: s.get_batch([b"k"], as_of=t),
        lambda s, t: s.put_batch([b"k"], [b"v"], [t]),
        lambda s, t: s.delete_batch([b"k"], [t]),
        lambda s, t: s.get_batch([b"k"], as_of=[t]),
    ],
    ids=["put", "delete", "get", "versions", "get_batch", "put_batch", "delete_batch", "as_of"],
)
def test_a_time_beyond_64_bits_is_a_value_error(call: object, time: int) -> None:
    store = verstore.VersionedStore.in_memory(history_retention_ms=1_000)
    with pytest.raises(ValueError, match="64 bits"):
        call(store, time)  # type: ignore[operator]
    assert store.observed_stream_time == -1
