//! Changelog files: the accepted writes that turn checkpoint version `v − 1` into version `v`.
//!
//! A changelog is a fixed-size header and a body of records:
//!
//! ```text
//! offset  size  field
//! 0       4     magic            "VSCL"
//! 4       4     format version   u32 BE = 1
//! 8       8     version          i64 BE   the version this changelog produces
//! 16      16    attempt id       the attempt that wrote it (opaque, e.g. a UUID)
//! 32      16    parent attempt   the attempt that wrote version − 1 (zeros for version 1)
//! 48      8     record count     u64 BE
//! 56      4     body crc32       over every byte from offset 64 to the end
//! 60      4     header crc32     over bytes 0..60
//! 64      ...   records, back to back
//! ```
//!
//! Each record is one accepted write (a delete is its tombstone write):
//!
//! ```text
//! offset      size  field
//! 0           4     key_len     u32 BE
//! 4           k     key
//! 4 + k       4     value_len   i32 BE   -1 = tombstone, 0 = empty value, v = v bytes
//! 8 + k       v     value       (v = max(value_len, 0))
//! 8 + k + v   8     timestamp   i64 BE
//! ```
//!
//! Records are the writes in the order they were applied: replaying them with the normal put
//! algorithm reproduces the state exactly (`docs/semantics.md` §2.10). The body is produced
//! record by record as writes are accepted, its checksum computed on the way, so the header —
//! which holds the count and that checksum — is encoded last ([`encode_header`]). Reading goes
//! the other way: [`decode_header`] checks the header alone (enough for listings), and
//! [`split_record`] takes one record off the front of a byte string, telling a record cut short
//! (read more) from a malformed one, so that a reader can decode a file chunk by chunk.
//!
//! Checkpoints in the field hold these bytes: any change to them is a new format version.

use std::mem::size_of;

use super::{read_array, read_i32, read_i64, read_u32, read_u64};
use crate::error::{Error, Result};

const MAGIC: [u8; 4] = *b"VSCL";
/// The layout version this build writes and reads.
const FORMAT_VERSION: u32 = 1;
/// Length of an attempt id.
pub const ATTEMPT_LEN: usize = 16;

const MAGIC_AT: usize = 0;
const FORMAT_VERSION_AT: usize = MAGIC_AT + MAGIC.len();
const VERSION_AT: usize = FORMAT_VERSION_AT + size_of::<u32>();
const ATTEMPT_AT: usize = VERSION_AT + size_of::<i64>();
const PARENT_ATTEMPT_AT: usize = ATTEMPT_AT + ATTEMPT_LEN;
const RECORD_COUNT_AT: usize = PARENT_ATTEMPT_AT + ATTEMPT_LEN;
const BODY_CRC_AT: usize = RECORD_COUNT_AT + size_of::<u64>();
const HEADER_CRC_AT: usize = BODY_CRC_AT + size_of::<u32>();
/// Length of the header: the first record starts here.
pub const HEADER_LEN: usize = HEADER_CRC_AT + size_of::<u32>();

/// Offset of the key in a record (after `key_len`).
const KEY_AT: usize = size_of::<u32>();
/// `value_len` of a tombstone.
const TOMBSTONE_LEN: i32 = -1;
/// The bytes of a record besides its key and value.
const RECORD_OVERHEAD: usize = KEY_AT + size_of::<i32>() + size_of::<i64>();

/// An attempt id (e.g. the bytes of a UUID).
pub type AttemptId = [u8; ATTEMPT_LEN];

/// The header of a changelog file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChangelogHeader {
    /// The version this changelog produces.
    pub version: i64,
    /// The attempt that wrote it.
    pub attempt: AttemptId,
    /// The attempt that wrote the previous version.
    pub parent_attempt: AttemptId,
    /// Number of records.
    pub record_count: u64,
}

/// A header as stored: its fields and the checksum of the body it heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredHeader {
    pub(crate) fields: ChangelogHeader,
    pub(crate) body_crc: u32,
}

/// One logged write, borrowed from the bytes it was decoded from: `value = None` is a tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) timestamp: i64,
}

/// Writes `bytes` at offset `at` of a header.
fn put(header: &mut [u8; HEADER_LEN], at: usize, bytes: &[u8]) {
    if let Some(slot) = header.get_mut(at..at + bytes.len()) {
        slot.copy_from_slice(bytes);
    }
}

