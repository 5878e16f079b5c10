"""Property tests: every batch call equals the same single-record calls applied in order.

docs/semantics.md §2.7: row i of a batch call always equals the single-record call applied in
order. Two stores of the same kind get the same operations, one through ``put_batch`` /
``get_batch`` / ``delete_batch`` and one through ``put`` / ``get`` / ``delete`` loops; inputs
come as Python lists, pyarrow ``binary`` / ``large_binary`` / integer arrays (``int64`` also
sliced, so with a non-zero offset) and numpy ``int64`` / ``int32`` arrays. The reference model
breaks ties when the two disagree.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import verstore
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from reference_model import ReferenceModel, as_tuple

KEYS = [b"", b"a", b"a\x00", b"ab", b"\xff"]
keys_st = st.sampled_from(KEYS)
values_st = st.one_of(
    st.none(), st.sampled_from([b"", b"x", b"yy", b"\x00"]), st.binary(max_size=5)
)
times_st = st.integers(0, 60)
configs_st = st.tuples(st.sampled_from([0, 5, 20]), st.sampled_from([1, 3, 10]))

BYTES_FORMATS = ["list", "binary", "large_binary", "binary_sliced", "large_binary_sliced"]
# Narrower integer types are widened (numpy and Arrow alike): times here are small.
INT_FORMATS = ["list", "numpy", "numpy_int32", "int64", "int64_sliced", "int32", "uint16"]

BATCH_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Row = tuple[bytes | None, int | None, int | None]  # (value, timestamp, valid_to)


def as_bytes_input(items: list[bytes | None], fmt: str) -> Any:
    if fmt == "list":
        return list(items)
    arrow_type = pa.large_binary() if fmt.startswith("large") else pa.binary()
    if fmt.endswith("_sliced"):
        # A leading row that must be invisible: the array's offset is 1.
        return pa.array([b"PADDING", *items], arrow_type).slice(1)
    return pa.array(items, arrow_type)


def as_int_input(items: list[int], fmt: str) -> Any:
    if fmt == "list":
        return list(items)
    if fmt == "numpy":
        return np.array(items, dtype=np.int64)
    if fmt == "numpy_int32":
        return np.array(items, dtype=np.int32)
    if fmt == "int64_sliced":
        return pa.array([123_456, *items], pa.int64()).slice(1)
    if fmt in ("int32", "uint16"):
        return pa.array(items, getattr(pa, fmt)())
    return pa.array(items, pa.int64())


def expected_row(record: Any) -> Row:
    t = as_tuple(record)
    return (None, None, None) if t is None else t


def batch_rows(batch: Any, n: int) -> list[Row]:
    """Checks the documented shape of a get_batch / delete_batch result and returns its rows."""
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema.names == ["value", "timestamp", "valid_to"]
    assert batch.schema.field("value").type == pa.binary()
    assert batch.schema.field("timestamp").type == pa.int64()
    assert batch.schema.field("valid_to").type == pa.int64()
    assert batch.num_rows == n
    values = batch.column("value").to_pylist()
    stamps = batch.column("timestamp").to_pylist()
    valid_to = batch.column("valid_to").to_pylist()
    rows = list(zip(values, stamps, valid_to, strict=True))
    for value, stamp, _ in rows:
        # all three null where get() is None; value and timestamp are set otherwise
        assert (value is None) == (stamp is None)
    return rows


def codes_list(codes: Any, n: int) -> list[int]:
    assert isinstance(codes, pa.Int64Array)
    assert len(codes) == n
    assert codes.null_count == 0
    return codes.to_pylist()


@contextmanager
def two_stores(
    kind: str, factory: pytest.TempPathFactory, retention: int, interval: int
) -> Iterator[tuple[Any, Any]]:
    """(batch store, single-call store) of one kind."""
    config = {"history_retention_ms": retention, "segment_interval_ms": interval}
    if kind == "memory":
        with (
            verstore.VersionedStore.in_memory(**config) as batched,
            verstore.VersionedStore.in_memory(**config) as single,
        ):
            yield batched, single
        return
    root = factory.mktemp("batch")
    try:
        with (
            verstore.VersionedStore(root / "batched", **config) as batched,
            verstore.VersionedStore(root / "single", **config) as single,
        ):
            yield batched, single
    finally:
        shutil.rmtree(root, ignore_errors=True)


put_op = st.tuples(
    st.just("put"),
    st.lists(st.tuples(keys_st, values_st, times_st), max_size=12),
    st.sampled_from(BYTES_FORMATS),
    st.sampled_from(BYTES_FORMATS),
    st.sampled_from(INT_FORMATS),
)
delete_op = st.tuples(
    st.just("delete"),
    st.lists(st.tuples(keys_st, times_st), max_size=8),
    st.sampled_from(BYTES_FORMATS),
    st.sampled_from(INT_FORMATS),
)
get_op = st.tuples(
    st.just("get"),
    st.lists(st.tuples(keys_st, times_st), max_size=10),
    st.sampled_from(BYTES_FORMATS),
    st.sampled_from(["none", "scalar", *INT_FORMATS]),
)
ops_st = st.lists(st.one_of(put_op, put_op, delete_op, get_op), min_size=1, max_size=12)


def apply_op(op: tuple[Any, ...], batched: Any, single: Any, model: ReferenceModel) -> None:
    kind = op[0]
    if kind == "put":
        _, rows, key_fmt, value_fmt, ts_fmt = op
        keys = [r[0] for r in rows]
        values = [r[1] for r in rows]
        stamps = [r[2] for r in rows]
        got = codes_list(
            batched.put_batch(
                as_bytes_input(keys, key_fmt),
                as_bytes_input(values, value_fmt),
                as_int_input(stamps, ts_fmt),
            ),
            len(rows),
        )
        want = [single.put(k, v, t) for k, v, t in rows]
        assert got == want
        assert want == [model.put(k, v, t) for k, v, t in rows]
    elif kind == "delete":
        _, rows, key_fmt, ts_fmt = op
        keys = [r[0] for r in rows]
        stamps = [r[1] for r in rows]
        got_rows = batch_rows(
            batched.delete_batch(as_bytes_input(keys, key_fmt), as_int_input(stamps, ts_fmt)),
            len(rows),
        )
        want_rows = [expected_row(single.delete(k, t)) for k, t in rows]
        assert got_rows == want_rows
        assert want_rows == [expected_row(model.delete(k, t)) for k, t in rows]
    else:
        _, rows, key_fmt, as_of_fmt = op
        keys = [r[0] for r in rows]
        if as_of_fmt == "none":
            as_of: Any = None
            per_row: list[int | None] = [None] * len(rows)
        elif as_of_fmt == "scalar":
            as_of = rows[0][1] if rows else 7
            per_row = [as_of] * len(rows)
        else:
            per_row = [r[1] for r in rows]
            as_of = as_int_input([r[1] for r in rows], as_of_fmt)
        got_rows = batch_rows(batched.get_batch(as_bytes_input(keys, key_fmt), as_of), len(rows))
        want_rows = [expected_row(single.get(k, a)) for k, a in zip(keys, per_row, strict=True)]
        assert got_rows == want_rows
        assert want_rows == [
            expected_row(model.get(k, a)) for k, a in zip(keys, per_row, strict=True)
        ]
    assert batched.observed_stream_time == single.observed_stream_time
    assert single.observed_stream_time == model.observed_stream_time


def assert_same_history(batched: Any, single: Any) -> None:
    for key in KEYS:
        assert [as_tuple(r) for r in batched.versions(key)] == [
            as_tuple(r) for r in single.versions(key)
        ]
        assert as_tuple(batched.get(key)) == as_tuple(single.get(key))


@pytest.mark.parametrize("kind", ["memory", "disk"])
@BATCH_SETTINGS
@given(config=configs_st, ops=ops_st)
def test_batch_calls_equal_single_calls(
    kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    config: tuple[int, int],
    ops: list[tuple[Any, ...]],
) -> None:
    retention, interval = config
    model = ReferenceModel(history_retention_ms=retention, segment_interval_ms=interval)
    with two_stores(kind, tmp_path_factory, retention, interval) as (batched, single):
        for op in ops:
            note(f"op {op}")
            apply_op(op, batched, single, model)
        assert_same_history(batched, single)


@pytest.mark.parametrize("kind", ["memory", "disk"])
@settings(max_examples=15, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), config=configs_st)
def test_large_batches_equal_single_calls(
    kind: str, tmp_path_factory: pytest.TempPathFactory, seed: int, config: tuple[int, int]
) -> None:
    """A few thousand rows per call (numpy timestamps, arrow keys and values), out of order and
    with repeated keys, so a batch crosses many segments and expires some of its own rows."""
    rng = random.Random(seed)
    retention, interval = config
    n = 2_000
    keys = [rng.choice(KEYS) for _ in range(n)]
    values = [None if rng.random() < 0.15 else b"%d" % i for i in range(n)]
    stamps = [max(0, i // 4 + rng.randint(-retention - 3, 5)) for i in range(n)]
    with two_stores(kind, tmp_path_factory, retention, interval) as (batched, single):
        got = codes_list(
            batched.put_batch(
                pa.array(keys, pa.binary()),
                pa.array(values, pa.large_binary()),
                np.array(stamps, dtype=np.int64),
            ),
            n,
        )
        want = [single.put(k, v, t) for k, v, t in zip(keys, values, stamps, strict=True)]
        assert got == want
        probe = np.array([max(0, t - rng.randint(0, 8)) for t in stamps], dtype=np.int64)
        got_rows = batch_rows(batched.get_batch(keys, probe), n)
        assert got_rows == [
            expected_row(single.get(k, int(a))) for k, a in zip(keys, probe, strict=True)
        ]
        deletes = np.array([max(0, n // 4 + rng.randint(-retention - 2, 2)) for _ in range(50)])
        got_rows = batch_rows(batched.delete_batch(keys[:50], deletes.astype(np.int64)), 50)
        assert got_rows == [
            expected_row(single.delete(k, int(t))) for k, t in zip(keys[:50], deletes, strict=True)
        ]
        assert_same_history(batched, single)


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_empty_batches(kind: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    with two_stores(kind, tmp_path_factory, 5, 3) as (batched, _):
        assert codes_list(batched.put_batch([], [], []), 0) == []
        empty_keys = pa.array([], pa.binary())
        assert (
            codes_list(batched.put_batch(empty_keys, empty_keys, np.array([], np.int64)), 0) == []
        )
        assert batch_rows(batched.get_batch([]), 0) == []
        assert batch_rows(batched.get_batch(empty_keys, 3), 0) == []
        assert batch_rows(batched.get_batch([], np.array([], np.int64)), 0) == []
        assert batch_rows(batched.delete_batch([], []), 0) == []
        assert batched.observed_stream_time == -1


ViewMaker = Callable[[list[int]], Any]


@pytest.mark.parametrize(
    "make_times",
    [
        pytest.param(
            lambda ts: np.array(ts[::-1], dtype=np.int64)[::-1], id="numpy-negative-stride"
        ),
        pytest.param(
            lambda ts: np.array([x for t in ts for x in (t, -99)], dtype=np.int64)[::2],
            id="numpy-strided",
        ),
        pytest.param(
            lambda ts: np.array([[t] for t in ts], dtype=np.int64)[:, 0], id="numpy-column"
        ),
        pytest.param(lambda ts: np.array([-5, *ts], dtype=np.int64)[1:], id="numpy-offset"),
    ],
)
def test_numpy_timestamp_views(make_times: ViewMaker) -> None:
    """Numpy int64 arrays that are views (strided, offset) are read as their logical values."""
    keys = [b"a", b"b", b"a", b"c", b"a"]
    values = [b"1", b"2", None, b"", b"5"]
    stamps = [10, 3, 12, 0, 11]
    config = {"history_retention_ms": 20, "segment_interval_ms": 3}
    with (
        verstore.VersionedStore.in_memory(**config) as batched,
        verstore.VersionedStore.in_memory(**config) as single,
    ):
        got = codes_list(batched.put_batch(keys, values, make_times(stamps)), 5)
        assert got == [single.put(k, v, t) for k, v, t in zip(keys, values, stamps, strict=True)]
        got_rows = batch_rows(batched.get_batch(keys, make_times(stamps)), 5)
        assert got_rows == [
            expected_row(single.get(k, t)) for k, t in zip(keys, stamps, strict=True)
        ]
        got_rows = batch_rows(batched.delete_batch(keys, make_times(stamps)), 5)
        assert got_rows == [
            expected_row(single.delete(k, t)) for k, t in zip(keys, stamps, strict=True)
        ]
