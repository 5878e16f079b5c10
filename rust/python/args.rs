//! Conversion of single-record arguments (keys, values and times) and of store settings.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBool;

use super::errors::{to_py, type_error};
use crate::{RocksOptions, StoreConfig};

/// A store's `history_retention_ms` and `segment_interval_ms`, checked by the core.
pub(crate) fn store_config(
    retention_ms: i64,
    segment_ms: Option<i64>,
    latest_ttl_ms: Option<&Bound<'_, PyAny>>,
) -> PyResult<StoreConfig> {
    let latest_ttl_ms = optional_time(latest_ttl_ms, "latest_ttl_ms")?;
    StoreConfig::new(retention_ms, segment_ms)
        .and_then(|config| config.with_latest_ttl(latest_ttl_ms))
        .map_err(to_py)
}

/// The RocksDB options of `VersionedStore(..., write_ahead_log, memory_limit_mb)`: a limit
/// given to a store caps its own memory within the process's budget (`set_memory_limit`).
pub(crate) fn rocks_options(write_ahead_log: bool, memory_limit_mb: Option<usize>) -> RocksOptions {
    let options = RocksOptions::default().with_wal(write_ahead_log);
    match memory_limit_mb {
        Some(mb) => options.with_memory_cap(mb.saturating_mul(1 << 20)),
        None => options,
    }
}

/// A key: `bytes` (or another buffer of bytes).
pub(crate) fn key_bytes(key: &Bound<'_, PyAny>) -> PyResult<PyBackedBytes> {
    key.extract::<PyBackedBytes>()
        .map_err(|_| type_error("key", "bytes", key))
}

/// A value: `bytes`, or `None` for a tombstone.
pub(crate) fn value_bytes(value: &Bound<'_, PyAny>) -> PyResult<Option<PyBackedBytes>> {
    if value.is_none() {
        return Ok(None);
    }
    value
        .extract::<PyBackedBytes>()
        .map(Some)
        .map_err(|_| type_error("value", "bytes or None", value))
}

/// A time in milliseconds: an `int` (or `__index__`) in the `int64` range; `bool` is refused,
/// and an out-of-range `int` is a `ValueError`, like a negative write time.
pub(crate) fn time(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<i64> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{argument} must be int, got bool"
        )));
    }
    obj.extract::<i64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            PyValueError::new_err(format!(
                "{argument} must fit in 64 bits (-2**63 <= {argument} < 2**63), got {obj}"
            ))
        } else {
            type_error(argument, "int", obj)
        }
    })
}

/// An optional time (`None` passes through).
pub(crate) fn optional_time(
    obj: Option<&Bound<'_, PyAny>>,
    argument: &str,
) -> PyResult<Option<i64>> {
    match obj {
        Some(obj) if !obj.is_none() => time(obj, argument).map(Some),
        _ => Ok(None),
    }
}
