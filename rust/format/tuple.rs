//! The tuple encoding (`verstore-tuple-1`): typed columns of a row to one byte string and back.
//!
//! The Spark helpers store `DataFrame` rows in a versioned store: the key columns of a row become
//! the store key, the value columns the stored value. Both are encoded with this module. The
//! Arrow schema is known on both sides, so the bytes carry no type codes (unlike `FoundationDB`'s
//! tuple layer): only a null tag per value and the value's payload. Two properties hold for any
//! two rows of one schema:
//!
//! * **Order**: comparing the encodings bytewise is comparing the rows column by column in their
//!   natural order, nulls first (SQL `ORDER BY .. ASC NULLS FIRST`), so that equal rows, and only
//!   equal rows, encode to equal bytes.
//! * **Prefix-freeness**: no value's encoding is a proper prefix of another value's encoding of
//!   the same type, so the concatenation of columns (and of struct fields, list elements) decodes
//!   one way only, and the order of the first differing column decides.
//!
//! Every value of a column or struct field is a tag and, if not null, its payload `P`:
//!
//! ```text
//! V(value) = 00                 null
//!          | 01 ‖ P(value)      not null
//! row      = V(column_1) ‖ … ‖ V(column_n)          (no columns: the empty string)
//! ```
//!
//! | Arrow type | payload `P` | bytes |
//! |---|---|---|
//! | `null` | none: every value is null | 0 |
//! | `bool` | `00` false, `01` true | 1 |
//! | `int8`, `int16`, `int32`, `int64` | two's complement, big-endian, sign bit flipped | 1, 2, 4, 8 |
//! | `date32` | days, as `int32` | 4 |
//! | `timestamp(unit, tz)`, `duration(unit)`, `time64(unit)` | the count of units, as `int64` | 8 |
//! | `decimal128(p, s)` | the unscaled integer, as an `int128` | 16 |
//! | `float32`, `float64` | `-0.0` → `0.0`, any NaN → `7FC00000` / `7FF8000000000000`; the bits, all flipped if the sign bit is set, else the sign bit flipped | 4, 8 |
//! | `string`, `binary` and their `large_` forms | the bytes, `00` written `01 01` and `01` written `01 02`; then `00` | n + 1 + escapes |
//! | `struct<f_1, …, f_k>` | `V(f_1) ‖ … ‖ V(f_k)` | Σ |
//! | `list<T>`, `large_list<T>` | per element `01` (null) or `02 ‖ P(element)`; then `00` | Σ + 1 |
//! | `map<K, V>` | its entries as `list<struct<key: K, value: V>>`: per entry `02 ‖ V(key) ‖ V(value)`; then `00` | Σ + 1 |
//!
//! What the type does not change: the time zone and unit of a timestamp, a decimal's precision
//! and scale, the offset width (`string` and `large_string` encode alike, as do `binary` and
//! `large_binary`, `list` and `large_list`), nullability, and field names. They are schema:
//! decoding takes them from the schema it is given.
//!
//! Natural order, per type: `false < true`; integers, dates, times, durations and decimals (of
//! one scale) by value; floats by value with `-0.0 = 0.0` and every NaN equal and greater than
//! `+inf` (Spark SQL's float semantics, which `NormalizeFloatingNumbers` applies to join and
//! grouping keys; decoding returns `0.0` and the canonical NaN); strings by their UTF-8 bytes
//! (code point order) and binaries bytewise; structs field by field; lists element by element,
//! null elements first, a list before every longer list that starts with it. Maps are compared
//! as their entries in stored order: Spark maps have no order and cannot be keys, and the
//! encoding keeps the entry order it is given.
//!
//! Example, schema `(s string, n int64, x float64, l list<string>)`, row
//! `("a\0", -2, null, ["", null])`:
//!
//! ```text
//! 01  61 01 01 00                s: not null, "a", 00 escaped as 01 01, end
//! 01  7F FF FF FF FF FF FF FE    n: not null, -2 = FFFFFFFFFFFFFFFE with the sign bit flipped
//! 00                             x: null
//! 01  02 00  01  00              l: not null, element "" (02, end 00), null element (01), end
//! ```
//!
//! Decoding is strict: it accepts exactly the byte strings that encoding produces (so that
//! `encode(decode(bytes)) == bytes`), and reports anything else as [`Error::Corrupt`] without
//! panicking: a truncated value, a tag or marker other than those above, a bad escape, a
//! non-canonical float, invalid UTF-8 in a string, trailing bytes after the last column.
//!
//! [`TUPLE_ENCODING`] names this encoding and its version; a store records it, and a change to
//! any byte above is a new version.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{
    Array, ArrowPrimitiveType, BinaryArray, OffsetSizeTrait, RecordBatch, RecordBatchOptions,
    make_array,
};
use arrow_buffer::{
    ArrowNativeType, BooleanBuffer, BooleanBufferBuilder, Buffer, NullBuffer, NullBufferBuilder,
    OffsetBuffer, ScalarBuffer,
};
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{ArrowError, DataType, Field, Fields, SchemaRef, TimeUnit};

