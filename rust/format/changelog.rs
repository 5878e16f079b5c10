//! Changelog files: the accepted writes that turn checkpoint version `v − 1` into version `v`.
//!
//! A changelog is a fixed-size header and a body of records:
//!
//! ```text
//! offset  size  field
//! 0       4     magic            "VSCL"
//! 4       4     format version   u32 BE = 1, or 2 when the body holds a stream-time record
//! 8       8     version          i64 BE   the version this changelog produces
//! 16      16    attempt id       the attempt that wrote it (opaque, e.g. a UUID)
//! 32      16    parent attempt   the attempt that wrote version − 1 (zeros for version 1)
//! 48      8     record count     u64 BE
//! 56      4     body crc32       over every byte from offset 64 to the end
//! 60      4     header crc32     over bytes 0..60
//! 64      ...   records, back to back
//! ```
//!
//! Each record is one accepted write (a delete is its tombstone write), or, in format version 2,
//! an advance of observed stream time by a call that stored no version
//! (`VersionedStore::advance_stream_time`):
//!
//! ```text
//! offset      size  field
//! 0           4     key_len     u32 BE   (0 for a stream-time record)
//! 4           k     key
//! 4 + k       4     value_len   i32 BE   -1 = tombstone, -2 = stream time, 0 = empty value,
//!                                        v = v bytes
//! 8 + k       v     value       (v = max(value_len, 0))
//! 8 + k + v   8     timestamp   i64 BE   the write's time, or the new stream time
//! ```
//!
//! Records are the changes in the order they were applied: replaying them with the normal put
//! algorithm (and the stream-time advance) reproduces the state exactly (`docs/semantics.md`
//! §2.10). Only a changelog holding a stream-time record is written as format version 2, so
//! that every other changelog keeps the bytes of version 1, which older builds read. The body
//! is produced record by record as writes are accepted, its checksum computed on the way, so
//! the header — which holds the count and that checksum — is encoded last ([`encode_header`]).
//! Reading goes the other way: [`decode_header`] checks the header alone (enough for listings),
//! and [`split_record`] takes one record off the front of a byte string, telling a record cut
//! short (read more) from a malformed one, so that a reader can decode a file chunk by chunk.
//!
//! Checkpoints in the field hold these bytes: any change to them is a new format version. The
//! record count of the header counts every record, stream-time records included.

use std::mem::size_of;

use super::{read_array, read_i32, read_i64, read_u32, read_u64};
use crate::error::{Error, Result};

const MAGIC: [u8; 4] = *b"VSCL";
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
/// `value_len` of a stream-time record (format version 2).
const STREAM_TIME_LEN: i32 = -2;
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

/// The layout version of a changelog file: which records its body may hold. Later versions
/// may hold more (`Ord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Format {
    /// Writes only: the bytes of every changelog before stream-time records existed.
    Writes = 1,
    /// Writes and stream-time records. A reader of version 1 would take a `-2` for damage, so
    /// only a changelog that holds one is written as version 2.
    WithStreamTime = 2,
}

impl Format {
    /// The format a body of this format needs once it also holds `record`.
    pub(crate) fn with(self, record: Record<'_>) -> Self {
        match record {
            Record::Put(_) => self,
            Record::StreamTime(_) => Self::WithStreamTime,
        }
    }

    fn from_number(number: u32) -> Option<Self> {
        match number {
            1 => Some(Self::Writes),
            2 => Some(Self::WithStreamTime),
            _ => None,
        }
    }

    fn number(self) -> u32 {
        self as u32
    }
}

/// A header as stored: its fields, its layout version and the checksum of the body it heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredHeader {
    pub(crate) fields: ChangelogHeader,
    pub(crate) format: Format,
    pub(crate) body_crc: u32,
}

/// One accepted write, borrowed from the bytes it was decoded from: `value = None` is a
/// tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Put<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) timestamp: i64,
}

/// One logged change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// An accepted write.
    Put(Put<'a>),
    /// Observed stream time advanced to this time by a call that stored no version.
    StreamTime(i64),
}

/// Writes `bytes` at offset `at` of a header.
fn put(header: &mut [u8; HEADER_LEN], at: usize, bytes: &[u8]) {
    if let Some(slot) = header.get_mut(at..at + bytes.len()) {
        slot.copy_from_slice(bytes);
    }
}

