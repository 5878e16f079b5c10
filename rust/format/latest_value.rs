//! Latest-value entries: the newest version of a key when it is a value (never a tombstone),
//! and, from format 5 on, the versions it replaced that have not moved to their history rows
//! yet (its *unsettled history*).
//!
//! ```text
//! plain (every format)
//! [0..8)      timestamp    i64 BE >= 0   valid-from of the newest version
//! [8..)       value        raw bytes (may be empty)
//!
//! with unsettled history (format 5)
//! [0..8)      timestamp | 1 << 63        the top bit marks this layout
//! [8]         layout       u8 = 1
//! [9..13)     value_len    u32 BE
//! [13..13+n)  value
//! [13+n..)    history      row appends (segment_value::encode_append), oldest first: each
//!                          valid until the next one's timestamp, the last until `timestamp`
//! ```
//!
//! A put that knows its version is the key's newest without reading (docs/semantics.md §2.16)
//! writes a *push* under the key as a RocksDB merge operand; pushes concatenate:
//!
//! ```text
//! [0..8)      timestamp    i64 BE
//! [8..12)     value_len    u32 BE
//! [12..12+n)  value                     (then the next push)
//! ```
//!
//! [`merge`] applies pushes to the stored entry in write order: a push newer than the newest
//! version moves that version into the history (as an append valid until the push's time); one
//! at the same time replaces its value. An entry stays plain while its history is empty, so a
//! store that never pushes is byte for byte what format 3 wrote. A merge whose inputs do not
//! follow each other yields a poisoned entry (layout byte `FF`) that every read reports as
//! corrupt, as rows do: RocksDB's merges must not fail.

use super::segment_value::{Entry, decode_append, encode_append};
use super::short_bytes::ShortBytes;
use super::{read_i64, read_u32};
use crate::error::{Error, Result};

/// The top bit of the first 8 bytes: set, the entry carries unsettled history.
const HISTORY_MARK: i64 = i64::MIN;
/// The layout byte of an entry with unsettled history.
const HISTORY_LAYOUT: u8 = 1;
/// The layout byte of a merge that could not apply its pushes.
const POISON_LAYOUT: u8 = 0xFF;
/// Timestamp, layout byte and value length.
const HISTORY_HEADER_LEN: usize = 13;
/// Timestamp and value length.
const PUSH_HEADER_LEN: usize = 12;
/// A row append's header: timestamp, valid-to, value size.
const APPEND_LEN: usize = 20;

/// A decoded latest-value entry: the newest version and the unsettled history behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Latest<'a> {
    pub(crate) timestamp: i64,
    pub(crate) value: &'a [u8],
    /// Row appends, oldest first, checked by [`decode`] to follow each other up to `timestamp`.
    history: &'a [u8],
}

/// A version of the unsettled history: valid in `[timestamp, valid_to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replaced<'a> {
    pub(crate) timestamp: i64,
    pub(crate) valid_to: i64,
    pub(crate) value: &'a [u8],
    /// The version as a row append (`segment_value::encode_append`), ready for its row.
    pub(crate) append: &'a [u8],
}

impl<'a> Latest<'a> {
    /// Whether versions it replaced are still in the entry.
    pub(crate) fn has_history(&self) -> bool {
        !self.history.is_empty()
    }

    /// The unsettled history, oldest first.
    pub(crate) fn history(&self) -> impl Iterator<Item = Replaced<'a>> + 'a {
        let mut rest = self.history;
        std::iter::from_fn(move || {
            let (entry, valid_to, tail) = decode_append(rest)?;
            let append = rest.get(..rest.len() - tail.len())?;
            rest = tail;
            Some(Replaced {
                timestamp: entry.timestamp,
                valid_to,
                value: entry.value.unwrap_or_default(),
                append,
            })
        })
    }

    /// The start of the oldest version the entry holds (its newest's when it has no history):
    /// every version older than it is in the history rows.
    pub(crate) fn oldest(&self) -> i64 {
        self.history()
            .next()
            .map_or(self.timestamp, |v| v.timestamp)
    }

    /// The version of the unsettled history valid at `t` (`None` when `t` is before it, or at
    /// or after the newest version).
    pub(crate) fn replaced_at(&self, t: i64) -> Option<Replaced<'a>> {
        self.history()
            .take_while(|v| v.timestamp <= t)
            .last()
            .filter(|v| t < v.valid_to)
    }
}

