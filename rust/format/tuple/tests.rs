//! The tuple encoding's tests: the worked example, golden bytes per type (these fail if the
//! encoding ever changes: that is a new [`TUPLE_ENCODING`] version), corruption cases, and
//! proptests of round trips and order preservation against a model of typed values.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Decimal128Type, DurationMicrosecondType, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, Time64NanosecondType, TimestampMicrosecondType,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BinaryArray, BooleanArray, DictionaryArray,
    FixedSizeBinaryArray, LargeBinaryArray, LargeListArray, LargeStringArray, ListArray, MapArray,
    NullArray, PrimitiveArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, TimeUnit};
use proptest::prelude::*;

use super::*;

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("zz"), 16).unwrap_or(0))
        .collect()
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
        .expect("batch")
}

fn codec(batch: &RecordBatch) -> TupleCodec {
    TupleCodec::new(batch.schema()).expect("supported")
}

fn encode(batch: &RecordBatch) -> Vec<Vec<u8>> {
    let encoded = codec(batch).encode(batch).expect("encodes");
    encoded
        .iter()
        .map(|r| r.unwrap_or_default().to_vec())
        .collect()
}

fn decode(schema: &RecordBatch, rows: &[&[u8]]) -> Result<RecordBatch> {
    codec(schema).decode(&BinaryArray::from_iter_values(rows))
}

fn list_field(data_type: DataType) -> FieldRef {
    Arc::new(Field::new("item", data_type, true))
}

/// The example of the module doc, byte for byte.
#[test]
fn encodes_the_worked_example() {
    let strings: ListArray = ListArray::new(
        list_field(DataType::Utf8),
        OffsetBuffer::from_lengths([2]),
        Arc::new(StringArray::from(vec![Some(""), None])),
        None,
    );
    let row = batch(vec![
        ("s", Arc::new(StringArray::from(vec!["a\0"]))),
        ("n", Arc::new(Int64Array::from(vec![-2]))),
        ("x", Arc::new(Float64Array::from(vec![None]))),
        ("l", Arc::new(strings)),
    ]);
    let expected = unhex(
        "01 61 01 01 00
         01 7F FF FF FF FF FF FF FE
         00
         01 02 00 01 00",
    );
    assert_eq!(hex(&encode(&row)[0]), hex(&expected));
    assert_eq!(decode(&row, &[&expected]).expect("decodes"), row);
}

type Int64Array = PrimitiveArray<Int64Type>;
type Float64Array = PrimitiveArray<Float64Type>;

/// Golden bytes: one column, one row per value, the exact encodings.
fn golden(array: ArrayRef, expected: &[&str]) {
    let one = batch(vec![("c", array)]);
    let array = one.column(0);
    let encoded: Vec<String> = encode(&one).iter().map(|r| hex(r)).collect();
    let expected: Vec<String> = expected.iter().map(|e| hex(&unhex(e))).collect();
    assert_eq!(encoded, expected, "{}", array.data_type());
    let rows: Vec<Vec<u8>> = expected.iter().map(|e| unhex(e)).collect();
    let rows: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
    let decoded = decode(&one, &rows).expect("decodes");
    assert_eq!(
        decoded.column(0).as_ref(),
        array.as_ref(),
        "{}",
        array.data_type()
    );
}

