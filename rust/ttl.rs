//! Time-to-live of a key's newest version (`latest_ttl_ms`), in event time (docs/semantics.md,
//! "Time-to-live").
//!
//! A version `v@t` ends at `t + L` unless a newer version started before then, and only once
//! observed stream time `ST` has reached `t + L`. So reads depend on the accepted writes, `ST`
//! and `L` alone: a replay, a rebuild or a replay in another order gives the same answers, and
//! dropping an expired entry's bytes (by a compaction filter, in bulk) never changes one.
//!
//! Live latest values are counted per time bucket of width `W = max(I, L / 32)` (`I` the segment
//! interval): a store holds at most about 34 live buckets, and a bucket *retires* once every key
//! in it has expired, `(b + 1) W + L <= ST`.

mod undo;

use undo::{Counts, Undo};

/// A store's latest TTL: the rule, and the buckets its live-key accounting and reclamation use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestTtl {
    ttl_ms: i64,
    bucket_ms: i64,
}

/// Buckets per TTL: enough that a bucket's keys expire close together, few enough that the
/// accounting stays a handful of map entries.
const BUCKETS_PER_TTL: i64 = 32;

impl LatestTtl {
    /// The TTL `ttl_ms` (>= 1, checked by `StoreConfig::with_latest_ttl`) of a store whose
    /// segment interval is `segment_interval_ms`.
    pub(crate) fn new(ttl_ms: i64, segment_interval_ms: i64) -> Self {
        Self {
            ttl_ms,
            bucket_ms: segment_interval_ms.max(ttl_ms / BUCKETS_PER_TTL).max(1),
        }
    }

    /// How long a newest version stays valid after its timestamp without a newer one.
    #[must_use]
    pub fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }

    /// Where a version at `timestamp` ends: at `next` (the next newer version's timestamp) or
    /// at `timestamp + L`, whichever is first; a newest version (`next` None) ends at
    /// `timestamp + L` once `stream_time` has reached it, and is open (None) before.
    pub(crate) fn end(&self, timestamp: i64, next: Option<i64>, stream_time: i64) -> Option<i64> {
        let expiry = timestamp.saturating_add(self.ttl_ms);
        match next {
            Some(next) => Some(next.min(expiry)),
            None if expiry <= stream_time => Some(expiry),
            None => None,
        }
    }

    /// The bucket a latest value at `timestamp` is counted in.
    pub(crate) fn bucket(&self, timestamp: i64) -> i64 {
        timestamp.div_euclid(self.bucket_ms)
    }

    /// Whether every latest value of `bucket` has expired at `stream_time`.
    pub(crate) fn retired(&self, bucket: i64, stream_time: i64) -> bool {
        self.bucket_end(bucket).saturating_add(self.ttl_ms) <= stream_time
    }

    /// Whether a latest value at `timestamp` may be dropped from storage once the durable
    /// horizon (`ST - R` of a stream time storage holds) is `horizon`: it expired, and so did
    /// its whole bucket, at or below every time a read can still ask about exactly.
    pub(crate) fn reclaimable(&self, timestamp: i64, horizon: i64) -> bool {
        self.bucket_reclaimable(self.bucket(timestamp), horizon)
    }

    /// Whether every latest value of `bucket` is reclaimable at `horizon`.
    fn bucket_reclaimable(&self, bucket: i64, horizon: i64) -> bool {
        self.bucket_end(bucket).saturating_add(self.ttl_ms) <= horizon
    }

    /// What a point read at `as_of` (`None`: the newest version) answers when, without the
    /// TTL, it finds a version at `timestamp` valid to `valid_to` (`None`: the newest): the
    /// valid-to to report, or [`Seen::Ended`] where the key had expired. Below the `horizon` only a live
    /// newest value is visible, as without a TTL only the newest is.
    ///
    /// Not inlined: every read path calls it per row, and inlined into them it cost a store
    /// without a TTL, which never calls it, 20 to 40 instructions a batch lookup in the code
    /// around it (BENCHMARKS.md, "Latest TTL").
    #[inline(never)]
    pub(crate) fn point_read(
        &self,
        timestamp: i64,
        valid_to: Option<i64>,
        as_of: Option<i64>,
        clock: Clock,
    ) -> Seen {
        let Some(end) = self.end(timestamp, valid_to, clock.stream_time) else {
            return Seen::ValidTo(None);
        };
        match as_of {
            None => Seen::Ended,
            Some(t) if t >= end || (valid_to.is_none() && t < clock.horizon) => Seen::Ended,
            Some(_) => Seen::ValidTo(Some(end)),
        }
    }

    /// What `versions()` up to `to` reports of a value version at `timestamp` valid to
    /// `valid_to`: its valid-to, or [`Seen::Ended`] to leave it out. A version the TTL cut short is
    /// reported only while its end is above the horizon, so that dropping its bytes (at or
    /// below the durable horizon) changes no answer; below the horizon only a live newest
    /// value is visible.
    pub(crate) fn version(
        &self,
        timestamp: i64,
        valid_to: Option<i64>,
        to: i64,
        clock: Clock,
    ) -> Seen {
        let end = self.end(timestamp, valid_to, clock.stream_time);
        match end {
            Some(cut) if end != valid_to => {
                if cut <= clock.horizon || (valid_to.is_none() && to < clock.horizon) {
                    Seen::Ended
                } else {
                    Seen::ValidTo(end)
                }
            }
            _ => Seen::ValidTo(valid_to),
        }
    }

    fn bucket_end(&self, bucket: i64) -> i64 {
        bucket.saturating_add(1).saturating_mul(self.bucket_ms)
    }
}

