//! The put algorithm: where a new version goes and what it returns.
//!
//! After the grace check (`ts < ST − R` is dropped) and the stream-time update (which may drop
//! expired segments), a version is placed so that the layout invariants hold:
//!
//! * the newest version of a key, if it is a value, lives in the latest-value store;
//! * every other version lives in the row of the segment of its valid-to;
//! * a newest version that is a tombstone is implicit as the `next_timestamp` of the row holding
//!   its predecessor, or, with no predecessor, a degenerate row in its own segment.
//!
//! The steps mirror Kafka's `RocksDBVersionedStore.doPut`: (1) compare with the latest value;
//! (2) walk the live segments newest first down to `segment_id(ts)` looking for the row that
//! covers `ts`; (3) otherwise write the version just before the oldest newer version found. The
//! return value is the stored version's valid-to, `None` when it became the newest version.
//!
//! Deviation from Kafka (docs/semantics.md §Q1): a tombstone that replaces the latest value at
//! the same timestamp is kept (as a tombstone entry), so later older writes are bounded by it.
//!
//! **The read-free path** (docs/semantics.md §2.16). Step (1) reads the key's latest value to
//! move it into a history row. A value put at or after the observed stream time is the key's
//! newest version whatever the key holds, so where that read would go to RocksDB (the cache of
//! latest values does not know the key, and cannot hold them all), the put writes a *push*
//! instead: a merge operand under the key's latest value that makes it the newest and keeps
//! the value it replaces in the entry's *unsettled history* (`format/latest_value.rs`). Its
//! outcome is known without the read: accepted, the newest version. The replaced versions
//! reach their rows, with the appends step (1) would have written, when a put reads the entry
//! ([`Txn::settle_history`], at the start of the algorithm below), or in one pass over the
//! store (`VersionedStore::settle`); reads find them in the entry until then. Tombstones,
//! writes below the stream time, stores with a latest TTL and in-memory stores take the
//! algorithm below.

use crate::error::{Error, Result};
use crate::format::key::{LATEST_SEGMENT, StorageKey, storage_key};
use crate::format::segment_value::{Entry, SegmentRow, encode_append};
use crate::format::{latest_value, meta};
use crate::read::{self, row_location};
use crate::record::{PutOutcome, VersionedRecord};
use crate::txn::Txn;
use crate::view::read_map;

/// How a step of the placement ended.
enum Step {
    /// The version is placed, valid until this time (`None`: it is the newest version).
    Placed(Option<i64>),
    /// It goes below what the step looked at.
    Below(Newer),
}

/// What the placement learned of the versions newer than the one it places.
#[derive(Debug, Clone, Copy, Default)]
struct Newer {
    /// The start of the oldest version known to be newer, which the placed version ends at
    /// (`None`: none is known).
    next: Option<i64>,
    /// Whether the row the walk stopped at is a lone tombstone at the version's own time.
    lone_tombstone_at_ts: bool,
}

