//! `VersionedStore`: a key-value store that keeps every version of a key for a history
//! retention period, with Kafka Streams' versioned-store semantics (KIP-889, KIP-914, KIP-960,
//! KIP-968).
//!
//! A store is a latest-value store (the newest version of each key, when it is a value) plus
//! history segments keyed by valid-to, all in one ordered keyspace ([`crate::backend`]): RocksDB
//! for persistent stores, a `BTreeMap` for the in-memory variant. The retention doubles as the
//! grace period: a write older than `observed_stream_time − history_retention_ms` is dropped and
//! reported as [`PutOutcome::Expired`]. Every write — a single put or delete, or a whole batch —
//! is one atomic backend write that also records the new observed stream time (or, with the
//! write-ahead log, defers it: `store/metadata.rs`), so reopening a store gives back exactly the
//! state of the last write that returned.

use std::path::Path;

use crate::backend::Backend;
use crate::config::{StoreConfig, Tuning};
use crate::error::{Error, Result};
use crate::format::history;
use crate::memory;
use crate::overlay::WriteBuffer;
use crate::read::columns::RecordColumns;
use crate::read::{self, AsOf, ResultOrder};
use crate::record::{PutOutcome, VersionedRecord};
use crate::scan::pipe::OpenScans;
use crate::spool::Spool;
use crate::state::State;
use crate::txn::Txn;
use crate::view::buffered::BufferedView;

mod expiry;
mod handoff;
mod kind;
mod metadata;
mod open;
mod scans;
mod settle;
mod transaction;

use kind::StoreKind;

/// The largest value the row format can hold (value sizes are `i32`).
pub const MAX_VALUE_LEN: usize = i32::MAX as usize;

/// A versioned key-value store.
pub struct VersionedStore {
    /// Dropped first of the fields: the directory's lock (in `kind`) outlives it.
    backend: Box<dyn Backend>,
    /// Logged, unlogged or in memory, with what that kind holds: the directory, its lock and
    /// the latest-value cache; the write buffer; the deferred metadata's marker
    /// (`store/kind.rs`).
    kind: StoreKind,
    state: State,
    /// The thresholds of its work: the shipped ones but in tests that lower them.
    tuning: Tuning,
    /// Accepted writes since the last changelog was taken, when recording (see
    /// [`crate::spool`]).
    pub(crate) spool: Option<Spool>,
    /// Scans whose threads may still read the backend: ended and awaited on drop.
    scans: OpenScans,
    /// Why the store refuses every call: a write of its write buffer failed, so it lost writes
    /// it had accepted while its stream time, segments and key count still count them.
    failure: Option<String>,
}

impl std::fmt::Debug for VersionedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionedStore")
            .field("location", &self.backend.location())
            .field("config", &self.state.config)
            .field("observed_stream_time", &self.state.stream_time)
            .finish_non_exhaustive()
    }
}

/// `VersionedStore("<path>" or in-memory, history_retention_ms=.., segment_interval_ms=..,
/// observed_stream_time=..)`.
impl std::fmt::Display for VersionedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind.path() {
            Some(path) => write!(f, "VersionedStore({:?}, ", path.display().to_string())?,
            None => write!(f, "VersionedStore(in-memory, ")?,
        }
        write!(
            f,
            "history_retention_ms={}, segment_interval_ms={}, ",
            self.state.config.history_retention_ms(),
            self.state.config.segment_interval_ms(),
        )?;
        if let Some(ttl) = self.state.config.latest_ttl() {
            write!(f, "latest_ttl_ms={}, ", ttl.ttl_ms())?;
        }
        write!(f, "observed_stream_time={})", self.state.stream_time)
    }
}

impl VersionedStore {
    /// An in-memory store as one byte string (`format/history.rs`): what `GroupHistory`
    /// keeps in a host's state. Writes the store's write buffer to its maps first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a persistent store.
    pub fn to_bytes(&mut self) -> Result<Vec<u8>> {
        if let StoreKind::Memory { .. } = self.kind {
            self.write_buffer()?;
        }
        let entries = self
            .backend
            .export()
            .ok_or_else(|| Error::invalid("store", "only an in-memory store can be serialized"))?;
        Ok(history::encode(&entries))
    }

