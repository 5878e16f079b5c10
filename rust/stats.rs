//! Store statistics: the figures a stream processor reports per micro-batch and partition
//! (state size, disk and memory use), cheap enough to read after every batch.
//!
//! `latest_keys` is exact while `unsettled_puts` is 0: a put on the read-free path (docs/
//! semantics.md §2.16) cannot tell a new key from an existing one, so a key it creates is
//! counted only once the store is settled (`VersionedStore::settle`); until then the count is
//! low by at most `unsettled_puts`. A persistent store keeps the count in its metadata (`format.md`):
//! without a write-ahead log in the same atomic write as the entries it creates or removes (the
//! write buffer's), with one deferred to the next flush or close and recomputed after a crash
//! (`store/metadata.rs`); reading it costs nothing; a store written by an older build has no count and is counted
//! once when opened. In memory the latest-value map knows its size. `history_rows` is exact in
//! memory and an estimate on RocksDB: its estimate of all keys (`rocksdb.estimate-num-keys`,
//! which counts overwritten keys and row appends still in memtables or not yet compacted) less
//! the latest-value entries and the metadata; rows still in the write buffer are not in it. The
//! other figures are RocksDB properties and file sizes, or the store's own bookkeeping.

/// Metadata entries of a store (format version, configuration, stream time, latest-key count).
const META_ENTRIES: u64 = 4;

/// A store's size and memory use at one moment (see [`VersionedStore::stats`](crate::VersionedStore::stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Keys whose newest version is a value (exact while `unsettled_puts` is 0, else at most
    /// that many too few); with a latest TTL, whose newest version is a live value (exact to
    /// one time bucket of the TTL: `crate::ttl`).
    pub latest_keys: u64,
    /// Read-free puts since `latest_keys` was last exact (0 in memory and with a latest TTL).
    pub unsettled_puts: u64,
    /// History rows: one per key and live segment holding versions of it (exact in memory, an
    /// estimate on RocksDB).
    pub history_rows: u64,
    /// Live history segments.
    pub live_segments: u64,
    /// SST and write-ahead-log files of the store (0 in memory).
    pub disk_bytes: u64,
    /// RocksDB's active and unflushed memtables (0 in memory).
    pub memtable_bytes: u64,
    /// The write buffer of a store without a write-ahead log (0 otherwise).
    pub write_buffer_bytes: u64,
    /// Largest timestamp of any accepted write, -1 before the first.
    pub observed_stream_time: i64,
    /// Keys whose newest value the latest TTL expired since the store opened (counted when
    /// their time bucket wholly expired; 0 without a TTL).
    pub ttl_expired_keys: u64,
    /// Reclamations of expired latest values started since the store opened (0 without a TTL).
    pub ttl_reclaims: u64,
}

impl StoreStats {
    /// The statistics from what the backend reports and the store's own counts.
    pub(crate) fn new(
        usage: crate::backend::Usage,
        counts: Option<crate::state::KeyCounts>,
        live_segments: usize,
        write_buffer_bytes: usize,
        observed_stream_time: i64,
    ) -> Self {
        let counts = counts.unwrap_or_default();
        let (latest_keys, history_rows) = usage.exact.unwrap_or_else(|| {
            let latest = counts.latest_keys;
            let history = usage.keys_estimate.saturating_sub(latest + META_ENTRIES);
            (latest, history)
        });
        Self {
            latest_keys,
            unsettled_puts: counts.unsettled_puts,
            history_rows,
            live_segments: live_segments as u64,
            disk_bytes: usage.disk_bytes,
            memtable_bytes: usage.memtable_bytes,
            write_buffer_bytes: write_buffer_bytes as u64,
            observed_stream_time,
            ttl_expired_keys: 0,
            ttl_reclaims: 0,
        }
    }

    /// With a latest TTL: the live keys (exact to one time bucket) instead of the entries
    /// stored, and the TTL's counts.
    pub(crate) fn with_latest_buckets(self, buckets: Option<&crate::ttl::LatestBuckets>) -> Self {
        let Some(buckets) = buckets else {
            return self;
        };
        Self {
            latest_keys: buckets.live_keys(),
            ttl_expired_keys: buckets.expired,
            ttl_reclaims: buckets.reclaims,
            ..self
        }
    }
}