/// Encodes the header of a changelog of `format` whose body has checksum `body_crc`.
pub(crate) fn encode_header(
    header: &ChangelogHeader,
    format: Format,
    body_crc: u32,
) -> [u8; HEADER_LEN] {
    let mut out = [0; HEADER_LEN];
    put(&mut out, MAGIC_AT, &MAGIC);
    put(&mut out, FORMAT_VERSION_AT, &format.number().to_be_bytes());
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
    let number = field(read_u32(&header, FORMAT_VERSION_AT), location)?;
    let format = Format::from_number(number)
        .ok_or_else(|| corrupt(&format!("unknown changelog format version {number}")))?;
    Ok(StoredHeader {
        fields: ChangelogHeader {
            version: field(read_i64(&header, VERSION_AT), location)?,
            attempt: field(read_array(&header, ATTEMPT_AT), location)?,
            parent_attempt: field(read_array(&header, PARENT_ATTEMPT_AT), location)?,
            record_count: field(read_u64(&header, RECORD_COUNT_AT), location)?,
        },
        format,
        body_crc: field(read_u32(&header, BODY_CRC_AT), location)?,
    })
}

/// A field of a header that was read whole (never missing: a `Corrupt` rather than a panic).
fn field<T>(value: Option<T>, location: &str) -> Result<T> {
    value.ok_or_else(|| Error::corrupt(location, "header"))
}

impl Record<'_> {
    /// The length of the record's encoding.
    pub(crate) fn encoded_len(self) -> usize {
        match self {
            Self::Put(put) => RECORD_OVERHEAD + put.key.len() + put.value.map_or(0, <[u8]>::len),
            Self::StreamTime(_) => RECORD_OVERHEAD,
        }
    }
}

/// Appends the encoding of `record` to `out`.
pub(crate) fn encode_record(record: Record<'_>, out: &mut Vec<u8>) {
    let (key, value_len, value, timestamp): (&[u8], i32, &[u8], i64) = match record {
        // Keys and values are bounded by the store's MAX_VALUE_LEN checks before they are logged.
        Record::Put(put) => match put.value {
            Some(value) => {
                let len = i32::try_from(value.len()).unwrap_or(i32::MAX);
                (put.key, len, value, put.timestamp)
            }
            None => (put.key, TOMBSTONE_LEN, &[], put.timestamp),
        },
        Record::StreamTime(timestamp) => (&[], STREAM_TIME_LEN, &[], timestamp),
    };
    let key_len = u32::try_from(key.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&key_len.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&value_len.to_be_bytes());
    out.extend_from_slice(value);
    out.extend_from_slice(&timestamp.to_be_bytes());
}

/// Takes the record at the start of `bytes`, the body of a changelog of `format`:
/// `Ok(Some((record, its length)))`, or `Ok(None)` when `bytes` ends before the record does (a
/// reader then needs more bytes).
///
/// # Errors
/// A description of a record that no encoder of `format` writes (a value length below -2, a
/// stream-time record in format 1 or with a key).
pub(crate) fn split_record(
    bytes: &[u8],
    format: Format,
) -> Result<Option<(Record<'_>, usize)>, String> {
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
        Err(_) if value_len == STREAM_TIME_LEN => {
            check_stream_time_record(key, format)?;
            let Some(timestamp) = read_i64(bytes, value_at) else {
                return Ok(None);
            };
            let len = value_at + size_of::<i64>();
            return Ok(Some((Record::StreamTime(timestamp), len)));
        }
        Err(_) => return Err(format!("bad value length {value_len}")),
    };
    let Some(timestamp) = read_i64(bytes, timestamp_at) else {
        return Ok(None);
    };
    let record = Record::Put(Put {
        key,
        value,
        timestamp,
    });
    Ok(Some((record, timestamp_at + size_of::<i64>())))
}

/// A stream-time record is valid in format 2 only, and has no key.
fn check_stream_time_record(key: &[u8], format: Format) -> Result<(), String> {
    if format != Format::WithStreamTime {
        return Err(format!(
            "a stream-time record (value length {STREAM_TIME_LEN}) in a changelog of format \
             version {}",
            format.number()
        ));
    }
    if !key.is_empty() {
        return Err(format!(
            "a stream-time record with a {}-byte key (it has none)",
            key.len()
        ));
    }
    Ok(())
}

