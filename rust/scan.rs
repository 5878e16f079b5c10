//! Scans: the records of many keys, in ascending key order, as Arrow record batches.
//!
//! A scan visits every key, a key range or a key prefix, and returns per key either the record
//! valid at a time — exactly what [`VersionedStore::get_as_of`](crate::VersionedStore) (or
//! `get`, for the latest) returns for it, retention horizon included — or every version in a
//! time range, as `versions` returns them (docs/semantics.md §2.2, §2.3, §2.5). Keys without a
//! record are left out.
//!
//! **One consistent state.** A scan reads the store as it was when the scan started: a RocksDB
//! snapshot, or the in-memory store's segment maps shared copy-on-write. Writes made after the
//! scan started, from any thread, are not seen. A store without a write-ahead log keeps recent
//! writes in a write buffer (`crate::overlay`); starting a scan writes the buffer to RocksDB
//! first, so the snapshot holds everything a `get` would see. (Merging the buffer into the scan
//! instead would mean copying it, up to a quarter of a memtable, for every scan.)
//!
//! **Lazy and bounded.** The snapshot and its iterators borrow the database, so they live on a
//! thread of their own (the *producer*), which owns a share of the database and sends batches
//! through a [`pipe`] with room for one: a scan holds at most three batches whatever the size
//! of the store, and reads ahead by one while the caller works on the previous batch. A batch
//! ends after `batch_rows` rows, or earlier when its keys or values would pass
//! [`BATCH_BYTES`]. Closing (or dropping) the scan stops the producer at its next key; closing
//! the store ends its open scans (they report [`Error::Closed`]) and waits for their producers
//! to let go of the database.
//!
//! **How a key is read.** Each segment the scan needs gets a cursor over the scan's key range:
//! the latest-value store always; for an as-of read at or above the horizon the live segments
//! from `segment_id(as_of)` up; for versions, when `to_time` is at or above the horizon, every
//! live segment that can hold a version valid after `from_time`. The producer merges the cursors
//! by key, and answers each key with the point-read algorithms of [`crate::read`] run against
//! the rows the cursors stand on, so a scan and a `get` cannot disagree. An as-of read answered
//! by the latest value (the common case) decodes it straight from its cursor.

pub(crate) mod pipe;

use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::backend::snapshot::{Cursor, OpenCursor, SegmentRange, SnapshotReader};
use crate::backend::{Backend, Visit};
use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, PREFIX_LEN, segment_of};
use crate::format::latest_value;
use crate::read::{self, ResultOrder};
use crate::record::VersionedRecord;
use crate::state::State;
use crate::view::ReadClient;
use pipe::{OpenScans, Pipe, Received};

/// A batch ends before its keys or its values pass this many bytes (unless it has one row).
pub const BATCH_BYTES: usize = 64 << 20;

/// Which keys a scan visits. Keys are compared as unsigned bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KeyRange {
    /// Every key.
    #[default]
    All,
    /// The keys `k` with `start <= k < end`; a missing bound is open.
    Between {
        /// Lowest key (inclusive).
        start: Option<Vec<u8>>,
        /// Bound above every key (exclusive).
        end: Option<Vec<u8>>,
    },
    /// The keys that begin with these bytes (every key for an empty prefix).
    Prefix(Vec<u8>),
}

impl KeyRange {
    /// The range of the Python arguments: `prefix` or `start`/`end`, or none of them.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `prefix` when it comes with `start` or `end`, naming
    /// `end` when `end < start`.
    pub fn new(
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> Result<Self> {
        match (start, end, prefix) {
            (None, None, None) => Ok(Self::All),
            (None, None, Some(prefix)) => Ok(Self::Prefix(prefix)),
            (_, _, Some(_)) => Err(Error::invalid(
                "prefix",
                "prefix cannot be combined with start or end",
            )),
            (Some(start), Some(end), None) if end < start => Err(Error::invalid(
                "end",
                format!(
                    "end ({} bytes) must not sort before start ({} bytes)",
                    end.len(),
                    start.len()
                ),
            )),
            (start, end, None) => Ok(Self::Between { start, end }),
        }
    }

    /// User-key bounds `[lower, upper)`; `upper` is `None` when unbounded.
    fn bounds(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            Self::All => (Vec::new(), None),
            Self::Between { start, end } => (start.clone().unwrap_or_default(), end.clone()),
            Self::Prefix(prefix) => {
                // The first key after every key with the prefix: drop trailing 0xFF bytes and
                // increment the last one left; none left means no bound.
                let mut upper = prefix.clone();
                while upper.last() == Some(&0xFF) {
                    upper.pop();
                }
                let upper = match upper.last_mut() {
                    Some(last) => {
                        *last += 1;
                        Some(upper)
                    }
                    None => None,
                };
                (prefix.clone(), upper)
            }
        }
    }
}