impl Txn<'_> {
    /// Kafka's `put`: grace check, stream-time update, then placement (or a push).
    pub(crate) fn put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: i64,
    ) -> Result<PutOutcome> {
        self.put_with(key, value, timestamp, true)
    }

    /// [`Txn::put`], on the read-free path only when `read_free` allows it.
    fn put_with(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: i64,
        read_free: bool,
    ) -> Result<PutOutcome> {
        if self.is_expired(timestamp) {
            return Ok(PutOutcome::Expired);
        }
        if let Some(v) = value
            && read_free
            && self.may_push(key, timestamp)
        {
            self.push(key, v, timestamp)?;
            if let Some(log) = &mut self.log {
                log.push(key, value, timestamp);
            }
            return Ok(PutOutcome::Stored { valid_to: None });
        }
        self.advance_stream_time(timestamp);
        let mut valid_to = self.place(key, value, timestamp)?;
        if value.is_none() && timestamp == self.state.stream_time {
            self.state.tombstone_at_stream_time = true;
        }
        self.state.retire_expired();
        if let Some(ttl) = self.state.config.latest_ttl()
            && value.is_some()
        {
            // Where the value ends under the TTL: a newest value already expired reports its
            // end, so a caller that forwards only new newest values (KIP-914) drops it.
            valid_to = ttl.end(timestamp, valid_to, self.state.stream_time);
        }
        if let Some(log) = &mut self.log {
            log.push(key, value, timestamp);
        }
        Ok(PutOutcome::Stored { valid_to })
    }

    /// Kafka's `delete`: the record valid at `timestamp` before the write, then a tombstone.
    pub(crate) fn delete(&mut self, key: &[u8], timestamp: i64) -> Result<Option<VersionedRecord>> {
        Ok(self.put_returning_previous(key, None, timestamp)?.1)
    }

    /// A put, and the record that was valid at `timestamp` just before it (`None` when none
    /// was, or the write is older than the grace period and changes nothing).
    pub(crate) fn put_returning_previous(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: i64,
    ) -> Result<(PutOutcome, Option<VersionedRecord>)> {
        if self.is_expired(timestamp) {
            return Ok((PutOutcome::Expired, None));
        }
        let before = read::as_of(&*self, self.state, key, timestamp)?;
        // The entry was just read: the algorithm places the version with what it holds.
        Ok((self.put_with(key, value, timestamp, false)?, before))
    }

    /// Whether a value put at `ts` may take the read-free path: it is the key's newest version
    /// whatever the key holds (at or after stream time, and not at a stream time a tombstone
    /// may have been written at, which the algorithm would replace), and the latest value is
    /// not known without a read from RocksDB. The overlay's own pushes on the key are bounded:
    /// past them the put reads the entry once, which settles it.
    pub(crate) fn may_push(&self, key: &[u8], ts: i64) -> bool {
        /// Pushes a transaction or write buffer holds for one key before a put reads it.
        const PUSHES_BEFORE_A_READ: usize = 4;
        let state = &*self.state;
        let in_order =
            ts > state.stream_time || (ts == state.stream_time && !state.tombstone_at_stream_time);
        in_order
            && state.config.latest_ttl().is_none()
            && self.latest_needs_a_read(&storage_key(LATEST_SEGMENT, key), PUSHES_BEFORE_A_READ)
    }

    /// The read-free put of `value` at `ts` (`may_push`): stream time advances, and a push
    /// makes the value the key's newest version. The first push of a store makes it format 5,
    /// in the same write.
    #[cfg_attr(
        not(test),
        expect(
            clippy::unnecessary_wraps,
            reason = "tests fail a push half way (`fault`)"
        )
    )]
    fn push(&mut self, key: &[u8], value: &[u8], ts: i64) -> Result<()> {
        #[cfg(test)]
        fault::check()?;
        self.advance_stream_time(ts);
        let mut operand = Vec::with_capacity(12 + value.len());
        latest_value::encode_push(ts, value, &mut operand);
        self.append_encoded(storage_key(LATEST_SEGMENT, key), operand);
        self.state.unsettled_puts += 1;
        if self.state.format_version < meta::FORMAT_VERSION {
            let version = meta::encode_format_version(meta::FORMAT_VERSION);
            self.write_metadata(meta::FORMAT_VERSION_KEY, version);
            self.state.format_version = meta::FORMAT_VERSION;
        }
        Ok(())
    }

    /// Moves the unsettled history of the latest-value entry `entry` of `key` into the rows
    /// the put algorithm would have appended it to (one append per version, in its order), and
    /// writes the newest version alone. A version whose row's segment has expired goes with it.
    pub(crate) fn settle_history(&mut self, key: &[u8], entry: &[u8]) -> Result<()> {
        let latest = latest_value::decode(entry)?;
        let config = self.state.config;
        let lowest_live = config.segment_id(self.state.clock().horizon);
        for version in latest.history() {
            let segment = config.segment_id(version.valid_to);
            if segment >= lowest_live {
                self.append_encoded(storage_key(segment, key), version.append.to_vec());
            }
        }
        let plain = latest_value::encode(latest.timestamp, latest.value);
        self.write(storage_key(LATEST_SEGMENT, key), Some(plain));
        Ok(())
    }

    /// Settles `key`'s latest-value entry when it holds unsettled history.
    pub(crate) fn settle_key(&mut self, key: &[u8]) -> Result<()> {
        let entry = read_map(&*self, &storage_key(LATEST_SEGMENT, key), |bytes| {
            let unsettled = bytes.map(latest_value::decode).transpose()?;
            Ok(bytes
                .filter(|_| unsettled.is_some_and(|l| l.has_history()))
                .map(<[u8]>::to_vec))
        })?;
        match entry {
            Some(entry) => self.settle_history(key, &entry),
            None => Ok(()),
        }
    }

    fn is_expired(&self, timestamp: i64) -> bool {
        let grace = self.state.config.grace_period_ms();
        timestamp < self.state.stream_time.saturating_sub(grace)
    }

    fn row(&mut self, segment: i64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_row(&storage_key(segment, key))
    }

    fn decode<'a>(&self, bytes: &'a [u8], segment: i64, key: &[u8]) -> Result<SegmentRow<'a>> {
        SegmentRow::decode(bytes, &|| row_location(self, segment, key))
    }

    fn write_row(&mut self, segment: i64, key: &[u8], row: &SegmentRow<'_>) {
        self.write(storage_key(segment, key), Some(row.encode().into()));
    }

    /// Writes the key's latest-value entry (`None` removes it; `existed`: there was one) and
    /// counts the change (a store with a latest TTL counts it by bucket: `note_latest`).
    fn set_latest(&mut self, latest_key: StorageKey, ts: i64, value: Option<&[u8]>, existed: bool) {
        self.count_latest(i64::from(value.is_some()) - i64::from(existed));
        self.write(latest_key, value.map(|v| latest_value::encode(ts, v)));
    }

    fn invariant(&self, segment: i64, key: &[u8], detail: &str) -> Error {
        Error::corrupt(row_location(self, segment, key), detail)
    }

    /// Places the version; returns its valid-to (`None`: it is the newest version).
    fn place(&mut self, key: &[u8], value: Option<&[u8]>, ts: i64) -> Result<Option<i64>> {
        #[cfg(test)]
        fault::check()?;
        let newer = match self.place_at_latest(key, value, ts)? {
            Step::Placed(valid_to) => return Ok(valid_to),
            Step::Below(newer) => newer,
        };
        match self.place_in_rows(key, value, ts, newer.next)? {
            Step::Placed(valid_to) => Ok(valid_to),
            Step::Below(newer) => self.place_uncovered(key, value, ts, newer),
        }
    }

    /// Step 1: the latest-value store. A newer version moves the latest value into the row
    /// of its new valid-to's segment as a row append (encoded straight from the read bytes).
    /// An entry with unsettled history is settled first (`settle_history`), so that every
    /// version but the newest is in the rows the steps below search.
    fn place_at_latest(&mut self, key: &[u8], value: Option<&[u8]>, ts: i64) -> Result<Step> {
        let latest_key = storage_key(LATEST_SEGMENT, key);
        let latest = read_map(&*self, &latest_key, |bytes| {
            let Some(bytes) = bytes else {
                return Ok(None);
            };
            let latest = latest_value::decode(bytes)?;
            if latest.has_history() {
                return Ok(Some(Err(bytes.to_vec())));
            }
            let latest_ts = latest.timestamp;
            let moved = (ts > latest_ts).then(|| {
                let mut operand = Vec::with_capacity(24 + latest.value.len());
                let previous = Entry {
                    timestamp: latest_ts,
                    value: Some(latest.value),
                };
                encode_append(previous, ts, &mut operand);
                operand
            });
            Ok(Some(Ok((latest_ts, moved))))
        })?;
        let (latest_ts, moved) = match latest {
            None => return Ok(Step::Below(Newer::default())),
            Some(Err(unsettled)) => {
                self.settle_history(key, &unsettled)?;
                return self.place_at_latest(key, value, ts);
            }
            Some(Ok(found)) => found,
        };
        if let Some(operand) = moved {
            let segment = self.state.config.segment_id(ts);
            self.append_encoded(storage_key(segment, key), operand);
            self.state.note_latest(Some(latest_ts), value.map(|_| ts));
            self.set_latest(latest_key, ts, value, true);
            return Ok(Step::Placed(None));
        }
        if ts == latest_ts {
            self.state.note_latest(Some(latest_ts), value.map(|_| ts));
            self.set_latest(latest_key, ts, value, true);
            if value.is_none() {
                // §Q1: record the tombstone instead of just deleting the latest value.
                self.end_with_tombstone(key, ts)?;
            }
            return Ok(Step::Placed(None));
        }
        Ok(Step::Below(Newer {
            next: Some(latest_ts),
            lone_tombstone_at_ts: false,
        }))
    }

    /// Step 2: rows newest first, down to the segment of `ts`, below a version known to start
    /// at `newer`. Versions older than a known one at `t` end at or before `t`, so their rows
    /// (and an implicit tombstone's) lie in `segment_id(t)` or below: the walk skips the
    /// segments in between.
    fn place_in_rows(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        ts: i64,
        newer: Option<i64>,
    ) -> Result<Step> {
        let config = self.state.config;
        let target = config.segment_id(ts);
        let mut found = Newer {
            next: newer,
            lone_tombstone_at_ts: false,
        };
        let mut upper = newer.map_or(i64::MAX, |t| config.segment_id(t));
        while let Some(segment) = self.state.segments.newest_at_most(upper, target) {
            upper = segment - 1;
            let Some(bytes) = self.row(segment, key)? else {
                continue;
            };
            let row = self.decode(&bytes, segment, key)?;
            if row.next_timestamp() <= ts {
                found.lone_tombstone_at_ts = row.is_degenerate() && row.next_timestamp() == ts;
                break;
            }
            if row.min_timestamp() > ts {
                found.next = Some(row.min_timestamp());
                upper = upper.min(config.segment_id(row.min_timestamp()));
                continue;
            }
            let valid_to = self.place_in_covering_row(key, segment, row, value, ts)?;
            return Ok(Step::Placed(Some(valid_to)));
        }
        Ok(Step::Below(found))
    }

    /// Step 2 at the row of `segment` that covers `ts`: the version replaces the value at
    /// `ts`, or splits the version it falls in. Returns its valid-to.
    fn place_in_covering_row<'a>(
        &mut self,
        key: &[u8],
        segment: i64,
        mut row: SegmentRow<'a>,
        value: Option<&'a [u8]>,
        ts: i64,
    ) -> Result<i64> {
        let index = row
            .find(ts)
            .ok_or_else(|| self.invariant(segment, key, "row covers a time it has no entry for"))?;
        let valid_to = row.valid_to(index);
        let covering = row.entries()[index];
        let new = Entry {
            timestamp: ts,
            value,
        };
        let target = self.state.config.segment_id(ts);
        if covering.timestamp == ts {
            row.replace_value(index, value);
        } else if target == segment {
            row.insert_before(index, new);
        } else {
            // `covering` now ends at `ts`, in an older segment: it moves there and the new
            // version takes its slot. Only the oldest entry of a row can start before it.
            if index + 1 != row.entries().len() {
                return Err(self.invariant(
                    segment,
                    key,
                    "a version other than the oldest starts in an older segment",
                ));
            }
            self.append(storage_key(target, key), covering, ts);
            row.replace_entry(index, new);
        }
        self.write_row(segment, key, &row);
        Ok(valid_to)
    }

    /// Step 3: no row covers `ts`. The version becomes the newest (a value in the latest-value
    /// store, a tombstone ending the history) or goes just before the oldest newer version.
    fn place_uncovered(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        ts: i64,
        newer: Newer,
    ) -> Result<Option<i64>> {
        let target = self.state.config.segment_id(ts);
        match (newer.next, value) {
            (None, Some(v)) => {
                if newer.lone_tombstone_at_ts {
                    // The lone tombstone at `ts` is replaced by this value.
                    self.write(storage_key(target, key), None);
                }
                self.state.note_latest(None, Some(ts));
                self.set_latest(storage_key(LATEST_SEGMENT, key), ts, Some(v), false);
                Ok(None)
            }
            (None, None) => {
                self.end_with_tombstone(key, ts)?;
                Ok(None)
            }
            (Some(next), _) => {
                let new = Entry {
                    timestamp: ts,
                    value,
                };
                self.insert_before_newer(key, new, next)?;
                Ok(Some(next))
            }
        }
    }

    /// Step 3 with a newer version at `next`: `new` goes into the row of `segment_id(next)`,
    /// valid until `next`, as its oldest entry, or as its newest when that row ends earlier.
    fn insert_before_newer(&mut self, key: &[u8], new: Entry<'_>, next: i64) -> Result<()> {
        let segment = self.state.config.segment_id(next);
        match self.row(segment, key)? {
            None => self.write_row(segment, key, &SegmentRow::single(new, next)),
            Some(bytes) => {
                let mut row = self.decode(&bytes, segment, key)?;
                if row.next_timestamp() <= new.timestamp {
                    row.append_newest(new, next)?;
                } else if row.min_timestamp() > new.timestamp {
                    row.insert_oldest(new);
                } else {
                    return Err(self.invariant(
                        segment,
                        key,
                        "row covers a time no newer segment reached",
                    ));
                }
                self.write_row(segment, key, &row);
            }
        }
        Ok(())
    }

    /// Records a tombstone at `ts` with nothing newer: implicit as the `next_timestamp` of the
    /// row in `segment_id(ts)`, or a degenerate row when there is none.
    fn end_with_tombstone(&mut self, key: &[u8], ts: i64) -> Result<()> {
        let segment = self.state.config.segment_id(ts);
        match self.row(segment, key)? {
            None => self.write_row(segment, key, &SegmentRow::degenerate(ts)),
            Some(bytes) => {
                let mut row = self.decode(&bytes, segment, key)?;
                if row.next_timestamp() > ts {
                    return Err(self.invariant(segment, key, "row ends after a newest tombstone"));
                }
                if row.next_timestamp() < ts {
                    row.end_with_tombstone(ts);
                    self.write_row(segment, key, &row);
                }
            }
        }
        Ok(())
    }
}