#[test]
fn golden_bytes_of_scalars() {
    golden(Arc::new(NullArray::new(2)), &["00", "00"]);
    golden(
        Arc::new(BooleanArray::from(vec![None, Some(false), Some(true)])),
        &["00", "01 00", "01 01"],
    );
    golden(
        Arc::new(PrimitiveArray::<Int8Type>::from(vec![
            None,
            Some(-128),
            Some(-1),
            Some(0),
            Some(1),
            Some(127),
        ])),
        &["00", "01 00", "01 7f", "01 80", "01 81", "01 ff"],
    );
    golden(
        Arc::new(PrimitiveArray::<Int16Type>::from(vec![-2, 258])),
        &["01 7ffe", "01 8102"],
    );
    golden(
        Arc::new(PrimitiveArray::<Int32Type>::from(vec![-1, 1])),
        &["01 7fffffff", "01 80000001"],
    );
    golden(
        Arc::new(Int64Array::from(vec![i64::MIN, -2, 0, 1, i64::MAX])),
        &[
            "01 0000000000000000",
            "01 7ffffffffffffffe",
            "01 8000000000000000",
            "01 8000000000000001",
            "01 ffffffffffffffff",
        ],
    );
    // 2024-01-01
    golden(
        Arc::new(PrimitiveArray::<Date32Type>::from(vec![19_723])),
        &["01 80004d0b"],
    );
    // 2024-01-01T00:00:00Z in microseconds: the time zone is schema, not bytes.
    for tz in [Some("UTC"), Some("+05:00"), None] {
        golden(
            Arc::new(
                PrimitiveArray::<TimestampMicrosecondType>::from(vec![1_704_067_200_000_000, -1])
                    .with_timezone_opt(tz),
            ),
            &["01 80060dd710212000", "01 7fffffffffffffff"],
        );
    }
    golden(
        Arc::new(PrimitiveArray::<DurationMicrosecondType>::from(vec![-1])),
        &["01 7fffffffffffffff"],
    );
    golden(
        Arc::new(PrimitiveArray::<Time64NanosecondType>::from(vec![
            86_399_999_999_999,
        ])),
        &["01 80004e94914effff"],
    );
    // -1.50, 0.00, 12.34 as decimal(38, 2): the unscaled integers
    golden(
        Arc::new(
            PrimitiveArray::<Decimal128Type>::from(vec![-150, 0, 1234])
                .with_precision_and_scale(38, 2)
                .expect("decimal"),
        ),
        &[
            "01 7fffffffffffffffffffffffffffff6a",
            "01 80000000000000000000000000000000",
            "01 800000000000000000000000000004d2",
        ],
    );
    golden(
        Arc::new(Float64Array::from(vec![
            f64::NEG_INFINITY,
            -1.5,
            0.0,
            1.5,
            f64::INFINITY,
            f64::from_bits(0x7FF8_0000_0000_0000),
        ])),
        &[
            "01 000fffffffffffff",
            "01 4007ffffffffffff",
            "01 8000000000000000",
            "01 bff8000000000000",
            "01 fff0000000000000",
            "01 fff8000000000000",
        ],
    );
    golden(
        Arc::new(PrimitiveArray::<Float32Type>::from(vec![
            -1.0,
            f32::from_bits(0x7FC0_0000),
        ])),
        &["01 407fffff", "01 ffc00000"],
    );
}

#[test]
fn floats_encode_as_spark_compares_them() {
    // -0.0 is 0.0, and every NaN (any sign, any payload) is the canonical NaN.
    let weird = batch(vec![(
        "c",
        Arc::new(Float64Array::from(vec![
            -0.0,
            0.0,
            f64::from_bits(0xFFF8_0000_0000_0001),
            f64::NAN,
        ])),
    )]);
    let encoded: Vec<String> = encode(&weird).iter().map(|r| hex(r)).collect();
    assert_eq!(
        encoded,
        [
            "018000000000000000",
            "018000000000000000",
            "01fff8000000000000",
            "01fff8000000000000"
        ]
    );
}

#[test]
fn golden_bytes_of_strings_and_binaries() {
    let values = vec![
        None,
        Some(""),
        Some("a"),
        Some("a\0b"),
        Some("\u{1}"),
        Some("é"),
    ];
    let expected = [
        "00",
        "01 00",
        "01 61 00",
        "01 61 0101 62 00",
        "01 0102 00",
        "01 c3a9 00",
    ];
    // The offset width is schema, not bytes.
    golden(Arc::new(StringArray::from(values.clone())), &expected);
    golden(Arc::new(LargeStringArray::from(values.clone())), &expected);
    let bytes: Vec<Option<&[u8]>> = values.iter().map(|v| v.map(str::as_bytes)).collect();
    golden(Arc::new(BinaryArray::from(bytes.clone())), &expected);
    golden(Arc::new(LargeBinaryArray::from(bytes)), &expected);
    golden(
        Arc::new(BinaryArray::from(vec![&[0u8, 1, 2, 0xFF][..]])),
        &["01 0101 0102 02 ff 00"],
    );
}

