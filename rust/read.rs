//! Reads: latest, point-in-time (as-of), batches of both, and multi-version queries.
//!
//! All reads share one rule for the *horizon* `H = ST − R`: a query whose upper bound is below
//! `H` is "expired" and sees only the newest version, and only if it is a value at or before the
//! bound (Kafka's latest-value exception, KAFKA-14491 [18/N]); the latest value never expires.
//!
//! A point read at `t` starts at the latest-value entry. Below it, versions are stored by
//! valid-to, newest rows in the highest segments, so the read walks live segments newest first
//! down to `segment_id(t)` — but it skips what cannot hold the answer: every version older than
//! one that starts at `s` ends at or before `s`, so after the latest value at `L` the next row can
//! only be in `segment_id(L)` or below, and after a row whose oldest version starts at `m`, only
//! in `segment_id(m)` or below (an implicit tombstone's row too: it ends where the next version
//! starts). A read of a key with history thus costs one lookup per row it actually passes, not
//! one per live segment. Batch reads do the same for every key at once: one sorted `MultiGet`
//! of the latest-value entries, then one per round of row lookups.
//!
//! `versions()` walks *every* live segment (docs/semantics.md §Q2: a version valid at `to` may be
//! stored in a later segment, since rows are placed by valid-to), stopping at the first row that
//! ends at or before `from`.

use crate::backend::RowRead;
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, segment_prefix, sort_prefix, storage_key};
use crate::format::latest_value;
use crate::format::segment_value::{self, Lookup, SegmentRow};
use crate::record::VersionedRecord;
use crate::state::State;
use crate::view::reader::Reader;
use crate::view::{ReadClient, read_map};

/// Order of `versions()` results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultOrder {
    /// Newest first (Kafka's effective order for `ANY`).
    #[default]
    Descending,
    /// Oldest first.
    Ascending,
}

/// `true` is [`ResultOrder::Ascending`] (Python's `ascending=True`).
impl From<bool> for ResultOrder {
    fn from(ascending: bool) -> Self {
        if ascending {
            Self::Ascending
        } else {
            Self::Descending
        }
    }
}

/// The times a batch read answers for.
#[derive(Debug, Clone, Copy)]
pub enum AsOf<'a> {
    /// The newest version of every key.
    Latest,
    /// The version valid at this time, for every key.
    At(i64),
    /// The version valid at `times[i]` for key `i`.
    PerRow(&'a [i64]),
}

impl AsOf<'_> {
    fn at(self, row: usize) -> Option<i64> {
        match self {
            Self::Latest => None,
            Self::At(t) => Some(t),
            Self::PerRow(times) => times.get(row).copied(),
        }
    }
}

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

pub(crate) fn row_location(
    client: &(impl ReadClient + ?Sized),
    segment: i64,
    key: &[u8],
) -> String {
    format!(
        "{}, segment {segment}, row of a {}-byte key",
        client.location(),
        key.len()
    )
}

/// The newest version if it is a value.
pub(crate) fn latest(
    client: &(impl ReadClient + ?Sized),
    key: &[u8],
) -> Result<Option<VersionedRecord>> {
    read_map(client, &storage_key(LATEST_SEGMENT, key), |bytes| {
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let (timestamp, value) = latest_value::decode(bytes)?;
        Ok(Some(VersionedRecord {
            value: value.to_vec(),
            timestamp,
            valid_to: None,
        }))
    })
}

fn horizon(state: &State) -> i64 {
    state
        .stream_time
        .saturating_sub(state.config.history_retention_ms())
}

/// An as-of read below the latest value: the live segments that may still hold the answer are
/// those in `[lowest, upper]`.
#[derive(Debug, Clone, Copy)]
struct Probe {
    t: i64,
    upper: i64,
    lowest: i64,
}

