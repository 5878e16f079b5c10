//! The RocksDB backend: one RocksDB instance per store, all segments in its default column
//! family, told apart by the 8-byte segment prefix (Kafka's layout since KAFKA-14491 [19/N]).
//!
//! Tuning follows the access pattern. Point lookups of one row per (segment, key) dominate, so
//! SST files carry whole-key bloom filters and data blocks a hash index (the memtable has no bloom filter:
//! writes paid for it on every insert, and the latest-value cache spares most reads there). Batch reads are one sorted `MultiGet`; every read is pinned (no copy until
//! the caller copies what it returns). History rows grow by merge operands (row appends,
//! `docs/format.md`), which the merge operator applies at reads and compactions, so an in-order
//! write never reads or rewrites a row. Rows are compressed with LZ4. Segment expiry deletes
//! the dropped prefixes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, ColumnFamilyDescriptor, DB, DBCompressionType,
    DEFAULT_COLUMN_FAMILY_NAME, DataBlockIndexType, MergeOperands, Options, WriteBatch,
    WriteOptions,
};

use super::faults;
use super::snapshot::ScanSource;
use super::{
    Backend, RowRead, Usage, Visit, VisitEntry, VisitIndexed, VisitRow, VisitUntil, Write, WriteSet,
};
use crate::config::Tuning;
use crate::error::{Error, Result};
use crate::format::key::LATEST_SEGMENT;
use crate::format::key::{next_prefix, segment_of, segment_prefix};
use crate::format::{latest_value, segment_value::merge_appends};
use crate::ttl::LatestTtl;
use histories::LongHistories;
use row_cache::{DecodedRow, RowCache};

pub(crate) mod budget;
pub(crate) mod histories;
mod reclaim;
mod repair;
mod row_cache;
mod scan;

/// How a RocksDB store writes, and caps on its own memory.
///
/// A store's memory comes from the process's budget (`crate::memory`, set with
/// [`set_memory_limit`](crate::set_memory_limit)), shared with every other store of the
/// process. The caps here bound one store below what the budget would let it take; `None`
/// leaves it to the budget. Tests set small ones to reach buffer writes and cache evictions.
#[derive(Debug, Clone, Copy)]
pub struct RocksOptions {
    /// Write-ahead log on (the default): every returned write survives a process crash. The
    /// checkpointed mode turns it off because durability comes from the checkpoint instead.
    pub wal: bool,
    /// Size in bytes of the store's memtable (RocksDB's write buffer); by default half of the
    /// memtables' share of the budget, between 1 and 64 MiB.
    pub write_buffer_bytes: Option<usize>,
    /// Bound in bytes of the store's own write buffer when the write-ahead log is off: writes
    /// gather in memory (each key's last value, each row's appends together) until it is full,
    /// or the write buffers of the process are past their share, then go to RocksDB as one
    /// sorted batch. A larger one writes a key rewritten by every micro-batch once for several
    /// of them.
    pub buffer_bytes: Option<usize>,
    /// Bound in bytes of the store's cache of latest values (0 turns it off).
    pub latest_cache_bytes: Option<usize>,
    /// Bound in bytes of the store's cache of long history rows for single as-of reads (0
    /// turns it off).
    pub row_cache_bytes: Option<usize>,
}

impl Default for RocksOptions {
    fn default() -> Self {
        Self {
            wal: true,
            write_buffer_bytes: None,
            buffer_bytes: None,
            latest_cache_bytes: None,
            row_cache_bytes: None,
        }
    }
}

impl RocksOptions {
    /// These options with the write-ahead log on or off.
    #[must_use]
    pub fn with_wal(self, wal: bool) -> Self {
        Self { wal, ..self }
    }

    /// Options that cap the store's own memory at about `bytes` (within the process's budget,
    /// which still bounds it first): half for the write buffer, three eighths for the cache of
    /// latest values, an eighth for the cache of long history rows.
    #[must_use]
    pub fn with_memory_cap(self, bytes: usize) -> Self {
        Self {
            buffer_bytes: Some(bytes / 2),
            latest_cache_bytes: Some(bytes / 8 * 3),
            row_cache_bytes: Some(bytes / 8),
            ..self
        }
    }
}