#[test]
fn golden_bytes_of_nested_types() {
    let fields = Fields::from(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    golden(
        Arc::new(StructArray::new(
            fields,
            vec![
                Arc::new(PrimitiveArray::<Int32Type>::from(vec![None, Some(1), None])),
                Arc::new(StringArray::from(vec![None, None, Some("x")])),
            ],
            Some(NullBuffer::from(vec![false, true, true])),
        )),
        &["00", "01 0180000001 00", "01 00 01 78 00"],
    );
    // [], [null], [null, 1] and a null list, as a list and as a large list
    let offsets = OffsetBuffer::<i32>::from_lengths([0, 0, 1, 2]);
    let values: ArrayRef = Arc::new(PrimitiveArray::<Int32Type>::from(vec![None, Some(1), None]));
    let nulls = Some(NullBuffer::from(vec![false, true, true, true]));
    let expected = ["00", "01 00", "01 01 00", "01 02 80000001 01 00"];
    golden(
        Arc::new(ListArray::new(
            list_field(DataType::Int32),
            offsets.clone(),
            values.clone(),
            nulls.clone(),
        )),
        &expected,
    );
    golden(
        Arc::new(LargeListArray::new(
            list_field(DataType::Int32),
            OffsetBuffer::<i64>::from_lengths(offsets.lengths()),
            values,
            nulls,
        )),
        &expected,
    );
    // A map is its entries list: {} , {"a": 1, "b": null}, null
    let entries = StructArray::new(
        Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Int32, true),
        ]),
        vec![
            Arc::new(StringArray::from(vec!["a", "b"])),
            Arc::new(PrimitiveArray::<Int32Type>::from(vec![Some(1), None])),
        ],
        None,
    );
    let entries_field = Arc::new(Field::new("entries", entries.data_type().clone(), false));
    golden(
        Arc::new(MapArray::new(
            entries_field,
            OffsetBuffer::from_lengths([0, 2, 0]),
            entries,
            Some(NullBuffer::from(vec![true, true, false])),
            false,
        )),
        &["01 00", "01 02 016100 0180000001 02 016200 00 00", "00"],
    );
}

#[test]
fn zero_columns_encode_the_empty_string_per_row() {
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(3));
    let empty = RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &options)
        .expect("batch");
    assert_eq!(encode(&empty), vec![Vec::<u8>::new(); 3]);
    let decoded = decode(&empty, &[b"", b"", b""]).expect("decodes");
    assert_eq!(decoded.num_rows(), 3);
}

#[test]
fn null_rows_decode_to_null_columns() {
    let schema = batch(vec![
        ("n", Arc::new(Int64Array::from(vec![7]))),
        ("s", Arc::new(StringArray::from(vec!["x"]))),
    ]);
    let codec = codec(&schema);
    let one = codec.encode(&schema).expect("encodes");
    let rows = BinaryArray::from(vec![Some(one.value(0)), None]);
    let decoded = codec.decode(&rows).expect("decodes");
    assert_eq!(
        decoded,
        batch(vec![
            ("n", Arc::new(Int64Array::from(vec![Some(7), None]))),
            ("s", Arc::new(StringArray::from(vec![Some("x"), None]))),
        ])
    );
    // ... unless a column is not nullable: that is the caller's schema, not corruption.
    let strict = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let err = TupleCodec::new(strict)
        .expect("supported")
        .decode(&BinaryArray::from(vec![None::<&[u8]>]))
        .expect_err("null row");
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("\"n\""), "{err}");
}

#[test]
fn sliced_arrays_encode_like_whole_ones() {
    let strings: ArrayRef = Arc::new(StringArray::from(vec![
        Some("a"),
        None,
        Some("ccc"),
        Some(""),
    ]));
    let lists: ArrayRef = Arc::new(ListArray::new(
        list_field(DataType::Utf8),
        OffsetBuffer::from_lengths([1, 0, 2, 1]),
        strings.clone(),
        None,
    ));
    let whole = batch(vec![("s", strings.clone()), ("l", lists.clone())]);
    let part = batch(vec![("s", strings.slice(1, 2)), ("l", lists.slice(1, 2))]);
    assert_eq!(encode(&part), encode(&whole)[1..3]);
}

