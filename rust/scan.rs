//! Scans: the records of many keys, in ascending key order, as Arrow record batches.
//!
//! A scan visits every key, a key range or a key prefix, and returns per key either the record
//! valid at a time — exactly what [`VersionedStore::get_as_of`](crate::VersionedStore) (or
//! `get`, for the latest) returns for it, retention horizon included — or every version in a
//! time range, as `versions` returns them (docs/semantics.md §2.2, §2.3, §2.5). Keys without a
//! record are left out.
//!
//! **One consistent state.** A scan reads the store as it was when the scan started: a RocksDB
//! snapshot, or the in-memory store's segment maps shared copy-on-write. Writes made after the
//! scan started, from any thread, are not seen. A store without a write-ahead log keeps recent
//! writes in a write buffer (`crate::overlay`); starting a scan writes the buffer to RocksDB
//! first, so the snapshot holds everything a `get` would see. (Merging the buffer into the scan
//! instead would mean copying it, up to its bound, for every scan.)
//!
//! **Lazy and bounded.** The snapshot and its iterators borrow the database, so they live on a
//! thread of their own (the *producer*), which owns a share of the database and sends batches
//! through a [`pipe`] with room for one: a scan holds at most three batches whatever the size
//! of the store, and reads ahead by one while the caller works on the previous batch. A batch
//! ends after `batch_rows` rows, or earlier when its keys or values would pass
//! [`BATCH_BYTES`](batches::BATCH_BYTES). Closing (or dropping) the scan stops the producer at its next key; closing
//! the store ends its open scans (they report [`Error::Closed`]) and waits for their producers
//! to let go of the database.
//!
//! **How a key is read.** Each segment the scan needs gets a cursor over the scan's key range:
//! the latest-value store always; for an as-of read at or above the horizon the live segments
//! from `segment_id(as_of)` up; for versions, when `to_time` is at or above the horizon, every
//! live segment that can hold a version valid after `from_time` (every live segment with
//! tombstones: a tombstone at a row's end is valid until the next version, whatever its
//! segment). The producer merges the cursors
//! by key, and answers each key with the point-read algorithms of [`crate::read`] run against
//! the rows the cursors stand on, so a scan and a `get` cannot disagree. An as-of read answered
//! by the latest value (the common case) decodes it straight from its cursor.

pub(crate) mod batches;
mod cursors;
mod job;
pub(crate) mod key_range;
pub(crate) mod pipe;

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::read::ResultOrder;
use crate::state::State;
use job::ScanJob;
use key_range::KeyRange;
use pipe::{OpenScans, Pipe, Received};

/// What a scan returns for each key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The record valid at this time (`None`: the newest version), as `get`.
    AsOf(Option<i64>),
    /// Every version whose validity meets `[from, to]`, in `order`, as `versions`; with the
    /// tombstones still stored when `tombstones`.
    Versions {
        from: i64,
        to: i64,
        order: ResultOrder,
        tombstones: bool,
    },
}

impl Kind {
    /// Whether rows may be tombstones (a null `value`).
    pub(crate) fn has_tombstones(self) -> bool {
        matches!(
            self,
            Self::Versions {
                tombstones: true,
                ..
            }
        )
    }
}

/// What [`VersionedStore::scan_versions`](crate::VersionedStore::scan_versions) returns per key:
/// the versions whose validity meets `[from, to]` (a missing bound is unbounded), in `order`,
/// as `versions` returns them, and with `tombstones` the tombstones still stored too, each a
/// row with a null `value` in its place in the key's order (docs/semantics.md §2.12).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanVersions {
    /// Lower bound (inclusive) of the validity; `None` is unbounded.
    pub from: Option<i64>,
    /// Upper bound (inclusive); `None` is unbounded.
    pub to: Option<i64>,
    /// Each key's versions newest first (the default) or oldest first.
    pub order: ResultOrder,
    /// Return tombstones too, as rows with a null `value`.
    pub tombstones: bool,
}

/// A running scan: an iterator of record batches with columns `key`, `value` (null for a
/// tombstone, when the scan returns them), `timestamp` (valid-from) and `valid_to` (null for
/// newest versions), see [`schema`](batches::schema).
///
/// Iteration ends after the last batch; an error ends it too. Once the store is closed the scan
/// yields [`Error::Closed`]. Dropping or [closing](Scan::close) a scan stops its thread.
pub struct Scan {
    schema: SchemaRef,
    pipe: Arc<Pipe>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Closed by its caller, or ended (the last batch or an error was returned).
    done: bool,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Scan {
    /// The schema of the scan's batches.
    #[must_use]
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Stops the scan and waits for its thread; later calls of `next` return `None`.
    pub fn close(&mut self) {
        self.done = true;
        self.pipe.end_by_consumer();
        if let Some(thread) = self.thread.take() {
            // The thread reports its own failures through the pipe, which nobody reads now.
            let _ = thread.join();
        }
    }
}

impl Iterator for Scan {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.pipe.recv() {
            Received::Item(Ok(batch)) => Some(Ok(batch)),
            Received::Item(Err(error)) => {
                self.done = true;
                Some(Err(error))
            }
            Received::Finished => {
                self.done = true;
                None
            }
            Received::StoreClosed => Some(Err(Error::Closed)),
        }
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        // No join: the producer stops at its next key, and the store waits for it on close.
        self.pipe.end_by_consumer();
    }
}

/// Starts a scan of `backend` as `state` describes it: spawns the producer and returns once it
/// holds its snapshot.
pub(crate) fn start(
    backend: &dyn Backend,
    state: &State,
    scans: &OpenScans,
    keys: KeyRange,
    kind: Kind,
    batch_rows: usize,
) -> Result<Scan> {
    if batch_rows == 0 {
        return Err(Error::invalid(
            "batch_rows",
            "batch_rows must be >= 1, got 0",
        ));
    }
    let pipe = Arc::new(Pipe::new());
    let job = ScanJob {
        state: state.clone(),
        keys,
        kind,
        batch_rows,
        location: backend.location(),
        pipe: Arc::clone(&pipe),
    };
    let source = backend.scan_source();
    let producer = scans.register(&pipe);
    let thread = std::thread::Builder::new()
        .name("verstore-scan".to_owned())
        .spawn(move || {
            // Dropped last: the register learns of the exit after the source let go of the data.
            let _producer = producer;
            source.run(Box::new(job));
        })
        .map_err(|source| Error::Io {
            path: std::path::PathBuf::from(backend.location()),
            source,
        })?;
    pipe.wait_started();
    Ok(Scan {
        schema: batches::schema_with(kind.has_tombstones()),
        pipe,
        thread: Some(thread),
        done: false,
    })
}

#[cfg(test)]
mod tests;
