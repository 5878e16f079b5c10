//! A cache of long history rows, decoded, for as-of reads one call at a time.
//!
//! A read into a row places its value by walking the row's index from the newest entry (the row
//! stores no entry count, `docs/format.md`), and RocksDB copies a row out of its memtable on
//! every `Get`. For a hot key with 1 000 versions that is a 44 KB copy and a 12 KB walk per
//! read, against a hash lookup for a read of a newest version (the latest-value cache). The
//! cache keeps long rows with their entries' times in an array, so such a read is a binary
//! search. Batch reads walk each row once for all of their probes and do not use it.
//!
//! It lives in the RocksDB backend because every write goes through the backend's `write`:
//! a row written there is forgotten once the write is applied, and a segment drop forgets every
//! row (drops are rare: one per segment interval). Read repair rewrites a row with the bytes a
//! read just merged, which is what a cached copy holds. So the cache never answers with
//! anything RocksDB does not hold.
//!
//! Bounded in bytes like the latest-value cache (`crate::bounded`).

use std::cell::RefCell;
use std::sync::Arc;

use crate::bounded::BoundedMap;
use crate::error::Result;
use crate::format::key::segment_of;
use crate::format::segment_value::{Lookup, SegmentRow};

/// Estimated bytes per cached row besides its bytes and times (map slot, headers, heap).
const ROW_OVERHEAD: usize = 128;

/// Entries per block of the two-level search: two cache lines of times.
const BLOCK: usize = 16;

/// A row decoded once: the times of its entries (newest first) for a binary search, and where
/// each value ends in the row's bytes.
#[derive(Debug)]
pub(crate) struct DecodedRow {
    bytes: Vec<u8>,
    next_timestamp: i64,
    min_timestamp: i64,
    times: Vec<i64>,
    /// Every `BLOCK`-th time: a search looks here first, then in one block of `times`. A plain
    /// binary search of a 1 000-entry row touches about ten cache lines of it, most of them
    /// cold (each row of a hot key set is read now and then); this touches a few.
    summary: Vec<i64>,
    /// Per entry: the end of its value in `bytes` and its size (-1: a tombstone).
    values: Vec<(usize, i32)>,
}

impl DecodedRow {
    /// Decodes and checks `bytes` as [`SegmentRow::decode`] does.
    pub(crate) fn decode(bytes: &[u8], location: &dyn Fn() -> String) -> Result<Self> {
        let row = SegmentRow::decode(bytes, location)?;
        let mut end = bytes.len();
        let mut times = Vec::with_capacity(row.entries().len());
        let mut values = Vec::with_capacity(row.entries().len());
        // The newest value ends the row; each older one ends where the next newer one starts.
        for entry in row.entries() {
            times.push(entry.timestamp);
            match entry.value {
                Some(value) => {
                    values.push((end, i32::try_from(value.len()).unwrap_or(i32::MAX)));
                    end -= value.len();
                }
                None => values.push((end, -1)),
            }
        }
        Ok(Self {
            next_timestamp: row.next_timestamp(),
            min_timestamp: row.min_timestamp(),
            bytes: bytes.to_vec(),
            summary: times.iter().copied().step_by(BLOCK).collect(),
            times,
            values,
        })
    }

    /// What the row says about `t`: `segment_value::lookup` of its bytes.
    pub(crate) fn lookup(&self, t: i64) -> Lookup<'_> {
        if self.next_timestamp <= t {
            return Lookup::After;
        }
        if self.min_timestamp > t {
            return Lookup::Before {
                min_timestamp: self.min_timestamp,
            };
        }
        // Times strictly decrease and the oldest is `min_timestamp <= t`: an entry is found.
        // The first block starting at or below `t` is `b`: the entry is in `(start of b-1,
        // start of b]`, or is the newest when `b` is 0.
        let b = self.summary.partition_point(|&timestamp| timestamp > t);
        let index = match b.checked_sub(1) {
            None => 0,
            Some(above) => {
                let from = above * BLOCK + 1;
                let to = (b * BLOCK).min(self.times.len() - 1);
                let block = self.times.get(from..=to).unwrap_or_default();
                from + block.partition_point(|&timestamp| timestamp > t)
            }
        };
        let valid_to = match index.checked_sub(1) {
            Some(newer) => self.times[newer],
            None => self.next_timestamp,
        };
        let (end, size) = self.values[index];
        let value = usize::try_from(size)
            .ok()
            .map(|len| self.bytes.get(end - len..end).unwrap_or_default());
        Lookup::Found {
            timestamp: self.times[index],
            valid_to,
            value,
        }
    }

    fn cost(&self, key: &[u8]) -> usize {
        key.len() + self.bytes.len() + self.times.len() * 25 + ROW_OVERHEAD
    }
}

