//! `VersionedStore` for Python: a mutex around the core store (`None` once closed).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::args::{key_bytes, optional_time, time, value_bytes};
use super::arrow;
use super::changelog::PyChangelogHeader;
use super::errors::to_py;
use super::handle::Handle;
use super::record::PyVersionedRecord;
use super::scan::{self, PyScan, PyStoreStats};
use super::times::{Times, keys_and_times};
use crate::{RecordColumns, ResultOrder, RocksOptions, StoreConfig, VersionedStore};

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
    #[pyo3(signature = (path, *, history_retention_ms, segment_interval_ms = None, write_ahead_log = true, record_changes = false, memory_limit_mb = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
        write_ahead_log: bool,
        record_changes: bool,
        memory_limit_mb: Option<usize>,
    ) -> PyResult<Self> {
        let config = StoreConfig::new(history_retention_ms, segment_interval_ms).map_err(to_py)?;
        let options = RocksOptions::default().with_wal(write_ahead_log);
        let options = match memory_limit_mb {
            Some(mb) => options.with_memory_limit(mb.saturating_mul(1 << 20)),
            None => options,
        };
        py.detach(|| {
            let mut store = VersionedStore::open_with(&path, config, options)?;
            store.set_record_changes(record_changes)?;
            Ok(store.into())
        })
        .map_err(to_py)
    }

    #[staticmethod]
    #[pyo3(signature = (*, history_retention_ms, segment_interval_ms = None))]
    pub(crate) fn in_memory(
        history_retention_ms: i64,
        segment_interval_ms: Option<i64>,
    ) -> PyResult<Self> {
        let config = StoreConfig::new(history_retention_ms, segment_interval_ms).map_err(to_py)?;
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
        let (keys, timestamps) = keys_and_times(keys, timestamps)?;
        let values = arrow::binary_column(values, "values")?;
        arrow::check_same_length("values", values.len(), keys.len())?;
        let codes = self.inner.detached(py, |s| {
            let keys = keys.slices();
            let rows = keys
                .iter()
                .enumerate()
                .map(|(i, &key)| (key, values.get(i), timestamps.value(i)));
            Ok(s.put_batch(rows)?
                .into_iter()
                .map(crate::PutOutcome::code)
                .collect())
        })?;
        arrow::int64_to_pyarrow(py, codes)
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
        let (keys, timestamps) = keys_and_times(keys, timestamps)?;
        let found = self.inner.detached(py, |s| {
            let keys = keys.slices();
            let rows = keys
                .iter()
                .copied()
                .zip(timestamps.values().iter().copied());
            Ok(s.delete_batch(rows)?.into_iter().collect::<RecordColumns>())
        })?;
        arrow::records_to_pyarrow(py, found)
    }

    #[pyo3(signature = (*, start = None, end = None, prefix = None, as_of = None, batch_rows = 65_536))]
    fn scan(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        as_of: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = scan::batch_rows)] batch_rows: usize,
    ) -> PyResult<PyScan> {
        let keys = scan::key_range(start, end, prefix)?;
        let as_of = optional_time(as_of, "as_of")?;
        let scan = (slf.get().inner).detached(slf.py(), |s| s.scan(keys, as_of, batch_rows))?;
        Ok(PyScan::new(scan, slf.clone().into_any().unbind()))
    }

    #[pyo3(signature = (*, start = None, end = None, prefix = None, from_time = None, to_time = None, ascending = false, batch_rows = 65_536))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature")]
    fn scan_versions(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        from_time: Option<&Bound<'_, PyAny>>,
        to_time: Option<&Bound<'_, PyAny>>,
        ascending: bool,
        #[pyo3(from_py_with = scan::batch_rows)] batch_rows: usize,
    ) -> PyResult<PyScan> {
        let keys = scan::key_range(start, end, prefix)?;
        let from_time = optional_time(from_time, "from_time")?;
        let to_time = optional_time(to_time, "to_time")?;
        let order = if ascending {
            ResultOrder::Ascending
        } else {
            ResultOrder::Descending
        };
        let scan = (slf.get().inner).detached(slf.py(), |s| {
            s.scan_versions(keys, from_time, to_time, order, batch_rows)
        })?;
        Ok(PyScan::new(scan, slf.clone().into_any().unbind()))
    }

    fn stats(&self, py: Python<'_>) -> PyResult<PyStoreStats> {
        self.inner
            .detached(py, |s| s.stats())
            .map(PyStoreStats::from)
    }

    #[getter]
    pub(crate) fn observed_stream_time(&self, py: Python<'_>) -> PyResult<i64> {
        self.inner.with(py, |s| Ok(s.observed_stream_time()))
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
    fn path(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        self.inner.with(py, |s| Ok(s.path().map(PathBuf::from)))
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.inner.lock(py).is_none()
    }

    /// Takes the accepted writes since the last take into the new changelog file `path`.
    fn take_changelog(
        &self,
        py: Python<'_>,
        path: PathBuf,
        version: i64,
        attempt_id: &[u8],
        parent_attempt_id: &[u8],
    ) -> PyResult<PyChangelogHeader> {
        self.inner
            .detached(py, |s| {
                s.take_changelog_to(&path, version, attempt_id, parent_attempt_id)
            })
            .map(PyChangelogHeader)
    }

    /// Replays the changelog file at `path` chunk by chunk.
    #[pyo3(signature = (path, *, name = "changelog", chunk_records = 65_536))]
    fn apply_changelog(
        &self,
        py: Python<'_>,
        path: PathBuf,
        name: &str,
        chunk_records: usize,
    ) -> PyResult<PyChangelogHeader> {
        self.inner
            .detached(py, |s| s.apply_changelog_file(&path, name, chunk_records))
            .map(PyChangelogHeader)
    }

    /// Writes a consistent copy of the store (a RocksDB checkpoint) into the new directory `path`.
    fn create_checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        self.inner.detached(py, |s| s.checkpoint(&path))
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.detached(py, VersionedStore::flush)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.close(py, VersionedStore::close)
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
