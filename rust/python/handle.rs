//! A native object shared with Python: a mutex around it, `None` once closed.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use pyo3::prelude::*;

use super::errors::to_py;
use crate::Error;

/// `T` behind a mutex that calls may take with or without the GIL.
pub(crate) struct Handle<T> {
    inner: Mutex<Option<T>>,
}

impl<T: Send> Handle<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: Mutex::new(Some(value)),
        }
    }

    /// Locks it. Contended locks are awaited with the GIL released, so a thread inside a
    /// GIL-free call can always finish.
    pub(crate) fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Option<T>> {
        loop {
            match self.inner.try_lock() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(e)) => return e.into_inner(),
                // Wait for the holder without the GIL (it may need the GIL to finish), then
                // race for the lock again with the GIL held.
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.inner.lock())),
            }
        }
    }

    /// Runs `f` on the open value with the GIL held (single-record calls: cheaper than a release).
    pub(crate) fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut T) -> crate::Result<R>,
    ) -> PyResult<R> {
        let mut guard = self.lock(py);
        let value = guard.as_mut().ok_or_else(|| to_py(Error::Closed))?;
        f(value).map_err(to_py)
    }

    /// Runs `f` on the open value with the GIL released.
    pub(crate) fn detached<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut T) -> crate::Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let value = guard.as_mut().ok_or(Error::Closed)?;
            f(value)
        })
        .map_err(to_py)
    }

    /// Runs `f` on the open value with the GIL released, for calls with an error type of their
    /// own (one that a closed handle's [`Error::Closed`] converts into).
    pub(crate) fn detached_or<R: Send, E: Send + From<Error>>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut T) -> Result<R, E> + Send,
    ) -> Result<R, E> {
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let value = guard.as_mut().ok_or(Error::Closed)?;
            f(value)
        })
    }

    /// Takes the value out (closing the handle) and ends it with `end` without the GIL
    /// (RocksDB's shutdown joins background threads). Closing a closed handle does nothing.
    pub(crate) fn close(
        &self,
        py: Python<'_>,
        end: impl FnOnce(T) -> crate::Result<()> + Send,
    ) -> PyResult<()> {
        let value = self.lock(py).take();
        py.detach(move || value.map_or(Ok(()), end)).map_err(to_py)
    }

    /// Takes the value out (closing the handle) and ends it with `end` without the GIL, for an
    /// end with a result: on a closed handle, [`Error::Closed`].
    pub(crate) fn close_with<R: Send>(
        &self,
        py: Python<'_>,
        end: impl FnOnce(T) -> crate::Result<R> + Send,
    ) -> PyResult<R> {
        let value = self.lock(py).take();
        py.detach(move || value.ok_or(Error::Closed).and_then(end))
            .map_err(to_py)
    }
}
