//! Segment rows: all versions of one key whose valid-to falls in one segment, in one value.
//!
//! ```text
//! offset          size   field
//! 0               8      next_timestamp  i64 BE  valid-to of the newest version in the row
//! 8               8      min_timestamp   i64 BE  valid-from of the oldest version in the row
//! 16 + 12·i       8      timestamp_i     i64 BE  valid-from of version i (i = 0 is the newest)
//! 24 + 12·i       4      value_size_i    i32 BE  -1 = tombstone, 0 = empty value, else length
//! 16 + 12·n       Σ      values, OLDEST first, concatenated (the newest value ends the row)
//! ```
//!
//! `n` is not stored: a reader walks the index until an entry's timestamp equals
//! `min_timestamp`. Timestamps strictly decrease along the index. Version `i`'s valid-to is
//! `timestamp_{i-1}`, or `next_timestamp` for `i = 0`.
//!
//! A *degenerate* row is a single tombstone whose timestamp equals both `min_timestamp` and
//! `next_timestamp`. It exists only so that a tombstone with nothing newer can bound later
//! out-of-order writes; it becomes a normal row as soon as a version is inserted into it, the
//! tombstone becoming implicit as that row's `next_timestamp`.
//!
//! Example: `x@3`, tombstone`@5`, `yz@7`, next version at 9 →
//! `[9][3] [7,2] [5,-1] [3,1] "x" "yz"`.
//!
//! This is Kafka's `RocksDBVersionedStoreSegmentValueFormatter` layout, byte for byte. Decoding
//! validates every offset and invariant and reports [`Error::Corrupt`] instead of panicking.
//!
//! A row can also grow by *appends* (format version 2), RocksDB merge operands that add a newest
//! version without reading the row; operands concatenate:
//!
//! ```text
//! offset   size   field
//! 0        8      timestamp    i64 BE  valid-from of the appended version
//! 8        8      valid_to     i64 BE  the row's next_timestamp afterwards
//! 16       4      value_size   i32 BE  -1 = tombstone, else n
//! 20       n      value                (then the next append at 20 + n)
//! ```
//!
//! [`merge_appends`] applies them with [`SegmentRow::append_newest`]'s rule by copying the base's
//! index and values around the new entries (the newest index entries come first and the newest
//! values last, so the base moves in two pieces). It never fails: an inconsistent merge yields
//! a poisoned row that no read decodes. [`lookup`] answers an as-of read from the encoded row
//! without allocating.

use crate::error::{Error, Result};

const HEADER_LEN: usize = 16;
const INDEX_ENTRY_LEN: usize = 12;
const TOMBSTONE_SIZE: i32 = -1;

/// One version inside a row: its valid-from and its value (`None` = tombstone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) timestamp: i64,
    pub(crate) value: Option<&'a [u8]>,
}

/// A decoded row. Entries are newest first; values borrow from the encoded row or the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentRow<'a> {
    next_timestamp: i64,
    entries: Vec<Entry<'a>>,
}

impl<'a> SegmentRow<'a> {
    /// A row holding one version valid in `[entry.timestamp, valid_to)`.
    pub(crate) fn single(entry: Entry<'a>, valid_to: i64) -> Self {
        Self {
            next_timestamp: valid_to,
            entries: vec![entry],
        }
    }

    /// A degenerate row: one tombstone with nothing newer.
    pub(crate) fn degenerate(timestamp: i64) -> Self {
        Self::single(
            Entry {
                timestamp,
                value: None,
            },
            timestamp,
        )
    }

    /// Valid-to of the newest version in the row.
    pub(crate) fn next_timestamp(&self) -> i64 {
        self.next_timestamp
    }

    /// Valid-from of the oldest version in the row.
    pub(crate) fn min_timestamp(&self) -> i64 {
        self.entries
            .last()
            .map_or(self.next_timestamp, |e| e.timestamp)
    }

    /// The versions, newest first.
    pub(crate) fn entries(&self) -> &[Entry<'a>] {
        &self.entries
    }

    pub(crate) fn is_degenerate(&self) -> bool {
        matches!(self.entries.as_slice(), [only] if only.value.is_none() && only.timestamp == self.next_timestamp)
    }

    /// Valid-to of entry `index`.
    pub(crate) fn valid_to(&self, index: usize) -> i64 {
        match index
            .checked_sub(1)
            .and_then(|newer| self.entries.get(newer))
        {
            Some(newer) => newer.timestamp,
            None => self.next_timestamp,
        }
    }

    /// Index of the version valid at `timestamp` (the newest entry at or before it), if the row
    /// reaches back that far.
    pub(crate) fn find(&self, timestamp: i64) -> Option<usize> {
        self.entries.iter().position(|e| e.timestamp <= timestamp)
    }

    /// Replaces the value of entry `index` in place (its validity is unchanged).
    pub(crate) fn replace_value(&mut self, index: usize, value: Option<&'a [u8]>) {
        if let Some(entry) = self.entries.get_mut(index) {
            entry.value = value;
        }
    }

    /// Replaces entry `index` by `entry` (used when a version is split and its older part moves
    /// to an older segment).
    pub(crate) fn replace_entry(&mut self, index: usize, entry: Entry<'a>) {
        if let Some(slot) = self.entries.get_mut(index) {
            *slot = entry;
        }
    }

    /// Inserts `entry` so that it sits right before (newer than) entry `index`.
    pub(crate) fn insert_before(&mut self, index: usize, entry: Entry<'a>) {
        self.entries.insert(index, entry);
    }