/// Latest values per bucket (`State::latest_buckets`), for the live-key count and for when to
/// reclaim: deterministic, a function of the accepted writes and stream time alone (never of
/// which expired entries storage has dropped yet), so crashes, replays and rebuilds agree.
///
/// A write notes its key's newest value before and after (`note`); an advance of stream time
/// retires whole buckets (`retire`), whose keys have all expired. A retired bucket's entries
/// may still be stored: they become reclaimable once the durable horizon passes the bucket
/// (`settle`), and a reclamation is due once they are as many as the live keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct LatestBuckets {
    /// Latest values per bucket not yet retired, by bucket.
    live: Vec<(i64, u64)>,
    /// Entries per retired bucket not yet reclaimable at the durable horizon, by bucket.
    retired: Vec<(i64, u64)>,
    /// Entries that became reclaimable since the last reclamation started.
    reclaimable: u64,
    /// Keys retired since the store opened.
    pub(crate) expired: u64,
    /// Reclamations started since the store opened.
    pub(crate) reclaims: u64,
    /// While a call runs, what it changed here, put back if it fails (`undo`).
    undo: Undo,
}

impl LatestBuckets {
    /// Keys whose newest value is live, exact to one bucket (a key of a bucket not yet wholly
    /// expired counts).
    pub(crate) fn live_keys(&self) -> u64 {
        self.live.iter().map(|&(_, count)| count).sum()
    }

    /// A key's latest value was at `before` and is at `after` (`None`: no value), at
    /// `stream_time`, before the buckets that stream time retires have retired.
    pub(crate) fn note(
        &mut self,
        ttl: &LatestTtl,
        stream_time: i64,
        before: Option<i64>,
        after: Option<i64>,
    ) {
        if let Some(before) = before {
            // An entry of a retired bucket left the count when the bucket retired. A write
            // that advances stream time retires buckets after it is placed: the entry it
            // replaces leaves its bucket now, as a write, not as an expiry.
            self.add(Counts::Live, ttl.bucket(before), -1);
        }
        if let Some(after) = after {
            let bucket = ttl.bucket(after);
            // Expired on arrival (a late write older than the TTL): stored, never live.
            let counts = if ttl.retired(bucket, stream_time) {
                Counts::Retired
            } else {
                Counts::Live
            };
            self.add(counts, bucket, 1);
        }
    }

    /// Stream time reached `stream_time`: the buckets whose keys have all expired retire.
    pub(crate) fn retire(&mut self, ttl: &LatestTtl, stream_time: i64) {
        while let Some(&(bucket, count)) = self.live.first() {
            if !ttl.retired(bucket, stream_time) {
                break;
            }
            self.remove_first(Counts::Live);
            self.expired += count;
            self.add(
                Counts::Retired,
                bucket,
                i64::try_from(count).unwrap_or(i64::MAX),
            );
        }
    }

    /// Counts a stored latest value at `timestamp` (opening a store).
    pub(crate) fn count_stored(&mut self, ttl: &LatestTtl, clock: Clock, timestamp: i64) {
        let bucket = ttl.bucket(timestamp);
        if !ttl.retired(bucket, clock.stream_time) {
            self.add(Counts::Live, bucket, 1);
        } else if ttl.reclaimable(timestamp, clock.horizon) {
            self.reclaimable += 1;
        } else {
            self.add(Counts::Retired, bucket, 1);
        }
    }

