//! Opening a store: a RocksDB directory (locked while open), a new in-memory store, or one
//! restored from bytes; a new store's metadata is written, an existing one's format and
//! configuration are checked, and the in-memory state is loaded from storage.

use std::fs::{File, TryLockError};
use std::path::Path;

use super::VersionedStore;
use super::kind::{Disk, Logged, StoreKind};
use crate::backend::memory::MemoryBackend;
use crate::backend::rocks::{RocksBackend, RocksOptions};
use crate::backend::{Backend, Write, WriteSet};
use crate::config::{StoreConfig, Tuning};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, StorageKey, storage_key};
use crate::format::{history, meta};
use crate::latest_cache::LatestCache;
use crate::overlay::WriteBuffer;
use crate::scan::pipe::OpenScans;
use crate::segments::Segments;
use crate::state::State;
use crate::ttl::LatestBuckets;

const LOCK_FILE: &str = "verstore.lock";

/// The bytes an in-memory store's write buffer holds before it is written to the maps (or
/// sooner, when the write buffers of the process are past their share of its budget).
const MEMORY_BUFFER_BYTES: usize = 16 << 20;

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
        Self::open_tuned(path, config, options, Tuning::default())
    }

    /// [`VersionedStore::open_with`] with other thresholds than the shipped ones (tests).
    pub(crate) fn open_tuned(
        path: impl AsRef<Path>,
        config: StoreConfig,
        options: RocksOptions,
        tuning: Tuning,
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
        let backend = RocksBackend::open(path, options, config.latest_ttl(), &tuning)?;
        let empty = backend.is_empty_of(LATEST_SEGMENT)?;
        let cache = LatestCache::new(options.latest_cache_bytes.unwrap_or(usize::MAX), empty);
        let disk = Disk::new(path.to_owned(), lock, cache);
        let kind = if options.wal {
            StoreKind::Logged(Logged {
                disk,
                marked: false,
            })
        } else {
            let buffer = WriteBuffer::new(options.buffer_bytes.unwrap_or(usize::MAX));
            StoreKind::Unlogged { disk, buffer }
        };
        let mut store = Self::from_backend(kind, Box::new(backend), config, tuning)?;
        store.recover_metadata()?;
        if config.latest_ttl().is_some() {
            store.load_latest_buckets()?;
        } else {
            store.load_latest_keys()?;
        }
        store.settle_for_latest_ttl()?;
        Ok(store)
    }

    /// An in-memory store with the same semantics; its data is gone when it is dropped.
    ///
    /// It keeps a write buffer, as a persistent store without a write-ahead log does: a batch
    /// runs on the buffer (undone from its journal if it fails) and finds the keys it wrote
    /// before there, where a transaction of its own had to look each key up in its overlay,
    /// then in the maps, and write it into both (a quarter of a batch put's time).
    #[must_use]
    pub fn in_memory(config: StoreConfig) -> Self {
        Self::in_memory_tuned(config, Tuning::default())
    }

    /// [`VersionedStore::in_memory`] with other thresholds than the shipped ones (tests).
    pub(crate) fn in_memory_tuned(config: StoreConfig, tuning: Tuning) -> Self {
        let mut backend = MemoryBackend::default().with_latest_ttl(config.latest_ttl());
        // A fresh map cannot fail to initialise.
        let _ = backend.write(&mut initial_metadata(config));
        Self {
            backend: Box::new(backend),
            kind: memory_kind(),
            state: State {
                latest_buckets: config.latest_ttl().map(|_| LatestBuckets::default()),
                ..State::loaded(config, -1, Segments::default(), 0)
            },
            tuning,
            spool: None,
            scans: OpenScans::default(),
            failure: None,
        }
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
            MemoryBackend::from_entries(entries.into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())))
                .with_latest_ttl(config.latest_ttl());
        let kind = memory_kind();
        let mut store = Self::from_backend(kind, Box::new(backend), config, Tuning::default())?;
        store.load_latest_buckets()?;
        Ok(store)
    }

    /// A store of `kind` on `backend`, its metadata written or checked and its state loaded.
    /// Dropped on a later step's failure, it writes nothing: its write buffer is empty and no
    /// marker is noted. (`kind` first: parameters drop last first, so a failure here closes
    /// the backend before it releases the directory's lock.)
    fn from_backend(
        kind: StoreKind,
        mut backend: Box<dyn Backend>,
        config: StoreConfig,
        tuning: Tuning,
    ) -> Result<Self> {
        prepare_metadata(
            backend.as_mut(),
            config,
            kind.path().unwrap_or(Path::new("")),
        )?;
        let state = load_state(backend.as_ref(), config)?;
        Ok(Self {
            backend,
            kind,
            state,
            tuning,
            spool: None,
            scans: OpenScans::default(),
            failure: None,
        })
    }
}