    /// Adds `entry`, valid until `valid_to`, as the newest version. When the row ended before
    /// `entry.timestamp`, the gap is a tombstone that was implicit as `next_timestamp`: it
    /// becomes an explicit entry. A degenerate row's tombstone at the same timestamp is replaced.
    pub(crate) fn append_newest(&mut self, entry: Entry<'a>, valid_to: i64) -> Result<()> {
        let end = self.next_timestamp;
        if end > entry.timestamp {
            return Err(Error::corrupt(
                "segment row",
                format!(
                    "cannot append a version at {} to a row that ends at {end}",
                    entry.timestamp
                ),
            ));
        }
        if self.is_degenerate() {
            if end == entry.timestamp {
                self.entries.clear();
            }
        } else if end < entry.timestamp {
            self.entries.insert(
                0,
                Entry {
                    timestamp: end,
                    value: None,
                },
            );
        }
        self.entries.insert(0, entry);
        self.next_timestamp = valid_to;
        Ok(())
    }

    /// Ends the row with a tombstone at `timestamp` that stays implicit as `next_timestamp`
    /// (nothing newer exists). An older implicit tombstone becomes explicit.
    pub(crate) fn end_with_tombstone(&mut self, timestamp: i64) {
        if self.next_timestamp < timestamp && !self.is_degenerate() {
            self.entries.insert(
                0,
                Entry {
                    timestamp: self.next_timestamp,
                    value: None,
                },
            );
        }
        self.next_timestamp = self.next_timestamp.max(timestamp);
    }

    /// Adds `entry` as the oldest version (valid until the current oldest's valid-from). A
    /// degenerate row's tombstone then becomes implicit as `next_timestamp`.
    pub(crate) fn insert_oldest(&mut self, entry: Entry<'a>) {
        if self.is_degenerate() {
            self.entries.clear();
        }
        self.entries.push(entry);
    }

    /// Encodes the row.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let values_len: usize = self
            .entries
            .iter()
            .map(|e| e.value.map_or(0, <[u8]>::len))
            .sum();
        let mut out =
            Vec::with_capacity(HEADER_LEN + INDEX_ENTRY_LEN * self.entries.len() + values_len);
        out.extend_from_slice(&self.next_timestamp.to_be_bytes());
        out.extend_from_slice(&self.min_timestamp().to_be_bytes());
        for entry in &self.entries {
            out.extend_from_slice(&entry.timestamp.to_be_bytes());
            let size = match entry.value {
                // Values are bounded by `MAX_VALUE_LEN`, checked at the API boundary.
                Some(v) => i32::try_from(v.len()).unwrap_or(i32::MAX),
                None => TOMBSTONE_SIZE,
            };
            out.extend_from_slice(&size.to_be_bytes());
        }
        for entry in self.entries.iter().rev() {
            if let Some(v) = entry.value {
                out.extend_from_slice(v);
            }
        }
        out
    }

    /// Decodes and validates a row; `location` names it in errors.
    pub(crate) fn decode(bytes: &'a [u8], location: &dyn Fn() -> String) -> Result<Self> {
        let corrupt = |detail: String| Error::corrupt(location(), detail);
        let (next_timestamp, min_timestamp) = header(bytes, location)?;
        let index = read_index(bytes, min_timestamp, &corrupt)?;
        let mut offset = HEADER_LEN + INDEX_ENTRY_LEN * index.len();
        // Value bytes: oldest first, so assign from the end of the index.
        let mut entries = vec![
            Entry {
                timestamp: 0,
                value: None
            };
            index.len()
        ];
        for (slot, &(timestamp, size)) in entries.iter_mut().zip(&index).rev() {
            slot.timestamp = timestamp;
            if let Ok(len) = usize::try_from(size) {
                let end = offset.checked_add(len).filter(|&end| end <= bytes.len());
                let Some(end) = end else {
                    return Err(corrupt(format!(
                        "value of the version at {timestamp} runs past the end of the row"
                    )));
                };
                slot.value = bytes.get(offset..end);
                offset = end;
            }
        }
        if offset != bytes.len() {
            return Err(corrupt(format!(
                "{} trailing bytes after the last value",
                bytes.len() - offset
            )));
        }
        let row = Self {
            next_timestamp,
            entries,
        };
        let newest_ok = row
            .entries
            .first()
            .is_some_and(|newest| newest.timestamp < next_timestamp)
            || row.is_degenerate();
        if !newest_ok {
            return Err(corrupt(format!(
                "newest version is not older than next_timestamp {next_timestamp}"
            )));
        }
        Ok(row)
    }
}

