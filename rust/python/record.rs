//! `VersionedRecord`: an immutable `(value, timestamp, valid_to)` triple.

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::VersionedRecord;

/// One version of a key's value.
#[pyclass(name = "VersionedRecord", module = "verstore._core", frozen)]
pub(crate) struct PyVersionedRecord {
    value: Py<PyBytes>,
    #[pyo3(get)]
    timestamp: i64,
    #[pyo3(get)]
    valid_to: Option<i64>,
}

impl PyVersionedRecord {
    pub(crate) fn from_core(py: Python<'_>, record: &VersionedRecord) -> Self {
        Self {
            value: PyBytes::new(py, &record.value).unbind(),
            timestamp: record.timestamp,
            valid_to: record.valid_to,
        }
    }

    pub(crate) fn from_option(py: Python<'_>, record: Option<VersionedRecord>) -> Option<Self> {
        record.map(|r| Self::from_core(py, &r))
    }

    fn key(&self, py: Python<'_>) -> (Vec<u8>, i64, Option<i64>) {
        (
            self.value.as_bytes(py).to_vec(),
            self.timestamp,
            self.valid_to,
        )
    }
}

#[pymethods]
impl PyVersionedRecord {
    #[new]
    #[pyo3(signature = (value, timestamp, valid_to = None))]
    fn new(value: Bound<'_, PyBytes>, timestamp: i64, valid_to: Option<i64>) -> Self {
        Self {
            value: value.unbind(),
            timestamp,
            valid_to,
        }
    }

    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyBytes> {
        self.value.clone_ref(py)
    }

    #[expect(clippy::unnecessary_wraps, reason = "pyo3's comparison protocol")]
    fn __richcmp__(
        &self,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
        py: Python<'_>,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Self>() else {
            return Ok(py.NotImplemented());
        };
        let equal = self.key(py) == other.get().key(py);
        let result = match op {
            CompareOp::Eq => equal,
            CompareOp::Ne => !equal,
            _ => return Ok(py.NotImplemented()),
        };
        Ok(pyo3::types::PyBool::new(py, result)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.key(py).hash(&mut hasher);
        hasher.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let value = self.value.bind(py).repr()?;
        let valid_to = self
            .valid_to
            .map_or_else(|| "None".to_owned(), |t| t.to_string());
        Ok(format!(
            "VersionedRecord(value={value}, timestamp={}, valid_to={valid_to})",
            self.timestamp
        ))
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let this = slf.get();
        let args = PyTuple::new(
            py,
            [
                this.value.clone_ref(py).into_any(),
                this.timestamp.into_pyobject(py)?.into_any().unbind(),
                this.valid_to.into_pyobject(py)?.unbind(),
            ],
        )?;
        Ok((slf.get_type().into_any(), args))
    }
}
