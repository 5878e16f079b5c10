"""encode_rows / decode_rows: typed columns to order-preserving bytes and back."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
import verstore
from hypothesis import given, settings
from hypothesis import strategies as st
from verstore._core import decode_rows, encode_rows

SCHEMA = pa.schema([("sym", pa.string()), ("n", pa.int64()), ("px", pa.float64())])


def test_round_trips_typed_columns_with_nulls() -> None:
    batch = pa.record_batch(
        {"sym": ["a", None, "ccc"], "n": [1, 2, None], "px": [1.5, None, -2.0]}, schema=SCHEMA
    )
    decoded = decode_rows(encode_rows(batch), SCHEMA)
    assert decoded.to_pydict() == batch.to_pydict()


def test_selects_and_orders_columns() -> None:
    batch = pa.record_batch({"a": [1, 2], "b": ["x", "y"], "c": [True, False]})
    encoded = encode_rows(batch, ["c", "a"])
    decoded = decode_rows(encoded, pa.schema([("c", pa.bool_()), ("a", pa.int64())]))
    assert decoded.to_pydict() == {"c": [True, False], "a": [1, 2]}


def test_null_input_rows_decode_to_null_columns() -> None:
    one = encode_rows(pa.record_batch({"n": [7]}))
    rows = pa.array([one[0].as_py(), None], type=pa.binary())
    assert decode_rows(rows, pa.schema([("n", pa.int64())])).to_pydict() == {"n": [7, None]}


def test_timestamps_and_dates_round_trip() -> None:
    ts = pa.array([dt.datetime(2024, 1, 1, 12), None], type=pa.timestamp("us", tz="UTC"))
    day = pa.array([dt.date(2024, 1, 1), dt.date(1970, 1, 2)])
    batch = pa.record_batch([ts, day], names=["ts", "day"])
    assert decode_rows(encode_rows(batch), batch.schema).equals(batch)


def test_unknown_column_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="columns"):
        encode_rows(pa.record_batch({"a": [1]}), ["nope"])


def test_garbage_bytes_are_a_corruption_error_not_a_crash() -> None:
    with pytest.raises(verstore.CorruptionError):
        decode_rows(pa.array([b"\x01"], type=pa.binary()), pa.schema([("n", pa.int64())]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.text(max_size=5)), st.integers(-(2**63), 2**63 - 1)),
        min_size=1,
        max_size=30,
    )
)
def test_encoding_preserves_order(rows: list[tuple[str | None, int]]) -> None:
    batch = pa.record_batch(
        {"s": [r[0] for r in rows], "n": [r[1] for r in rows]},
        schema=pa.schema([("s", pa.string()), ("n", pa.int64())]),
    )
    encoded = encode_rows(batch).to_pylist()

    # arrow-row's default order: ascending, nulls first
    def key(r: tuple[str | None, int]) -> tuple[bool, bytes, int]:
        return (r[0] is not None, (r[0] or "").encode(), r[1])

    assert sorted(range(len(rows)), key=lambda i: encoded[i]) == sorted(
        range(len(rows)), key=lambda i: (key(rows[i]), encoded[i])
    )


def test_zero_columns_encode_one_empty_value_per_row() -> None:
    batch = pa.record_batch({"a": [1, 2, 3]})
    encoded = encode_rows(batch, [])
    assert encoded.to_pylist() == [b"", b"", b""]
    assert decode_rows(encoded, pa.schema([])).num_rows == 3