/// A row's index, newest first: (timestamp, size) pairs from the header on, until the entry at
/// `min_timestamp`, each checked against the one before it.
fn read_index(
    bytes: &[u8],
    min_timestamp: i64,
    corrupt: &dyn Fn(String) -> Error,
) -> Result<Vec<(i64, i32)>> {
    let mut index: Vec<(i64, i32)> = Vec::new();
    let mut offset = HEADER_LEN;
    // `None` before the first entry: a newest version may start at `i64::MAX`.
    let mut previous: Option<i64> = None;
    loop {
        let (Some(timestamp), Some(size)) = (
            super::read_i64(bytes, offset),
            super::read_i32(bytes, offset + 8),
        ) else {
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

// ---------------------------------------------------------------------------------------------
// Appends
// ---------------------------------------------------------------------------------------------

const APPEND_HEADER_LEN: usize = 20;
/// The first 8 bytes of a row that merged inconsistently: `next_timestamp = -1`, which no row
/// decodes with.
const POISON: [u8; 8] = [0xFF; 8];

/// Encodes an append of `entry`, valid until `valid_to`, onto `out` (operands concatenate).
pub(crate) fn encode_append(entry: Entry<'_>, valid_to: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(&entry.timestamp.to_be_bytes());
    out.extend_from_slice(&valid_to.to_be_bytes());
    match entry.value {
        Some(v) => {
            // Values are bounded by `MAX_VALUE_LEN`, checked at the API boundary.
            out.extend_from_slice(&i32::try_from(v.len()).unwrap_or(i32::MAX).to_be_bytes());
            out.extend_from_slice(v);
        }
        None => out.extend_from_slice(&TOMBSTONE_SIZE.to_be_bytes()),
    }
}

/// Splits the first append off `bytes`: `(entry, valid_to, rest)`.
fn decode_append(bytes: &[u8]) -> Option<(Entry<'_>, i64, &[u8])> {
    let timestamp = super::read_i64(bytes, 0)?;
    let valid_to = super::read_i64(bytes, 8)?;
    let size = super::read_i32(bytes, 16)?;
    let (value, end) = match usize::try_from(size) {
        Ok(len) => {
            let end = APPEND_HEADER_LEN.checked_add(len)?;
            (Some(bytes.get(APPEND_HEADER_LEN..end)?), end)
        }
        Err(_) if size == TOMBSTONE_SIZE => (None, APPEND_HEADER_LEN),
        Err(_) => return None,
    };
    Some((Entry { timestamp, value }, valid_to, bytes.get(end..)?))
}

/// The row that results from applying `operands` (each a concatenation of appends), in order,
/// to `base` (`None`: no row). Each append is [`SegmentRow::append_newest`]. Never fails: when
/// `base` does not decode or an append does not fit, the result is the inputs behind a poisoned
/// header, which every later read reports as corrupt (RocksDB's merges and compactions must not
/// fail, or the whole store would stop).
pub(crate) fn merge_appends<'o>(
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]> + Clone,
) -> Vec<u8> {
    apply_appends(base, operands.clone()).unwrap_or_else(|| {
        let mut out = POISON.to_vec();
        out.extend_from_slice(base.unwrap_or_default());
        for operand in operands {
            out.extend_from_slice(operand);
        }
        out
    })
}

/// A row's header and index, validated as [`SegmentRow::decode`] validates them, without
/// allocating.
struct Scanned {
    next_timestamp: i64,
    min_timestamp: i64,
    /// Offset of the first value byte (the end of the index).
    values_start: usize,
    degenerate: bool,
}

/// Where a time `t` falls in a row's index: the entries newer than `t` (the version valid at
/// `t`, if the row reaches back that far, is entry `newer`) and their value bytes (the newest
/// values end the row).
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    newer: usize,
    newer_values: usize,
}

/// One index entry: `(timestamp, value_size)`.
fn index_entry(entry: &[u8; INDEX_ENTRY_LEN]) -> (i64, i32) {
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
fn scan(bytes: &[u8], times: &[i64], positions: &mut [Position]) -> Option<Scanned> {
    let next_timestamp = super::read_i64(bytes, 0)?;
    let min_timestamp = super::read_i64(bytes, 8)?;
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

/// Applies appends by copying: the new index entries, then the base's index and values as
/// they are, then the new values (the layout puts the newest index entries first and the
/// newest values last). Linear in the row's size, with no decoding of the base's entries.
fn apply_appends<'o>(
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]>,
) -> Option<Vec<u8>> {
    let scanned = match base {
        Some(bytes) => Some(scan(bytes, &[], &mut [])?),
        None => None,
    };
    let appended = decode_appends(scanned.as_ref(), operands)?;
    let next_timestamp = appended.next_timestamp?;
    let base = base.zip(scanned).filter(|_| appended.keep_base);
    let min_timestamp = match (&base, appended.entries.first()) {
        (Some((_, s)), _) => s.min_timestamp,
        (None, Some(oldest)) => oldest.timestamp,
        (None, None) => return None,
    };
    let mut out = Vec::with_capacity(
        HEADER_LEN
            + INDEX_ENTRY_LEN * appended.entries.len()
            + base.as_ref().map_or(0, |(b, _)| b.len() - HEADER_LEN)
            + appended.values_len,
    );
    out.extend_from_slice(&next_timestamp.to_be_bytes());
    out.extend_from_slice(&min_timestamp.to_be_bytes());
    for entry in appended.entries.iter().rev() {
        out.extend_from_slice(&entry.timestamp.to_be_bytes());
        let size = match entry.value {
            Some(v) => i32::try_from(v.len()).unwrap_or(i32::MAX),
            None => TOMBSTONE_SIZE,
        };
        out.extend_from_slice(&size.to_be_bytes());
    }
    if let Some((bytes, scanned)) = &base {
        out.extend_from_slice(bytes.get(HEADER_LEN..scanned.values_start)?);
        out.extend_from_slice(bytes.get(scanned.values_start..)?);
    }
    for entry in &appended.entries {
        out.extend_from_slice(entry.value.unwrap_or_default());
    }
    Some(out)
}

/// The versions that appends add to a row, and what they do to the row they go on.
struct Appended<'o> {
    /// Oldest first: each is newer than everything before it.
    entries: Vec<Entry<'o>>,
    /// The bytes of their values.
    values_len: usize,
    /// The row's `next_timestamp` afterwards (`None`: no base row and nothing appended).
    next_timestamp: Option<i64>,
    /// Whether the base row stays: a lone tombstone is dropped when a version starts at it.
    keep_base: bool,
}

