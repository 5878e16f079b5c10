//! Checking a row's bytes: its header, its index walked without a branch per entry, its end.

use super::{HEADER_LEN, INDEX_ENTRY_LEN, TOMBSTONE_SIZE};
use crate::error::{Error, Result};
use crate::format::{read_i32, read_i64};

/// A row's index, newest first: (timestamp, size) pairs from the header on, until the entry at
/// `min_timestamp`, each checked against the one before it.
pub(super) fn read_index(
    bytes: &[u8],
    min_timestamp: i64,
    corrupt: &dyn Fn(String) -> Error,
) -> Result<Vec<(i64, i32)>> {
    let mut index: Vec<(i64, i32)> = Vec::new();
    let mut offset = HEADER_LEN;
    // `None` before the first entry: a newest version may start at `i64::MAX`.
    let mut previous: Option<i64> = None;
    loop {
        let (Some(timestamp), Some(size)) = (read_i64(bytes, offset), read_i32(bytes, offset + 8))
        else {
            return Err(corrupt(format!(
                "index entry {} at offset {offset} is truncated",
                index.len()
            )));
        };
        if previous.is_some_and(|p| timestamp >= p)
            || timestamp < min_timestamp
            || size < TOMBSTONE_SIZE
        {
            return Err(corrupt(format!(
                "index entry {} has timestamp {timestamp} and size {size}",
                index.len()
            )));
        }
        index.push((timestamp, size));
        previous = Some(timestamp);
        offset += INDEX_ENTRY_LEN;
        if timestamp == min_timestamp {
            return Ok(index);
        }
    }
}

/// A row's header and index, validated as [`SegmentRow::decode`](super::SegmentRow::decode) validates them, without
/// allocating.
pub(super) struct Scanned {
    pub(super) next_timestamp: i64,
    pub(super) min_timestamp: i64,
    /// Offset of the first value byte (the end of the index).
    pub(super) values_start: usize,
    pub(super) degenerate: bool,
}

/// Where a time `t` falls in a row's index: the entries newer than `t` (the version valid at
/// `t`, if the row reaches back that far, is entry `newer`) and their value bytes (the newest
/// values end the row).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Position {
    pub(super) newer: usize,
    pub(super) newer_values: usize,
}

/// One index entry: `(timestamp, value_size)`.
pub(super) fn index_entry(entry: &[u8; INDEX_ENTRY_LEN]) -> (i64, i32) {
    let (timestamp, size) = entry.split_at(8);
    let timestamp = timestamp.try_into().map_or(i64::MIN, i64::from_be_bytes);
    let size = size.try_into().map_or(i32::MIN, i32::from_be_bytes);
    (timestamp, size)
}

/// An index walk in progress: the checks so far and the value bytes of the entries walked.
struct Walk {
    /// Every entry walked is older than the one before it and has a size of at least -1.
    valid: bool,
    previous: i64,
    values_len: usize,
}

impl Walk {
    /// Walks `entries` up to the first one whose timestamp satisfies `stop` (not walked) and
    /// returns its position (`entries.len()` when none does). `entries` may run past the end
    /// of the index (into the values): `stop` must hold at the entry that ends it.
    ///
    /// This loop is the cost of an as-of read into a long row (a hot key's 1 000 versions are
    /// 12 KB of index), so it has one branch, the exit: the checks are accumulated with `&`.
    /// (Unrolling it four entries to a branch measured no faster: it runs at the speed of
    /// reading the index from memory.)
    #[expect(
        clippy::needless_bitwise_bool,
        reason = "`&` on purpose: both checks without a branch"
    )]
    fn until(&mut self, entries: &[[u8; INDEX_ENTRY_LEN]], stop: impl Fn(i64) -> bool) -> usize {
        // Locals, not fields, in the loop: they stay in registers.
        let (mut valid, mut previous, mut values_len) =
            (self.valid, self.previous, self.values_len);
        let mut end = entries.len();
        for (position, entry) in entries.iter().enumerate() {
            let (timestamp, size) = index_entry(entry);
            if stop(timestamp) {
                end = position;
                break;
            }
            valid &= (timestamp < previous) & (size >= TOMBSTONE_SIZE);
            // Saturating: a corrupt index must not overflow (it fails the length check).
            values_len = values_len.saturating_add(value_len(size));
            previous = timestamp;
        }
        (self.valid, self.previous, self.values_len) = (valid, previous, values_len);
        end
    }
}

