//! A reference model of `docs/semantics.md` with no storage design, and the query plans that
//! compare a store with it (or with another store) query by query.

use std::collections::BTreeMap;

use super::harness::{ASC, DESC, kafka_config};
use crate::record::{NOT_PUT, VALID_TO_UNDEFINED};
use crate::{Error, ResultOrder, StoreConfig, VersionedRecord, VersionedStore};

/// One read, asked of a store or of the model.
#[derive(Debug, Clone, Copy)]
pub(super) enum Query<'k> {
    Latest(&'k [u8]),
    AsOf(&'k [u8], i64),
    Versions(&'k [u8], Option<i64>, Option<i64>, ResultOrder),
}

/// What a read returns; an error is described by [`describe`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    One(Option<VersionedRecord>),
    Many(Vec<VersionedRecord>),
}

/// Read access shared by the store and the reference model.
pub(super) trait Reads {
    fn answer(&self, query: Query<'_>) -> Result<Answer, String>;
    fn stream_time(&self) -> i64;
}

pub(super) fn describe(error: &Error) -> String {
    match error {
        Error::InvalidArgument { argument, .. } => format!("invalid argument {argument}"),
        other => other.to_string(),
    }
}

impl Reads for VersionedStore {
    fn answer(&self, query: Query<'_>) -> Result<Answer, String> {
        match query {
            Query::Latest(key) => self.get(key).map(Answer::One),
            Query::AsOf(key, t) => self.get_as_of(key, t).map(Answer::One),
            Query::Versions(key, from, to, order) => {
                self.versions(key, from, to, order).map(Answer::Many)
            }
        }
        .map_err(|e| describe(&e))
    }

    fn stream_time(&self) -> i64 {
        self.observed_stream_time()
    }
}

/// Which queries to run.
pub(super) struct Plan {
    as_of: Vec<i64>,
    bounds: Vec<Option<i64>>,
}

impl Plan {
    /// The as-of times the plan reads at.
    pub(super) fn times(&self) -> &[i64] {
        &self.as_of
    }

    /// Queries around the horizon `H = ST − R`, for checks after every operation.
    pub(super) fn narrow(stream_time: i64, retention: i64) -> Self {
        let h = stream_time - retention;
        let mut as_of: Vec<i64> = vec![-1, 0, 1];
        as_of.extend((h - 2).max(-1)..=stream_time + 2);
        let bounds = vec![
            Some(0),
            Some(h - 1),
            Some(h),
            Some(stream_time / 2),
            Some(stream_time),
        ];
        Self::finish(as_of, bounds)
    }

    /// Every as-of time from -1 to `ST + 2` and bounds spread over the whole range.
    pub(super) fn wide(stream_time: i64, retention: i64) -> Self {
        let h = stream_time - retention;
        let step = (stream_time / 12).max(1);
        let as_of_step = (stream_time / 600).max(1);
        let as_of: Vec<i64> = (-1..=stream_time + 2)
            .step_by(usize::try_from(as_of_step).expect("positive"))
            .chain([h - 1, h, h + 1, stream_time])
            .collect();
        let mut bounds: Vec<Option<i64>> = (-1..=stream_time + 1)
            .step_by(usize::try_from(step).expect("positive"))
            .map(Some)
            .collect();
        bounds.extend([
            Some(h - 1),
            Some(h),
            Some(h + 1),
            Some(stream_time),
            Some(stream_time + 1),
        ]);
        Self::finish(as_of, bounds)
    }

    fn finish(mut as_of: Vec<i64>, mut bounds: Vec<Option<i64>>) -> Self {
        as_of.sort_unstable();
        as_of.dedup();
        bounds.push(None);
        bounds.sort_unstable();
        bounds.dedup();
        Self { as_of, bounds }
    }
}

/// Runs `plan` for every key: `(query, result)` pairs in a fixed order.
pub(super) fn observe(reads: &impl Reads, keys: &[&[u8]], plan: &Plan) -> Vec<(String, String)> {
    let mut out = vec![(
        "observed_stream_time".to_owned(),
        reads.stream_time().to_string(),
    )];
    for key in keys {
        out.push((
            format!("get({key:?})"),
            format!("{:?}", reads.answer(Query::Latest(key))),
        ));
        for &t in &plan.as_of {
            out.push((
                format!("get_as_of({key:?}, {t})"),
                format!("{:?}", reads.answer(Query::AsOf(key, t))),
            ));
        }
        for &from in &plan.bounds {
            for &to in &plan.bounds {
                let orders: &[ResultOrder] = if from.is_none() {
                    &[DESC, ASC]
                } else {
                    &[DESC]
                };
                for &order in orders {
                    out.push((
                        format!("versions({key:?}, {from:?}, {to:?}, {order:?})"),
                        format!("{:?}", reads.answer(Query::Versions(key, from, to, order))),
                    ));
                }
            }
        }
    }
    out
}

/// The first query whose results differ, if any.
pub(super) fn assert_same(
    actual: &[(String, String)],
    expected: &[(String, String)],
) -> Result<(), String> {
    for ((query, got), (_, want)) in actual.iter().zip(expected) {
        if got != want {
            return Err(format!("{query}:\n  store: {got}\n  model: {want}"));
        }
    }
    if actual.len() == expected.len() {
        Ok(())
    } else {
        Err("different query plans".to_owned())
    }
}

/// A version as a scan with tombstones returns it: `(value or None, timestamp, valid_to)`.
pub(super) type HistoryRow = (Option<Vec<u8>>, i64, Option<i64>);

/// The documented semantics, with no storage design: per key every version ever accepted.
///
/// `versions()` follows the physical-presence rule of §2.5/§5: the newest version is always
/// there; an older version with valid-to `vt` is there iff `vt / I ≥ (ST − R) / I` (truncating
/// division, i.e. its segment has not been dropped).
///
/// With a latest TTL `L` (§2.15) a value `v@t` ends at `min(next, t + L)`, the newest one at
/// `t + L` once stream time has reached it; reads see it only while it lived, a version cut
/// short only while its end is above the horizon, and below the horizon only a live newest value.
#[derive(Debug, Clone)]
pub(super) struct Model {
    retention: i64,
    interval: i64,
    ttl: Option<i64>,
    pub(super) stream_time: i64,
    keys: BTreeMap<Vec<u8>, BTreeMap<i64, Option<Vec<u8>>>>,
}

impl Model {
    pub(super) fn new(config: StoreConfig) -> Self {
        Self {
            retention: config.history_retention_ms(),
            interval: config.segment_interval_ms(),
            ttl: config.latest_ttl().map(|ttl| ttl.ttl_ms()),
            stream_time: -1,
            keys: BTreeMap::new(),
        }
    }

    fn horizon(&self) -> i64 {
        self.stream_time - self.retention
    }

    /// Where a value at `timestamp`, followed by a version at `next`, ends under the TTL.
    fn end(&self, timestamp: i64, next: Option<i64>) -> Option<i64> {
        let Some(ttl) = self.ttl else { return next };
        let expiry = timestamp.saturating_add(ttl);
        match next {
            Some(next) => Some(next.min(expiry)),
            None => (expiry <= self.stream_time).then_some(expiry),
        }
    }

    pub(super) fn put(&mut self, key: &[u8], value: Option<&[u8]>, timestamp: i64) -> i64 {
        if timestamp < self.horizon() {
            return NOT_PUT;
        }
        self.stream_time = self.stream_time.max(timestamp);
        let versions = self.keys.entry(key.to_vec()).or_default();
        versions.insert(timestamp, value.map(<[u8]>::to_vec));
        let next = versions.range(timestamp + 1..).next().map(|(&t, _)| t);
        let end = if value.is_some() {
            self.end(timestamp, next)
        } else {
            next
        };
        end.unwrap_or(VALID_TO_UNDEFINED)
    }

    pub(super) fn delete(&mut self, key: &[u8], timestamp: i64) -> Option<VersionedRecord> {
        if timestamp < self.horizon() {
            return None;
        }
        let before = self.as_of(key, timestamp);
        self.put(key, None, timestamp);
        before
    }

    /// `advance_stream_time`: the stream time after raising it to `timestamp`.
    pub(super) fn advance_stream_time(&mut self, timestamp: i64) -> i64 {
        self.stream_time = self.stream_time.max(timestamp);
        self.stream_time
    }

    pub(super) fn latest(&self, key: &[u8]) -> Option<VersionedRecord> {
        let (&timestamp, value) = self.keys.get(key)?.last_key_value()?;
        if self.end(timestamp, None).is_some() {
            return None;
        }
        value.as_ref().map(|v| VersionedRecord {
            value: v.clone(),
            timestamp,
            valid_to: None,
        })
    }

    pub(super) fn as_of(&self, key: &[u8], as_of: i64) -> Option<VersionedRecord> {
        if as_of < self.horizon() {
            return self.latest(key).filter(|r| r.timestamp <= as_of);
        }
        let versions = self.keys.get(key)?;
        let (&timestamp, value) = versions.range(..=as_of).next_back()?;
        let next = versions.range(timestamp + 1..).next().map(|(&t, _)| t);
        let valid_to = self.end(timestamp, next);
        if valid_to.is_some_and(|end| as_of >= end) {
            return None;
        }
        value.as_ref().map(|v| VersionedRecord {
            value: v.clone(),
            timestamp,
            valid_to,
        })
    }

    /// Whether a value version with valid-to `valid_to` is still stored (§5): the newest
    /// always, another while the segment of its valid-to is live.
    pub(super) fn is_stored(&self, valid_to: Option<i64>) -> bool {
        let lowest_live = self.horizon() / self.interval;
        valid_to.is_none_or(|vt| vt / self.interval >= lowest_live)
    }

    /// Every version of `key` ever accepted that a scan with tombstones may return,
    /// tombstones (`None`) included, oldest first, as `(value, timestamp, valid_to)`: values
    /// end where the TTL ends them, and those it cut short at or below the horizon are left out.
    pub(super) fn history(&self, key: &[u8]) -> Vec<HistoryRow> {
        self.history_stored(key)
            .into_iter()
            .map(|(row, _)| row)
            .collect()
    }

    /// The index in [`Self::history`] of the oldest value still stored (§5), if any.
    pub(super) fn oldest_stored_value(&self, key: &[u8]) -> Option<usize> {
        self.history_stored(key)
            .iter()
            .position(|((value, _, _), stored)| value.is_some() && *stored)
    }

    /// [`Self::history`], each with whether it is still stored (by its valid-to as stored).
    fn history_stored(&self, key: &[u8]) -> Vec<(HistoryRow, bool)> {
        let Some(versions) = self.keys.get(key) else {
            return Vec::new();
        };
        let starts: Vec<i64> = versions.keys().copied().collect();
        let h = self.horizon();
        versions
            .iter()
            .zip(starts.iter().skip(1).map(|&t| Some(t)).chain([None]))
            .filter_map(|((&timestamp, value), next)| {
                if value.is_none() {
                    return Some(((None, timestamp, next), self.is_stored(next)));
                }
                let end = self.end(timestamp, next);
                let cut_and_gone = end != next && end.is_some_and(|end| end <= h);
                (!cut_and_gone).then(|| ((value.clone(), timestamp, end), self.is_stored(next)))
            })
            .collect()
    }

    pub(super) fn versions(&self, key: &[u8], from: i64, to: i64) -> Vec<VersionedRecord> {
        let h = self.horizon();
        if to < h {
            return self
                .latest(key)
                .filter(|r| r.timestamp <= to)
                .into_iter()
                .collect();
        }
        let Some(versions) = self.keys.get(key) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut newer: Option<i64> = None;
        for (&timestamp, value) in versions.iter().rev() {
            let valid_to = newer;
            newer = Some(timestamp);
            let Some(value) = value else { continue };
            let stored = valid_to;
            let valid_to = self.end(timestamp, stored);
            let cut_and_gone = valid_to != stored && valid_to.is_some_and(|end| end <= h);
            let present = self.is_stored(stored) && !cut_and_gone;
            let overlaps = timestamp <= to && valid_to.is_none_or(|vt| vt > from);
            if present && overlaps {
                out.push(VersionedRecord {
                    value: value.clone(),
                    timestamp,
                    valid_to,
                });
            }
        }
        out
    }
}

impl Reads for Model {
    fn answer(&self, query: Query<'_>) -> Result<Answer, String> {
        Ok(match query {
            Query::Latest(key) => Answer::One(self.latest(key)),
            Query::AsOf(key, t) => Answer::One(self.as_of(key, t)),
            Query::Versions(key, from, to, order) => {
                let (from, to) = (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX));
                if from > to {
                    return Err("invalid argument from_time".to_owned());
                }
                let mut out = self.versions(key, from, to);
                if order == ResultOrder::Ascending {
                    out.reverse();
                }
                Answer::Many(out)
            }
        })
    }

    fn stream_time(&self) -> i64 {
        self.stream_time
    }
}

/// The model's own sanity: the §E9 example.
#[test]
fn model_follows_the_documented_expiry_example() {
    let mut model = Model::new(kafka_config());
    model.put(b"k", Some(b"v_old"), 0);
    model.put(b"k", Some(b"v"), 99_990);
    model.put(b"o", Some(b"x"), 399_990);
    assert_eq!(model.versions(b"k", 0, 99_990).len(), 2);
    assert_eq!(model.versions(b"k", 0, 99_989).len(), 0);
    model.put(b"o", Some(b"y"), 400_000);
    assert_eq!(model.versions(b"k", 0, i64::MAX).len(), 1);
}
