//! The client the put algorithm runs against: a write transaction over a [`Backend`].
//!
//! Kafka's `VersionedStoreClient` lets one put algorithm serve live writes and changelog restore.
//! Here that client is [`Txn`]: reads see the transaction's own pending writes first, segment
//! creation and expiry update the live set as they happen, and `commit` turns everything —
//! dropped segments, rows, latest values and the new observed stream time — into one atomic
//! [`WriteSet`]. A single put, a whole batch and a restore batch are each one transaction, so
//! there is no half-written two-location update to recover from (Kafka's KAFKA-14491 [16/N]).

use std::collections::HashMap;

use crate::backend::{Backend, WriteSet};
use crate::changelog::ChangelogRecord;
use crate::config::StoreConfig;
use crate::error::Result;
use crate::format::key::{META_SEGMENT, segment_of, storage_key};
use crate::format::meta;
use crate::segments::Segments;

/// Reads of storage keys, by the read algorithms.
pub(crate) trait ReadClient {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn location(&self) -> String;
}

impl ReadClient for dyn Backend + '_ {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(key)
    }

    fn location(&self) -> String {
        Backend::location(self)
    }
}

/// The in-memory part of a store's state, derived from storage on open.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) config: StoreConfig,
    /// Largest timestamp of any accepted write; -1 before the first.
    pub(crate) stream_time: i64,
    pub(crate) segments: Segments,
}

/// A write transaction: pending writes plus the state changes they imply.
pub(crate) struct Txn<'s> {
    backend: &'s mut dyn Backend,
    pub(crate) state: &'s mut State,
    pending: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Segments dropped by this transaction: `[lowest dropped, lowest live)`.
    dropped: Option<(i64, i64)>,
    stream_time_changed: bool,
    /// Accepted writes, in order, when the store records a changelog.
    pub(crate) log: Option<Vec<ChangelogRecord>>,
}

impl<'s> Txn<'s> {
    pub(crate) fn begin(backend: &'s mut dyn Backend, state: &'s mut State) -> Self {
        Self {
            backend,
            state,
            pending: HashMap::new(),
            dropped: None,
            stream_time_changed: false,
            log: None,
        }
    }

    /// Stages a write (`None` deletes). A row in a history segment registers that segment.
    pub(crate) fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        if let Some(segment) = segment_of(&key).filter(|&s| s >= 0 && value.is_some()) {
            self.state.segments.insert(segment);
        }
        self.pending.insert(key, value);
    }

    /// Advances observed stream time and drops the segments it expires (Kafka: once per
    /// accepted write, with the new stream time).
    pub(crate) fn advance_stream_time(&mut self, timestamp: i64) {
        if timestamp <= self.state.stream_time {
            return;
        }
        self.state.stream_time = timestamp;
        self.stream_time_changed = true;
        let config = self.state.config;
        let horizon = timestamp.saturating_sub(config.history_retention_ms());
        let lowest_live = config.segment_id(horizon);
        if let Some(lowest_dropped) = self.state.segments.drop_below(lowest_live) {
            let from = self
                .dropped
                .map_or(lowest_dropped, |(from, _)| from.min(lowest_dropped));
            self.dropped = Some((from, lowest_live));
        }
    }

    fn is_dropped(&self, key: &[u8]) -> bool {
        match (self.dropped, segment_of(key)) {
            (Some((from, to)), Some(segment)) => (from..to).contains(&segment),
            _ => false,
        }
    }

    /// Applies everything atomically and returns the accepted writes it logged. On error
    /// nothing was written; the caller reloads state.
    pub(crate) fn commit(self) -> Result<Option<Vec<ChangelogRecord>>> {
        let dropped = self.dropped;
        let mut writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .pending
            .into_iter()
            .filter(|(key, _)| match (dropped, segment_of(key)) {
                (Some((from, to)), Some(segment)) => !(from..to).contains(&segment),
                _ => true,
            })
            .collect();
        if self.stream_time_changed {
            writes.push((
                storage_key(META_SEGMENT, meta::STREAM_TIME_KEY),
                Some(meta::encode_stream_time(self.state.stream_time)),
            ));
        }
        if !writes.is_empty() || dropped.is_some() {
            self.backend.write(WriteSet {
                drop_segments: dropped,
                writes,
            })?;
        }
        Ok(self.log)
    }
}

impl ReadClient for Txn<'_> {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.pending.get(key) {
            return Ok(value.clone());
        }
        if self.is_dropped(key) {
            return Ok(None);
        }
        self.backend.get(key)
    }

    fn location(&self) -> String {
        self.backend.location()
    }
}
