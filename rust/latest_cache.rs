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
//! It is bounded in bytes, its own and the process's pool of caches (`crate::memory`). Full, it
//! leaves new keys out (a key it knows is still replaced), and once as many have been left out
//! as it holds, it forgets about half of its keys at random (hash order): a working set within
//! the bound stays cached, a larger one degrades to plain RocksDB reads, and one that moves gets
//! in. Until it first forgets, the cache of a store that was empty when opened
//! knows every entry, so a key it does not know has none (a new key's put reads nothing). A store
//! reopened with entries starts cold; once its batch calls have touched a good share of them,
//! the cache takes all of them in one pass ([`LatestCache::warm_for`]) and knows every entry too.
//! In-memory stores have no cache (their map is the same lookup).

use std::cell::RefCell;
use std::collections::HashMap;

use crate::backend::Backend;
use crate::bounded::BoundedMap;
use crate::error::Result;
use crate::format::key::LATEST_SEGMENT;
use crate::format::latest_value;

/// Estimated bytes per entry besides its key and value (map slot, two vector headers, heap).
const ENTRY_OVERHEAD: usize = 96;
/// Bytes guessed per entry's key and value before reading it (storage key and a small value).
const GUESS: usize = 64;

pub(crate) struct LatestCache {
    inner: RefCell<Entries>,
}