/// What a scan returns for each key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The record valid at this time (`None`: the newest version), as `get`.
    AsOf(Option<i64>),
    /// Every version whose validity meets `[from, to]`, in `order`, as `versions`.
    Versions {
        from: i64,
        to: i64,
        order: ResultOrder,
    },
}

/// A scan's work, done on its producer thread.
pub(crate) struct ScanJob {
    /// The store's state when the scan started.
    state: State,
    keys: KeyRange,
    kind: Kind,
    batch_rows: usize,
    location: String,
    pipe: Arc<Pipe>,
}

impl SnapshotReader for ScanJob {
    /// The snapshot is taken: the scan may be handed to its caller.
    fn started(&self) {
        self.pipe.mark_started();
    }

    /// Reads the scan through cursors that `open` makes and sends its batches.
    fn read(self: Box<Self>, open: &mut OpenCursor<'_>) {
        if let Err(error) = self.produce(open) {
            self.pipe.send(Err(error));
        }
    }
}

impl ScanJob {
    /// The history segments to read, newest first.
    fn segments(&self) -> Vec<i64> {
        let config = self.state.config;
        let horizon = self
            .state
            .stream_time
            .saturating_sub(config.history_retention_ms());
        let live = self.state.segments.newest_first();
        match self.kind {
            Kind::AsOf(None) => Vec::new(),
            Kind::AsOf(Some(t)) if t < horizon => Vec::new(),
            Kind::AsOf(Some(t)) => {
                let lowest = config.segment_id(t).max(0);
                live.take_while(|&s| s >= lowest).collect()
            }
            Kind::Versions { to, .. } if to < horizon => Vec::new(),
            Kind::Versions { from, .. } => {
                // Segment `s` holds valid-tos up to `(s + 1)·I − 1`: below `from` + 1 nothing
                // in it (or older) is selected, and `versions` would read nothing there.
                let interval = i128::from(config.segment_interval_ms());
                live.take_while(|&s| (i128::from(s) + 1) * interval - 1 > i128::from(from))
                    .collect()
            }
        }
    }

    fn produce(&self, open: &mut OpenCursor<'_>) -> Result<()> {
        let (lower, upper) = self.keys.bounds();
        let range = |segment| SegmentRange::new(segment, &lower, upper.as_deref());
        let mut cursors = Cursors {
            latest: open(range(LATEST_SEGMENT))?,
            rows: Vec::new(),
            location: &self.location,
        };
        for segment in self.segments() {
            cursors.rows.push((segment, open(range(segment))?));
        }
        let mut out = Batches::new(self.batch_rows, &self.pipe);
        let mut key = Vec::new();
        while let Some(next) = cursors.smallest() {
            if self.pipe.is_ended() {
                return Ok(());
            }
            key.clear();
            key.extend_from_slice(next);
            if !self.emit(&cursors, &key, &mut out)? {
                return Ok(());
            }
            cursors.advance_past(&key)?;
        }
        out.flush()?;
        Ok(())
    }