/// Encodes the header of a changelog whose body has checksum `body_crc`.
pub(crate) fn encode_header(header: &ChangelogHeader, body_crc: u32) -> [u8; HEADER_LEN] {
    let mut out = [0; HEADER_LEN];
    put(&mut out, MAGIC_AT, &MAGIC);
    put(&mut out, FORMAT_VERSION_AT, &FORMAT_VERSION.to_be_bytes());
    put(&mut out, VERSION_AT, &header.version.to_be_bytes());
    put(&mut out, ATTEMPT_AT, &header.attempt);
    put(&mut out, PARENT_ATTEMPT_AT, &header.parent_attempt);
    put(
        &mut out,
        RECORD_COUNT_AT,
        &header.record_count.to_be_bytes(),
    );
    put(&mut out, BODY_CRC_AT, &body_crc.to_be_bytes());
    let header_crc = crc32fast::hash(out.get(..HEADER_CRC_AT).unwrap_or_default());
    put(&mut out, HEADER_CRC_AT, &header_crc.to_be_bytes());
    out
}

/// Decodes and verifies the header at the start of `bytes` (the body is not looked at).
///
/// # Errors
/// [`Error::Corrupt`] naming `location` when the header is short, or has a bad magic, format
/// version or checksum.
pub(crate) fn decode_header(bytes: &[u8], location: &str) -> Result<StoredHeader> {
    let corrupt = |detail: &str| Error::corrupt(location, detail);
    let header: [u8; HEADER_LEN] = read_array(bytes, 0).ok_or_else(|| {
        corrupt(&format!(
            "changelog is shorter than its {HEADER_LEN}-byte header"
        ))
    })?;
    if read_array(&header, MAGIC_AT) != Some(MAGIC) {
        return Err(corrupt("not a verstore changelog (bad magic)"));
    }
    let covered = header.get(..HEADER_CRC_AT).unwrap_or_default();
    if read_u32(&header, HEADER_CRC_AT) != Some(crc32fast::hash(covered)) {
        return Err(corrupt("header checksum mismatch"));
    }
    let format = field(read_u32(&header, FORMAT_VERSION_AT), location)?;
    if format != FORMAT_VERSION {
        return Err(corrupt(&format!(
            "unknown changelog format version {format}"
        )));
    }
    Ok(StoredHeader {
        fields: ChangelogHeader {
            version: field(read_i64(&header, VERSION_AT), location)?,
            attempt: field(read_array(&header, ATTEMPT_AT), location)?,
            parent_attempt: field(read_array(&header, PARENT_ATTEMPT_AT), location)?,
            record_count: field(read_u64(&header, RECORD_COUNT_AT), location)?,
        },
        body_crc: field(read_u32(&header, BODY_CRC_AT), location)?,
    })
}

/// A field of a header that was read whole (never missing: a `Corrupt` rather than a panic).
fn field<T>(value: Option<T>, location: &str) -> Result<T> {
    value.ok_or_else(|| Error::corrupt(location, "header"))
}

/// The encoded length of a record of `key` and `value`.
pub(crate) fn record_len(key: &[u8], value: Option<&[u8]>) -> usize {
    RECORD_OVERHEAD + key.len() + value.map_or(0, <[u8]>::len)
}

/// Appends the encoding of `record` to `out`.
pub(crate) fn encode_record(record: Record<'_>, out: &mut Vec<u8>) {
    // Keys and values are bounded by the store's MAX_VALUE_LEN checks before they are logged.
    let key_len = u32::try_from(record.key.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&key_len.to_be_bytes());
    out.extend_from_slice(record.key);
    match record.value {
        Some(value) => {
            let value_len = i32::try_from(value.len()).unwrap_or(i32::MAX);
            out.extend_from_slice(&value_len.to_be_bytes());
            out.extend_from_slice(value);
        }
        None => out.extend_from_slice(&TOMBSTONE_LEN.to_be_bytes()),
    }
    out.extend_from_slice(&record.timestamp.to_be_bytes());
}

/// Takes the record at the start of `bytes`: `Ok(Some((record, its length)))`, or `Ok(None)`
/// when `bytes` ends before the record does (a reader then needs more bytes).
///
/// # Errors
/// A description of a record that no encoder writes (a value length below -1).
pub(crate) fn split_record(bytes: &[u8]) -> Result<Option<(Record<'_>, usize)>, String> {
    let Some(key_len) = read_u32(bytes, 0) else {
        return Ok(None);
    };
    let Some(value_len_at) = KEY_AT.checked_add(key_len as usize) else {
        return Ok(None);
    };
    let Some(key) = bytes.get(KEY_AT..value_len_at) else {
        return Ok(None);
    };
    let Some(value_len) = read_i32(bytes, value_len_at) else {
        return Ok(None);
    };
    let value_at = value_len_at + size_of::<i32>();
    let (value, timestamp_at) = match usize::try_from(value_len) {
        Ok(len) => {
            let end = value_at.saturating_add(len);
            match bytes.get(value_at..end) {
                Some(value) => (Some(value), end),
                None => return Ok(None),
            }
        }
        Err(_) if value_len == TOMBSTONE_LEN => (None, value_at),
        Err(_) => return Err(format!("bad value length {value_len}")),
    };
    let Some(timestamp) = read_i64(bytes, timestamp_at) else {
        return Ok(None);
    };
    let record = Record {
        key,
        value,
        timestamp,
    };
    Ok(Some((record, timestamp_at + size_of::<i64>())))
}

