//! The record batches a scan sends: their schema, and the batch being built.

use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::pipe::Pipe;
use crate::error::{Error, Result};
use crate::record::VersionedRecord;

/// A batch ends before its keys or its values pass this many bytes (unless it has one row).
pub const BATCH_BYTES: usize = 64 << 20;

/// The schema of scan batches, but for a scan that returns tombstones ([`schema_with`]).
#[must_use]
pub fn schema() -> SchemaRef {
    schema_with(false)
}

/// The schema of a scan's batches: `value` is nullable when it returns `tombstones`.
#[must_use]
pub fn schema_with(tombstones: bool) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("value", DataType::Binary, tombstones),
        Field::new("timestamp", DataType::Int64, false),
        Field::new("valid_to", DataType::Int64, true),
    ]))
}

/// The batch being built, sent down the pipe when full.
pub(super) struct Batches<'p> {
    batch_rows: usize,
    pipe: &'p Pipe,
    schema: SchemaRef,
    keys: Vec<u8>,
    key_offsets: Vec<i32>,
    values: Vec<u8>,
    value_offsets: Vec<i32>,
    /// Whether each row's value is one (not a tombstone), when the scan returns tombstones.
    is_value: Option<Vec<bool>>,
    timestamps: Vec<i64>,
    valid_to: Vec<i64>,
    newest: Vec<bool>,
}

impl<'p> Batches<'p> {
    /// Batches of `batch_rows` rows, which may hold `tombstones`, for `pipe`.
    pub(super) fn new(batch_rows: usize, tombstones: bool, pipe: &'p Pipe) -> Self {
        let mut batches = Self {
            batch_rows,
            pipe,
            schema: schema_with(tombstones),
            keys: Vec::new(),
            key_offsets: Vec::new(),
            values: Vec::new(),
            value_offsets: Vec::new(),
            is_value: tombstones.then(Vec::new),
            timestamps: Vec::new(),
            valid_to: Vec::new(),
            newest: Vec::new(),
        };
        batches.reset();
        batches
    }

    fn reset(&mut self) {
        let rows = self.batch_rows.min(1 << 16);
        self.keys = Vec::new();
        self.values = Vec::new();
        self.key_offsets = Vec::with_capacity(rows + 1);
        self.key_offsets.push(0);
        self.value_offsets = Vec::with_capacity(rows + 1);
        self.value_offsets.push(0);
        if let Some(is_value) = &mut self.is_value {
            *is_value = Vec::with_capacity(rows);
        }
        self.timestamps = Vec::with_capacity(rows);
        self.valid_to = Vec::with_capacity(rows);
        self.newest = Vec::with_capacity(rows);
    }

    fn len(&self) -> usize {
        self.timestamps.len()
    }

    pub(super) fn push_record(&mut self, key: &[u8], record: &VersionedRecord) -> Result<bool> {
        self.push(key, Some(&record.value), record.timestamp, record.valid_to)
    }

    /// Adds a row (`value` `None`: a tombstone, in a scan that returns them); `false` when the
    /// scan was ended meanwhile.
    pub(super) fn push(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: i64,
        valid_to: Option<i64>,
    ) -> Result<bool> {
        let value_bytes = value.unwrap_or_default();
        let too_big = self.keys.len() + key.len() > BATCH_BYTES
            || self.values.len() + value_bytes.len() > BATCH_BYTES;
        if too_big && self.len() > 0 && !self.flush()? {
            return Ok(false);
        }
        self.keys.extend_from_slice(key);
        self.key_offsets.push(offset(self.keys.len(), "keys")?);
        self.values.extend_from_slice(value_bytes);
        self.value_offsets
            .push(offset(self.values.len(), "values")?);
        if let Some(is_value) = &mut self.is_value {
            is_value.push(value.is_some());
        }
        self.timestamps.push(timestamp);
        self.valid_to.push(valid_to.unwrap_or_default());
        self.newest.push(valid_to.is_none());
        if self.len() >= self.batch_rows {
            return self.flush();
        }
        Ok(true)
    }

    /// Sends the rows so far as one batch (nothing when there are none); `false` when the scan
    /// was ended.
    pub(super) fn flush(&mut self) -> Result<bool> {
        if self.len() == 0 {
            return Ok(true);
        }
        let binary = |offsets: Vec<i32>, bytes: Vec<u8>, nulls: Option<NullBuffer>| -> ArrayRef {
            Arc::new(BinaryArray::new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Buffer::from_vec(bytes),
                nulls,
            ))
        };
        let tombstones = self
            .is_value
            .as_mut()
            .map(|is_value| std::mem::take(is_value).into_iter().collect::<NullBuffer>());
        let valid = std::mem::take(&mut self.newest)
            .into_iter()
            .map(|newest| !newest)
            .collect::<NullBuffer>();
        let columns: Vec<ArrayRef> = vec![
            binary(
                std::mem::take(&mut self.key_offsets),
                std::mem::take(&mut self.keys),
                None,
            ),
            binary(
                std::mem::take(&mut self.value_offsets),
                std::mem::take(&mut self.values),
                tombstones,
            ),
            Arc::new(Int64Array::new(
                ScalarBuffer::from(std::mem::take(&mut self.timestamps)),
                None,
            )),
            Arc::new(Int64Array::new(
                ScalarBuffer::from(std::mem::take(&mut self.valid_to)),
                Some(valid),
            )),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)
            .map_err(|e| Error::corrupt("a scan batch", e.to_string()))?;
        self.reset();
        Ok(self.pipe.send(Ok(batch)))
    }
}

fn offset(len: usize, column: &str) -> Result<i32> {
    i32::try_from(len).map_err(|_| {
        Error::invalid(
            "batch_rows",
            format!("a scan row's {column} are larger than an Arrow binary array holds (2 GiB)"),
        )
    })
}
