//! Which merged rows a read writes back whole (`RocksBackend::read_repair`).
//!
//! A row stored as appends (merge operands) costs every read that finds it a merge and a search
//! of the levels below for its base; written back whole, it costs neither. The write back costs a
//! write, worth it for a row read again, wasted on one read once: repairing every merged row took
//! a first read of 4 million keys' rows from 51 000 to 31 000 reads/s, and repairing none made
//! repeated as-of reads of a flushed store 3 times slower. So a row is repaired at the second
//! merge a read makes of it while it is remembered here.

use std::hash::BuildHasher;
use std::sync::Mutex;

use foldhash::fast::FixedState;
use hashbrown::HashSet;

/// Rows remembered at most (each a 64-bit hash: about 1 MiB per store at most). Forgotten all
/// at once when full: a row merged once long ago is read rarely enough to merge again.
const REMEMBERED: usize = 1 << 16;

/// Hashes of rows merged once by a read and not repaired yet.
pub(crate) struct MergedOnce {
    seen: Mutex<HashSet<u64, FixedState>>,
}

impl MergedOnce {
    pub(crate) fn new() -> Self {
        Self {
            seen: Mutex::new(HashSet::with_hasher(FixedState::default())),
        }
    }

    /// Whether a read merged the row at `key` before (then it is forgotten: the caller writes
    /// it back); remembers it otherwise.
    pub(crate) fn again(&self, key: &[u8]) -> bool {
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
    fn a_row_is_repaired_at_its_second_merge() {
        let merged = MergedOnce::new();
        assert!(!merged.again(b"row"));
        assert!(merged.again(b"row"));
        assert!(!merged.again(b"row"), "forgotten once repaired");
        assert!(!merged.again(b"other"));
    }

    #[test]
    fn a_full_set_forgets_everything() {
        let merged = MergedOnce::new();
        for i in 0..REMEMBERED {
            assert!(!merged.again(&i.to_be_bytes()));
        }
        assert!(
            !merged.again(b"one more"),
            "the set was full: forgotten, then remembered"
        );
        assert!(!merged.again(&0usize.to_be_bytes()));
        assert!(merged.again(b"one more"));
    }
}
