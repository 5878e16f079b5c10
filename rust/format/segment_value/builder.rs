//! [`SegmentRow`]: a decoded row that the put algorithm changes and encodes again.

use super::validate::{index_entry, locate, validate};
use super::{Entry, HEADER_LEN, INDEX_ENTRY_LEN, TOMBSTONE_SIZE};
use crate::error::{Error, Result};

/// A decoded row. Entries are newest first; values borrow from the encoded row or the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentRow<'a> {
    pub(super) next_timestamp: i64,
    pub(super) entries: Vec<Entry<'a>>,
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

    /// Decodes and validates a row; `location` names it in errors. The entries are read from
    /// the index [`validate`] checked, so nothing is checked twice.
    pub(crate) fn decode(bytes: &'a [u8], location: &dyn Fn() -> String) -> Result<Self> {
        let shape = validate(bytes, &[], &mut [], location)?;
        let index = shape.index(bytes);
        let mut entries = Vec::with_capacity(index.len());
        // The newest value ends the row: values are taken from the end, newest first.
        let mut end = bytes.len();
        for entry in index {
            let (timestamp, size) = index_entry(entry);
            let value = match usize::try_from(size) {
                Ok(len) => {
                    let start = end.checked_sub(len).filter(|&s| s >= shape.values_start);
                    let Some((start, value)) = start.and_then(|s| Some((s, bytes.get(s..end)?)))
                    else {
                        return Err(locate(bytes, location));
                    };
                    end = start;
                    Some(value)
                }
                Err(_) => None,
            };
            entries.push(Entry { timestamp, value });
        }
        Ok(Self {
            next_timestamp: shape.next_timestamp,
            entries,
        })
    }
}