pub(crate) struct RocksBackend {
    /// Shared with the threads of open scans (`scan`), which the store ends before it closes,
    /// and of a running reclamation, which the backend ends when it drops.
    db: Arc<DB>,
    /// Drops expired latest values, in a store with a latest TTL.
    reclaimer: Option<reclaim::Reclaimer>,
    path: PathBuf,
    write_options: WriteOptions,
    /// Read repairs' writes: no log (they change no state, so a crash may lose them) and never
    /// waiting on a write stall (a repair that would is skipped: the read has its answer).
    repair_options: WriteOptions,
    repairs: repair::Repairs,
    rows: RowCache,
    /// Whether a read that merged a row writes it back at its first merge whatever the
    /// store's size (`Tuning`).
    repair_at_first_merge: bool,
    /// Latest-value entries the merge operator found with a long unsettled history.
    long_histories: Arc<LongHistories>,
    /// The store's hold on the process's block cache; dropped after `db` (fields drop in
    /// order), so the cache is emptied only once no store can read it.
    _budget: budget::Hold,
}

/// The name RocksDB records for the merge operator; a store written with operands cannot be
/// read without it. Its name is the one format 2 gave it: format 5 added pushes under latest
/// values (`latest_value::merge`), which an older build never meets (it refuses format 5).
const MERGE_OPERATOR: &str = "verstore.row_append.v2";

/// The merge operator: pushes onto a latest-value entry (noting the entries whose unsettled
/// history grew long), row appends onto a history row. Never fails (see each).
fn full_merge(
    histories: &LongHistories,
    key: &[u8],
    base: Option<&[u8]>,
    operands: &MergeOperands,
) -> Vec<u8> {
    let operands: Vec<&[u8]> = operands.iter().collect();
    MERGED_BY_READS.with(|keys| {
        if let Ok(mut keys) = keys.try_borrow_mut()
            && let Some(keys) = keys.as_mut()
        {
            keys.push(key.to_vec());
        }
    });
    if key.starts_with(&segment_prefix(LATEST_SEGMENT)) {
        let merged = latest_value::merge(base, operands.iter().copied());
        histories.note(key, merged.history_len);
        return merged.bytes;
    }
    merge_appends(base, operands.iter().copied())
}

thread_local! {
    /// Keys whose rows a read on this thread merged from appends (`None`: not reading).
    /// Reads merge in the calling thread; flushes and compactions run on RocksDB's own.
    static MERGED_BY_READS: std::cell::RefCell<Option<Vec<Vec<u8>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs a read, collecting the keys of the rows its merges produced.
fn collecting_merges<T>(read: impl FnOnce() -> T) -> (T, Vec<Vec<u8>>) {
    MERGED_BY_READS.with(|keys| *keys.borrow_mut() = Some(Vec::new()));
    let out = read();
    let merged = MERGED_BY_READS.with(|keys| keys.borrow_mut().take().unwrap_or_default());
    (out, merged)
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "RocksDB's merge callback signature; appends never fail (see merge_appends)"
)]
fn partial_merge(_key: &[u8], _base: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    // Operands are concatenations of appends (or of pushes), so a concatenation is an operand.
    Some(operands.iter().flatten().copied().collect())
}

/// The RocksDB options of a store (also used by tests that open a store's files directly):
/// its memtable size, and the process's block cache and memtable bound from `budget`.
#[cfg(test)]
pub(crate) fn db_options(budget: &budget::Hold, write_buffer_bytes: usize) -> Options {
    options_noting(budget, write_buffer_bytes, Arc::default())
}

/// SST files' layout: filters, a hashed data block index, index and filter blocks in the
/// budget's block cache.
fn table_options(budget: &budget::Hold) -> BlockBasedOptions {
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_whole_key_filtering(true);
    table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
    // Index and filter blocks live in the block cache, so that the budget bounds them: an SST
    // file's blocks of 4 million keys take some 20 MB that nothing bounded before. They are
    // partitioned, so that no one block outgrows a shard of the cache (a full filter of a large
    // file did, and was read from disk again at every get: 150 µs each at 1 million keys); the
    // top level of each file's index and filter stays pinned, partitions come and go.
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_metadata_block_size(4096);
    table.set_pin_top_level_index_and_filter(true);
    // Level 0's files each cover the whole key range, so a read probes every one of them: their
    // index and filter partitions stay pinned (still charged to the cache) instead of being
    // looked up in the cache at each probe (first gets of a fresh store of 100 000 keys: 17.3 µs
    // of CPU a get against 19.4-19.7).
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_optimize_filters_for_memory(true);
    table.set_block_cache(&budget.cache);
    table
}

