//! Dropping expired latest values in bulk (docs/semantics.md §2.15): a compaction filter on the
//! latest-value range, and a manual compaction of that range on a thread of its own when the
//! store finds enough entries reclaimable.
//!
//! The filter drops a latest value whose whole time bucket expired at or below the *durable
//! horizon*: `ST - R` of a stream time that storage holds durably (`Reclaimer::set_horizon`).
//! Such an entry ends at or below every horizon a read of this store, or of the store a crash
//! leaves, can ask about exactly, so dropping it changes no answer. RocksDB applies compaction
//! filters to data that snapshots still see, so the store holds the horizon back while a scan
//! is open. A removed value becomes a deletion (RocksDB's `kRemove`), so an older value of the
//! key in a lower level does not resurface.
//!
//! In leveled compaction, files of keys nobody writes again (order ids, session ids) are never
//! compacted on their own: that is why a reclamation compacts the latest range by hand, to the
//! bottom level, while writes and other compactions go on. At most one runs at a time; dropping
//! the store ends it (`cancel_all_background_work`) rather than waiting for it.

use std::ffi::CStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread::JoinHandle;

use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::{BottommostLevelCompaction, CompactOptions, DB, Options};

use crate::format::key::{LATEST_SEGMENT, next_prefix, segment_prefix};
use crate::format::latest_value;
use crate::ttl::LatestTtl;

/// The name RocksDB records for the filter.
const FILTER_NAME: &CStr = c"verstore.latest_ttl.v1";

/// A store's reclamation: the durable horizon its filter reads, and the running compaction.
pub(crate) struct Reclaimer {
    horizon: Arc<AtomicI64>,
    running: Option<JoinHandle<()>>,
}

impl Reclaimer {
    /// Installs the filter of `ttl` in `options`; nothing is dropped before the first horizon.
    pub(crate) fn install(options: &mut Options, ttl: LatestTtl) -> Self {
        let horizon = Arc::new(AtomicI64::new(i64::MIN));
        options.set_compaction_filter_factory(Factory {
            ttl,
            horizon: Arc::clone(&horizon),
        });
        Self {
            horizon,
            running: None,
        }
    }

    /// The durable horizon moved to `horizon` (it never goes back).
    pub(crate) fn set_horizon(&self, horizon: i64) {
        self.horizon.fetch_max(horizon, Ordering::Relaxed);
    }

    /// Compacts the latest-value range: on this thread when `wait`, else on a thread of its
    /// own unless one still runs. Returns whether it started.
    pub(crate) fn reclaim(&mut self, db: &Arc<DB>, wait: bool) -> bool {
        if !wait && self.running.as_ref().is_some_and(|r| !r.is_finished()) {
            return false;
        }
        self.join();
        if wait {
            compact_latest(db);
            return true;
        }
        let db = Arc::clone(db);
        self.running = std::thread::Builder::new()
            .name("verstore-reclaim".to_owned())
            .spawn(move || compact_latest(&db))
            .ok();
        self.running.is_some()
    }

    /// Ends a running reclamation, before the database closes.
    pub(crate) fn end(&mut self, db: &DB) {
        if self.running.as_ref().is_some_and(|r| !r.is_finished()) {
            db.cancel_all_background_work(true);
        }
        self.join();
    }

    /// Waits for a running reclamation to end.
    pub(crate) fn join(&mut self) {
        if let Some(running) = self.running.take() {
            // The thread only compacts; a panic there is RocksDB's, and the data stays.
            let _ = running.join();
        }
    }
}

/// A manual compaction of the latest-value range down to the bottom level, where the filter
/// drops what is reclaimable. Its failure leaves the entries: the next reclamation tries again.
fn compact_latest(db: &DB) {
    let mut options = CompactOptions::default();
    options.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
    options.set_exclusive_manual_compaction(false);
    let start = segment_prefix(LATEST_SEGMENT);
    db.compact_range_opt(Some(start), next_prefix(LATEST_SEGMENT), &options);
}

struct Factory {
    ttl: LatestTtl,
    horizon: Arc<AtomicI64>,
}

impl CompactionFilterFactory for Factory {
    type Filter = Filter;

    /// One filter per compaction, with the horizon as it is when the compaction starts.
    fn create(&mut self, _context: CompactionFilterContext) -> Filter {
        Filter {
            ttl: self.ttl,
            horizon: self.horizon.load(Ordering::Relaxed),
            latest: segment_prefix(LATEST_SEGMENT),
        }
    }

    fn name(&self) -> &CStr {
        FILTER_NAME
    }
}

struct Filter {
    ttl: LatestTtl,
    horizon: i64,
    latest: [u8; 8],
}

impl CompactionFilter for Filter {
    /// Drops a latest value (`timestamp ‖ value`) that is reclaimable; keeps everything else.
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        let reclaimable = key.starts_with(&self.latest)
            && latest_value::timestamp_of(value)
                .is_some_and(|t| self.ttl.reclaimable(t, self.horizon));
        if reclaimable {
            Decision::Remove
        } else {
            Decision::Keep
        }
    }

    fn name(&self) -> &CStr {
        FILTER_NAME
    }
}