use crate::error::{Error, Result};

/// The name and version of the tuple encoding, recorded by the stores that hold its bytes.
pub const TUPLE_ENCODING: &str = "verstore-tuple-1";

/// Tag of a null value.
const NULL: u8 = 0x00;
/// Tag of a value that is not null.
const VALID: u8 = 0x01;
/// End of a string, binary, list or map.
const END: u8 = 0x00;
/// In strings and binaries, the first byte of an escaped `00` (`01 01`) or `01` (`01 02`).
const ESCAPE: u8 = 0x01;
/// In lists and maps, a null element.
const ELEMENT_NULL: u8 = 0x01;
/// In lists and maps, an element that is not null; its payload follows.
const ELEMENT: u8 = 0x02;

/// A column (or a type nested in it) that the tuple encoding cannot encode.
///
/// Not an [`Error`] variant: it is a property of a schema, found when a [`TupleCodec`] is made
/// (the Python glue raises it as `TypeError` before any row is read), never of stored bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "column {column:?} has type {data_type}{nested}, which the tuple encoding ({TUPLE_ENCODING}) does not support",
    nested = if self.path == *self.column { String::new() } else { format!(" at {}", self.path) }
)]
pub struct UnsupportedType {
    /// The top-level column.
    pub column: String,
    /// The unsupported type's place: the column name, then nested field names (`c.item`).
    pub path: String,
    /// The unsupported type.
    pub data_type: DataType,
}

/// The tuple encoding of rows of one schema, whose types are checked when it is made.
#[derive(Debug, Clone)]
pub struct TupleCodec {
    schema: SchemaRef,
}

impl TupleCodec {
    /// A codec for rows of `schema`.
    ///
    /// # Errors
    /// [`UnsupportedType`] naming the first column whose type (or a type nested in it) the
    /// encoding does not support.
    pub fn new(schema: SchemaRef) -> Result<Self, UnsupportedType> {
        for field in schema.fields() {
            check(field.data_type(), field.name(), &mut field.name().clone())?;
        }
        Ok(Self { schema })
    }

