//! Arrow in and out of the batch calls.
//!
//! Inputs that speak the Arrow PyCapsule interface (`__arrow_c_array__`, or `__arrow_c_stream__`
//! for chunked data) are imported zero-copy through pyo3-arrow; lists and tuples are converted
//! item by item with the single calls' rules; anything else (numpy arrays, ...) goes through
//! `pyarrow.array(obj)`, which converts in C++. Outputs are built as Arrow arrays in Rust and
//! handed to pyarrow without copying. Time columns are in `times.rs`.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyChunkedArray, PyRecordBatch};

use crate::RecordColumns;

/// The most bytes a `binary` array (32-bit offsets) holds.
const BINARY_LIMIT: usize = i32::MAX as usize;

/// A binary column (keys or values) imported from Python.
pub(crate) struct BinaryColumn {
    array: ArrayRef,
}

impl BinaryColumn {
    pub(crate) fn len(&self) -> usize {
        self.array.len()
    }

    /// Row `i`, `None` when null.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        if self.array.is_null(i) {
            return None;
        }
        Some(match self.array.data_type() {
            DataType::LargeBinary => self.array.as_binary::<i64>().value(i),
            DataType::BinaryView => self.array.as_binary_view().value(i),
            _ => self.array.as_binary::<i32>().value(i),
        })
    }

    pub(crate) fn first_null(&self) -> Option<usize> {
        (0..self.len()).find(|&i| self.array.is_null(i))
    }

    /// Every row as a slice (a null row is empty: callers refuse nulls first).
    pub(crate) fn slices(&self) -> Vec<&[u8]> {
        match self.array.data_type() {
            DataType::LargeBinary => self
                .array
                .as_binary::<i64>()
                .iter()
                .map(Option::unwrap_or_default)
                .collect(),
            DataType::BinaryView => self
                .array
                .as_binary_view()
                .iter()
                .map(Option::unwrap_or_default)
                .collect(),
            _ => self
                .array
                .as_binary::<i32>()
                .iter()
                .map(Option::unwrap_or_default)
                .collect(),
        }
    }
}

/// Keys: a binary column without nulls.
pub(crate) fn key_column(keys: &Bound<'_, PyAny>) -> PyResult<BinaryColumn> {
    let keys = binary_column(keys, "keys")?;
    if let Some(i) = keys.first_null() {
        return Err(PyTypeError::new_err(format!(
            "keys[{i}] must be bytes, got None"
        )));
    }
    Ok(keys)
}

/// Python items of a list or tuple, converted by a column's own rules.
pub(crate) type FromItems<'py> =
    fn(&mut dyn Iterator<Item = Bound<'py, PyAny>>, &str) -> PyResult<ArrayRef>;

/// Imports any Arrow-capable object; converts a list or tuple with `from_items`, and anything
/// else (numpy arrays, ranges, ...) with `pyarrow.array(obj)`, which infers the type (`expected`
/// names the type the caller wants, for messages).
pub(crate) fn import<'py>(
    obj: &Bound<'py, PyAny>,
    argument: &str,
    expected: &str,
    from_items: FromItems<'py>,
) -> PyResult<ArrayRef> {
    let py = obj.py();
    if obj.hasattr(intern!(py, "__arrow_c_array__"))? {
        return Ok(obj.extract::<PyArray>()?.into_inner().0);
    }
    if obj.hasattr(intern!(py, "__arrow_c_stream__"))? {
        let chunked = obj.extract::<PyChunkedArray>()?;
        let chunks: Vec<&dyn Array> = chunked.chunks().iter().map(AsRef::as_ref).collect();
        return match chunks.as_slice() {
            [] => Ok(arrow_array::new_empty_array(chunked.data_type())),
            _ => arrow_select::concat::concat(&chunks)
                .map_err(|e| PyValueError::new_err(format!("{argument}: {e}"))),
        };
    }
    if let Ok(seq) = obj.cast::<pyo3::types::PyList>() {
        return from_items(&mut seq.iter(), argument);
    }
    if let Ok(seq) = obj.cast::<pyo3::types::PyTuple>() {
        return from_items(&mut seq.iter(), argument);
    }
    // Types are inferred, not coerced: pyarrow would silently UTF-8-encode `str` items where
    // bytes are due, and truncate floats where integers are. An empty sequence infers as null.
    let converted = py
        .import(intern!(py, "pyarrow"))?
        .getattr(intern!(py, "array"))?
        .call1((obj,))
        .map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                PyValueError::new_err(format!(
                    "{argument} must fit in 64 bits (-2**63 <= t < 2**63): {e}"
                ))
            } else {
                PyTypeError::new_err(format!(
                    "{argument} must be a sequence or Arrow array of {expected}: {e}"
                ))
            }
        })?;
    Ok(converted.extract::<PyArray>()?.into_inner().0)
}

