//! A map bounded in bytes, the eviction of the store's caches (`latest_cache.rs`, the RocksDB
//! backend's row cache): past its bound it forgets about half of its entries, in hash order (at
//! random). A working set within the bound stays; a larger one degrades to misses. A hit costs
//! no bookkeeping, unlike an LRU list. Every map is charged to the process's pool of caches
//! (`crate::memory`): past the pool's share, the map that grows forgets half of itself too.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::memory::{self, Pool};

pub(crate) struct BoundedMap<V> {
    map: HashMap<Vec<u8>, V, foldhash::fast::RandomState>,
    /// The estimated bytes of each entry, its key included.
    weigh: fn(&[u8], &V) -> usize,
    bytes: usize,
    budget: usize,
    /// The process's pool this map's bytes are charged to.
    pool: &'static Pool,
}

impl<V> BoundedMap<V> {
    /// A map of at most about `budget` bytes (0: it keeps nothing), and within the process's
    /// pool of caches.
    pub(crate) fn new(budget: usize, weigh: fn(&[u8], &V) -> usize) -> Self {
        Self {
            map: HashMap::default(),
            weigh,
            bytes: 0,
            budget,
            pool: &memory::CACHES,
        }
    }

    /// Sets the estimated bytes, moving the pool's charge with them.
    fn set_bytes(&mut self, bytes: usize) {
        self.pool.recharge(self.bytes, bytes);
        self.bytes = bytes;
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// The estimated bytes it holds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The bytes it can take before it forgets: within its own budget and what the process's
    /// pool has left.
    pub(crate) fn room(&self) -> usize {
        let pool_room = self.pool.share().saturating_sub(self.pool.used());
        self.budget.saturating_sub(self.bytes).min(pool_room)
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
        let bytes = match self.map.entry(key) {
            Entry::Occupied(mut slot) => {
                let old = std::mem::replace(slot.get_mut(), value);
                let added = weigh(slot.key(), slot.get());
                (self.bytes + added).saturating_sub(weigh(slot.key(), &old))
            }
            Entry::Vacant(slot) => {
                let added = weigh(slot.key(), &value);
                slot.insert(value);
                self.bytes + added
            }
        };
        self.set_bytes(bytes);
        if self.bytes <= self.budget && !self.pool.is_over() {
            return false;
        }
        self.forget_half();
        true
    }

    /// [`BoundedMap::insert`] of `value` under `key` when the map holds `key` already (no copy
    /// of the key): `Ok` with whether it forgot entries, `Err(value)` when it does not hold it.
    pub(crate) fn replace(&mut self, key: &[u8], value: V) -> Result<bool, V> {
        let weigh = self.weigh;
        let Some(slot) = self.map.get_mut(key) else {
            return Err(value);
        };
        let old = std::mem::replace(slot, value);
        let bytes = (self.bytes + weigh(key, slot)).saturating_sub(weigh(key, &old));
        self.set_bytes(bytes);
        if self.bytes <= self.budget && !self.pool.is_over() {
            return Ok(false);
        }
        self.forget_half();
        Ok(true)
    }

    /// Whether `value` under the new key `key` fits without forgetting.
    pub(crate) fn fits(&self, key: &[u8], value: &V) -> bool {
        (self.weigh)(key, value) <= self.room()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Forgets about half of the entries, at random (hash order).
    pub(crate) fn forget_half(&mut self) {
        let weigh = self.weigh;
        let mut keep = false;
        self.map.retain(|_, _| {
            keep = !keep;
            keep
        });
        // The table's room goes too: a map that keeps forgetting under a full pool must not
        // pay for a walk of its old size at every insert, nor hold the memory.
        self.map.shrink_to_fit();
        let bytes = self.map.iter().map(|(k, v)| weigh(k, v)).sum();
        self.set_bytes(bytes);
    }

    pub(crate) fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.map.remove(key) {
            let bytes = self.bytes.saturating_sub((self.weigh)(key, &old));
            self.set_bytes(bytes);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.map = HashMap::default();
        self.set_bytes(0);
    }
}

impl<V> Drop for BoundedMap<V> {
    fn drop(&mut self) {
        self.set_bytes(0);
    }
}
