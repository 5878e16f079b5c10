//! Store metadata, under the reserved segment id `-2`.
//!
//! ```text
//! key suffix              value
//! "format_version"        u32 BE   FORMAT_VERSION; 2 is read and upgraded, any other version
//!                                  is refused
//! "config"                i64 BE history_retention_ms ‖ i64 BE segment_interval_ms
//! "observed_stream_time"  i64 BE   written with every write that advances it, or, while
//!                                  "metadata_deferred" is present, when the store settles
//! "latest_keys"           u64 BE   number of latest-value entries (persistent stores), written
//!                                  like the stream time; counted and written on open when
//!                                  missing; in format 5, followed by a u64 BE of puts that
//!                                  took the read-free path since the count was last exact, when
//!                                  there are any (`KeyCounts`)
//! "metadata_deferred"     empty    present while the two entries above may lag the data
//!                                  (`store/metadata.rs`): an open recomputes them from the data
//! "latest_ttl"            i64 BE   the TTL of newest versions (>= 1), in format-4 stores only
//! ```
//!
//! A store with a latest TTL is format 4, so that an older build refuses it instead of serving
//! keys the TTL has ended; a store without one stays format 3, byte for byte. A store becomes
//! format 5 with the first put that takes the read-free path (`format/latest_value.rs`: latest
//! values then may hold unsettled history), in the same atomic write; it stays 5.

use crate::error::{Error, Result};
use crate::state::KeyCounts;

/// The newest on-disk format this build reads and writes (1: whole rows only; 2: row appends;
/// 3: the stream time and key count may be deferred, `METADATA_DEFERRED_KEY`; 4: a latest TTL,
/// `LATEST_TTL_KEY`, written only by stores that have one; 5: latest values may hold unsettled
/// history, written by the first read-free put).
pub(crate) const FORMAT_VERSION: u32 = 5;
/// The format of a store with a latest TTL and no read-free put yet.
pub(crate) const FORMAT_WITH_TTL: u32 = 4;
/// The format of a store without a latest TTL.
pub(crate) const FORMAT_WITHOUT_TTL: u32 = 3;
/// The oldest format this build reads: a version-2 store is a version-3 store that never
/// deferred its metadata, so opening one only rewrites the version number.
pub(crate) const OLDEST_READABLE_FORMAT: u32 = 2;

pub(crate) const FORMAT_VERSION_KEY: &[u8] = b"format_version";
pub(crate) const CONFIG_KEY: &[u8] = b"config";
pub(crate) const STREAM_TIME_KEY: &[u8] = b"observed_stream_time";
pub(crate) const LATEST_KEYS_KEY: &[u8] = b"latest_keys";
pub(crate) const METADATA_DEFERRED_KEY: &[u8] = b"metadata_deferred";
pub(crate) const LATEST_TTL_KEY: &[u8] = b"latest_ttl";

/// The format a store opened as format `found` (`None`: a new store) is written in: 5 once
/// it is, else 4 with a latest TTL and 3 without.
pub(crate) fn format_version(found: Option<u32>, latest_ttl: bool) -> u32 {
    match found {
        Some(FORMAT_VERSION) => FORMAT_VERSION,
        _ if latest_ttl => FORMAT_WITH_TTL,
        _ => FORMAT_WITHOUT_TTL,
    }
}

pub(crate) fn encode_format_version(version: u32) -> Vec<u8> {
    version.to_be_bytes().to_vec()
}

pub(crate) fn encode_latest_ttl(ttl_ms: i64) -> Vec<u8> {
    ttl_ms.to_be_bytes().to_vec()
}

pub(crate) fn decode_latest_ttl(bytes: &[u8]) -> Result<i64> {
    match (bytes.len(), super::read_i64(bytes, 0)) {
        (8, Some(ttl)) if ttl >= 1 => Ok(ttl),
        _ => Err(undecodable("latest TTL")),
    }
}

pub(crate) fn decode_format_version(bytes: &[u8]) -> Result<u32> {
    fixed(bytes, "format version").map(u32::from_be_bytes)
}

pub(crate) fn encode_config(history_retention_ms: i64, segment_interval_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&history_retention_ms.to_be_bytes());
    out.extend_from_slice(&segment_interval_ms.to_be_bytes());
    out
}

/// Decodes `(history_retention_ms, segment_interval_ms)`.
pub(crate) fn decode_config(bytes: &[u8]) -> Result<(i64, i64)> {
    match (
        bytes.len(),
        super::read_i64(bytes, 0),
        super::read_i64(bytes, 8),
    ) {
        (16, Some(retention), Some(interval)) if retention >= 0 && interval >= 1 => {
            Ok((retention, interval))
        }
        _ => Err(undecodable("configuration entry")),
    }
}

/// An entry of exactly `N` bytes.
fn fixed<const N: usize>(bytes: &[u8], entry: &str) -> Result<[u8; N]> {
    bytes
        .try_into()
        .map_err(|_| Error::corrupt("store metadata", format!("{entry} is not {N} bytes")))
}

fn undecodable(entry: &str) -> Error {
    Error::corrupt("store metadata", format!("{entry} does not decode"))
}

pub(crate) fn encode_stream_time(observed_stream_time: i64) -> Vec<u8> {
    observed_stream_time.to_be_bytes().to_vec()
}

pub(crate) fn decode_stream_time(bytes: &[u8]) -> Result<i64> {
    match (bytes.len(), super::read_i64(bytes, 0)) {
        (8, Some(time)) if time >= -1 => Ok(time),
        _ => Err(undecodable("observed stream time")),
    }
}

/// 8 bytes while no put is unsettled (what formats 3 and 4 write), else 16.
pub(crate) fn encode_key_counts(counts: KeyCounts) -> Vec<u8> {
    let mut out = counts.latest_keys.to_be_bytes().to_vec();
    if counts.unsettled_puts > 0 {
        out.extend_from_slice(&counts.unsettled_puts.to_be_bytes());
    }
    out
}

pub(crate) fn decode_key_counts(bytes: &[u8]) -> Result<KeyCounts> {
    let read = |offset| super::read_u64(bytes, offset);
    match (bytes.len(), read(0), read(8)) {
        (8, Some(latest_keys), _) => Ok(KeyCounts {
            latest_keys,
            unsettled_puts: 0,
        }),
        (16, Some(latest_keys), Some(unsettled_puts)) => Ok(KeyCounts {
            latest_keys,
            unsettled_puts,
        }),
        _ => Err(undecodable("latest-key count")),
    }
}