    /// The schema of the rows.
    #[must_use]
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Encodes the rows of `batch`, whose columns have this codec's types, into one binary value
    /// per row.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the column types differ from the schema's, or when the
    /// rows encode to more than 2 GiB.
    pub fn encode(&self, batch: &RecordBatch) -> Result<BinaryArray> {
        let fields = self.schema.fields();
        let rows = batch.num_rows();
        let types_match = batch.num_columns() == fields.len()
            && batch
                .columns()
                .iter()
                .zip(fields)
                .all(|(c, f)| c.data_type() == f.data_type());
        if !types_match {
            return Err(Error::invalid(
                "data",
                "the columns' types differ from the schema of the tuple codec",
            ));
        }
        let encoders = batch
            .columns()
            .iter()
            .map(|c| encoder(c.as_ref()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::invalid("data", "a column does not downcast to its type"))?;
        let capacity: usize = encoders.iter().map(|e| e.size_hint()).sum();
        let mut values = Vec::with_capacity(capacity);
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0i32);
        for row in 0..rows {
            for encoder in &encoders {
                put_value(encoder.as_ref(), row, &mut values);
            }
            offsets.push(i32::try_from(values.len()).map_err(|_| {
                Error::invalid(
                    "data",
                    format!(
                        "the first {} rows already encode to more than 2 GiB; encode fewer rows at a time",
                        row + 1
                    ),
                )
            })?);
        }
        Ok(BinaryArray::new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
            None,
        ))
    }

    /// Decodes rows made by [`encode`](Self::encode) with this schema. A null row decodes to a
    /// null in every column.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the row and column when bytes are not an encoding of a row of
    /// this schema; [`Error::InvalidArgument`] when a null row meets a column that is not
    /// nullable.
    pub fn decode(&self, rows: &BinaryArray) -> Result<RecordBatch> {
        let fields = self.schema.fields();
        if let Some(field) = fields.iter().find(|f| !f.is_nullable())
            && let Some(row) = rows.nulls().and_then(|n| n.iter().position(|valid| !valid))
        {
            return Err(Error::invalid(
                "rows",
                format!(
                    "row {row} is null but column {:?} is not nullable",
                    field.name()
                ),
            ));
        }
        let mut decoders: Vec<Box<dyn Decode>> = fields
            .iter()
            .map(|f| decoder(f.data_type(), rows.len()))
            .collect::<Option<_>>()
            .ok_or_else(|| Error::invalid("schema", "a column type is not supported"))?;
        for row in 0..rows.len() {
            if rows.is_null(row) {
                for decoder in &mut decoders {
                    decoder.push_null();
                }
                continue;
            }
            let mut input = rows.value(row);
            for (decoder, field) in decoders.iter_mut().zip(fields) {
                take_value(decoder.as_mut(), &mut input)
                    .map_err(|bad| corrupt_row(row, format!("column {:?}: {bad}", field.name())))?;
            }
            if !input.is_empty() {
                return Err(corrupt_row(
                    row,
                    format!("{} bytes after the last column", input.len()),
                ));
            }
        }
        let columns = decoders
            .into_iter()
            .zip(fields)
            .map(|(decoder, field)| {
                decoder.finish().map(make_array).map_err(|e| {
                    Error::corrupt(
                        "tuple-encoded rows",
                        format!("column {:?} does not decode: {e}", field.name()),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .map_err(|e| Error::corrupt("tuple-encoded rows", e.to_string()))
    }
}

fn corrupt_row(row: usize, detail: String) -> Error {
    Error::corrupt(format!("tuple-encoded row {row}"), detail)
}

/// Checks that the encoding supports `data_type`; `path` names it in the error.
fn check(data_type: &DataType, column: &str, path: &mut String) -> Result<(), UnsupportedType> {
    let unsupported = |path: &str| UnsupportedType {
        column: column.to_owned(),
        path: path.to_owned(),
        data_type: data_type.clone(),
    };
    let nested = |field: &Field, path: &mut String| {
        let len = path.len();
        path.push('.');
        path.push_str(field.name());
        check(field.data_type(), column, path)?;
        path.truncate(len);
        Ok(())
    };
    match data_type {
        DataType::Struct(fields) => fields.iter().try_for_each(|f| nested(f, path)),
        DataType::List(item) | DataType::LargeList(item) => nested(item, path),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => nested(entries, path),
            _ => Err(unsupported(path)),
        },
        _ if decoder(data_type, 0).is_some() => Ok(()),
        _ => Err(unsupported(path)),
    }
}

// --- fixed-width payloads ------------------------------------------------------------------------

/// A native type whose payload is its big-endian bytes, transformed to sort as the value does.
trait Ordered: ArrowNativeType {
    const WIDTH: usize;
    fn put(self, out: &mut Vec<u8>);
    /// The value of a payload of exactly `WIDTH` bytes, `None` if no value encodes to it.
    fn get(bytes: &[u8]) -> Option<Self>;
}

macro_rules! ordered_int {
    ($($t:ty),*) => {$(
        impl Ordered for $t {
            const WIDTH: usize = size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                // XOR with MIN flips the sign bit: negative numbers sort first, as unsigned bytes.
                out.extend_from_slice(&(self ^ <$t>::MIN).to_be_bytes());
            }
            fn get(bytes: &[u8]) -> Option<Self> {
                Some(<$t>::from_be_bytes(bytes.try_into().ok()?) ^ <$t>::MIN)
            }
        }
    )*};
}
ordered_int!(i8, i16, i32, i64, i128);

macro_rules! ordered_float {
    ($($t:ty, $bits:ty, $nan:expr);*) => {$(
        impl Ordered for $t {
            const WIDTH: usize = size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                const SIGN: $bits = 1 << (<$bits>::BITS - 1);
                let bits = if self.is_nan() {
                    $nan
                } else if self == 0.0 {
                    0 // -0.0 is 0.0
                } else {
                    self.to_bits()
                };
                // Negative floats sort in reverse of their bits: flip them all.
                let key = if bits & SIGN == 0 { bits | SIGN } else { !bits };
                out.extend_from_slice(&key.to_be_bytes());
            }
            fn get(bytes: &[u8]) -> Option<Self> {
                const SIGN: $bits = 1 << (<$bits>::BITS - 1);
                let key = <$bits>::from_be_bytes(bytes.try_into().ok()?);
                let bits = if key & SIGN == 0 { !key } else { key ^ SIGN };
                let value = <$t>::from_bits(bits);
                // Only canonical bits: no -0.0, one NaN.
                let canonical = if value.is_nan() { bits == $nan } else { bits != SIGN };
                canonical.then_some(value)
            }
        }
    )*};
}
ordered_float!(f32, u32, 0x7FC0_0000; f64, u64, 0x7FF8_0000_0000_0000);

// --- encoding ------------------------------------------------------------------------------------

/// Writes the values of one array. Row indexes are below the array's length (the caller walks
/// `0..len`), so the `get`s below always find their value.
trait Encode: Send + Sync {
    fn is_null(&self, i: usize) -> bool;
    /// Appends the payload of value `i`, which is not null.
    fn payload(&self, i: usize, out: &mut Vec<u8>);
    /// About how many bytes all values encode to, for one allocation up front.
    fn size_hint(&self) -> usize;
}

fn put_value(encoder: &dyn Encode, i: usize, out: &mut Vec<u8>) {
    if encoder.is_null(i) {
        out.push(NULL);
    } else {
        out.push(VALID);
        encoder.payload(i, out);
    }
}

fn is_null(nulls: Option<&NullBuffer>, i: usize) -> bool {
    nulls.is_some_and(|n| n.is_null(i))
}

/// The encoder of `array`, or `None` for a type the encoding does not support.
fn encoder(array: &dyn Array) -> Option<Box<dyn Encode>> {
    match array.data_type() {
        DataType::Null => Some(Box::new(NullEncoder { len: array.len() })),
        DataType::Boolean => {
            let a = array.as_boolean_opt()?;
            Some(Box::new(BoolEncoder {
                values: a.values().clone(),
                nulls: a.nulls().cloned(),
            }))
        }
        DataType::Utf8 => bytes_encoder::<i32>(array, true),
        DataType::LargeUtf8 => bytes_encoder::<i64>(array, true),
        DataType::Binary => bytes_encoder::<i32>(array, false),
        DataType::LargeBinary => bytes_encoder::<i64>(array, false),
        DataType::Struct(_) => {
            let a = array.as_struct_opt()?;
            Some(Box::new(StructEncoder {
                fields: a
                    .columns()
                    .iter()
                    .map(|c| encoder(c.as_ref()))
                    .collect::<Option<_>>()?,
                nulls: a.nulls().cloned(),
                len: a.len(),
            }))
        }
        DataType::List(_) => list_encoder::<i32>(array),
        DataType::LargeList(_) => list_encoder::<i64>(array),
        DataType::Map(..) => {
            // A map is its entries list.
            let a = array.as_map_opt()?;
            Some(Box::new(ListEncoder {
                offsets: a.offsets().clone(),
                elements: encoder(a.entries())?,
                nulls: a.nulls().cloned(),
            }))
        }
        _ => fixed_width_encoder(array),
    }
}

/// The encoder of an array of numbers, dates, times or durations (`None`: another type).
fn fixed_width_encoder(array: &dyn Array) -> Option<Box<dyn Encode>> {
    use TimeUnit::{Microsecond, Millisecond, Nanosecond, Second};
    match array.data_type() {
        DataType::Int8 => fixed_encoder::<Int8Type>(array),
        DataType::Int16 => fixed_encoder::<Int16Type>(array),
        DataType::Int32 => fixed_encoder::<Int32Type>(array),
        DataType::Int64 => fixed_encoder::<Int64Type>(array),
        DataType::Float32 => fixed_encoder::<Float32Type>(array),
        DataType::Float64 => fixed_encoder::<Float64Type>(array),
        DataType::Decimal128(..) => fixed_encoder::<Decimal128Type>(array),
        DataType::Date32 => fixed_encoder::<Date32Type>(array),
        DataType::Timestamp(Second, _) => fixed_encoder::<TimestampSecondType>(array),
        DataType::Timestamp(Millisecond, _) => fixed_encoder::<TimestampMillisecondType>(array),
        DataType::Timestamp(Microsecond, _) => fixed_encoder::<TimestampMicrosecondType>(array),
        DataType::Timestamp(Nanosecond, _) => fixed_encoder::<TimestampNanosecondType>(array),
        DataType::Duration(Second) => fixed_encoder::<DurationSecondType>(array),
        DataType::Duration(Millisecond) => fixed_encoder::<DurationMillisecondType>(array),
        DataType::Duration(Microsecond) => fixed_encoder::<DurationMicrosecondType>(array),
        DataType::Duration(Nanosecond) => fixed_encoder::<DurationNanosecondType>(array),
        DataType::Time64(Microsecond) => fixed_encoder::<Time64MicrosecondType>(array),
        DataType::Time64(Nanosecond) => fixed_encoder::<Time64NanosecondType>(array),
        _ => None,
    }
}

fn fixed_encoder<T>(array: &dyn Array) -> Option<Box<dyn Encode>>
where
    T: ArrowPrimitiveType,
    T::Native: Ordered,
{
    let array = array.as_primitive_opt::<T>()?;
    Some(Box::new(FixedEncoder {
        values: array.values().clone(),
        nulls: array.nulls().cloned(),
    }))
}

fn bytes_encoder<O: OffsetSizeTrait>(array: &dyn Array, utf8: bool) -> Option<Box<dyn Encode>> {
    let (offsets, values, nulls) = if utf8 {
        let a = array.as_string_opt::<O>()?;
        (a.offsets().clone(), a.values().clone(), a.nulls().cloned())
    } else {
        let a = array.as_binary_opt::<O>()?;
        (a.offsets().clone(), a.values().clone(), a.nulls().cloned())
    };
    Some(Box::new(BytesEncoder {
        offsets,
        values,
        nulls,
    }))
}

fn list_encoder<O: OffsetSizeTrait>(array: &dyn Array) -> Option<Box<dyn Encode>> {
    let a = array.as_list_opt::<O>()?;
    Some(Box::new(ListEncoder {
        offsets: a.offsets().clone(),
        elements: encoder(a.values().as_ref())?,
        nulls: a.nulls().cloned(),
    }))
}

struct NullEncoder {
    len: usize,
}

impl Encode for NullEncoder {
    fn is_null(&self, _: usize) -> bool {
        true
    }
    fn payload(&self, _: usize, _: &mut Vec<u8>) {}
    fn size_hint(&self) -> usize {
        self.len
    }
}

struct BoolEncoder {
    values: BooleanBuffer,
    nulls: Option<NullBuffer>,
}

impl Encode for BoolEncoder {
    fn is_null(&self, i: usize) -> bool {
        is_null(self.nulls.as_ref(), i)
    }
    fn payload(&self, i: usize, out: &mut Vec<u8>) {
        out.push(u8::from(self.values.value(i)));
    }
    fn size_hint(&self) -> usize {
        2 * self.values.len()
    }
}

struct FixedEncoder<T: ArrowNativeType> {
    values: ScalarBuffer<T>,
    nulls: Option<NullBuffer>,
}

impl<T: Ordered> Encode for FixedEncoder<T> {
    fn is_null(&self, i: usize) -> bool {
        is_null(self.nulls.as_ref(), i)
    }
    fn payload(&self, i: usize, out: &mut Vec<u8>) {
        if let Some(&v) = self.values.get(i) {
            v.put(out);
        }
    }
    fn size_hint(&self) -> usize {
        (1 + T::WIDTH) * self.values.len()
    }
}

struct BytesEncoder<O: OffsetSizeTrait> {
    offsets: OffsetBuffer<O>,
    values: Buffer,
    nulls: Option<NullBuffer>,
}

impl<O: OffsetSizeTrait> Encode for BytesEncoder<O> {
    fn is_null(&self, i: usize) -> bool {
        is_null(self.nulls.as_ref(), i)
    }
    fn payload(&self, i: usize, out: &mut Vec<u8>) {
        if let Some(bytes) = range(&self.offsets, i).and_then(|r| self.values.get(r)) {
            put_escaped(bytes, out);
        }
    }
    fn size_hint(&self) -> usize {
        let first = self.offsets.first().map_or(0, |o| o.as_usize());
        let last = self.offsets.last().map_or(0, |o| o.as_usize());
        last.saturating_sub(first) + 2 * self.offsets.len()
    }
}

/// The range of value `i` in the child values.
fn range<O: OffsetSizeTrait>(
    offsets: &OffsetBuffer<O>,
    i: usize,
) -> Option<std::ops::Range<usize>> {
    let start = offsets.get(i)?.as_usize();
    let end = offsets.get(i + 1)?.as_usize();
    Some(start..end)
}

fn put_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 1);
    for chunk in bytes.split_inclusive(|&b| b <= ESCAPE) {
        match chunk.split_last() {
            Some((&last, run)) if last <= ESCAPE => {
                out.extend_from_slice(run);
                out.extend_from_slice(&[ESCAPE, last + 1]);
            }
            _ => out.extend_from_slice(chunk),
        }
    }
    out.push(END);
}