struct Entries {
    map: BoundedMap<Option<Vec<u8>>>,
    /// Every latest-value entry RocksDB holds is in `map` (the store was empty when opened and
    /// nothing was forgotten since, or it was filled with all of them): a key the cache does
    /// not know has no entry.
    complete: bool,
    /// How many times it forgot keys or left one out: it knows less than all since.
    forgets: u64,
    /// New keys left out since it last forgot half (`insert`).
    waiting: usize,
    /// `warm_for` ran (or decided not to) since the store opened.
    warmed: bool,
    /// Rows of the batch calls since the store opened, until `warmed`.
    batch_rows: u64,
    /// Entries read ahead for the call in progress ([`LatestCache::read_ahead`]): kept apart
    /// from `map`, which may forget them before the call reads them, until the call ends.
    ahead: HashMap<Vec<u8>, Option<Vec<u8>>, foldhash::fast::RandomState>,
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
                map: BoundedMap::new(budget, |key, entry| cost(key, entry.as_ref())),
                complete: empty && budget > 0,
                forgets: 0,
                waiting: 0,
                warmed: false,
                batch_rows: 0,
                ahead: HashMap::default(),
            }),
        }
    }

    /// `f(entry)` when the cache knows `key` (`entry` is `None` when RocksDB holds none).
    /// Inlined into the batch read's loop: called there out of line, it cost 10 to 50
    /// instructions a lookup (BENCHMARKS.md, "Latest TTL").
    #[inline]
    pub(crate) fn with<T>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> T) -> Option<T> {
        let entries = self.inner.borrow();
        match entries.map.get(key).or_else(|| entries.ahead.get(key)) {
            Some(entry) => Some(f(entry.as_deref())),
            None if entries.complete => Some(f(None)),
            None => None,
        }
    }

    /// Whether the cache answers for `key` without a read of RocksDB.
    pub(crate) fn knows(&self, key: &[u8]) -> bool {
        let entries = self.inner.borrow();
        entries.complete || entries.map.get(key).is_some() || entries.ahead.contains_key(key)
    }

    /// Whether the cache will miss latest values of a store holding about `count` of them:
    /// it has had to leave entries out, or they would not fit. A put of a key it does not know
    /// may then skip reading its latest value (`crate::put`). While they would fit, the store
    /// reads them (and fills the cache with them, `warm_for`) instead.
    pub(crate) fn misses(&self, count: u64) -> bool {
        let entries = self.inner.borrow();
        let needed = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .saturating_mul(ENTRY_OVERHEAD + GUESS);
        !entries.complete && (entries.forgets > 0 || needed > entries.map.budget())
    }

    /// Records that RocksDB applied `pushes` (`format::latest_value`) to the entry under
    /// `key`: an entry the cache knows is merged with them; one it does not stays unknown.
    pub(crate) fn apply_pushes(&self, key: &[u8], pushes: &[u8]) {
        let merged = self.with(key, |entry| {
            latest_value::merge(entry, std::iter::once(pushes)).bytes
        });
        if let Some(merged) = merged {
            self.insert(key.to_vec(), Some(merged));
        }
    }

    /// Reads the entries of `keys` (storage keys of latest values) that the cache does not
    /// know in one sorted batch (`MultiGet`), and keeps them until [`Self::end_read_ahead`].
    ///
    /// Every put starts by reading its key's latest value; with more keys than the cache holds,
    /// each of those reads was a RocksDB `Get` at a random key, most of a put's time (a profile
    /// of puts over 1 000 000 keys: 45%, a quarter of it in memtable searches). In one sorted
    /// batch the same reads share index and data blocks: at 4 000 000 keys a read took 3.5 µs
    /// against 22.6 µs for random `Get`s.
    pub(crate) fn read_ahead(&self, backend: &dyn Backend, mut keys: Vec<Vec<u8>>) -> Result<()> {
        keys.retain(|key| !self.knows(key));
        if keys.is_empty() {
            return Ok(());
        }
        keys.sort_unstable();
        keys.dedup();
        let slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut found: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        backend.multi_get(&slices, &mut |_, entry| {
            found.push(entry.map(<[u8]>::to_vec));
            Ok(())
        })?;
        let mut entries = self.inner.borrow_mut();
        entries.ahead.extend(keys.into_iter().zip(found));
        Ok(())
    }

    /// Ends a call's read ahead: what it read goes to the cache, within its budget.
    pub(crate) fn end_read_ahead(&self) {
        let ahead = std::mem::take(&mut self.inner.borrow_mut().ahead);
        for (key, entry) in ahead {
            self.insert(key, entry);
        }
    }

    /// Before a batch call of `rows` rows on a store holding `count` latest-value entries:
    /// reads them all into the cache in one pass over the latest-value keyspace once the batch
    /// calls since the open have touched a good share of them (`rows >= count / WARM_SHARE` in
    /// all) and if they fit. Once per open.
    ///
    /// A store reopened per micro-batch starts with a cold cache, and every put of a batch reads
    /// its key's latest value first: one RocksDB `Get` per key, about half of a put's time
    /// (profile of 75 000 puts over 25 000 keys on a reopened store). A pass reads the entries
    /// several times faster, and a complete cache also answers for keys that have none.
    pub(crate) fn warm_for(&self, backend: &dyn Backend, count: u64, rows: usize) -> Result<()> {
        const WARM_SHARE: u64 = 4;
        {
            let mut entries = self.inner.borrow_mut();
            if entries.warmed || entries.complete || entries.map.budget() == 0 {
                return Ok(());
            }
            let rows = u64::try_from(rows).unwrap_or(u64::MAX);
            entries.batch_rows = entries.batch_rows.saturating_add(rows);
            if entries.batch_rows.saturating_mul(WARM_SHARE) < count {
                return Ok(());
            }
            entries.warmed = true;
        }
        {
            let entries = self.inner.borrow();
            let needed = usize::try_from(count)
                .unwrap_or(usize::MAX)
                .saturating_mul(ENTRY_OVERHEAD + GUESS);
            if needed > entries.map.room() {
                return Ok(());
            }
        }
        let mut all = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        backend.visit_segment(LATEST_SEGMENT, &mut |key, entry| {
            all.push((key.to_vec(), entry.to_vec()));
            Ok(())
        })?;
        let before = self.inner.borrow().forgets;
        for (key, entry) in all {
            self.insert(key, Some(entry));
        }
        let mut entries = self.inner.borrow_mut();
        if entries.forgets == before {
            entries.complete = true;
        }
        Ok(())
    }

    /// Forgets every entry (the memory budget wants the memory back).
    pub(crate) fn clear(&self) {
        let mut entries = self.inner.borrow_mut();
        entries.map.clear();
        entries.ahead = HashMap::default();
        if entries.complete {
            entries.complete = false;
            entries.forgets += 1;
        }
    }

    /// [`LatestCache::insert`] of a borrowed key, copied only when the cache takes it as a new
    /// key: a write buffer's write replaces entries the cache mostly knows already.
    pub(crate) fn insert_key(&self, key: &[u8], entry: Option<Vec<u8>>) {
        let entry = {
            let mut entries = self.inner.borrow_mut();
            if let Some(ahead) = entries.ahead.get_mut(key) {
                *ahead = entry;
                return;
            }
            match entries.map.replace(key, entry) {
                Ok(forgot) => {
                    if forgot {
                        entries.complete = false;
                        entries.forgets += 1;
                    }
                    return;
                }
                Err(entry) => entry,
            }
        };
        self.insert(key.to_vec(), entry);
    }

    /// Records that RocksDB holds `entry` under `key`.
    pub(crate) fn insert(&self, key: Vec<u8>, entry: Option<Vec<u8>>) {
        let mut entries = self.inner.borrow_mut();
        if let Some(ahead) = entries.ahead.get_mut(&key) {
            // A write during the call: what was read ahead no longer is what RocksDB holds.
            *ahead = entry;
            return;
        }
        if !entries.complete && entries.map.get(&key).is_none() && !entries.map.fits(&key, &entry) {
            // Full: a new key waits for room rather than pushing others out at every insert
            // (inserting and forgetting took a tenth of a put's time at a million keys). Once
            // as many keys have waited as it holds, it forgets half, so that a working set that
            // moves gets in.
            entries.forgets += 1;
            entries.waiting += 1;
            if entries.waiting >= entries.map.len() {
                entries.waiting = 0;
                entries.map.forget_half();
            }
            return;
        }
        if entries.map.insert(key, entry) {
            entries.complete = false;
            entries.forgets += 1;
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

    fn backend_with(keys: u64) -> crate::backend::memory::MemoryBackend {
        crate::backend::memory::MemoryBackend::from_entries((0..keys).map(|i| {
            (
                crate::format::key::storage_key(LATEST_SEGMENT, &i.to_be_bytes()).into_vec(),
                i.to_be_bytes().to_vec(),
            )
        }))
    }

    fn latest(i: u64) -> Vec<u8> {
        crate::format::key::storage_key(LATEST_SEGMENT, &i.to_be_bytes()).into_vec()
    }

    #[test]
    fn a_large_batch_fills_the_cache_once_and_makes_it_complete() {
        let backend = backend_with(100);
        let cache = LatestCache::new(1 << 20, false);
        // batches of 24 rows in all touch under a quarter of 100 keys: no pass
        cache.warm_for(&backend, 100, 20).expect("warm");
        cache.warm_for(&backend, 100, 4).expect("warm");
        assert_eq!(cache.with(&latest(7), |_| ()), None);
        // the next row makes a quarter
        cache.warm_for(&backend, 100, 1).expect("warm");
        assert_eq!(
            cache.with(&latest(7), |e| e.map(<[u8]>::to_vec)),
            Some(Some(7u64.to_be_bytes().to_vec()))
        );
        // complete: a key it does not know has no entry
        assert_eq!(cache.with(&latest(1_000), |e| e.is_none()), Some(true));

        // once per open: after one pass (or one decided against for room), no other
        let other = backend_with(200);
        let small = LatestCache::new(50 * ENTRY_OVERHEAD, false);
        small.warm_for(&backend, 100, 100).expect("does not fit");
        small.warm_for(&other, 1, 1_000).expect("no second pass");
        assert_eq!(small.with(&latest(0), |_| ()), None);
    }

    #[test]
    fn entries_that_would_not_fit_are_not_read() {
        let backend = backend_with(100);
        let cache = LatestCache::new(50 * ENTRY_OVERHEAD, false);
        cache.warm_for(&backend, 100, 1_000).expect("warm");
        assert_eq!(cache.with(&latest(7), |_| ()), None);
        assert_eq!(cache.with(&latest(1_000), |_| ()), None, "not complete");
    }

    #[test]
    fn entries_read_ahead_answer_until_the_call_ends_and_follow_writes() {
        let backend = backend_with(10);
        let cache = LatestCache::new(1 << 20, false);
        let keys = vec![latest(3), latest(42), latest(3)];
        cache.read_ahead(&backend, keys).expect("read ahead");
        assert_eq!(
            cache.with(&latest(3), |e| e.map(<[u8]>::to_vec)),
            Some(Some(3u64.to_be_bytes().to_vec()))
        );
        assert_eq!(cache.with(&latest(42), |e| e.is_none()), Some(true));
        // a write during the call replaces what was read ahead
        cache.insert(latest(3), Some(b"new".to_vec()));
        cache.end_read_ahead();
        assert_eq!(
            cache.with(&latest(3), |e| e.map(<[u8]>::to_vec)),
            Some(Some(b"new".to_vec()))
        );
        assert!(cache.knows(&latest(42)));
        assert!(!cache.knows(&latest(5)));
    }

    #[test]
    fn a_full_cache_leaves_new_keys_out_until_as_many_waited_then_forgets_half() {
        let cache = LatestCache::new(10 * (ENTRY_OVERHEAD + 16), false);
        for i in 0u64..10 {
            cache.insert(i.to_be_bytes().to_vec(), Some(i.to_be_bytes().to_vec()));
        }
        let held = cache.inner.borrow().map.len();
        assert!(held >= 9, "{held}");
        // a known key is replaced, a new one waits
        cache.insert(3u64.to_be_bytes().to_vec(), Some(b"new".to_vec()));
        cache.insert(100u64.to_be_bytes().to_vec(), Some(b"x".to_vec()));
        assert_eq!(
            cache.with(&3u64.to_be_bytes(), |e| e.map(<[u8]>::to_vec)),
            Some(Some(b"new".to_vec()))
        );
        assert_eq!(cache.with(&100u64.to_be_bytes(), |_| ()), None);
        assert_eq!(cache.inner.borrow().map.len(), held);
        for i in 101u64..(101 + held as u64) {
            cache.insert(i.to_be_bytes().to_vec(), Some(b"x".to_vec()));
        }
        let after = cache.inner.borrow().map.len();
        assert!(after <= held / 2 + 2, "forgot half: {after} of {held}");
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
            entries.map.bytes() <= entries.map.budget(),
            "{} > {}",
            entries.map.bytes(),
            entries.map.budget()
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
