//! Batch reads: [`latest`](super::latest) or [`as_of`](super::as_of) for many keys at once,
//! one sorted `MultiGet` of the latest-value entries, then one per round of row lookups.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::columns::RecordColumns;
use super::{AsOf, Probe, Seen, Step, row_location, ttl_point};
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, segment_prefix, sort_prefix};
use crate::format::latest_value;
use crate::format::segment_value::{self, Lookup};
use crate::state::State;
use crate::view::buffered::BufferedView;

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
    /// The rows that still look for a history row.
    waiting: Vec<Waiting>,
}

/// A row whose read goes on below the latest value.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    row: usize,
    /// Its key's index in `unique`.
    key: usize,
    probe: Probe,
}

/// The row a waiting read asks for next. Sorted by storage key (segment, then key), so equal
/// rows are next to each other and read once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Target {
    segment: i64,
    /// The key's index in `unique` (sorted: its order is the keys').
    key: usize,
    /// The index of the read in `waiting`.
    waiting: usize,
}

impl<'k> BatchRead<'k> {
    fn new(keys: &[&'k [u8]]) -> Self {
        let n = keys.len();
        let (distinct, key_of_row) = distinct_keys(keys);
        let order = key_order(&distinct);
        let mut rank = vec![0; distinct.len()];
        for (position, &d) in order.iter().enumerate() {
            rank[d] = position;
        }
        let unique: Vec<&[u8]> = order.iter().map(|&d| distinct[d]).collect();
        // A counting sort of the rows by their key's rank: rows of one key stay in row order.
        let mut first = vec![0; unique.len() + 1];
        for &d in &key_of_row {
            first[rank[d] + 1] += 1;
        }
        for u in 0..unique.len() {
            first[u + 1] += first[u];
        }
        let mut next = first.clone();
        let mut rows = vec![0; n];
        for (row, &d) in key_of_row.iter().enumerate() {
            let slot = &mut next[rank[d]];
            rows[*slot] = row;
            *slot += 1;
        }
        Self {
            unique,
            rows,
            first,
            answers: vec![Answer::Absent; n],
            arena: Vec::new(),
            waiting: Vec::new(),
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
            match (latest, t) {
                (Some(l), _) if t.is_none_or(|t| l.timestamp <= t) => {
                    if let Seen::ValidTo(valid_to) = ttl_point(state, l.timestamp, None, t) {
                        self.found(row, l.timestamp, valid_to, l.value);
                    }
                }
                (Some(l), Some(t)) if l.has_history() && t >= state.clock().horizon => {
                    match l.replaced_at(t) {
                        Some(v) => {
                            let seen = ttl_point(state, v.timestamp, Some(v.valid_to), Some(t));
                            if let Seen::ValidTo(valid_to) = seen {
                                self.found(row, v.timestamp, valid_to, v.value);
                            }
                        }
                        None => self.probe(state, row, u, Some(l.oldest()), t),
                    }
                }
                (_, Some(t)) => self.probe(state, row, u, latest.map(|l| l.timestamp), t),
                (_, None) => {}
            }
        }
        Ok(())
    }

    /// Row `row` (of key `u`) reads history rows for the version valid at `t`, below a version
    /// starting at `newer` (`None`: the key has no latest value).
    fn probe(&mut self, state: &State, row: usize, u: usize, newer: Option<i64>, t: i64) {
        if let Some(probe) = Probe::start(state, newer, t) {
            self.waiting.push(Waiting { row, key: u, probe });
        }
    }

    /// Latest-value entries: the write buffer, the cache, then one `MultiGet` of the rest.
    fn read_latest(
        &mut self,
        reader: BufferedView<'_>,
        state: &State,
        times: AsOf<'_>,
    ) -> Result<()> {
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
    fn read_rows(&mut self, reader: BufferedView<'_>, state: &State) -> Result<()> {
        let mut targets: Vec<Target> = Vec::with_capacity(self.waiting.len());
        self.waiting.retain(|read| {
            read.probe.next_segment(state).is_some_and(|segment| {
                targets.push(Target {
                    segment,
                    key: read.key,
                    waiting: targets.len(),
                });
                true
            })
        });
        targets.sort_unstable();
        let mut row_keys = KeyBuffer::default();
        let mut groups: Vec<usize> = Vec::new();
        for (position, target) in targets.iter().enumerate() {
            let row = (target.segment, target.key);
            if position == 0 || (targets[position - 1].segment, targets[position - 1].key) != row {
                row_keys.push(target.segment, self.unique[target.key]);
                groups.push(position);
            }
        }
        groups.push(targets.len());
        let mut done = vec![false; self.waiting.len()];
        let mut times: Vec<i64> = Vec::new();
        reader.multi_read_rows(&row_keys.slices(), &mut |g, bytes, appends| {
            let group = &targets[groups[g]..groups[g + 1]];
            let segment = group[0].segment;
            let key = self.unique[group[0].key];
            times.clear();
            times.extend(
                group
                    .iter()
                    .map(|target| self.waiting[target.waiting].probe.t),
            );
            let mut visit = |w: usize, row: Option<Lookup<'_>>| {
                let read = &mut self.waiting[w];
                let (answer_row, t) = (read.row, read.probe.t);
                if let Step::Done(found) = read.probe.visit(state, segment, row) {
                    done[w] = true;
                    if let Some(found) = found
                        && let Seen::ValidTo(valid_to) =
                            ttl_point(state, found.timestamp, Some(found.valid_to), Some(t))
                    {
                        self.found(answer_row, found.timestamp, valid_to, found.value);
                    }
                }
            };
            if bytes.is_none() && appends.is_none() {
                for target in group {
                    visit(target.waiting, None);
                }
                return Ok(());
            }
            // Every probe of this row at once: a hot key read at many times is walked once.
            let location = || row_location(&reader, segment, key);
            let appends = appends.unwrap_or_default();
            segment_value::lookup_each_appended(bytes, appends, &times, &location, |k, row| {
                visit(group[k].waiting, Some(row));
                Ok(())
            })
        })?;
        let mut index = 0;
        self.waiting.retain(|_| {
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

/// The distinct keys of `keys` in order of first appearance, and each row's index among them.
/// Found by hashing: a batch reads each key several times, and sorting every row (rather than
/// each key once) was a sixth of a batch read.
fn distinct_keys<'k>(keys: &[&'k [u8]]) -> (Vec<&'k [u8]>, Vec<usize>) {
    let hasher = foldhash::fast::RandomState::default();
    let mut seen: HashTable<usize> = HashTable::new();
    let mut distinct: Vec<&[u8]> = Vec::new();
    let key_of_row = keys
        .iter()
        .map(|&key| {
            let hash = hasher.hash_one(key);
            if let Some(&d) = seen.find(hash, |&d| distinct[d] == key) {
                return d;
            }
            let d = distinct.len();
            distinct.push(key);
            seen.insert_unique(hash, d, |&d| hasher.hash_one(distinct[d]));
            d
        })
        .collect();
    (distinct, key_of_row)
}

/// The indices of `keys` (distinct) in key order; no sort when they already are in order.
fn key_order(keys: &[&[u8]]) -> Vec<usize> {
    if keys.is_sorted() {
        return (0..keys.len()).collect();
    }
    // Sorted by a 16-byte integer prefix first: most comparisons end there, in registers.
    let mut order: Vec<((u64, u64), usize)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (sort_prefix(k), i))
        .collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| keys[a.1].cmp(keys[b.1])));
    order.into_iter().map(|(_, i)| i).collect()
}

