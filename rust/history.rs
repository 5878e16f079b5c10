//! Serialized in-memory stores: a whole store as one byte string.
//!
//! Used where a host system owns durability, such as a per-key history kept in Spark's
//! `GroupState` (`applyInPandasWithState`): the store's keyspace — metadata, latest values and
//! segment rows, exactly as the other backends hold them — framed as
//!
//! ```text
//! [0..4)   magic "VSGH"
//! [4..8)   format version   u32 BE = 1
//! [8..12)  entry count      u32 BE
//! then per entry: key_len u32 BE, key, value_len u32 BE, value
//! last 4   crc32 of everything before it
//! ```
//!
//! Decoding checks the framing and checksum, then opens the keyspace like any store: format
//! version and configuration are verified, so a history written with another retention is
//! refused rather than reinterpreted.

use crate::backend::memory::MemoryBackend;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::store::VersionedStore;

const MAGIC: &[u8; 4] = b"VSGH";
const FORMAT_VERSION: u32 = 1;

/// Serializes an in-memory store.
///
/// # Errors
/// [`Error::InvalidArgument`] for a persistent store.
pub fn to_bytes(store: &VersionedStore) -> Result<Vec<u8>> {
    let entries = store
        .export_entries()
        .ok_or_else(|| Error::invalid("store", "only an in-memory store can be serialized"))?;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&len32(entries.len()).to_be_bytes());
    for (key, value) in &entries {
        out.extend_from_slice(&len32(key.len()).to_be_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(&len32(value.len()).to_be_bytes());
        out.extend_from_slice(value);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

fn len32(len: usize) -> u32 {
    // Keys and values are bounded by MAX_VALUE_LEN (i32) at the API boundary.
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Restores a store serialized by [`to_bytes`], checking it was made with `config`.
///
/// # Errors
/// [`Error::Corrupt`] for bad framing or checksum; [`Error::IncompatibleConfig`] or
/// [`Error::IncompatibleFormat`] as for opening a store.
pub fn from_bytes(bytes: &[u8], config: StoreConfig) -> Result<VersionedStore> {
    let corrupt = |detail: &str| Error::corrupt("serialized history", detail);
    let body_len = bytes
        .len()
        .checked_sub(4)
        .filter(|&n| n >= 12)
        .ok_or_else(|| corrupt("shorter than its header"))?;
    let (body, crc) = bytes.split_at(body_len);
    let stored_crc = u32::from_be_bytes(crc.try_into().map_err(|_| corrupt("checksum"))?);
    if crc32fast::hash(body) != stored_crc {
        return Err(corrupt("checksum mismatch"));
    }
    if &body[..4] != MAGIC {
        return Err(corrupt("bad magic"));
    }
    let read_u32 = |offset: usize| -> Result<u32> {
        body.get(offset..offset + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
            .ok_or_else(|| corrupt("truncated"))
    };
    let format = read_u32(4)?;
    if format != FORMAT_VERSION {
        return Err(corrupt(&format!("unknown format version {format}")));
    }
    let count = read_u32(8)? as usize;
    let mut offset = 12;
    let mut entries = Vec::with_capacity(count.min(1 << 16));
    let take = |offset: &mut usize| -> Result<Vec<u8>> {
        let len = read_u32(*offset)? as usize;
        let start = *offset + 4;
        let slice = body
            .get(start..start.checked_add(len).ok_or_else(|| corrupt("truncated"))?)
            .ok_or_else(|| corrupt("truncated"))?;
        *offset = start + len;
        Ok(slice.to_vec())
    };
    for _ in 0..count {
        let key = take(&mut offset)?;
        let value = take(&mut offset)?;
        entries.push((key, value));
    }
    if offset != body.len() {
        return Err(corrupt("trailing bytes"));
    }
    VersionedStore::from_memory(MemoryBackend::from_entries(entries), config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_history_and_refuses_damage_or_other_config() {
        let config = StoreConfig::new(100, Some(10)).expect("config");
        let mut store = VersionedStore::in_memory(config);
        for (ts, value) in [
            (5, Some(&b"a"[..])),
            (15, None),
            (25, Some(b"c")),
            (7, Some(b"")),
        ] {
            store.put(b"", value, ts).expect("put");
        }
        let bytes = to_bytes(&store).expect("serialize");
        let back = from_bytes(&bytes, config).expect("restore");
        assert_eq!(back.observed_stream_time(), 25);
        for t in 0..30 {
            assert_eq!(
                back.get_as_of(b"", t).ok(),
                store.get_as_of(b"", t).ok(),
                "t={t}"
            );
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(from_bytes(&bad, config).is_err(), "flip at {i}");
        }
        let other = StoreConfig::new(50, Some(10)).expect("config");
        assert!(matches!(
            from_bytes(&bytes, other),
            Err(Error::IncompatibleConfig { .. })
        ));
    }
}
