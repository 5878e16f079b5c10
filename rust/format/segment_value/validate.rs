//! The one validator of a row's bytes: [`check`] walks the index without a branch per entry and
//! says only whether the row holds; [`validate`] adds, when it does not, the precise complaint,
//! which [`locate`] finds off the hot path by walking again with the same rules.
//!
//! The rules: a 16-byte header whose `min_timestamp` is not negative and not after
//! `next_timestamp` ([`read_header`]); index entries, newest first, each older than the one
//! before it with a size of at least -1 ([`entry_ok`]), ending at the entry at `min_timestamp`;
//! values that fill the rest of the row exactly; a newest version older than `next_timestamp`
//! unless the row is degenerate ([`newest_ok`]).

use super::{HEADER_LEN, INDEX_ENTRY_LEN, TOMBSTONE_SIZE};
use crate::error::{Error, Result};
use crate::format::{read_array, read_i64};

/// A row's header and index as [`validate`] found them, without allocating.
pub(super) struct RowShape {
    pub(super) next_timestamp: i64,
    pub(super) min_timestamp: i64,
    /// Offset of the first value byte (the end of the index).
    pub(super) values_start: usize,
    pub(super) degenerate: bool,
}

impl RowShape {
    /// The row's index, newest first: one `[u8; INDEX_ENTRY_LEN]` per version.
    pub(super) fn index<'b>(&self, bytes: &'b [u8]) -> &'b [[u8; INDEX_ENTRY_LEN]] {
        let (index, _) = bytes
            .get(HEADER_LEN..self.values_start)
            .unwrap_or_default()
            .as_chunks();
        index
    }
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

/// The header's rule: `(next_timestamp, min_timestamp)` when the row has a 16-byte header whose
/// oldest version starts at a time not negative and not after the row ends.
fn read_header(bytes: &[u8]) -> Option<(i64, i64)> {
    let next_timestamp = read_i64(bytes, 0)?;
    let min_timestamp = read_i64(bytes, 8)?;
    (min_timestamp >= 0 && next_timestamp >= min_timestamp)
        .then_some((next_timestamp, min_timestamp))
}

/// A size that an entry may have: a length, or -1 for a tombstone.
fn size_ok(size: i32) -> bool {
    size >= TOMBSTONE_SIZE
}

/// The rule of an index entry after the newest: older than the entry before it (`previous`),
/// with a size it may have. Both checks with `&`, without a branch: it runs in the walk of every
/// as-of read.
fn entry_ok(previous: i64, timestamp: i64, size: i32) -> bool {
    (timestamp < previous) & size_ok(size)
}

/// The rule of the newest version: older than `next_timestamp`, unless the row is degenerate
/// (a lone tombstone at `next_timestamp`). `count` is the number of index entries.
fn newest_ok(next_timestamp: i64, count: usize, (timestamp, size): (i64, i32)) -> bool {
    timestamp < next_timestamp || is_degenerate(next_timestamp, count, (timestamp, size))
}

fn is_degenerate(next_timestamp: i64, count: usize, (timestamp, size): (i64, i32)) -> bool {
    count == 1 && timestamp == next_timestamp && size == TOMBSTONE_SIZE
}