/// The versions `operands` append to the row `scanned` describes (`None`: no row), checked to
/// follow each other; `None` when they do not.
fn decode_appends<'o>(
    scanned: Option<&Scanned>,
    operands: impl Iterator<Item = &'o [u8]>,
) -> Option<Appended<'o>> {
    let mut next = scanned.map(|s| s.next_timestamp);
    let mut degenerate = scanned.is_some_and(|s| s.degenerate);
    let mut appended = Appended {
        entries: Vec::new(),
        values_len: 0,
        next_timestamp: None,
        keep_base: true,
    };
    for operand in operands {
        let mut rest = operand;
        while !rest.is_empty() {
            let (entry, valid_to, tail) = decode_append(rest)?;
            if entry.timestamp >= valid_to {
                return None;
            }
            if let Some(end) = next {
                if end > entry.timestamp {
                    return None;
                }
                if degenerate {
                    appended.keep_base &= end != entry.timestamp;
                } else if end < entry.timestamp {
                    appended.entries.push(Entry {
                        timestamp: end,
                        value: None,
                    });
                }
            }
            appended.values_len += entry.value.map_or(0, <[u8]>::len);
            appended.entries.push(entry);
            next = Some(valid_to);
            degenerate = false;
            rest = tail;
        }
    }
    appended.next_timestamp = next;
    Some(appended)
}

/// What a row says about one time `t`, found by [`lookup`] without decoding the whole row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup<'a> {
    /// A version of the row is valid at `t` (`value: None` is an explicit tombstone).
    Found {
        /// Its valid-from.
        timestamp: i64,
        /// Its valid-to.
        valid_to: i64,
        /// Its value.
        value: Option<&'a [u8]>,
    },
    /// The row ends at or before `t`: the version valid at `t` starts at `next_timestamp`; it is
    /// a tombstone when nothing newer was found.
    After,
    /// The row starts after `t` at `min_timestamp`: an older row may hold `t`.
    Before {
        /// Valid-from of the row's oldest version.
        min_timestamp: i64,
    },
}

/// A row's 16-byte header: `(next_timestamp, min_timestamp)`.
fn header(bytes: &[u8], location: &dyn Fn() -> String) -> Result<(i64, i64)> {
    let corrupt = |detail: String| Error::corrupt(location(), detail);
    let (Some(next_timestamp), Some(min_timestamp)) =
        (super::read_i64(bytes, 0), super::read_i64(bytes, 8))
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

/// What the header alone says about `t` (`None`: the row holds the answer).
fn from_header<'a>((next_timestamp, min_timestamp): (i64, i64), t: i64) -> Option<Lookup<'a>> {
    if next_timestamp <= t {
        Some(Lookup::After)
    } else if min_timestamp > t {
        Some(Lookup::Before { min_timestamp })
    } else {
        None
    }
}

/// The error for a row that [`scan`] refused: the precise complaint comes from the full
/// decoder.
fn refused(bytes: &[u8], location: &dyn Fn() -> String) -> Error {
    match SegmentRow::decode(bytes, location) {
        Err(error) => error,
        Ok(_) => Error::corrupt(location(), "the row's index and values disagree"),
    }
}

/// The version at `position` of a row that [`scan`] validated.
fn found_at<'a>(
    bytes: &'a [u8],
    scanned: &Scanned,
    position: Position,
    location: &dyn Fn() -> String,
) -> Result<Lookup<'a>> {
    let entry = |i: usize| {
        let (index, _) = bytes.get(HEADER_LEN..scanned.values_start)?.as_chunks();
        index.get(i).map(index_entry)
    };
    let Some((timestamp, size)) = entry(position.newer) else {
        return Err(refused(bytes, location));
    };
    let valid_to = match position.newer.checked_sub(1) {
        Some(newer) => entry(newer).map_or(scanned.next_timestamp, |(t, _)| t),
        None => scanned.next_timestamp,
    };
    let value = match usize::try_from(size) {
        Ok(len) => {
            let end = bytes.len().saturating_sub(position.newer_values);
            let start = end
                .checked_sub(len)
                .filter(|&start| start >= scanned.values_start)
                .ok_or_else(|| {
                    Error::corrupt(
                        location(),
                        format!("value of the version at {timestamp} is out of the row"),
                    )
                })?;
            Some(bytes.get(start..end).unwrap_or_default())
        }
        Err(_) => None,
    };
    Ok(Lookup::Found {
        timestamp,
        valid_to,
        value,
    })
}

/// Reads the version valid at `t` straight from the encoded row. The 16-byte header decides
/// `After` and `Before`; `Found` walks the index once, without allocating, validating the whole
/// row as [`SegmentRow::decode`] does (the value offsets come from the row's end: the newest
/// value ends the row).
pub(crate) fn lookup<'a>(
    bytes: &'a [u8],
    t: i64,
    location: &dyn Fn() -> String,
) -> Result<Lookup<'a>> {
    if let Some(answer) = from_header(header(bytes, location)?, t) {
        return Ok(answer);
    }
    let mut position = [Position::default()];
    let Some(scanned) = scan(bytes, &[t], &mut position) else {
        return Err(refused(bytes, location));
    };
    found_at(bytes, &scanned, position[0], location)
}

/// [`lookup`] of every one of `times` in one row: `f(k, lookup of times[k])`, in any order.
/// The row is walked and validated once for all of them (a batch often reads a hot key at
/// many times), and no answer from the index is given before the whole row is checked.
pub(crate) fn lookup_each<'a>(
    bytes: &'a [u8],
    times: &[i64],
    location: &dyn Fn() -> String,
    mut f: impl FnMut(usize, Lookup<'a>) -> Result<()>,
) -> Result<()> {
    match times {
        [] => return Ok(()),
        [t] => return f(0, lookup(bytes, *t, location)?),
        _ => {}
    }
    let header = header(bytes, location)?;
    // The times the row holds, newest first, as `(t, k)`.
    let mut inside: Vec<(i64, usize)> = Vec::new();
    for (k, &t) in times.iter().enumerate() {
        match from_header(header, t) {
            Some(answer) => f(k, answer)?,
            None => inside.push((t, k)),
        }
    }
    if inside.is_empty() {
        return Ok(());
    }
    let Some((scanned, positions)) = scan_at(bytes, &mut inside) else {
        return Err(refused(bytes, location));
    };
    for (&(_, k), &position) in inside.iter().zip(&positions) {
        f(k, found_at(bytes, &scanned, position, location)?)?;
    }
    Ok(())
}