/// What a probe learned from one segment.
enum Step<'a> {
    /// Look further down.
    Next,
    /// The read is answered (`None`: no value is valid at `t`).
    Done(Option<(i64, i64, &'a [u8])>),
}

impl Probe {
    /// The probe after the latest-value entry (valid from `latest`, when there is one, and newer
    /// than `t`), or `None` when `t` is below the horizon.
    fn start(state: &State, latest: Option<i64>, t: i64) -> Option<Self> {
        if t < horizon(state) {
            return None;
        }
        let config = state.config;
        Some(Self {
            t,
            upper: latest.map_or(i64::MAX, |l| config.segment_id(l)),
            lowest: config.segment_id(t).max(0),
        })
    }

    /// The next segment to look in.
    fn next_segment(&self, state: &State) -> Option<i64> {
        state.segments.newest_at_most(self.upper, self.lowest)
    }

    /// Takes in the row of `segment` (`None`: the key has none there).
    fn visit<'a>(&mut self, state: &State, segment: i64, row: Option<Lookup<'a>>) -> Step<'a> {
        self.upper = segment - 1;
        match row {
            None => Step::Next,
            Some(Lookup::After) => Step::Done(None),
            Some(Lookup::Before { min_timestamp }) => {
                self.upper = self.upper.min(state.config.segment_id(min_timestamp));
                Step::Next
            }
            Some(Lookup::Found {
                timestamp,
                valid_to,
                value,
            }) => Step::Done(value.map(|v| (timestamp, valid_to, v))),
        }
    }
}

/// The record valid at `as_of` (inclusive), under the retention rule.
pub(crate) fn as_of(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    as_of: i64,
) -> Result<Option<VersionedRecord>> {
    let newest = read_map(client, &storage_key(LATEST_SEGMENT, key), |bytes| {
        let Some(bytes) = bytes else {
            return Ok(Err(None));
        };
        let (timestamp, value) = latest_value::decode(bytes)?;
        Ok(if timestamp <= as_of {
            Ok(VersionedRecord {
                value: value.to_vec(),
                timestamp,
                valid_to: None,
            })
        } else {
            Err(Some(timestamp))
        })
    })?;
    let latest = match newest {
        Ok(record) => return Ok(Some(record)),
        Err(latest) => latest,
    };
    let Some(mut probe) = Probe::start(state, latest, as_of) else {
        return Ok(None);
    };
    while let Some(segment) = probe.next_segment(state) {
        let location = || row_location(client, segment, key);
        let mut found = None;
        let row_key = storage_key(segment, key);
        let read = RowRead {
            key: &row_key,
            t: as_of,
            location: &location,
        };
        client.lookup_row(&read, &mut |row| {
            if let Step::Done(answer) = probe.visit(state, segment, row) {
                found = Some(answer.map(|(timestamp, valid_to, value)| VersionedRecord {
                    value: value.to_vec(),
                    timestamp,
                    valid_to: Some(valid_to),
                }));
            }
            Ok(())
        })?;
        if let Some(found) = found {
            return Ok(found);
        }
    }
    Ok(None)
}

/// A batch row's answer while the batch is read: found records point into an arena.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Absent,
    Found {
        timestamp: i64,
        valid_to: Option<i64>,
        start: usize,
        end: usize,
    },
}

/// Storage keys built in one buffer.
#[derive(Default)]
struct KeyBuffer {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyBuffer {
    fn push(&mut self, segment: i64, key: &[u8]) {
        self.bytes.extend_from_slice(&segment_prefix(segment));
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let key = self.bytes.get(start..end).unwrap_or_default();
                start = end;
                key
            })
            .collect()
    }
}

/// A batch read in progress: answers by row, found values in one arena, and the probes of the
/// rows that still look for a history row.
struct BatchRead<'k> {
    /// Distinct keys in key order.
    unique: Vec<&'k [u8]>,
    /// Rows by key: `rows[first[u]..first[u + 1]]` are the rows of `unique[u]`.
    rows: Vec<usize>,
    first: Vec<usize>,
    answers: Vec<Answer>,
    arena: Vec<u8>,
    /// `(row, key u, probe)`.
    probes: Vec<(usize, usize, Probe)>,
}

