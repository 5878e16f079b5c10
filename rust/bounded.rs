//! A map bounded in bytes, the eviction of the store's caches (`latest.rs`, the RocksDB
//! backend's row cache): past its bound it forgets about half of its entries, in hash order (at
//! random). A working set within the bound stays; a larger one degrades to misses. A hit costs
//! no bookkeeping, unlike an LRU list.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

pub(crate) struct BoundedMap<V> {
    map: HashMap<Vec<u8>, V, foldhash::fast::RandomState>,
    /// The estimated bytes of each entry, its key included.
    weigh: fn(&[u8], &V) -> usize,
    bytes: usize,
    budget: usize,
}

impl<V> BoundedMap<V> {
    /// A map of at most about `budget` bytes (0: it keeps nothing).
    pub(crate) fn new(budget: usize, weigh: fn(&[u8], &V) -> usize) -> Self {
        Self {
            map: HashMap::default(),
            weigh,
            bytes: 0,
            budget,
        }
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// The estimated bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&V> {
        self.map.get(key)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keeps `value` under `key`; returns whether it then forgot entries to stay within its
    /// budget (nothing is kept with a budget of 0).
    pub(crate) fn insert(&mut self, key: Vec<u8>, value: V) -> bool {
        if self.budget == 0 {
            return false;
        }
        let weigh = self.weigh;
        match self.map.entry(key) {
            Entry::Occupied(mut slot) => {
                let old = std::mem::replace(slot.get_mut(), value);
                let added = weigh(slot.key(), slot.get());
                self.bytes = (self.bytes + added).saturating_sub(weigh(slot.key(), &old));
            }
            Entry::Vacant(slot) => {
                self.bytes += weigh(slot.key(), &value);
                slot.insert(value);
            }
        }
        if self.bytes <= self.budget {
            return false;
        }
        let mut keep = false;
        self.map.retain(|_, _| {
            keep = !keep;
            keep
        });
        self.bytes = self.map.iter().map(|(k, v)| weigh(k, v)).sum();
        true
    }

    pub(crate) fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.map.remove(key) {
            self.bytes = self.bytes.saturating_sub((self.weigh)(key, &old));
        }
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }
}
