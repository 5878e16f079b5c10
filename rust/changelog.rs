//! Changelog files: the writes that turn checkpoint version `v − 1` into version `v`.
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
//! 64      ...   records, each:
//!                 key_len   u32 BE, key bytes
//!                 value_len i32 BE (-1 = tombstone), value bytes
//!                 timestamp i64 BE
//! ```
//!
//! Records are the *accepted* writes in the order they were applied (a delete is its tombstone
//! write). Replaying them with the normal put algorithm reproduces the state exactly: rejected
//! writes never reach the log, and an accepted write is accepted again on replay because the
//! observed stream time evolves identically.

use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"VSCL";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 64;

/// An attempt id (e.g. the bytes of a UUID).
pub type AttemptId = [u8; 16];

/// One logged write: `value = None` is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogRecord {
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The write's timestamp.
    pub timestamp: i64,
}

/// The header of a changelog file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Encodes a changelog file.
#[must_use]
pub fn encode(header: &ChangelogHeader, records: &[ChangelogRecord]) -> Vec<u8> {
    let body_len: usize = records
        .iter()
        .map(|r| 16 + r.key.len() + r.value.as_ref().map_or(0, Vec::len))
        .sum();
    let mut out = Vec::with_capacity(HEADER_LEN + body_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&header.version.to_be_bytes());
    out.extend_from_slice(&header.attempt);
    out.extend_from_slice(&header.parent_attempt);
    out.extend_from_slice(&(records.len() as u64).to_be_bytes());
    out.extend_from_slice(&[0; 8]); // checksums, filled below
    for record in records {
        // Keys and values are bounded by the store's MAX_VALUE_LEN checks before they are logged.
        out.extend_from_slice(
            &u32::try_from(record.key.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        out.extend_from_slice(&record.key);
        match &record.value {
            Some(value) => {
                out.extend_from_slice(
                    &i32::try_from(value.len()).unwrap_or(i32::MAX).to_be_bytes(),
                );
                out.extend_from_slice(value);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        out.extend_from_slice(&record.timestamp.to_be_bytes());
    }
    let body_crc = crc32fast::hash(out.get(HEADER_LEN..).unwrap_or_default());
    out[56..60].copy_from_slice(&body_crc.to_be_bytes());
    let header_crc = crc32fast::hash(&out[..60]);
    out[60..64].copy_from_slice(&header_crc.to_be_bytes());
    out
}

/// Decodes and verifies only the header (cheap: for listing and chain checks).
///
/// # Errors
/// [`Error::Corrupt`] naming `location` when the header is short, has a bad magic, version or
/// checksum.
pub fn decode_header(bytes: &[u8], location: &str) -> Result<ChangelogHeader> {
    let corrupt = |detail: &str| Error::corrupt(location, detail);
    let header = bytes
        .get(..HEADER_LEN)
        .ok_or_else(|| corrupt("changelog is shorter than its 64-byte header"))?;
    if &header[..4] != MAGIC {
        return Err(corrupt("not a verstore changelog (bad magic)"));
    }
    let stored_crc = u32::from_be_bytes(header[60..64].try_into().map_err(|_| corrupt("header"))?);
    if crc32fast::hash(&header[..60]) != stored_crc {
        return Err(corrupt("header checksum mismatch"));
    }
    let format = u32::from_be_bytes(header[4..8].try_into().map_err(|_| corrupt("header"))?);
    if format != FORMAT_VERSION {
        return Err(corrupt(&format!(
            "unknown changelog format version {format}"
        )));
    }
    let field16 = |offset: usize| -> Result<AttemptId> {
        header[offset..offset + 16]
            .try_into()
            .map_err(|_| corrupt("header"))
    };
    Ok(ChangelogHeader {
        version: crate::format::read_i64(header, 8).ok_or_else(|| corrupt("header"))?,
        attempt: field16(16)?,
        parent_attempt: field16(32)?,
        record_count: u64::from_be_bytes(header[48..56].try_into().map_err(|_| corrupt("header"))?),
    })
}

/// Decodes and verifies a whole changelog file.
///
/// # Errors
/// [`Error::Corrupt`] naming `location` for any truncation, checksum or count mismatch.
pub fn decode(bytes: &[u8], location: &str) -> Result<(ChangelogHeader, Vec<ChangelogRecord>)> {
    let header = decode_header(bytes, location)?;
    let corrupt = |detail: String| Error::corrupt(location, detail);
    let body = bytes.get(HEADER_LEN..).unwrap_or_default();
    let stored_crc = u32::from_be_bytes(
        bytes[56..60]
            .try_into()
            .map_err(|_| corrupt("header".to_owned()))?,
    );
    if crc32fast::hash(body) != stored_crc {
        return Err(corrupt(
            "body checksum mismatch (truncated or modified)".to_owned(),
        ));
    }
    let mut records = Vec::new();
    let mut offset = 0usize;
    let take = |offset: &mut usize, len: usize| -> Result<&[u8]> {
        let end = offset.checked_add(len).filter(|&e| e <= body.len());
        let slice = end.and_then(|e| body.get(*offset..e));
        let slice = slice.ok_or_else(|| {
            Error::corrupt(
                location,
                format!("record runs past the end at byte {}", HEADER_LEN + *offset),
            )
        })?;
        *offset += len;
        Ok(slice)
    };
    while offset < body.len() {
        let key_len = u32::from_be_bytes(
            take(&mut offset, 4)?
                .try_into()
                .map_err(|_| corrupt("key length".to_owned()))?,
        );
        let key = take(&mut offset, key_len as usize)?.to_vec();
        let value_len = i32::from_be_bytes(
            take(&mut offset, 4)?
                .try_into()
                .map_err(|_| corrupt("value length".to_owned()))?,
        );
        let value = match usize::try_from(value_len) {
            Ok(len) => Some(take(&mut offset, len)?.to_vec()),
            Err(_) if value_len == -1 => None,
            Err(_) => return Err(corrupt(format!("bad value length {value_len}"))),
        };
        let timestamp = i64::from_be_bytes(
            take(&mut offset, 8)?
                .try_into()
                .map_err(|_| corrupt("timestamp".to_owned()))?,
        );
        records.push(ChangelogRecord {
            key,
            value,
            timestamp,
        });
    }
    if records.len() as u64 != header.record_count {
        return Err(corrupt(format!(
            "header says {} records, body has {}",
            header.record_count,
            records.len()
        )));
    }
    Ok((header, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (ChangelogHeader, Vec<ChangelogRecord>) {
        let records = vec![
            ChangelogRecord {
                key: b"k".to_vec(),
                value: Some(b"v".to_vec()),
                timestamp: 5,
            },
            ChangelogRecord {
                key: Vec::new(),
                value: None,
                timestamp: 7,
            },
            ChangelogRecord {
                key: b"x".to_vec(),
                value: Some(Vec::new()),
                timestamp: 0,
            },
        ];
        let header = ChangelogHeader {
            version: 3,
            attempt: [1; 16],
            parent_attempt: [2; 16],
            record_count: 3,
        };
        (header, records)
    }

    #[test]
    fn round_trips() {
        let (header, records) = sample();
        let bytes = encode(&header, &records);
        assert_eq!(decode(&bytes, "3.changelog").ok(), Some((header, records)));
        assert_eq!(decode_header(&bytes, "3.changelog").ok(), Some(header));
    }

    #[test]
    fn every_truncation_and_bit_flip_is_detected() {
        let (header, records) = sample();
        let bytes = encode(&header, &records);
        for len in 0..bytes.len() {
            let err = decode(&bytes[..len], "3.changelog").expect_err("truncated");
            assert!(err.to_string().contains("3.changelog"), "{err}");
        }
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x10;
            assert!(decode(&flipped, "3.changelog").is_err(), "flip at {i}");
        }
    }
}