#[test]
fn unsupported_types_name_the_column_and_type() {
    let cases: Vec<(Field, &str)> = vec![
        (
            Field::new(
                "d",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
            "column \"d\" has type Dictionary(Int32, Utf8)",
        ),
        (
            Field::new("f", DataType::FixedSizeBinary(4), true),
            "column \"f\" has type FixedSizeBinary(4)",
        ),
        (
            Field::new(
                "s",
                DataType::Struct(Fields::from(vec![Field::new(
                    "inner",
                    DataType::List(list_field(DataType::Float16)),
                    true,
                )])),
                true,
            ),
            "column \"s\" has type Float16 at s.inner.item",
        ),
        (
            Field::new("t", DataType::Time32(TimeUnit::Second), true),
            "column \"t\" has type Time32(s)",
        ),
    ];
    for (field, message) in cases {
        let err = TupleCodec::new(Arc::new(Schema::new(vec![field]))).expect_err("unsupported");
        assert!(err.to_string().starts_with(message), "{err}");
        assert!(err.to_string().contains(TUPLE_ENCODING), "{err}");
    }
    // Dictionary arrays exist; the codec refuses them before touching a row.
    let dict: DictionaryArray<Int32Type> = vec!["a"].into_iter().collect();
    let fixed = FixedSizeBinaryArray::try_from_iter([[1u8, 2]].into_iter()).expect("fixed");
    for array in [Arc::new(dict) as ArrayRef, Arc::new(fixed)] {
        assert!(TupleCodec::new(batch(vec![("c", array)]).schema()).is_err());
    }
}

#[test]
fn corrupt_rows_are_errors_not_panics() {
    let schema = batch(vec![
        ("s", Arc::new(StringArray::from(vec!["a"]))),
        ("b", Arc::new(BooleanArray::from(vec![true]))),
        (
            "l",
            Arc::new(ListArray::new(
                list_field(DataType::Float64),
                OffsetBuffer::from_lengths([1]),
                Arc::new(Float64Array::from(vec![1.0])),
                None,
            )),
        ),
        ("z", Arc::new(NullArray::new(1))),
    ]);
    let good = "01 6100  01 01  01 02 bff0000000000000 00  00";
    assert!(decode(&schema, &[&unhex(good)]).is_ok());
    let cases = [
        ("", "\"s\": truncated"),
        ("02", "\"s\": tag 0x02"),
        ("01 61", "\"s\": truncated"),
        ("01 61 0103 00", "\"s\": escape 0x01 followed by 0x03"),
        ("01 ff 00  01 01  01 00  00", "\"s\" does not decode"),
        ("01 6100  01 02", "\"b\": boolean byte 0x02"),
        ("01 6100  01 01  01 03", "\"l\": list marker 0x03"),
        (
            "01 6100  01 01  01 02 7fffffffffffffff 00  00",
            "\"l\": float bits",
        ),
        (
            "01 6100  01 01  01 02 0007ffffffffffff 00  00",
            "\"l\": float bits",
        ),
        ("01 6100  01 01  01 02 bff0", "\"l\": truncated"),
        (
            "01 6100  01 01  01 00  01",
            "\"z\": a null-typed value is not null",
        ),
        (
            "01 6100  01 01  01 00  00 00",
            "1 bytes after the last column",
        ),
    ];
    for (bytes, message) in cases {
        let err = decode(&schema, &[&unhex(good), &unhex(bytes)]).expect_err(bytes);
        assert!(matches!(err, Error::Corrupt { .. }), "{bytes}: {err}");
        let text = err.to_string();
        assert!(text.contains(message), "{bytes}: {text}");
        if !message.contains("does not decode") {
            assert!(text.contains("row 1"), "{bytes}: {text}");
        }
    }
    // every truncation of a good row
    let good = unhex(good);
    for len in 0..good.len() {
        assert!(
            decode(&schema, &[&good[..len]]).is_err(),
            "truncated to {len}"
        );
    }
}

#[test]
fn a_null_map_entry_is_corrupt() {
    let entries = StructArray::new(
        Fields::from(vec![
            Field::new("key", DataType::Int8, false),
            Field::new("value", DataType::Int8, true),
        ]),
        vec![
            Arc::new(PrimitiveArray::<Int8Type>::from(vec![1])),
            Arc::new(PrimitiveArray::<Int8Type>::from(vec![2])),
        ],
        None,
    );
    let field = Arc::new(Field::new("entries", entries.data_type().clone(), false));
    let map = MapArray::new(field, OffsetBuffer::from_lengths([1]), entries, None, false);
    let schema = batch(vec![("m", Arc::new(map))]);
    assert_eq!(hex(&encode(&schema)[0]), "01020181018200");
    let err = decode(&schema, &[&unhex("01 01 00")]).expect_err("null entry");
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

// --- a model of typed values, for the proptests --------------------------------------------------

/// A value of any supported type; maps are lists of two-field structs.
#[derive(Debug, Clone)]
enum Val {
    Null,
    Bool(bool),
    Int(i128),
    F32(f32),
    F64(f64),
    Bytes(Vec<u8>),
    Struct(Vec<Val>),
    List(Vec<Val>),
}

/// The natural order: nulls first; floats with -0.0 = 0.0 and NaN greatest; lists element by
/// element, then by length.
fn cmp(a: &Val, b: &Val) -> Ordering {
    match (a, b) {
        (Val::Null, Val::Null) => Ordering::Equal,
        (Val::Null, _) => Ordering::Less,
        (_, Val::Null) => Ordering::Greater,
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Int(x), Val::Int(y)) => x.cmp(y),
        (Val::F32(x), Val::F32(y)) => canonical32(*x).total_cmp(&canonical32(*y)),
        (Val::F64(x), Val::F64(y)) => canonical64(*x).total_cmp(&canonical64(*y)),
        (Val::Bytes(x), Val::Bytes(y)) => x.cmp(y),
        (Val::Struct(x) | Val::List(x), Val::Struct(y) | Val::List(y)) => {
            for (x, y) in x.iter().zip(y) {
                let order = cmp(x, y);
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => panic!("values of different types: {a:?} {b:?}"),
    }
}

/// A float as the encoding keeps it: one NaN, no negative zero.
macro_rules! canonical {
    ($($name:ident: $t:ty, $nan:expr);*) => {$(
        fn $name(x: $t) -> $t {
            if x.is_nan() {
                <$t>::from_bits($nan)
            } else if x == 0.0 {
                0.0
            } else {
                x
            }
        }
    )*};
}
canonical!(canonical32: f32, 0x7FC0_0000; canonical64: f64, 0x7FF8_0000_0000_0000);

/// The value decoding returns.
fn canonical(v: &Val) -> Val {
    match v {
        Val::F32(x) => Val::F32(canonical32(*x)),
        Val::F64(x) => Val::F64(canonical64(*x)),
        Val::Struct(vs) => Val::Struct(vs.iter().map(canonical).collect()),
        Val::List(vs) => Val::List(vs.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn primitive<T: ArrowPrimitiveType>(
    data_type: &DataType,
    values: &[Val],
    native: impl Fn(&Val) -> Option<T::Native>,
) -> ArrayRef {
    let array: PrimitiveArray<T> = values.iter().map(native).collect();
    Arc::new(array.with_data_type(data_type.clone()))
}

fn int<N: TryFrom<i128>>(v: &Val) -> Option<N> {
    match v {
        Val::Int(i) => N::try_from(*i).ok(),
        _ => None,
    }
}

fn bytes(v: &Val) -> Option<&[u8]> {
    match v {
        Val::Bytes(b) => Some(b),
        _ => None,
    }
}

fn text(v: &Val) -> Option<&str> {
    bytes(v).and_then(|b| std::str::from_utf8(b).ok())
}

fn validity(values: &[Val]) -> NullBuffer {
    NullBuffer::from(
        values
            .iter()
            .map(|v| !matches!(v, Val::Null))
            .collect::<Vec<_>>(),
    )
}

/// Children of lists and structs: the elements, flattened.
fn elements(values: &[Val]) -> (Vec<usize>, Vec<Val>) {
    let mut lengths = Vec::new();
    let mut all = Vec::new();
    for v in values {
        if let Val::List(items) = v {
            lengths.push(items.len());
            all.extend(items.iter().cloned());
        } else {
            lengths.push(0);
        }
    }
    (lengths, all)
}

/// An Arrow array of `data_type` holding `values`.
fn build(data_type: &DataType, values: &[Val]) -> ArrayRef {
    use TimeUnit::Microsecond;
    match data_type {
        DataType::Null => Arc::new(NullArray::new(values.len())),
        DataType::Boolean => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    Val::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        DataType::Int8 => primitive::<Int8Type>(data_type, values, int),
        DataType::Int16 => primitive::<Int16Type>(data_type, values, int),
        DataType::Int32 => primitive::<Int32Type>(data_type, values, int),
        DataType::Date32 => primitive::<Date32Type>(data_type, values, int),
        DataType::Int64 => primitive::<Int64Type>(data_type, values, int),
        DataType::Timestamp(Microsecond, _) => {
            primitive::<TimestampMicrosecondType>(data_type, values, int)
        }
        DataType::Duration(Microsecond) => {
            primitive::<DurationMicrosecondType>(data_type, values, int)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            primitive::<Time64NanosecondType>(data_type, values, int)
        }
        DataType::Decimal128(..) => primitive::<Decimal128Type>(data_type, values, int),
        DataType::Float32 => primitive::<Float32Type>(data_type, values, |v| match v {
            Val::F32(x) => Some(*x),
            _ => None,
        }),
        DataType::Float64 => primitive::<Float64Type>(data_type, values, |v| match v {
            Val::F64(x) => Some(*x),
            _ => None,
        }),
        DataType::Utf8 => Arc::new(values.iter().map(text).collect::<StringArray>()),
        DataType::LargeUtf8 => Arc::new(values.iter().map(text).collect::<LargeStringArray>()),
        DataType::Binary => Arc::new(values.iter().map(bytes).collect::<BinaryArray>()),
        DataType::LargeBinary => Arc::new(values.iter().map(bytes).collect::<LargeBinaryArray>()),
        DataType::Struct(fields) => {
            let columns = fields
                .iter()
                .enumerate()
                .map(|(k, f)| {
                    let column: Vec<Val> = values
                        .iter()
                        .map(|v| match v {
                            Val::Struct(vs) => vs[k].clone(),
                            _ => Val::Null,
                        })
                        .collect();
                    build(f.data_type(), &column)
                })
                .collect();
            Arc::new(
                StructArray::try_new_with_length(
                    fields.clone(),
                    columns,
                    Some(validity(values)),
                    values.len(),
                )
                .expect("struct"),
            )
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::Map(..) => {
            build_list(data_type, values)
        }
        other => panic!("no model for {other}"),
    }
}

/// Lists, large lists and maps (lists of entries) holding `values`.
fn build_list(data_type: &DataType, values: &[Val]) -> ArrayRef {
    let (lengths, all) = elements(values);
    let nulls = Some(validity(values));
    match data_type {
        DataType::List(item) => Arc::new(ListArray::new(
            item.clone(),
            OffsetBuffer::from_lengths(lengths),
            build(item.data_type(), &all),
            nulls,
        )),
        DataType::LargeList(item) => Arc::new(LargeListArray::new(
            item.clone(),
            OffsetBuffer::from_lengths(lengths),
            build(item.data_type(), &all),
            nulls,
        )),
        DataType::Map(entries, sorted) => {
            let entries_array = build(entries.data_type(), &all);
            let entries_array = entries_array
                .as_any()
                .downcast_ref::<StructArray>()
                .expect("entries")
                .clone();
            // entries are never null
            let (fields, columns, _) = entries_array.into_parts();
            Arc::new(MapArray::new(
                entries.clone(),
                OffsetBuffer::from_lengths(lengths),
                StructArray::new(fields, columns, None),
                nulls,
                *sorted,
            ))
        }
        other => panic!("not a list: {other}"),
    }
}

fn leaf_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Null),
        Just(DataType::Boolean),
        Just(DataType::Int8),
        Just(DataType::Int16),
        Just(DataType::Int32),
        Just(DataType::Int64),
        Just(DataType::Float32),
        Just(DataType::Float64),
        Just(DataType::Decimal128(38, 2)),
        Just(DataType::Date32),
        Just(DataType::Timestamp(
            TimeUnit::Microsecond,
            Some("UTC".into())
        )),
        Just(DataType::Timestamp(TimeUnit::Microsecond, None)),
        Just(DataType::Duration(TimeUnit::Microsecond)),
        Just(DataType::Time64(TimeUnit::Nanosecond)),
        Just(DataType::Utf8),
        Just(DataType::LargeUtf8),
        Just(DataType::Binary),
        Just(DataType::LargeBinary),
    ]
}

fn map_type(key: DataType, value: DataType) -> DataType {
    let entries = DataType::Struct(Fields::from(vec![
        Field::new("key", key, false),
        Field::new("value", value, true),
    ]));
    DataType::Map(Arc::new(Field::new("entries", entries, false)), false)
}

fn arb_type() -> impl Strategy<Value = DataType> {
    leaf_type().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|types| {
                DataType::Struct(
                    types
                        .into_iter()
                        .enumerate()
                        .map(|(k, t)| Field::new(format!("f{k}"), t, true))
                        .collect(),
                )
            }),
            inner.clone().prop_map(|t| DataType::List(list_field(t))),
            inner
                .clone()
                .prop_map(|t| DataType::LargeList(list_field(t))),
            (
                prop_oneof![Just(DataType::Int32), Just(DataType::Utf8)],
                inner
            )
                .prop_map(|(k, v)| map_type(k, v)),
        ]
    })
}

