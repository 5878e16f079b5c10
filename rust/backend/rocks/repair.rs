//! Which merged rows a read writes back whole (`RocksBackend::read_repair`).
//!
//! A row stored as appends (merge operands) costs every read that finds it a merge and a search
//! of the levels below for its base; written back whole, it costs neither. The write back costs
//! a write now and its share of a compaction later: worth it for a row read again, wasted on a
//! row read once. Which rows will be read again the store cannot know; how likely it is follows
//! from its size against the block cache. A store whose files fit in its share of the cache is
//! read over and over: repaired at their first merge, the rows of a store of 100 000 keys written
//! in 4 rounds cost 3.9-4.0 µs of CPU a get in the second round of reads instead of 7-10 µs (the
//! first round, 11-19 µs, merges either way). A store many times larger is mostly read once at
//! random: at 4 million keys and a 256 MB budget, repairing at the first merge made later passes
//! of 200 000 random reads cost 20-23 µs of CPU a read against 15-19 (the repairs' writes pile
//! up in level 0, which every read probes). So a store that fits repairs a row at its first merge, a larger one at its second
//! while it is remembered here.

use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use foldhash::fast::FixedState;
use hashbrown::HashSet;

/// Rows remembered at most (each a 64-bit hash: about 1 MiB per store at most). Forgotten all
/// at once when full: a row merged once long ago is read rarely enough to merge again.
const REMEMBERED: usize = 1 << 16;

/// Repair decisions between two looks at whether the store fits its share of the cache (a
/// look reads a RocksDB property: a few microseconds; files change at flushes and compactions).
const DECISIONS_PER_LOOK: u32 = 4096;

/// When a read writes a merged row back.
pub(crate) struct Repairs {
    /// Hashes of rows merged once by a read and not repaired yet.
    seen: Mutex<HashSet<u64, FixedState>>,
    /// Whether the store's files fit in its share of the block cache, at the last look.
    fits: AtomicBool,
    /// Decisions left until the next look (0: look at the next one).
    until_look: AtomicU32,
}

impl Repairs {
    pub(crate) fn new() -> Self {
        Self {
            seen: Mutex::new(HashSet::with_hasher(FixedState::default())),
            fits: AtomicBool::new(false),
            until_look: AtomicU32::new(0),
        }
    }

    /// Whether a read that merged the row at `key` writes it back: at once while the store
    /// fits in its share of the cache (`fits` looks, now and then), at its second merge
    /// otherwise.
    pub(crate) fn at_merge(&self, key: &[u8], fits: impl FnOnce() -> bool) -> bool {
        // Relaxed: a stale answer only repairs a row one merge early or late.
        if self.until_look.fetch_sub(1, Ordering::Relaxed) == 0 {
            self.until_look.store(DECISIONS_PER_LOOK, Ordering::Relaxed);
            self.fits.store(fits(), Ordering::Relaxed);
        }
        self.fits.load(Ordering::Relaxed) || self.again(key)
    }

    /// Whether a read merged the row at `key` before (then it is forgotten: the caller writes
    /// it back); remembers it otherwise.
    fn again(&self, key: &[u8]) -> bool {
        let hash = FixedState::default().hash_one(key);
        let Ok(mut seen) = self.seen.lock() else {
            return true; // a reader panicked holding the set: repair, as before this set
        };
        if seen.remove(&hash) {
            return true;
        }
        if seen.len() >= REMEMBERED {
            *seen = HashSet::with_hasher(FixedState::default()); // gives the table's memory back
        }
        seen.insert(hash);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_that_fits_repairs_at_the_first_merge() {
        let repairs = Repairs::new();
        assert!(repairs.at_merge(b"row", || true));
        assert!(repairs.at_merge(b"other", || unreachable!("looked again too soon")));
    }

    #[test]
    fn a_larger_store_repairs_at_the_second_merge() {
        let repairs = Repairs::new();
        assert!(!repairs.at_merge(b"row", || false));
        assert!(repairs.at_merge(b"row", || unreachable!()));
        assert!(
            !repairs.at_merge(b"row", || unreachable!()),
            "forgotten once repaired"
        );
        assert!(!repairs.at_merge(b"other", || unreachable!()));
    }

    #[test]
    fn it_looks_again_after_a_while() {
        let repairs = Repairs::new();
        assert!(!repairs.at_merge(b"first", || false));
        for i in 0..DECISIONS_PER_LOOK {
            repairs.at_merge(&i.to_be_bytes(), || unreachable!("looked before its turn"));
        }
        assert!(repairs.at_merge(b"grown small", || true));
    }

    #[test]
    fn a_full_set_forgets_everything() {
        let repairs = Repairs::new();
        for i in 0..REMEMBERED {
            assert!(!repairs.again(&i.to_be_bytes()));
        }
        assert!(
            !repairs.again(b"one more"),
            "a new row is remembered, not repaired"
        );
        assert!(
            !repairs.again(&0usize.to_be_bytes()),
            "forgotten when the set was full"
        );
        assert!(repairs.again(b"one more"));
    }
}
