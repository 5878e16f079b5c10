//! The Python exception tree, mirroring `crate::Error`.

use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::Error;

pyo3::create_exception!(
    verstore._core,
    VerstoreError,
    PyException,
    "Root of verstore's errors."
);
pyo3::create_exception!(
    verstore._core,
    StoreClosedError,
    VerstoreError,
    "The store was closed."
);
pyo3::create_exception!(
    verstore._core,
    StoreLockedError,
    VerstoreError,
    "The store directory is open elsewhere."
);
pyo3::create_exception!(
    verstore._core,
    IncompatibleConfigError,
    VerstoreError,
    "The store was created with another configuration."
);
pyo3::create_exception!(
    verstore._core,
    IncompatibleFormatError,
    VerstoreError,
    "The store uses an unknown on-disk format version."
);
pyo3::create_exception!(
    verstore._core,
    CorruptionError,
    VerstoreError,
    "Stored bytes do not decode; the message names the file or key range."
);
pyo3::create_exception!(
    verstore._core,
    StorageError,
    VerstoreError,
    "An I/O or RocksDB error."
);

/// Maps a core error to its Python exception.
pub(crate) fn to_py(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::InvalidArgument { .. } => PyValueError::new_err(message),
        Error::Closed => StoreClosedError::new_err(message),
        Error::Locked { .. } => StoreLockedError::new_err(message),
        Error::IncompatibleConfig { .. } => IncompatibleConfigError::new_err(message),
        Error::IncompatibleFormat { .. } => IncompatibleFormatError::new_err(message),
        Error::Corrupt { .. } => CorruptionError::new_err(message),
        Error::Storage { .. } | Error::Io { .. } | Error::Failed { .. } => {
            StorageError::new_err(message)
        }
    }
}

/// A `TypeError` naming the argument.
pub(crate) fn type_error(argument: &str, expected: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let got = got
        .get_type()
        .name()
        .map_or_else(|_| "object".to_owned(), |n| n.to_string());
    PyTypeError::new_err(format!("{argument} must be {expected}, got {got}"))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("VerstoreError", py.get_type::<VerstoreError>())?;
    m.add("StoreClosedError", py.get_type::<StoreClosedError>())?;
    m.add("StoreLockedError", py.get_type::<StoreLockedError>())?;
    m.add(
        "IncompatibleConfigError",
        py.get_type::<IncompatibleConfigError>(),
    )?;
    m.add(
        "IncompatibleFormatError",
        py.get_type::<IncompatibleFormatError>(),
    )?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    Ok(())
}
