//! Reads: latest, point-in-time (as-of) and multi-version queries.
//!
//! All reads share one rule for the *horizon* `H = ST − R`: a query whose upper bound is below
//! `H` is "expired" and sees only the newest version, and only if it is a value at or before the
//! bound (Kafka's latest-value exception, KAFKA-14491 [18/N]); the latest value never expires.
//! Otherwise a point read walks the live segments newest first down to the segment of its
//! bound, and `versions()` walks *every* live segment (Kafka bug Q2: a version valid at `to` may
//! be stored in a later segment, since rows are placed by valid-to), stopping at the first row
//! that ends at or before `from`.

use crate::client::{ReadClient, State};
use crate::error::Result;
use crate::format::key::{LATEST_SEGMENT, storage_key};
use crate::format::{latest_value, segment_value::SegmentRow};
use crate::record::VersionedRecord;

/// Order of `versions()` results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultOrder {
    /// Newest first (Kafka's effective order for `ANY`).
    #[default]
    Descending,
    /// Oldest first.
    Ascending,
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

/// The newest version if it is a value.
pub(crate) fn latest(
    client: &(impl ReadClient + ?Sized),
    key: &[u8],
) -> Result<Option<VersionedRecord>> {
    let Some(bytes) = client.read(&storage_key(LATEST_SEGMENT, key))? else {
        return Ok(None);
    };
    let (timestamp, value) = latest_value::decode(&bytes)?;
    Ok(Some(VersionedRecord {
        value: value.to_vec(),
        timestamp,
        valid_to: None,
    }))
}

fn horizon(state: &State) -> i64 {
    state
        .stream_time
        .saturating_sub(state.config.history_retention_ms())
}

/// The record valid at `as_of` (inclusive), under the retention rule.
pub(crate) fn as_of(
    client: &(impl ReadClient + ?Sized),
    state: &State,
    key: &[u8],
    as_of: i64,
) -> Result<Option<VersionedRecord>> {
    if let Some(record) = latest(client, key)?.filter(|r| r.timestamp <= as_of) {
        return Ok(Some(record));
    }
    if as_of < horizon(state) {
        return Ok(None);
    }
    let lowest = state.config.segment_id(as_of);
    for segment in state.segments.newest_first_from(lowest.max(0)) {
        let Some(bytes) = client.read(&storage_key(segment, key))? else {
            continue;
        };
        let row = SegmentRow::decode(&bytes, &|| row_location(client, segment, key))?;
        if row.min_timestamp() > as_of {
            continue;
        }
        if row.next_timestamp() <= as_of {
            return Ok(None);
        }
        let Some(index) = row.find(as_of) else {
            return Ok(None);
        };
        let entry = row.entries()[index];
        return Ok(entry.value.map(|value| VersionedRecord {
            value: value.to_vec(),
            timestamp: entry.timestamp,
            valid_to: Some(row.valid_to(index)),
        }));
    }
    Ok(None)
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
    let mut out = Vec::new();
    if let Some(record) = latest(client, key)?.filter(|r| r.timestamp <= to) {
        out.push(record);
    }
    if to >= horizon(state) {
        for segment in state.segments.newest_first() {
            let Some(bytes) = client.read(&storage_key(segment, key))? else {
                continue;
            };
            let row = SegmentRow::decode(&bytes, &|| row_location(client, segment, key))?;
            if row.next_timestamp() <= from {
                break;
            }
            for (index, entry) in row.entries().iter().enumerate() {
                let valid_to = row.valid_to(index);
                if let Some(value) = entry
                    .value
                    .filter(|_| entry.timestamp <= to && valid_to > from)
                {
                    out.push(VersionedRecord {
                        value: value.to_vec(),
                        timestamp: entry.timestamp,
                        valid_to: Some(valid_to),
                    });
                }
            }
        }
    }
    if order == ResultOrder::Ascending {
        out.reverse();
    }
    Ok(out)
}
