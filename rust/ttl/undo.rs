//! A call's undo record of the latest TTL's buckets: what the call changed in them, put back if
//! it fails (`State::begin_call`, `store/transaction.rs`).
//!
//! A failed call leaves the buckets as they were before it. A copy taken at each call would
//! allocate whether the call fails or not; the record instead keeps each count the call changes,
//! as it was before the call's first change of it, in storage reused from call to call. One
//! entry a count, however many rows the call writes: a batch of 10 000 puts records about as
//! many entries as there are buckets it touches (about 34 live at most), and a call that
//! succeeds only forgets them.

use super::LatestBuckets;

/// Which of the buckets' counts an entry of the record is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counts {
    /// Latest values per bucket not yet retired.
    Live,
    /// Entries per retired bucket not yet reclaimable.
    Retired,
}

/// What the running call changed in the buckets.
#[derive(Debug, Clone, Default)]
pub(super) struct Undo {
    /// Whether a call is running: outside one (an open counting what storage holds) nothing is
    /// recorded, since nothing would put it back.
    recording: bool,
    /// Each count the call changed, as it was before its first change (0: absent).
    counts: Vec<(Counts, i64, u64)>,
    /// The totals as they were when the call began.
    reclaimable: u64,
    expired: u64,
    reclaims: u64,
}

impl Undo {
    /// `which`'s count of `bucket` (in `live` or `retired`) is about to change: recorded as it
    /// is, unless the call changed it before.
    pub(super) fn note(
        &mut self,
        which: Counts,
        bucket: i64,
        live: &[(i64, u64)],
        retired: &[(i64, u64)],
    ) {
        if !self.recording
            || self
                .counts
                .iter()
                .any(|&(w, b, _)| w == which && b == bucket)
        {
            return;
        }
        let counts = match which {
            Counts::Live => live,
            Counts::Retired => retired,
        };
        let count = counts
            .binary_search_by_key(&bucket, |&(b, _)| b)
            .map_or(0, |at| counts[at].1);
        self.counts.push((which, bucket, count));
    }
}

impl LatestBuckets {
    /// A call begins: what it changes from now until it ends is recorded.
    pub(crate) fn begin_call(&mut self) {
        self.undo.recording = true;
        self.undo.counts.clear();
        self.undo.reclaimable = self.reclaimable;
        self.undo.expired = self.expired;
        self.undo.reclaims = self.reclaims;
    }

    /// The call succeeded: its changes stand.
    pub(crate) fn end_call(&mut self) {
        self.undo.recording = false;
        self.undo.counts.clear();
    }

    /// The call failed: every count and total it changed is as before it. Each count was
    /// recorded once, as it was before the call, so the order they are put back in is free.
    pub(crate) fn undo_call(&mut self) {
        self.undo.recording = false;
        let mut record = std::mem::take(&mut self.undo.counts);
        for &(which, bucket, count) in &record {
            set(self.counts_mut(which), bucket, count);
        }
        record.clear();
        self.undo.counts = record;
        self.reclaimable = self.undo.reclaimable;
        self.expired = self.undo.expired;
        self.reclaims = self.undo.reclaims;
    }
}

/// Sets `bucket`'s count in the sorted `counts` to `count`, 0 leaving it out.
fn set(counts: &mut Vec<(i64, u64)>, bucket: i64, count: u64) {
    match (counts.binary_search_by_key(&bucket, |&(b, _)| b), count) {
        (Ok(at), 0) => {
            counts.remove(at);
        }
        (Ok(at), _) => counts[at].1 = count,
        (Err(_), 0) => {}
        (Err(at), _) => counts.insert(at, (bucket, count)),
    }
}

/// Two buckets are equal by their counts and totals: the record is no part of the value.
#[cfg(test)]
impl PartialEq for LatestBuckets {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.live,
            &self.retired,
            self.reclaimable,
            self.expired,
            self.reclaims,
        ) == (
            &other.live,
            &other.retired,
            other.reclaimable,
            other.expired,
            other.reclaims,
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::LatestTtl;
    use super::*;

    /// What a call may do to the buckets; times are offsets from stream time.
    #[derive(Debug, Clone)]
    enum Step {
        /// A key's latest value moves (`None`: none before, or a delete).
        Note(Option<i64>, Option<i64>),
        /// Stream time advances by this much and retires what expired.
        Advance(i64),
        /// The durable horizon reaches stream time less this; a due reclamation starts.
        Settle(i64),
    }

    fn arb_step() -> impl Strategy<Value = Step> {
        let time = proptest::option::of(-120i64..10);
        prop_oneof![
            4 => (time.clone(), time).prop_map(|(before, after)| Step::Note(before, after)),
            2 => (0i64..40).prop_map(Step::Advance),
            1 => (0i64..100).prop_map(Step::Settle),
        ]
    }

    fn apply(buckets: &mut LatestBuckets, ttl: &LatestTtl, stream_time: &mut i64, step: &Step) {
        let at = |offset: i64| *stream_time + offset;
        match *step {
            Step::Note(before, after) => {
                buckets.note(ttl, *stream_time, before.map(at), after.map(at));
            }
            Step::Advance(dt) => {
                *stream_time += dt;
                buckets.retire(ttl, *stream_time);
            }
            Step::Settle(back) => {
                if buckets.settle(ttl, at(-back), 2) {
                    buckets.started();
                }
            }
        }
    }

    proptest! {
        /// A failed call leaves the buckets as a copy taken before it; a call that succeeds
        /// leaves them as the same steps taken without a record; the next call records afresh.
        #[test]
        fn an_undone_call_leaves_the_buckets_as_a_copy_taken_before_it(
            ttl_ms in 1i64..80,
            interval in 1i64..20,
            before in proptest::collection::vec(arb_step(), 0..30),
            failed in proptest::collection::vec(arb_step(), 0..30),
            kept in proptest::collection::vec(arb_step(), 0..30),
        ) {
            let ttl = LatestTtl::new(ttl_ms, interval);
            let (mut buckets, mut unrecorded) = (LatestBuckets::default(), LatestBuckets::default());
            let mut stream_time = 100;
            for step in &before {
                apply(&mut buckets, &ttl, &mut stream_time, step);
            }
            let (copy, copied_at) = (buckets.clone(), stream_time);
            buckets.begin_call();
            for step in &failed {
                apply(&mut buckets, &ttl, &mut stream_time, step);
            }
            buckets.undo_call();
            prop_assert_eq!(&buckets, &copy);
            stream_time = copied_at;
            let mut twin_time = copied_at;
            unrecorded.clone_from(&copy);
            buckets.begin_call();
            for step in &kept {
                apply(&mut buckets, &ttl, &mut stream_time, step);
                apply(&mut unrecorded, &ttl, &mut twin_time, step);
            }
            buckets.end_call();
            prop_assert_eq!(&buckets, &unrecorded);
            prop_assert!(buckets.undo.counts.is_empty() && !buckets.undo.recording);
        }
    }
}