/// Encodes a whole changelog file, of the format its records need.
pub(crate) fn encode<'a>(
    version: i64,
    attempt: AttemptId,
    parent_attempt: AttemptId,
    records: impl IntoIterator<Item = Record<'a>>,
) -> Vec<u8> {
    let mut out = vec![0; HEADER_LEN];
    let mut record_count = 0;
    let mut format = Format::Writes;
    for record in records {
        format = format.with(record);
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
        slot.copy_from_slice(&encode_header(&header, format, body_crc));
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
        let (record, len) = split_record(rest, stored.format)
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
        Record::Put(Put {
            key,
            value,
            timestamp,
        })
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
            let body_len: usize = records.iter().map(|r| r.encoded_len()).sum();
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
        let first = record(b"key", Some(b"value"), 42).encoded_len();
        for len in 0..first {
            assert_eq!(
                split_record(&bytes[..len], Format::Writes),
                Ok(None),
                "cut at {len}"
            );
        }
        let (got, len) = split_record(&bytes, Format::Writes)
            .expect("valid")
            .expect("whole");
        assert_eq!((got, len), (record(b"key", Some(b"value"), 42), first));
        let (got, len) = split_record(&bytes[first..], Format::Writes)
            .expect("valid")
            .expect("whole");
        assert_eq!(
            (got, len),
            (record(b"", None, 1), record(b"", None, 1).encoded_len())
        );
        // a value length below -2 is malformed in any format, however many bytes follow
        let mut bad = Vec::new();
        encode_record(record(b"k", None, 1), &mut bad);
        bad[KEY_AT + 1..KEY_AT + 1 + 4].copy_from_slice(&(-3i32).to_be_bytes());
        for format in [Format::Writes, Format::WithStreamTime] {
            assert_eq!(
                split_record(&bad, format),
                Err("bad value length -3".to_owned())
            );
        }
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

    /// `bytes` with its header's format version set to `number` (checksum fixed).
    fn with_format_number(mut bytes: Vec<u8>, number: u32) -> Vec<u8> {
        bytes[FORMAT_VERSION_AT..VERSION_AT].copy_from_slice(&number.to_be_bytes());
        let crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
        bytes[HEADER_CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn unknown_format_versions_are_refused() {
        for number in [0, 3, u32::MAX] {
            let bytes = with_format_number(encode(1, ATTEMPT, PARENT, []), number);
            let err = decode_header(&bytes, "1.changelog").expect_err("unknown version");
            let expected = format!("format version {number}");
            assert!(err.to_string().contains(&expected), "{err}");
        }
    }

    /// A stream-time record: no key, `value_len = -2`, the new stream time. Its changelog is
    /// format version 2; the record count counts it.
    #[test]
    fn a_stream_time_record_makes_format_version_2_byte_for_byte() {
        let expected = hex("5653434C 00000002 0000000000000003
             11111111111111111111111111111111
             22222222222222222222222222222222
             0000000000000002 0BA9702E CF306105
             00000001 6B 00000001 76 0000000000000005
             00000000 FFFFFFFE 0000000000000009");
        let records = [record(b"k", Some(b"v"), 5), Record::StreamTime(9)];
        let bytes = encode(3, ATTEMPT, PARENT, records);
        assert_eq!(bytes, expected);
        let stored = decode_header(&bytes, "3.changelog").expect("header");
        assert_eq!(
            (stored.format, stored.fields),
            (Format::WithStreamTime, header(2))
        );
        let (decoded, back) = decode(&bytes, "3.changelog").expect("decodes");
        assert_eq!((decoded, back.as_slice()), (header(2), &records[..]));
        let body_len: usize = records.iter().map(|r| r.encoded_len()).sum();
        assert_eq!(bytes.len(), HEADER_LEN + body_len);
    }

    /// Writes alone stay format version 1, whatever else the build can write; a reader takes
    /// a version-2 file without stream-time records too.
    #[test]
    fn writes_alone_stay_format_version_1_and_version_2_reads_them() {
        let records = [record(b"k", Some(b"v"), 5), record(b"x", None, 7)];
        let bytes = encode(3, ATTEMPT, PARENT, records);
        assert_eq!(bytes[FORMAT_VERSION_AT..VERSION_AT], 1u32.to_be_bytes());
        let two = with_format_number(bytes, 2);
        let (decoded, back) = decode(&two, "3.changelog").expect("decodes");
        assert_eq!((decoded, back.as_slice()), (header(2), &records[..]));
    }

    /// A `-2` record in a version-1 file, or one with a key, is damage naming the file, read
    /// whole or record by record.
    #[test]
    fn a_misplaced_or_keyed_stream_time_record_is_corrupt() {
        let advanced = encode(3, ATTEMPT, PARENT, [Record::StreamTime(9)]);
        let in_version_1 = with_format_number(advanced.clone(), 1);
        let err = decode(&in_version_1, "3.changelog").expect_err("version 1");
        assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("3.changelog"), "{text}");
        assert!(text.contains("format version 1"), "{text}");
        let body = &advanced[HEADER_LEN..];
        assert!(split_record(body, Format::Writes).is_err());
        // the same record with a key
        let mut keyed_body = Vec::new();
        keyed_body.extend_from_slice(&1u32.to_be_bytes());
        keyed_body.push(b'k');
        keyed_body.extend_from_slice(&STREAM_TIME_LEN.to_be_bytes());
        keyed_body.extend_from_slice(&9i64.to_be_bytes());
        assert_eq!(
            split_record(&keyed_body, Format::WithStreamTime),
            Err("a stream-time record with a 1-byte key (it has none)".to_owned())
        );
        let mut keyed = advanced[..HEADER_LEN].to_vec();
        keyed.extend_from_slice(&keyed_body);
        let body_crc = crc32fast::hash(&keyed_body);
        keyed[BODY_CRC_AT..HEADER_CRC_AT].copy_from_slice(&body_crc.to_be_bytes());
        let keyed = with_format_number(keyed, 2);
        let err = decode(&keyed, "4.changelog").expect_err("a key");
        assert!(err.to_string().contains("4.changelog"), "{err}");
        assert!(err.to_string().contains("1-byte key"), "{err}");
    }

    #[test]
    fn a_stream_time_record_cut_short_asks_for_more_bytes() {
        let mut bytes = Vec::new();
        encode_record(Record::StreamTime(i64::MAX), &mut bytes);
        assert_eq!(bytes.len(), 16);
        for len in 0..bytes.len() {
            let cut = split_record(&bytes[..len], Format::WithStreamTime);
            assert_eq!(cut, Ok(None), "cut at {len}");
        }
        let whole = split_record(&bytes, Format::WithStreamTime);
        assert_eq!(whole, Ok(Some((Record::StreamTime(i64::MAX), 16))));
    }

    /// A write `(key, value, timestamp)`, or a stream-time record (`None`).
    type Owned = Option<(Vec<u8>, Option<Vec<u8>>, i64)>;

    fn arb_records() -> impl Strategy<Value = Vec<(Owned, i64)>> {
        let write = (
            proptest::collection::vec(any::<u8>(), 0..6),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)),
            any::<i64>(),
        );
        let owned = prop_oneof![4 => write.prop_map(Some), 1 => Just(None)];
        proptest::collection::vec((owned, any::<i64>()), 0..20)
    }

    fn borrow(records: &[(Owned, i64)]) -> Vec<Record<'_>> {
        records
            .iter()
            .map(|(owned, advanced_to)| match owned {
                Some((k, v, t)) => record(k, v.as_deref(), *t),
                None => Record::StreamTime(*advanced_to),
            })
            .collect()
    }

    proptest! {
        #[test]
        fn round_trips_any_records(
            records in arb_records(),
            version in any::<i64>(),
            attempt in any::<[u8; ATTEMPT_LEN]>(),
        ) {
            let borrowed = borrow(&records);
            let bytes = encode(version, attempt, PARENT, borrowed.iter().copied());
            let (decoded, back) = decode(&bytes, "any").expect("decodes");
            prop_assert_eq!(decoded.version, version);
            prop_assert_eq!(decoded.attempt, attempt);
            prop_assert_eq!(decoded.record_count, borrowed.len() as u64);
            let advances = borrowed.iter().any(|r| matches!(r, Record::StreamTime(_)));
            let number = if advances { 2u32 } else { 1 };
            prop_assert_eq!(&bytes[FORMAT_VERSION_AT..VERSION_AT], &number.to_be_bytes()[..]);
            prop_assert_eq!(back, borrowed);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes, "any");
            let _ = split_record(&bytes, Format::Writes);
            let _ = split_record(&bytes, Format::WithStreamTime);
        }
    }
}
