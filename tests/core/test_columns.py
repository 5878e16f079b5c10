"""encode_rows / decode_rows: typed columns to tuple-encoded bytes and back (docs/format.md).

Round trips of every supported type, order preservation against pyarrow's sort of the typed
columns, golden bytes that pin the encoding, corruption and unsupported types; sort_indices,
the byte order of encoded rows, against pyarrow's stable sort.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import verstore
from hypothesis import given, settings
from hypothesis import strategies as st
from verstore._core import TUPLE_ENCODING, decode_rows, encode_rows, sort_indices

SCHEMA = pa.schema([("sym", pa.string()), ("n", pa.int64()), ("px", pa.float64())])

UTC = dt.UTC


def round_trip(batch: pa.RecordBatch) -> pa.RecordBatch:
    return decode_rows(encode_rows(batch), batch.schema)


def test_the_encoding_is_named_and_versioned() -> None:
    assert TUPLE_ENCODING == "verstore-tuple-1"


def test_round_trips_typed_columns_with_nulls() -> None:
    batch = pa.record_batch(
        {"sym": ["a", None, "ccc"], "n": [1, 2, None], "px": [1.5, None, -2.0]}, schema=SCHEMA
    )
    assert round_trip(batch).to_pydict() == batch.to_pydict()


# Every type Spark's Arrow conversion produces, with its edge values and a null.
SCALARS: list[tuple[pa.DataType, list[Any]]] = [
    (pa.null(), [None, None]),
    (pa.bool_(), [True, False, None]),
    (pa.int8(), [-128, -1, 0, 127, None]),
    (pa.int16(), [-(2**15), 0, 2**15 - 1, None]),
    (pa.int32(), [-(2**31), 0, 2**31 - 1, None]),
    (pa.int64(), [-(2**63), -1, 0, 2**63 - 1, None]),
    (pa.float32(), [-math.inf, -1.5, 0.0, 1.5, math.inf, None]),
    (pa.float64(), [-math.inf, -1e-308, 0.0, 5e-324, math.inf, None]),
    (
        pa.decimal128(38, 18),
        [decimal.Decimal("-12345678901234567890.5"), decimal.Decimal(0), None],
    ),
    (pa.decimal128(10, 2), [decimal.Decimal("-1.50"), decimal.Decimal("12.34"), None]),
    (pa.date32(), [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(9999, 12, 31), None]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(1900, 1, 1, tzinfo=UTC), None]),
    (pa.timestamp("us", tz="Europe/Paris"), [dt.datetime(2024, 6, 1, 12, tzinfo=UTC), None]),
    (pa.timestamp("us"), [dt.datetime(2024, 1, 1, 0, 0, 0, 1), None]),
    (pa.duration("us"), [dt.timedelta(days=-1), dt.timedelta(microseconds=1), None]),
    (pa.time64("ns"), [0, 86_399_999_999_999, None]),
    (pa.string(), ["", "a", "a\x00b", "\x01\x02", "é€😀", None]),
    (pa.large_string(), ["", "\x00", "z" * 1000, None]),
    (pa.binary(), [b"", b"\x00", b"\x00\x01\x02\xff", None]),
    (pa.large_binary(), [b"", b"\x01", bytes(range(256)), None]),
]


@pytest.mark.parametrize(("data_type", "values"), SCALARS, ids=lambda x: str(x)[:30])
def test_round_trips_every_scalar_type(data_type: pa.DataType, values: list[Any]) -> None:
    batch = pa.record_batch([pa.array(values, type=data_type)], names=["c"])
    decoded = round_trip(batch)
    assert decoded.schema == batch.schema
    assert decoded.equals(batch)


def test_round_trips_nested_types() -> None:
    point = pa.struct([("x", pa.int32()), ("label", pa.string())])
    batch = pa.record_batch(
        [
            pa.array([{"x": 1, "label": "a"}, None, {"x": None, "label": None}], type=point),
            pa.array([[1, None, 3], None, []], type=pa.list_(pa.int64())),
            pa.array([["a", ""], [None], None], type=pa.large_list(pa.string())),
            pa.array([[("k", 1.5), ("", None)], None, []], type=pa.map_(pa.string(), pa.float64())),
            pa.array(
                [[[{"x": 1, "label": None}], []], [None, [None]], None],
                type=pa.list_(pa.list_(point)),
            ),
            pa.array(
                [{"m": [(1, [b"x"])], "s": {"x": 2, "label": "b"}}, {"m": None, "s": None}, None],
                type=pa.struct([("m", pa.map_(pa.int32(), pa.list_(pa.binary()))), ("s", point)]),
            ),
        ],
        names=["point", "ints", "strs", "map", "nested", "deep"],
    )
    decoded = round_trip(batch)
    assert decoded.equals(batch)
    assert decoded.to_pylist() == batch.to_pylist()


def test_floats_follow_spark_negative_zero_is_zero_and_nan_is_one_value() -> None:
    batch = pa.record_batch([pa.array([-0.0, 0.0, math.nan, -math.nan], pa.float64())], ["f"])
    encoded = encode_rows(batch).to_pylist()
    assert encoded[0] == encoded[1]
    assert encoded[2] == encoded[3]
    decoded = decode_rows(encode_rows(batch), batch.schema).column(0).to_pylist()
    assert math.copysign(1.0, decoded[0]) == 1.0
    assert math.isnan(decoded[2]) and math.isnan(decoded[3])


def test_selects_and_orders_columns() -> None:
    batch = pa.record_batch({"a": [1, 2], "b": ["x", "y"], "c": [True, False]})
    encoded = encode_rows(batch, ["c", "a"])
    decoded = decode_rows(encoded, pa.schema([("c", pa.bool_()), ("a", pa.int64())]))
    assert decoded.to_pydict() == {"c": [True, False], "a": [1, 2]}


def test_encodes_struct_arrays_and_sliced_batches() -> None:
    batch = pa.record_batch({"a": [1, 2, 3], "b": ["x", None, "z"]})
    whole = encode_rows(batch).to_pylist()
    assert encode_rows(batch.slice(1, 2)).to_pylist() == whole[1:]
    assert encode_rows(pa.StructArray.from_arrays(batch.columns, ["a", "b"])).to_pylist() == whole


def test_only_types_matter_not_names_nullability_time_zones_or_offset_widths() -> None:
    a = pa.record_batch(
        [
            pa.array(["x"], pa.string()),
            pa.array([1], pa.timestamp("us", tz="UTC")),
            pa.array([[b"y"]], pa.list_(pa.binary())),
        ],
        schema=pa.schema(
            [
                pa.field("k", pa.string(), nullable=False),
                ("t", pa.timestamp("us", tz="UTC")),
                ("l", pa.list_(pa.binary())),
            ]
        ),
    )
    b = pa.record_batch(
        [
            pa.array(["x"], pa.large_string()),
            pa.array([1], pa.timestamp("us")),
            pa.array([[b"y"]], pa.large_list(pa.large_binary())),
        ],
        names=["other", "names", "here"],
    )
    assert encode_rows(a).to_pylist() == encode_rows(b).to_pylist()


def test_null_input_rows_decode_to_null_columns() -> None:
    one = encode_rows(pa.record_batch({"n": [7], "s": ["x"]}))
    rows = pa.array([one[0].as_py(), None], type=pa.binary())
    decoded = decode_rows(rows, pa.schema([("n", pa.int64()), ("s", pa.string())]))
    assert decoded.to_pydict() == {"n": [7, None], "s": ["x", None]}


def test_a_null_row_for_a_column_that_is_not_nullable_is_a_value_error() -> None:
    schema = pa.schema([pa.field("n", pa.int64(), nullable=False)])
    with pytest.raises(ValueError, match='row 0 is null but column "n" is not nullable'):
        decode_rows(pa.array([None], pa.binary()), schema)


def test_zero_columns_encode_one_empty_value_per_row() -> None:
    batch = pa.record_batch({"a": [1, 2, 3]})
    encoded = encode_rows(batch, [])
    assert encoded.to_pylist() == [b"", b"", b""]
    assert decode_rows(encoded, pa.schema([])).num_rows == 3


def test_unknown_column_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="columns"):
        encode_rows(pa.record_batch({"a": [1]}), ["nope"])


# --- golden bytes: these fail if the encoding changes (that is a new TUPLE_ENCODING) ---------


GOLDEN: list[tuple[pa.DataType, Any, str]] = [
    (pa.int64(), None, "00"),
    (pa.bool_(), True, "0101"),
    (pa.int8(), -1, "017f"),
    (pa.int32(), 1, "0180000001"),
    (pa.int64(), -2, "017ffffffffffffffe"),
    (pa.float64(), -1.5, "014007ffffffffffff"),
    (pa.float64(), math.nan, "01fff8000000000000"),
    (pa.float32(), 1.0, "01bf800000"),
    (pa.decimal128(10, 2), decimal.Decimal("12.34"), "01800000000000000000000000000004d2"),
    (pa.date32(), dt.date(2024, 1, 1), "0180004d0b"),
    (pa.timestamp("us", tz="UTC"), dt.datetime(2024, 1, 1, tzinfo=UTC), "0180060dd710212000"),
    (pa.string(), "", "0100"),
    (pa.string(), "a\x00b", "0161010162" + "00"),
    (pa.binary(), b"\x01\xff", "010102ff00"),
    (pa.list_(pa.int32()), [1, None], "0102800000010100"),
    (pa.struct([("a", pa.int8()), ("b", pa.string())]), {"a": 1, "b": None}, "01018100"),
    (pa.map_(pa.string(), pa.int8()), [("a", 2)], "01020161000182" + "00"),
]


@pytest.mark.parametrize(("data_type", "value", "expected"), GOLDEN, ids=lambda x: str(x)[:30])
def test_golden_bytes(data_type: pa.DataType, value: Any, expected: str) -> None:
    batch = pa.record_batch([pa.array([value], type=data_type)], names=["c"])
    assert encode_rows(batch)[0].as_py().hex() == expected
    decoded = decode_rows(pa.array([bytes.fromhex(expected)], pa.binary()), batch.schema)
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(decoded.column(0)[0].as_py())
    else:
        assert decoded.to_pylist() == batch.to_pylist()


def test_golden_bytes_of_the_worked_example_in_docs_format_md() -> None:
    batch = pa.record_batch(
        [
            pa.array(["a\x00"]),
            pa.array([-2], pa.int64()),
            pa.array([None], pa.float64()),
            pa.array([["", None]], pa.list_(pa.string())),
        ],
        names=["s", "n", "x", "l"],
    )
    expected = "01 61 01 01 00  01 7f ff ff ff ff ff ff fe  00  01 02 00 01 00"
    assert encode_rows(batch)[0].as_py() == bytes.fromhex(expected)


# --- order ---------------------------------------------------------------------------------


def _nan_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _sorted_by_bytes(batch: pa.RecordBatch) -> tuple[list[Any], list[bytes]]:
    encoded = encode_rows(batch).to_pylist()
    order = sorted(range(batch.num_rows), key=lambda i: encoded[i])
    rows = [[_nan_safe(v) for v in r.values()] for r in batch.take(order).to_pylist()]
    return rows, [encoded[i] for i in order]


def _assert_order_matches_pyarrow(batch: pa.RecordBatch) -> None:
    """pyarrow sorts each column ascending, nulls first; a float column is first sorted by
    whether it is NaN, as Spark (and the encoding) put NaN after every other float, where
    pyarrow puts NaN next to the nulls."""
    by_bytes, encoded = _sorted_by_bytes(batch)
    keyed = pa.table(batch)
    keys = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if pa.types.is_floating(column.type):
            keyed = keyed.append_column(f"{name} is NaN", pc.is_nan(column))
            keys.append((f"{name} is NaN", "ascending", "at_start"))
        keys.append((name, "ascending", "at_start"))
    typed = batch.take(pc.sort_indices(keyed, sort_keys=keys))
    by_type = [[_nan_safe(v) for v in r.values()] for r in typed.to_pylist()]
    assert by_bytes == by_type
    # equal bytes exactly for equal rows
    for i in range(1, len(encoded)):
        assert (encoded[i - 1] == encoded[i]) == (by_bytes[i - 1] == by_bytes[i])


_FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1.5, -1.5]),
    st.floats(allow_nan=True, allow_infinity=True),
)

_COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "bool": (pa.bool_(), st.booleans()),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-3, 3) | st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-3, 3) | st.integers(-(2**63), 2**63 - 1)),
    "float32": (pa.float32(), _FLOATS.map(lambda x: x if abs(x) < 1e38 or math.isinf(x) else 0.0)),
    "float64": (pa.float64(), _FLOATS),
    "decimal": (
        pa.decimal128(38, 2),
        st.decimals(min_value=-(10**35), max_value=10**35, places=2, allow_nan=False),
    ),
    "date32": (pa.date32(), st.dates()),
    "timestamp": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC))),
    "string": (pa.string(), st.text(alphabet=st.sampled_from("a\x00\x01\x02é😀"), max_size=4)),
    "large_string": (pa.large_string(), st.text(max_size=5)),
    "binary": (pa.binary(), st.binary(max_size=4)),
}


@st.composite
def _batches(draw: st.DrawFn) -> pa.RecordBatch:
    names = draw(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=3, unique=True))
    n = draw(st.integers(1, 25))
    arrays = []
    for name in names:
        data_type, values = _COLUMNS[name]
        column = draw(st.lists(st.none() | values, min_size=n, max_size=n))
        arrays.append(pa.array(column, type=data_type))
    return pa.record_batch(arrays, names=names)


@settings(max_examples=300, deadline=None)
@given(_batches())
def test_encoding_preserves_pyarrow_order(batch: pa.RecordBatch) -> None:
    _assert_order_matches_pyarrow(batch)


def _natural(value: Any) -> Any:
    """A sort key for nested values: nulls first, lists element-wise then by length."""
    if value is None:
        return (0,)
    if isinstance(value, dict):  # the struct's fields are in name order here
        return (1, [_natural(value[k]) for k in sorted(value)])
    if isinstance(value, list):
        return (1, [_natural(v) for v in value])
    return (1, value)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.lists(st.none() | st.integers(-2, 2), max_size=3),
            st.none()
            | st.fixed_dictionaries(
                {"a": st.none() | st.text("ab\x00", max_size=2), "b": st.none() | st.booleans()}
            ),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_encoding_preserves_the_order_of_nested_values(
    rows: list[tuple[list[int | None] | None, dict[str, Any] | None]],
) -> None:
    batch = pa.record_batch(
        [
            pa.array([r[0] for r in rows], pa.list_(pa.int64())),
            pa.array([r[1] for r in rows], pa.struct([("a", pa.string()), ("b", pa.bool_())])),
        ],
        names=["l", "s"],
    )
    by_bytes, _ = _sorted_by_bytes(batch)
    by_value = sorted(([r[0], r[1]] for r in rows), key=_natural)
    assert [_natural(r) for r in by_bytes] == [_natural(r) for r in by_value]


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [b"", b"\x01", b"\x02", b"\x01\x80", b"\x01\x80\x00\x00\x00\x00\x00\x00\x01\x00", b"\xff" * 9],
)
def test_garbage_bytes_are_a_corruption_error_not_a_crash(
    garbage: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(verstore.CorruptionError, match="tuple-encoded row 0"):
        decode_rows(pa.array([garbage], type=pa.binary()), pa.schema([("n", pa.int64())]))
    assert capfd.readouterr().err == ""


def test_corruption_names_the_row_and_column(capfd: pytest.CaptureFixture[str]) -> None:
    schema = pa.schema([("s", pa.string()), ("b", pa.bool_())])
    good = encode_rows(pa.record_batch({"s": ["x"], "b": [True]}, schema=schema))[0].as_py()
    rows = pa.array([good, good[:-1] + b"\x07"], pa.binary())
    with pytest.raises(verstore.CorruptionError, match=r'row 1.*column "b".*0x07'):
        decode_rows(rows, schema)
    with pytest.raises(verstore.CorruptionError, match='column "s" does not decode'):
        decode_rows(pa.array([b"\x01\xff\x00\x00"], pa.binary()), schema)  # not UTF-8
    assert capfd.readouterr().err == ""


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=30))
def test_arbitrary_bytes_decode_or_raise_corruption(garbage: bytes) -> None:
    schema = pa.schema(
        [("s", pa.string()), ("l", pa.list_(pa.int8())), ("m", pa.map_(pa.int8(), pa.bool_()))]
    )
    try:
        decoded = decode_rows(pa.array([garbage], pa.binary()), schema)
    except verstore.CorruptionError:
        return
    assert encode_rows(decoded)[0].as_py() == garbage


UNSUPPORTED: list[tuple[pa.DataType, str]] = [
    (pa.dictionary(pa.int32(), pa.string()), "Dictionary"),
    (pa.binary(4), "FixedSizeBinary"),
    (pa.float16(), "Float16"),
    (pa.time32("s"), "Time32"),
    (pa.list_(pa.dictionary(pa.int8(), pa.string())), "Dictionary"),
    (pa.struct([("inner", pa.list_(pa.float16()))]), "Float16 at c.inner.item"),
]


@pytest.mark.parametrize(("data_type", "named"), UNSUPPORTED, ids=lambda x: str(x)[:30])
def test_unsupported_types_are_a_type_error_before_any_row(
    data_type: pa.DataType, named: str
) -> None:
    schema = pa.schema([("ok", pa.int64()), ("c", data_type)])
    empty = pa.RecordBatch.from_pylist([], schema=schema)
    message = f'column "c" has type {named}'
    with pytest.raises(TypeError, match=message):
        encode_rows(empty)
    with pytest.raises(TypeError, match=message):
        decode_rows(pa.array([], pa.binary()), schema)
    encode_rows(empty, ["ok"])  # the other columns are fine


def test_rows_must_be_binary() -> None:
    with pytest.raises(TypeError, match="rows must be a binary array"):
        decode_rows(pa.array([1]), pa.schema([("n", pa.int64())]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=60),
    st.integers(min_value=1, max_value=4),
)
def test_sort_indices_is_pyarrows_stable_byte_order(keys: list[bytes | None], chunks: int) -> None:
    # Few distinct bytes (ties, prefixes, lengths around the 16-byte integer prefix).
    keys = [None if k is None else bytes(b % 3 for b in k) for k in keys]
    expected = pc.sort_indices(pa.array(keys, pa.binary())).to_pylist()
    cut = len(keys) // chunks
    pieces = [keys[i * cut : (i + 1) * cut] for i in range(chunks - 1)] + [
        keys[(chunks - 1) * cut :]
    ]
    chunked = pa.chunked_array([pa.array(p, pa.binary()) for p in pieces], pa.binary())
    for column in (pa.array(keys, pa.binary()), pa.array(keys, pa.large_binary()), chunked):
        got = sort_indices(column)
        assert got.type == pa.uint64()
        assert got.to_pylist() == expected


def test_sort_indices_needs_binary_keys() -> None:
    with pytest.raises(TypeError, match="keys must be binary"):
        sort_indices(pa.array([1, 2]))
