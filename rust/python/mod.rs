//! The pyo3 glue: argument conversion, GIL release and error mapping around the core API. No
//! store logic lives here.
#![expect(
    clippy::needless_pass_by_value,
    reason = "pyo3 hands extracted arguments over by value"
)]

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The extension's allocations (rows, keys and values staged per write) go to mimalloc: glibc's
/// malloc spent a fifth of a batch write in its own bookkeeping. Python's and RocksDB's own
/// allocations are not affected.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod arrow;
mod columns;
mod errors;
mod handle;
mod history;
mod record;
mod scan;
mod store;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("VALID_TO_UNDEFINED", crate::VALID_TO_UNDEFINED)?;
    m.add("NOT_PUT", crate::NOT_PUT)?;
    m.add("TUPLE_ENCODING", crate::TUPLE_ENCODING)?;
    m.add_class::<store::PyVersionedStore>()?;
    m.add_class::<record::PyVersionedRecord>()?;
    m.add_class::<history::PyGroupHistory>()?;
    m.add_class::<scan::PyScan>()?;
    m.add_class::<scan::PyStoreStats>()?;
    m.add_function(wrap_pyfunction!(columns::encode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(columns::decode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(default_segment_interval_ms, m)?)?;
    m.add_function(wrap_pyfunction!(read_changelog_header, m)?)?;
    m.add_function(wrap_pyfunction!(verify_changelog, m)?)?;
    errors::register(m)
}

/// Kafka's default segment interval for a history retention.
#[pyfunction]
fn default_segment_interval_ms(history_retention_ms: i64) -> PyResult<i64> {
    crate::StoreConfig::new(history_retention_ms, None)
        .map(|c| c.segment_interval_ms())
        .map_err(errors::to_py)
}

/// Verifies a changelog file's header: `(version, attempt_id, parent_attempt_id, record_count)`.
#[pyfunction]
#[pyo3(signature = (data, name = "changelog"))]
fn read_changelog_header<'py>(py: Python<'py>, data: &[u8], name: &str) -> PyResult<Header<'py>> {
    let h = crate::changelog::decode_header(data, name).map_err(errors::to_py)?;
    Ok(header_tuple(py, &h))
}

type Header<'py> = (i64, Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64);

fn header_tuple<'py>(py: Python<'py>, h: &crate::changelog::ChangelogHeader) -> Header<'py> {
    (
        h.version,
        PyBytes::new(py, &h.attempt),
        PyBytes::new(py, &h.parent_attempt),
        h.record_count,
    )
}

/// Verifies a whole changelog file (checksums, record framing); returns its header fields.
#[pyfunction]
#[pyo3(signature = (data, name = "changelog"))]
fn verify_changelog<'py>(
    py: Python<'py>,
    data: pyo3::pybacked::PyBackedBytes,
    name: &str,
) -> PyResult<Header<'py>> {
    let h = py
        .detach(|| crate::changelog::decode(&data, name).map(|(h, _)| h))
        .map_err(errors::to_py)?;
    Ok(header_tuple(py, &h))
}
