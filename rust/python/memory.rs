//! The process's memory budget: `set_memory_limit`, `memory_usage` and its result type.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use pyo3::types::{PyBool, PyInt};

use super::errors::{to_py, type_error};
use crate::MemoryUsage;

/// Bytes in a MiB, as the limit is given.
const MIB: usize = 1 << 20;

/// Sets the process's memory budget in MiB.
pub(crate) fn set_limit_mb(limit_mb: usize) -> PyResult<()> {
    let bytes = limit_mb
        .checked_mul(MIB)
        .ok_or_else(|| PyValueError::new_err(format!("limit_mb is too large: {limit_mb}")))?;
    crate::set_memory_limit(bytes).map_err(to_py)
}

/// Sets the memory budget of the process: every store it holds shares it.
#[pyfunction]
pub(crate) fn set_memory_limit(py: Python<'_>, limit_mb: &Bound<'_, PyAny>) -> PyResult<()> {
    if limit_mb.is_instance_of::<PyBool>() {
        return Err(type_error("limit_mb", "int", limit_mb));
    }
    let Ok(value) = limit_mb.extract::<i64>() else {
        return Err(if limit_mb.is_instance_of::<PyInt>() {
            PyValueError::new_err(format!("limit_mb is too large: {limit_mb}"))
        } else {
            type_error("limit_mb", "int", limit_mb)
        });
    };
    let mb = usize::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("limit_mb must be at least 16, got {value}")))?;
    py.detach(|| set_limit_mb(mb))
}

/// What the memory budget's holders use now.
#[pyfunction]
pub(crate) fn memory_usage(py: Python<'_>) -> PyMemoryUsage {
    py.detach(crate::memory_usage).into()
}

/// What the memory budget's holders use at one moment.
#[pyclass(name = "MemoryUsage", module = "verstore._core", frozen, get_all)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "a snapshot of Python attributes: each flag is one of the API's"
)]
pub(crate) struct PyMemoryUsage {
    limit_bytes: usize,
    rocksdb_bytes: usize,
    memtable_bytes: usize,
    write_buffer_bytes: usize,
    cache_bytes: usize,
    open_stores: usize,
    under_pressure: bool,
    write_buffers_over: bool,
    write_buffer_share_bytes: usize,
    caches_over: bool,
    rocksdb_over: bool,
}

impl From<MemoryUsage> for PyMemoryUsage {
    fn from(u: MemoryUsage) -> Self {
        Self {
            limit_bytes: u.limit_bytes,
            rocksdb_bytes: u.rocksdb_bytes,
            memtable_bytes: u.memtable_bytes,
            write_buffer_bytes: u.write_buffer_bytes,
            cache_bytes: u.cache_bytes,
            open_stores: u.open_stores,
            under_pressure: u.under_pressure(),
            write_buffers_over: u.write_buffers_over(),
            write_buffer_share_bytes: u.write_buffer_share(),
            caches_over: u.caches_over(),
            rocksdb_over: u.rocksdb_over(),
        }
    }
}

#[pymethods]
impl PyMemoryUsage {
    fn __repr__(&self) -> String {
        format!(
            "MemoryUsage(limit_bytes={}, rocksdb_bytes={}, memtable_bytes={}, \
             write_buffer_bytes={}, cache_bytes={}, open_stores={}, under_pressure={})",
            self.limit_bytes,
            self.rocksdb_bytes,
            self.memtable_bytes,
            self.write_buffer_bytes,
            self.cache_bytes,
            self.open_stores,
            if self.under_pressure { "True" } else { "False" }
        )
    }
}
