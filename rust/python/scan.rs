//! Scans and store statistics for Python: `VersionedStore.scan` / `scan_versions` / `stats`,
//! `Scan` (an iterator of `pyarrow.RecordBatch`) and `StoreStats`.

use std::sync::Arc;

use arrow_schema::SchemaRef;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBool;
use pyo3_arrow::{PyRecordBatch, PySchema};

use super::args::optional_time;
use super::errors::{to_py, type_error};
use super::handle::Handle;
use super::store::PyVersionedStore;
use crate::{KeyRange, Scan, ScanVersions, StoreStats, VersionedStore};

/// A key bound argument (`start`, `end`, `prefix`): bytes or `None`.
type KeyBound<'a, 'py> = Option<&'a Bound<'py, PyAny>>;

/// A key bound's bytes.
fn bound(obj: KeyBound<'_, '_>, argument: &str) -> PyResult<Option<Vec<u8>>> {
    match obj {
        Some(obj) if !obj.is_none() => obj
            .extract::<PyBackedBytes>()
            .map(|b| Some(b.to_vec()))
            .map_err(|_| type_error(argument, "bytes or None", obj)),
        _ => Ok(None),
    }
}

/// The keys of a scan from its `start`, `end` and `prefix` arguments.
fn key_range(start: KeyBound, end: KeyBound, prefix: KeyBound) -> PyResult<KeyRange> {
    let (start, end) = (bound(start, "start")?, bound(end, "end")?);
    KeyRange::new(start, end, bound(prefix, "prefix")?).map_err(to_py)
}

/// The time arguments of scans: an `int` or `None`.
fn as_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    optional_time(Some(obj), "as_of")
}

fn from_time(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    optional_time(Some(obj), "from_time")
}

fn to_time(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    optional_time(Some(obj), "to_time")
}

/// `batch_rows`: an `int` >= 1 (a `bool` is refused).
pub(crate) fn batch_rows(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err("batch_rows must be int, got bool"));
    }
    let rows = obj
        .extract::<i64>()
        .map_err(|_| type_error("batch_rows", "int", obj))?;
    usize::try_from(rows)
        .ok()
        .filter(|&rows| rows >= 1)
        .ok_or_else(|| PyValueError::new_err(format!("batch_rows must be >= 1, got {rows}")))
}

/// Starts a scan of `store` without the GIL; the scan keeps the Python store alive.
fn begin(
    store: &Bound<'_, PyVersionedStore>,
    open: impl FnOnce(&mut VersionedStore) -> crate::Result<Scan> + Send,
) -> PyResult<PyScan> {
    let scan = store.get().inner.detached(store.py(), open)?;
    Ok(PyScan::new(scan, store.clone().into_any().unbind()))
}

#[pymethods]
impl PyVersionedStore {
    #[pyo3(signature = (*, start = None, end = None, prefix = None, as_of = None, batch_rows = 65_536))]
    fn scan(
        slf: &Bound<'_, Self>,
        start: KeyBound<'_, '_>,
        end: KeyBound<'_, '_>,
        prefix: KeyBound<'_, '_>,
        #[pyo3(from_py_with = as_of)] as_of: Option<i64>,
        #[pyo3(from_py_with = batch_rows)] batch_rows: usize,
    ) -> PyResult<PyScan> {
        let keys = key_range(start, end, prefix)?;
        begin(slf, |s| s.scan(keys, as_of, batch_rows))
    }

    #[pyo3(signature = (*, start = None, end = None, prefix = None, from_time = None, to_time = None, ascending = false, tombstones = false, batch_rows = 65_536))]
    #[expect(clippy::too_many_arguments, reason = "the Python signature")]
    fn scan_versions(
        slf: &Bound<'_, Self>,
        start: KeyBound<'_, '_>,
        end: KeyBound<'_, '_>,
        prefix: KeyBound<'_, '_>,
        #[pyo3(from_py_with = from_time)] from_time: Option<i64>,
        #[pyo3(from_py_with = to_time)] to_time: Option<i64>,
        ascending: bool,
        tombstones: bool,
        #[pyo3(from_py_with = batch_rows)] batch_rows: usize,
    ) -> PyResult<PyScan> {
        let keys = key_range(start, end, prefix)?;
        let query = ScanVersions {
            from: from_time,
            to: to_time,
            order: ascending.into(),
            tombstones,
        };
        begin(slf, |s| s.scan_versions(keys, query, batch_rows))
    }

    fn stats(&self, py: Python<'_>) -> PyResult<PyStoreStats> {
        self.inner
            .detached(py, VersionedStore::stats)
            .map(PyStoreStats::from)
    }
}

/// A running scan: an iterator of `pyarrow.RecordBatch`.
#[pyclass(name = "Scan", module = "verstore._core", frozen)]
pub(crate) struct PyScan {
    inner: Handle<Scan>,
    /// The batches' schema, known after the scan is closed too.
    schema: SchemaRef,
    /// The store, kept alive as long as the scan: dropping it would close the store and end
    /// the scan (closing it explicitly still does).
    _store: Py<PyAny>,
}

impl PyScan {
    pub(crate) fn new(scan: Scan, store: Py<PyAny>) -> Self {
        Self {
            schema: scan.schema(),
            inner: Handle::new(scan),
            _store: store,
        }
    }
}

#[pymethods]
impl PyScan {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut guard = self.inner.lock(py);
        let Some(scan) = guard.as_mut() else {
            return Ok(None);
        };
        match py.detach(|| scan.next()) {
            None => Ok(None),
            Some(Ok(batch)) => PyRecordBatch::new(batch).into_pyarrow(py).map(Some),
            Some(Err(error)) => Err(to_py(error)),
        }
    }

    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PySchema::new(Arc::clone(&self.schema)).into_pyarrow(py)
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.inner.lock(py).is_none()
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.close(py, |mut scan| {
            scan.close();
            Ok(())
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }
}

/// A store's size and memory use.
#[pyclass(name = "StoreStats", module = "verstore._core", frozen, get_all)]
pub(crate) struct PyStoreStats {
    latest_keys: u64,
    unsettled_puts: u64,
    history_rows: u64,
    live_segments: u64,
    disk_bytes: u64,
    memtable_bytes: u64,
    write_buffer_bytes: u64,
    observed_stream_time: i64,
    ttl_expired_keys: u64,
    ttl_reclaims: u64,
}

impl From<StoreStats> for PyStoreStats {
    fn from(s: StoreStats) -> Self {
        Self {
            latest_keys: s.latest_keys,
            unsettled_puts: s.unsettled_puts,
            history_rows: s.history_rows,
            live_segments: s.live_segments,
            disk_bytes: s.disk_bytes,
            memtable_bytes: s.memtable_bytes,
            write_buffer_bytes: s.write_buffer_bytes,
            observed_stream_time: s.observed_stream_time,
            ttl_expired_keys: s.ttl_expired_keys,
            ttl_reclaims: s.ttl_reclaims,
        }
    }
}

#[pymethods]
impl PyStoreStats {
    fn __repr__(&self) -> String {
        format!(
            "StoreStats(latest_keys={}, unsettled_puts={}, history_rows={}, live_segments={}, \
             disk_bytes={}, \
             memtable_bytes={}, write_buffer_bytes={}, observed_stream_time={}, \
             ttl_expired_keys={}, ttl_reclaims={})",
            self.latest_keys,
            self.unsettled_puts,
            self.history_rows,
            self.live_segments,
            self.disk_bytes,
            self.memtable_bytes,
            self.write_buffer_bytes,
            self.observed_stream_time,
            self.ttl_expired_keys,
            self.ttl_reclaims
        )
    }
}
