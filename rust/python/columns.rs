//! `encode_rows`/`decode_rows`: typed columns to tuple-encoded bytes and back
//! (`format/tuple.rs`, [`crate::TUPLE_ENCODING`]), for keys and values of `DataFrame` rows;
//! `sort_indices`: the stable byte order of such rows (`order.rs`).

use std::sync::Arc;

use arrow_array::{Array, BinaryArray, UInt64Array};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyRecordBatch, PySchema};

use super::arrow::binary_column;
use super::errors::to_py;
use crate::{TupleCodec, UnsupportedType};

fn unsupported(e: UnsupportedType) -> PyErr {
    PyTypeError::new_err(e.to_string())
}

/// Encodes the columns of `data` (a RecordBatch or struct array), or the named subset in the
/// given order, into one binary value per row.
#[pyfunction]
#[pyo3(signature = (data, columns = None))]
pub(crate) fn encode_rows(
    py: Python<'_>,
    data: PyRecordBatch,
    columns: Option<Vec<String>>,
) -> PyResult<Bound<'_, PyAny>> {
    let mut batch = data.into_inner();
    if let Some(names) = columns {
        let indices = names
            .iter()
            .map(|n| {
                batch.schema().index_of(n).map_err(|_| {
                    PyValueError::new_err(format!("columns: no column named {n:?} in data"))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        batch = batch
            .project(&indices)
            .map_err(|e| PyValueError::new_err(format!("columns: {e}")))?;
    }
    let codec = TupleCodec::new(batch.schema()).map_err(unsupported)?;
    let encoded = py.detach(|| codec.encode(&batch)).map_err(to_py)?;
    let exported = PyArray::from_array_ref(Arc::new(encoded)).into_pyobject(py)?;
    py.import(intern!(py, "pyarrow"))?
        .getattr(intern!(py, "array"))?
        .call1((exported,))
}

/// Decodes binary rows made by [`encode_rows`] back into a RecordBatch with `schema`.
#[pyfunction]
pub(crate) fn decode_rows(
    py: Python<'_>,
    rows: PyArray,
    schema: PySchema,
) -> PyResult<Bound<'_, PyAny>> {
    let codec = TupleCodec::new(schema.into_inner()).map_err(unsupported)?;
    let (array, _) = rows.into_inner();
    let rows = array
        .as_any()
        .downcast_ref::<BinaryArray>()
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "rows must be a binary array, got {}",
                array.data_type()
            ))
        })?;
    let batch = py.detach(|| codec.decode(rows)).map_err(to_py)?;
    PyRecordBatch::new(batch).into_pyarrow(py)
}

/// The indices that sort `keys` (a binary column, chunked or not) by their bytes, ascending
/// and stable, nulls last: what `pyarrow.compute.sort_indices` returns for them, faster.
#[pyfunction]
pub(crate) fn sort_indices<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let keys = binary_column(keys, "keys")?;
    let order = py.detach(|| {
        let rows: Vec<Option<&[u8]>> = (0..keys.len()).map(|i| keys.get(i)).collect();
        crate::byte_order(&rows)
    });
    let exported = PyArray::from_array_ref(Arc::new(UInt64Array::from(order))).into_pyobject(py)?;
    py.import(intern!(py, "pyarrow"))?
        .getattr(intern!(py, "array"))?
        .call1((exported,))
}
