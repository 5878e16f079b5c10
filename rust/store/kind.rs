//! The three kinds of store, each holding exactly what it has: a RocksDB store with its
//! write-ahead log ([`StoreKind::Logged`]), one without it ([`StoreKind::Unlogged`]), and an
//! in-memory store ([`StoreKind::Memory`]). The write path, expiry, the hand-off and scans match
//! on the kind. A store never changes kind; ARCHITECTURE.md ("The kinds of store") tables what
//! each holds and does, and the states of the one kind with states of its own (`Logged`'s
//! deferred metadata).
//!
//! Recording changes (`crate::spool`) is not a kind: any store may start or stop it.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::latest_cache::LatestCache;
use crate::overlay::WriteBuffer;

/// What kind of store a `VersionedStore` is, with what that kind holds.
pub(super) enum StoreKind {
    /// RocksDB with its write-ahead log: every call is one atomic RocksDB write.
    Logged(Logged),
    /// RocksDB without a write-ahead log: calls run on the write buffer.
    Unlogged { disk: Disk, buffer: WriteBuffer },
    /// The in-memory maps behind a write buffer; gone when the store is dropped.
    Memory { buffer: WriteBuffer },
}

/// What a store in a directory holds besides its backend.
pub(super) struct Disk {
    pub(super) path: PathBuf,
    /// Held for the store's lifetime (never read): a second open of the directory fails fast
    /// with `Error::Locked`, in this process (flock is per open file) or another. Released
    /// after the backend closed (`VersionedStore`'s fields drop the backend first).
    _lock: File,
    /// Latest-value entries (see [`crate::latest_cache`]).
    pub(super) cache: LatestCache,
}

/// A RocksDB store with its write-ahead log.
pub(super) struct Logged {
    pub(super) disk: Disk,
    /// Whether the marker `metadata_deferred` is stored: writes then leave the stream time and
    /// key count out, and settling records them and removes it (`metadata.rs`).
    pub(super) marked: bool,
}

impl Disk {
    pub(super) fn new(path: PathBuf, lock: File, cache: LatestCache) -> Self {
        Self {
            path,
            _lock: lock,
            cache,
        }
    }
}

impl StoreKind {
    /// The store's directory; `None` in memory.
    pub(super) fn path(&self) -> Option<&Path> {
        self.disk().map(|disk| disk.path.as_path())
    }

    /// The directory's part of a RocksDB store.
    fn disk(&self) -> Option<&Disk> {
        match self {
            Self::Logged(Logged { disk, .. }) | Self::Unlogged { disk, .. } => Some(disk),
            Self::Memory { .. } => None,
        }
    }

    /// The latest-value cache: a RocksDB store's.
    pub(super) fn cache(&self) -> Option<&LatestCache> {
        self.disk().map(|disk| &disk.cache)
    }

    /// The write buffer: a store's without a write-ahead log, in a directory or in memory.
    pub(super) fn buffer(&self) -> Option<&WriteBuffer> {
        match self {
            Self::Logged(_) => None,
            Self::Unlogged { buffer, .. } | Self::Memory { buffer } => Some(buffer),
        }
    }

    /// [`StoreKind::buffer`], to change.
    pub(super) fn buffer_mut(&mut self) -> Option<&mut WriteBuffer> {
        match self {
            Self::Logged(_) => None,
            Self::Unlogged { buffer, .. } | Self::Memory { buffer } => Some(buffer),
        }
    }

    /// Frees the cache and the write buffer's memory now, keeping the kind (and the lock):
    /// for a store being dropped, before its backend closes.
    pub(super) fn free_memory(&mut self) {
        if let Some(buffer) = self.buffer_mut() {
            // The old buffer gives its charge back to the process's pool as it goes.
            *buffer = WriteBuffer::new(0);
        }
        match self {
            Self::Logged(Logged { disk, .. }) | Self::Unlogged { disk, .. } => {
                disk.cache = LatestCache::new(0, false);
            }
            Self::Memory { .. } => {}
        }
    }
}