    /// The durable horizon is `horizon`: retired buckets wholly below it become reclaimable.
    /// Returns whether a reclamation is due: as many reclaimable as keys are live, and at least
    /// `min_reclaim` (`Tuning`); then [`Self::started`] once it has.
    pub(crate) fn settle(&mut self, ttl: &LatestTtl, horizon: i64, min_reclaim: u64) -> bool {
        while let Some(&(bucket, count)) = self.retired.first() {
            if !ttl.bucket_reclaimable(bucket, horizon) {
                break;
            }
            self.remove_first(Counts::Retired);
            self.reclaimable += count;
        }
        self.reclaimable >= self.live_keys().max(min_reclaim)
    }

    /// A reclamation started: what was reclaimable is being dropped.
    pub(crate) fn started(&mut self) {
        self.reclaimable = 0;
        self.reclaims += 1;
    }

    /// Adds `change` to `bucket`'s count in `which`, dropping a count that reaches 0.
    fn add(&mut self, which: Counts, bucket: i64, change: i64) {
        self.undo.note(which, bucket, &self.live, &self.retired);
        add(self.counts_mut(which), bucket, change);
    }

    /// Drops the oldest bucket's count from `which`.
    fn remove_first(&mut self, which: Counts) {
        if let Some(&(bucket, _)) = self.counts_mut(which).first() {
            self.undo.note(which, bucket, &self.live, &self.retired);
            self.counts_mut(which).remove(0);
        }
    }

    fn counts_mut(&mut self, which: Counts) -> &mut Vec<(i64, u64)> {
        match which {
            Counts::Live => &mut self.live,
            Counts::Retired => &mut self.retired,
        }
    }
}

/// Adds `change` to `bucket`'s count in the sorted `counts`, dropping a count that reaches 0.
fn add(counts: &mut Vec<(i64, u64)>, bucket: i64, change: i64) {
    match counts.binary_search_by_key(&bucket, |&(b, _)| b) {
        Ok(at) => {
            let count = counts[at].1.saturating_add_signed(change);
            if count == 0 {
                counts.remove(at);
            } else {
                counts[at].1 = count;
            }
        }
        Err(at) if change > 0 => counts.insert(at, (bucket, change.unsigned_abs())),
        Err(_) => {}
    }
}

/// What a read reports of a version it found, under the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The version, valid to this time (`None`: the newest, and live).
    ValidTo(Option<i64>),
    /// Nothing: the TTL had ended the version at the time asked about.
    Ended,
}

