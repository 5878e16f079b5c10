//! Time columns of the batch calls: write timestamps and per-row `as_of`.
//!
//! A column is any integer Arrow array (narrower types and unsigned ones are widened to `int64`
//! losslessly, so a numpy `int32` array and an Arrow `int32` array are both accepted), or a list
//! or tuple whose items follow the single calls' rule for a time: an `int` (a `bool` or a
//! `float` is a `TypeError` naming the row; `None` is a null). Nulls are a `ValueError`.

use std::sync::Arc;

use arrow_array::builder::Int64Builder;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, Int64Array};
use arrow_schema::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;

use super::arrow::{BinaryColumn, check_same_length, import, key_column};

/// The `as_of` argument of a batch read: none, one time, or a time per key.
pub(crate) enum Times {
    Latest,
    At(i64),
    PerRow(Int64Array),
}

impl Times {
    pub(crate) fn from_py(as_of: Option<&Bound<'_, PyAny>>, keys: usize) -> PyResult<Self> {
        Ok(match as_of {
            Some(obj) if obj.is_instance_of::<PyInt>() => {
                Self::At(super::args::time(obj, "as_of")?)
            }
            Some(obj) if !obj.is_none() => {
                let times = time_column(obj, "as_of")?;
                check_same_length("as_of", times.len(), keys)?;
                Self::PerRow(times)
            }
            _ => Self::Latest,
        })
    }

    pub(crate) fn as_of(&self) -> crate::AsOf<'_> {
        match self {
            Self::Latest => crate::AsOf::Latest,
            Self::At(t) => crate::AsOf::At(*t),
            Self::PerRow(times) => crate::AsOf::PerRow(times.values()),
        }
    }
}

/// Times from Python items: each an `int` as for a single call, or `None` (a null).
fn times_from_items(
    items: &mut dyn Iterator<Item = Bound<'_, PyAny>>,
    argument: &str,
) -> PyResult<ArrayRef> {
    let mut builder = Int64Builder::with_capacity(items.size_hint().0);
    for (i, item) in items.enumerate() {
        // Plain ints first (a bool is not one here); anything else gets the single call's
        // checks and message, naming the row.
        match item.cast_exact::<PyInt>().map(|int| int.extract::<i64>()) {
            Ok(Ok(time)) => builder.append_value(time),
            _ if item.is_none() => builder.append_null(),
            _ => builder.append_value(super::args::time(&item, &format!("{argument}[{i}]"))?),
        }
    }
    Ok(Arc::new(builder.finish()))
}

fn widen<T: ArrowPrimitiveType>(array: &ArrayRef) -> Int64Array
where
    T::Native: Into<i64>,
{
    array.as_primitive::<T>().unary(Into::into)
}

/// A time column: integers without nulls, as `int64`.
pub(crate) fn time_column(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Int64Array> {
    let array = import(obj, argument, "int", times_from_items)?;
    let times = match array.data_type() {
        DataType::Int64 => array.as_primitive::<Int64Type>().clone(),
        DataType::Int32 => widen::<Int32Type>(&array),
        DataType::Int16 => widen::<Int16Type>(&array),
        DataType::Int8 => widen::<Int8Type>(&array),
        DataType::UInt32 => widen::<UInt32Type>(&array),
        DataType::UInt16 => widen::<UInt16Type>(&array),
        DataType::UInt8 => widen::<UInt8Type>(&array),
        DataType::UInt64 => {
            let unsigned = array.as_primitive::<UInt64Type>();
            if let Some(i) = unsigned
                .iter()
                .position(|t| t.is_some_and(|t| i64::try_from(t).is_err()))
            {
                return Err(PyValueError::new_err(format!(
                    "{argument}[{i}] must fit in 64 bits (-2**63 <= t < 2**63)"
                )));
            }
            unsigned.unary(|t| i64::try_from(t).unwrap_or(i64::MAX))
        }
        DataType::Null => Int64Array::new_null(array.len()),
        other => {
            return Err(PyTypeError::new_err(format!(
                "{argument} must be integers, got Arrow type {other}"
            )));
        }
    };
    if let Some(i) = (0..times.len()).find(|&i| times.is_null(i)) {
        return Err(PyValueError::new_err(format!(
            "{argument}[{i}] must not be null"
        )));
    }
    Ok(times)
}

/// The keys and times of a batch write: a key column and a time column as long as it.
pub(crate) struct Writes {
    keys: BinaryColumn,
    timestamps: Int64Array,
}

impl Writes {
    pub(crate) fn from_py(
        keys: &Bound<'_, PyAny>,
        timestamps: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let keys = key_column(keys)?;
        let timestamps = time_column(timestamps, "timestamps")?;
        check_same_length("timestamps", timestamps.len(), keys.len())?;
        Ok(Self { keys, timestamps })
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The keys as slices, taken once per call: the rows below borrow them, so the core's
    /// clone of the rows (its validation pass) copies no keys.
    pub(crate) fn key_slices(&self) -> Vec<&[u8]> {
        self.keys.slices()
    }

    /// `(key, timestamp)` rows, in order, over this batch's `key_slices`.
    pub(crate) fn deletes<'a>(
        &'a self,
        keys: &'a [&'a [u8]],
    ) -> impl ExactSizeIterator<Item = (&'a [u8], i64)> + Clone {
        let times = self.timestamps.values().iter().copied();
        keys.iter().copied().zip(times)
    }

    /// `(key, value, timestamp)` rows, in order; `values` is as long as the keys.
    pub(crate) fn puts<'a>(
        &'a self,
        keys: &'a [&'a [u8]],
        values: &'a BinaryColumn,
    ) -> impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>, i64)> + Clone {
        self.deletes(keys)
            .enumerate()
            .map(|(i, (key, time))| (key, values.get(i), time))
    }
}