impl<'k> BatchRead<'k> {
    fn new(keys: &[&'k [u8]]) -> Self {
        let n = keys.len();
        // Sorted by a 16-byte integer prefix first: most comparisons end there, in registers.
        let mut order: Vec<((u64, u64), usize)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (sort_prefix(k), i))
            .collect();
        order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| keys[a.1].cmp(keys[b.1])));
        let rows: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
        let mut unique: Vec<&[u8]> = Vec::new();
        let mut first: Vec<usize> = Vec::new();
        for (position, &row) in rows.iter().enumerate() {
            if unique.last() != Some(&keys[row]) {
                unique.push(keys[row]);
                first.push(position);
            }
        }
        first.push(n);
        Self {
            unique,
            rows,
            first,
            answers: vec![Answer::Absent; n],
            arena: Vec::new(),
            probes: Vec::new(),
        }
    }

    fn found(&mut self, row: usize, timestamp: i64, valid_to: Option<i64>, value: &[u8]) {
        self.arena.extend_from_slice(value);
        self.answers[row] = Answer::Found {
            timestamp,
            valid_to,
            start: self.arena.len() - value.len(),
            end: self.arena.len(),
        };
    }

    /// Takes in key `u`'s latest-value entry: rows it answers are done, the others probe.
    fn on_latest(
        &mut self,
        state: &State,
        times: AsOf<'_>,
        u: usize,
        bytes: Option<&[u8]>,
    ) -> Result<()> {
        let latest = bytes.map(latest_value::decode).transpose()?;
        for position in self.first[u]..self.first[u + 1] {
            let row = self.rows[position];
            let t = times.at(row);
            match latest {
                Some((timestamp, value)) if t.is_none_or(|t| timestamp <= t) => {
                    self.found(row, timestamp, None, value);
                }
                _ => {
                    let start = t.and_then(|t| Probe::start(state, latest.map(|l| l.0), t));
                    if let Some(probe) = start {
                        self.probes.push((row, u, probe));
                    }
                }
            }
        }
        Ok(())
    }

    /// Latest-value entries: the write buffer, the cache, then one `MultiGet` of the rest.
    fn read_latest(&mut self, reader: Reader<'_>, state: &State, times: AsOf<'_>) -> Result<()> {
        let mut buffer = KeyBuffer::default();
        for key in &self.unique {
            buffer.push(LATEST_SEGMENT, key);
        }
        reader.multi_read(&buffer.slices(), &mut |u, bytes| {
            self.on_latest(state, times, u, bytes)
        })
    }

    /// One round of row lookups: each probe asks for its next segment; equal (segment, key)
    /// pairs are read once, in storage-key order (segment, then key: `unique` is sorted).
    fn read_rows(&mut self, reader: Reader<'_>, state: &State) -> Result<()> {
        let mut targets: Vec<(i64, usize, usize)> = Vec::with_capacity(self.probes.len());
        self.probes.retain(|&(_, u, probe)| {
            probe.next_segment(state).is_some_and(|segment| {
                targets.push((segment, u, targets.len()));
                true
            })
        });
        targets.sort_unstable();
        let mut row_keys = KeyBuffer::default();
        let mut groups: Vec<usize> = Vec::new();
        for (position, &(segment, u, _)) in targets.iter().enumerate() {
            if position == 0 || targets[position - 1].0 != segment || targets[position - 1].1 != u {
                row_keys.push(segment, self.unique[u]);
                groups.push(position);
            }
        }
        groups.push(targets.len());
        let mut done = vec![false; self.probes.len()];
        let mut times: Vec<i64> = Vec::new();
        reader.multi_read(&row_keys.slices(), &mut |g, bytes| {
            let group = &targets[groups[g]..groups[g + 1]];
            let (segment, u, _) = group[0];
            let key = self.unique[u];
            times.clear();
            times.extend(group.iter().map(|&(_, _, p)| self.probes[p].2.t));
            let mut visit = |p: usize, row: Option<Lookup<'_>>| {
                let (answer_row, _, mut probe) = self.probes[p];
                let step = probe.visit(state, segment, row);
                self.probes[p].2 = probe;
                if let Step::Done(found) = step {
                    done[p] = true;
                    if let Some((timestamp, valid_to, value)) = found {
                        self.found(answer_row, timestamp, Some(valid_to), value);
                    }
                }
            };
            let Some(bytes) = bytes else {
                for &(_, _, p) in group {
                    visit(p, None);
                }
                return Ok(());
            };
            // Every probe of this row at once: a hot key read at many times is walked once.
            let location = || row_location(&reader, segment, key);
            segment_value::lookup_each(bytes, &times, &location, |k, row| {
                visit(group[k].2, Some(row));
                Ok(())
            })
        })?;
        let mut index = 0;
        self.probes.retain(|_| {
            index += 1;
            !done[index - 1]
        });
        Ok(())
    }

    /// The answers as columns in row order.
    fn columns(self) -> RecordColumns {
        let n = self.answers.len();
        let mut out = RecordColumns {
            values: Vec::with_capacity(self.arena.len()),
            offsets: Vec::with_capacity(n + 1),
            present: Vec::with_capacity(n),
            timestamps: Vec::with_capacity(n),
            valid_to: Vec::with_capacity(n),
        };
        out.offsets.push(0);
        for answer in self.answers {
            match answer {
                Answer::Absent => {
                    out.present.push(false);
                    out.timestamps.push(0);
                    out.valid_to.push(None);
                }
                Answer::Found {
                    timestamp,
                    valid_to,
                    start,
                    end,
                } => {
                    out.values.extend_from_slice(&self.arena[start..end]);
                    out.present.push(true);
                    out.timestamps.push(timestamp);
                    out.valid_to.push(valid_to);
                }
            }
            out.offsets.push(out.values.len());
        }
        out
    }
}