fn small_or_any<T: std::fmt::Debug + Clone + 'static>(
    small: impl Strategy<Value = T> + 'static,
    any: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![3 => small, 1 => any].boxed()
}

/// A non-null value of `data_type` (ties are likely: small domains are favoured).
fn arb_present(data_type: &DataType) -> BoxedStrategy<Val> {
    fn ints<T: Into<i128> + std::fmt::Debug + Clone + 'static>(
        any: impl Strategy<Value = T> + 'static,
    ) -> BoxedStrategy<Val> {
        small_or_any((-2i128..3).boxed(), any.prop_map(Into::into).boxed())
            .prop_map(Val::Int)
            .boxed()
    }
    let specials64 = prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(1.5),
        Just(-1.5),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::from_bits(0x7FF0_0000_0000_0001)),
        Just(f64::MIN_POSITIVE / 2.0),
    ];
    match data_type {
        DataType::Boolean => any::<bool>().prop_map(Val::Bool).boxed(),
        DataType::Int8 => ints(any::<i8>()),
        DataType::Int16 => ints(any::<i16>()),
        DataType::Int32 | DataType::Date32 => ints(any::<i32>()),
        DataType::Int64 | DataType::Timestamp(..) | DataType::Duration(_) | DataType::Time64(_) => {
            ints(any::<i64>())
        }
        DataType::Decimal128(..) => ints(-(10i128.pow(38) - 1)..10i128.pow(38)),
        #[expect(clippy::cast_possible_truncation, reason = "any f32 will do")]
        DataType::Float32 => small_or_any(specials64.prop_map(|x| x as f32), any::<f32>())
            .prop_map(Val::F32)
            .boxed(),
        DataType::Float64 => small_or_any(specials64, any::<f64>())
            .prop_map(Val::F64)
            .boxed(),
        DataType::Utf8 | DataType::LargeUtf8 => small_or_any("[a\u{0}\u{1}\u{2}é]{0,3}", ".{0,6}")
            .prop_map(|s| Val::Bytes(s.into_bytes()))
            .boxed(),
        DataType::Binary | DataType::LargeBinary => small_or_any(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(2), Just(255)], 0..4),
            proptest::collection::vec(any::<u8>(), 0..8),
        )
        .prop_map(Val::Bytes)
        .boxed(),
        DataType::Struct(fields) => fields
            .iter()
            .map(|f| arb_val(f.data_type()))
            .collect::<Vec<_>>()
            .prop_map(Val::Struct)
            .boxed(),
        DataType::List(item) | DataType::LargeList(item) => {
            proptest::collection::vec(arb_val(item.data_type()), 0..4)
                .prop_map(Val::List)
                .boxed()
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                unreachable!("map entries are a struct")
            };
            let key = arb_present(kv[0].data_type());
            let value = arb_val(kv[1].data_type());
            proptest::collection::vec((key, value), 0..3)
                .prop_map(|entries| {
                    Val::List(
                        entries
                            .into_iter()
                            .map(|(k, v)| Val::Struct(vec![k, v]))
                            .collect(),
                    )
                })
                .boxed()
        }
        _ => Just(Val::Null).boxed(),
    }
}

