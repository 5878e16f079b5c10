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

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::backend::memory::MemoryBackend;
use crate::backend::rocks::{RocksBackend, RocksOptions};
use crate::backend::{Backend, Write, WriteSet};
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, storage_key};
use crate::format::{history, meta};
use crate::latest::LatestCache;
use crate::overlay::Overlay;
use crate::read::columns::RecordColumns;
use crate::read::{self, AsOf, ResultOrder};
use crate::record::{PutOutcome, VersionedRecord};
use crate::scan::pipe::OpenScans;
use crate::segments::Segments;
use crate::spool::{Log, Spool};
use crate::state::State;
use crate::txn::Txn;
use crate::view::reader::Reader;

mod inspect;
mod metadata;

use metadata::Deferral;

/// The largest value the row format can hold (value sizes are `i32`).
pub const MAX_VALUE_LEN: usize = i32::MAX as usize;

const LOCK_FILE: &str = "verstore.lock";

/// A versioned key-value store.
pub struct VersionedStore {
    backend: Box<dyn Backend>,
    /// Latest-value entries, for persistent stores (see [`crate::latest`]).
    cache: Option<LatestCache>,
    /// Accepted writes not yet in RocksDB, for persistent stores without a write-ahead log (see
    /// [`crate::overlay`]), and the size at which they are written.
    buffer: Option<Overlay>,
    buffer_limit: usize,
    state: State,
    path: Option<PathBuf>,
    /// Accepted writes since the last changelog was taken, when recording (see
    /// [`crate::spool`]).
    pub(crate) spool: Option<Spool>,
    /// Held for the store's lifetime (never read): a second open of the directory fails fast
    /// with `Error::Locked`, in this process (flock is per open file) or another.
    lock: Option<File>,
    /// Scans whose threads may still read the backend: ended and awaited on drop.
    scans: OpenScans,
    /// Whether writes may leave the stream time and key count to a later write (`metadata`).
    deferral: Deferral,
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
        match &self.path {
            Some(path) => write!(f, "VersionedStore({:?}, ", path.display().to_string())?,
            None => write!(f, "VersionedStore(in-memory, ")?,
        }
        write!(
            f,
            "history_retention_ms={}, segment_interval_ms={}, observed_stream_time={})",
            self.state.config.history_retention_ms(),
            self.state.config.segment_interval_ms(),
            self.state.stream_time
        )
    }
}

impl VersionedStore {
    /// Opens (creating if missing) a persistent store in directory `path`.
    ///
    /// # Errors
    /// [`Error::Locked`] when the directory is open elsewhere; [`Error::IncompatibleConfig`] or
    /// [`Error::IncompatibleFormat`] when the store on disk was created differently;
    /// [`Error::Storage`] / [`Error::Io`] / [`Error::Corrupt`] for what RocksDB or the files say.
    pub fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self> {
        Self::open_with(path, config, RocksOptions::default())
    }

