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
//! ends at or before `from`. With tombstones (a scan's `tombstones` option) it finds them where
//! the layout keeps them, explicit, implicit or degenerate (`walk_versions`).

mod batch;
pub(crate) mod columns;

use crate::backend::RowRead;
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, storage_key};
use crate::format::latest_value;
use crate::format::segment_value::{Lookup, SegmentRow};
use crate::record::VersionedRecord;
use crate::state::State;
pub(crate) use crate::ttl::Seen;
use crate::view::{ReadClient, read_map};
pub(crate) use batch::batch;

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

/// The newest version if it is a value (and live, under a TTL).
pub(crate) fn latest(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
) -> Result<Option<VersionedRecord>> {
    read_map(client, &storage_key(LATEST_SEGMENT, key), |bytes| {
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let latest = latest_value::decode(bytes)?;
        Ok(match ttl_point(state, latest.timestamp, None, None) {
            Seen::ValidTo(valid_to) => Some(VersionedRecord {
                value: latest.value.to_vec(),
                timestamp: latest.timestamp,
                valid_to,
            }),
            Seen::Ended => None,
        })
    })
}

fn horizon(state: &State) -> i64 {
    state.clock().horizon
}

/// Whether a version valid until `valid_to` is gone with its segment: expiry dropped the
/// segment of its valid-to, or will drop it before it could ever be stored there. A version of
/// a latest value's unsettled history (`format::latest_value`) is left out of reads then, as
/// the version in its row would be.
fn in_expired_segment(state: &State, valid_to: i64) -> bool {
    let config = state.config;
    config.segment_id(valid_to) < config.segment_id(horizon(state))
}

/// What a point read at `as_of` (`None`: the newest) answers of the version it found at
/// `timestamp`, valid to `valid_to`, under the store's TTL (docs/semantics.md §2.15). Without a
/// TTL, the version as found.
pub(crate) fn ttl_point(
    state: &State,
    timestamp: i64,
    valid_to: Option<i64>,
    as_of: Option<i64>,
) -> Seen {
    match state.config.latest_ttl() {
        None => Seen::ValidTo(valid_to),
        Some(ttl) => ttl.point_read(timestamp, valid_to, as_of, state.clock()),
    }
}

/// A found record under the TTL rule (see [`ttl_point`]).
fn ttl_record(state: &State, as_of: i64, record: VersionedRecord) -> Option<VersionedRecord> {
    match ttl_point(state, record.timestamp, record.valid_to, Some(as_of)) {
        Seen::ValidTo(valid_to) => Some(VersionedRecord { valid_to, ..record }),
        Seen::Ended => None,
    }
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
    Done(Option<Found<'a>>),
}

/// The value valid at a probe's time, found in a row: valid in `[timestamp, valid_to)`.
struct Found<'a> {
    timestamp: i64,
    valid_to: i64,
    value: &'a [u8],
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
            }) => Step::Done(value.map(|value| Found {
                timestamp,
                valid_to,
                value,
            })),
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
        bytes.map_or(Ok(Err(None)), |bytes| as_of_latest(state, bytes, as_of))
    })?;
    let latest = match newest {
        Ok(record) => return Ok(record.and_then(|r| ttl_record(state, as_of, r))),
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
                found = Some(answer.map(|found| VersionedRecord {
                    value: found.value.to_vec(),
                    timestamp: found.timestamp,
                    valid_to: Some(found.valid_to),
                }));
            }
            Ok(())
        })?;
        if let Some(found) = found {
            return Ok(found.and_then(|record| ttl_record(state, as_of, record)));
        }
    }
    Ok(None)
}

/// The answer of `as_of` from a key's latest-value entry `bytes`: the version it holds (the
/// newest, or one of its unsettled history) or none (before the horizon), else `Err` with the
/// start of its oldest version, where the search of the rows begins.
fn as_of_latest(
    state: &State,
    bytes: &[u8],
    as_of: i64,
) -> Result<std::result::Result<Option<VersionedRecord>, Option<i64>>> {
    let latest = latest_value::decode(bytes)?;
    let record = |timestamp, valid_to, value: &[u8]| VersionedRecord {
        value: value.to_vec(),
        timestamp,
        valid_to,
    };
    if latest.timestamp <= as_of {
        return Ok(Ok(Some(record(latest.timestamp, None, latest.value))));
    }
    if as_of < horizon(state) {
        return Ok(Ok(None));
    }
    Ok(match latest.replaced_at(as_of) {
        Some(v) => Ok(Some(record(v.timestamp, Some(v.valid_to), v.value))),
        None => Err(Some(latest.oldest())),
    })
}

/// One version as a read of history with tombstones returns it: `value` `None` is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) timestamp: i64,
    pub(crate) valid_to: Option<i64>,
}

/// What a versions read selects: the versions whose validity meets `[from, to]`, tombstones
/// too when `tombstones`.
#[derive(Debug, Clone, Copy)]
struct Window {
    from: i64,
    to: i64,
    tombstones: bool,
}

impl Window {
    /// A version's valid-to under the TTL rule; tombstones as stored. With tombstones (the
    /// copy of a store's history: §2.12), every stored value comes with the end the TTL gives
    /// it, even one that ended below the horizon: its start still ends the version before it.
    fn ttl_end(
        self,
        state: &State,
        value: Option<&[u8]>,
        timestamp: i64,
        valid_to: Option<i64>,
    ) -> Seen {
        match (value, state.config.latest_ttl()) {
            (Some(_), Some(ttl)) if self.tombstones => {
                Seen::ValidTo(ttl.end(timestamp, valid_to, state.stream_time))
            }
            (Some(_), Some(ttl)) => ttl.version(timestamp, valid_to, self.to, state.clock()),
            _ => Seen::ValidTo(valid_to),
        }
    }