/// [`db_options`] whose merge operator notes long unsettled histories in `histories`.
fn options_noting(
    budget: &budget::Hold,
    write_buffer_bytes: usize,
    histories: Arc<LongHistories>,
) -> Options {
    let table = table_options(budget);
    let mut options = Options::default();
    options.create_if_missing(true);
    options.set_block_based_table_factory(&table);
    options.set_write_buffer_manager(&budget.memtables);
    options.set_compression_type(DBCompressionType::Lz4);
    options.set_max_background_jobs(2);
    // Bounded read amplification. A key's latest value is a base and the pushes written onto
    // it since (`format/latest_value.rs`), so a read visits every level-0 file (each covers
    // the whole key range) and every level that holds a piece of it; a burst of writes that
    // outpaces compaction piled up 11 level-0 files at 4 million keys, and the first reads of
    // the reopened store probed 18 files each, at a third of the rate of a compacted one.
    // Level 0 is compacted 6 files at a time (each compaction rewrites the overlapping base
    // level: fewer, larger ones write less), and writes slow down from 10 files, stop at 20,
    // so that compaction keeps up (measured at 4 million keys: reads after the burst 1.7-2.3
    // times as fast; puts 0.75 of unbounded, still 0.65 of a raw WriteBatch).
    options.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER);
    options.set_level_zero_slowdown_writes_trigger(L0_SLOWDOWN);
    options.set_level_zero_stop_writes_trigger(2 * L0_SLOWDOWN);
    // A compaction of level 0 (the only one RocksDB splits) runs as two halves of the key range
    // on two threads: it rewrites the whole base level, and while it runs level 0 fills and
    // writes slow down; the writer waiting on it leaves a core idle.
    options.set_max_subcompactions(L0_SUBCOMPACTIONS);
    options.set_write_buffer_size(write_buffer_bytes);
    let full = move |key: &[u8], base: Option<&[u8]>, operands: &MergeOperands| {
        Some(full_merge(&histories, key, base, operands))
    };
    options.set_merge_operator(MERGE_OPERATOR, full, partial_merge);
    // Every open starts a new info log and renames the old one: a partition store opened once
    // per micro-batch would otherwise pile up RocksDB's default of 1,000 `LOG.old.*` files.
    options.set_keep_log_file_num(KEPT_INFO_LOGS);
    // An open loads every SST file's table reader on this many threads, started anew at each
    // open (RocksDB's default is 16). A partition store opens once per micro-batch, mostly
    // with few files, and starting the threads cost more than they saved: an open of a store
    // of about 8 files took 4.4-4.5 ms with 16, 3.8-4.1 ms with 2 and 3.7 ms with 1. Two keep
    // some parallelism for stores of many files.
    options.set_max_file_opening_threads(FILE_OPENING_THREADS);
    options
}

/// Keys of one `MultiGet` (`RocksBackend::multi_get`): sorted rounds this large still share
/// blocks and index reads, and pin at most this many blocks (4 MiB of 4 KiB blocks).
const MULTI_GET_KEYS: usize = 1024;

/// Level-0 files that start a compaction into the base level (`db_options`).
const L0_COMPACTION_TRIGGER: i32 = 6;
/// Level-0 files from which writes slow down (and at twice as many, stop) while compaction
/// catches up (`db_options`).
const L0_SLOWDOWN: i32 = 10;

/// Threads of one compaction of level 0 (`db_options`).
const L0_SUBCOMPACTIONS: u32 = 2;

/// Threads that load table readers at open (`db_options`).
const FILE_OPENING_THREADS: i32 = 2;

/// Old RocksDB info logs kept beside the current one.
const KEPT_INFO_LOGS: usize = 2;

