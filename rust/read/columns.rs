//! The records a batch read returns, as columns.

use crate::record::VersionedRecord;

/// The records a batch read found, as columns in row order: row `i` is absent when
/// `present[i]` is false, else its value is `values[offsets[i]..offsets[i + 1]]`. Ready to be
/// handed to Arrow without a copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordColumns {
    /// Every found value, concatenated in row order.
    pub values: Vec<u8>,
    /// `len + 1` offsets into `values`.
    pub offsets: Vec<usize>,
    /// Whether row `i` found a record.
    pub present: Vec<bool>,
    /// Valid-from of row `i`'s record (0 when absent).
    pub timestamps: Vec<i64>,
    /// Valid-to of row `i`'s record (`None` when absent or the newest version).
    pub valid_to: Vec<Option<i64>>,
}

impl RecordColumns {
    /// Number of rows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.present.len()
    }

    /// Whether there are no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.present.is_empty()
    }

    /// Appends a row.
    pub fn push(&mut self, record: Option<&VersionedRecord>) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        if let Some(r) = record {
            self.values.extend_from_slice(&r.value);
            self.present.push(true);
            self.timestamps.push(r.timestamp);
            self.valid_to.push(r.valid_to);
        } else {
            self.present.push(false);
            self.timestamps.push(0);
            self.valid_to.push(None);
        }
        self.offsets.push(self.values.len());
    }

    /// Row `i` as a record.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<VersionedRecord> {
        if !*self.present.get(i)? {
            return None;
        }
        let value = self
            .values
            .get(*self.offsets.get(i)?..*self.offsets.get(i + 1)?)?;
        Some(VersionedRecord {
            value: value.to_vec(),
            timestamp: *self.timestamps.get(i)?,
            valid_to: *self.valid_to.get(i)?,
        })
    }
}

impl FromIterator<Option<VersionedRecord>> for RecordColumns {
    fn from_iter<I: IntoIterator<Item = Option<VersionedRecord>>>(records: I) -> Self {
        let mut columns = Self::default();
        for record in records {
            columns.push(record.as_ref());
        }
        columns
    }
}