/// The number of value bytes of an entry of `size` (a tombstone has none), without a branch.
fn value_len(size: i32) -> usize {
    // Lossless: a `u32` fits in `usize` on every target RocksDB builds for.
    size.max(0).unsigned_abs() as usize
}

/// Walks the index once, validating it, and finds where each of `times` (in descending order)
/// falls in it: `positions[k]` for `times[k]`.
///
/// The entries newer than a time come first (the index is newest first), so one walk passes
/// the times one after the other, then goes on down to the entry at `min_timestamp`, which ends
/// the index. Strictly decreasing timestamps that end at `min_timestamp` are all at or above
/// it, so only the order, the sizes and the end are checked.
pub(super) fn scan(bytes: &[u8], times: &[i64], positions: &mut [Position]) -> Option<Scanned> {
    let next_timestamp = read_i64(bytes, 0)?;
    let min_timestamp = read_i64(bytes, 8)?;
    if min_timestamp < 0 || next_timestamp < min_timestamp {
        return None;
    }
    let (index, _) = bytes.get(HEADER_LEN..)?.as_chunks::<INDEX_ENTRY_LEN>();
    let (first, mut rest) = index.split_first()?;
    // The newest entry has nothing newer to be older than: it may start at `i64::MAX`.
    let (newest_ts, newest_size) = index_entry(first);
    if newest_ts < min_timestamp {
        return None;
    }
    let mut walk = Walk {
        valid: newest_size >= TOMBSTONE_SIZE,
        previous: newest_ts,
        values_len: value_len(newest_size),
    };
    // Entries walked so far: the newest, then those before `rest`.
    let mut walked = 1;
    for (&t, position) in times.iter().zip(positions.iter_mut()) {
        // Never past the end of the index: stop at `min_timestamp` too.
        let bound = t.max(min_timestamp);
        if newest_ts <= bound {
            *position = Position::default();
            continue;
        }
        let passed = walk.until(rest, |timestamp| timestamp <= bound);
        walked += passed;
        rest = rest.get(passed..)?;
        *position = Position {
            newer: walked,
            newer_values: walk.values_len,
        };
    }
    let count = if newest_ts == min_timestamp {
        1
    } else {
        let passed = walk.until(rest, |timestamp| timestamp <= min_timestamp);
        let (timestamp, size) = index_entry(rest.get(passed)?);
        if timestamp != min_timestamp || timestamp >= walk.previous || size < TOMBSTONE_SIZE {
            return None;
        }
        walk.values_len = walk.values_len.saturating_add(value_len(size));
        walked + passed + 1
    };
    let values_start = HEADER_LEN + INDEX_ENTRY_LEN * count;
    if !walk.valid || values_start.checked_add(walk.values_len)? != bytes.len() {
        return None;
    }
    let degenerate = count == 1 && newest_ts == next_timestamp && newest_size == TOMBSTONE_SIZE;
    if newest_ts >= next_timestamp && !degenerate {
        return None;
    }
    Some(Scanned {
        next_timestamp,
        min_timestamp,
        values_start,
        degenerate,
    })
}

/// A row's 16-byte header: `(next_timestamp, min_timestamp)`.
pub(super) fn header(bytes: &[u8], location: &dyn Fn() -> String) -> Result<(i64, i64)> {
    let corrupt = |detail: String| Error::corrupt(location(), detail);
    let (Some(next_timestamp), Some(min_timestamp)) = (read_i64(bytes, 0), read_i64(bytes, 8))
    else {
        return Err(corrupt(format!(
            "row of {} bytes is shorter than its 16-byte header",
            bytes.len()
        )));
    };
    if min_timestamp < 0 || next_timestamp < min_timestamp {
        return Err(corrupt(format!(
            "header has min_timestamp {min_timestamp} and next_timestamp {next_timestamp}"
        )));
    }
    Ok((next_timestamp, min_timestamp))
}