struct StructEncoder {
    fields: Vec<Box<dyn Encode>>,
    nulls: Option<NullBuffer>,
    len: usize,
}

impl Encode for StructEncoder {
    fn is_null(&self, i: usize) -> bool {
        is_null(self.nulls.as_ref(), i)
    }
    fn payload(&self, i: usize, out: &mut Vec<u8>) {
        for field in &self.fields {
            put_value(field.as_ref(), i, out);
        }
    }
    fn size_hint(&self) -> usize {
        self.len + self.fields.iter().map(|f| f.size_hint()).sum::<usize>()
    }
}

struct ListEncoder<O: OffsetSizeTrait> {
    offsets: OffsetBuffer<O>,
    elements: Box<dyn Encode>,
    nulls: Option<NullBuffer>,
}

impl<O: OffsetSizeTrait> Encode for ListEncoder<O> {
    fn is_null(&self, i: usize) -> bool {
        is_null(self.nulls.as_ref(), i)
    }
    fn payload(&self, i: usize, out: &mut Vec<u8>) {
        for element in range(&self.offsets, i).unwrap_or_default() {
            if self.elements.is_null(element) {
                out.push(ELEMENT_NULL);
            } else {
                out.push(ELEMENT);
                self.elements.payload(element, out);
            }
        }
        out.push(END);
    }
    fn size_hint(&self) -> usize {
        2 * self.offsets.len() + self.elements.size_hint()
    }
}

