//! `GroupHistory`: one key's versioned history as a value a host system stores for us — an
//! in-memory `VersionedStore` serialized whole (`VersionedStore::to_bytes`), used with one key.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList};

use super::args::store_config;
use super::errors::to_py;
use super::record::PyVersionedRecord;
use super::store::PyVersionedStore;
use crate::VersionedStore;

/// A single key's version history with the store's semantics, serializable to bytes.
#[pyclass(name = "GroupHistory", module = "verstore._core", frozen)]
pub(crate) struct PyGroupHistory {
    store: PyVersionedStore,
}

/// The one key of a history.
fn key(py: Python<'_>) -> Bound<'_, PyAny> {
    PyBytes::new(py, b"").into_any()
}

#[pymethods]
impl PyGroupHistory {
    #[new]
    #[pyo3(signature = (*, history_retention_ms, segment_interval_ms = None, latest_ttl_ms = None))]
    fn new(
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
        latest_ttl_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let store =
            PyVersionedStore::in_memory(history_retention_ms, segment_interval_ms, latest_ttl_ms)?;
        Ok(Self { store })
    }

    #[staticmethod]
    #[pyo3(signature = (data, *, history_retention_ms, segment_interval_ms = None, latest_ttl_ms = None))]
    fn from_bytes(
        py: Python<'_>,
        data: PyBackedBytes,
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
        latest_ttl_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config = store_config(history_retention_ms, segment_interval_ms, latest_ttl_ms)?;
        let store = py
            .detach(|| VersionedStore::from_bytes(&data, config))
            .map_err(to_py)?;
        Ok(Self {
            store: store.into(),
        })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.store.inner.detached(py, VersionedStore::to_bytes)?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn put(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        self.store.put(py, &key(py), value, timestamp)
    }

    fn delete(
        &self,
        py: Python<'_>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        self.store.delete(py, &key(py), timestamp)
    }

    #[pyo3(signature = (as_of = None))]
    fn get(
        &self,
        py: Python<'_>,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        self.store.get(py, &key(py), as_of)
    }

    #[pyo3(signature = (from_time = None, to_time = None, ascending = false))]
    fn versions<'py>(
        &self,
        py: Python<'py>,
        from_time: Option<&Bound<'py, PyAny>>,
        to_time: Option<&Bound<'py, PyAny>>,
        ascending: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.store
            .versions(py, &key(py), from_time, to_time, ascending)
    }

    #[getter]
    fn observed_stream_time(&self, py: Python<'_>) -> PyResult<i64> {
        self.store.observed_stream_time(py)
    }

    #[getter]
    fn history_retention_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.store.history_retention_ms(py)
    }

    #[getter]
    fn segment_interval_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.store.segment_interval_ms(py)
    }

    #[getter]
    fn latest_ttl_ms(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.store.latest_ttl_ms(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "GroupHistory(history_retention_ms={}, observed_stream_time={})",
            self.history_retention_ms(py)?,
            self.observed_stream_time(py)?
        ))
    }
}