/// An index walk in progress: the checks so far and the value bytes of the entries walked.
struct Walk {
    /// Every entry walked is [`entry_ok`].
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
            valid &= entry_ok(previous, timestamp, size);
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

/// [`check`], and the precise complaint about a row that does not hold; `location` names the
/// row in it.
pub(super) fn validate(
    bytes: &[u8],
    times: &[i64],
    positions: &mut [Position],
    location: &dyn Fn() -> String,
) -> Result<RowShape> {
    check(bytes, times, positions).ok_or_else(|| locate(bytes, location))
}

/// Walks the index once, validating the row, and finds where each of `times` (in descending
/// order) falls in it: `positions[k]` for `times[k]`. `None`: the row does not hold.
///
/// The entries newer than a time come first (the index is newest first), so one walk passes
/// the times one after the other, then goes on down to the entry at `min_timestamp`, which ends
/// the index. Strictly decreasing timestamps that end at `min_timestamp` are all at or above
/// it, so only the order, the sizes and the end are checked.
pub(super) fn check(bytes: &[u8], times: &[i64], positions: &mut [Position]) -> Option<RowShape> {
    let (next_timestamp, min_timestamp) = read_header(bytes)?;
    let (index, _) = bytes.get(HEADER_LEN..)?.as_chunks::<INDEX_ENTRY_LEN>();
    let (first, mut rest) = index.split_first()?;
    // The newest entry has nothing newer to be older than: it may start at `i64::MAX`.
    let newest @ (newest_ts, newest_size) = index_entry(first);
    if newest_ts < min_timestamp {
        return None;
    }
    let mut walk = Walk {
        valid: size_ok(newest_size),
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
        if timestamp != min_timestamp || !entry_ok(walk.previous, timestamp, size) {
            return None;
        }
        walk.values_len = walk.values_len.saturating_add(value_len(size));
        walked + passed + 1
    };
    let values_start = HEADER_LEN + INDEX_ENTRY_LEN * count;
    if !walk.valid || values_start.checked_add(walk.values_len)? != bytes.len() {
        return None;
    }
    if !newest_ok(next_timestamp, count, newest) {
        return None;
    }
    Some(RowShape {
        next_timestamp,
        min_timestamp,
        values_start,
        degenerate: is_degenerate(next_timestamp, count, newest),
    })
}

/// A row's 16-byte header: `(next_timestamp, min_timestamp)`.
pub(super) fn header(bytes: &[u8], location: &dyn Fn() -> String) -> Result<(i64, i64)> {
    read_header(bytes).ok_or_else(|| header_error(bytes, location))
}

#[cold]
fn header_error(bytes: &[u8], location: &dyn Fn() -> String) -> Error {
    let detail = match (read_i64(bytes, 0), read_i64(bytes, 8)) {
        (Some(next_timestamp), Some(min_timestamp)) => {
            format!("header has min_timestamp {min_timestamp} and next_timestamp {next_timestamp}")
        }
        _ => format!(
            "row of {} bytes is shorter than its 16-byte header",
            bytes.len()
        ),
    };
    Error::corrupt(location(), detail)
}

/// What is wrong with a row that [`check`] refused: the first rule it breaks, in the order the
/// layout reads (header, index entries newest first, values oldest first, the newest version),
/// naming the entry.
#[cold]
#[inline(never)]
pub(super) fn locate(bytes: &[u8], location: &dyn Fn() -> String) -> Error {
    let corrupt = |detail: String| Error::corrupt(location(), detail);
    let Some((next_timestamp, min_timestamp)) = read_header(bytes) else {
        return header_error(bytes, location);
    };
    let mut index: Vec<(i64, i32)> = Vec::new();
    loop {
        let offset = HEADER_LEN + INDEX_ENTRY_LEN * index.len();
        let Some(entry) = read_array(bytes, offset) else {
            return corrupt(format!(
                "index entry {} at offset {offset} is truncated",
                index.len()
            ));
        };
        let (timestamp, size) = index_entry(&entry);
        let ok = match index.last() {
            Some(&(previous, _)) => entry_ok(previous, timestamp, size),
            None => size_ok(size),
        };
        if !ok || timestamp < min_timestamp {
            return corrupt(format!(
                "index entry {} has timestamp {timestamp} and size {size}",
                index.len()
            ));
        }
        index.push((timestamp, size));
        if timestamp == min_timestamp {
            break;
        }
    }
    // Values are stored oldest first.
    let mut offset = HEADER_LEN + INDEX_ENTRY_LEN * index.len();
    for &(timestamp, size) in index.iter().rev() {
        let end = offset.checked_add(value_len(size));
        let Some(end) = end.filter(|&end| end <= bytes.len()) else {
            return corrupt(format!(
                "value of the version at {timestamp} runs past the end of the row"
            ));
        };
        offset = end;
    }
    if offset != bytes.len() {
        return corrupt(format!(
            "{} trailing bytes after the last value",
            bytes.len() - offset
        ));
    }
    if let Some(&newest) = index.first()
        && !newest_ok(next_timestamp, index.len(), newest)
    {
        return corrupt(format!(
            "newest version is not older than next_timestamp {next_timestamp}"
        ));
    }
    corrupt("the row's index and values disagree".to_owned())
}
