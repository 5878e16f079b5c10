//! The as-of join's partition kernel (`verstore.spark.asof_join`): a micro-batch's table updates
//! and stream rows, an Arrow chunk at a time, through one call each instead of a chain of
//! pyarrow kernels and store calls.
//!
//! * [`compact_updates`]: the table rows of an input chunk that can be stored (key columns and
//!   time not null, time not before the epoch), with their tuple encodings: the sort key
//!   `time ‖ keys ‖ tie-breakers ‖ values` (whose byte order is the canonical order of the
//!   updates), the store key, the stored value (`prefix ‖ values ‖ tie-breakers`) and the
//!   tie-breakers. The tuple encoding of a row is the concatenation of its columns' encodings
//!   (`format/tuple.rs`), so each group of columns is encoded once and the bytes concatenated.
//! * [`apply_updates`]: a chunk of compacted updates in sort-key order whose runs of equal
//!   (time, key) are whole: the last row of each run (the winner) goes into the store, in order.
//! * [`lookup_stream_rows`]: stream rows looked up as of their time (strictly before it, with `strict`),
//!   with the join's rules: a row with a null key column or time, or a lookup time before the
//!   epoch, is unmatched, and so is a match older than the tolerance.
//!
//! The sort itself, and the bounded memory around it, stay with the caller (the Python
//! `ExternalSorter`): these functions hold one chunk, never a partition.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int8Type, Int16Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, RecordBatch};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;

use crate::error::Error;
use crate::format::tuple::{TupleCodec, UnsupportedType};
use crate::read::AsOf;
use crate::record::PutOutcome;
use crate::store::VersionedStore;

/// What a kernel call can fail with: a column type the tuple encoding does not support, or an
/// error of the store or of the arguments.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A column the tuple encoding cannot encode.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedType),
    /// The store's or an argument's error.
    #[error(transparent)]
    Store(#[from] Error),
}

/// The columns of an input chunk that [`compact_updates`] reads, by index.
#[derive(Debug, Clone, Default)]
pub struct UpdateColumns {
    /// The side column and the value that marks a table row; `None`: every row is one.
    pub side: Option<(usize, i64)>,
    /// The key columns, in key order.
    pub keys: Vec<usize>,
    /// The time column (`int64`, epoch milliseconds).
    pub time: usize,
    /// The tie-breaker columns.
    pub tie_breakers: Vec<usize>,
    /// The value columns.
    pub values: Vec<usize>,
}

/// The storable updates of a chunk, in input order, as aligned columns.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// `time ‖ keys ‖ tie-breakers ‖ values`, tuple-encoded.
    pub sort_key: BinaryArray,
    /// The store key: the key columns, tuple-encoded.
    pub key: BinaryArray,
    /// The update's time.
    pub time: Int64Array,
    /// The stored value: `value_prefix ‖ values ‖ tie-breakers`.
    pub value: BinaryArray,
    /// The tie-breakers, tuple-encoded (`None` without tie-breaker columns).
    pub tie_breaker: Option<BinaryArray>,
}

/// The table rows of `batch` that can be stored, with their encodings (see the module doc).
///
/// # Errors
/// [`KernelError::Unsupported`] for a column the tuple encoding cannot encode;
/// [`Error::InvalidArgument`] for a column index out of range, a time column that is not
/// `int64`, a side column that is not an integer, or encodings past 2 GiB.
pub fn compact_updates(
    batch: &RecordBatch,
    columns: &UpdateColumns,
    value_prefix: &[u8],
) -> Result<Compacted, KernelError> {
    let time = int64_column(batch, columns.time, "time")?;
    let mut keep = all_valid(batch, &columns.keys)?;
    for (i, kept) in keep.iter_mut().enumerate() {
        *kept = *kept && time.is_valid(i) && time.value(i) >= 0;
    }
    if let Some((side, table)) = columns.side {
        let side = side_values(column(batch, side, "side")?)?;
        for (kept, side) in keep.iter_mut().zip(side) {
            *kept = *kept && side == Some(table);
        }
    }
    let mask = BooleanArray::new(BooleanBuffer::from(keep), None);
    let rows = arrow_select::filter::filter_record_batch(batch, &mask)
        .map_err(|e| Error::invalid("data", e.to_string()))?;
    let time = int64_column(&rows, columns.time, "time")?.clone();
    let t = encode(&rows, &[columns.time])?;
    let k = encode(&rows, &columns.keys)?;
    let b = encode(&rows, &columns.tie_breakers)?;
    let v = encode(&rows, &columns.values)?;
    let sort_key = concat_rows(&[
        Piece::Rows(&t),
        Piece::Rows(&k),
        Piece::Rows(&b),
        Piece::Rows(&v),
    ])?;
    let value = concat_rows(&[Piece::Bytes(value_prefix), Piece::Rows(&v), Piece::Rows(&b)])?;
    Ok(Compacted {
        sort_key,
        key: k,
        time,
        value,
        tie_breaker: (!columns.tie_breakers.is_empty()).then_some(b),
    })
}

