//! `asof_compact`, `asof_apply`, `asof_lookup`: the as-of join's partition kernel
//! (`rust/asof.rs`) for `verstore.spark.joins`, one call per Arrow chunk with the GIL released.
//! Here: column names to indices, Arrow in and out, errors to Python.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;

use super::arrow::{binary_column, check_same_length, int64_to_pyarrow};
use super::errors::to_py;
use super::store::PyVersionedStore;
use super::times::time_column;
use crate::{KernelError, MatchRule, UpdateColumns};

fn kernel_error(e: KernelError) -> PyErr {
    match e {
        KernelError::Unsupported(e) => PyTypeError::new_err(e.to_string()),
        KernelError::Store(e) => to_py(e),
    }
}

fn index(batch: &RecordBatch, name: &str) -> PyResult<usize> {
    batch
        .schema()
        .index_of(name)
        .map_err(|_| PyValueError::new_err(format!("no column named {name:?} in data")))
}

fn indices(batch: &RecordBatch, names: &[String]) -> PyResult<Vec<usize>> {
    names.iter().map(|n| index(batch, n)).collect()
}

fn batch_to_pyarrow<'py>(
    py: Python<'py>,
    columns: Vec<(&str, ArrayRef)>,
) -> PyResult<Bound<'py, PyAny>> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
        .collect();
    let arrays = columns.into_iter().map(|(_, array)| array).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyRecordBatch::new(batch).into_pyarrow(py)
}

/// The storable table rows of `data` as a batch with columns `names`: sort key, key, time,
/// value and, with tie-breakers, the tie-breakers.
#[pyfunction]
#[pyo3(signature = (data, *, side, table_side, keys, time, tie_breakers, values, value_prefix, names))]
#[expect(clippy::too_many_arguments, reason = "a keyword per column group")]
pub(crate) fn asof_compact(
    py: Python<'_>,
    data: PyRecordBatch,
    side: Option<String>,
    table_side: i64,
    keys: Vec<String>,
    time: String,
    tie_breakers: Vec<String>,
    values: Vec<String>,
    value_prefix: Vec<u8>,
    names: Vec<String>,
) -> PyResult<Bound<'_, PyAny>> {
    let batch = data.into_inner();
    let columns = UpdateColumns {
        side: side
            .map(|s| index(&batch, &s).map(|i| (i, table_side)))
            .transpose()?,
        keys: indices(&batch, &keys)?,
        time: index(&batch, &time)?,
        tie_breakers: indices(&batch, &tie_breakers)?,
        values: indices(&batch, &values)?,
    };
    let expected = if tie_breakers.is_empty() { 4 } else { 5 };
    if names.len() != expected {
        return Err(PyValueError::new_err(format!(
            "names must name {expected} columns, got {}",
            names.len()
        )));
    }
    let out = py
        .detach(|| crate::compact_updates(&batch, &columns, &value_prefix))
        .map_err(kernel_error)?;
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(out.sort_key),
        Arc::new(out.key),
        Arc::new(out.time),
        Arc::new(out.value),
    ];
    if let Some(b) = out.tie_breaker {
        arrays.push(Arc::new(b));
    }
    batch_to_pyarrow(py, names.iter().map(String::as_str).zip(arrays).collect())
}

/// Puts the last row of each run of equal (time, key) of `keys`, `times` and `values` (sorted
/// by time, then key); the put return codes.
#[pyfunction]
pub(crate) fn asof_apply<'py>(
    py: Python<'py>,
    store: &PyVersionedStore,
    keys: &Bound<'py, PyAny>,
    times: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let keys = binary_column(keys, "keys")?;
    let times = time_column(times, "times")?;
    let values = binary_column(values, "values")?;
    check_same_length("times", times.len(), keys.len())?;
    check_same_length("values", values.len(), keys.len())?;
    let codes = store.inner.detached(py, |s| {
        let key_slices = keys.slices();
        let value_slices: Vec<Option<&[u8]>> = (0..values.len()).map(|i| values.get(i)).collect();
        let codes = crate::apply_updates(s, &key_slices, times.values(), &value_slices)?;
        Ok(codes.into_iter().map(crate::PutOutcome::code).collect())
    })?;
    int64_to_pyarrow(py, codes)
}

/// The rows of `data` looked up as of their `time` column: a batch of `value`, `valid_from`
/// and `valid_to`, null where a row is unmatched.
#[pyfunction]
#[pyo3(signature = (store, data, *, keys, time, strict = false, tolerance_ms = None))]
pub(crate) fn asof_lookup<'py>(
    py: Python<'py>,
    store: &PyVersionedStore,
    data: PyRecordBatch,
    keys: Vec<String>,
    time: String,
    strict: bool,
    tolerance_ms: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    let batch = data.into_inner();
    let keys = indices(&batch, &keys)?;
    let time = index(&batch, &time)?;
    let rule = MatchRule {
        strict,
        tolerance_ms,
    };
    let found = store
        .inner
        .detached_or(py, |s| {
            crate::lookup_stream_rows(s, &batch, &keys, time, rule)
        })
        .map_err(kernel_error)?;
    batch_to_pyarrow(
        py,
        vec![
            ("value", Arc::new(found.value)),
            ("valid_from", Arc::new(found.valid_from)),
            ("valid_to", Arc::new(found.valid_to)),
        ],
    )
}
