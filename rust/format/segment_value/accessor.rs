//! Reading versions straight out of a row's encoded bytes, without decoding it.

use super::validate::{Position, RowShape, check, header, index_entry, locate, validate};
use crate::error::{Error, Result};

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

/// What the header alone says about `t` (`None`: the row holds the answer).
pub(super) fn from_header<'a>(
    (next_timestamp, min_timestamp): (i64, i64),
    t: i64,
) -> Option<Lookup<'a>> {
    if next_timestamp <= t {
        Some(Lookup::After)
    } else if min_timestamp > t {
        Some(Lookup::Before { min_timestamp })
    } else {
        None
    }
}

/// The version at `position` of a row that [`validate`] checked.
pub(super) fn found_at<'a>(
    bytes: &'a [u8],
    shape: &RowShape,
    position: Position,
    location: &dyn Fn() -> String,
) -> Result<Lookup<'a>> {
    let index = shape.index(bytes);
    let entry = |i: usize| index.get(i).map(index_entry);
    let Some((timestamp, size)) = entry(position.newer) else {
        return Err(locate(bytes, location));
    };
    let valid_to = match position.newer.checked_sub(1) {
        Some(newer) => entry(newer).map_or(shape.next_timestamp, |(t, _)| t),
        None => shape.next_timestamp,
    };
    let value = match usize::try_from(size) {
        Ok(len) => {
            let end = bytes.len().saturating_sub(position.newer_values);
            let start = end
                .checked_sub(len)
                .filter(|&start| start >= shape.values_start)
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
/// row with the [`validate`] that [`SegmentRow::decode`](super::SegmentRow::decode) runs (the
/// value offsets come from the row's end: the newest value ends the row).
pub(crate) fn lookup<'a>(
    bytes: &'a [u8],
    t: i64,
    location: &dyn Fn() -> String,
) -> Result<Lookup<'a>> {
    if let Some(answer) = from_header(header(bytes, location)?, t) {
        return Ok(answer);
    }
    let mut position = [Position::default()];
    let shape = validate(bytes, &[t], &mut position, location)?;
    found_at(bytes, &shape, position[0], location)
}

/// [`lookup`] of every one of `times` in one row: `f(k, lookup of times[k])`, in any order.
/// The row is walked and validated once for all of them (a batch often reads a hot key at
/// many times), and no answer from the index is given before the whole row is checked.
pub(super) fn lookup_each<'a>(
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
    let (shape, positions) = check_at(bytes, &mut inside).ok_or_else(|| locate(bytes, location))?;
    for (&(_, k), &position) in inside.iter().zip(&positions) {
        f(k, found_at(bytes, &shape, position, location)?)?;
    }
    Ok(())
}

/// Checks the row in one walk ([`check`]) and finds where each of `inside`'s times (`(t, k)`
/// pairs, every one within the row's range) falls in it; sorts `inside` newest first, as the
/// walk goes. `None`: the row does not hold.
pub(super) fn check_at(
    bytes: &[u8],
    inside: &mut [(i64, usize)],
) -> Option<(RowShape, Vec<Position>)> {
    inside.sort_unstable_by(|a, b| b.cmp(a));
    let sorted: Vec<i64> = inside.iter().map(|&(t, _)| t).collect();
    let mut positions = vec![Position::default(); sorted.len()];
    let shape = check(bytes, &sorted, &mut positions)?;
    Some((shape, positions))
}
