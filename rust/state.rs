//! The in-memory part of a store's state: settings, observed stream time, live segments.

use crate::config::StoreConfig;
use crate::segments::Segments;
use crate::ttl::Clock;

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
}