// --- decoding ------------------------------------------------------------------------------------

/// Why a value does not decode; the caller adds the row and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Bad {
    #[error("truncated value")]
    Truncated,
    #[error("tag {0:#04x} is neither null (0x00) nor value (0x01)")]
    Tag(u8),
    #[error("a null-typed value is not null")]
    NotNull,
    #[error("boolean byte {0:#04x} is neither 0x00 nor 0x01")]
    Bool(u8),
    #[error("float bits are not canonical (-0.0 or a NaN other than the canonical one)")]
    Float,
    #[error("escape 0x01 followed by {0:#04x}, not 0x01 or 0x02")]
    Escape(u8),
    #[error("list marker {0:#04x} is none of end (0x00), null (0x01), element (0x02)")]
    Marker(u8),
    #[error("more elements than a list can hold")]
    Overflow,
}

/// Appends decoded values to the buffers of one array.
trait Decode: Send {
    /// Reads one payload from the front of `input` and appends its value.
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad>;
    /// Appends a null.
    fn push_null(&mut self);
    /// The decoded array, validated against its type.
    fn finish(self: Box<Self>) -> Result<ArrayData, ArrowError>;
}

fn take_value(decoder: &mut dyn Decode, input: &mut &[u8]) -> Result<(), Bad> {
    match take_byte(input)? {
        NULL => {
            decoder.push_null();
            Ok(())
        }
        VALID => decoder.payload(input),
        tag => Err(Bad::Tag(tag)),
    }
}