/// Encodes a plain latest-value entry (in place when short).
pub(crate) fn encode(timestamp: i64, value: &[u8]) -> ShortBytes {
    ShortBytes::from_parts(&timestamp.to_be_bytes(), value)
}

/// Encodes a push of `value` at `timestamp` onto `out` (pushes concatenate).
pub(crate) fn encode_push(timestamp: i64, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&timestamp.to_be_bytes());
    // Values are bounded by `MAX_VALUE_LEN` (i32), checked at the API boundary.
    out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(value);
}

/// The pushes of `operand`, in write order: `(timestamp, value)`; `None` ends a push cut short.
pub(crate) fn pushes(operand: &[u8]) -> impl Iterator<Item = Option<(i64, &[u8])>> + '_ {
    let mut rest = operand;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let push = split_push(rest);
        rest = push.map_or(&[][..], |(_, _, tail)| tail);
        Some(push.map(|(t, v, _)| (t, v)))
    })
}

fn split_push(bytes: &[u8]) -> Option<(i64, &[u8], &[u8])> {
    let timestamp = read_i64(bytes, 0)?;
    let len = usize::try_from(read_u32(bytes, 8)?).ok()?;
    let end = PUSH_HEADER_LEN.checked_add(len)?;
    let value = bytes.get(PUSH_HEADER_LEN..end)?;
    (timestamp >= 0).then_some((timestamp, value, bytes.get(end..)?))
}

/// Whether the entry is in the layout with unsettled history (or a poisoned merge), from its
/// first byte alone.
pub(crate) fn is_marked(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|b| b & 0x80 != 0)
}

/// The newest version's timestamp, read from the first 8 bytes alone (`None`: the entry is too
/// short). For callers that need nothing else (a compaction filter): no validation.
pub(crate) fn timestamp_of(bytes: &[u8]) -> Option<i64> {
    read_i64(bytes, 0).map(|raw| if raw < 0 { raw ^ HISTORY_MARK } else { raw })
}

fn corrupt(detail: impl Into<String>) -> Error {
    Error::corrupt("latest-value store", detail)
}

/// Decodes a latest-value entry of either layout, checking its unsettled history.
pub(crate) fn decode(bytes: &[u8]) -> Result<Latest<'_>> {
    decode_counted(bytes).map(|(latest, _)| latest)
}

/// [`decode`], and how many versions the unsettled history holds.
fn decode_counted(bytes: &[u8]) -> Result<(Latest<'_>, usize)> {
    let raw = read_i64(bytes, 0).ok_or_else(|| {
        corrupt(format!(
            "entry of {} bytes is shorter than its 8-byte timestamp",
            bytes.len()
        ))
    })?;
    if raw >= 0 {
        let latest = Latest {
            timestamp: raw,
            value: bytes.get(8..).unwrap_or_default(),
            history: &[],
        };
        return Ok((latest, 0));
    }
    match bytes.get(8) {
        Some(&HISTORY_LAYOUT) => {}
        Some(&POISON_LAYOUT) => {
            return Err(corrupt(
                "a merge of pushes that do not follow the stored entry",
            ));
        }
        other => return Err(corrupt(format!("unknown entry layout {other:?}"))),
    }
    let timestamp = raw ^ HISTORY_MARK;
    let value_len = read_u32(bytes, 9)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| corrupt("entry is shorter than its header"))?;
    let value_end = HISTORY_HEADER_LEN
        .checked_add(value_len)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| corrupt(format!("value of {value_len} bytes overruns the entry")))?;
    let latest = Latest {
        timestamp,
        value: bytes.get(HISTORY_HEADER_LEN..value_end).unwrap_or_default(),
        history: bytes.get(value_end..).unwrap_or_default(),
    };
    let versions = check_history(&latest)?;
    Ok((latest, versions))
}

