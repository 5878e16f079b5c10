//! Storage keys: every entry of a store lives in one keyspace, partitioned by an 8-byte prefix.
//!
//! ```text
//! [0..8)   segment id   i64 BE (two's complement)
//! [8..)    user key     raw bytes (may be empty)
//! ```
//!
//! Segment ids >= 0 are the history segments (segment `k` holds versions whose valid-to lies in
//! `[k·I, (k+1)·I)`). Two negative ids are reserved: `-1` (`FF×8`) is the latest-value store,
//! as in Kafka, and `-2` (`FF×7 FE`) holds store metadata (format version, configuration,
//! observed stream time). Because negative ids encode with the top bit set, both reserved
//! keyspaces sort after every history segment, and a seek from `00×8` walks history segments in
//! ascending id order.

use super::short_bytes::ShortBytes;

/// The reserved segment id of the latest-value store.
pub(crate) const LATEST_SEGMENT: i64 = -1;
/// The reserved segment id of store metadata.
pub(crate) const META_SEGMENT: i64 = -2;
/// Length of the segment prefix.
pub(crate) const PREFIX_LEN: usize = 8;

/// The 8-byte prefix of a segment.
pub(crate) fn segment_prefix(segment: i64) -> [u8; PREFIX_LEN] {
    segment.to_be_bytes()
}

/// The storage key of `key` in `segment`.
pub(crate) fn storage_key(segment: i64, key: &[u8]) -> StorageKey {
    StorageKey::from_parts(&segment_prefix(segment), key)
}

/// A storage key an overlay or the in-memory backend keeps: in place when short (most are: the
/// 8-byte prefix and a user key of up to 22 bytes), else on the heap. A put writes two keys; in
/// place, they cost no allocation, and a hash map's key comparison reads the entry it probed
/// instead of following a pointer to another cache line (the key comparisons of the write
/// buffer's map were its largest cost once the map held every key a batch put touches).
pub(crate) type StorageKey = ShortBytes;

/// The first storage key after every key of `segment` (`None`: the segment is the last one).
pub(crate) fn next_prefix(segment: i64) -> Option<[u8; PREFIX_LEN]> {
    u64::from_be_bytes(segment_prefix(segment))
        .checked_add(1)
        .map(u64::to_be_bytes)
}

/// The first 16 bytes of a storage key as an integer pair that orders like the bytes: most
/// comparisons in a sort of storage keys end there.
pub(crate) fn sort_prefix(key: &[u8]) -> (u64, u64) {
    let word = |offset: usize| {
        let mut chunk = [0u8; 8];
        let bytes = key.get(offset..).unwrap_or_default();
        let n = bytes.len().min(8);
        chunk[..n].copy_from_slice(&bytes[..n]);
        u64::from_be_bytes(chunk)
    };
    (word(0), word(8))
}

/// The segment id a storage key belongs to, or `None` for a key shorter than the prefix.
pub(crate) fn segment_of(storage_key: &[u8]) -> Option<i64> {
    super::read_i64(storage_key, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::short_bytes::INLINE;

    #[test]
    fn reserved_segments_sort_after_history_segments() {
        let history = storage_key(i64::MAX, b"k");
        assert!(history < storage_key(META_SEGMENT, b""));
        assert!(storage_key(META_SEGMENT, b"zzz") < storage_key(LATEST_SEGMENT, b""));
        assert!(storage_key(0, b"\xff") < storage_key(1, b""));
    }

    #[test]
    fn keys_short_and_long_hold_their_bytes() {
        for len in [0, 22, 23, 100] {
            let user = vec![7u8; len];
            let key = storage_key(3, &user);
            assert_eq!(key.len(), PREFIX_LEN + len);
            assert_eq!(&key[PREFIX_LEN..], user.as_slice());
            assert_eq!(key.clone().into_vec(), key.as_slice());
            assert_eq!(StorageKey::from(key.clone().into_vec()), key);
            assert_eq!(
                matches!(key, StorageKey::Inline { .. }),
                PREFIX_LEN + len <= INLINE
            );
        }
    }

    #[test]
    fn segment_round_trips() {
        for segment in [0, 1, 42, i64::MAX, LATEST_SEGMENT, META_SEGMENT] {
            assert_eq!(segment_of(&storage_key(segment, b"abc")), Some(segment));
        }
        assert_eq!(segment_of(b"short"), None);
    }
}