/// The times a read's answer depends on: observed stream time and the horizon `ST - R`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) stream_time: i64,
    pub(crate) horizon: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_ends_at_its_successor_or_its_ttl_whichever_is_first() {
        let ttl = LatestTtl::new(50, 10);
        assert_eq!(ttl.end(920, Some(960), 980), Some(960));
        assert_eq!(ttl.end(920, Some(990), 995), Some(970));
        // the newest: open until stream time reaches t + L, then ended there
        assert_eq!(ttl.end(920, None, 969), None);
        assert_eq!(ttl.end(920, None, 970), Some(970));
    }

    #[test]
    fn a_point_read_sees_an_expired_key_only_while_it_lived_and_above_the_horizon() {
        let ttl = LatestTtl::new(50, 10);
        let clock = Clock {
            stream_time: 1000,
            horizon: 900,
        };
        // the newest version at 920 expired at 970
        assert_eq!(ttl.point_read(920, None, None, clock), Seen::Ended);
        assert_eq!(
            ttl.point_read(920, None, Some(930), clock),
            Seen::ValidTo(Some(970))
        );
        assert_eq!(ttl.point_read(920, None, Some(970), clock), Seen::Ended);
        // the newest at 880 is below the horizon: not live, so not visible
        assert_eq!(ttl.point_read(880, None, Some(890), clock), Seen::Ended);
        // a live newest version, and a history version cut short or not
        assert_eq!(ttl.point_read(990, None, None, clock), Seen::ValidTo(None));
        assert_eq!(
            ttl.point_read(920, Some(990), Some(980), clock),
            Seen::Ended
        );
        assert_eq!(
            ttl.point_read(920, Some(950), Some(930), clock),
            Seen::ValidTo(Some(950))
        );
    }

    #[test]
    fn versions_cut_short_are_reported_while_their_end_is_above_the_horizon() {
        let ttl = LatestTtl::new(50, 10);
        let clock = Clock {
            stream_time: 1000,
            horizon: 900,
        };
        assert_eq!(
            ttl.version(920, None, 2000, clock),
            Seen::ValidTo(Some(970))
        );
        assert_eq!(ttl.version(850, None, 2000, clock), Seen::Ended);
        assert_eq!(
            ttl.version(851, Some(990), 2000, clock),
            Seen::ValidTo(Some(901))
        );
        assert_eq!(ttl.version(850, Some(990), 2000, clock), Seen::Ended);
        // not cut: unchanged, whatever the horizon
        assert_eq!(
            ttl.version(800, Some(820), 2000, clock),
            Seen::ValidTo(Some(820))
        );
        assert_eq!(ttl.version(990, None, 2000, clock), Seen::ValidTo(None));
        // below the horizon only a live newest value
        assert_eq!(ttl.version(920, None, 899, clock), Seen::Ended);
    }

    #[test]
    fn buckets_are_at_least_a_segment_wide_and_about_a_32nd_of_the_ttl() {
        assert_eq!(LatestTtl::new(50, 10).bucket_ms, 10);
        assert_eq!(LatestTtl::new(3_200_000, 60_000).bucket_ms, 100_000);
        let ttl = LatestTtl::new(3_200, 10);
        assert_eq!(ttl.bucket(0), 0);
        assert_eq!(ttl.bucket(99), 0);
        assert_eq!(ttl.bucket(100), 1);
        // bucket 0 holds [0, 100): its last key expires at 99 + 3200 < 100 + 3200
        assert!(!ttl.retired(0, 3_299));
        assert!(ttl.retired(0, 3_300));
        assert!(!ttl.reclaimable(50, 3_299));
        assert!(ttl.reclaimable(50, 3_300));
    }

    #[test]
    fn buckets_count_live_keys_retire_whole_and_reclaim_once_dead_outnumber_live() {
        // buckets of 10 ms, TTL 50: bucket b retires at stream time (b + 1) * 10 + 50
        let ttl = LatestTtl::new(50, 10);
        let mut buckets = LatestBuckets::default();
        for (key, t) in [0, 3, 12, 25, 26].into_iter().enumerate() {
            buckets.note(&ttl, 30, None, Some(t));
            assert_eq!(buckets.live_keys(), key as u64 + 1);
        }
        // a key rewritten moves from its bucket to the new one; a delete leaves
        buckets.note(&ttl, 30, Some(3), Some(30));
        buckets.note(&ttl, 30, Some(26), None);
        assert_eq!(buckets.live_keys(), 4);
        buckets.retire(&ttl, 59);
        assert_eq!((buckets.live_keys(), buckets.expired), (4, 0));
        buckets.retire(&ttl, 80);
        assert_eq!((buckets.live_keys(), buckets.expired), (1, 3));
        // a late write already expired is stored, not live; a rewrite of a retired key is not
        // taken from the live count again
        buckets.note(&ttl, 80, None, Some(5));
        buckets.note(&ttl, 80, Some(12), Some(80));
        assert_eq!(buckets.live_keys(), 2);
        // bucket 0 (2 entries) is reclaimable at horizon 60, buckets 1 and 2 at 70 and 80; a
        // reclamation is due at 4 (the least worth one), then starts from 0 again
        assert!(!buckets.settle(&ttl, 59, 4));
        assert!(!buckets.settle(&ttl, 60, 4));
        assert_eq!(buckets.reclaimable, 2);
        assert!(buckets.settle(&ttl, 80, 4));
        buckets.started();
        assert_eq!((buckets.reclaimable, buckets.reclaims), (0, 1));
    }

    #[test]
    fn extreme_times_saturate_instead_of_wrapping() {
        let ttl = LatestTtl::new(i64::MAX, 1);
        assert_eq!(ttl.end(i64::MAX - 1, None, i64::MAX), Some(i64::MAX));
        assert_eq!(ttl.end(1, None, i64::MAX - 1), None);
        assert!(!ttl.retired(ttl.bucket(i64::MAX), i64::MAX - 1));
        assert!(!ttl.reclaimable(0, i64::MIN));
    }
}
