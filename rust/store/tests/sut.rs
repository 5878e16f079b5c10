//! A store under test on each backing, which can be closed and reopened: the property suites of
//! the store (`properties`, `restore`) and of scans (`crate::scan`) share it.

use crate::config::Tuning;
use crate::{RocksOptions, StoreConfig, VersionedStore};

/// What a store under test keeps its data in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    Memory,
    /// RocksDB with its write-ahead log: every call written through.
    Logged,
    /// RocksDB without it: calls gather in the write buffer, here a tiny one (written every few
    /// calls), and the caches of latest values and rows are tiny too (forget often).
    Buffered,
    /// RocksDB with its write-ahead log and no cache of latest values: every in-order put of a
    /// value takes the read-free path (docs/semantics.md §2.16) once the store holds a key.
    Pushing,
    /// [`Backing::Buffered`] without a cache of latest values: an in-order put of a key that
    /// is not in the write buffer takes the read-free path.
    PushingBuffered,
}

impl Backing {
    pub(crate) fn options(self) -> Option<RocksOptions> {
        match self {
            Self::Memory => None,
            Self::Logged => Some(RocksOptions::default()),
            Self::Buffered => Some(RocksOptions {
                wal: false,
                write_buffer_bytes: Some(2048),
                buffer_bytes: Some(512),
                latest_cache_bytes: Some(600),
                row_cache_bytes: Some(2048),
            }),
            Self::PushingBuffered => Some(RocksOptions {
                latest_cache_bytes: Some(0),
                buffer_bytes: Some(256),
                ..Self::Buffered.options()?
            }),
            Self::Pushing => Some(RocksOptions {
                latest_cache_bytes: Some(0),
                write_buffer_bytes: Some(4096),
                ..RocksOptions::default()
            }),
        }
    }
}

/// A store under test that can be closed and reopened (a no-op in memory).
pub(crate) struct Sut {
    store: Option<VersionedStore>,
    dir: Option<tempfile::TempDir>,
    config: StoreConfig,
    options: RocksOptions,
}

/// The thresholds of every store under test: [`Tuning::SMALL`], so that the property suites
/// meet batches across read-ahead windows, reclamations, cached rows and repaired rows at every
/// step, as the shipped thresholds would only in stores far larger than a case.
const TUNING: Tuning = Tuning::SMALL;

impl Sut {
    pub(crate) fn new(config: StoreConfig, backing: Backing) -> Self {
        match backing.options() {
            Some(options) => {
                let dir = tempfile::tempdir().expect("tempdir");
                let store =
                    VersionedStore::open_tuned(dir.path(), config, options, TUNING).expect("open");
                Self {
                    store: Some(store),
                    dir: Some(dir),
                    config,
                    options,
                }
            }
            None => Self {
                store: Some(VersionedStore::in_memory_tuned(config, TUNING)),
                dir: None,
                config,
                options: RocksOptions::default(),
            },
        }
    }

    pub(crate) fn store(&self) -> &VersionedStore {
        self.store.as_ref().expect("store is open")
    }

    pub(crate) fn store_mut(&mut self) -> &mut VersionedStore {
        self.store.as_mut().expect("store is open")
    }

    /// The store, closed by the caller; the `Sut` has none until it reopens.
    pub(crate) fn take(&mut self) -> VersionedStore {
        self.store.take().expect("store is open")
    }

    /// The store's directory (`None` in memory).
    pub(crate) fn path(&self) -> Option<std::path::PathBuf> {
        self.dir.as_ref().map(|dir| dir.path().to_owned())
    }

    /// Closes the store; [`Sut::reopen`] opens it again.
    pub(crate) fn close(&mut self) {
        if let Some(store) = self.store.take() {
            store.close().expect("close");
        }
    }

    pub(crate) fn reopen(&mut self) {
        if let Some(dir) = &self.dir {
            // Close first: the directory lock is held until the store is dropped.
            self.store = None;
            let store = VersionedStore::open_tuned(dir.path(), self.config, self.options, TUNING);
            self.store = Some(store.expect("reopen"));
        }
    }

    /// Hands the store over as a process that kept it open does to the next one: closed with
    /// its write buffer saved beside the directory, reopened, the buffer loaded. Stores without
    /// a write buffer are reopened.
    pub(crate) fn hand_off(&mut self) -> crate::Result<()> {
        let Some(path) = self.dir.as_ref().filter(|_| !self.options.wal) else {
            self.reopen();
            return Ok(());
        };
        let path = path.path().to_owned();
        let file = path.with_extension("buffer");
        let saved = self.take().close_keeping_buffer(&file)?;
        let mut store = VersionedStore::open_tuned(&path, self.config, self.options, TUNING)?;
        store.load_buffer(&file, saved)?;
        std::fs::remove_file(&file).map_err(crate::Error::io(&file))?;
        self.store = Some(store);
        Ok(())
    }

    /// Ends the process's hold on the store as a crash would, then reopens it. Only a store
    /// with its write-ahead log keeps every returned write through a crash; the others are
    /// closed normally (a crash loses a write buffer by design).
    pub(crate) fn crash(&mut self) {
        if self.options.wal && self.dir.is_some() {
            self.take().abandon();
        }
        self.reopen();
    }
}