    /// Before a batch call of `rows` rows: fills the cache of latest values in one pass once
    /// the batch calls since the open are large next to the store (`LatestCache::warm_for`).
    fn warm_latest_cache(&self, rows: usize) -> Result<()> {
        let count = self.state.latest_keys.or_else(|| {
            let buckets = self.state.latest_buckets.as_ref()?;
            Some(buckets.live_keys())
        });
        match (self.kind.cache(), count) {
            (Some(cache), Some(count)) => cache.warm_for(self.backend.as_ref(), count, rows),
            _ => Ok(()),
        }
    }

    fn reader(&self) -> BufferedView<'_> {
        BufferedView::new(self.backend.as_ref(), self.kind.cache(), self.kind.buffer())
    }

    /// Writes the write buffer, if any, to RocksDB. A failed write leaves the store failed
    /// (`check_usable`): the buffer is gone with it, and what the store accepted since its last
    /// successful write exists nowhere else.
    fn write_buffer(&mut self) -> Result<()> {
        self.check_usable()?;
        let stream_time = self.state.stream_time;
        let (wrote, written) = match &mut self.kind {
            StoreKind::Logged(_) => return Ok(()),
            StoreKind::Unlogged { disk, buffer } => {
                let wrote = !buffer.is_empty();
                let written =
                    buffer.write_to(self.backend.as_mut(), Some(&disk.cache), stream_time);
                if wrote {
                    memory::return_rocksdb_free_memory();
                }
                (false, written)
            }
            StoreKind::Memory { buffer } => {
                let wrote = !buffer.is_empty();
                (
                    wrote,
                    buffer.write_to(self.backend.as_mut(), None, stream_time),
                )
            }
        };
        match &written {
            Err(error) => self.failure = Some(error.to_string()),
            // In memory, what the maps hold is all there is: expired entries go from there.
            Ok(()) if wrote => self.note_durable(),
            Ok(()) => {}
        }
        written
    }

    /// Whether the write buffer is due to be written before the next call
    /// ([`WriteBuffer::is_full`]).
    fn buffer_is_full(&self) -> bool {
        self.kind.buffer().is_some_and(WriteBuffer::is_full)
    }

    /// Moves the write buffer's charge to the process's pool to what it holds now.
    fn charge_buffer(&mut self) {
        if let Some(buffer) = self.kind.buffer_mut() {
            buffer.recharge();
        }
    }

    /// `Ok` unless the store has failed: then [`Error::Failed`], for every call until the
    /// store is reopened from what storage holds.
    ///
    /// # Errors
    /// [`Error::Failed`] once a write of the write buffer has failed.
    pub fn check_usable(&self) -> Result<()> {
        match &self.failure {
            None => Ok(()),
            Some(cause) => Err(Error::Failed {
                path: self.kind.path().map(Path::to_owned).unwrap_or_default(),
                cause: cause.clone(),
            }),
        }
    }

    /// The store directory (`None` for an in-memory store).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.kind.path()
    }

    /// The store's configuration.
    #[must_use]
    pub fn config(&self) -> StoreConfig {
        self.state.config
    }

    /// Largest timestamp of any accepted write, or -1 before the first.
    #[must_use]
    pub fn observed_stream_time(&self) -> i64 {
        self.state.stream_time
    }

    /// Number of live history segments.
    #[must_use]
    pub fn live_segment_count(&self) -> usize {
        self.state.segments.len()
    }

    /// Stores `value` (`None` = tombstone) for `key` at `timestamp`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative timestamp or an oversized value; storage errors.
    pub fn put(&mut self, key: &[u8], value: Option<&[u8]>, timestamp: i64) -> Result<PutOutcome> {
        check_write(value, timestamp, None)?;
        self.transaction(|txn| txn.put(key, value, timestamp))
    }

    /// Writes a tombstone at `timestamp`; returns the record that was valid at `timestamp`
    /// before (`None` when there was none, or when the delete was older than the grace period).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative timestamp; storage errors.
    pub fn delete(&mut self, key: &[u8], timestamp: i64) -> Result<Option<VersionedRecord>> {
        check_write(None, timestamp, None)?;
        self.transaction(|txn| txn.delete(key, timestamp))
    }

    /// Raises observed stream time to `timestamp` when it is higher (otherwise nothing
    /// happens), as a write at `timestamp` that stores no version: it drops the segments a put
    /// at `timestamp` would expire, and a recording store logs it for the next changelog
    /// (docs/semantics.md §2.14). Returns the observed stream time after the call.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative timestamp; storage errors.
    pub fn advance_stream_time(&mut self, timestamp: i64) -> Result<i64> {
        check_write(None, timestamp, None)?;
        self.transaction(|txn| {
            txn.advance_stream_time_alone(timestamp);
            Ok(())
        })?;
        Ok(self.state.stream_time)
    }

    /// The newest version of `key`, if it is a value. The latest value never expires.
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupt`] for undecodable bytes.
    pub fn get(&self, key: &[u8]) -> Result<Option<VersionedRecord>> {
        self.check_usable()?;
        read::latest(&self.reader(), &self.state, key)
    }

    /// The record valid at `as_of` (inclusive).
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupt`] for undecodable bytes.
    pub fn get_as_of(&self, key: &[u8], as_of: i64) -> Result<Option<VersionedRecord>> {
        self.check_usable()?;
        read::as_of(&self.reader(), &self.state, key, as_of)
    }

    /// [`VersionedStore::get`] (`AsOf::Latest`) or [`VersionedStore::get_as_of`] for every
    /// key, as columns in row order. Keys are looked up in key order, each distinct key once,
    /// with one batched read per round (RocksDB `MultiGet`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when per-row times are not one per key; storage errors;
    /// [`Error::Corrupt`] for undecodable bytes.
    pub fn get_batch(&self, keys: &[&[u8]], as_of: AsOf<'_>) -> Result<RecordColumns> {
        self.check_usable()?;
        if let AsOf::PerRow(times) = as_of
            && times.len() != keys.len()
        {
            return Err(Error::invalid(
                "as_of",
                format!(
                    "as_of has {} rows but keys has {}: they must have the same length",
                    times.len(),
                    keys.len()
                ),
            ));
        }
        self.warm_latest_cache(keys.len())?;
        read::batch(self.reader(), &self.state, keys, as_of)
    }

    /// Every value version whose validity interval meets `[from, to]` (missing bounds are
    /// unbounded), in `order`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `from > to`; storage errors.
    pub fn versions(
        &self,
        key: &[u8],
        from: Option<i64>,
        to: Option<i64>,
        order: ResultOrder,
    ) -> Result<Vec<VersionedRecord>> {
        self.check_usable()?;
        let (from, to) = time_range(from, to)?;
        read::versions(&self.reader(), &self.state, key, from, to, order)
    }

    /// Applies puts row by row in order, atomically: every row is validated first, and either
    /// all rows are written or none. Element `i` is row `i`'s outcome.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first bad row (nothing written); storage errors.
    pub fn put_batch<'a>(
        &mut self,
        rows: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>, i64)> + Clone,
    ) -> Result<Vec<PutOutcome>> {
        #[expect(
            clippy::redundant_closure_for_method_calls,
            reason = "`Txn::put` names one transaction lifetime; the closure takes any"
        )]
        self.put_rows(rows, true, |txn, key, value, ts| txn.put(key, value, ts))
    }

    /// [`VersionedStore::put_batch`], with each row's previous record: the one valid at the
    /// row's timestamp just before its write (rows before it included), as `get(key, as_of)`
    /// would have returned it then; `None` for a row older than the grace period.
    ///
    /// # Errors
    /// As [`VersionedStore::put_batch`].
    pub fn put_batch_with_previous<'a>(
        &mut self,
        rows: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>, i64)> + Clone,
    ) -> Result<Vec<(PutOutcome, Option<VersionedRecord>)>> {
        self.put_rows(rows, false, |txn, key, value, ts| {
            txn.put_returning_previous(key, value, ts)
        })
    }

    /// Validates every row, then runs `put` on each in order in one transaction, reading
    /// their latest values ahead in sorted rounds: those of the rows that will not take the
    /// read-free path (`read_free`: the call's puts may), a value at or after the newest time
    /// before it.
    fn put_rows<'a, T>(
        &mut self,
        rows: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>, i64)> + Clone,
        read_free: bool,
        put: impl Fn(&mut Txn<'_>, &[u8], Option<&[u8]>, i64) -> Result<T>,
    ) -> Result<Vec<T>> {
        for (index, (_, value, timestamp)) in rows.clone().enumerate() {
            check_write(value, timestamp, Some(index))?;
        }
        self.warm_latest_cache(rows.len())?;
        let read_ahead = self.tuning.read_ahead_rows;
        let outcomes = self.transaction(|txn| {
            txn.reserve(rows.len());
            let mut newest = txn.state.stream_time;
            let mut ahead = rows.clone().map(|(key, value, ts)| {
                let may_push = read_free && value.is_some() && ts >= newest;
                newest = newest.max(ts);
                (key, may_push)
            });
            let mut outcomes = Vec::with_capacity(rows.len());
            for (i, (key, value, ts)) in rows.enumerate() {
                if i % read_ahead == 0 {
                    // Rows that will push need no read; while pushes are off, every row reads.
                    let skip = txn.pushes_replace_reads();
                    let window = ahead.by_ref().take(read_ahead);
                    let reads = window.filter(|(_, may_push)| !(skip && *may_push));
                    txn.read_latest_ahead(reads.map(|(key, _)| key))?;
                }
                outcomes.push(put(txn, key, value, ts)?);
            }
            Ok(outcomes)
        });
        self.end_read_ahead();
        outcomes
    }

    /// Ends a batch call's read ahead of latest values (`Txn::read_latest_ahead`).
    pub(crate) fn end_read_ahead(&self) {
        if let Some(cache) = self.kind.cache() {
            cache.end_read_ahead();
        }
    }

    /// Applies deletes row by row in order, atomically (see [`VersionedStore::put_batch`]).
    ///
    /// # Errors
    /// As [`VersionedStore::put_batch`].
    pub fn delete_batch<'a>(
        &mut self,
        rows: impl ExactSizeIterator<Item = (&'a [u8], i64)> + Clone,
    ) -> Result<Vec<Option<VersionedRecord>>> {
        for (index, (_, timestamp)) in rows.clone().enumerate() {
            check_write(None, timestamp, Some(index))?;
        }
        self.warm_latest_cache(rows.len())?;
        let read_ahead = self.tuning.read_ahead_rows;
        let outcomes = self.transaction(|txn| {
            let mut ahead = rows.clone().map(|(key, _)| key);
            let mut outcomes = Vec::with_capacity(rows.len());
            for (i, (key, ts)) in rows.enumerate() {
                if i % read_ahead == 0 {
                    txn.read_latest_ahead(ahead.by_ref().take(read_ahead))?;
                }
                outcomes.push(txn.delete(key, ts)?);
            }
            Ok(outcomes)
        });
        self.end_read_ahead();
        outcomes
    }

    /// Flushes RocksDB's memtables to SST files.
    ///
    /// # Errors
    /// Storage errors.
    pub fn flush(&mut self) -> Result<()> {
        self.write_buffer()?;
        self.settle_metadata()?;
        self.backend.flush()?;
        self.note_durable();
        Ok(())
    }

    /// Gives back the memory the store holds between calls: writes its write buffer to
    /// RocksDB and frees the buffer's room, and empties its caches. What it holds stays in
    /// RocksDB (memtables until they are flushed: `flush`). For a holder of idle stores when the
    /// process's memory budget is under pressure (`memory_usage().under_pressure()`).
    ///
    /// # Errors
    /// As [`VersionedStore::flush`].
    pub fn release_memory(&mut self) -> Result<()> {
        self.give_up_write_buffer()?;
        if let Some(cache) = self.kind.cache() {
            cache.clear();
        }
        self.backend.release_caches();
        memory::return_free_memory();
        Ok(())
    }

    /// Bytes the write buffer holds (0 without one): what a holder of idle stores weighs
    /// against the write buffers' share of the process's budget.
    #[must_use]
    pub fn write_buffer_bytes(&self) -> usize {
        self.kind.buffer().map_or(0, WriteBuffer::bytes)
    }

    /// Bytes RocksDB's memtables hold, active and unflushed (0 in memory): what a flush, and so
    /// a handoff's close ([`VersionedStore::close_keeping_buffer`]), would write to SST files.
    ///
    /// # Errors
    /// Storage errors reading RocksDB's property.
    pub fn memtable_bytes(&self) -> Result<u64> {
        self.backend.memtable_bytes()
    }

    /// Gives back the write buffer's memory alone: writes it to RocksDB and frees its room;
    /// the caches stay warm for the store's next call. For a holder of idle stores when the
    /// process's write buffers are past their share (`memory_usage().write_buffers_over()`):
    /// the store in use then keeps its writes in its own buffer, where its reads find them.
    ///
    /// # Errors
    /// As [`VersionedStore::flush`].
    pub fn release_write_buffer(&mut self) -> Result<()> {
        self.give_up_write_buffer()?;
        memory::return_free_memory();
        Ok(())
    }

    /// Writes the write buffer to RocksDB and frees its room (its memory stays with the
    /// allocators).
    fn give_up_write_buffer(&mut self) -> Result<()> {
        self.write_buffer()?;
        if let Some(buffer) = self.kind.buffer_mut() {
            buffer.release_room();
            buffer.recharge();
        }
        Ok(())
    }

    /// Writes the write buffer and closes the store. Without a write-ahead log it also flushes
    /// RocksDB's memtables, which RocksDB would otherwise do while closing and keep any failure
    /// to itself: a close that returns has made every accepted write durable. Dropping the
    /// store does the same with no error to report.
    ///
    /// # Errors
    /// [`Error::Failed`] for a failed store; storage errors of the buffer's write or the flush.
    pub fn close(mut self) -> Result<()> {
        self.write_buffer()?;
        self.settle_metadata()?;
        match self.kind {
            StoreKind::Logged(_) => {}
            StoreKind::Unlogged { .. } | StoreKind::Memory { .. } => self.backend.flush()?,
        }
        Ok(())
    }

    /// Writes a consistent copy of a persistent store into the new directory `dir`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an in-memory store; storage errors.
    pub fn checkpoint(&mut self, dir: &Path) -> Result<()> {
        self.write_buffer()?;
        self.settle_metadata()?;
        self.backend.checkpoint(dir)?;
        self.note_durable();
        Ok(())
    }
}

