//! The client the put algorithm runs against: a write transaction over a store's view.
//!
//! Kafka's `VersionedStoreClient` lets one put algorithm serve live writes and changelog restore.
//! Here that client is [`Txn`]: reads see the transaction's own pending writes first, segment
//! creation and expiry update the live set as they happen, and `finish` turns everything —
//! dropped segments, rows, row appends, latest values and the new observed stream time — into
//! one [`Overlay`] that the store writes as one atomic `WriteSet`. A single put, a whole batch
//! and a restore batch are each one transaction, so there is no half-written two-location
//! update to recover from (Kafka's KAFKA-14491 [16/N]). A store whose write-ahead log is off
//! runs the transaction on its write buffer instead (`begin_on`, `crate::overlay`).

use crate::backend::{RowRead, Visit, VisitRow};
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, StorageKey, segment_of, storage_key};
use crate::format::segment_value::{Entry, encode_append};
use crate::format::short_bytes::ShortBytes;
use crate::overlay::{Overlay, WriteBuffer};
use crate::spool::Log;
use crate::state::{KeyCounts, State};
use crate::view::buffered::BufferedView;
use crate::view::{ReadClient, read_map};

/// A write transaction: its own writes over the store's buffer and committed state, plus the
/// state changes they imply. `finish` hands the writes back to the store, which writes them,
/// or ends the transaction on the write buffer it ran on.
pub(crate) struct Txn<'s> {
    reader: BufferedView<'s>,
    pub(crate) state: &'s mut State,
    overlay: Overlay,
    /// The write buffer `overlay` was lent by, which takes it back when the transaction ends
    /// (`begin_on`).
    write_buffer: Option<&'s mut WriteBuffer>,
    /// Accepted writes, in order, when the store records a changelog.
    pub(crate) log: Option<Log>,
    /// The key counts when the transaction began.
    counts_before: Option<KeyCounts>,
}

impl<'s> Txn<'s> {
    pub(crate) fn begin(reader: BufferedView<'s>, state: &'s mut State) -> Self {
        Self {
            reader,
            counts_before: state.key_counts(),
            state,
            overlay: Overlay::default(),
            write_buffer: None,
            log: None,
        }
    }

    /// A transaction that runs on the write buffer `buffer` instead of collecting its writes
    /// apart; `finish` keeps or rolls back its writes there.
    pub(crate) fn begin_on(
        reader: BufferedView<'s>,
        state: &'s mut State,
        buffer: &'s mut WriteBuffer,
    ) -> Self {
        Self {
            reader,
            counts_before: state.key_counts(),
            state,
            overlay: buffer.lend(),
            write_buffer: Some(buffer),
            log: None,
        }
    }

    /// Counts a latest-value entry created (`+1`) or removed (`-1`) by the put algorithm.
    pub(crate) fn count_latest(&mut self, change: i64) {
        if let Some(count) = &mut self.state.latest_keys {
            *count = count.saturating_add_signed(change);
        }
    }

    /// Makes room for the writes of `rows` puts in a transaction of its own; a write buffer
    /// is left to grow as it fills (`WriteBuffer`).
    pub(crate) fn reserve(&mut self, rows: usize) {
        if self.write_buffer.is_none() {
            self.overlay.reserve(rows);
        }
    }

    /// Reads ahead, in one sorted batch, the latest-value entries of `keys` that neither this
    /// transaction nor the cache of latest values answers (`LatestCache::read_ahead`): the
    /// first read of each of their puts then finds its entry in memory.
    pub(crate) fn read_latest_ahead<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Result<()> {
        let Some(cache) = self.reader.stored.cache else {
            return Ok(());
        };
        // The rows of the previous round are done: what it read ahead goes to the bounded
        // cache, so that a call holds one round's entries, not all of them.
        cache.end_read_ahead();
        let wanted: Vec<Vec<u8>> = keys
            .map(|key| storage_key(LATEST_SEGMENT, key))
            .filter(|key| !self.overlay.decides(key) && !cache.knows(key))
            .map(StorageKey::into_vec)
            .collect();
        cache.read_ahead(self.reader.stored.backend, wanted)
    }

    /// Whether knowing the latest-value entry under `latest_key` takes a read of RocksDB: the
    /// cache of latest values does not know it and misses others too (`LatestCache::misses`),
    /// and this transaction (or the write buffer it runs on) holds no write of it but fewer
    /// than `pushes` pushes. Never in memory, where the read is a map lookup.
    pub(crate) fn latest_needs_a_read(&self, latest_key: &[u8], pushes: usize) -> bool {
        let Some(cache) = self.reader.stored.cache else {
            return false;
        };
        // Cheapest first: a cache that knows every entry ends it at once (small stores).
        !cache.knows(latest_key)
            && cache.misses(self.state.latest_keys.unwrap_or_default())
            && self
                .overlay
                .pushes_on_stored(latest_key)
                .is_some_and(|pending| pending < pushes)
    }

    /// Whether an in-order put of a key the cache does not know may be a push (`may_push`)
    /// rather than a read: the cache misses latest values, and the store has no TTL. While the
    /// cache holds them all, a batch reads its keys ahead instead, as one sorted `MultiGet`.
    pub(crate) fn pushes_replace_reads(&self) -> bool {
        self.state.config.latest_ttl().is_none()
            && self
                .reader
                .stored
                .cache
                .is_some_and(|cache| cache.misses(self.state.latest_keys.unwrap_or_default()))
    }

