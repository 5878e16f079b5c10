//! A pending write of one key, and the map of them by storage key.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::format::key::StorageKey;
use crate::format::short_bytes::ShortBytes;

/// What a pending write replaces a key's stored value with.
#[derive(Debug)]
pub(super) enum Base {
    /// The stored value (nothing written yet).
    Stored,
    /// A new value: in place when short, as a key's latest value mostly is, so that a read of
    /// it reads the map entry it found instead of following a pointer.
    Put(ShortBytes),
    Deleted,
    /// Nothing is stored (a read found no value): appends then make a new row, written whole
    /// rather than as a merge operand with no base.
    Absent,
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(super) base: Base,
    /// Row appends on top of `base`, concatenated.
    pub(super) appends: Vec<u8>,
    /// The overlay's transaction that made this entry (`Overlay::generation`): a rollback
    /// removes the entries of its own transaction without having listed them.
    pub(super) born: u64,
}

impl Pending {
    pub(super) fn new(base: Base, appends: Vec<u8>) -> Self {
        Self {
            base,
            appends,
            born: 0,
        }
    }

    /// A row this write rebuilds from its own base: `(the base, the appends on it)`, `None`
    /// when it has no appends or they go on the stored value.
    pub(crate) fn appended_row(&self) -> Option<(Option<&[u8]>, &[u8])> {
        if self.appends.is_empty() {
            return None;
        }
        match &self.base {
            Base::Put(value) => Some((Some(value), &self.appends)),
            Base::Deleted | Base::Absent => Some((None, &self.appends)),
            Base::Stored => None,
        }
    }

    pub(super) fn bytes(&self, key: &[u8]) -> usize {
        let base = match &self.base {
            Base::Put(v) => v.len(),
            Base::Stored | Base::Deleted | Base::Absent => 0,
        };
        key.len() + base + self.appends.len() + 64
    }
}

/// Pending writes by storage key. A `HashTable` rather than a `HashMap`: a key is hashed once
/// per write, and a write to a key that is already there still owns the key it was given,
/// which the journal then keeps instead of a copy.
#[derive(Debug, Default)]
pub(super) struct PendingMap {
    table: HashTable<(StorageKey, Pending)>,
    hasher: foldhash::fast::RandomState,
}

impl PendingMap {
    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The memory of the table's slots, filled or not.
    pub(super) fn room_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<(StorageKey, Pending)>() + 1)
    }

    pub(super) fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.table
            .reserve(additional, |(k, _)| hasher.hash_one(k.as_slice()));
    }

    /// The mask of a hash that gives the slot where a probe for it starts (`hashbrown` starts
    /// at `hash & (buckets - 1)`, and holds `buckets · 7/8` entries once past 8).
    pub(super) fn slots_mask(&self) -> usize {
        (self.table.capacity() * 8 / 7).next_power_of_two().max(1) - 1
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&Pending> {
        let found = self
            .table
            .find(self.hash(key), |(k, _)| k.as_slice() == key);
        found.map(|(_, p)| p)
    }

    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Pending> {
        self.find_mut(self.hash(key), key)
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The pending write under `key`, whose hash is `hash`.
    pub(super) fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Pending> {
        let found = self.table.find_mut(hash, |(k, _)| k.as_slice() == key);
        found.map(|(_, p)| p)
    }

    /// Adds a pending write under `key`, which has none; `hash` is its hash.
    pub(super) fn insert_new(&mut self, hash: u64, key: StorageKey, pending: Pending) {
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, (key, pending), |(k, _)| hasher.hash_one(k.as_slice()));
    }

    pub(super) fn insert(&mut self, key: StorageKey, pending: Pending) {
        let hash = self.hash(&key);
        match self.find_mut(hash, &key) {
            Some(slot) => *slot = pending,
            None => self.insert_new(hash, key, pending),
        }
    }

    /// Takes every entry out, keeping the table's room.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (StorageKey, Pending)> {
        self.table.drain()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&StorageKey, &Pending)> {
        self.table.iter().map(|(k, p)| (k, p))
    }

    pub(super) fn retain(&mut self, mut keep: impl FnMut(&[u8], &Pending) -> bool) {
        self.table.retain(|(k, p)| keep(k, p));
    }

    pub(super) fn extract_if(
        &mut self,
        mut take: impl FnMut(&[u8], &Pending) -> bool,
    ) -> impl Iterator<Item = (StorageKey, Pending)> {
        self.table.extract_if(move |(k, p)| take(k, p))
    }
}