/// Validates the row in one walk and finds where each of `inside`'s times (`(t, k)` pairs,
/// every one within the row's range) falls in it; sorts `inside` newest first, as the walk
/// goes. `None`: the row does not scan.
fn scan_at(bytes: &[u8], inside: &mut [(i64, usize)]) -> Option<(Scanned, Vec<Position>)> {
    inside.sort_unstable_by(|a, b| b.cmp(a));
    let sorted: Vec<i64> = inside.iter().map(|&(t, _)| t).collect();
    let mut positions = vec![Position::default(); sorted.len()];
    let scanned = scan(bytes, &sorted, &mut positions)?;
    Some((scanned, positions))
}

/// [`lookup_each`] of the row that `appends` make of `base` (`None`: no row), as
/// [`merge_appends`] would build it, without building it: a read of a row that has appends in a
/// write buffer would otherwise copy the whole row for every read. Times from the first appended
/// version on are answered from the appends, older ones from `base`, walked once. No appends:
/// `base` read as it is. A base that is a lone tombstone, or inputs that do not fit together,
/// are merged and read as before (which reports them as the merge does).
pub(crate) fn lookup_each_appended(
    base: Option<&[u8]>,
    appends: &[u8],
    times: &[i64],
    location: &dyn Fn() -> String,
    mut f: impl FnMut(usize, Lookup<'_>) -> Result<()>,
) -> Result<()> {
    if let (Some(bytes), true) = (base, appends.is_empty()) {
        return lookup_each(bytes, times, location, f);
    }
    let Some(split) = AppendedRow::read(base, appends, times) else {
        let merged = merge_appends(base, std::iter::once(appends));
        return lookup_each(&merged, times, location, f);
    };
    for (k, &t) in times.iter().enumerate() {
        if let Some(answer) = from_header((split.next_timestamp, split.min_timestamp), t) {
            f(k, answer)?;
        } else if let Some(i) = split.entries.iter().rposition(|e| e.timestamp <= t) {
            let entry = split.entries[i];
            f(
                k,
                Lookup::Found {
                    timestamp: entry.timestamp,
                    valid_to: split
                        .entries
                        .get(i + 1)
                        .map_or(split.next_timestamp, |e| e.timestamp),
                    value: entry.value,
                },
            )?;
        }
    }
    let Some((bytes, scanned)) = split.base else {
        return Ok(());
    };
    for (&(_, k), &position) in split.inside.iter().zip(&split.positions) {
        f(k, found_at(bytes, &scanned, position, location)?)?;
    }
    Ok(())
}

/// A row as its base and the versions appended to it, read for [`lookup_each_appended`].
struct AppendedRow<'a> {
    next_timestamp: i64,
    min_timestamp: i64,
    /// The appended versions, oldest first (a gap before one is a tombstone entry).
    entries: Vec<Entry<'a>>,
    /// The base row, validated, when there is one.
    base: Option<(&'a [u8], Scanned)>,
    /// The times the base answers, newest first, as `(t, k)`, and where each falls in it.
    inside: Vec<(i64, usize)>,
    positions: Vec<Position>,
}

impl<'a> AppendedRow<'a> {
    /// `None` where the merge must decide: no appends, a base that does not scan or is a lone
    /// tombstone, appends that do not follow it.
    fn read(base: Option<&'a [u8]>, appends: &'a [u8], times: &[i64]) -> Option<Self> {
        if appends.is_empty() {
            return None;
        }
        let (mut inside, mut positions) = (Vec::new(), Vec::new());
        let base = match base {
            Some(bytes) => {
                // Times inside the base's own range are the base's to answer (the appends
                // start where it ends).
                let (next, min) = (super::read_i64(bytes, 0)?, super::read_i64(bytes, 8)?);
                inside.extend(
                    times
                        .iter()
                        .enumerate()
                        .filter_map(|(k, &t)| (min <= t && t < next).then_some((t, k))),
                );
                let scanned;
                (scanned, positions) = scan_at(bytes, &mut inside)?;
                if scanned.degenerate {
                    return None;
                }
                Some((bytes, scanned))
            }
            None => None,
        };
        let appended = decode_appends(base.as_ref().map(|(_, s)| s), std::iter::once(appends))?;
        let min_timestamp = match (&base, appended.entries.first()) {
            (Some((_, s)), _) => s.min_timestamp,
            (None, Some(oldest)) => oldest.timestamp,
            (None, None) => return None,
        };
        let next_timestamp = appended.next_timestamp?;
        // What `header` refuses in the merged row, the merged read reports.
        if min_timestamp < 0 || next_timestamp < min_timestamp {
            return None;
        }
        Some(Self {
            next_timestamp,
            min_timestamp,
            entries: appended.entries,
            base,
            inside,
            positions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loc() -> String {
        "test row".to_owned()
    }

    fn row(next: i64, entries: &[(i64, Option<&'static [u8]>)]) -> SegmentRow<'static> {
        SegmentRow {
            next_timestamp: next,
            entries: entries
                .iter()
                .map(|&(timestamp, value)| Entry { timestamp, value })
                .collect(),
        }
    }

    /// Case table: (row, exact bytes).
    #[test]
    fn encodes_the_documented_layout() {
        let mut expected = Vec::new();
        for chunk in [
            &9i64.to_be_bytes()[..],
            &3i64.to_be_bytes(),
            &7i64.to_be_bytes(),
            &2i32.to_be_bytes(),
            &5i64.to_be_bytes(),
            &(-1i32).to_be_bytes(),
            &3i64.to_be_bytes(),
            &1i32.to_be_bytes(),
            b"x",
            b"yz",
        ] {
            expected.extend_from_slice(chunk);
        }
        let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
        assert_eq!(r.encode(), expected);
        assert_eq!(SegmentRow::decode(&expected, &loc).ok(), Some(r));
    }

    #[test]
    fn round_trips_case_table() {
        let cases = [
            // degenerate single tombstone
            row(10, &[(10, None)]),
            // single value
            row(10, &[(4, Some(b"v"))]),
            // empty values are not tombstones
            row(10, &[(6, Some(b"")), (5, None), (4, Some(b""))]),
            // tombstones only
            row(10, &[(6, None), (2, None)]),
            // many versions
            row(
                1_000,
                &[
                    (900, Some(b"a")),
                    (800, Some(b"bb")),
                    (700, None),
                    (600, Some(b"")),
                    (10, Some(b"ccc")),
                ],
            ),
        ];
        for case in cases {
            let bytes = case.encode();
            let decoded = SegmentRow::decode(&bytes, &loc).expect("decodes");
            assert_eq!(decoded, case);
            assert_eq!(
                decoded.min_timestamp(),
                case.entries.last().map_or(-1, |e| e.timestamp)
            );
        }
    }

    #[test]
    fn degenerate_row_is_recognised() {
        assert!(row(10, &[(10, None)]).is_degenerate());
        assert!(!row(11, &[(10, None)]).is_degenerate());
        assert!(!row(10, &[(10, Some(b""))]).is_degenerate());
    }

    #[test]
    fn valid_to_and_find() {
        let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
        assert_eq!((r.valid_to(0), r.valid_to(1), r.valid_to(2)), (9, 7, 5));
        assert_eq!(r.find(2), None);
        assert_eq!(r.find(3), Some(2));
        assert_eq!(r.find(6), Some(1));
        assert_eq!(r.find(100), Some(0));
    }

    #[test]
    fn append_fills_a_gap_with_an_explicit_tombstone() {
        let mut r = row(5, &[(3, Some(b"x"))]);
        r.append_newest(
            Entry {
                timestamp: 7,
                value: Some(b"y"),
            },
            9,
        )
        .expect("append");
        assert_eq!(r, row(9, &[(7, Some(b"y")), (5, None), (3, Some(b"x"))]));
        // no gap: the row ended where the new version starts
        let mut r = row(5, &[(3, Some(b"x"))]);
        r.append_newest(
            Entry {
                timestamp: 5,
                value: Some(b"y"),
            },
            9,
        )
        .expect("append");
        assert_eq!(r, row(9, &[(5, Some(b"y")), (3, Some(b"x"))]));
        // a row ending after the new version is an invariant violation, not a panic
        let mut r = row(5, &[(3, Some(b"x"))]);
        assert!(
            r.append_newest(
                Entry {
                    timestamp: 4,
                    value: None
                },
                9
            )
            .is_err()
        );
    }

    #[test]
    fn degenerate_rows_become_normal_rows() {
        let mut r = SegmentRow::degenerate(10);
        r.insert_oldest(Entry {
            timestamp: 5,
            value: Some(b"v"),
        });
        assert_eq!(r, row(10, &[(5, Some(b"v"))]));
        let mut r = SegmentRow::degenerate(10);
        r.append_newest(
            Entry {
                timestamp: 12,
                value: Some(b"v"),
            },
            20,
        )
        .expect("append");
        assert_eq!(r, row(20, &[(12, Some(b"v")), (10, None)]));
        let mut r = SegmentRow::degenerate(10);
        r.end_with_tombstone(15);
        assert_eq!(r, row(15, &[(10, None)]));
    }

    #[test]
    fn corrupted_input_is_an_error_not_a_panic() {
        let good = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]).encode();
        // every truncation
        for len in 0..good.len() {
            assert!(
                SegmentRow::decode(&good[..len], &loc).is_err(),
                "truncated to {len}"
            );
        }
        // trailing garbage
        let mut long = good.clone();
        long.push(0);
        assert!(SegmentRow::decode(&long, &loc).is_err());
        // a min_timestamp that no entry reaches
        let mut bad = good.clone();
        bad[8..16].copy_from_slice(&4i64.to_be_bytes());
        assert!(SegmentRow::decode(&bad, &loc).is_err());
        // a size below -1
        let mut bad = good;
        bad[24..28].copy_from_slice(&(-2i32).to_be_bytes());
        let err = SegmentRow::decode(&bad, &loc).expect_err("corrupt");
        assert!(err.to_string().contains("test row"), "{err}");
    }

    /// A lookup's answer as plain data: `(timestamp, valid_to, value, 0)` found, `1` after,
    /// `(min_timestamp, .., 2)` before.
    type Flat = (i64, i64, Option<Vec<u8>>, u8);

    /// Every answer of a `lookup_each`-like `read` of `n` times, each given exactly once.
    fn answers(
        n: usize,
        read: impl FnOnce(&mut dyn FnMut(usize, Lookup<'_>) -> Result<()>) -> Result<()>,
    ) -> Result<Vec<Option<Flat>>> {
        let mut got: Vec<Option<Flat>> = vec![None; n];
        read(&mut |k, found| {
            let flat = match found {
                Lookup::Found {
                    timestamp,
                    valid_to,
                    value,
                } => (timestamp, valid_to, value.map(<[u8]>::to_vec), 0),
                Lookup::After => (0, 0, None, 1),
                Lookup::Before { min_timestamp } => (min_timestamp, 0, None, 2),
            };
            assert!(got[k].replace(flat).is_none(), "time {k} answered twice");
            Ok(())
        })?;
        Ok(got)
    }

    type ArbRow = (i64, Vec<(i64, Option<Vec<u8>>)>);

    fn arb_row() -> impl Strategy<Value = ArbRow> {
        (
            proptest::collection::btree_set(0i64..1_000_000, 1..20),
            proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                20,
            ),
            1i64..1_000,
        )
            .prop_map(|(timestamps, values, gap)| {
                let newest = *timestamps.iter().next_back().unwrap_or(&0);
                let entries = timestamps
                    .iter()
                    .rev()
                    .zip(values)
                    .map(|(&t, v)| (t, v))
                    .collect();
                (newest + gap, entries)
            })
    }

    /// `(timestamp, valid_to, value)` of each append, in order.
    type Appends = Vec<(i64, i64, Option<Vec<u8>>)>;

    /// Appends as the put algorithm makes them: each newer than the row's end.
    fn appends_after(
        next: i64,
        gaps: &[(i64, i64, Option<Vec<u8>>)],
    ) -> Vec<(i64, i64, Option<Vec<u8>>)> {
        let mut end = next;
        gaps.iter()
            .map(|(gap, len, value)| {
                let ts = end + gap;
                end = ts + len;
                (ts, end, value.clone())
            })
            .collect()
    }

    fn by_decode_and_append(
        base: Option<&[u8]>,
        appends: &[(i64, i64, Option<Vec<u8>>)],
    ) -> Vec<u8> {
        let mut row = base.map(|b| SegmentRow::decode(b, &loc).expect("base decodes"));
        for (ts, valid_to, value) in appends {
            let entry = Entry {
                timestamp: *ts,
                value: value.as_deref(),
            };
            match &mut row {
                Some(r) => r.append_newest(entry, *valid_to).expect("append"),
                None => row = Some(SegmentRow::single(entry, *valid_to)),
            }
        }
        row.expect("a row").encode()
    }

    fn operand(appends: &[(i64, i64, Option<Vec<u8>>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (ts, valid_to, value) in appends {
            encode_append(
                Entry {
                    timestamp: *ts,
                    value: value.as_deref(),
                },
                *valid_to,
                &mut out,
            );
        }
        out
    }

    #[test]
    fn appends_merge_like_append_newest_case_table() {
        let degenerate = SegmentRow::degenerate(10).encode();
        let normal = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]).encode();
        let cases: Vec<(Option<&[u8]>, Appends)> = vec![
            (None, vec![(1, 2, Some(b"a".to_vec()))]),
            (
                None,
                vec![
                    (1, 2, None),
                    (2, 5, Some(Vec::new())),
                    (7, 9, Some(b"b".to_vec())),
                ],
            ),
            // a degenerate tombstone at the appended time is replaced; an older one stays
            (Some(&degenerate), vec![(10, 12, Some(b"v".to_vec()))]),
            (Some(&degenerate), vec![(11, 12, Some(b"v".to_vec()))]),
            // a gap after the row's end becomes an explicit tombstone
            (
                Some(&normal),
                vec![(9, 11, Some(b"v".to_vec())), (15, 20, None)],
            ),
        ];
        for (base, appends) in cases {
            let op = operand(&appends);
            let merged = merge_appends(base, [&op[..]].into_iter());
            assert_eq!(merged, by_decode_and_append(base, &appends), "{appends:?}");
            // operands concatenate: one append per operand gives the same row
            let ops: Vec<Vec<u8>> = appends
                .iter()
                .map(|a| operand(std::slice::from_ref(a)))
                .collect();
            let split = merge_appends(base, ops.iter().map(Vec::as_slice));
            assert_eq!(split, merged);
        }
    }

    #[test]
    fn an_append_that_does_not_fit_poisons_the_row_and_keeps_the_bytes() {
        let base = row(9, &[(7, Some(b"yz"))]).encode();
        // starts before the row ends: the put algorithm never makes this
        let op = operand(&[(8, 12, Some(b"v".to_vec()))]);
        let merged = merge_appends(Some(&base), [&op[..]].into_iter());
        assert!(SegmentRow::decode(&merged, &loc).is_err());
        assert_eq!(&merged[..8], &POISON);
        assert_eq!(&merged[8..8 + base.len()], &base[..]);
        // an undecodable base likewise
        let merged = merge_appends(Some(b"junk"), [&op[..]].into_iter());
        assert!(SegmentRow::decode(&merged, &loc).is_err());
        assert!(matches!(
            lookup(&merged, 9, &loc),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn lookup_agrees_with_decode() {
        let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
        let bytes = r.encode();
        assert_eq!(
            lookup(&bytes, 2, &loc).ok(),
            Some(Lookup::Before { min_timestamp: 3 })
        );
        assert_eq!(lookup(&bytes, 9, &loc).ok(), Some(Lookup::After));
        assert_eq!(
            lookup(&bytes, 4, &loc).ok(),
            Some(Lookup::Found {
                timestamp: 3,
                valid_to: 5,
                value: Some(b"x")
            })
        );
        assert_eq!(
            lookup(&bytes, 6, &loc).ok(),
            Some(Lookup::Found {
                timestamp: 5,
                valid_to: 7,
                value: None
            })
        );
        assert_eq!(
            lookup(&bytes, 8, &loc).ok(),
            Some(Lookup::Found {
                timestamp: 7,
                valid_to: 9,
                value: Some(b"yz")
            })
        );
        let newest_at_max = SegmentRow::degenerate(i64::MAX).encode();
        assert!(SegmentRow::decode(&newest_at_max, &loc).is_ok());
        assert_eq!(
            lookup(&newest_at_max, i64::MAX, &loc).ok(),
            Some(Lookup::After)
        );
        for len in 0..bytes.len() {
            assert!(
                lookup(&bytes[..len], 4, &loc).is_err(),
                "truncated to {len}"
            );
        }
    }

    /// What `lookup` must answer for `t`, from a decoded row.
    fn decoded_lookup<'a>(row: &SegmentRow<'a>, t: i64) -> Lookup<'a> {
        if row.next_timestamp() <= t {
            Lookup::After
        } else if row.min_timestamp() > t {
            Lookup::Before {
                min_timestamp: row.min_timestamp(),
            }
        } else {
            let i = row.find(t).expect("covered");
            Lookup::Found {
                timestamp: row.entries()[i].timestamp,
                valid_to: row.valid_to(i),
                value: row.entries()[i].value,
            }
        }
    }

    proptest! {
        #[test]
        fn merged_appends_equal_append_newest(
            (next, entries) in arb_row(),
            gaps in proptest::collection::vec(
                (0i64..3, 1i64..4, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4))),
                1..6,
            ),
            no_base in any::<bool>(),
        ) {
            let base = SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            }.encode();
            let base = (!no_base).then_some(&base[..]);
            let appends = appends_after(next, &gaps);
            let op = operand(&appends);
            prop_assert_eq!(merge_appends(base, [&op[..]].into_iter()), by_decode_and_append(base, &appends));
        }

        #[test]
        fn lookup_finds_what_decode_finds((next, entries) in arb_row(), t in 0i64..1_100_000) {
            let r = SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            };
            let bytes = r.encode();
            prop_assert_eq!(lookup(&bytes, t, &loc).ok(), Some(decoded_lookup(&r, t)));
        }

        /// A row with bytes overwritten (or cut short) is read by `lookup` exactly as the full
        /// decoder reads it: the same answer when it decodes, an error when it does not,
        /// except where the 16-byte header alone answers.
        #[test]
        fn lookup_checks_what_decode_checks(
            (next, entries) in arb_row(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in proptest::option::of(any::<prop::sample::Index>()),
            t in 0i64..1_100_000,
        ) {
            let r = SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            };
            let mut bytes = r.encode();
            for (at, byte) in edits {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            let looked = lookup(&bytes, t, &loc);
            match SegmentRow::decode(&bytes, &loc) {
                Ok(decoded) => {
                    let expected = decoded_lookup(&decoded, t);
                    prop_assert_eq!(looked.ok(), Some(expected));
                }
                Err(_) => prop_assert!(
                    !matches!(looked, Ok(Lookup::Found { .. })),
                    "lookup found {:?} in a row that does not decode", looked
                ),
            }
        }

        /// `lookup_each_appended` answers as `lookup_each` on the merged row, valid or not.
        #[test]
        fn lookup_each_appended_agrees_with_the_merged_row(
            (next, entries) in arb_row(),
            gaps in proptest::collection::vec(
                (-2i64..3, 1i64..4, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4))),
                0..5,
            ),
            no_base in any::<bool>(),
            lone_tombstone in any::<bool>(),
            edit in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
            times in proptest::collection::vec(0i64..1_100_000, 0..6),
            near in proptest::collection::vec(-3i64..20, 0..6),
        ) {
            let base = if lone_tombstone {
                SegmentRow::degenerate(next).encode()
            } else {
                SegmentRow {
                    next_timestamp: next,
                    entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
                }.encode()
            };
            let base = (!no_base).then_some(&base[..]);
            let mut op = operand(&appends_after(next, &gaps));
            if let Some((at, byte)) = edit.filter(|_| !op.is_empty()) {
                let i = at.index(op.len());
                op[i] = byte;
            }
            // Times around the base's end and the appended versions, and anywhere.
            let times: Vec<i64> = times.into_iter().chain(near.iter().map(|d| next + d)).collect();
            let merged = merge_appends(base, std::iter::once(&op[..]));
            let expected = answers(times.len(), |f| lookup_each(&merged, &times, &loc, f));
            let split = answers(times.len(), |f| lookup_each_appended(base, &op, &times, &loc, f));
            match expected {
                Ok(expected) => prop_assert_eq!(split.ok(), Some(expected)),
                Err(_) => prop_assert!(split.is_err()),
            }
        }

        /// `lookup_each` answers every time as `lookup` does, and fails when one of them fails.
        #[test]
        fn lookup_each_agrees_with_lookup(
            (next, entries) in arb_row(),
            edit in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
            times in proptest::collection::vec(0i64..1_100_000, 0..6),
        ) {
            let r = SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            };
            let mut bytes = r.encode();
            if let Some((at, byte)) = edit {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            let one_by_one: Result<Vec<Lookup<'_>>> =
                times.iter().map(|&t| lookup(&bytes, t, &loc)).collect();
            let mut each = vec![None; times.len()];
            let all = lookup_each(&bytes, &times, &loc, |k, found| {
                assert!(each[k].replace(found).is_none(), "time {k} answered twice");
                Ok(())
            });
            match one_by_one {
                Ok(expected) => {
                    prop_assert!(all.is_ok());
                    prop_assert_eq!(each, expected.into_iter().map(Some).collect::<Vec<_>>());
                }
                Err(_) => prop_assert!(all.is_err()),
            }
        }

        #[test]
        fn round_trips_any_row((next, entries) in arb_row()) {
            let r = SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            };
            let bytes = r.encode();
            prop_assert_eq!(SegmentRow::decode(&bytes, &loc).ok(), Some(r));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = SegmentRow::decode(&bytes, &loc);
        }
    }
}