/// Encodes a whole changelog file.
pub(crate) fn encode<'a>(
    version: i64,
    attempt: AttemptId,
    parent_attempt: AttemptId,
    records: impl IntoIterator<Item = Record<'a>>,
) -> Vec<u8> {
    let mut out = vec![0; HEADER_LEN];
    let mut record_count = 0;
    for record in records {
        encode_record(record, &mut out);
        record_count += 1;
    }
    let header = ChangelogHeader {
        version,
        attempt,
        parent_attempt,
        record_count,
    };
    let body_crc = crc32fast::hash(out.get(HEADER_LEN..).unwrap_or_default());
    if let Some(slot) = out.get_mut(..HEADER_LEN) {
        slot.copy_from_slice(&encode_header(&header, body_crc));
    }
    out
}

/// Decodes and verifies a whole changelog file held in memory.
///
/// # Errors
/// [`Error::Corrupt`] naming `location` for any truncation, checksum or count mismatch.
pub(crate) fn decode<'a>(
    bytes: &'a [u8],
    location: &str,
) -> Result<(ChangelogHeader, Vec<Record<'a>>)> {
    let stored = decode_header(bytes, location)?;
    let body = bytes.get(HEADER_LEN..).unwrap_or_default();
    if crc32fast::hash(body) != stored.body_crc {
        return Err(Error::corrupt(
            location,
            "body checksum mismatch (truncated or modified)",
        ));
    }
    let mut records = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let at = HEADER_LEN + (body.len() - rest.len());
        let (record, len) = split_record(rest)
            .map_err(|detail| Error::corrupt(location, format!("{detail} at byte {at}")))?
            .ok_or_else(|| {
                Error::corrupt(location, format!("record runs past the end at byte {at}"))
            })?;
        records.push(record);
        rest = rest.get(len..).unwrap_or_default();
    }
    check_count(&stored.fields, records.len() as u64, location)?;
    Ok((stored.fields, records))
}

