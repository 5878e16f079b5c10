//! Serialized in-memory stores: a whole keyspace as one byte string (`GroupHistory`).
//!
//! The entries are the store's own keys and values — metadata, latest values and segment rows,
//! exactly as the other backends hold them — in key order, framed as
//!
//! ```text
//! offset      size  field
//! 0           4     magic           "VSGH"
//! 4           4     format version  u32 BE = 1
//! 8           4     entry count     u32 BE = n
//! 12          ...   n entries, each:
//!                     key_len    u32 BE, key bytes
//!                     value_len  u32 BE, value bytes
//! end − 4     4     crc32           over every byte before it
//! ```
//!
//! Decoding checks the checksum, the magic, the format version and that the entries fill the
//! frame exactly; the store opened over the entries then checks its own format version and
//! configuration, so a history written with another retention is refused, not reinterpreted.

use std::mem::size_of;

use super::{read_array, read_u32};
use crate::error::{Error, Result};

const MAGIC: [u8; 4] = *b"VSGH";
/// The layout version this build writes and reads.
const FORMAT_VERSION: u32 = 1;

const MAGIC_AT: usize = 0;
const FORMAT_VERSION_AT: usize = MAGIC_AT + MAGIC.len();
const COUNT_AT: usize = FORMAT_VERSION_AT + size_of::<u32>();
/// Offset of the first entry.
const ENTRIES_AT: usize = COUNT_AT + size_of::<u32>();
/// Length of the trailing checksum.
const CRC_LEN: usize = size_of::<u32>();
/// Length of an entry's length fields.
const LEN_LEN: usize = size_of::<u32>();

const LOCATION: &str = "serialized history";

fn len32(len: usize) -> [u8; LEN_LEN] {
    // Keys and values are bounded by MAX_VALUE_LEN (i32) at the API boundary.
    u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes()
}

/// Encodes `entries` (storage key, value), which the caller gives in key order.
pub(crate) fn encode(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let body: usize = entries
        .iter()
        .map(|(k, v)| 2 * LEN_LEN + k.len() + v.len())
        .sum();
    let mut out = Vec::with_capacity(ENTRIES_AT + body + CRC_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&len32(entries.len()));
    for (key, value) in entries {
        out.extend_from_slice(&len32(key.len()));
        out.extend_from_slice(key);
        out.extend_from_slice(&len32(value.len()));
        out.extend_from_slice(value);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Takes one length-prefixed field at `*offset` of `frame`, advancing `offset` past it.
fn take<'a>(frame: &'a [u8], offset: &mut usize) -> Result<&'a [u8]> {
    let truncated = || Error::corrupt(LOCATION, "truncated");
    let len = read_u32(frame, *offset).ok_or_else(truncated)? as usize;
    let start = *offset + LEN_LEN;
    let end = start.checked_add(len).ok_or_else(truncated)?;
    let field = frame.get(start..end).ok_or_else(truncated)?;
    *offset = end;
    Ok(field)
}

/// Decodes the entries of a serialized store, borrowed from `bytes`.
///
/// # Errors
/// [`Error::Corrupt`] for a bad checksum, magic, format version or framing.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<(&[u8], &[u8])>> {
    let corrupt = |detail: &str| Error::corrupt(LOCATION, detail);
    let frame_len = bytes
        .len()
        .checked_sub(CRC_LEN)
        .filter(|&n| n >= ENTRIES_AT)
        .ok_or_else(|| corrupt("shorter than its header"))?;
    let (frame, crc) = bytes.split_at(frame_len);
    if read_u32(crc, 0) != Some(crc32fast::hash(frame)) {
        return Err(corrupt("checksum mismatch"));
    }
    if read_array(frame, MAGIC_AT) != Some(MAGIC) {
        return Err(corrupt("bad magic"));
    }
    let format = read_u32(frame, FORMAT_VERSION_AT).ok_or_else(|| corrupt("truncated"))?;
    if format != FORMAT_VERSION {
        return Err(corrupt(&format!("unknown format version {format}")));
    }
    let count = read_u32(frame, COUNT_AT).ok_or_else(|| corrupt("truncated"))? as usize;
    // Each entry takes at least its two lengths: a forged count cannot reserve more than that.
    let mut entries = Vec::with_capacity(count.min(frame.len() / (2 * LEN_LEN)));
    let mut offset = ENTRIES_AT;
    for _ in 0..count {
        let key = take(frame, &mut offset)?;
        let value = take(frame, &mut offset)?;
        entries.push((key, value));
    }
    if offset != frame.len() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn owned(entries: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
        entries
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    }

    /// The worked example of `docs/format.md`: entries `a → xy` and `b → ""`.
    #[test]
    fn encodes_the_documented_example_byte_for_byte() {
        let mut expected = Vec::new();
        for chunk in [
            &b"VSGH"[..],
            &1u32.to_be_bytes(),
            &2u32.to_be_bytes(),
            &1u32.to_be_bytes(),
            b"a",
            &2u32.to_be_bytes(),
            b"xy",
            &1u32.to_be_bytes(),
            b"b",
            &0u32.to_be_bytes(),
        ] {
            expected.extend_from_slice(chunk);
        }
        expected.extend_from_slice(&[0x64, 0x51, 0x8D, 0xAF]);
        let entries = owned(&[(b"a", b"xy"), (b"b", b"")]);
        assert_eq!(encode(&entries), expected);
        assert_eq!(ENTRIES_AT, 12, "the header length is part of the format");
        let back: Vec<(&[u8], &[u8])> = vec![(b"a", b"xy"), (b"b", b"")];
        assert_eq!(decode(&expected).ok(), Some(back));
    }

    #[test]
    fn round_trips_case_table() {
        let large = vec![7u8; 100_000];
        let cases: [&[(&[u8], &[u8])]; 4] = [
            // no entries
            &[],
            // an empty key and an empty value
            &[(b"", b"")],
            // look-alikes of the frame
            &[(b"VSGH", b"\0\0\0\x01"), (b"\xff\xff", b"VSGH")],
            // a large value
            &[(b"big", &large)],
        ];
        for case in cases {
            let bytes = encode(&owned(case));
            assert_eq!(
                bytes.len(),
                ENTRIES_AT
                    + CRC_LEN
                    + case
                        .iter()
                        .map(|(k, v)| 2 * LEN_LEN + k.len() + v.len())
                        .sum::<usize>()
            );
            assert_eq!(decode(&bytes).ok().as_deref(), Some(case));
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_detected() {
        let bytes = encode(&owned(&[(b"key", b"value"), (b"", b"x")]));
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1;
            assert!(decode(&flipped).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn a_forged_count_with_a_valid_checksum_is_refused_without_a_large_allocation() {
        let mut frame = encode(&[]);
        frame.truncate(frame.len() - CRC_LEN);
        frame[COUNT_AT..ENTRIES_AT].copy_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32fast::hash(&frame);
        frame.extend_from_slice(&crc.to_be_bytes());
        let err = decode(&frame).expect_err("forged");
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    proptest! {
        #[test]
        fn round_trips_any_entries(
            entries in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..8), proptest::collection::vec(any::<u8>(), 0..8)),
                0..20,
            ),
        ) {
            let bytes = encode(&entries);
            let back: Vec<(Vec<u8>, Vec<u8>)> = decode(&bytes)
                .expect("decodes")
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            prop_assert_eq!(back, entries);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decode(&bytes);
        }
    }
}