    /// Adds `key`'s records to `out`; `false` when the scan was ended meanwhile.
    fn emit(&self, cursors: &Cursors<'_, '_>, key: &[u8], out: &mut Batches) -> Result<bool> {
        let latest = cursors.latest_value(key);
        match self.kind {
            Kind::AsOf(as_of) => {
                if let Some(bytes) = latest {
                    let (timestamp, value) = latest_value::decode(bytes)?;
                    if as_of.is_none_or(|t| timestamp <= t) {
                        return out.push(key, value, timestamp, None);
                    }
                }
                match as_of {
                    Some(t) if !cursors.rows.is_empty() => {
                        match read::as_of(cursors, &self.state, key, t)? {
                            Some(record) => out.push_record(key, &record),
                            None => Ok(true),
                        }
                    }
                    _ => Ok(true),
                }
            }
            Kind::Versions { from, to, order } => {
                for record in read::versions(cursors, &self.state, key, from, to, order)? {
                    if !out.push_record(key, &record)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }
}

/// The cursors of a scan: the latest-value store's and those of history segments, newest first.
/// As a [`ReadClient`] it answers a read of a storage key from the cursor of its segment when
/// that cursor stands on it, so the point-read algorithms run unchanged.
struct Cursors<'l, 's> {
    latest: Box<dyn Cursor + 's>,
    rows: Vec<(i64, Box<dyn Cursor + 's>)>,
    location: &'l str,
}

impl Cursors<'_, '_> {
    fn all(&self) -> impl Iterator<Item = &dyn Cursor> {
        std::iter::once(self.latest.as_ref()).chain(self.rows.iter().map(|(_, c)| c.as_ref()))
    }

    /// The smallest user key any cursor stands on.
    fn smallest(&self) -> Option<&[u8]> {
        self.all()
            .filter_map(|c| c.key().and_then(|k| k.get(PREFIX_LEN..)))
            .min()
    }

    /// The latest-value entry of `key` (the user key), if the latest cursor stands on it.
    fn latest_value(&self, key: &[u8]) -> Option<&[u8]> {
        let here = self.latest.key()?.get(PREFIX_LEN..)?;
        (here == key).then(|| self.latest.value()).flatten()
    }

    /// Moves every cursor standing on `key` (the user key) to its next key.
    fn advance_past(&mut self, key: &[u8]) -> Result<()> {
        let cursors = std::iter::once(&mut self.latest).chain(self.rows.iter_mut().map(|(_, c)| c));
        for cursor in cursors {
            if cursor.key().and_then(|k| k.get(PREFIX_LEN..)) == Some(key) {
                cursor.advance()?;
            }
        }
        Ok(())
    }
}

impl ReadClient for Cursors<'_, '_> {
    fn read_with(&self, key: &[u8], visit: &mut Visit<'_>) -> Result<()> {
        let cursor = match segment_of(key) {
            Some(LATEST_SEGMENT) => Some(&self.latest),
            Some(segment) => self
                .rows
                .iter()
                .find_map(|(s, c)| (*s == segment).then_some(c)),
            None => None,
        };
        match cursor {
            Some(cursor) if cursor.key() == Some(key) => visit(cursor.value()),
            // Segments the scan does not read hold nothing the read can use (`segments`).
            _ => visit(None),
        }
    }

    fn location(&self) -> String {
        self.location.to_owned()
    }
}

/// The schema of every scan batch.
#[must_use]
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("value", DataType::Binary, false),
        Field::new("timestamp", DataType::Int64, false),
        Field::new("valid_to", DataType::Int64, true),
    ]))
}

/// The batch being built, sent down the pipe when full.
struct Batches<'p> {
    batch_rows: usize,
    pipe: &'p Pipe,
    schema: SchemaRef,
    keys: Vec<u8>,
    key_offsets: Vec<i32>,
    values: Vec<u8>,
    value_offsets: Vec<i32>,
    timestamps: Vec<i64>,
    valid_to: Vec<i64>,
    newest: Vec<bool>,
}