/// A value of `data_type`, possibly null.
fn arb_val(data_type: &DataType) -> BoxedStrategy<Val> {
    if *data_type == DataType::Null {
        return Just(Val::Null).boxed();
    }
    prop_oneof![1 => Just(Val::Null), 4 => arb_present(data_type)].boxed()
}

/// A schema of one to three columns and rows of it.
fn arb_rows() -> impl Strategy<Value = (Vec<DataType>, Vec<Vec<Val>>)> {
    proptest::collection::vec(arb_type(), 1..4).prop_flat_map(|types| {
        let row: Vec<BoxedStrategy<Val>> = types.iter().map(arb_val).collect();
        (Just(types), proptest::collection::vec(row, 1..12))
    })
}

fn model_batch(types: &[DataType], rows: &[Vec<Val>], map: impl Fn(&Val) -> Val) -> RecordBatch {
    let columns = types
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let column: Vec<Val> = rows.iter().map(|r| map(&r[k])).collect();
            (format!("c{k}"), build(t, &column), true)
        })
        .collect::<Vec<_>>();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    let schema = Schema::new(
        columns
            .iter()
            .map(|(n, a, _)| Field::new(n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new_with_options(
        Arc::new(schema),
        columns.into_iter().map(|(_, a, _)| a).collect(),
        &options,
    )
    .expect("batch")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn round_trips_any_rows((types, rows) in arb_rows()) {
        let original = model_batch(&types, &rows, Clone::clone);
        let codec = codec(&original);
        let encoded = codec.encode(&original).expect("encodes");
        let decoded = codec.decode(&encoded).expect("decodes");
        prop_assert_eq!(decoded, model_batch(&types, &rows, canonical));
        // canonical values re-encode to the same bytes
        prop_assert_eq!(codec.encode(&model_batch(&types, &rows, canonical)).expect("encodes"), encoded);
    }

    #[test]
    fn preserves_order((types, rows) in arb_rows()) {
        let encoded = encode(&model_batch(&types, &rows, Clone::clone));
        for (a, ea) in rows.iter().zip(&encoded) {
            for (b, eb) in rows.iter().zip(&encoded) {
                let model = cmp(&Val::Struct(a.clone()), &Val::Struct(b.clone()));
                prop_assert_eq!(ea.cmp(eb), model, "{:?} vs {:?}", a, b);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_decode_only_to_their_own_encoding(
        bytes in proptest::collection::vec(
            prop_oneof![4 => 0u8..3, 1 => Just(0x61u8), 1 => Just(0x80u8), 1 => any::<u8>()],
            0..24,
        ),
        schema in 0usize..3,
    ) {
        let types = [
            vec![DataType::Utf8, DataType::Boolean, DataType::List(list_field(DataType::Int8))],
            vec![map_type(DataType::Utf8, DataType::Float32), DataType::Null],
            vec![DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Binary, true),
                Field::new("b", DataType::LargeList(list_field(DataType::Int16)), true),
            ]))],
        ];
        let schema = model_batch(&types[schema], &[], Clone::clone);
        if let Ok(decoded) = decode(&schema, &[&bytes]) {
            prop_assert_eq!(&encode(&decoded)[0], &bytes);
        }
    }
}

#[test]
fn a_null_in_a_column_that_is_not_nullable_is_corrupt() {
    let strict = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int8, false),
        Field::new(
            "s",
            DataType::Struct(Fields::from(vec![Field::new("x", DataType::Int8, false)])),
            true,
        ),
    ]));
    let codec = TupleCodec::new(strict).expect("supported");
    // a null struct's non-nullable field is fine: the struct's null covers it
    assert!(
        codec
            .decode(&BinaryArray::from_iter_values([unhex("0181 00")]))
            .is_ok()
    );
    for bytes in ["00 00", "0181 01 00"] {
        let err = codec
            .decode(&BinaryArray::from_iter_values([unhex(bytes)]))
            .expect_err(bytes);
        assert!(matches!(err, Error::Corrupt { .. }), "{bytes}: {err}");
    }
}