fn take_byte(input: &mut &[u8]) -> Result<u8, Bad> {
    let (&first, rest) = input.split_first().ok_or(Bad::Truncated)?;
    *input = rest;
    Ok(first)
}

fn take_bytes<'a>(input: &mut &'a [u8], len: usize) -> Result<&'a [u8], Bad> {
    let (bytes, rest) = input.split_at_checked(len).ok_or(Bad::Truncated)?;
    *input = rest;
    Ok(bytes)
}

/// Reads an escaped string up to its end byte, appending the unescaped bytes to `out`.
fn take_escaped<'a>(input: &mut &'a [u8], out: &mut Vec<u8>) -> Result<(), Bad> {
    loop {
        let special = input
            .iter()
            .position(|&b| b <= ESCAPE)
            .ok_or(Bad::Truncated)?;
        out.extend_from_slice(take_bytes(input, special)?);
        let rest: &'a [u8] = input;
        match rest {
            [END, rest @ ..] => {
                *input = rest;
                return Ok(());
            }
            [ESCAPE, b @ (0x01 | 0x02), rest @ ..] => {
                out.push(b - 1);
                *input = rest;
            }
            [ESCAPE, b, ..] => return Err(Bad::Escape(*b)),
            _ => return Err(Bad::Truncated),
        }
    }
}