impl<'p> Batches<'p> {
    fn new(batch_rows: usize, pipe: &'p Pipe) -> Self {
        let mut batches = Self {
            batch_rows,
            pipe,
            schema: schema(),
            keys: Vec::new(),
            key_offsets: Vec::new(),
            values: Vec::new(),
            value_offsets: Vec::new(),
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
        self.timestamps = Vec::with_capacity(rows);
        self.valid_to = Vec::with_capacity(rows);
        self.newest = Vec::with_capacity(rows);
    }

    fn len(&self) -> usize {
        self.timestamps.len()
    }

    fn push_record(&mut self, key: &[u8], record: &VersionedRecord) -> Result<bool> {
        self.push(key, &record.value, record.timestamp, record.valid_to)
    }

    /// Adds a row; `false` when the scan was ended meanwhile.
    fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
        valid_to: Option<i64>,
    ) -> Result<bool> {
        let too_big = self.keys.len() + key.len() > BATCH_BYTES
            || self.values.len() + value.len() > BATCH_BYTES;
        if too_big && self.len() > 0 && !self.flush()? {
            return Ok(false);
        }
        self.keys.extend_from_slice(key);
        self.key_offsets.push(offset(self.keys.len(), "keys")?);
        self.values.extend_from_slice(value);
        self.value_offsets
            .push(offset(self.values.len(), "values")?);
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
    fn flush(&mut self) -> Result<bool> {
        if self.len() == 0 {
            return Ok(true);
        }
        let binary = |offsets: Vec<i32>, bytes: Vec<u8>| -> ArrayRef {
            Arc::new(BinaryArray::new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Buffer::from_vec(bytes),
                None,
            ))
        };
        let valid = std::mem::take(&mut self.newest)
            .into_iter()
            .map(|newest| !newest)
            .collect::<NullBuffer>();
        let columns: Vec<ArrayRef> = vec![
            binary(
                std::mem::take(&mut self.key_offsets),
                std::mem::take(&mut self.keys),
            ),
            binary(
                std::mem::take(&mut self.value_offsets),
                std::mem::take(&mut self.values),
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

/// A running scan: an iterator of record batches with columns `key`, `value`, `timestamp`
/// (valid-from) and `valid_to` (null for newest versions), see [`schema`].
///
/// Iteration ends after the last batch; an error ends it too. Once the store is closed the scan
/// yields [`Error::Closed`]. Dropping or [closing](Scan::close) a scan stops its thread.
pub struct Scan {
    pipe: Arc<Pipe>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Closed by its caller, or ended (the last batch or an error was returned).
    done: bool,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Scan {
    /// Stops the scan and waits for its thread; later calls of `next` return `None`.
    pub fn close(&mut self) {
        self.done = true;
        self.pipe.end_by_consumer();
        if let Some(thread) = self.thread.take() {
            // The thread reports its own failures through the pipe, which nobody reads now.
            let _ = thread.join();
        }
    }
}

impl Iterator for Scan {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.pipe.recv() {
            Received::Item(Ok(batch)) => Some(Ok(batch)),
            Received::Item(Err(error)) => {
                self.done = true;
                Some(Err(error))
            }
            Received::Finished => {
                self.done = true;
                None
            }
            Received::StoreClosed => Some(Err(Error::Closed)),
        }
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        // No join: the producer stops at its next key, and the store waits for it on close.
        self.pipe.end_by_consumer();
    }
}

/// Starts a scan of `backend` as `state` describes it: spawns the producer and returns once it
/// holds its snapshot.
pub(crate) fn start(
    backend: &dyn Backend,
    state: &State,
    scans: &OpenScans,
    keys: KeyRange,
    kind: Kind,
    batch_rows: usize,
) -> Result<Scan> {
    if batch_rows == 0 {
        return Err(Error::invalid(
            "batch_rows",
            "batch_rows must be >= 1, got 0",
        ));
    }
    let pipe = Arc::new(Pipe::new());
    let job = ScanJob {
        state: state.clone(),
        keys,
        kind,
        batch_rows,
        location: backend.location(),
        pipe: Arc::clone(&pipe),
    };
    let source = backend.scan_source();
    let producer = scans.register(&pipe);
    let thread = std::thread::Builder::new()
        .name("verstore-scan".to_owned())
        .spawn(move || {
            // Dropped last: the register learns of the exit after the source let go of the data.
            let _producer = producer;
            source.run(Box::new(job));
        })
        .map_err(|source| Error::Io {
            path: std::path::PathBuf::from(backend.location()),
            source,
        })?;
    pipe.wait_started();
    Ok(Scan {
        pipe,
        thread: Some(thread),
        done: false,
    })
}

#[cfg(test)]
mod tests;
