//! Reads of a whole store: scans (`crate::scan`) and statistics (`crate::stats`).

use super::VersionedStore;
use super::kind::StoreKind;
use crate::backend::{Write, WriteSet};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, META_SEGMENT, storage_key};
use crate::format::meta;
use crate::overlay::WriteBuffer;
use crate::scan::key_range::KeyRange;
use crate::scan::{self, Kind, Scan, ScanVersions};
use crate::state::KeyCounts;
use crate::stats::StoreStats;

impl VersionedStore {
    /// Each key's record valid at `as_of` (`None`: its newest version), as
    /// [`VersionedStore::get_as_of`] / [`VersionedStore::get`] return it, for the keys in
    /// `keys` in ascending order; keys without a record are left out. Batches hold at most
    /// `batch_rows` rows. The scan sees the store as it is now, whatever is written later; a
    /// store without a write-ahead log writes its write buffer to RocksDB first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `batch_rows == 0`; storage errors of the buffer's write.
    pub fn scan(&mut self, keys: KeyRange, as_of: Option<i64>, batch_rows: usize) -> Result<Scan> {
        self.start_scan(keys, Kind::AsOf(as_of), batch_rows)
    }

    /// Every version of the keys in `keys` that `query` selects, as
    /// [`VersionedStore::versions`] returns them (and, with `query.tombstones`, the tombstones
    /// still stored, as rows with a null `value`): keys ascending, each key's versions in
    /// `query.order`. Consistent and bounded as [`VersionedStore::scan`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `from > to` or `batch_rows == 0`; storage errors.
    pub fn scan_versions(
        &mut self,
        keys: KeyRange,
        query: ScanVersions,
        batch_rows: usize,
    ) -> Result<Scan> {
        let (from, to) = super::time_range(query.from, query.to)?;
        let kind = Kind::Versions {
            from,
            to,
            order: query.order,
            tombstones: query.tombstones,
        };
        self.start_scan(keys, kind, batch_rows)
    }

    fn start_scan(&mut self, keys: KeyRange, kind: Kind, batch_rows: usize) -> Result<Scan> {
        if batch_rows == 0 {
            return Err(Error::invalid(
                "batch_rows",
                "batch_rows must be >= 1, got 0",
            ));
        }
        // The snapshot must hold what reads see now, the write buffer included.
        self.write_buffer()?;
        scan::start(
            self.backend.as_ref(),
            &self.state,
            &self.scans,
            keys,
            kind,
            batch_rows,
        )
    }

    /// The store's size and memory use; cheap (RocksDB properties and counters kept by the
    /// store), meant to be read after every micro-batch.
    ///
    /// An in-memory store's counts are exact: its write buffer is written to its maps first.
    ///
    /// # Errors
    /// Storage errors reading RocksDB's properties or the directory.
    pub fn stats(&mut self) -> Result<StoreStats> {
        self.check_usable()?;
        if let StoreKind::Memory { .. } = self.kind {
            self.write_buffer()?;
        }
        Ok(StoreStats::new(
            self.backend.usage()?,
            self.state.key_counts(),
            self.state.segments.len(),
            self.kind.buffer().map_or(0, WriteBuffer::bytes),
            self.state.stream_time,
        )
        .with_latest_buckets(self.state.latest_buckets.as_ref()))
    }

    /// Loads the persistent store's count of latest-value entries; a store written before the
    /// count existed is counted once and the count recorded.
    pub(super) fn load_latest_keys(&mut self) -> Result<()> {
        let key = storage_key(META_SEGMENT, meta::LATEST_KEYS_KEY);
        let counts = if let Some(bytes) = self.backend.get(&key)? {
            meta::decode_key_counts(&bytes)?
        } else {
            let counts = KeyCounts {
                latest_keys: self.backend.count_keys(LATEST_SEGMENT)?,
                unsettled_puts: 0,
            };
            self.backend.write(&mut WriteSet {
                drop_segments: None,
                writes: vec![(key, Write::Put(meta::encode_key_counts(counts)))],
            })?;
            counts
        };
        self.state.latest_keys = Some(counts.latest_keys);
        self.state.unsettled_puts = counts.unsettled_puts;
        Ok(())
    }
}