/// A binary array from Python items, each `bytes`/`bytearray` or `None` (null).
fn binary_from_items(
    items: &mut dyn Iterator<Item = Bound<'_, PyAny>>,
    argument: &str,
) -> PyResult<ArrayRef> {
    let mut rows: Vec<Option<pyo3::pybacked::PyBackedBytes>> = Vec::new();
    let mut total: usize = 0;
    for (i, item) in items.enumerate() {
        if item.is_none() {
            rows.push(None);
            continue;
        }
        let bytes = item
            .extract::<pyo3::pybacked::PyBackedBytes>()
            .map_err(|_| {
                super::errors::type_error(&format!("{argument}[{i}]"), "bytes or None", &item)
            })?;
        total = total.saturating_add(bytes.len());
        rows.push(Some(bytes));
    }
    if total > BINARY_LIMIT {
        return Err(PyValueError::new_err(format!(
            "{argument} total {total} bytes, more than a binary array holds (2 GiB): pass a \
             pyarrow large_binary array or split the batch"
        )));
    }
    let mut builder = arrow_array::builder::BinaryBuilder::with_capacity(rows.len(), total);
    for row in &rows {
        builder.append_option(row.as_deref());
    }
    Ok(Arc::new(builder.finish()))
}

/// Keys or values: binary, large binary or binary view.
pub(crate) fn binary_column(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<BinaryColumn> {
    let array = import(obj, argument, "binary", binary_from_items)?;
    match array.data_type() {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            Ok(BinaryColumn { array })
        }
        DataType::Null => Ok(BinaryColumn {
            array: arrow_array::new_null_array(&DataType::Binary, array.len()),
        }),
        other => Err(PyTypeError::new_err(format!(
            "{argument} must be binary (bytes), got Arrow type {other}"
        ))),
    }
}

pub(crate) fn check_same_length(argument: &str, len: usize, keys_len: usize) -> PyResult<()> {
    if len == keys_len {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!(
            "{argument} has {len} rows but keys has {keys_len}: they must have the same length"
        )))
    }
}

/// `Int64Array` of put return codes, as a `pyarrow.Int64Array`.
pub(crate) fn int64_to_pyarrow(py: Python<'_>, values: Vec<i64>) -> PyResult<Bound<'_, PyAny>> {
    let array: ArrayRef = Arc::new(Int64Array::from(values));
    let exported = PyArray::from_array_ref(array).into_pyobject(py)?;
    py.import(intern!(py, "pyarrow"))?
        .getattr(intern!(py, "array"))?
        .call1((exported,))
}

/// Records as a `pyarrow.RecordBatch` with columns value, timestamp, `valid_to` (null rows where
/// a record is absent), without copying the core's buffers.
pub(crate) fn records_to_pyarrow(
    py: Python<'_>,
    records: RecordColumns,
) -> PyResult<Bound<'_, PyAny>> {
    let offsets = std::iter::once(&0)
        .chain(records.offsets.iter().skip(1))
        .map(|&offset| i32::try_from(offset))
        .collect::<Result<Vec<i32>, _>>()
        .map_err(|_| {
            PyValueError::new_err(format!(
                "the records found total {} bytes, more than a binary array holds (2 GiB): \
                 read fewer keys per call",
                records.values.len()
            ))
        })?;
    let present = NullBuffer::from(records.present);
    let values = BinaryArray::try_new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_vec(records.values),
        Some(present.clone()),
    )
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let timestamps = Int64Array::new(ScalarBuffer::from(records.timestamps), Some(present));
    let valid_to: Int64Array = records.valid_to.into_iter().collect();
    let schema = Schema::new(vec![
        Field::new("value", DataType::Binary, true),
        Field::new("timestamp", DataType::Int64, true),
        Field::new("valid_to", DataType::Int64, true),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(values), Arc::new(timestamps), Arc::new(valid_to)],
    )
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyRecordBatch::new(batch).into_pyarrow(py)
}
