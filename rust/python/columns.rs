//! Typed columns to and from bytes, for keys and values of `DataFrame` rows.
//!
//! One row of several columns becomes one byte string in Arrow's row format (`arrow-row`):
//! order-preserving, nulls allowed, decodable back to the same typed columns with the schema it
//! was encoded with. The Spark helpers use it so that no Python code touches individual rows.
//! The encoding is tied to the `arrow-row` version this build pins; stores record values in it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Schema};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3_arrow::{PyArray, PyRecordBatch, PySchema};

use super::errors::CorruptionError;

fn converter(schema: &Schema) -> PyResult<RowConverter> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    RowConverter::new(fields).map_err(|e| PyTypeError::new_err(format!("columns: {e}")))
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
    let batch = data.into_inner();
    let batch = match columns {
        None => batch,
        Some(names) => {
            let indices = names
                .iter()
                .map(|n| {
                    batch.schema().index_of(n).map_err(|_| {
                        PyValueError::new_err(format!("columns: no column named {n:?} in data"))
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            batch
                .project(&indices)
                .map_err(|e| PyValueError::new_err(e.to_string()))?
        }
    };
    if batch.num_columns() == 0 {
        // arrow-row has no rows without columns: every row encodes as the empty string.
        let empty: BinaryArray = std::iter::repeat_n(Some(&b""[..]), batch.num_rows()).collect();
        let exported = PyArray::from_array_ref(Arc::new(empty)).into_pyobject(py)?;
        return py.import("pyarrow")?.getattr("array")?.call1((exported,));
    }
    let converter = converter(&batch.schema())?;
    let encoded = py.detach(|| {
        converter.convert_columns(batch.columns()).map(|rows| {
            let mut builder =
                arrow_array::builder::BinaryBuilder::with_capacity(rows.num_rows(), rows.size());
            for row in &rows {
                builder.append_value(row.as_ref());
            }
            builder.finish()
        })
    });
    let encoded = encoded.map_err(|e| PyTypeError::new_err(format!("columns: {e}")))?;
    let array: ArrayRef = Arc::new(encoded);
    let exported = PyArray::from_array_ref(array).into_pyobject(py)?;
    py.import("pyarrow")?.getattr("array")?.call1((exported,))
}

/// Decodes binary rows made by [`encode_rows`] back into a RecordBatch with `schema`. A null
/// input row decodes to all-null columns.
#[pyfunction]
pub(crate) fn decode_rows(
    py: Python<'_>,
    rows: PyArray,
    schema: PySchema,
) -> PyResult<Bound<'_, PyAny>> {
    let schema = schema.into_inner();
    let (array, _) = rows.into_inner();
    let binary = match array.data_type() {
        DataType::Binary => array.as_any().downcast_ref::<BinaryArray>().cloned(),
        _ => None,
    }
    .ok_or_else(|| PyTypeError::new_err("rows must be a binary array"))?;
    if schema.fields().is_empty() {
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(binary.len()));
        let batch = RecordBatch::try_new_with_options(schema, vec![], &options)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        return PyRecordBatch::new(batch).into_pyarrow(py);
    }
    // Null input rows decode as a null-filled row: encode one and reuse its bytes.
    let converter = converter(&schema)?;
    let nulls: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| arrow_array::new_null_array(f.data_type(), 1))
        .collect();
    let null_row = converter
        .convert_columns(&nulls)
        .map_err(|e| PyTypeError::new_err(format!("schema: {e}")))?;
    let decoded = py.detach(|| {
        catch_unwind(AssertUnwindSafe(|| {
            let parser = converter.parser();
            let null_bytes = null_row.row(0);
            let rows = (0..binary.len()).map(|i| {
                if binary.is_null(i) {
                    parser.parse(null_bytes.as_ref())
                } else {
                    parser.parse(binary.value(i))
                }
            });
            converter.convert_rows(rows)
        }))
    });
    let columns = match decoded {
        Ok(Ok(columns)) => columns,
        Ok(Err(e)) => {
            return Err(CorruptionError::new_err(format!(
                "encoded rows do not decode with this schema: {e}"
            )));
        }
        Err(_) => {
            return Err(CorruptionError::new_err(
                "encoded rows do not decode with this schema",
            ));
        }
    };
    let batch =
        RecordBatch::try_new(schema, columns).map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyRecordBatch::new(batch).into_pyarrow(py)
}