    fn selects(self, value: Option<&[u8]>, timestamp: i64, valid_to: Option<i64>) -> bool {
        (value.is_some() || self.tombstones)
            && timestamp <= self.to
            && valid_to.is_none_or(|vt| vt > self.from)
    }
}

/// Takes one version: `(value or None for a tombstone, timestamp, valid_to)`.
type VisitVersion<'v> = dyn FnMut(Option<&[u8]>, i64, Option<i64>) + 'v;

/// `walk_versions` over a key's latest-value entry `bytes`: visits its newest version, then
/// its unsettled history (every version in it is newer than the rows'), newest first. Returns
/// the start of the oldest version it holds: the valid-to of the next one down.
fn walk_latest(
    state: &State,
    bytes: &[u8],
    window: Window,
    visit: &mut VisitVersion<'_>,
) -> Result<Option<i64>> {
    let latest = latest_value::decode(bytes)?;
    let (timestamp, value) = (latest.timestamp, Some(latest.value));
    if let Seen::ValidTo(valid_to) = window.ttl_end(state, value, timestamp, None)
        && window.selects(value, timestamp, valid_to)
    {
        visit(value, timestamp, valid_to);
    }
    if window.to < horizon(state) || !latest.has_history() {
        return Ok(Some(timestamp));
    }
    let history: Vec<_> = latest.history().collect();
    for v in history.iter().rev() {
        let value = Some(v.value);
        if !in_expired_segment(state, v.valid_to)
            && let Seen::ValidTo(valid_to) =
                window.ttl_end(state, value, v.timestamp, Some(v.valid_to))
            && window.selects(value, v.timestamp, valid_to)
        {
            visit(value, v.timestamp, valid_to);
        }
    }
    Ok(Some(latest.oldest()))
}

/// Hands every version of `key` that `window` selects to `visit`, newest first, as
/// `(value or None for a tombstone, timestamp, valid_to)`.
///
/// Tombstones are found where the layout keeps them (docs/semantics.md §1.6): explicit entries
/// of rows, and the end of a row that the next newer version does not start at — an implicit
/// tombstone at the row's `next_timestamp`, or a degenerate row's only entry. Either ends where
/// that next version starts.
fn walk_versions(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    window: Window,
    visit: &mut VisitVersion<'_>,
) -> Result<()> {
    // The start of the oldest version seen so far: the valid-to of the next one down.
    let mut newer = read_map(client, &storage_key(LATEST_SEGMENT, key), |bytes| {
        bytes.map_or(Ok(None), |bytes| walk_latest(state, bytes, window, visit))
    })?;
    if window.to < horizon(state) {
        return Ok(());
    }
    for segment in state.segments.newest_first() {
        let location = || row_location(client, segment, key);
        let ended = read_map(client, &storage_key(segment, key), |bytes| {
            let Some(bytes) = bytes else {
                return Ok(false);
            };
            let row = SegmentRow::decode(bytes, &location)?;
            let end = row.next_timestamp();
            if newer != Some(end) && window.selects(None, end, newer) {
                visit(None, end, newer);
            }
            if end <= window.from {
                return Ok(true);
            }
            // A degenerate row's entry is the tombstone at its end, handed over above.
            let entries = if row.is_degenerate() {
                &[][..]
            } else {
                row.entries()
            };
            for (index, entry) in entries.iter().enumerate() {
                let stored = Some(row.valid_to(index));
                if let Seen::ValidTo(valid_to) =
                    window.ttl_end(state, entry.value, entry.timestamp, stored)
                    && window.selects(entry.value, entry.timestamp, valid_to)
                {
                    visit(entry.value, entry.timestamp, valid_to);
                }
            }
            newer = Some(row.min_timestamp());
            Ok(false)
        })?;
        if ended {
            break;
        }
    }
    Ok(())
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
    let window = Window {
        from,
        to,
        tombstones: false,
    };
    collect_versions(
        client,
        state,
        key,
        window,
        order,
        |value, timestamp, valid_to| {
            value.map(|value| VersionedRecord {
                value: value.to_vec(),
                timestamp,
                valid_to,
            })
        },
    )
}

/// [`versions`] with the tombstones still stored, each in its place in the key's order with
/// the valid-to of a value (the next version's timestamp, `None` for the newest).
pub(crate) fn versions_with_tombstones(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    from: i64,
    to: i64,
    order: ResultOrder,
) -> Result<Vec<Version>> {
    let window = Window {
        from,
        to,
        tombstones: true,
    };
    collect_versions(
        client,
        state,
        key,
        window,
        order,
        |value, timestamp, valid_to| {
            Some(Version {
                value: value.map(<[u8]>::to_vec),
                timestamp,
                valid_to,
            })
        },
    )
}

/// The versions [`walk_versions`] visits in `window`, as `make` builds them (None: left out),
/// in `order`.
fn collect_versions<T>(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    window: Window,
    order: ResultOrder,
    make: impl Fn(Option<&[u8]>, i64, Option<i64>) -> Option<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    walk_versions(
        client,
        state,
        key,
        window,
        &mut |value, timestamp, valid_to| out.extend(make(value, timestamp, valid_to)),
    )?;
    if order == ResultOrder::Ascending {
        out.reverse();
    }
    Ok(out)
}