impl RocksBackend {
    pub(crate) fn open(
        path: &Path,
        options: RocksOptions,
        ttl: Option<LatestTtl>,
        tuning: &Tuning,
    ) -> Result<Self> {
        let hold = budget::Hold::take();
        let memtable = options
            .write_buffer_bytes
            .unwrap_or_else(budget::memtable_bytes);
        let long_histories = Arc::new(LongHistories::default());
        let mut db_options = options_noting(&hold, memtable, Arc::clone(&long_histories));
        let reclaimer = ttl.map(|ttl| reclaim::Reclaimer::install(&mut db_options, ttl));
        // Opened by descriptor so that the default column family has a handle (`MultiGet`
        // takes one); its options are the store's.
        let default_cf =
            ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, db_options.clone());
        let db = DB::open_cf_descriptors(&db_options, path, [default_cf])
            .map_err(|source| rocks_error(path, source))?;
        let mut write_options = WriteOptions::default();
        write_options.disable_wal(!options.wal);
        Ok(Self {
            db: Arc::new(db),
            reclaimer,
            path: path.to_owned(),
            write_options,
            repair_options: repair_write_options(),
            repairs: repair::Repairs::new(),
            rows: RowCache::new(
                options.row_cache_bytes.unwrap_or(usize::MAX),
                tuning.min_cached_row_bytes,
            ),
            repair_at_first_merge: tuning.repair_at_first_merge,
            long_histories,
            _budget: hold,
        })
    }

    /// Deletes segments `[from, to)`: key by key when they hold fewer than
    /// `POINT_DELETE_LIMIT` keys (the common case with short intervals), else with one range
    /// deletion. A range tombstone stays in the memtable, costing every read there, until it is
    /// flushed and compacted away.
    fn drop_segments(&self, batch: &mut WriteBatch, from: i64, to: i64) -> Result<()> {
        const POINT_DELETE_LIMIT: usize = 256;
        let (start, end) = (segment_prefix(from), segment_prefix(to));
        let mut keys = Vec::new();
        let mut iter = self.db.raw_iterator();
        iter.seek(start);
        while let Some(key) = iter.key() {
            if key >= &end[..] || keys.len() == POINT_DELETE_LIMIT {
                break;
            }
            keys.push(key.to_vec());
            iter.next();
        }
        iter.status().map_err(|e| self.storage_error(e))?;
        if keys.len() < POINT_DELETE_LIMIT {
            for key in &keys {
                batch.delete(key);
            }
        } else {
            batch.delete_range(start, end);
        }
        Ok(())
    }

    /// One round of [`Backend::multi_get`]: one sorted `MultiGet`, merged rows repaired.
    fn multi_get_round(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()> {
        let cf = self.db.cf_handle(DEFAULT_COLUMN_FAMILY_NAME);
        let Some(cf) = cf else {
            return Err(Error::corrupt(self.location(), "no default column family"));
        };
        let (values, mut merged) =
            collecting_merges(|| self.db.batched_multi_get_cf(cf, keys.iter().copied(), true));
        if !merged.is_empty() {
            // Sorted for a binary search per key: a large batch can merge many rows.
            merged.sort_unstable();
            let repaired = keys.iter().zip(&values).filter_map(|(key, value)| {
                let value = value.as_ref().ok()?.as_deref()?;
                let was_merged = merged.binary_search_by(|m| m.as_slice().cmp(key)).is_ok();
                (was_merged && self.repairs(key)).then_some((*key, value))
            });
            self.read_repair(repaired);
        }
        for (i, value) in values.into_iter().enumerate() {
            let value = value.map_err(|e| self.storage_error(e))?;
            visit(i, value.as_deref())?;
        }
        Ok(())
    }

    /// Whether a read that merged the row at `key` writes it back (`repair.rs`), at every
    /// merge with `Tuning::repair_at_first_merge`.
    fn repairs(&self, key: &[u8]) -> bool {
        self.repair_at_first_merge || self.repairs.at_merge(key, || self.fits_in_cache())
    }

    /// Whether the store's files fit in its share of the block cache.
    fn fits_in_cache(&self) -> bool {
        let files = self.db.property_int_value("rocksdb.total-sst-files-size");
        let files = files.ok().flatten().unwrap_or(u64::MAX);
        files <= budget::cache_share_per_store() as u64
    }

    /// Writes rows that a read had to merge from appends back whole: every later read of them
    /// would merge again and search every level below for a base (RocksDB keeps merge results
    /// nowhere until a compaction). The rows are what the store already holds, so this changes
    /// no state; a failure only leaves the appends in place, and the read that triggered it
    /// has its answer. The writes are `repair_options`': unlogged, and never waiting on a
    /// write stall (a repair that would wait is dropped), so a read never waits on compaction.
    fn read_repair<'k>(&self, rows: impl Iterator<Item = (&'k [u8], &'k [u8])>) {
        let mut batch = WriteBatch::default();
        for (key, value) in rows {
            batch.put(key, value);
        }
        if !batch.is_empty() {
            let _ = self.db.write_opt(batch, &self.repair_options);
        }
    }

    fn storage_error(&self, source: rocksdb::Error) -> Error {
        rocks_error(&self.path, source)
    }
}

/// [`RocksBackend::repair_options`].
fn repair_write_options() -> WriteOptions {
    let mut options = WriteOptions::default();
    options.disable_wal(true);
    options.set_no_slowdown(true);
    options
}

