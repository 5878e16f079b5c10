//! Latest-value entries: the newest version of a key when it is a value (never a tombstone).
//!
//! ```text
//! [0..8)   timestamp    i64 BE   valid-from of the newest version
//! [8..)    value        raw bytes (may be empty)
//! ```

use super::short_bytes::ShortBytes;
use crate::error::{Error, Result};

/// Encodes a latest-value entry (in place when short).
pub(crate) fn encode(timestamp: i64, value: &[u8]) -> ShortBytes {
    ShortBytes::from_parts(&timestamp.to_be_bytes(), value)
}

/// Decodes a latest-value entry into `(timestamp, value)`.
pub(crate) fn decode(bytes: &[u8]) -> Result<(i64, &[u8])> {
    let timestamp = super::read_i64(bytes, 0).ok_or_else(|| {
        Error::corrupt(
            "latest-value store",
            format!(
                "entry of {} bytes is shorter than its 8-byte timestamp",
                bytes.len()
            ),
        )
    })?;
    if timestamp < 0 {
        return Err(Error::corrupt(
            "latest-value store",
            format!("negative timestamp {timestamp}"),
        ));
    }
    Ok((timestamp, bytes.get(8..).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_values_including_empty() {
        for (ts, value) in [(0, &b""[..]), (7, b"x"), (i64::MAX, b"hello")] {
            let bytes = encode(ts, value);
            assert_eq!(decode(&bytes).ok(), Some((ts, value)));
        }
    }

    #[test]
    fn short_or_negative_entries_are_corrupt() {
        assert!(matches!(decode(b"1234567"), Err(Error::Corrupt { .. })));
        assert!(matches!(
            decode(&encode(-5, b"v")),
            Err(Error::Corrupt { .. })
        ));
    }
}