/// [`latest`] or [`as_of`] for every key of a batch, in row order.
pub(crate) fn batch(
    reader: Reader<'_>,
    state: &State,
    keys: &[&[u8]],
    times: AsOf<'_>,
) -> Result<RecordColumns> {
    let mut read = BatchRead::new(keys);
    read.read_latest(reader, state, times)?;
    while !read.probes.is_empty() {
        read.read_rows(reader, state)?;
    }
    Ok(read.columns())
}

/// Every value version whose validity interval meets `[from, to]`, newest first unless
/// `order` says otherwise.
pub(crate) fn versions(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    from: i64,
    to: i64,
    order: ResultOrder,
) -> Result<Vec<VersionedRecord>> {
    let mut out = Vec::new();
    if let Some(record) = latest(client, key)?.filter(|r| r.timestamp <= to) {
        out.push(record);
    }
    if to >= horizon(state) {
        for segment in state.segments.newest_first() {
            let location = || row_location(client, segment, key);
            let ended = read_map(client, &storage_key(segment, key), |bytes| {
                let Some(bytes) = bytes else {
                    return Ok(false);
                };
                let row = SegmentRow::decode(bytes, &location)?;
                if row.next_timestamp() <= from {
                    return Ok(true);
                }
                for (index, entry) in row.entries().iter().enumerate() {
                    let valid_to = row.valid_to(index);
                    if let Some(value) = entry
                        .value
                        .filter(|_| entry.timestamp <= to && valid_to > from)
                    {
                        out.push(VersionedRecord {
                            value: value.to_vec(),
                            timestamp: entry.timestamp,
                            valid_to: Some(valid_to),
                        });
                    }
                }
                Ok(false)
            })?;
            if ended {
                break;
            }
        }
    }
    if order == ResultOrder::Ascending {
        out.reverse();
    }
    Ok(out)
}