/// Checks that a body held as many records as its header says.
pub(crate) fn check_count(header: &ChangelogHeader, found: u64, location: &str) -> Result<()> {
    if found == header.record_count {
        return Ok(());
    }
    Err(Error::corrupt(
        location,
        format!(
            "header says {} records, body has {found}",
            header.record_count
        ),
    ))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ATTEMPT: AttemptId = [0x11; ATTEMPT_LEN];
    const PARENT: AttemptId = [0x22; ATTEMPT_LEN];

    fn record<'a>(key: &'a [u8], value: Option<&'a [u8]>, timestamp: i64) -> Record<'a> {
        Record {
            key,
            value,
            timestamp,
        }
    }

    fn header(record_count: u64) -> ChangelogHeader {
        ChangelogHeader {
            version: 3,
            attempt: ATTEMPT,
            parent_attempt: PARENT,
            record_count,
        }
    }

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).expect("ascii");
                u8::from_str_radix(pair, 16).expect("hex")
            })
            .collect()
    }

    /// The worked example of `docs/format.md`: version 3, `k=v@5` and a tombstone of `x` at 7,
    /// byte for byte as verstore 0.1 wrote it. Checkpoints hold these bytes: they never change
    /// (a change is a new format version).
    #[test]
    fn encodes_the_documented_example_byte_for_byte() {
        let expected = hex("5653434C 00000001 0000000000000003
             11111111111111111111111111111111
             22222222222222222222222222222222
             0000000000000002 A7E2C094 F85A8170
             00000001 6B 00000001 76 0000000000000005
             00000001 78 FFFFFFFF 0000000000000007");
        let records = [record(b"k", Some(b"v"), 5), record(b"x", None, 7)];
        assert_eq!(encode(3, ATTEMPT, PARENT, records), expected);
        assert_eq!(HEADER_LEN, 64, "the header length is part of the format");
        let (decoded, back) = decode(&expected, "3.changelog").expect("decodes");
        assert_eq!((decoded, back.as_slice()), (header(2), &records[..]));
        let stored = decode_header(&expected, "3.changelog").expect("header");
        assert_eq!(stored.body_crc, 0xA7E2_C094);
    }

    /// Case table: degenerate bodies and records, with their exact lengths.
    #[test]
    fn round_trips_case_table() {
        let large = vec![0xAB; 70_000];
        let cases: [&[Record<'_>]; 6] = [
            // no records
            &[],
            // an empty key and an empty value (not a tombstone)
            &[record(b"", Some(b""), 0)],
            // tombstones only, one at the largest time
            &[record(b"a", None, 1), record(b"a", None, i64::MAX)],
            // the same key repeated, out of order
            &[
                record(b"k", Some(b"2"), 9),
                record(b"k", Some(b"1"), 4),
                record(b"k", None, 9),
            ],
            // binary keys and values, look-alikes of the header
            &[record(b"VSCL\0\0\0\x01", Some(b"\xff\xff\xff\xff"), 7)],
            // a large value
            &[record(b"big", Some(&large), 3)],
        ];
        for records in cases {
            let bytes = encode(3, ATTEMPT, PARENT, records.iter().copied());
            let body_len: usize = records.iter().map(|r| record_len(r.key, r.value)).sum();
            assert_eq!(bytes.len(), HEADER_LEN + body_len);
            let (decoded, back) = decode(&bytes, "case").expect("decodes");
            assert_eq!(decoded, header(records.len() as u64));
            assert_eq!(back, records);
            let stored = decode_header(&bytes, "case").expect("header");
            assert_eq!(stored.fields, decoded);
        }
    }

    #[test]
    fn split_record_asks_for_more_bytes_until_the_record_is_whole() {
        let mut bytes = Vec::new();
        encode_record(record(b"key", Some(b"value"), 42), &mut bytes);
        encode_record(record(b"", None, 1), &mut bytes);
        let first = record_len(b"key", Some(b"value"));
        for len in 0..first {
            assert_eq!(split_record(&bytes[..len]), Ok(None), "cut at {len}");
        }
        let (got, len) = split_record(&bytes).expect("valid").expect("whole");
        assert_eq!((got, len), (record(b"key", Some(b"value"), 42), first));
        let (got, len) = split_record(&bytes[first..])
            .expect("valid")
            .expect("whole");
        assert_eq!((got, len), (record(b"", None, 1), record_len(b"", None)));
        // a value length below -1 is malformed, however many bytes follow
        let mut bad = Vec::new();
        encode_record(record(b"k", None, 1), &mut bad);
        bad[KEY_AT + 1..KEY_AT + 1 + 4].copy_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(split_record(&bad), Err("bad value length -2".to_owned()));
    }

    #[test]
    fn every_truncation_and_bit_flip_is_detected() {
        let records = [
            record(b"k", Some(b"v"), 5),
            record(b"", None, 7),
            record(b"x", Some(b""), 0),
        ];
        let bytes = encode(3, ATTEMPT, PARENT, records);
        for len in 0..bytes.len() {
            let err = decode(&bytes[..len], "3.changelog").expect_err("truncated");
            assert!(err.to_string().contains("3.changelog"), "{err}");
        }
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x10;
            assert!(decode(&flipped, "3.changelog").is_err(), "flip at {i}");
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(decode(&longer, "3.changelog").is_err());
    }

    #[test]
    fn unknown_format_versions_are_refused() {
        let mut bytes = encode(1, ATTEMPT, PARENT, []);
        bytes[FORMAT_VERSION_AT..VERSION_AT].copy_from_slice(&2u32.to_be_bytes());
        let crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
        bytes[HEADER_CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
        let err = decode_header(&bytes, "1.changelog").expect_err("version 2");
        assert!(err.to_string().contains("format version 2"), "{err}");
    }

    type Owned = (Vec<u8>, Option<Vec<u8>>, i64);

    fn arb_records() -> impl Strategy<Value = Vec<Owned>> {
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..6),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)),
                any::<i64>(),
            ),
            0..20,
        )
    }

    proptest! {
        #[test]
        fn round_trips_any_records(
            records in arb_records(),
            version in any::<i64>(),
            attempt in any::<[u8; ATTEMPT_LEN]>(),
        ) {
            let borrowed: Vec<Record<'_>> = records
                .iter()
                .map(|(k, v, t)| record(k, v.as_deref(), *t))
                .collect();
            let bytes = encode(version, attempt, PARENT, borrowed.iter().copied());
            let (decoded, back) = decode(&bytes, "any").expect("decodes");
            prop_assert_eq!(decoded.version, version);
            prop_assert_eq!(decoded.attempt, attempt);
            prop_assert_eq!(back, borrowed);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes, "any");
            let _ = split_record(&bytes);
        }
    }
}
