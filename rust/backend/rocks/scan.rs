//! Scans of the RocksDB backend: a thread that owns a share of the database takes a RocksDB
//! snapshot and reads every segment of the scan through its own iterator on that snapshot.
//!
//! A RocksDB snapshot and its iterators borrow the database, so they cannot outlive a call or
//! move into a Python object; they live on the scan's thread instead, which owns an `Arc` of the
//! database for as long as it runs (the store ends its scans before it closes). Iterators do not
//! fill the block cache: a scan of the whole store would otherwise evict the working set of
//! every store in the process.

use std::path::PathBuf;
use std::sync::Arc;

use rocksdb::{DB, DBRawIteratorWithThreadMode, ReadOptions};

use crate::backend::snapshot::{Cursor, ScanSource, SnapshotReader};
use crate::error::Result;

/// A database to scan, moved to the scan's thread.
pub(crate) struct Source {
    db: Arc<DB>,
    path: PathBuf,
}

impl Source {
    pub(super) fn new(db: Arc<DB>, path: PathBuf) -> Self {
        Self { db, path }
    }
}

impl ScanSource for Source {
    fn run(self: Box<Self>, reader: Box<dyn SnapshotReader>) {
        let snapshot = self.db.snapshot();
        reader.started();
        reader.read(&mut |range| {
            let mut options = ReadOptions::default();
            options.fill_cache(false);
            options.set_iterate_lower_bound(range.lower.clone());
            if let Some(upper) = &range.upper {
                options.set_iterate_upper_bound(upper.clone());
            }
            let mut iter = snapshot.raw_iterator_opt(options);
            iter.seek(&range.lower);
            let cursor = RocksCursor {
                iter,
                path: &self.path,
            };
            cursor.check()?;
            Ok(Box::new(cursor))
        });
    }
}

struct RocksCursor<'a> {
    iter: DBRawIteratorWithThreadMode<'a, DB>,
    path: &'a PathBuf,
}

impl RocksCursor<'_> {
    fn check(&self) -> Result<()> {
        if self.iter.valid() {
            return Ok(());
        }
        self.iter
            .status()
            .map_err(|source| super::rocks_error(self.path, source))
    }
}

impl Cursor for RocksCursor<'_> {
    fn key(&self) -> Option<&[u8]> {
        self.iter.key()
    }

    fn value(&self) -> Option<&[u8]> {
        self.iter.value()
    }

    fn advance(&mut self) -> Result<()> {
        self.iter.next();
        self.check()
    }
}
