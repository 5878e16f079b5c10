//! Changelog files for Python: `VersionedStore`'s changelog methods, the header type and the
//! checks of whole files.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use pyo3_arrow::PyRecordBatch;

use super::errors::to_py;
use super::store::PyVersionedStore;
use crate::ChangelogHeader;

/// A changelog file's header.
#[pyclass(name = "ChangelogHeader", module = "verstore._core", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub(crate) struct PyChangelogHeader(pub(crate) ChangelogHeader);

#[pymethods]
impl PyVersionedStore {
    /// Takes the writes accepted since the last take into the new changelog file `path`.
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
}

#[pymethods]
impl PyChangelogHeader {
    #[getter]
    fn version(&self) -> i64 {
        self.0.version
    }

    #[getter]
    fn attempt<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.attempt)
    }

    #[getter]
    fn parent_attempt<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.parent_attempt)
    }

    #[getter]
    fn record_count(&self) -> u64 {
        self.0.record_count
    }

    fn __repr__(&self) -> String {
        format!(
            "ChangelogHeader(version={}, attempt='{}', parent_attempt='{}', record_count={})",
            self.0.version,
            hex(&self.0.attempt),
            hex(&self.0.parent_attempt),
            self.0.record_count
        )
    }
}

fn hex(id: &[u8]) -> String {
    use std::fmt::Write;
    id.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Verifies a changelog file's header.
#[pyfunction]
#[pyo3(signature = (data, name = "changelog"))]
fn read_changelog_header(data: &[u8], name: &str) -> PyResult<PyChangelogHeader> {
    crate::read_changelog_header(data, name)
        .map(PyChangelogHeader)
        .map_err(to_py)
}

/// Verifies a whole changelog file (checksums, record framing); returns its header.
#[pyfunction]
#[pyo3(signature = (data, name = "changelog"))]
fn verify_changelog(
    py: Python<'_>,
    data: PyBackedBytes,
    name: &str,
) -> PyResult<PyChangelogHeader> {
    py.detach(|| crate::verify_changelog(&data, name))
        .map(PyChangelogHeader)
        .map_err(to_py)
}

/// A whole changelog file's header and records (verified), as `(header, pyarrow.RecordBatch)`.
#[pyfunction]
#[pyo3(signature = (data, name = "changelog"))]
fn read_changelog<'py>(
    py: Python<'py>,
    data: PyBackedBytes,
    name: &str,
) -> PyResult<(PyChangelogHeader, Bound<'py, PyAny>)> {
    let (header, batch) = py
        .detach(|| crate::read_changelog(&data, name))
        .map_err(to_py)?;
    Ok((
        PyChangelogHeader(header),
        PyRecordBatch::new(batch).into_pyarrow(py)?,
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CHANGELOG_HEADER_LEN", crate::CHANGELOG_HEADER_LEN)?;
    m.add_class::<PyChangelogHeader>()?;
    m.add_function(wrap_pyfunction!(read_changelog_header, m)?)?;
    m.add_function(wrap_pyfunction!(verify_changelog, m)?)?;
    m.add_function(wrap_pyfunction!(read_changelog, m)?)?;
    Ok(())
}
