//! Latest-value entries whose unsettled history grew long (docs/format.md, format 5), found
//! where RocksDB merges them anyway: at reads and compactions.
//!
//! A read-free put leaves the version it replaces in the key's latest-value entry; the store
//! moves such versions to their history rows when a put reads the entry, or in one pass
//! (`VersionedStore::settle`). A key put again and again without being read would keep growing
//! its entry, and every merge of it (each compaction that meets a new push) copies all of it.
//! So the merge operator notes the keys whose merged history holds [`LONG_HISTORY`] versions or
//! more, and the store settles them at its next write ([`LongHistories::take`]): a read of each,
//! once per that many puts. The set is bounded; a key it leaves out is noted at a later merge.

use std::sync::{Mutex, PoisonError};

use hashbrown::HashSet;

/// Versions of unsettled history from which an entry's key is settled at the next write.
pub(crate) const LONG_HISTORY: usize = 8;

/// Keys remembered at most between two writes of the store.
const REMEMBERED: usize = 4096;

/// Storage keys of latest-value entries noted by merges, shared with RocksDB's threads.
#[derive(Debug, Default)]
pub(crate) struct LongHistories {
    keys: Mutex<HashSet<Vec<u8>, foldhash::fast::FixedState>>,
}

impl LongHistories {
    /// Notes that the entry under `key` merged to a history of `versions` versions.
    pub(crate) fn note(&self, key: &[u8], versions: usize) {
        if versions < LONG_HISTORY {
            return;
        }
        // Nothing a panic could leave half-done is kept under the lock.
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if keys.len() < REMEMBERED {
            keys.insert(key.to_vec());
        }
    }

    /// The keys noted since the last call, in key order.
    pub(crate) fn take(&self) -> Vec<Vec<u8>> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if keys.is_empty() {
            return Vec::new();
        }
        let mut taken: Vec<Vec<u8>> = keys.drain().collect();
        taken.sort_unstable();
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_long_histories_once_and_within_its_bound() {
        let histories = LongHistories::default();
        histories.note(b"short", LONG_HISTORY - 1);
        histories.note(b"b", LONG_HISTORY);
        histories.note(b"a", LONG_HISTORY + 5);
        histories.note(b"a", LONG_HISTORY + 6);
        assert_eq!(histories.take(), [b"a".to_vec(), b"b".to_vec()]);
        assert!(histories.take().is_empty());
        for i in 0..REMEMBERED + 10 {
            histories.note(&i.to_be_bytes(), LONG_HISTORY);
        }
        assert_eq!(histories.take().len(), REMEMBERED);
    }
}