pub(crate) struct RowCache {
    rows: RefCell<BoundedMap<Arc<DecodedRow>>>,
    /// Rows shorter than this are not cached (`Tuning::min_cached_row_bytes`).
    min_row_bytes: usize,
}

impl RowCache {
    /// A cache of at most about `budget` bytes (0: caches nothing) of rows of at least
    /// `min_row_bytes`.
    pub(crate) fn new(budget: usize, min_row_bytes: usize) -> Self {
        Self {
            rows: RefCell::new(BoundedMap::new(budget, |key, row| row.cost(key))),
            min_row_bytes,
        }
    }

    /// The cached row under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<DecodedRow>> {
        self.rows.borrow().get(key).cloned()
    }

    /// Whether a row of these bytes would be cached.
    pub(crate) fn wants(&self, bytes: &[u8]) -> bool {
        let budget = self.rows.borrow().budget();
        bytes.len() >= self.min_row_bytes && bytes.len() < budget / 4
    }

    pub(crate) fn insert(&self, key: &[u8], row: Arc<DecodedRow>) {
        self.rows.borrow_mut().insert(key.to_vec(), row);
    }

    /// Forgets the rows a write changes: every written history row, and every row when the
    /// write drops segments.
    pub(crate) fn forget_written<'k>(
        &self,
        keys: impl Iterator<Item = &'k [u8]>,
        drops_segments: bool,
    ) {
        let mut rows = self.rows.borrow_mut();
        if rows.is_empty() {
            return;
        }
        if drops_segments {
            rows.clear();
            return;
        }
        for key in keys.filter(|k| segment_of(k).is_some_and(|s| s >= 0)) {
            rows.remove(key);
        }
    }

    /// Forgets every row (after a write that may or may not have been applied).
    pub(crate) fn clear(&self) {
        self.rows.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::format::segment_value::{Entry, lookup};

    fn loc() -> String {
        "test row".to_owned()
    }

    /// A row of `versions` (newest first, strictly decreasing times, `None` tombstones)
    /// valid until `next`.
    fn encoded(next: i64, versions: &[(i64, Option<Vec<u8>>)]) -> Vec<u8> {
        let mut row = SegmentRow::single(
            Entry {
                timestamp: versions[0].0,
                value: versions[0].1.as_deref(),
            },
            next,
        );
        for (timestamp, value) in &versions[1..] {
            row.insert_oldest(Entry {
                timestamp: *timestamp,
                value: value.as_deref(),
            });
        }
        row.encode()
    }

    /// Versions newest first: `(timestamp, value)`, `None` a tombstone.
    type Versions = Vec<(i64, Option<Vec<u8>>)>;

    fn arb_row() -> impl Strategy<Value = (i64, Versions)> {
        proptest::collection::btree_map(
            0i64..1_000,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4)),
            1..80,
        )
        .prop_flat_map(|entries| {
            let newest = *entries.keys().next_back().unwrap_or(&0);
            let versions: Vec<_> = entries.into_iter().rev().collect();
            (newest + 1..newest + 50).prop_map(move |next| (next, versions.clone()))
        })
    }

    proptest! {
        #[test]
        fn a_decoded_row_answers_as_the_encoded_row((next, versions) in arb_row(), t in -5i64..1_100) {
            let bytes = encoded(next, &versions);
            let decoded = DecodedRow::decode(&bytes, &loc).expect("decode");
            let expected = lookup(&bytes, t, &loc).expect("lookup");
            prop_assert_eq!(decoded.lookup(t), expected);
        }
    }

    #[test]
    fn written_rows_are_forgotten_and_a_drop_forgets_all() {
        let cache = RowCache::new(1 << 20, 1);
        let row = |t| {
            Arc::new(DecodedRow::decode(&encoded(t + 1, &[(t, Some(vec![1]))]), &loc).expect("row"))
        };
        let key = |segment: i64| crate::format::key::storage_key(segment, b"k");
        cache.insert(&key(1), row(5));
        cache.insert(&key(2), row(6));
        cache.forget_written([key(1).as_slice(), key(-1).as_slice()].into_iter(), false);
        assert!(cache.get(&key(1)).is_none());
        assert!(cache.get(&key(2)).is_some());
        cache.forget_written(std::iter::empty(), true);
        assert!(cache.get(&key(2)).is_none());
    }

    #[test]
    fn past_its_budget_it_forgets_about_half() {
        let one = DecodedRow::decode(&encoded(2, &[(1, Some(vec![0; 100]))]), &loc).expect("row");
        let cost = one.cost(&crate::format::key::storage_key(0, b"k000"));
        let cache = RowCache::new(cost * 10, 1);
        let one = Arc::new(one);
        for i in 0..11 {
            cache.insert(
                &crate::format::key::storage_key(0, format!("k{i:03}").as_bytes()),
                Arc::clone(&one),
            );
        }
        let kept = cache.rows.borrow().bytes() / cost;
        assert!((4..=7).contains(&kept), "{kept}");
    }
}