fn memory_kind() -> StoreKind {
    StoreKind::Memory {
        buffer: WriteBuffer::new(MEMORY_BUFFER_BYTES),
    }
}

fn initial_metadata(config: StoreConfig) -> WriteSet {
    let ttl = config.latest_ttl().map(|ttl| ttl.ttl_ms());
    let mut writes = vec![
        format_version_write(meta::format_version(None, ttl.is_some())),
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
    ];
    writes.extend(ttl.map(latest_ttl_write));
    WriteSet {
        drop_segments: None,
        writes,
    }
}

fn format_version_write(version: u32) -> (StorageKey, Write) {
    (
        storage_key(META_SEGMENT, meta::FORMAT_VERSION_KEY),
        Write::Put(meta::encode_format_version(version)),
    )
}

fn latest_ttl_write(ttl_ms: i64) -> (StorageKey, Write) {
    (
        storage_key(META_SEGMENT, meta::LATEST_TTL_KEY),
        Write::Put(meta::encode_latest_ttl(ttl_ms)),
    )
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
    let stored_ttl = stored_latest_ttl(backend, found)?;
    let requested_ttl = config.latest_ttl().map(|ttl| ttl.ttl_ms());
    check_latest_ttl(stored_ttl, requested_ttl, path)?;
    // Version 2 differs from 3 only in never deferring its metadata: the number is all there
    // is to upgrade, and an older build then refuses the store. A TTL added makes it 4; a
    // format-5 store stays 5.
    let version = meta::format_version(Some(found), requested_ttl.is_some());
    let mut writes = Vec::new();
    if found != version {
        writes.push(format_version_write(version));
    }
    if requested_ttl != stored_ttl {
        writes.extend(requested_ttl.map(latest_ttl_write));
    }
    if !writes.is_empty() {
        backend.write(&mut WriteSet {
            drop_segments: None,
            writes,
        })?;
    }
    Ok(())
}

/// The latest TTL a store of format `found` records: format 4 has one, format 5 may, older
/// formats none.
fn stored_latest_ttl(backend: &dyn Backend, found: u32) -> Result<Option<i64>> {
    let bytes = backend.get(&storage_key(META_SEGMENT, meta::LATEST_TTL_KEY))?;
    match (found, bytes) {
        (meta::FORMAT_WITH_TTL | meta::FORMAT_VERSION, Some(bytes)) => {
            meta::decode_latest_ttl(&bytes).map(Some)
        }
        (meta::FORMAT_WITH_TTL, None) => Err(Error::corrupt(
            backend.location(),
            "a format-4 store has no latest TTL entry",
        )),
        (_, None) => Ok(None),
        (_, Some(_)) => Err(Error::corrupt(
            backend.location(),
            format!("a format-{found} store has a latest TTL entry"),
        )),
    }
}

/// A TTL may be added or lowered (every entry it dropped is dead under a lower one too), never
/// raised or removed: what it dropped cannot come back.
fn check_latest_ttl(stored: Option<i64>, requested: Option<i64>, path: &Path) -> Result<()> {
    let allowed = match (stored, requested) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(stored), Some(requested)) => requested <= stored,
    };
    if allowed {
        return Ok(());
    }
    Err(Error::IncompatibleConfig {
        path: path.to_owned(),
        setting: "latest_ttl_ms",
        stored,
        requested,
    })
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
                stored: Some(stored),
                requested: Some(requested),
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
    let format_version = match backend.get(&storage_key(META_SEGMENT, meta::FORMAT_VERSION_KEY))? {
        Some(bytes) => meta::decode_format_version(&bytes)?,
        None => 0,
    };
    let segments = Segments::from_ids(backend.history_segments()?);
    Ok(State::loaded(config, stream_time, segments, format_version))
}
