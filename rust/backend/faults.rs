//! Injected storage failures, for tests of what a failed write leaves behind.
//!
//! A full disk or a failing device makes RocksDB refuse a write batch, a memtable flush or a
//! checkpoint. Tests that run as root can fill a small tmpfs; everywhere else this switch makes
//! the RocksDB backend fail the same calls with an I/O error, so that every layer above (the
//! write buffer, the checkpoint protocol, Spark tasks) meets the failure where it would meet a
//! real one. It is process-wide because the stores under test are opened deep inside those
//! layers, and limited to the stores under one directory so that tests running side by side
//! do not fail each other. Production code never sets it; unset, it costs one relaxed atomic
//! load per write.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// Whether a plan is set: the only thing a write looks at when none is.
static ARMED: AtomicBool = AtomicBool::new(false);
static PLAN: Mutex<Option<Plan>> = Mutex::new(None);

struct Plan {
    /// Only stores whose directory is under this one (`None`: every store).
    under: Option<PathBuf>,
    /// Writes still allowed before every write fails.
    allowed: u64,
}

/// After `after` more successful storage writes (write batches, flushes and checkpoints of
/// RocksDB stores whose directory is under `under`, or of every store, each counted once),
/// makes every later one fail with an I/O error, until called with `after = None`.
#[cfg(any(test, feature = "python"))]
pub(crate) fn fail_storage_writes(after: Option<u64>, under: Option<&Path>) {
    let mut plan = PLAN.lock().unwrap_or_else(PoisonError::into_inner);
    *plan = after.map(|allowed| Plan {
        under: under.map(Path::to_owned),
        allowed,
    });
    ARMED.store(plan.is_some(), Ordering::SeqCst);
}

/// Counts one storage write to the store at `path`: an error when failures are injected there
/// and due.
pub(crate) fn check_write(path: &Path) -> Result<()> {
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut plan = PLAN.lock().unwrap_or_else(PoisonError::into_inner);
    let applies = |p: &Plan| p.under.as_ref().is_none_or(|under| path.starts_with(under));
    match plan.as_mut().filter(|p| applies(p)) {
        None => Ok(()),
        Some(plan) if plan.allowed > 0 => {
            plan.allowed -= 1;
            Ok(())
        }
        Some(_) => Err(Error::Io {
            path: path.to_owned(),
            source: std::io::Error::other("injected I/O error"),
        }),
    }
}