/// The unsettled history holds values (no tombstone: a tombstone is never a latest value),
/// each ending where the next one starts, the last where the newest version starts. Returns
/// how many it holds.
fn check_history(latest: &Latest<'_>) -> Result<usize> {
    let mut rest = latest.history;
    let mut expected_start: Option<i64> = None;
    let mut versions = 0;
    while !rest.is_empty() {
        versions += 1;
        let (entry, valid_to, tail) =
            decode_append(rest).ok_or_else(|| corrupt("unsettled history is cut short"))?;
        let follows = expected_start.is_none_or(|start| start == entry.timestamp);
        if entry.value.is_none() || entry.timestamp < 0 || entry.timestamp >= valid_to || !follows {
            return Err(corrupt(
                "unsettled history versions do not follow each other",
            ));
        }
        expected_start = Some(valid_to);
        rest = tail;
    }
    match expected_start {
        Some(end) if end != latest.timestamp => Err(corrupt(
            "unsettled history does not end at the newest version",
        )),
        _ => Ok(versions),
    }
}

/// A merged entry and how many versions its unsettled history holds.
pub(crate) struct Merged {
    pub(crate) bytes: Vec<u8>,
    pub(crate) history_len: usize,
}

/// The entry that results from applying `operands` (each a concatenation of pushes), in order,
/// to `base` (`None`: no entry). Never fails: inputs that do not follow each other (a push
/// older than the newest version, a base or push that does not decode) give a poisoned entry.
pub(crate) fn merge<'o>(
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]> + Clone,
) -> Merged {
    apply_pushes(base, operands.clone()).unwrap_or_else(|| {
        let mut bytes = HISTORY_MARK.to_be_bytes().to_vec();
        bytes.push(POISON_LAYOUT);
        bytes.extend_from_slice(base.unwrap_or_default());
        for operand in operands {
            bytes.extend_from_slice(operand);
        }
        Merged {
            bytes,
            history_len: 0,
        }
    })
}

/// Applies the pushes in one pass over them, then writes the entry in one allocation: the
/// base's history is copied once, as it is (a merge runs at every read of an entry with pushes
/// in RocksDB, and at compactions).
fn apply_pushes<'o>(
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]>,
) -> Option<Merged> {
    let (base, base_len) = match base {
        Some(bytes) => {
            let (latest, versions) = decode_counted(bytes).ok()?;
            (Some(latest), versions)
        }
        None => (None, 0),
    };
    let mut newest: Option<(i64, &[u8])> = base.map(|b| (b.timestamp, b.value));
    // The versions pushes move behind the newest: `(timestamp, value, valid_to)`.
    let mut moved: Vec<(i64, &[u8], i64)> = Vec::new();
    for operand in operands {
        for push in pushes(operand) {
            let (t, value) = push?;
            if let Some((newest_t, newest_value)) = newest {
                if t < newest_t {
                    return None;
                }
                if t > newest_t {
                    moved.push((newest_t, newest_value, t));
                }
            }
            newest = Some((t, value));
        }
    }
    let (timestamp, value) = newest?;
    let history = base.map_or(&[][..], |b| b.history);
    Some(Merged {
        bytes: encode_entry(timestamp, value, history, &moved),
        history_len: base_len + moved.len(),
    })
}

/// An entry: the newest version, `history` (appends, oldest first) and then the `moved`
/// versions as appends; plain when both are empty.
fn encode_entry(
    timestamp: i64,
    value: &[u8],
    history: &[u8],
    moved: &[(i64, &[u8], i64)],
) -> Vec<u8> {
    if history.is_empty() && moved.is_empty() {
        return encode(timestamp, value).into_vec();
    }
    let moved_len: usize = moved.iter().map(|(_, v, _)| APPEND_LEN + v.len()).sum();
    let mut out = Vec::with_capacity(HISTORY_HEADER_LEN + value.len() + history.len() + moved_len);
    out.extend_from_slice(&(timestamp | HISTORY_MARK).to_be_bytes());
    out.push(HISTORY_LAYOUT);
    out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(value);
    out.extend_from_slice(history);
    for &(t, v, valid_to) in moved {
        let entry = Entry {
            timestamp: t,
            value: Some(v),
        };
        encode_append(entry, valid_to, &mut out);
    }
    out
}

/// An entry holding `history` (appends, oldest first, ending at `timestamp`), plain when empty.
#[cfg(test)]
pub(crate) fn encode_with_history(timestamp: i64, value: &[u8], history: &[u8]) -> Vec<u8> {
    encode_entry(timestamp, value, history, &[])
}

#[cfg(test)]
mod tests;
