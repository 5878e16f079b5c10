//! `VersionedStore` for Python: a mutex around the core store (`None` once closed).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::args::{key_bytes, optional_time, rocks_options, store_config, time, value_bytes};
use super::arrow;
use super::errors::to_py;
use super::handle::Handle;
use super::record::PyVersionedRecord;
use super::times::{Times, Writes};
use crate::{RecordColumns, SavedBuffer, VersionedStore};

/// A versioned key-value store.
#[pyclass(name = "VersionedStore", module = "verstore._core", frozen)]
pub(crate) struct PyVersionedStore {
    pub(crate) inner: Handle<VersionedStore>,
}

impl From<VersionedStore> for PyVersionedStore {
    fn from(store: VersionedStore) -> Self {
        Self {
            inner: Handle::new(store),
        }
    }
}

#[pymethods]
impl PyVersionedStore {
    #[new]
    #[pyo3(signature = (path, *, history_retention_ms, segment_interval_ms = None, write_ahead_log = true, record_changes = false, memory_limit_mb = None, latest_ttl_ms = None))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn new(
        py: Python<'_>,
        path: PathBuf,
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
        write_ahead_log: bool,
        record_changes: bool,
        memory_limit_mb: Option<usize>,
        latest_ttl_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config = store_config(history_retention_ms, segment_interval_ms, latest_ttl_ms)?;
        let options = rocks_options(write_ahead_log, memory_limit_mb);
        py.detach(|| {
            let mut store = VersionedStore::open_with(&path, config, options)?;
            store.set_record_changes(record_changes)?;
            Ok(store.into())
        })
        .map_err(to_py)
    }

    #[staticmethod]
    #[pyo3(signature = (*, history_retention_ms, segment_interval_ms = None, latest_ttl_ms = None))]
    pub(crate) fn in_memory(
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
        latest_ttl_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config = store_config(history_retention_ms, segment_interval_ms, latest_ttl_ms)?;
        Ok(VersionedStore::in_memory(config).into())
    }

    pub(crate) fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        let (key, value) = (key_bytes(key)?, value_bytes(value)?);
        let timestamp = time(timestamp, "timestamp")?;
        self.inner
            .with(py, |s| s.put(&key, value.as_deref(), timestamp))
            .map(crate::PutOutcome::code)
    }

    fn advance_stream_time(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>) -> PyResult<i64> {
        let timestamp = time(timestamp, "timestamp")?;
        self.inner.with(py, |s| s.advance_stream_time(timestamp))
    }

    #[pyo3(signature = (key, as_of = None))]
    pub(crate) fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        let (key, as_of) = (key_bytes(key)?, optional_time(as_of, "as_of")?);
        let found = self.inner.with(py, |s| match as_of {
            None => s.get(&key),
            Some(t) => s.get_as_of(&key, t),
        })?;
        Ok(PyVersionedRecord::from_option(py, found))
    }

    pub(crate) fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyVersionedRecord>> {
        let (key, timestamp) = (key_bytes(key)?, time(timestamp, "timestamp")?);
        Ok(PyVersionedRecord::from_option(
            py,
            self.inner.with(py, |s| s.delete(&key, timestamp))?,
        ))
    }

    #[pyo3(signature = (key, from_time = None, to_time = None, ascending = false))]
    pub(crate) fn versions<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        from_time: Option<&Bound<'py, PyAny>>,
        to_time: Option<&Bound<'py, PyAny>>,
        ascending: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let key = key_bytes(key)?;
        let from_time = optional_time(from_time, "from_time")?;
        let to_time = optional_time(to_time, "to_time")?;
        let found = self.inner.with(py, |s| {
            s.versions(&key, from_time, to_time, ascending.into())
        })?;
        PyList::new(
            py,
            found.iter().map(|r| PyVersionedRecord::from_core(py, r)),
        )
    }

    fn put_batch<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        values: &Bound<'py, PyAny>,
        timestamps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let writes = Writes::from_py(keys, timestamps)?;
        let values = arrow::binary_column(values, "values")?;
        arrow::check_same_length("values", values.len(), writes.len())?;
        let codes = self.inner.detached(py, |s| {
            let keys = writes.key_slices();
            let codes = s.put_batch(writes.puts(&keys, &values))?;
            Ok(codes.into_iter().map(crate::PutOutcome::code).collect())
        })?;
        arrow::int64_to_pyarrow(py, codes)
    }

    fn put_batch_with_previous<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        values: &Bound<'py, PyAny>,
        timestamps: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let writes = Writes::from_py(keys, timestamps)?;
        let values = arrow::binary_column(values, "values")?;
        arrow::check_same_length("values", values.len(), writes.len())?;
        let (codes, previous) = self.inner.detached(py, |s| {
            let keys = writes.key_slices();
            let rows = s.put_batch_with_previous(writes.puts(&keys, &values))?;
            let codes: Vec<i64> = rows.iter().map(|(outcome, _)| outcome.code()).collect();
            let previous: RecordColumns = rows.into_iter().map(|(_, before)| before).collect();
            Ok((codes, previous))
        })?;
        Ok((
            arrow::int64_to_pyarrow(py, codes)?,
            arrow::records_to_pyarrow(py, previous)?,
        ))
    }

    #[pyo3(signature = (keys, as_of = None))]
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        as_of: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let keys = arrow::key_column(keys)?;
        let times = Times::from_py(as_of, keys.len())?;
        let found = self
            .inner
            .detached(py, |s| s.get_batch(&keys.slices(), times.as_of()))?;
        arrow::records_to_pyarrow(py, found)
    }

    fn delete_batch<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        timestamps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let writes = Writes::from_py(keys, timestamps)?;
        let found = self.inner.detached(py, |s| {
            let keys = writes.key_slices();
            Ok(s.delete_batch(writes.deletes(&keys))?
                .into_iter()
                .collect::<RecordColumns>())
        })?;
        arrow::records_to_pyarrow(py, found)
    }

    #[getter]
    pub(crate) fn observed_stream_time(&self, py: Python<'_>) -> PyResult<i64> {
        self.inner.with(py, |s| {
            s.check_usable()?;
            Ok(s.observed_stream_time())
        })
    }

    #[getter]
    pub(crate) fn history_retention_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.inner
            .with(py, |s| Ok(s.config().history_retention_ms()))
    }

    #[getter]
    pub(crate) fn segment_interval_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.inner
            .with(py, |s| Ok(s.config().segment_interval_ms()))
    }

    #[getter]
    pub(crate) fn latest_ttl_ms(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.inner
            .with(py, |s| Ok(s.config().latest_ttl().map(|ttl| ttl.ttl_ms())))
    }

    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        self.inner.with(py, |s| Ok(s.path().map(PathBuf::from)))
    }

    #[getter]
    fn write_buffer_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        self.inner.with(py, |s| Ok(s.write_buffer_bytes()))
    }

    #[getter]
    fn memtable_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        self.inner.with(py, |s| s.memtable_bytes())
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.inner.lock(py).is_none()
    }

    /// Writes a consistent copy of the store (a RocksDB checkpoint) into the new directory `path`.
    fn create_checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        self.inner.detached(py, |s| s.checkpoint(&path))
    }

    #[pyo3(signature = (*, write_buffer = true))]
    fn flush(&self, py: Python<'_>, write_buffer: bool) -> PyResult<()> {
        if write_buffer {
            self.inner.detached(py, VersionedStore::flush)
        } else {
            self.inner.detached(py, VersionedStore::flush_memtables)
        }
    }

    fn settle(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.detached(py, VersionedStore::settle)
    }

    fn reclaim_expired(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.detached(py, VersionedStore::reclaim_expired)
    }

    #[pyo3(signature = (*, caches = true))]
    fn release_memory(&self, py: Python<'_>, caches: bool) -> PyResult<()> {
        if caches {
            self.inner.detached(py, VersionedStore::release_memory)
        } else {
            self.inner
                .detached(py, VersionedStore::release_write_buffer)
        }
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.close(py, VersionedStore::close)
    }

    /// Closes the store, leaving its write buffer in the new file `path` (see the stub);
    /// returns the file's `(size, crc32)`.
    fn close_keeping_buffer(&self, py: Python<'_>, path: PathBuf) -> PyResult<(u64, u32)> {
        let saved = self
            .inner
            .close_with(py, |s| s.close_keeping_buffer(&path))?;
        Ok((saved.bytes, saved.crc32))
    }

    /// Restores a write buffer that `close_keeping_buffer` saved (see the stub).
    fn load_buffer(&self, py: Python<'_>, path: PathBuf, size: u64, crc32: u32) -> PyResult<()> {
        let expected = SavedBuffer { bytes: size, crc32 };
        self.inner.detached(py, |s| s.load_buffer(&path, expected))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.inner.lock(py).as_ref().map_or_else(
            || "VersionedStore(<closed>)".to_owned(),
            ToString::to_string,
        )
    }

    #[expect(clippy::unused_self, reason = "pickling is refused for every store")]
    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "VersionedStore holds a native handle and cannot be pickled: ship its path and settings and open it where it is used",
        ))
    }
}