/// The decoder for arrays of `data_type`, or `None` for a type the encoding does not support.
fn decoder(data_type: &DataType, capacity: usize) -> Option<Box<dyn Decode>> {
    use TimeUnit::{Microsecond, Nanosecond};
    let leaf: Box<dyn Decode> = match data_type {
        DataType::Null => Box::new(NullDecoder { len: 0 }),
        DataType::Boolean => Box::new(BoolDecoder {
            values: BooleanBufferBuilder::new(capacity),
            nulls: NullBufferBuilder::new(capacity),
        }),
        DataType::Int8 => fixed_decoder::<i8>(data_type, capacity),
        DataType::Int16 => fixed_decoder::<i16>(data_type, capacity),
        DataType::Int32 | DataType::Date32 => fixed_decoder::<i32>(data_type, capacity),
        DataType::Int64
        | DataType::Timestamp(..)
        | DataType::Duration(_)
        | DataType::Time64(Microsecond | Nanosecond) => fixed_decoder::<i64>(data_type, capacity),
        DataType::Decimal128(..) => fixed_decoder::<i128>(data_type, capacity),
        DataType::Float32 => fixed_decoder::<f32>(data_type, capacity),
        DataType::Float64 => fixed_decoder::<f64>(data_type, capacity),
        DataType::Utf8 | DataType::Binary => bytes_decoder::<i32>(data_type, capacity),
        DataType::LargeUtf8 | DataType::LargeBinary => bytes_decoder::<i64>(data_type, capacity),
        DataType::Struct(fields) => return struct_decoder(data_type, fields, capacity),
        DataType::List(item) => return list_decoder::<i32>(data_type, item.data_type(), capacity),
        DataType::LargeList(item) => {
            return list_decoder::<i64>(data_type, item.data_type(), capacity);
        }
        // A map is its entries list, whose entries are never null.
        DataType::Map(entries, _) => {
            return match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => {
                    list_decoder::<i32>(data_type, entries.data_type(), capacity)
                }
                _ => None,
            };
        }
        _ => return None,
    };
    Some(leaf)
}

fn fixed_decoder<T: Ordered>(data_type: &DataType, capacity: usize) -> Box<dyn Decode> {
    Box::new(FixedDecoder::<T> {
        values: Vec::with_capacity(capacity),
        nulls: NullBufferBuilder::new(capacity),
        data_type: data_type.clone(),
    })
}

fn bytes_decoder<O: OffsetSizeTrait>(data_type: &DataType, capacity: usize) -> Box<dyn Decode> {
    Box::new(BytesDecoder {
        slots: Slots::<O>::new(capacity),
        values: Vec::new(),
        data_type: data_type.clone(),
    })
}

fn list_decoder<O: OffsetSizeTrait>(
    data_type: &DataType,
    elements: &DataType,
    capacity: usize,
) -> Option<Box<dyn Decode>> {
    Some(Box::new(ListDecoder {
        slots: Slots::<O>::new(capacity),
        elements: decoder(elements, 0)?,
        len: 0,
        data_type: data_type.clone(),
    }))
}

fn struct_decoder(
    data_type: &DataType,
    fields: &Fields,
    capacity: usize,
) -> Option<Box<dyn Decode>> {
    Some(Box::new(StructDecoder {
        fields: fields
            .iter()
            .map(|f| decoder(f.data_type(), capacity))
            .collect::<Option<_>>()?,
        len: 0,
        nulls: NullBufferBuilder::new(capacity),
        data_type: data_type.clone(),
    }))
}

struct NullDecoder {
    len: usize,
}

impl Decode for NullDecoder {
    fn payload(&mut self, _: &mut &[u8]) -> Result<(), Bad> {
        Err(Bad::NotNull)
    }
    fn push_null(&mut self) {
        self.len += 1;
    }
    fn finish(self: Box<Self>) -> Result<ArrayData, ArrowError> {
        ArrayData::builder(DataType::Null).len(self.len).build()
    }
}

struct BoolDecoder {
    values: BooleanBufferBuilder,
    nulls: NullBufferBuilder,
}

impl Decode for BoolDecoder {
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad> {
        let value = match take_byte(input)? {
            0 => false,
            1 => true,
            b => return Err(Bad::Bool(b)),
        };
        self.values.append(value);
        self.nulls.append_non_null();
        Ok(())
    }
    fn push_null(&mut self) {
        self.values.append(false);
        self.nulls.append_null();
    }
    fn finish(mut self: Box<Self>) -> Result<ArrayData, ArrowError> {
        let values = self.values.finish();
        ArrayData::builder(DataType::Boolean)
            .len(values.len())
            .add_buffer(values.into_inner())
            .nulls(self.nulls.finish())
            .build()
    }
}

struct FixedDecoder<T> {
    values: Vec<T>,
    nulls: NullBufferBuilder,
    data_type: DataType,
}

