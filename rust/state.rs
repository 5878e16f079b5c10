//! The in-memory part of a store's state: settings, observed stream time, live segments.

use crate::config::StoreConfig;
use crate::segments::Segments;
use crate::ttl::{Clock, LatestBuckets};

/// The in-memory part of a store's state, derived from storage on open.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) config: StoreConfig,
    /// Largest timestamp of any accepted write; -1 before the first.
    pub(crate) stream_time: i64,
    pub(crate) segments: Segments,
    /// Number of latest-value entries, kept by persistent stores (`crate::stats`); `None` in
    /// memory, where the map knows it.
    pub(crate) latest_keys: Option<u64>,
    /// Latest values by time bucket, in a store with a latest TTL (`crate::ttl`); `latest_keys`
    /// is then `None`.
    pub(crate) latest_buckets: Option<LatestBuckets>,
}

impl State {
    /// Stream time and the horizon `ST - R` below which reads see only the newest version.
    pub(crate) fn clock(&self) -> Clock {
        Clock {
            stream_time: self.stream_time,
            horizon: self
                .stream_time
                .saturating_sub(self.config.history_retention_ms()),
        }
    }

    /// Notes a key's latest value moving from `before` to `after` (timestamps; `None`: none),
    /// in a store with a latest TTL.
    pub(crate) fn note_latest(&mut self, before: Option<i64>, after: Option<i64>) {
        if let (Some(ttl), Some(buckets)) = (self.config.latest_ttl(), &mut self.latest_buckets) {
            buckets.note(&ttl, self.stream_time, before, after);
        }
    }

    /// Retires the buckets of latest values that stream time has wholly expired.
    pub(crate) fn retire_expired(&mut self) {
        if let (Some(ttl), Some(buckets)) = (self.config.latest_ttl(), &mut self.latest_buckets) {
            buckets.retire(&ttl, self.stream_time);
        }
    }
}
