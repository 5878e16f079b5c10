//! `GroupHistory`: one key's versioned history as a value a host system stores for us.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::args::{optional_time, time, value_bytes};
use super::errors::to_py;
use super::record::PyVersionedRecord;
use crate::{ResultOrder, StoreConfig, VersionedStore, history};

const KEY: &[u8] = b"";

/// A single key's version history with the store's semantics, serializable to bytes.
#[pyclass(name = "GroupHistory", module = "verstore._core", frozen)]
pub(crate) struct PyGroupHistory {
    inner: Mutex<VersionedStore>,
}

impl PyGroupHistory {
    fn with<T>(&self, f: impl FnOnce(&mut VersionedStore) -> crate::Result<T>) -> PyResult<T> {
        let mut store = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut store).map_err(to_py)
    }
}

#[pymethods]
impl PyGroupHistory {
    #[new]
    #[pyo3(signature = (*, history_retention_ms, segment_interval_ms = None))]
    fn new(history_retention_ms: i64, segment_interval_ms: Option<i64>) -> PyResult<Self> {
        let config = StoreConfig::new(history_retention_ms, segment_interval_ms).map_err(to_py)?;
        Ok(Self {
            inner: Mutex::new(VersionedStore::in_memory(config)),
        })
    }

    #[staticmethod]
    #[pyo3(signature = (data, *, history_retention_ms, segment_interval_ms = None))]
    fn from_bytes(
        data: &[u8],
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
    ) -> PyResult<Self> {
        let config = StoreConfig::new(history_retention_ms, segment_interval_ms).map_err(to_py)?;
        let store = history::from_bytes(data, config).map_err(to_py)?;
        Ok(Self {
            inner: Mutex::new(store),
        })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with(|s| history::to_bytes(s))?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn put(&self, value: &Bound<'_, PyAny>, timestamp: &Bound<'_, PyAny>) -> PyResult<i64> {
        let (value, timestamp) = (value_bytes(value)?, time(timestamp, "timestamp")?);
        self.with(|s| s.put(KEY, value.as_deref(), timestamp))
            .map(crate::PutOutcome::code)
    }

    fn delete(
        &self,
        py: Python<'_>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        let timestamp = time(timestamp, "timestamp")?;
        let found = self.with(|s| s.delete(KEY, timestamp))?;
        Ok(found.map(|r| PyVersionedRecord::from_core(py, &r)))
    }

    #[pyo3(signature = (as_of = None))]
    fn get(
        &self,
        py: Python<'_>,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        let as_of = optional_time(as_of, "as_of")?;
        let found = self.with(|s| match as_of {
            None => s.get(KEY),
            Some(t) => s.get_as_of(KEY, t),
        })?;
        Ok(found.map(|r| PyVersionedRecord::from_core(py, &r)))
    }

    #[pyo3(signature = (from_time = None, to_time = None, ascending = false))]
    fn versions<'py>(
        &self,
        py: Python<'py>,
        from_time: Option<&Bound<'py, PyAny>>,
        to_time: Option<&Bound<'py, PyAny>>,
        ascending: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let from_time = optional_time(from_time, "from_time")?;
        let to_time = optional_time(to_time, "to_time")?;
        let order = if ascending {
            ResultOrder::Ascending
        } else {
            ResultOrder::Descending
        };
        let found = self.with(|s| s.versions(KEY, from_time, to_time, order))?;
        PyList::new(
            py,
            found.iter().map(|r| PyVersionedRecord::from_core(py, r)),
        )
    }

    #[getter]
    fn observed_stream_time(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.observed_stream_time()))
    }

    #[getter]
    fn history_retention_ms(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.config().history_retention_ms()))
    }

    #[getter]
    fn segment_interval_ms(&self) -> PyResult<i64> {
        self.with(|s| Ok(s.config().segment_interval_ms()))
    }

    fn __repr__(&self) -> PyResult<String> {
        self.with(|s| {
            Ok(format!(
                "GroupHistory(history_retention_ms={}, observed_stream_time={})",
                s.config().history_retention_ms(),
                s.observed_stream_time()
            ))
        })
    }
}
