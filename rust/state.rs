//! The in-memory part of a store's state: settings, observed stream time, live segments.

use crate::config::StoreConfig;
use crate::segments::Segments;
use crate::ttl::{Clock, LatestBuckets};

/// What a persistent store's `latest_keys` metadata entry records (`format::meta`): the
/// counted latest-value entries, and the puts since the count was last exact that could have
/// created one without counting it (read-free puts: each is at most one key the count misses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyCounts {
    pub(crate) latest_keys: u64,
    pub(crate) unsettled_puts: u64,
}

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
    /// Read-free puts since `latest_keys` was last exact: each may have created a key it does
    /// not count (`crate::put`, docs/semantics.md §2.16).
    pub(crate) unsettled_puts: u64,
    /// The store's on-disk format (`format::meta`): 5 once a put took the read-free path.
    pub(crate) format_version: u32,
    /// Whether a tombstone may have been written at the current stream time since it was
    /// reached: a value at that time then takes the put algorithm's reads, which replace a lone
    /// tombstone at the value's time (`put.rs`). True after an open (not known).
    pub(crate) tombstone_at_stream_time: bool,
}

impl State {
    /// A store's state as loaded from storage (`format_version` 0: none recorded, in memory).
    pub(crate) fn loaded(
        config: StoreConfig,
        stream_time: i64,
        segments: Segments,
        format_version: u32,
    ) -> Self {
        Self {
            config,
            stream_time,
            segments,
            latest_keys: None,
            latest_buckets: None,
            unsettled_puts: 0,
            format_version,
            tombstone_at_stream_time: true,
        }
    }

    /// The key counts a persistent store records (`None` in memory and under a TTL).
    pub(crate) fn key_counts(&self) -> Option<KeyCounts> {
        self.latest_keys.map(|latest_keys| KeyCounts {
            latest_keys,
            unsettled_puts: self.unsettled_puts,
        })
    }

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

    /// A call begins: what to put back should it fail ([`Self::undo_call`]). Cheap: the
    /// segment set is shared until the call changes it (`Segments`), and a latest TTL's buckets
    /// record what the call changes in them rather than being copied (`ttl/undo.rs`).
    pub(crate) fn begin_call(&mut self) -> BeforeCall {
        // Every field is named, so that a new one is weighed here: kept, or recorded.
        let Self {
            config,
            stream_time,
            segments,
            latest_keys,
            latest_buckets,
            unsettled_puts,
            format_version,
            tombstone_at_stream_time,
        } = self;
        if let Some(buckets) = latest_buckets {
            buckets.begin_call();
        }
        BeforeCall {
            config: *config,
            stream_time: *stream_time,
            segments: segments.clone(),
            latest_keys: *latest_keys,
            unsettled_puts: *unsettled_puts,
            format_version: *format_version,
            tombstone_at_stream_time: *tombstone_at_stream_time,
        }
    }

    /// The call succeeded: its changes stand.
    pub(crate) fn end_call(&mut self) {
        if let Some(buckets) = &mut self.latest_buckets {
            buckets.end_call();
        }
    }

    /// The call failed: the state is as it was before it.
    pub(crate) fn undo_call(&mut self, before: BeforeCall) {
        if let Some(buckets) = &mut self.latest_buckets {
            buckets.undo_call();
        }
        self.config = before.config;
        self.stream_time = before.stream_time;
        self.segments = before.segments;
        self.latest_keys = before.latest_keys;
        self.unsettled_puts = before.unsettled_puts;
        self.format_version = before.format_version;
        self.tombstone_at_stream_time = before.tombstone_at_stream_time;
    }

    /// Retires the buckets of latest values that stream time has wholly expired.
    pub(crate) fn retire_expired(&mut self) {
        if let (Some(ttl), Some(buckets)) = (self.config.latest_ttl(), &mut self.latest_buckets) {
            buckets.retire(&ttl, self.stream_time);
        }
    }
}

/// The state before a call, for a call that fails (`State::begin_call`): every field but a
/// latest TTL's buckets, which keep their own record.
#[must_use]
pub(crate) struct BeforeCall {
    config: StoreConfig,
    stream_time: i64,
    segments: Segments,
    latest_keys: Option<u64>,
    unsettled_puts: u64,
    format_version: u32,
    tombstone_at_stream_time: bool,
}