impl<T: Ordered> Decode for FixedDecoder<T> {
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad> {
        let bytes = take_bytes(input, T::WIDTH)?;
        self.values.push(T::get(bytes).ok_or(Bad::Float)?);
        self.nulls.append_non_null();
        Ok(())
    }
    fn push_null(&mut self) {
        self.values.push(T::default());
        self.nulls.append_null();
    }
    fn finish(mut self: Box<Self>) -> Result<ArrayData, ArrowError> {
        ArrayData::builder(self.data_type)
            .len(self.values.len())
            .nulls(self.nulls.finish())
            .add_buffer(Buffer::from_vec(self.values))
            .build()
    }
}

/// The offsets and validity of a variable-length array (bytes, strings, lists): one slot per
/// row, ending where the row's data ends.
struct Slots<O> {
    offsets: Vec<O>,
    nulls: NullBufferBuilder,
}

impl<O: OffsetSizeTrait> Slots<O> {
    fn new(capacity: usize) -> Self {
        let mut offsets = Vec::with_capacity(capacity + 1);
        offsets.push(O::usize_as(0));
        Self {
            offsets,
            nulls: NullBufferBuilder::new(capacity),
        }
    }

    /// A row whose data ends at `end`.
    fn push(&mut self, end: usize) -> Result<(), Bad> {
        self.offsets.push(O::from_usize(end).ok_or(Bad::Overflow)?);
        self.nulls.append_non_null();
        Ok(())
    }

    /// A null row: no data.
    fn push_null(&mut self) {
        let last = self.offsets.last().copied().unwrap_or_default();
        self.offsets.push(last);
        self.nulls.append_null();
    }

    /// An array of `data_type` with these rows; its data follows.
    fn builder(mut self, data_type: DataType) -> ArrayDataBuilder {
        ArrayData::builder(data_type)
            .len(self.offsets.len().saturating_sub(1))
            .nulls(self.nulls.finish())
            .add_buffer(Buffer::from_vec(self.offsets))
    }
}

struct BytesDecoder<O> {
    slots: Slots<O>,
    values: Vec<u8>,
    data_type: DataType,
}

impl<O: OffsetSizeTrait> Decode for BytesDecoder<O> {
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad> {
        take_escaped(input, &mut self.values)?;
        self.slots.push(self.values.len())
    }
    fn push_null(&mut self) {
        self.slots.push_null();
    }
    fn finish(self: Box<Self>) -> Result<ArrayData, ArrowError> {
        // Validation checks UTF-8 for strings.
        (self.slots.builder(self.data_type))
            .add_buffer(Buffer::from_vec(self.values))
            .build()
    }
}

struct StructDecoder {
    fields: Vec<Box<dyn Decode>>,
    len: usize,
    nulls: NullBufferBuilder,
    data_type: DataType,
}

impl Decode for StructDecoder {
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad> {
        for field in &mut self.fields {
            take_value(field.as_mut(), input)?;
        }
        self.len += 1;
        self.nulls.append_non_null();
        Ok(())
    }
    fn push_null(&mut self) {
        // A null struct's fields take a slot each, null too.
        self.fields.iter_mut().for_each(|f| f.push_null());
        self.len += 1;
        self.nulls.append_null();
    }
    fn finish(mut self: Box<Self>) -> Result<ArrayData, ArrowError> {
        let children = self
            .fields
            .into_iter()
            .map(Decode::finish)
            .collect::<Result<Vec<_>, _>>()?;
        ArrayData::builder(self.data_type)
            .len(self.len)
            .nulls(self.nulls.finish())
            .child_data(children)
            .build()
    }
}

/// Lists, and maps as lists of their entries.
struct ListDecoder<O> {
    slots: Slots<O>,
    elements: Box<dyn Decode>,
    /// Number of elements decoded so far, the next offset.
    len: usize,
    data_type: DataType,
}

impl<O: OffsetSizeTrait> Decode for ListDecoder<O> {
    fn payload(&mut self, input: &mut &[u8]) -> Result<(), Bad> {
        loop {
            match take_byte(input)? {
                END => break,
                ELEMENT_NULL => self.elements.push_null(),
                ELEMENT => self.elements.payload(input)?,
                marker => return Err(Bad::Marker(marker)),
            }
            self.len += 1;
        }
        self.slots.push(self.len)
    }
    fn push_null(&mut self) {
        self.slots.push_null();
    }
    fn finish(self: Box<Self>) -> Result<ArrayData, ArrowError> {
        let elements = self.elements.finish()?;
        (self.slots.builder(self.data_type))
            .child_data(vec![elements])
            .build()
    }
}

#[cfg(test)]
mod tests;