/// Puts the winner of each run of equal (time, key) of rows in sort-key order (the run's last
/// row), in order; the outcomes of the puts made.
///
/// # Errors
/// The store's errors; [`Error::InvalidArgument`] when the columns differ in length.
pub fn apply_updates(
    store: &mut VersionedStore,
    keys: &[&[u8]],
    times: &[i64],
    values: &[Option<&[u8]>],
) -> crate::error::Result<Vec<PutOutcome>> {
    if times.len() != keys.len() || values.len() != keys.len() {
        return Err(Error::invalid(
            "times",
            format!(
                "keys, times and values must have the same length, got {}, {} and {}",
                keys.len(),
                times.len(),
                values.len()
            ),
        ));
    }
    let winners = run_ends(keys, times);
    store.put_batch(winners.iter().map(|&i| (keys[i], values[i], times[i])))
}

/// The rows of sorted (time, key) pairs that end a run of equal pairs.
fn run_ends(keys: &[&[u8]], times: &[i64]) -> Vec<usize> {
    let n = keys.len();
    (0..n)
        .filter(|&i| i + 1 == n || times[i] != times[i + 1] || keys[i] != keys[i + 1])
        .collect()
}

/// The join's matching rules beyond the as-of read.
#[derive(Debug, Clone, Copy, Default)]
pub struct MatchRule {
    /// Only versions strictly before the row's time match (`allow_exact_matches=False`).
    pub strict: bool,
    /// A version older than this many ms before the row's time does not match.
    pub tolerance_ms: Option<i64>,
}

/// The matched version of each stream row: all three null where the row is unmatched.
#[derive(Debug, Clone)]
pub struct Matches {
    /// The stored value.
    pub value: BinaryArray,
    /// The version's time.
    pub valid_from: Int64Array,
    /// The next version's time (null while the version is the newest).
    pub valid_to: Int64Array,
}

/// Looks the rows of `batch` up as of the `time` column (see the module doc).
///
/// A row whose time is negative (or, strictly, below 1) matches nothing: there is no version
/// before time 0.
///
/// # Errors
/// [`KernelError::Unsupported`] for a key column the tuple encoding cannot encode; the store's
/// errors; [`Error::InvalidArgument`] for a bad column index or a time column that is not
/// `int64`.
pub fn lookup_stream_rows(
    store: &VersionedStore,
    batch: &RecordBatch,
    keys: &[usize],
    time: usize,
    rule: MatchRule,
) -> Result<Matches, KernelError> {
    let times = int64_column(batch, time, "time")?;
    let mut ok = all_valid(batch, keys)?;
    let mut as_of = Vec::with_capacity(batch.num_rows());
    for (i, ok) in ok.iter_mut().enumerate() {
        let t = times.value(i);
        // `checked_sub`: i64::MIN - 1 must not wrap around to a time after every version.
        let at = if rule.strict {
            t.checked_sub(1)
        } else {
            Some(t)
        };
        let at = at.filter(|&at| at >= 0).unwrap_or(-1);
        *ok = *ok && times.is_valid(i) && at >= 0;
        if *ok {
            as_of.push(at);
        }
    }
    let encoded = encode(batch, keys)?;
    let wanted: Vec<&[u8]> = (0..batch.num_rows())
        .filter(|&i| ok[i])
        .map(|i| encoded.value(i))
        .collect();
    let found = store.get_batch(&wanted, AsOf::PerRow(&as_of))?;
    let n = batch.num_rows();
    let mut values = Vec::with_capacity(found.values.len());
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0i32);
    let mut present = Vec::with_capacity(n);
    let mut valid_from = Vec::with_capacity(n);
    let mut valid_to = Vec::with_capacity(n);
    let mut next = 0;
    for (i, &ok) in ok.iter().enumerate() {
        let row = ok.then(|| {
            next += 1;
            next - 1
        });
        let matched = row.filter(|&r| {
            found.present[r]
                && rule.tolerance_ms.is_none_or(|tolerance| {
                    times.value(i).wrapping_sub(found.timestamps[r]) <= tolerance
                })
        });
        if let Some(r) = matched {
            values.extend_from_slice(&found.values[found.offsets[r]..found.offsets[r + 1]]);
            valid_from.push(found.timestamps[r]);
            valid_to.push(found.valid_to[r]);
        } else {
            valid_from.push(0);
            valid_to.push(None);
        }
        present.push(matched.is_some());
        offsets.push(offset(values.len())?);
    }
    let present = NullBuffer::from(present);
    Ok(Matches {
        value: BinaryArray::new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
            Some(present.clone()),
        ),
        valid_from: Int64Array::new(ScalarBuffer::from(valid_from), Some(present)),
        valid_to: valid_to.into_iter().collect(),
    })
}

