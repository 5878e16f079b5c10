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
use crate::backend::{Write, WriteSet};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, storage_key};
use crate::format::{latest_value, meta, read_i64};
use crate::overlay::Overlay;

/// Whether a store's writes record its stream time and key count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deferral {
    /// Every write records what it changed.
    Never,
    /// Writes leave them out while `marked` (the marker is stored); settling records them.
    Allowed { marked: bool },
}

impl VersionedStore {
    /// Prepares a write of the write-ahead-log path: leaves the metadata out when the marker is
    /// stored, or adds the marker to the first write that changes the metadata (which records
    /// it exactly). Returns whether the marker is in `writes` (the caller notes it once the
    /// write succeeded).
    pub(super) fn defer_metadata_of(&self, writes: &mut Overlay) -> bool {
        match self.deferral {
            Deferral::Never => false,
            Deferral::Allowed { marked: true } => {
                writes.defer_metadata();
                false
            }
            Deferral::Allowed { marked: false } => {
                let changes = writes.changes_metadata();
                if changes {
                    writes.write_metadata(meta::METADATA_DEFERRED_KEY, Some(Vec::new()));
                }
                changes
            }
        }
    }

    /// Notes that the marker is stored (after the write holding it succeeded).
    pub(super) fn note_marked(&mut self) {
        self.deferral = Deferral::Allowed { marked: true };
    }

    /// Records the stream time and the key count and removes the marker, when deferred.
    pub(super) fn settle_metadata(&mut self) -> Result<()> {
        if self.deferral != (Deferral::Allowed { marked: true }) {
            return Ok(());
        }
        self.backend.write(&mut self.metadata_write())?;
        self.deferral = Deferral::Allowed { marked: false };
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
        self.backend.write(&mut self.metadata_write())
    }

    /// The write that records the stream time and the key count and removes the marker.
    fn metadata_write(&self) -> WriteSet {
        let mut writes = vec![(
            storage_key(META_SEGMENT, meta::STREAM_TIME_KEY),
            Write::Put(meta::encode_stream_time(self.state.stream_time)),
        )];
        if let Some(counts) = self.state.key_counts() {
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

    /// Drops the store as a crash after its last write would leave it: without settling.
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        self.deferral = Deferral::Never;
    }
}