    /// Stages a write of the store's metadata entry `name`.
    pub(crate) fn write_metadata(&mut self, name: &[u8], value: Vec<u8>) {
        self.overlay.write_metadata(name, Some(value));
    }

    /// A read of `key` copied out (the put algorithm edits what it reads).
    pub(crate) fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read_map(self, key, |value| Ok(value.map(<[u8]>::to_vec)))
    }

    /// A read of a history row copied out; a row found missing is remembered as such, so that
    /// a version appended to it later is written as a whole new row.
    pub(crate) fn read_row(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let row = self.read(key)?;
        if row.is_none() {
            self.overlay.note_absent(key);
        }
        Ok(row)
    }

    /// Stages a write (`None` deletes). A row in a history segment registers that segment.
    pub(crate) fn write(&mut self, key: StorageKey, value: Option<ShortBytes>) {
        if let Some(segment) = segment_of(&key).filter(|&s| s >= 0 && value.is_some()) {
            self.state.segments.insert(segment);
        }
        self.overlay.write(key, value);
    }

    /// Stages a row append: `entry`, valid until `valid_to`, becomes the newest version of the
    /// row under `key` (a new row when there is none), without reading it.
    pub(crate) fn append(&mut self, key: StorageKey, entry: Entry<'_>, valid_to: i64) {
        let mut operand = Vec::new();
        encode_append(entry, valid_to, &mut operand);
        self.append_encoded(key, operand);
    }

    /// [`Txn::append`] of an operand made by `encode_append`.
    /// Whether this transaction (or the write buffer it runs on) holds a write of the storage
    /// key `key`: a read of it answers from here, not from storage.
    pub(crate) fn holds_write_of(&self, key: &[u8]) -> bool {
        self.overlay.decides(key)
    }

    pub(crate) fn append_encoded(&mut self, key: StorageKey, operand: Vec<u8>) {
        if let Some(segment) = segment_of(&key).filter(|&s| s >= 0) {
            self.state.segments.insert(segment);
        }
        self.overlay.append_encoded(key, operand);
    }

    /// Advances observed stream time and drops the segments it expires (Kafka: once per
    /// accepted write, with the new stream time). The write then places its version, and
    /// retires the latest TTL's expired buckets (`State::retire_expired`).
    pub(crate) fn advance_stream_time(&mut self, timestamp: i64) {
        if timestamp <= self.state.stream_time {
            return;
        }
        self.state.stream_time = timestamp;
        self.state.tombstone_at_stream_time = false;
        self.overlay.note_stream_time_changed();
        let config = self.state.config;
        let horizon = timestamp.saturating_sub(config.history_retention_ms());
        let lowest_live = config.segment_id(horizon);
        if let Some(lowest_dropped) = self.state.segments.drop_below(lowest_live) {
            self.overlay.drop_segments(lowest_dropped, lowest_live);
        }
    }

    /// Advances observed stream time to `timestamp` as a write at that time would, storing no
    /// version (`VersionedStore::advance_stream_time`, a replayed stream-time record); logs the
    /// advance when there is one. No version shows the new stream time, so the write records it
    /// even where the store defers its metadata.
    pub(crate) fn advance_stream_time_alone(&mut self, timestamp: i64) {
        if timestamp <= self.state.stream_time {
            return;
        }
        self.advance_stream_time(timestamp);
        self.state.retire_expired();
        self.overlay.keep_stream_time();
        if let Some(log) = &mut self.log {
            log.push_stream_time(timestamp);
        }
    }

    /// The transaction's writes and the accepted writes it logged.
    pub(crate) fn finish(mut self) -> (Overlay, Option<Log>) {
        self.note_latest_keys();
        (std::mem::take(&mut self.overlay), self.log.take())
    }

    /// Ends a transaction begun with `begin_on`: the write buffer keeps its writes when `ok`
    /// and rolls them back otherwise. Returns the accepted writes it logged.
    pub(crate) fn finish_on_buffer(mut self, ok: bool) -> Option<Log> {
        self.note_latest_keys();
        self.return_to_buffer(ok);
        self.log.take()
    }

    /// Returns the overlay of a transaction begun with `begin_on` to its write buffer:
    /// committed when `keep`, rolled back otherwise (a no-op once returned).
    fn return_to_buffer(&mut self, keep: bool) {
        if let Some(buffer) = self.write_buffer.take() {
            buffer.take_back(std::mem::take(&mut self.overlay), keep);
        }
    }

    /// Records the new counts of latest-value entries with the writes, when they changed.
    fn note_latest_keys(&mut self) {
        let counts = self.state.key_counts();
        if counts != self.counts_before {
            self.overlay.note_latest_keys(counts);
        }
    }
}

impl Drop for Txn<'_> {
    /// A transaction on a write buffer that ends without `finish` (a panic in the put
    /// algorithm, which Python sees as an exception) rolls back and gives the buffer back:
    /// the writes of earlier calls stay.
    fn drop(&mut self) {
        self.return_to_buffer(false);
    }
}

impl ReadClient for Txn<'_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        self.overlay.read_with(key, &self.reader, visit)
    }

    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        if self.overlay.decides(read.key) {
            return self.read_with(read.key, &mut |bytes| visit(read.lookup(bytes)?));
        }
        self.reader.lookup_row(read, visit)
    }

    fn location(&self) -> String {
        self.reader.location()
    }
}