fn column<'a>(
    batch: &'a RecordBatch,
    index: usize,
    name: &'static str,
) -> crate::error::Result<&'a ArrayRef> {
    batch.columns().get(index).ok_or_else(|| {
        Error::invalid(
            name,
            format!(
                "{name}: no column {index} in a batch of {}",
                batch.num_columns()
            ),
        )
    })
}

fn int64_column<'a>(
    batch: &'a RecordBatch,
    index: usize,
    name: &'static str,
) -> crate::error::Result<&'a Int64Array> {
    let array = column(batch, index, name)?;
    array.as_primitive_opt::<Int64Type>().ok_or_else(|| {
        Error::invalid(
            name,
            format!("the {name} column must be int64, got {}", array.data_type()),
        )
    })
}

/// The side column's values (`None` where null).
fn side_values(array: &ArrayRef) -> crate::error::Result<Vec<Option<i64>>> {
    Ok(match array.data_type() {
        DataType::Int8 => widen::<Int8Type>(array),
        DataType::Int16 => widen::<Int16Type>(array),
        DataType::Int32 => widen::<Int32Type>(array),
        DataType::Int64 => widen::<Int64Type>(array),
        other => {
            return Err(Error::invalid(
                "side",
                format!("the side column must be integers, got {other}"),
            ));
        }
    })
}

fn widen<T: arrow_array::ArrowPrimitiveType>(array: &ArrayRef) -> Vec<Option<i64>>
where
    T::Native: Into<i64>,
{
    array
        .as_primitive::<T>()
        .iter()
        .map(|v| v.map(Into::into))
        .collect()
}

/// True where every one of `columns` is not null (a `null`-typed column is null everywhere).
fn all_valid(batch: &RecordBatch, columns: &[usize]) -> crate::error::Result<Vec<bool>> {
    let mut ok = vec![true; batch.num_rows()];
    for &c in columns {
        let array = column(batch, c, "keys")?;
        if *array.data_type() == DataType::Null {
            ok.fill(false);
        } else if let Some(nulls) = array.nulls() {
            for (ok, valid) in ok.iter_mut().zip(nulls.iter()) {
                *ok = *ok && valid;
            }
        }
    }
    Ok(ok)
}

/// The tuple encoding of `columns` of `batch`, one value per row (empty values without
/// columns).
fn encode(batch: &RecordBatch, columns: &[usize]) -> Result<BinaryArray, KernelError> {
    let rows = batch
        .project(columns)
        .map_err(|e| Error::invalid("columns", e.to_string()))?;
    let codec = TupleCodec::new(rows.schema())?;
    Ok(codec.encode(&rows)?)
}