/// [`latest`](super::latest) or [`as_of`](super::as_of) for every key of a batch, in row order.
pub(crate) fn batch(
    reader: BufferedView<'_>,
    state: &State,
    keys: &[&[u8]],
    times: AsOf<'_>,
) -> Result<RecordColumns> {
    let mut read = BatchRead::new(keys);
    read.read_latest(reader, state, times)?;
    while !read.waiting.is_empty() {
        read.read_rows(reader, state)?;
    }
    Ok(read.columns())
}

#[cfg(test)]
mod tests {
    use super::BatchRead;

    #[test]
    fn rows_are_grouped_by_distinct_key_in_key_order() {
        let keys: Vec<&[u8]> = vec![b"b", b"a", b"b", b"c", b"a", b"b"];
        let read = BatchRead::new(&keys);
        assert_eq!(read.unique, [&b"a"[..], b"b", b"c"]);
        assert_eq!(read.first, [0, 2, 5, 6]);
        // Within a key, rows keep their order.
        assert_eq!(read.rows, [1, 4, 0, 2, 5, 3]);
        let sorted: Vec<&[u8]> = vec![b"a", b"a", b"b"];
        let read = BatchRead::new(&sorted);
        assert_eq!(read.unique, [&b"a"[..], b"b"]);
        assert_eq!(read.rows, [0, 1, 2]);
        let empty = BatchRead::new(&[]);
        assert!(empty.unique.is_empty());
        assert_eq!(empty.first, [0]);
    }
}
