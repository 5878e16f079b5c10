//! Deferred metadata: how a store with RocksDB's write-ahead log on keeps its observed stream
//! time and latest-key count off the path of every write.
//!
//! With the log on, every write call is one RocksDB write batch and every entry of a batch is a
//! memtable insert, the bulk of a put's cost. Recording the new stream time with each put made
//! an in-order put three inserts instead of two (latest value, row append), and a new key's put
//! four (with the key count). So the store records both only now and then:
//!
//! * the first write after an open that changes them records them exactly, together with the
//!   marker `metadata_deferred` (`format/meta.rs`), in the same atomic batch;
//! * later writes leave them out: the store holds them in memory;
//! * `flush`, `checkpoint` and `close` (and dropping the store) *settle*: record both and
//!   remove the marker, in one batch.
//!
//! An open that finds the marker follows a store that was not closed (a crash): it recomputes
//! both from the data, which determines them exactly (docs/semantics.md §2.9):
//!
//! * the observed stream time is the largest timestamp of an accepted write, and that write
//!   is still in the store: as a latest value's timestamp, or, for a tombstone, as the
//!   `next_timestamp` of a row in the segment of its timestamp (`put.rs`: a newest tombstone is
//!   implicit or a degenerate row there). No version is valid later than the stream time, so
//!   that segment is the newest live one, and expiry never reaches it. The stream time is the
//!   largest of the latest values' timestamps and the newest segment's rows' next timestamps.
//!   An advance of stream time that stores no version (`advance_stream_time`) leaves no such
//!   trace, so its write records the stream time even while deferred (`Overlay::keep_stream_time`),
//!   and the recomputation takes the largest of that and the data;
//! * the key count is the number of latest-value entries.
//!
//! Recomputing reads every latest-value entry once: the cost of a crash, not of a write.
//! Stores without the log (the write buffer coalesces writes, and records both once per
//! buffer write) and in-memory stores never defer.

use super::VersionedStore;
use super::kind::{Logged, StoreKind};
use crate::backend::{Write, WriteSet};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, storage_key};
use crate::format::{latest_value, meta, read_i64};
use crate::overlay::Overlay;
use crate::state::State;

impl Logged {
    /// Prepares a write: leaves the metadata out when the marker is stored, or adds the marker
    /// to the first write that changes the metadata (which records it exactly). Returns whether
    /// the marker is in `writes` (the caller notes it, [`Logged::marked`], once the write
    /// succeeded).
    pub(super) fn defer_metadata_of(&self, writes: &mut Overlay) -> bool {
        if self.marked {
            writes.defer_metadata();
            return false;
        }
        let changes = writes.changes_metadata();
        if changes {
            writes.write_metadata(meta::METADATA_DEFERRED_KEY, Some(Vec::new()));
        }
        changes
    }
}

impl VersionedStore {
    /// Records the stream time and the key count and removes the marker, when deferred (only a
    /// store with a write-ahead log defers).
    pub(super) fn settle_metadata(&mut self) -> Result<()> {
        let StoreKind::Logged(logged) = &mut self.kind else {
            return Ok(());
        };
        if !logged.marked {
            return Ok(());
        }
        self.backend.write(&mut metadata_write(&self.state))?;
        logged.marked = false;
        Ok(())
    }

    /// On open: recomputes the metadata of a store that was not closed after deferring it.
    pub(super) fn recover_metadata(&mut self) -> Result<()> {
        let marker = storage_key(META_SEGMENT, meta::METADATA_DEFERRED_KEY);
        if self.backend.get(&marker)?.is_none() {
            return Ok(());
        }
        let location = self.backend.location();
        let mut stream_time = self.state.stream_time;
        let mut count = 0u64;
        self.backend
            .visit_segment(LATEST_SEGMENT, &mut |_, entry| {
                stream_time = stream_time.max(latest_value::decode(entry)?.timestamp);
                count += 1;
                Ok(())
            })?;
        if let Some(newest) = self.state.segments.newest_first().next() {
            self.backend.visit_segment(newest, &mut |_, row| {
                let next = read_i64(row, 0).ok_or_else(|| {
                    Error::corrupt(&location, "a history row is shorter than its header")
                })?;
                stream_time = stream_time.max(next);
                Ok(())
            })?;
        }
        self.state.stream_time = stream_time;
        // Every entry counted: exact, whatever read-free puts left uncounted.
        self.state.latest_keys = Some(count);
        self.state.unsettled_puts = 0;
        self.backend.write(&mut metadata_write(&self.state))
    }

    /// Drops the store as a crash after its last write would leave it: without settling.
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        if let StoreKind::Logged(logged) = &mut self.kind {
            logged.marked = false;
        }
    }
}

/// The write that records the stream time and the key count of `state` and removes the marker.
fn metadata_write(state: &State) -> WriteSet {
    let mut writes = vec![(
        storage_key(META_SEGMENT, meta::STREAM_TIME_KEY),
        Write::Put(meta::encode_stream_time(state.stream_time)),
    )];
    if let Some(counts) = state.key_counts() {
        writes.push((
            storage_key(META_SEGMENT, meta::LATEST_KEYS_KEY),
            Write::Put(meta::encode_key_counts(counts)),
        ));
    }
    writes.push((
        storage_key(META_SEGMENT, meta::METADATA_DEFERRED_KEY),
        Write::Delete,
    ));
    WriteSet {
        drop_segments: None,
        writes,
    }
}