/// RocksDB's error as ours. Its `Corruption` status (a checksum or size mismatch, a file the
/// MANIFEST names that is missing) is [`Error::Corrupt`], so that a caller holding another
/// copy of the data (a checkpoint) can tell damaged files from a failing disk and rebuild.
pub(crate) fn rocks_error(path: &Path, source: rocksdb::Error) -> Error {
    if source.kind() == rocksdb::ErrorKind::Corruption {
        return Error::Corrupt {
            location: format!("the RocksDB files of {}", path.display()),
            detail: source.into_string(),
        };
    }
    Error::Storage {
        path: path.to_owned(),
        source,
    }
}

impl Backend for RocksBackend {
    fn get_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let (value, merged) = collecting_merges(|| self.db.get_pinned(key));
        let value = value.map_err(|e| self.storage_error(e))?;
        if let (false, Some(value)) = (merged.is_empty(), value.as_deref())
            && self.repairs(key)
        {
            self.read_repair([(key, value)].into_iter());
        }
        visit(value.as_deref())
    }

    /// Long rows come from the row cache, or go into it (`row_cache.rs`).
    fn lookup_row(&self, read: &RowRead<'_>, visit: &mut VisitRow<'_>) -> Result<()> {
        if let Some(row) = self.rows.get(read.key) {
            return visit(Some(row.lookup(read.t)));
        }
        self.get_with(read.key, &mut |bytes| match bytes {
            Some(bytes) if self.rows.wants(bytes) => {
                let row = Arc::new(DecodedRow::decode(bytes, read.location)?);
                self.rows.insert(read.key, Arc::clone(&row));
                visit(Some(row.lookup(read.t)))
            }
            bytes => visit(read.lookup(bytes)?),
        })
    }

    /// In rounds of [`MULTI_GET_KEYS`]: every value a `MultiGet` returns pins its block in the
    /// cache until it is dropped, and a round of 65 536 random keys pinned some 200 MB of blocks
    /// past the cache's capacity.
    fn multi_get(&self, keys: &[&[u8]], visit: &mut VisitIndexed<'_>) -> Result<()> {
        for (round, keys) in keys.chunks(MULTI_GET_KEYS).enumerate() {
            let first = round * MULTI_GET_KEYS;
            self.multi_get_round(keys, &mut |i, value| visit(first + i, value))?;
        }
        Ok(())
    }

    fn is_empty_of(&self, segment: i64) -> Result<bool> {
        let mut iter = self.db.raw_iterator();
        iter.seek(segment_prefix(segment));
        let empty = iter
            .key()
            .is_none_or(|key| segment_of(key) != Some(segment));
        iter.status().map_err(|e| self.storage_error(e))?;
        Ok(empty)
    }

    fn history_segments(&self) -> Result<Vec<i64>> {
        // One seek per segment: jump to the next prefix after each one found.
        let mut ids = Vec::new();
        let mut iter = self.db.raw_iterator();
        iter.seek(segment_prefix(0));
        while let Some(key) = iter.key() {
            match segment_of(key) {
                Some(id) if id >= 0 => {
                    ids.push(id);
                    let Some(next) = id.checked_add(1) else { break };
                    iter.seek(segment_prefix(next));
                }
                _ => break,
            }
        }
        iter.status().map_err(|e| self.storage_error(e))?;
        Ok(ids)
    }

    fn write(&mut self, batch: &mut WriteSet) -> Result<()> {
        let bytes: usize = batch
            .writes
            .iter()
            .map(|(key, write)| {
                key.len()
                    + 16
                    + match write {
                        Write::Put(v) | Write::Append(v) => v.len(),
                        Write::Delete => 0,
                    }
            })
            .sum();
        let mut rocks_batch = WriteBatch::with_capacity_bytes(bytes + 64);
        if let Some((from, to)) = batch.drop_segments {
            self.drop_segments(&mut rocks_batch, from, to)?;
        }
        for (key, write) in &batch.writes {
            match write {
                Write::Put(value) => rocks_batch.put(key, value),
                Write::Delete => rocks_batch.delete(key),
                Write::Append(operands) => rocks_batch.merge(key, operands),
            }
        }
        let written = faults::check_write(&self.path).and_then(|()| {
            self.db
                .write_opt(rocks_batch, &self.write_options)
                .map_err(|e| self.storage_error(e))
        });
        match written {
            Ok(()) => self.rows.forget_written(
                batch.writes.iter().map(|(key, _)| key.as_slice()),
                batch.drop_segments.is_some(),
            ),
            // Whether any of it was applied is not known.
            Err(_) => self.rows.clear(),
        }
        written
    }

    fn release_caches(&self) {
        self.rows.clear();
    }

    fn flush(&self) -> Result<()> {
        faults::check_write(&self.path)?;
        self.db.flush().map_err(|e| self.storage_error(e))
    }

    fn memtable_bytes(&self) -> Result<u64> {
        self.db
            .property_int_value("rocksdb.cur-size-all-mem-tables")
            .map(Option::unwrap_or_default)
            .map_err(|e| self.storage_error(e))
    }

    fn location(&self) -> String {
        format!("store at {}", self.path.display())
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        faults::check_write(&self.path)?;
        let checkpoint =
            rocksdb::checkpoint::Checkpoint::new(&self.db).map_err(|e| self.storage_error(e))?;
        checkpoint
            .create_checkpoint(dir)
            .map_err(|e| self.storage_error(e))
    }

    fn scan_source(&self) -> Box<dyn ScanSource> {
        Box::new(scan::Source::new(Arc::clone(&self.db), self.path.clone()))
    }

    fn count_keys(&self, segment: i64) -> Result<u64> {
        let mut count = 0;
        self.visit_segment(segment, &mut |_, _| {
            count += 1;
            Ok(())
        })?;
        Ok(count)
    }

    fn visit_segment(&self, segment: i64, visit: &mut VisitEntry<'_>) -> Result<()> {
        // A pass over a whole segment would evict what the reads keep in the block cache.
        let mut options = rocksdb::ReadOptions::default();
        options.fill_cache(false);
        if let Some(next) = next_prefix(segment) {
            options.set_iterate_upper_bound(next);
        }
        let mut iter = self.db.raw_iterator_opt(options);
        iter.seek(segment_prefix(segment));
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            visit(key, value)?;
            iter.next();
        }
        iter.status().map_err(|e| self.storage_error(e))
    }

    fn visit_segment_from(
        &self,
        segment: i64,
        from: Option<&[u8]>,
        visit: &mut VisitUntil<'_>,
    ) -> Result<()> {
        let mut options = rocksdb::ReadOptions::default();
        options.fill_cache(false);
        if let Some(next) = next_prefix(segment) {
            options.set_iterate_upper_bound(next);
        }
        let mut iter = self.db.raw_iterator_opt(options);
        match from {
            Some(from) => iter.seek(from),
            None => iter.seek(segment_prefix(segment)),
        }
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            if !visit(key, value)? {
                return Ok(());
            }
            iter.next();
        }
        iter.status().map_err(|e| self.storage_error(e))
    }

    fn take_long_histories(&self) -> Vec<Vec<u8>> {
        self.long_histories.take()
    }

    fn usage(&self) -> Result<Usage> {
        let property = |name: &str| {
            self.db
                .property_int_value(name)
                .map(Option::unwrap_or_default)
                .map_err(|e| self.storage_error(e))
        };
        // The write-ahead log has no property: its files are the `*.log` ones (a few).
        let mut wal_bytes = 0;
        let entries = std::fs::read_dir(&self.path).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                wal_bytes += entry.metadata().map_or(0, |m| m.len());
            }
        }
        Ok(Usage {
            exact: None,
            keys_estimate: property("rocksdb.estimate-num-keys")?,
            disk_bytes: property("rocksdb.total-sst-files-size")? + wal_bytes,
            memtable_bytes: self.memtable_bytes()?,
        })
    }

    fn set_reclaim_horizon(&mut self, horizon: i64) {
        if let Some(reclaimer) = &self.reclaimer {
            reclaimer.set_horizon(horizon);
        }
    }

    fn reclaim_latest(&mut self, wait: bool) -> bool {
        self.reclaimer
            .as_mut()
            .is_some_and(|reclaimer| reclaimer.reclaim(&self.db, wait))
    }

    #[cfg(test)]
    fn await_reclamation(&mut self) {
        if let Some(reclaimer) = &mut self.reclaimer {
            reclaimer.join();
        }
    }
}

impl Drop for RocksBackend {
    /// Ends a running reclamation, whose compaction would otherwise hold the close up.
    fn drop(&mut self) {
        if let Some(reclaimer) = &mut self.reclaimer {
            reclaimer.end(&self.db);
        }
    }
}
