//! A write-through cache of latest-value entries, so that the common write — a key's new newest
//! version — and the common read — as of a time at or after the newest version — need no
//! RocksDB lookup.
//!
//! Every put starts by reading the key's latest-value entry: an in-order put moves that value
//! into a history row (a row append) and writes the new one. The cache maps storage keys of the
//! latest-value store to what RocksDB holds for them: the entry's bytes, or `None` for no entry.
//! It learns from reads and from every committed write, and is only ever updated after RocksDB
//! accepted the write, so it never holds anything RocksDB does not.
//!
//! It is bounded in bytes. When it outgrows the bound it forgets about half of its keys, at
//! random (hash order): a working set within the bound stays cached, a larger one degrades to
//! plain RocksDB reads. Until it first forgets, the cache of a store that was empty when opened
//! knows every entry, so a key it does not know has none (a new key's put reads nothing). In-memory
//! stores have no cache (their map is the same lookup).

use std::cell::RefCell;
use std::collections::HashMap;

/// Estimated bytes per entry besides its key and value (map slot, two vector headers, heap).
const ENTRY_OVERHEAD: usize = 96;

pub(crate) struct LatestCache {
    inner: RefCell<Entries>,
}

struct Entries {
    map: HashMap<Vec<u8>, Option<Vec<u8>>, foldhash::fast::RandomState>,
    bytes: usize,
    budget: usize,
    /// Every latest-value entry RocksDB holds is in `map` (the store was empty when opened and
    /// nothing was forgotten since): a key the cache does not know has no entry.
    complete: bool,
}

fn cost(key: &[u8], entry: Option<&Vec<u8>>) -> usize {
    key.len() + entry.map_or(0, Vec::len) + ENTRY_OVERHEAD
}

impl LatestCache {
    /// A cache of at most about `budget` bytes (0: caches nothing) for a store that holds no
    /// latest-value entry yet (`empty`) or may hold some.
    pub(crate) fn new(budget: usize, empty: bool) -> Self {
        Self {
            inner: RefCell::new(Entries {
                map: HashMap::default(),
                bytes: 0,
                budget,
                complete: empty && budget > 0,
            }),
        }
    }

    /// `f(entry)` when the cache knows `key` (`entry` is `None` when RocksDB holds none).
    pub(crate) fn with<T>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> T) -> Option<T> {
        let entries = self.inner.borrow();
        match entries.map.get(key) {
            Some(entry) => Some(f(entry.as_deref())),
            None if entries.complete => Some(f(None)),
            None => None,
        }
    }

    /// Records that RocksDB holds `entry` under `key`.
    pub(crate) fn insert(&self, key: Vec<u8>, entry: Option<Vec<u8>>) {
        let mut entries = self.inner.borrow_mut();
        if entries.budget == 0 {
            return;
        }
        entries.bytes += cost(&key, entry.as_ref());
        if let Some(old) = entries.map.insert(key, entry) {
            // The key's own bytes were counted twice: count the old entry's key by the new one.
            let removed = old.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD;
            entries.bytes = entries.bytes.saturating_sub(removed);
        }
        if entries.bytes > entries.budget {
            entries.complete = false;
            let mut keep = false;
            entries.map.retain(|_, _| {
                keep = !keep;
                keep
            });
            entries.bytes = entries.map.iter().map(|(k, v)| cost(k, v.as_ref())).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_entries_and_absence() {
        let cache = LatestCache::new(1 << 20, false);
        cache.insert(b"a".to_vec(), Some(b"entry".to_vec()));
        cache.insert(b"b".to_vec(), None);
        assert_eq!(
            cache.with(b"a", |e| e.map(<[u8]>::to_vec)),
            Some(Some(b"entry".to_vec()))
        );
        assert_eq!(cache.with(b"b", |e| e.is_none()), Some(true));
        assert_eq!(cache.with(b"c", |_| ()), None);
        cache.insert(b"a".to_vec(), None);
        assert_eq!(cache.with(b"a", |e| e.is_none()), Some(true));
    }

    #[test]
    fn stays_within_its_budget_and_zero_disables_it() {
        let cache = LatestCache::new(10 * (ENTRY_OVERHEAD + 16), true);
        assert_eq!(cache.with(b"never written", |e| e.is_none()), Some(true));
        for i in 0u64..1_000 {
            cache.insert(i.to_be_bytes().to_vec(), Some(i.to_be_bytes().to_vec()));
        }
        let entries = cache.inner.borrow();
        assert!(
            entries.bytes <= entries.budget,
            "{} > {}",
            entries.bytes,
            entries.budget
        );
        assert!(!entries.map.is_empty());
        assert!(
            !entries.complete,
            "an evicting cache no longer knows every key"
        );
        drop(entries);
        let off = LatestCache::new(0, true);
        off.insert(b"a".to_vec(), None);
        assert_eq!(off.with(b"a", |_| ()), None);
    }
}
