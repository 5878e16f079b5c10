//! Format-2 appends: encoded, merged into a row, and read with the row without merging.

use super::accessor::{check_at, found_at, from_header, lookup_each};
use super::validate::{Position, RowShape, check};
use super::{Entry, HEADER_LEN, INDEX_ENTRY_LEN, Lookup, TOMBSTONE_SIZE};
use crate::error::Result;
use crate::format::{read_i32, read_i64};

const APPEND_HEADER_LEN: usize = 20;
/// The first 8 bytes of a row that merged inconsistently: `next_timestamp = -1`, which no row
/// decodes with.
pub(super) const POISON: [u8; 8] = [0xFF; 8];

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
pub(crate) fn decode_append(bytes: &[u8]) -> Option<(Entry<'_>, i64, &[u8])> {
    let timestamp = read_i64(bytes, 0)?;
    let valid_to = read_i64(bytes, 8)?;
    let size = read_i32(bytes, 16)?;
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
/// to `base` (`None`: no row). Each append is
/// [`SegmentRow::append_newest`](super::SegmentRow::append_newest). Never fails: when
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

/// Applies appends by copying: the new index entries, then the base's index and values as
/// they are, then the new values (the layout puts the newest index entries first and the
/// newest values last). Linear in the row's size, with no decoding of the base's entries.
fn apply_appends<'o>(
    base: Option<&[u8]>,
    operands: impl Iterator<Item = &'o [u8]>,
) -> Option<Vec<u8>> {
    let shape = match base {
        Some(bytes) => Some(check(bytes, &[], &mut [])?),
        None => None,
    };
    let appended = decode_appends(shape.as_ref(), operands)?;
    let next_timestamp = appended.next_timestamp?;
    let base = base.zip(shape).filter(|_| appended.keep_base);
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
    if let Some((bytes, shape)) = &base {
        out.extend_from_slice(bytes.get(HEADER_LEN..shape.values_start)?);
        out.extend_from_slice(bytes.get(shape.values_start..)?);
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

/// The versions `operands` append to the row `shape` describes (`None`: no row), checked to
/// follow each other; `None` when they do not.
fn decode_appends<'o>(
    shape: Option<&RowShape>,
    operands: impl Iterator<Item = &'o [u8]>,
) -> Option<Appended<'o>> {
    let mut next = shape.map(|s| s.next_timestamp);
    let mut degenerate = shape.is_some_and(|s| s.degenerate);
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
    let Some((bytes, shape)) = split.base else {
        return Ok(());
    };
    for (&(_, k), &position) in split.inside.iter().zip(&split.positions) {
        f(k, found_at(bytes, &shape, position, location)?)?;
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
    base: Option<(&'a [u8], RowShape)>,
    /// The times the base answers, newest first, as `(t, k)`, and where each falls in it.
    inside: Vec<(i64, usize)>,
    positions: Vec<Position>,
}

impl<'a> AppendedRow<'a> {
    /// `None` where the merge must decide: no appends, a base that does not hold or is a lone
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
                let (next, min) = (read_i64(bytes, 0)?, read_i64(bytes, 8)?);
                inside.extend(
                    times
                        .iter()
                        .enumerate()
                        .filter_map(|(k, &t)| (min <= t && t < next).then_some((t, k))),
                );
                let shape;
                (shape, positions) = check_at(bytes, &mut inside)?;
                if shape.degenerate {
                    return None;
                }
                Some((bytes, shape))
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