impl Drop for VersionedStore {
    /// Writes the write buffer and the deferred metadata (RocksDB then flushes its memtables
    /// on close): a store dropped without `flush` keeps its writes as a store with a
    /// write-ahead log would. A failure here has no caller to go to; `flush` first to see it.
    /// Open scans are ended, and their threads, which share the database, awaited.
    fn drop(&mut self) {
        // A failed store writes nothing more: its stream time and key count count lost writes.
        // An in-memory store's maps go with it: writing its buffer to them would be wasted.
        let on_disk = match self.kind {
            StoreKind::Logged(_) | StoreKind::Unlogged { .. } => true,
            StoreKind::Memory { .. } => false,
        };
        if self.failure.is_none() && on_disk {
            let _ = self.write_buffer();
            let _ = self.settle_metadata();
        }
        self.scans.close();
        // Freed before the backend, whose last store gives the process's free memory back to
        // the system when it closes (fields drop after this, backend first): freed after it,
        // the caches' pages would wait in the allocator for a purge that an idle process never
        // runs. The buffer gives its charge back to the process's pool as it goes.
        self.kind.free_memory();
    }
}
pub(crate) fn check_write(value: Option<&[u8]>, timestamp: i64, row: Option<usize>) -> Result<()> {
    let (ts_name, value_name) = match row {
        Some(_) => ("timestamps", "values"),
        None => ("timestamp", "value"),
    };
    // The row's index is formatted only for a message: a batch checks every row.
    let at = || row.map(|i| format!("[{i}]")).unwrap_or_default();
    if timestamp < 0 {
        return Err(Error::invalid(
            ts_name,
            format!("{ts_name}{} must be >= 0, got {timestamp}", at()),
        ));
    }
    if value.is_some_and(|v| v.len() > MAX_VALUE_LEN) {
        return Err(Error::invalid(
            value_name,
            format!("{value_name}{} must be at most {MAX_VALUE_LEN} bytes", at()),
        ));
    }
    Ok(())
}

/// The times `[from, to]` of a versions query (unbounded where `None`).
fn time_range(from: Option<i64>, to: Option<i64>) -> Result<(i64, i64)> {
    let (from, to) = (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX));
    if from > to {
        return Err(Error::invalid(
            "from_time",
            format!("from_time ({from}) must not be greater than to_time ({to})"),
        ));
    }
    Ok((from, to))
}

#[cfg(test)]
pub(crate) mod tests;