/// A part of every row of a concatenation: the same bytes for each row, or a row's own.
enum Piece<'a> {
    Bytes(&'a [u8]),
    Rows(&'a BinaryArray),
}

/// Row `i` of the result is the concatenation of the pieces' row `i` (all `Rows` as long as
/// each other).
fn concat_rows(pieces: &[Piece<'_>]) -> crate::error::Result<BinaryArray> {
    let rows = pieces
        .iter()
        .find_map(|p| match p {
            Piece::Rows(r) => Some(r.len()),
            Piece::Bytes(_) => None,
        })
        .unwrap_or(0);
    let total: usize = pieces
        .iter()
        .map(|p| match p {
            Piece::Bytes(b) => b.len() * rows,
            Piece::Rows(r) => r.values().len(),
        })
        .sum();
    let mut values = Vec::with_capacity(total);
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    for i in 0..rows {
        for piece in pieces {
            match piece {
                Piece::Bytes(b) => values.extend_from_slice(b),
                Piece::Rows(r) => values.extend_from_slice(r.value(i)),
            }
        }
        offsets.push(offset(values.len())?);
    }
    Ok(BinaryArray::new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_vec(values),
        None,
    ))
}

fn offset(len: usize) -> crate::error::Result<i32> {
    i32::try_from(len).map_err(|_| {
        Error::invalid(
            "data",
            "the chunk's rows encode to more than 2 GiB; pass fewer rows at a time",
        )
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int8Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::config::StoreConfig;

    fn store() -> VersionedStore {
        VersionedStore::in_memory(StoreConfig::new(1_000_000, None).expect("config"))
    }

    fn updates() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("side", DataType::Int8, true),
            Field::new("k", DataType::Utf8, true),
            Field::new("t", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int8Array::from(vec![
                    Some(0),
                    Some(0),
                    Some(1),
                    Some(0),
                    None,
                    Some(0),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    None,
                    Some("a"),
                    Some("b"),
                    Some("a"),
                    Some("a"),
                ])),
                Arc::new(Int64Array::from(vec![
                    Some(5),
                    Some(5),
                    Some(5),
                    Some(-1),
                    Some(5),
                    None,
                ])),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5, 6])),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn compact_keeps_storable_table_rows_and_concatenates_encodings() {
        let batch = updates();
        let columns = UpdateColumns {
            side: Some((0, 0)),
            keys: vec![1],
            time: 2,
            tie_breakers: vec![],
            values: vec![3],
        };
        let out = compact_updates(&batch, &columns, b"").expect("compact");
        assert_eq!(out.time.values().as_ref(), &[5]);
        let row = batch.slice(0, 1);
        let whole = encode(&row, &[2, 1, 3]).expect("encode");
        assert_eq!(out.sort_key.value(0), whole.value(0));
        assert_eq!(
            out.key.value(0),
            encode(&row, &[1]).expect("encode").value(0)
        );
        let prefixed = compact_updates(&batch, &columns, b"\xfe\x00\x01").expect("compact");
        assert_eq!(&prefixed.value.value(0)[..3], b"\xfe\x00\x01");
        assert_eq!(&prefixed.value.value(0)[3..], out.value.value(0));
        assert!(out.tie_breaker.is_none());
    }

    #[test]
    fn apply_puts_the_last_row_of_each_run() {
        let mut s = store();
        let keys: Vec<&[u8]> = vec![b"a", b"a", b"b", b"a"];
        let times = [1, 1, 1, 2];
        let values: Vec<Option<&[u8]>> = vec![Some(b"x"), Some(b"y"), Some(b"z"), Some(b"w")];
        let codes = apply_updates(&mut s, &keys, &times, &values).expect("apply");
        assert_eq!(codes.len(), 3);
        let found = s.get_as_of(b"a", 1).expect("get").expect("found");
        assert_eq!(found.value, b"y");
        assert!(apply_updates(&mut s, &keys, &times[..1], &values).is_err());
    }

    #[test]
    fn lookup_applies_nulls_strictness_and_tolerance() {
        let mut s = store();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("t", DataType::Int64, true),
        ]));
        let key = |k: &str| {
            let b = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(vec![k])),
                    Arc::new(Int64Array::from(vec![0])),
                ],
            )
            .expect("batch");
            encode(&b, &[0]).expect("encode").value(0).to_vec()
        };
        s.put(&key("a"), Some(b"one"), 10).expect("put");
        s.put(&key("a"), Some(b"two"), 20).expect("put");
        let rows = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("a"),
                    None,
                    Some("a"),
                    Some("a"),
                ])),
                Arc::new(Int64Array::from(vec![
                    Some(20),
                    Some(15),
                    Some(20),
                    None,
                    Some(i64::MIN),
                ])),
            ],
        )
        .expect("batch");
        let plain = lookup_stream_rows(&s, &rows, &[0], 1, MatchRule::default()).expect("lookup");
        assert_eq!(
            plain.valid_from.iter().collect::<Vec<_>>(),
            [Some(20), Some(10), None, None, None]
        );
        assert_eq!(
            plain.valid_to.iter().collect::<Vec<_>>(),
            [None, Some(20), None, None, None]
        );
        assert_eq!(plain.value.value(1), b"one");
        let strict = MatchRule {
            strict: true,
            tolerance_ms: Some(4),
        };
        let got = lookup_stream_rows(&s, &rows, &[0], 1, strict).expect("lookup");
        // 20 strictly: the version at 10, 10 ms old: beyond the tolerance. i64::MIN strictly
        // matches nothing (no wrap to i64::MAX).
        assert_eq!(
            got.valid_from.iter().collect::<Vec<_>>(),
            [None, None, None, None, None]
        );
        let strict_only = MatchRule {
            strict: true,
            tolerance_ms: None,
        };
        let got = lookup_stream_rows(&s, &rows, &[0], 1, strict_only).expect("lookup");
        assert!(
            got.valid_from.is_null(4),
            "i64::MIN strictly matched {got:?}"
        );
    }
}