/// Tests fail a call half way through, after its first puts staged their writes and the
/// failing put advanced stream time (which may drop segments): nothing may remain of it.
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::Cell;

    use crate::error::{Error, Result};

    thread_local! {
        /// Placements left before one fails (`None`: none fails).
        static PLACES_BEFORE_FAILURE: Cell<Option<usize>> = const { Cell::new(None) };
        /// Whether that failure is a panic rather than an error.
        static PANICS: Cell<bool> = const { Cell::new(false) };
    }

    /// The placement after the next `places` ones fails with an error, on this thread.
    pub(crate) fn fail_after(places: usize) {
        PLACES_BEFORE_FAILURE.set(Some(places));
        PANICS.set(false);
    }

    /// The placement after the next `places` ones panics, on this thread.
    pub(crate) fn panic_after(places: usize) {
        PLACES_BEFORE_FAILURE.set(Some(places));
        PANICS.set(true);
    }

    /// Cancels a failure that has not happened.
    pub(crate) fn clear() {
        PLACES_BEFORE_FAILURE.set(None);
    }

    pub(super) fn check() -> Result<()> {
        match PLACES_BEFORE_FAILURE.get() {
            None => Ok(()),
            Some(0) => {
                PLACES_BEFORE_FAILURE.set(None);
                assert!(!PANICS.get(), "injected panic");
                Err(Error::corrupt("a test", "injected failure"))
            }
            Some(n) => {
                PLACES_BEFORE_FAILURE.set(Some(n - 1));
                Ok(())
            }
        }
    }
}