    /// [`VersionedStore::open`] with explicit RocksDB options.
    ///
    /// # Errors
    /// As [`VersionedStore::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        config: StoreConfig,
        options: RocksOptions,
    ) -> Result<Self> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        std::fs::create_dir_all(path).map_err(io)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path.join(LOCK_FILE))
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: path.to_owned(),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        let backend = RocksBackend::open(path, options)?;
        let mut store = Self::from_backend(Box::new(backend), config, Some(path.to_owned()))?;
        store.lock = Some(lock);
        store.recover_metadata()?;
        let empty = store.backend.is_empty_of(LATEST_SEGMENT)?;
        store.cache = Some(LatestCache::new(options.latest_cache_bytes, empty));
        store.load_latest_keys()?;
        if options.wal {
            store.deferral = Deferral::Allowed { marked: false };
        } else {
            store.buffer = Some(Overlay::default());
            store.buffer_limit = options.write_buffer_bytes / 4;
        }
        Ok(store)
    }

    /// An in-memory store with the same semantics; its data is gone when it is dropped.
    #[must_use]
    pub fn in_memory(config: StoreConfig) -> Self {
        let mut backend = MemoryBackend::default();
        // A fresh map cannot fail to initialise.
        let _ = backend.write(&mut initial_metadata(config));
        Self {
            backend: Box::new(backend),
            cache: None,
            buffer: None,
            buffer_limit: 0,
            state: State {
                config,
                stream_time: -1,
                segments: Segments::default(),
                latest_keys: None,
            },
            path: None,
            spool: None,
            lock: None,
            scans: OpenScans::default(),
            deferral: Deferral::Never,
            failure: None,
        }
    }

    /// An in-memory store as one byte string (`format/history.rs`): what `GroupHistory`
    /// keeps in a host's state.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a persistent store.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let entries = self
            .backend
            .export()
            .ok_or_else(|| Error::invalid("store", "only an in-memory store can be serialized"))?;
        Ok(history::encode(&entries))
    }

    /// Restores an in-memory store serialized by [`VersionedStore::to_bytes`], checking that
    /// it was made with `config`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for bad framing or checksum; [`Error::IncompatibleConfig`] or
    /// [`Error::IncompatibleFormat`] as for opening a store.
    pub fn from_bytes(bytes: &[u8], config: StoreConfig) -> Result<Self> {
        let entries = history::decode(bytes)?;
        let backend =
            MemoryBackend::from_entries(entries.into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
        Self::from_backend(Box::new(backend), config, None)
    }

    fn from_backend(
        mut backend: Box<dyn Backend>,
        config: StoreConfig,
        path: Option<PathBuf>,
    ) -> Result<Self> {
        prepare_metadata(
            backend.as_mut(),
            config,
            path.as_deref().unwrap_or(Path::new("")),
        )?;
        let state = load_state(backend.as_ref(), config)?;
        Ok(Self {
            backend,
            cache: None,
            buffer: None,
            buffer_limit: 0,
            state,
            path,
            spool: None,
            lock: None,
            scans: OpenScans::default(),
            deferral: Deferral::Never,
            failure: None,
        })
    }

    /// Before a batch call of `rows` rows: fills the cache of latest values in one pass once
    /// the batch calls since the open are large next to the store (`LatestCache::warm_for`).
    fn warm_latest_cache(&self, rows: usize) -> Result<()> {
        match (&self.cache, self.state.latest_keys) {
            (Some(cache), Some(count)) => cache.warm_for(self.backend.as_ref(), count, rows),
            _ => Ok(()),
        }
    }

    fn reader(&self) -> Reader<'_> {
        Reader::new(
            self.backend.as_ref(),
            self.cache.as_ref(),
            self.buffer.as_ref(),
        )
    }

    /// Writes the write buffer, if any, to RocksDB. A failed write leaves the store failed
    /// (`check_usable`): the buffer is gone with it, and what the store accepted since its last
    /// successful write exists nowhere else.
    fn write_buffer(&mut self) -> Result<()> {
        self.check_usable()?;
        let written = match self.buffer.as_mut() {
            Some(buffer) if !buffer.is_empty() => buffer.write_to(
                self.backend.as_mut(),
                self.cache.as_ref(),
                self.state.stream_time,
            ),
            _ => Ok(()),
        };
        if let Err(error) = &written {
            self.failure = Some(error.to_string());
        }
        written
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
                path: self.path.clone().unwrap_or_default(),
                cause: cause.clone(),
            }),
        }
    }

    /// The store directory (`None` for an in-memory store).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
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

    /// The newest version of `key`, if it is a value. The latest value never expires.
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupt`] for undecodable bytes.
    pub fn get(&self, key: &[u8]) -> Result<Option<VersionedRecord>> {
        self.check_usable()?;
        read::latest(&self.reader(), key)
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
        for (index, (_, value, timestamp)) in rows.clone().enumerate() {
            check_write(value, timestamp, Some(index))?;
        }
        self.warm_latest_cache(rows.len())?;
        self.transaction(|txn| {
            txn.reserve(rows.len());
            rows.map(|(key, value, ts)| txn.put(key, value, ts))
                .collect()
        })
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
        self.transaction(|txn| rows.map(|(key, ts)| txn.delete(key, ts)).collect())
    }

    /// Flushes RocksDB's memtables to SST files.
    ///
    /// # Errors
    /// Storage errors.
    pub fn flush(&mut self) -> Result<()> {
        self.write_buffer()?;
        self.settle_metadata()?;
        self.backend.flush()
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
        if self.buffer.is_some() {
            self.backend.flush()?;
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
        self.backend.checkpoint(dir)
    }

    /// Runs `work` in one transaction and commits it: into the write buffer, or to RocksDB.
    /// On any error nothing is written and the in-memory state (stream time, live segments)
    /// is as before. So too on a panic, which pyo3 raises in Python as an exception after
    /// which the store is used on: the panic goes on once the state is restored (and the
    /// transaction, dropped unfinished, has rolled back the write buffer).
    pub(crate) fn transaction<T>(
        &mut self,
        work: impl FnOnce(&mut Txn<'_>) -> Result<T>,
    ) -> Result<T> {
        let before = self.state.clone();
        let run = std::panic::AssertUnwindSafe(|| self.run_transaction(work));
        match std::panic::catch_unwind(run) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                self.state = before;
                Err(error)
            }
            Err(panic) => {
                self.state = before;
                std::panic::resume_unwind(panic)
            }
        }
    }

    fn run_transaction<T>(&mut self, work: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.check_usable()?;
        // A full buffer is written before the call's transaction runs on it, so a failed write
        // fails the call before any of its work. The buffer may outgrow its bound by one call.
        if self
            .buffer
            .as_ref()
            .is_some_and(|b| b.bytes() > self.buffer_limit)
        {
            self.write_buffer()?;
        }
        let Some(buffer) = &mut self.buffer else {
            let reader = Reader::new(self.backend.as_ref(), self.cache.as_ref(), None);
            let mut txn = Txn::begin(reader, &mut self.state);
            txn.log = self.spool.is_some().then(Log::default);
            let value = work(&mut txn)?;
            let (mut writes, log) = txn.finish();
            let marks = self.defer_metadata_of(&mut writes);
            writes.write_to(
                self.backend.as_mut(),
                self.cache.as_ref(),
                self.state.stream_time,
            )?;
            if marks {
                self.note_marked();
            }
            self.record(log.as_ref());
            return Ok(value);
        };
        // The transaction runs on the buffer itself, so its reads go straight to storage.
        let reader = Reader::new(self.backend.as_ref(), self.cache.as_ref(), None);
        let mut txn = Txn::begin_on(reader, &mut self.state, buffer);
        txn.log = self.spool.is_some().then(Log::default);
        let value = work(&mut txn);
        let log = txn.finish_on_buffer(value.is_ok());
        let value = value?;
        self.record(log.as_ref());
        Ok(value)
    }

    /// Appends a committed transaction's log to the spool, when recording.
    fn record(&mut self, log: Option<&Log>) {
        if let (Some(spool), Some(log)) = (&mut self.spool, log) {
            spool.append(log);
        }
    }
}

impl Drop for VersionedStore {
    /// Writes the write buffer and the deferred metadata (RocksDB then flushes its memtables
    /// on close): a store dropped without `flush` keeps its writes as a store with a
    /// write-ahead log would. A failure here has no caller to go to; `flush` first to see it.
    /// Open scans are ended, and their threads, which share the database, awaited.
    fn drop(&mut self) {
        // A failed store writes nothing more: its stream time and key count count lost writes.
        if self.failure.is_none() {
            let _ = self.write_buffer();
            let _ = self.settle_metadata();
        }
        self.scans.close();
    }
}

fn initial_metadata(config: StoreConfig) -> WriteSet {
    WriteSet {
        drop_segments: None,
        writes: vec![
            (
                storage_key(META_SEGMENT, meta::FORMAT_VERSION_KEY),
                Write::Put(meta::encode_format_version()),
            ),
            (
                storage_key(META_SEGMENT, meta::CONFIG_KEY),
                Write::Put(meta::encode_config(
                    config.history_retention_ms(),
                    config.segment_interval_ms(),
                )),
            ),
            (
                storage_key(META_SEGMENT, meta::STREAM_TIME_KEY),
                Write::Put(meta::encode_stream_time(-1)),
            ),
        ],
    }
}

/// Writes a new store's metadata, or checks an existing store's format and configuration
/// against `config` (and raises an older readable format's number to the current one).
fn prepare_metadata(backend: &mut dyn Backend, config: StoreConfig, path: &Path) -> Result<()> {
    let incompatible = |found| Error::IncompatibleFormat {
        path: path.to_owned(),
        found,
        oldest: meta::OLDEST_READABLE_FORMAT,
        supported: meta::FORMAT_VERSION,
    };
    let Some(bytes) = backend.get(&storage_key(META_SEGMENT, meta::FORMAT_VERSION_KEY))? else {
        if !backend.history_segments()?.is_empty() {
            return Err(incompatible(0));
        }
        return backend.write(&mut initial_metadata(config));
    };
    let found = meta::decode_format_version(&bytes)?;
    if !(meta::OLDEST_READABLE_FORMAT..=meta::FORMAT_VERSION).contains(&found) {
        return Err(incompatible(found));
    }
    check_config(backend, config, path)?;
    if found < meta::FORMAT_VERSION {
        // Version 2 differs only in never deferring its metadata: the number is all there is
        // to upgrade, and an older build then refuses the store.
        backend.write(&mut WriteSet {
            drop_segments: None,
            writes: vec![(
                storage_key(META_SEGMENT, meta::FORMAT_VERSION_KEY),
                Write::Put(meta::encode_format_version()),
            )],
        })?;
    }
    Ok(())
}

/// Fails with [`Error::IncompatibleConfig`] when the stored settings are not `config`'s.
fn check_config(backend: &dyn Backend, config: StoreConfig, path: &Path) -> Result<()> {
    let stored = backend
        .get(&storage_key(META_SEGMENT, meta::CONFIG_KEY))?
        .ok_or_else(|| Error::corrupt(backend.location(), "configuration entry is missing"))?;
    let (retention, interval) = meta::decode_config(&stored)?;
    for (setting, stored, requested) in [
        (
            "history_retention_ms",
            retention,
            config.history_retention_ms(),
        ),
        (
            "segment_interval_ms",
            interval,
            config.segment_interval_ms(),
        ),
    ] {
        if stored != requested {
            return Err(Error::IncompatibleConfig {
                path: path.to_owned(),
                setting,
                stored,
                requested,
            });
        }
    }
    Ok(())
}

fn load_state(backend: &dyn Backend, config: StoreConfig) -> Result<State> {
    let stream_time = match backend.get(&storage_key(META_SEGMENT, meta::STREAM_TIME_KEY))? {
        Some(bytes) => meta::decode_stream_time(&bytes)?,
        None => -1,
    };
    Ok(State {
        config,
        stream_time,
        segments: Segments::from_ids(backend.history_segments()?),
        latest_keys: None,
    })
}

pub(crate) fn check_write(value: Option<&[u8]>, timestamp: i64, row: Option<usize>) -> Result<()> {
    let (ts_name, value_name) = match row {
        Some(_) => ("timestamps", "values"),
        None => ("timestamp", "value"),
    };
    let at = row.map(|i| format!("[{i}]")).unwrap_or_default();
    if timestamp < 0 {
        return Err(Error::invalid(
            ts_name,
            format!("{ts_name}{at} must be >= 0, got {timestamp}"),
        ));
    }
    if value.is_some_and(|v| v.len() > MAX_VALUE_LEN) {
        return Err(Error::invalid(
            value_name,
            format!("{value_name}{at} must be at most {MAX_VALUE_LEN} bytes"),
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
