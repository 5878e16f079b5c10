//! The store's behaviour suite.
//!
//! * Kafka's `RocksDBVersionedStoreTest`, ported case by case (history retention 300 000, segment
//!   interval 100 000, as Kafka's test uses); the restore cases run through `put_batch`.
//! * The fixes of SEMANTICS §6 (Q1: a tombstone that replaces the latest value keeps bounding
//!   older writes; Q2: `versions()` finds versions stored in a later segment) and the edge cases
//!   of §8 (boundaries, latest value never expires, degenerate rows, segment-granular expiry).
//! * Physical layout checks of the row moves of §3.5 step 2.
//! * Persistence: reopen keeps data, stream time, grace decisions and history; configuration and
//!   lock checks; corrupted rows are reported, not panicked on.
//! * Proptest: both backends against a small reference model of the documented semantics, and
//!   batches against loops of single writes.
//!
//! Every example-based case runs against both backends ([`on_both_backends`]).

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::*;
use crate::format::key::{LATEST_SEGMENT, segment_of, storage_key};
use crate::format::segment_value::SegmentRow;
use crate::record::{NOT_PUT, VALID_TO_UNDEFINED};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// Kafka's `RocksDBVersionedStoreTest` constants.
const HISTORY_RETENTION: i64 = 300_000;
const GRACE_PERIOD: i64 = HISTORY_RETENTION;
const SEGMENT_INTERVAL: i64 = HISTORY_RETENTION / 3;
const SI: i64 = SEGMENT_INTERVAL;
const BASE: i64 = 10;

/// Kafka's "valid-to undefined" (`-1`): the record is the newest version.
const U: i64 = VALID_TO_UNDEFINED;
const DESC: ResultOrder = ResultOrder::Descending;
const ASC: ResultOrder = ResultOrder::Ascending;

fn config(history_retention_ms: i64, segment_interval_ms: i64) -> StoreConfig {
    StoreConfig::new(history_retention_ms, Some(segment_interval_ms)).expect("valid config")
}

fn kafka_config() -> StoreConfig {
    config(HISTORY_RETENTION, SEGMENT_INTERVAL)
}

/// A record as Kafka's test spells it: `valid_to == -1` means "newest version".
fn record(value: &str, timestamp: i64, valid_to: i64) -> VersionedRecord {
    VersionedRecord {
        value: value.as_bytes().to_vec(),
        timestamp,
        valid_to: (valid_to != U).then_some(valid_to),
    }
}

/// A physical segment row: `(next_timestamp, [(timestamp, value)])`, newest entry first.
type Row = (i64, Vec<(i64, Option<Vec<u8>>)>);
/// An expected row as tests spell it: `(next_timestamp, [(timestamp, value)])`.
type RowSpec<'a> = (i64, &'a [(i64, Option<&'a str>)]);
/// A put as `put_batch` takes it.
type PutRow<'a> = (&'a [u8], Option<&'a [u8]>, i64);

/// One store under test plus the name of its backend, for failure messages.
struct Check {
    store: VersionedStore,
    backend: &'static str,
}

impl Check {
    #[track_caller]
    fn put(&mut self, key: &str, value: Option<&str>, timestamp: i64, expected: i64) {
        let outcome = self
            .store
            .put(key.as_bytes(), value.map(str::as_bytes), timestamp)
            .expect("put");
        assert_eq!(
            outcome.code(),
            expected,
            "[{}] put({key:?}, {value:?}, {timestamp})",
            self.backend
        );
    }

    #[track_caller]
    fn put_batch(&mut self, rows: &[(&str, Option<&str>, i64)], expected: &[i64]) {
        let codes: Vec<i64> = self
            .store
            .put_batch(
                rows.iter()
                    .map(|&(k, v, t)| (k.as_bytes(), v.map(str::as_bytes), t)),
            )
            .expect("put_batch")
            .into_iter()
            .map(PutOutcome::code)
            .collect();
        assert_eq!(codes, expected, "[{}] put_batch({rows:?})", self.backend);
    }

    #[track_caller]
    fn delete(&mut self, key: &str, timestamp: i64) -> Option<VersionedRecord> {
        self.store
            .delete(key.as_bytes(), timestamp)
            .expect("delete")
    }

    #[track_caller]
    fn get_value(&self, key: &str, value: &str, timestamp: i64) {
        let actual = self.store.get(key.as_bytes()).expect("get");
        assert_eq!(
            actual,
            Some(record(value, timestamp, U)),
            "[{}] get({key:?})",
            self.backend
        );
    }

    #[track_caller]
    fn get_null(&self, key: &str) {
        let actual = self.store.get(key.as_bytes()).expect("get");
        assert_eq!(actual, None, "[{}] get({key:?})", self.backend);
    }

    #[track_caller]
    fn as_of_value(&self, key: &str, as_of: i64, value: &str, timestamp: i64, valid_to: i64) {
        let actual = self
            .store
            .get_as_of(key.as_bytes(), as_of)
            .expect("get_as_of");
        assert_eq!(
            actual,
            Some(record(value, timestamp, valid_to)),
            "[{}] get_as_of({key:?}, {as_of})",
            self.backend
        );
    }

    #[track_caller]
    fn as_of_null(&self, key: &str, as_of: i64) {
        let actual = self
            .store
            .get_as_of(key.as_bytes(), as_of)
            .expect("get_as_of");
        assert_eq!(
            actual, None,
            "[{}] get_as_of({key:?}, {as_of})",
            self.backend
        );
    }

    #[track_caller]
    fn versions(
        &self,
        key: &str,
        from: Option<i64>,
        to: Option<i64>,
        order: ResultOrder,
        expected: &[(&str, i64, i64)],
    ) {
        let actual = self
            .store
            .versions(key.as_bytes(), from, to, order)
            .expect("versions");
        let expected: Vec<VersionedRecord> = expected
            .iter()
            .map(|&(value, timestamp, valid_to)| record(value, timestamp, valid_to))
            .collect();
        assert_eq!(
            actual, expected,
            "[{}] versions({key:?}, {from:?}, {to:?}, {order:?})",
            self.backend
        );
    }

    #[track_caller]
    fn versions_empty(&self, key: &str, from: i64, to: i64) {
        self.versions(key, Some(from), Some(to), DESC, &[]);
    }

    /// The decoded row of `key` in `segment`, read straight from the backend.
    fn row(&self, segment: i64, key: &str) -> Option<Row> {
        let bytes = self
            .store
            .backend
            .get(&storage_key(segment, key.as_bytes()))
            .expect("backend get")?;
        let row =
            SegmentRow::decode(&bytes, &|| format!("segment {segment}")).expect("row decodes");
        let entries = row
            .entries()
            .iter()
            .map(|e| (e.timestamp, e.value.map(<[u8]>::to_vec)))
            .collect();
        Some((row.next_timestamp(), entries))
    }

    #[track_caller]
    fn assert_row(&self, segment: i64, key: &str, expected: Option<RowSpec<'_>>) {
        let expected: Option<Row> = expected.map(|(next, entries)| {
            let entries = entries
                .iter()
                .map(|&(t, v)| (t, v.map(|v| v.as_bytes().to_vec())))
                .collect();
            (next, entries)
        });
        assert_eq!(
            self.row(segment, key),
            expected,
            "[{}] row of {key:?} in segment {segment}",
            self.backend
        );
    }

    /// Whether the latest-value store holds an entry for `key`.
    fn has_latest(&self, key: &str) -> bool {
        self.store
            .backend
            .get(&storage_key(LATEST_SEGMENT, key.as_bytes()))
            .expect("backend get")
            .is_some()
    }
}

/// Runs `test` against an in-memory store and against a fresh persistent store.
fn on_both_backends(config: StoreConfig, test: impl Fn(&mut Check)) {
    let mut check = Check {
        store: VersionedStore::in_memory(config),
        backend: "in-memory",
    };
    test(&mut check);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut check = Check {
        store: VersionedStore::open(dir.path(), config).expect("open"),
        backend: "rocksdb",
    };
    test(&mut check);
}

// ---------------------------------------------------------------------------------------------
// Kafka's RocksDBVersionedStoreTest
// ---------------------------------------------------------------------------------------------

#[test]
fn put_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), BASE, U);
        s.put("k", Some("v2"), BASE + 1, U);

        s.get_value("k", "v2", BASE + 1);
        s.as_of_value("k", BASE, "v", BASE, BASE + 1);
        s.as_of_value("k", BASE + 1, "v2", BASE + 1, U);
        s.as_of_value("k", BASE + 2, "v2", BASE + 1, U);
    });
}

#[test]
fn put_null_as_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, BASE, U);
        s.put("k", None, BASE + 1, U);

        s.get_null("k");
        s.as_of_null("k", BASE);
        s.as_of_null("k", BASE + 1);
        s.as_of_null("k", BASE + 2);
    });
}

#[test]
fn put_older_with_non_null_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), BASE, U);
        s.put("k", Some("v2"), BASE - 2, BASE);
        s.put("k", Some("v1"), BASE - 1, BASE);
        s.put("k", Some("v4"), BASE - 4, BASE - 2);

        s.get_value("k", "v", BASE);
        s.as_of_value("k", BASE, "v", BASE, U);
        s.as_of_value("k", BASE - 1, "v1", BASE - 1, BASE);
        s.as_of_value("k", BASE - 2, "v2", BASE - 2, BASE - 1);
        s.as_of_value("k", BASE - 3, "v4", BASE - 4, BASE - 2);
    });
}

#[test]
fn put_older_with_null_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, BASE, U);
        s.put("k", Some("v2"), BASE - 2, BASE);
        s.put("k", Some("v1"), BASE - 1, BASE);
        s.put("k", Some("v4"), BASE - 4, BASE - 2);

        s.get_null("k");
        s.as_of_null("k", BASE);
        s.as_of_value("k", BASE - 1, "v1", BASE - 1, BASE);
        s.as_of_value("k", BASE - 2, "v2", BASE - 2, BASE - 1);
        s.as_of_value("k", BASE - 3, "v4", BASE - 4, BASE - 2);
    });
}

#[test]
fn put_older_null_with_non_null_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), BASE, U);
        s.put("k", None, BASE - 2, BASE);
        s.put("k", None, BASE - 1, BASE);
        s.put("k", None, BASE - 4, BASE - 2);
        s.put("k", Some("v5"), BASE - 5, BASE - 4);
        s.put("k", Some("v3"), BASE - 3, BASE - 2);
        s.put("k", None, BASE - 6, BASE - 5);

        s.get_value("k", "v", BASE);
        s.as_of_value("k", BASE, "v", BASE, U);
        s.as_of_null("k", BASE - 1);
        s.as_of_null("k", BASE - 2);
        s.as_of_value("k", BASE - 3, "v3", BASE - 3, BASE - 2);
        s.as_of_null("k", BASE - 4);
        s.as_of_value("k", BASE - 5, "v5", BASE - 5, BASE - 4);
        s.as_of_null("k", BASE - 6);
    });
}

#[test]
fn put_older_null_with_null_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, BASE, U);
        s.put("k", None, BASE - 2, BASE);
        s.put("k", None, BASE - 1, BASE);
        s.put("k", None, BASE - 4, BASE - 2);
        s.put("k", Some("v3"), BASE - 3, BASE - 2);
        s.put("k", Some("v5"), BASE - 5, BASE - 4);
        s.put("k", None, BASE - 6, BASE - 5);

        s.get_null("k");
        s.as_of_null("k", BASE);
        s.as_of_null("k", BASE - 1);
        s.as_of_null("k", BASE - 2);
        s.as_of_value("k", BASE - 3, "v3", BASE - 3, BASE - 2);
        s.as_of_null("k", BASE - 4);
        s.as_of_value("k", BASE - 5, "v5", BASE - 5, BASE - 4);
        s.as_of_null("k", BASE - 6);
    });
}

#[test]
fn put_repeat_timestamp_as_latest() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("to_be_replaced"), BASE, U);
        s.put("k", Some("b"), BASE, U);

        s.get_value("k", "b", BASE);
        s.as_of_value("k", BASE, "b", BASE, U);
        s.as_of_null("k", BASE - 1);

        s.put("k", None, BASE, U);

        s.get_null("k");
        s.as_of_null("k", BASE);
        s.as_of_null("k", BASE - 1);

        s.put("k", None, BASE, U);

        s.get_null("k");
        s.as_of_null("k", BASE);
        s.as_of_null("k", BASE - 1);

        s.put("k", Some("b"), BASE, U);

        s.get_value("k", "b", BASE);
        s.as_of_value("k", BASE, "b", BASE, U);
        s.as_of_null("k", BASE - 1);
    });
}

#[test]
fn put_repeat_timestamps() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("to_be_replaced"), SI + 20, U);
        s.put("k", None, SI - 10, SI + 20);
        // replace a tombstone by a value, with timestamps spanning segments
        s.put("k", Some("to_be_replaced"), SI - 10, SI + 20);
        // replace a value by a tombstone
        s.put("k", None, SI - 10, SI + 20);
        s.put("k", Some("to_be_replaced"), SI - 1, SI + 20);
        s.put("k", Some("to_be_replaced"), SI + 1, SI + 20);
        s.put("k", None, SI - 1, SI + 1);
        // replace a value by a tombstone, with timestamps spanning segments
        s.put("k", None, SI + 1, SI + 20);
        s.put("k", None, SI + 10, SI + 20);
        s.put("k", None, SI + 5, SI + 10);
        s.put("k", Some("vp5"), SI + 5, SI + 10);
        s.put("k", Some("to_be_replaced"), SI - 5, SI - 1);
        s.put("k", Some("vn5"), SI - 5, SI - 1);
        // replace the latest value by a tombstone, then that tombstone by another
        s.put("k", None, SI + 20, U);
        s.put("k", None, SI + 20, U);
        s.put("k", Some("vn6"), SI - 6, SI - 5);

        s.get_null("k");
        s.as_of_null("k", SI + 30);
        s.as_of_null("k", SI + 15);
        s.as_of_value("k", SI + 6, "vp5", SI + 5, SI + 10);
        s.as_of_null("k", SI + 2);
        s.as_of_null("k", SI);
        s.as_of_null("k", SI - 1);
        s.as_of_value("k", SI - 5, "vn5", SI - 5, SI - 1);
        s.as_of_value("k", SI - 6, "vn6", SI - 6, SI - 5);
        s.as_of_null("k", SI - 8);
    });
}

#[test]
fn put_into_multiple_segments() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, SI - 20, U);
        s.put("k", Some("vn10"), SI - 10, U);
        s.put("k", None, SI - 1, U);
        s.put("k", None, SI + 1, U);
        s.put("k", Some("vp10"), SI + 10, U);
        s.put("k", None, SI + 20, U);

        s.get_null("k");
        s.as_of_null("k", SI + 30);
        s.as_of_value("k", SI + 15, "vp10", SI + 10, SI + 20);
        s.as_of_null("k", SI + 5);
        s.as_of_null("k", SI + 2);
        s.as_of_null("k", SI);
        s.as_of_null("k", SI - 1);
        s.as_of_value("k", SI - 5, "vn10", SI - 10, SI - 1);
        s.as_of_null("k", SI - 15);
    });
}

/// Reads shared by the move test and its `put_batch` (restore) twin.
fn assert_moved_records(s: &Check) {
    s.get_value("k", "vp20", SI + 20);
    s.as_of_value("k", SI + 30, "vp20", SI + 20, U);
    s.as_of_value("k", SI + 15, "vp10", SI + 10, SI + 20);
    s.as_of_value("k", SI + 5, "vp1", SI + 1, SI + 10);
    s.as_of_value("k", SI, "vn1", SI - 1, SI + 1);
    s.as_of_value("k", SI - 1, "vn1", SI - 1, SI + 1);
    s.as_of_value("k", SI - 2, "vn2", SI - 2, SI - 1);
    s.as_of_value("k", SI - 5, "vn10", SI - 10, SI - 2);
}

#[test]
fn move_record_to_older_segment_during_put() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("vp20"), SI + 20, U);
        s.put("k", Some("vp10"), SI + 10, SI + 20);
        s.put("k", Some("vn10"), SI - 10, SI + 10);
        s.put("k", Some("vn2"), SI - 2, SI + 10);
        s.put("k", Some("vn1"), SI - 1, SI + 10);
        s.put("k", Some("vp1"), SI + 1, SI + 10);

        assert_moved_records(s);
    });
}

/// Reads shared by the move-with-nulls test and its `put_batch` (restore) twin.
fn assert_moved_records_with_nulls(s: &Check) {
    s.get_null("k");
    s.as_of_null("k", SI + 30);
    s.as_of_null("k", SI + 15);
    s.as_of_value("k", SI + 6, "vp5", SI + 5, SI + 10);
    s.as_of_null("k", SI + 2);
    s.as_of_null("k", SI);
    s.as_of_null("k", SI - 1);
    s.as_of_value("k", SI - 5, "vn5", SI - 5, SI - 1);
    s.as_of_value("k", SI - 6, "vn6", SI - 6, SI - 5);
    s.as_of_null("k", SI - 8);
}

#[test]
fn move_record_to_older_segment_with_nulls_during_put() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, SI + 20, U);
        s.put("k", None, SI - 1, SI + 20);
        s.put("k", None, SI + 1, SI + 20);
        s.put("k", None, SI - 10, SI - 1);
        s.put("k", None, SI + 10, SI + 20);
        s.put("k", Some("vp5"), SI + 5, SI + 10);
        s.put("k", Some("vn5"), SI - 5, SI - 1);
        s.put("k", Some("vn6"), SI - 6, SI - 5);

        assert_moved_records_with_nulls(s);
    });
}

#[test]
fn fall_through_to_existing_older_segment_as_latest_during_put() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, SI - 5, U);
        s.put("k", Some("vn6"), SI - 6, SI - 5);
        s.put("k", Some("vp20"), SI + 20, U);
        s.put("k", None, SI + 10, SI + 20);
        s.put("k", None, SI - 1, SI + 10);
        s.put("k", Some("vn2"), SI - 2, SI - 1);

        s.get_value("k", "vp20", SI + 20);
        s.as_of_value("k", SI + 30, "vp20", SI + 20, U);
        s.as_of_null("k", SI + 12);
        s.as_of_null("k", SI);
        s.as_of_null("k", SI - 1);
        s.as_of_value("k", SI - 2, "vn2", SI - 2, SI - 1);
        s.as_of_null("k", SI - 5);
        s.as_of_value("k", SI - 6, "vn6", SI - 6, SI - 5);
    });
}

#[test]
fn put_non_latest_tombstone_into_new_segment_with_valid_to() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("vp30"), SI + 30, U);
        // a tombstone with valid-to SI + 30
        s.put("k", None, SI - 10, SI + 30);
        s.put("k", Some("vn5"), SI - 5, SI + 30);
        s.put("k", Some("vn1"), SI - 1, SI + 30);
        s.put("k", None, SI - 2, SI - 1);

        s.get_value("k", "vp30", SI + 30);
        s.as_of_value("k", SI + 10, "vn1", SI - 1, SI + 30);
        s.as_of_value("k", SI - 1, "vn1", SI - 1, SI + 30);
        s.as_of_null("k", SI - 2);
        s.as_of_value("k", SI - 5, "vn5", SI - 5, SI - 2);
        s.as_of_null("k", SI - 10);
    });
}

#[test]
fn delete_returns_the_record_valid_before_the_delete() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("vp20"), SI + 20, U);
        s.put("k", Some("vp10"), SI + 10, SI + 20);
        s.put("k", Some("vn10"), SI - 10, SI + 10);
        s.put("k", Some("vn2"), SI - 2, SI + 10);

        // delete inside a segment: the returned valid-to is the pre-delete one
        assert_eq!(s.delete("k", SI - 5), Some(record("vn10", SI - 10, SI - 2)));
        // delete at an existing timestamp
        assert_eq!(
            s.delete("k", SI + 10),
            Some(record("vp10", SI + 10, SI + 20))
        );
        // the same timestamp again: nothing valid there any more
        assert_eq!(s.delete("k", SI + 10), None);
        // delete from the latest-value store
        assert_eq!(s.delete("k", SI + 25), Some(record("vp20", SI + 20, U)));

        s.get_null("k");
        s.as_of_value("k", SI - 6, "vn10", SI - 10, SI - 5);
        s.as_of_null("k", SI - 5);
        s.as_of_value("k", SI - 1, "vn2", SI - 2, SI + 10);
        s.as_of_null("k", SI + 10);
        s.as_of_value("k", SI + 24, "vp20", SI + 20, SI + 25);
        s.as_of_null("k", SI + 25);
    });
}

#[test]
fn not_put_expired() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), HISTORY_RETENTION + 10, U);

        // grace period has not elapsed
        s.put("k1", Some("v1"), HISTORY_RETENTION + 10 - GRACE_PERIOD, U);
        s.get_value("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD);

        // grace period has elapsed, so this put does not take place
        s.put(
            "k2",
            Some("v2"),
            HISTORY_RETENTION + 9 - GRACE_PERIOD,
            NOT_PUT,
        );
        s.get_null("k2");
        assert_eq!(s.store.observed_stream_time(), HISTORY_RETENTION + 10);
    });
}

#[test]
fn not_delete_expired() {
    on_both_backends(kafka_config(), |s| {
        s.put("k1", Some("v1"), 1, U);
        s.put("k2", Some("v2"), 1, U);
        // a separate key advances stream time
        s.put("kother", Some("vother"), HISTORY_RETENTION + 10, U);

        // grace period has not elapsed
        let deleted = s.delete("k1", HISTORY_RETENTION + 10 - GRACE_PERIOD);
        assert_eq!(deleted, Some(record("v1", 1, U)));
        s.get_null("k1");

        // grace period has elapsed: nothing is returned although the record exists
        let deleted = s.delete("k2", HISTORY_RETENTION + 9 - GRACE_PERIOD);
        assert_eq!(deleted, None);
        s.get_value("k2", "v2", 1);
    });
}

#[test]
fn get_from_older_segments() {
    on_both_backends(kafka_config(), |s| {
        // another key creates three segments
        s.put("ko", None, SI - 10, U);
        s.put("ko", None, 2 * SI - 10, U);
        s.put("ko", None, 3 * SI - 10, U);

        // null after visiting every segment
        s.as_of_null("k", SI - 20);

        // data in the first segment
        s.put("k", Some("v"), SI - 20, U);
        s.put("k", None, SI - 10, U);

        s.as_of_null("k", SI - 30);
        s.as_of_value("k", SI - 15, "v", SI - 20, SI - 10);
        s.as_of_null("k", SI - 5);

        // data in the third segment
        s.put("k", Some("v2"), 3 * SI - 20, U);
        s.put("k", None, 3 * SI - 10, U);

        // a non-empty later segment does not change reads from an earlier one
        s.as_of_null("k", SI - 30);
        s.as_of_value("k", SI - 15, "v", SI - 20, SI - 10);
        s.as_of_null("k", SI - 5);
    });
}

#[test]
fn not_get_expired() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v_old"), 0, U);
        s.put("k", Some("v"), SI - 10, U);

        // old record has not yet expired
        s.as_of_value("k", SI - 11, "v_old", 0, SI - 10);

        s.put("ko", Some("vo"), HISTORY_RETENTION + SI - 11, U);

        // old record still has not yet expired (as_of == ST - R)
        s.as_of_value("k", SI - 11, "v_old", 0, SI - 10);

        s.put("ko", Some("vo2"), HISTORY_RETENTION + SI - 10, U);

        // old record is expired now
        s.as_of_null("k", SI - 11);
    });
}

#[test]
fn get_expired_if_latest_value() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 1, U);
        s.put("ko", Some("vo_old"), 1, U);
        s.put("ko", Some("vo_new"), HISTORY_RETENTION + 12, U);

        // an expired get still returns the latest value when it satisfies the bound
        s.as_of_value("k", 10, "v", 1, U);
        // but not when the latest value is newer than the bound
        s.as_of_null("ko", 10);
    });
}

#[test]
fn distinguish_empty_and_null() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", None, SI + 20, U);
        s.put("k", None, SI - 10, SI + 20);
        s.put("k", None, SI - 1, SI + 20);
        s.put("k", None, SI + 1, SI + 20);
        s.put("k", None, SI + 10, SI + 20);
        // an empty value is an ordinary value, not a tombstone
        s.put("k", Some(""), SI + 5, SI + 10);
        s.put("k", Some(""), SI - 5, SI - 1);
        s.put("k", Some(""), SI - 6, SI - 5);

        s.get_null("k");
        s.as_of_null("k", SI + 30);
        s.as_of_null("k", SI + 15);
        s.as_of_value("k", SI + 6, "", SI + 5, SI + 10);
        s.as_of_null("k", SI + 2);
        s.as_of_null("k", SI);
        s.as_of_null("k", SI - 1);
        s.as_of_value("k", SI - 5, "", SI - 5, SI - 1);
        s.as_of_value("k", SI - 6, "", SI - 6, SI - 5);
        s.as_of_null("k", SI - 8);
        s.versions(
            "k",
            None,
            None,
            DESC,
            &[
                ("", SI + 5, SI + 10),
                ("", SI - 5, SI - 1),
                ("", SI - 6, SI - 5),
            ],
        );
    });
}

#[test]
fn get_record_versions_from_older_segments() {
    on_both_backends(kafka_config(), |s| {
        // another key creates three segments
        s.put("ko", None, SI - 10, U);
        s.put("ko", None, 2 * SI - 10, U);
        s.put("ko", None, 3 * SI - 10, U);

        // nothing after visiting every segment (the key does not exist)
        s.versions_empty("k", SI - 20, SI);

        // data in the first segment
        s.put("k", Some("v1"), SI - 30, U);
        s.put("k", Some("v2"), SI - 25, U);
        s.put("k", None, SI - 20, U);
        s.put("k", None, SI - 15, U);
        s.put("k", Some("v3"), SI - 10, U);
        s.put("k", Some("v4"), SI - 5, U);

        let all = [
            ("v4", SI - 5, U),
            ("v3", SI - 10, SI - 5),
            ("v2", SI - 25, SI - 20),
            ("v1", SI - 30, SI - 25),
        ];
        // a range before any value
        s.versions_empty("k", SI - 40, SI - 35);
        // a range in which every value is valid, across several tombstones
        s.versions("k", Some(SI - 30), Some(SI - 5), DESC, &all);
        // (MIN, MAX), explicit and as missing bounds
        s.versions("k", Some(i64::MIN), Some(i64::MAX), DESC, &all);
        s.versions("k", None, None, DESC, &all);
        // only the latest value
        s.versions("k", Some(SI - 4), Some(SI), DESC, &[("v4", SI - 5, U)]);
        // from == to
        s.versions("k", Some(SI - 5), Some(SI - 5), DESC, &[("v4", SI - 5, U)]);
        s.versions("k", Some(SI - 4), Some(SI - 4), DESC, &[("v4", SI - 5, U)]);
        // before the first tombstone
        s.versions("k", Some(SI - 31), Some(SI - 21), DESC, &all[2..]);
        // a range covering both tombstones
        s.versions(
            "k",
            Some(SI - 24),
            Some(SI - 11),
            DESC,
            &[("v2", SI - 25, SI - 20)],
        );
        // after the tombstones
        s.versions("k", Some(SI - 11), Some(SI - 4), DESC, &all[..2]);
        // values valid during the range although written before it
        s.versions("k", Some(SI - 26), Some(SI - 5), DESC, &all);
        // a value whose valid-from equals the upper bound
        s.versions(
            "k",
            Some(SI - 15),
            Some(SI - 10),
            DESC,
            &[("v3", SI - 10, SI - 5)],
        );
        // no value valid in the range
        s.versions_empty("k", SI - 19, SI - 16);

        // data in the third segment
        s.put("k", Some("v5"), 3 * SI - 30, U);
        s.put("k", None, 3 * SI - 20, U);

        // a non-empty later segment does not change results from an earlier one
        s.versions_empty("k", SI - 40, SI - 35);
        s.versions(
            "k",
            Some(SI - 30),
            Some(SI - 26),
            DESC,
            &[("v1", SI - 30, SI - 25)],
        );
        s.versions_empty("k", SI - 19, SI - 16);
    });
}

#[test]
fn get_record_versions_in_ascending_order() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v1"), SI - 30, U);
        s.put("k", Some("v2"), SI - 25, U);
        s.put("k", Some("v3"), SI - 10, U);
        s.put("k", Some("v4"), SI - 5, U);

        s.versions(
            "k",
            Some(SI - 30),
            Some(SI - 5),
            ASC,
            &[
                ("v1", SI - 30, SI - 25),
                ("v2", SI - 25, SI - 10),
                ("v3", SI - 10, SI - 5),
                ("v4", SI - 5, U),
            ],
        );
    });
}

#[test]
fn get_record_versions_from_multiple_old_segments_in_ascending_order() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v1"), SI - 10, U);
        s.put("k", Some("v2"), SI - 5, U);
        s.put("k", Some("v3"), 2 * SI - 10, U);
        s.put("k", Some("v4"), 2 * SI - 5, U);

        let ascending = [
            ("v1", SI - 10, SI - 5),
            ("v2", SI - 5, 2 * SI - 10),
            ("v3", 2 * SI - 10, 2 * SI - 5),
            ("v4", 2 * SI - 5, U),
        ];
        s.versions("k", Some(i64::MIN), Some(i64::MAX), ASC, &ascending);
        let mut descending = ascending;
        descending.reverse();
        s.versions("k", None, None, DESC, &descending);
    });
}

#[test]
fn not_get_expired_record_versions() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v_old"), 0, U);
        s.put("k", Some("v"), SI - 10, U);

        // old record has not yet expired
        s.versions("k", Some(0), Some(SI - 11), DESC, &[("v_old", 0, SI - 10)]);

        s.put("ko", Some("vo"), HISTORY_RETENTION + SI - 11, U);

        // old record still has not yet expired
        s.versions("k", Some(0), Some(SI - 11), DESC, &[("v_old", 0, SI - 10)]);

        s.put("ko", Some("vo2"), HISTORY_RETENTION + SI - 10, U);

        // old record is expired now
        s.versions_empty("k", 0, SI - 11);
    });
}

#[test]
fn get_expired_if_latest_version_value() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 1, U);
        s.put("ko", Some("vo_old"), 1, U);
        s.put("ko", Some("vo_new"), HISTORY_RETENTION + 12, U);

        // an expired query still returns the latest value when it satisfies the bound
        s.versions("k", Some(0), Some(10), DESC, &[("v", 1, U)]);
        // but not when the latest value is newer than the bound
        s.versions_empty("ko", 0, 10);
    });
}

// Kafka's restore cases: verstore has no changelog restore; a batch is the closest operation and
// must give the same result as the sequential puts.

#[test]
fn put_batch_restores_moved_records() {
    on_both_backends(kafka_config(), |s| {
        s.put_batch(
            &[
                ("k", Some("vp20"), SI + 20),
                ("k", Some("vp10"), SI + 10),
                ("k", Some("vn10"), SI - 10),
                ("k", Some("vn2"), SI - 2),
                ("k", Some("vn1"), SI - 1),
                ("k", Some("vp1"), SI + 1),
            ],
            &[U, SI + 20, SI + 10, SI + 10, SI + 10, SI + 10],
        );
        assert_moved_records(s);
    });
}

#[test]
fn put_batch_restores_with_nulls() {
    on_both_backends(kafka_config(), |s| {
        s.put_batch(
            &[
                ("k", None, SI + 20),
                ("k", None, SI - 1),
                ("k", None, SI + 1),
                ("k", None, SI - 10),
                ("k", None, SI + 10),
                ("k", Some("vp5"), SI + 5),
                ("k", Some("vn5"), SI - 5),
                ("k", Some("vn6"), SI - 6),
            ],
            &[
                U,
                SI + 20,
                SI + 20,
                SI - 1,
                SI + 20,
                SI + 10,
                SI - 1,
                SI - 5,
            ],
        );
        assert_moved_records_with_nulls(s);
    });
}

#[test]
fn put_batch_restores_with_nulls_and_repeat_timestamps() {
    on_both_backends(kafka_config(), |s| {
        let r = Some("to_be_replaced");
        s.put_batch(
            &[
                ("k", r, SI + 20),
                ("k", None, SI - 10),
                ("k", r, SI - 10),
                ("k", None, SI - 10),
                ("k", r, SI - 1),
                ("k", r, SI + 1),
                ("k", None, SI - 1),
                ("k", None, SI + 1),
                ("k", None, SI + 10),
                ("k", None, SI + 5),
                ("k", Some("vp5"), SI + 5),
                ("k", r, SI - 5),
                ("k", Some("vn5"), SI - 5),
                ("k", None, SI + 20),
                ("k", None, SI + 20),
                ("k", Some("vn6"), SI - 6),
            ],
            &[
                U,
                SI + 20,
                SI + 20,
                SI + 20,
                SI + 20,
                SI + 20,
                SI + 1,
                SI + 20,
                SI + 20,
                SI + 10,
                SI + 10,
                SI - 1,
                SI - 1,
                U,
                U,
                SI - 5,
            ],
        );
        assert_moved_records_with_nulls(s);
    });
}

#[test]
fn put_batch_restores_multiple_batches() {
    on_both_backends(kafka_config(), |s| {
        s.put_batch(
            &[
                ("k", None, SI - 20),
                ("k", Some("vn10"), SI - 10),
                ("k", None, SI - 1),
            ],
            &[U, U, U],
        );
        s.put_batch(
            &[
                ("k", None, SI + 1),
                ("k", Some("vp10"), SI + 10),
                ("k", None, SI + 20),
            ],
            &[U, U, U],
        );

        s.get_null("k");
        s.as_of_null("k", SI + 30);
        s.as_of_value("k", SI + 15, "vp10", SI + 10, SI + 20);
        s.as_of_null("k", SI + 5);
        s.as_of_null("k", SI + 2);
        s.as_of_null("k", SI);
        s.as_of_null("k", SI - 1);
        s.as_of_value("k", SI - 5, "vn10", SI - 10, SI - 1);
        s.as_of_null("k", SI - 15);
    });
}

#[test]
fn put_batch_does_not_restore_expired() {
    on_both_backends(kafka_config(), |s| {
        s.put_batch(
            &[
                ("k", Some("v"), HISTORY_RETENTION + 10),
                ("k1", Some("v1"), HISTORY_RETENTION + 10 - GRACE_PERIOD),
                ("k2", Some("v2"), HISTORY_RETENTION + 9 - GRACE_PERIOD),
            ],
            &[U, U, NOT_PUT],
        );
        s.get_value("k", "v", HISTORY_RETENTION + 10);
        s.get_value("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD);
        s.get_null("k2");
    });
}

#[test]
fn put_batch_keeps_a_record_that_later_rows_push_past_the_grace_period() {
    on_both_backends(kafka_config(), |s| {
        s.put_batch(
            &[
                ("k2", Some("v2"), HISTORY_RETENTION - GRACE_PERIOD),
                ("k", Some("v"), HISTORY_RETENTION + 10),
            ],
            &[U, U],
        );
        s.get_value("k2", "v2", HISTORY_RETENTION - GRACE_PERIOD);
        s.get_value("k", "v", HISTORY_RETENTION + 10);
    });
}

#[test]
fn allow_zero_history_retention() {
    on_both_backends(config(0, SEGMENT_INTERVAL), |s| {
        s.put("k", Some("v"), BASE, U);
        s.get_value("k", "v", BASE);
        s.as_of_value("k", BASE, "v", BASE, U);
        // a query in the "future" is allowed
        s.as_of_value("k", BASE + 1, "v", BASE, U);

        // replace at the same timestamp (ts == ST is accepted)
        s.put("k", Some("updated"), BASE, U);
        s.get_value("k", "updated", BASE);
        s.as_of_value("k", BASE, "updated", BASE, U);

        s.put("k", Some("v2"), BASE + 2, U);
        s.get_value("k", "v2", BASE + 2);
        s.as_of_value("k", BASE + 2, "v2", BASE + 2, U);

        // a query in the past (retention expired) returns nothing
        s.as_of_null("k", BASE + 1);

        assert_eq!(s.delete("k", BASE + 3), Some(record("v2", BASE + 2, U)));
        s.get_null("k");

        // a put in the past (grace period expired) does not update the store
        s.put("k2", Some("v"), BASE + 2, NOT_PUT);
        s.get_null("k2");

        // the old versions are still in their segment, visible through an open-ended query
        s.versions(
            "k",
            None,
            None,
            DESC,
            &[("v2", BASE + 2, BASE + 3), ("updated", BASE, BASE + 2)],
        );
    });
}

// ---------------------------------------------------------------------------------------------
// SEMANTICS §6: the fixed Kafka bugs
// ---------------------------------------------------------------------------------------------

/// Q1: Kafka just deletes the latest value, losing the tombstone; verstore keeps it.
#[test]
fn tombstone_replacing_latest_at_same_timestamp_bounds_older_writes() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 10, U);
        s.put("k", None, 10, U);
        s.put("k", Some("w"), 5, 10);

        s.get_null("k");
        s.as_of_null("k", 10);
        s.as_of_value("k", 7, "w", 5, 10);
        s.versions("k", None, None, DESC, &[("w", 5, 10)]);
        assert!(!s.has_latest("k"));
    });
}

#[test]
fn tombstone_replacing_latest_keeps_bounding_with_older_versions_present() {
    on_both_backends(kafka_config(), |s| {
        // previous version is a value
        s.put("a", Some("u"), 3, U);
        s.put("a", Some("v"), 10, U);
        s.put("a", None, 10, U);
        s.put("a", Some("w"), 5, 10);
        s.get_null("a");
        s.as_of_value("a", 4, "u", 3, 5);
        s.as_of_value("a", 9, "w", 5, 10);
        s.as_of_null("a", 10);

        // previous version is a tombstone
        s.put("b", None, 3, U);
        s.put("b", Some("v"), 10, U);
        s.put("b", None, 10, U);
        s.put("b", Some("w"), 5, 10);
        s.get_null("b");
        s.as_of_null("b", 4);
        s.as_of_value("b", 9, "w", 5, 10);

        // the tombstone is in a later segment than the older write
        s.put("c", Some("v"), SI + 10, U);
        s.put("c", None, SI + 10, U);
        s.put("c", Some("w"), 5, SI + 10);
        s.get_null("c");
        s.as_of_value("c", SI + 9, "w", 5, SI + 10);
        s.as_of_null("c", SI + 10);
    });
}

/// Q1 breaks order independence in Kafka; here both orders give the same reads.
#[test]
fn tombstone_at_latest_timestamp_gives_the_same_reads_in_any_order() {
    on_both_backends(kafka_config(), |s| {
        s.put("x", Some("v"), 10, U);
        s.put("x", None, 10, U);
        s.put("x", Some("w"), 5, 10);

        s.put("y", Some("w"), 5, U);
        s.put("y", Some("v"), 10, U);
        s.put("y", None, 10, U);

        for key in ["x", "y"] {
            s.get_null(key);
            s.as_of_null(key, 4);
            s.as_of_value(key, 5, "w", 5, 10);
            s.as_of_value(key, 9, "w", 5, 10);
            s.as_of_null(key, 10);
            s.versions(key, None, None, DESC, &[("w", 5, 10)]);
        }
    });
}

/// Q2: Kafka only scans segments up to `segment_id(to)`; a version valid at `to` can live in a
/// later segment because rows are placed by valid-to.
#[test]
fn versions_finds_a_version_stored_in_a_later_segment() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v1"), 10, U);
        s.put("k", Some("v2"), SI + 10, U);

        s.as_of_value("k", 50, "v1", 10, SI + 10);
        s.versions("k", Some(0), Some(50), DESC, &[("v1", 10, SI + 10)]);
        s.versions("k", Some(0), Some(50), ASC, &[("v1", 10, SI + 10)]);
        s.versions("k", Some(50), Some(50), DESC, &[("v1", 10, SI + 10)]);
        s.versions(
            "k",
            Some(0),
            Some(SI + 10),
            ASC,
            &[("v1", 10, SI + 10), ("v2", SI + 10, U)],
        );
        // the version is physically in segment 1, the segment of its valid-to
        s.assert_row(1, "k", Some((SI + 10, &[(10, Some("v1"))])));
        s.assert_row(0, "k", None);
    });
}

// ---------------------------------------------------------------------------------------------
// SEMANTICS §8: edge cases
// ---------------------------------------------------------------------------------------------

/// §8.3: `ST − R` itself is inside the grace period and the retention, one less is not.
#[test]
fn grace_and_retention_boundaries_are_inclusive_at_the_horizon() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("old", Some("o"), 100, U);
        s.put("k", Some("a"), 3_000, U);
        s.put("k", Some("b"), 4_500, U);
        s.put("other", Some("x"), 5_000, U);
        // H = 4 000
        s.put("late", Some("y"), 3_999, NOT_PUT);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        s.get_null("late");
        assert_eq!(s.delete("k", 3_999), None);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        s.get_value("k", "b", 4_500);

        s.as_of_value("k", 4_000, "a", 3_000, 4_500);
        s.as_of_null("k", 3_999);
        s.versions("k", None, Some(4_000), DESC, &[("a", 3_000, 4_500)]);
        s.versions("k", Some(0), Some(4_000), DESC, &[("a", 3_000, 4_500)]);
        s.versions("k", None, Some(3_999), DESC, &[]);

        // an expired bound still sees a latest value at or before it
        s.as_of_value("old", 3_999, "o", 100, U);
        s.versions("old", Some(0), Some(3_999), DESC, &[("o", 100, U)]);

        s.put("edge", Some("z"), 4_000, U);
        s.get_value("edge", "z", 4_000);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        assert_eq!(s.delete("k", 4_000), Some(record("a", 3_000, 4_500)));
        s.as_of_null("k", 4_000);
    });
}

/// §8.4: the latest value never expires, whatever the stream time.
#[test]
fn latest_value_never_expires() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", Some("v"), 0, U);
        s.put("other", Some("x"), 10_000_000, U);

        s.get_value("k", "v", 0);
        s.as_of_value("k", 5, "v", 0, U);
        s.as_of_value("k", 0, "v", 0, U);
        s.versions("k", None, Some(5), DESC, &[("v", 0, U)]);
        s.versions("k", None, None, DESC, &[("v", 0, U)]);
        s.versions("k", Some(3), Some(3), DESC, &[("v", 0, U)]);
        // but it is not valid before its own timestamp
        s.as_of_null("other", 5);
    });
}

/// §8.5: deleting an unknown key still writes a tombstone that bounds later writes.
#[test]
fn delete_of_unknown_key_writes_a_bounding_tombstone() {
    on_both_backends(config(1_000, 100), |s| {
        assert_eq!(s.delete("k", 50), None);
        assert_eq!(s.store.observed_stream_time(), 50);
        s.assert_row(0, "k", Some((50, &[(50, None)])));
        s.put("k", Some("v"), 40, 50);
        s.get_null("k");
        s.as_of_value("k", 45, "v", 40, 50);
        s.as_of_null("k", 50);

        // deleting where no record is valid (before the first version) also writes a tombstone
        s.put("j", Some("v"), 60, U);
        assert_eq!(s.delete("j", 20), None);
        s.put("j", Some("w"), 10, 20);
        s.as_of_value("j", 15, "w", 10, 20);
        s.as_of_null("j", 20);
        s.get_value("j", "v", 60);
    });
}

/// §8.6: an empty value is a value, in the latest-value store and in rows.
#[test]
fn empty_value_is_not_a_tombstone() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", Some(""), 5, U);
        s.get_value("k", "", 5);
        assert!(s.has_latest("k"));
        s.put("k", None, 150, U);
        s.get_null("k");
        assert!(!s.has_latest("k"));
        s.assert_row(1, "k", Some((150, &[(5, Some(""))])));
        s.as_of_value("k", 149, "", 5, 150);
        s.put("k", Some(""), 160, U);
        s.put("k", Some("x"), 170, U);
        s.assert_row(
            1,
            "k",
            Some((170, &[(160, Some("")), (150, None), (5, Some(""))])),
        );
        s.versions(
            "k",
            None,
            None,
            DESC,
            &[("x", 170, U), ("", 160, 170), ("", 5, 150)],
        );
    });
}

/// §8.7 / §3.3: the first write of a key as a tombstone makes a degenerate row, which bounds
/// later older writes and turns into a normal row when a version is inserted.
#[test]
fn degenerate_row_bounds_older_writes_and_becomes_a_normal_row() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 250, U);
        s.assert_row(2, "k", Some((250, &[(250, None)])));
        s.get_null("k");
        s.put("k", Some("v"), 120, 250);
        // the tombstone is now implicit as the row's next_timestamp
        s.assert_row(2, "k", Some((250, &[(120, Some("v"))])));
        s.assert_row(1, "k", None);
        s.as_of_value("k", 200, "v", 120, 250);
        s.as_of_null("k", 250);
        s.put("k", Some("w"), 260, U);
        s.as_of_null("k", 255);
        s.get_value("k", "w", 260);
        s.versions("k", None, None, DESC, &[("w", 260, U), ("v", 120, 250)]);
    });
}

#[test]
fn value_at_a_degenerate_tombstone_timestamp_replaces_the_row() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 250, U);
        s.put("k", Some("v"), 250, U);
        s.assert_row(2, "k", None);
        assert!(s.has_latest("k"));
        s.get_value("k", "v", 250);
        s.versions("k", None, None, DESC, &[("v", 250, U)]);
    });
}

#[test]
fn tombstones_after_a_degenerate_row_keep_bounding_in_order() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 210, U);
        s.put("k", None, 220, U);
        s.put("k", Some("v"), 215, 220);
        s.put("k", Some("u"), 205, 210);
        s.as_of_value("k", 207, "u", 205, 210);
        s.as_of_null("k", 212);
        s.as_of_value("k", 217, "v", 215, 220);
        s.as_of_null("k", 220);
        s.get_null("k");

        // a degenerate row in an older segment than the next value
        s.put("j", None, 150, U);
        s.put("j", Some("v"), 250, U);
        s.put("j", Some("w"), 200, 250);
        s.put("j", Some("x"), 100, 150);
        s.as_of_value("j", 120, "x", 100, 150);
        s.as_of_null("j", 175);
        s.as_of_value("j", 225, "w", 200, 250);
        s.assert_row(1, "j", Some((150, &[(100, Some("x"))])));
        s.assert_row(2, "j", Some((250, &[(200, Some("w"))])));
    });
}

/// §8.8 / §3.5 step 2: a write that splits a version whose valid-from and valid-to lie in
/// different segments moves the older part to the older segment.
#[test]
fn splitting_a_version_moves_its_older_part_to_the_older_segment() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("vp20"), SI + 20, U);
        s.put("k", Some("vp10"), SI + 10, SI + 20);
        s.put("k", Some("vn10"), SI - 10, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 10, Some("vn10"))])),
        );
        s.assert_row(0, "k", None);

        s.put("k", Some("vn2"), SI - 2, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 2, Some("vn2"))])),
        );
        s.assert_row(0, "k", Some((SI - 2, &[(SI - 10, Some("vn10"))])));

        s.put("k", Some("vn1"), SI - 1, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 1, Some("vn1"))])),
        );
        s.assert_row(
            0,
            "k",
            Some((SI - 1, &[(SI - 2, Some("vn2")), (SI - 10, Some("vn10"))])),
        );

        // vn1 now ends at SI + 1, still in segment 1: nothing moves
        s.put("k", Some("vp1"), SI + 1, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((
                SI + 20,
                &[
                    (SI + 10, Some("vp10")),
                    (SI + 1, Some("vp1")),
                    (SI - 1, Some("vn1")),
                ],
            )),
        );
        s.assert_row(
            0,
            "k",
            Some((SI - 1, &[(SI - 2, Some("vn2")), (SI - 10, Some("vn10"))])),
        );
        assert_moved_records(s);
        s.versions(
            "k",
            None,
            None,
            ASC,
            &[
                ("vn10", SI - 10, SI - 2),
                ("vn2", SI - 2, SI - 1),
                ("vn1", SI - 1, SI + 1),
                ("vp1", SI + 1, SI + 10),
                ("vp10", SI + 10, SI + 20),
                ("vp20", SI + 20, U),
            ],
        );
    });
}

/// A tombstone that splits a version across segments moves the value, the tombstone takes the
/// slot.
#[test]
fn splitting_a_version_with_a_tombstone_moves_the_value() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("new"), SI + 20, U);
        s.put("k", Some("old"), SI - 10, SI + 20);
        s.put("k", None, SI - 5, SI + 20);
        s.assert_row(0, "k", Some((SI - 5, &[(SI - 10, Some("old"))])));
        s.assert_row(1, "k", Some((SI + 20, &[(SI - 5, None)])));
        s.as_of_value("k", SI - 6, "old", SI - 10, SI - 5);
        s.as_of_null("k", SI + 19);
        s.versions(
            "k",
            None,
            None,
            DESC,
            &[("new", SI + 20, U), ("old", SI - 10, SI - 5)],
        );
    });
}

/// §2.5 example and Q7: expiry is segment-granular and visible only through `versions()`.
#[test]
fn segment_expiry_is_visible_only_through_versions() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v_old"), 0, U);
        s.put("k", Some("v"), 99_990, U);
        s.put("other", Some("x"), 399_990, U);
        assert_eq!(s.store.live_segment_count(), 1);

        // H = 99 990: v_old ended at H and is still in segment 0
        let both = [("v", 99_990, U), ("v_old", 0, 99_990)];
        s.versions("k", Some(0), Some(99_990), DESC, &both);
        s.versions("k", None, None, DESC, &both);
        // an expired bound sees only the newest version
        s.versions("k", Some(0), Some(99_989), DESC, &[]);
        s.as_of_null("k", 99_989);
        s.as_of_value("k", 99_990, "v", 99_990, U);

        // H = 99 999: segment 0 is still live
        s.put("other", Some("y"), 399_999, U);
        s.versions("k", None, None, DESC, &both);
        assert_eq!(s.store.live_segment_count(), 2);

        // H = 100 000: segment 0 is dropped
        s.put("other", Some("z"), 400_000, U);
        s.versions("k", None, None, DESC, &[("v", 99_990, U)]);
        s.versions("k", Some(0), Some(100_000), DESC, &[("v", 99_990, U)]);
        s.as_of_value("k", 99_990, "v", 99_990, U);
        s.get_value("k", "v", 99_990);
        s.assert_row(0, "k", None);
        assert_eq!(s.store.live_segment_count(), 2);

        // puts and point reads are unaffected by the drop
        s.as_of_value("other", 399_999, "y", 399_999, 400_000);
        s.put("other", Some("y2"), 399_999, 400_000);
    });
}

/// Nothing is dropped by reads or rejected writes.
#[test]
fn rejected_writes_and_reads_do_not_drop_segments() {
    on_both_backends(config(10, 10), |s| {
        s.put("k", Some("a"), 0, U);
        s.put("k", Some("b"), 5, U);
        s.put("k", Some("c"), 15, U);
        assert_eq!(s.store.live_segment_count(), 2);
        s.put("j", Some("x"), 2, NOT_PUT);
        let _ = s.store.versions(b"k", None, None, DESC).expect("versions");
        let _ = s.store.get_as_of(b"k", 0).expect("get_as_of");
        assert_eq!(s.store.live_segment_count(), 2);
        s.versions(
            "k",
            None,
            None,
            DESC,
            &[("c", 15, U), ("b", 5, 15), ("a", 0, 5)],
        );
    });
}

/// §8.11: keys that are prefixes of each other, binary keys and the empty key are independent.
#[test]
fn prefix_binary_and_empty_keys_are_independent() {
    on_both_backends(config(1_000, 10), |s| {
        let keys: [&[u8]; 6] = [
            b"",
            b"a",
            b"ab",
            b"a\x00",
            b"\x00",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for (i, key) in keys.iter().enumerate() {
            let i = i64::try_from(i).expect("small");
            for step in 0..5 {
                let value = format!("{i}-{step}");
                let ts = step * 7 + i;
                let code = s
                    .store
                    .put(key, Some(value.as_bytes()), ts)
                    .expect("put")
                    .code();
                assert_eq!(code, U, "[{}] key {key:?}", s.backend);
            }
        }
        s.store.delete(b"ab", 100).expect("delete");
        for (i, key) in keys.iter().enumerate() {
            let i = i64::try_from(i).expect("small");
            let versions = s.store.versions(key, None, None, ASC).expect("versions");
            let timestamps: Vec<i64> = versions.iter().map(|r| r.timestamp).collect();
            assert_eq!(
                timestamps,
                (0..5).map(|step| step * 7 + i).collect::<Vec<_>>()
            );
            for (step, r) in versions.iter().enumerate() {
                assert_eq!(
                    r.value,
                    format!("{i}-{step}").into_bytes(),
                    "[{}] {key:?}",
                    s.backend
                );
            }
            let latest = s.store.get(key).expect("get");
            if *key == b"ab" {
                assert_eq!(latest, None);
                assert_eq!(versions.last().and_then(|r| r.valid_to), Some(100));
            } else {
                assert_eq!(latest.map(|r| r.timestamp), Some(4 * 7 + i));
            }
        }
    });
}

/// §8.12 and §2.8: argument validation.
#[test]
fn invalid_arguments_are_rejected_without_writing() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 10, U);
        let err = s
            .store
            .put(b"k", Some(b"w"), -1)
            .expect_err("negative timestamp");
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    argument: "timestamp",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = s.store.delete(b"k", -5).expect_err("negative timestamp");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        let err = s
            .store
            .versions(b"k", Some(6), Some(5), DESC)
            .expect_err("from > to");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        s.versions("k", Some(10), Some(10), DESC, &[("v", 10, U)]);
        s.get_value("k", "v", 10);
        assert_eq!(s.store.observed_stream_time(), 10);

        // a batch with one bad row writes nothing
        let rows: [PutRow<'_>; 3] = [
            (b"a", Some(&b"1"[..]), 20),
            (b"b", Some(&b"2"[..]), 30),
            (b"c", Some(&b"3"[..]), -1),
        ];
        let err = s
            .store
            .put_batch(rows.iter().copied())
            .expect_err("bad row");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains("[2]"), "{err}");
        s.get_null("a");
        s.get_null("b");
        assert_eq!(s.store.observed_stream_time(), 10);
        let deletes: [(&[u8], i64); 2] = [(b"k", 20), (b"k", -3)];
        assert!(s.store.delete_batch(deletes.iter().copied()).is_err());
        s.get_value("k", "v", 10);
        assert_eq!(s.store.observed_stream_time(), 10);
    });
}

#[test]
fn delete_batch_equals_a_loop_of_deletes() {
    on_both_backends(config(100, 10), |s| {
        for (key, ts) in [("a", 5), ("a", 25), ("b", 30), ("c", 40)] {
            s.put(key, Some(format!("{key}{ts}").as_str()), ts, U);
        }
        let mut looped = VersionedStore::in_memory(s.store.config());
        for (key, ts) in [("a", 5), ("a", 25), ("b", 30), ("c", 40)] {
            looped
                .put(key.as_bytes(), Some(format!("{key}{ts}").as_bytes()), ts)
                .expect("put");
        }
        let deletes: [(&[u8], i64); 6] = [
            (b"a", 20),
            (b"a", 20),
            (b"b", 200),
            (b"z", 50),
            (b"c", 90),
            (b"c", 35),
        ];
        let batched = s
            .store
            .delete_batch(deletes.iter().copied())
            .expect("delete_batch");
        let single: Vec<Option<VersionedRecord>> = deletes
            .iter()
            .map(|&(key, ts)| looped.delete(key, ts).expect("delete"))
            .collect();
        assert_eq!(batched, single, "[{}]", s.backend);
        assert_eq!(
            batched,
            vec![
                Some(record("a5", 5, 25)),
                None,
                Some(record("b30", 30, U)),
                None,
                None,
                None
            ]
        );
        assert_eq!(s.store.observed_stream_time(), 200);
        let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"z"];
        let plan = Plan::wide(200, 100);
        assert_same(
            &observe(&s.store, &keys, &plan),
            &observe(&looped, &keys, &plan),
        )
        .expect("same reads");
    });
}

// ---------------------------------------------------------------------------------------------
// Observation: the same queries against a store or the model, compared query by query
// ---------------------------------------------------------------------------------------------

/// Read access shared by the store and the reference model.
trait Reads {
    fn read_latest(&self, key: &[u8]) -> Result<Option<VersionedRecord>, String>;
    fn read_as_of(&self, key: &[u8], as_of: i64) -> Result<Option<VersionedRecord>, String>;
    fn read_versions(
        &self,
        key: &[u8],
        from: Option<i64>,
        to: Option<i64>,
        order: ResultOrder,
    ) -> Result<Vec<VersionedRecord>, String>;
    fn stream_time(&self) -> i64;
}

fn describe(error: &Error) -> String {
    match error {
        Error::InvalidArgument { argument, .. } => format!("invalid argument {argument}"),
        other => other.to_string(),
    }
}

impl Reads for VersionedStore {
    fn read_latest(&self, key: &[u8]) -> Result<Option<VersionedRecord>, String> {
        self.get(key).map_err(|e| describe(&e))
    }

    fn read_as_of(&self, key: &[u8], as_of: i64) -> Result<Option<VersionedRecord>, String> {
        self.get_as_of(key, as_of).map_err(|e| describe(&e))
    }

    fn read_versions(
        &self,
        key: &[u8],
        from: Option<i64>,
        to: Option<i64>,
        order: ResultOrder,
    ) -> Result<Vec<VersionedRecord>, String> {
        self.versions(key, from, to, order)
            .map_err(|e| describe(&e))
    }

    fn stream_time(&self) -> i64 {
        self.observed_stream_time()
    }
}

/// Which queries to run.
struct Plan {
    as_of: Vec<i64>,
    bounds: Vec<Option<i64>>,
}

impl Plan {
    /// Queries around the horizon `H = ST − R`, for checks after every operation.
    fn narrow(stream_time: i64, retention: i64) -> Self {
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
    fn wide(stream_time: i64, retention: i64) -> Self {
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
fn observe(reads: &impl Reads, keys: &[&[u8]], plan: &Plan) -> Vec<(String, String)> {
    let mut out = vec![(
        "observed_stream_time".to_owned(),
        reads.stream_time().to_string(),
    )];
    for key in keys {
        out.push((
            format!("get({key:?})"),
            format!("{:?}", reads.read_latest(key)),
        ));
        for &t in &plan.as_of {
            out.push((
                format!("get_as_of({key:?}, {t})"),
                format!("{:?}", reads.read_as_of(key, t)),
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
                        format!("{:?}", reads.read_versions(key, from, to, order)),
                    ));
                }
            }
        }
    }
    out
}

/// The first query whose results differ, if any.
fn assert_same(actual: &[(String, String)], expected: &[(String, String)]) -> Result<(), String> {
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

// ---------------------------------------------------------------------------------------------
// Reference model
// ---------------------------------------------------------------------------------------------

/// The documented semantics, with no storage design: per key every version ever accepted.
///
/// `versions()` follows the physical-presence rule of §2.5/§3.7: the newest version is always
/// there; an older version with valid-to `vt` is there iff `vt / I ≥ (ST − R) / I` (truncating
/// division, i.e. its segment has not been dropped).
#[derive(Debug, Clone)]
struct Model {
    retention: i64,
    interval: i64,
    stream_time: i64,
    keys: BTreeMap<Vec<u8>, BTreeMap<i64, Option<Vec<u8>>>>,
}

impl Model {
    fn new(config: StoreConfig) -> Self {
        Self {
            retention: config.history_retention_ms(),
            interval: config.segment_interval_ms(),
            stream_time: -1,
            keys: BTreeMap::new(),
        }
    }

    fn horizon(&self) -> i64 {
        self.stream_time - self.retention
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>, timestamp: i64) -> i64 {
        if timestamp < self.horizon() {
            return NOT_PUT;
        }
        self.stream_time = self.stream_time.max(timestamp);
        let versions = self.keys.entry(key.to_vec()).or_default();
        versions.insert(timestamp, value.map(<[u8]>::to_vec));
        versions
            .range(timestamp + 1..)
            .next()
            .map_or(VALID_TO_UNDEFINED, |(&t, _)| t)
    }

    fn delete(&mut self, key: &[u8], timestamp: i64) -> Option<VersionedRecord> {
        if timestamp < self.horizon() {
            return None;
        }
        let before = self.as_of(key, timestamp);
        self.put(key, None, timestamp);
        before
    }

    fn latest(&self, key: &[u8]) -> Option<VersionedRecord> {
        let (&timestamp, value) = self.keys.get(key)?.last_key_value()?;
        value.as_ref().map(|v| VersionedRecord {
            value: v.clone(),
            timestamp,
            valid_to: None,
        })
    }

    fn as_of(&self, key: &[u8], as_of: i64) -> Option<VersionedRecord> {
        if as_of < self.horizon() {
            return self.latest(key).filter(|r| r.timestamp <= as_of);
        }
        let versions = self.keys.get(key)?;
        let (&timestamp, value) = versions.range(..=as_of).next_back()?;
        let valid_to = versions.range(timestamp + 1..).next().map(|(&t, _)| t);
        value.as_ref().map(|v| VersionedRecord {
            value: v.clone(),
            timestamp,
            valid_to,
        })
    }

    fn versions(&self, key: &[u8], from: i64, to: i64) -> Vec<VersionedRecord> {
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
        let lowest_live = h / self.interval;
        let mut out = Vec::new();
        let mut newer: Option<i64> = None;
        for (&timestamp, value) in versions.iter().rev() {
            let valid_to = newer;
            newer = Some(timestamp);
            let Some(value) = value else { continue };
            let present = valid_to.is_none_or(|vt| vt / self.interval >= lowest_live);
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
    fn read_latest(&self, key: &[u8]) -> Result<Option<VersionedRecord>, String> {
        Ok(self.latest(key))
    }

    fn read_as_of(&self, key: &[u8], as_of: i64) -> Result<Option<VersionedRecord>, String> {
        Ok(self.as_of(key, as_of))
    }

    fn read_versions(
        &self,
        key: &[u8],
        from: Option<i64>,
        to: Option<i64>,
        order: ResultOrder,
    ) -> Result<Vec<VersionedRecord>, String> {
        let (from, to) = (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX));
        if from > to {
            return Err("invalid argument from_time".to_owned());
        }
        let mut out = self.versions(key, from, to);
        if order == ResultOrder::Ascending {
            out.reverse();
        }
        Ok(out)
    }

    fn stream_time(&self) -> i64 {
        self.stream_time
    }
}

/// The model's own sanity: the §2.5 example.
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

// ---------------------------------------------------------------------------------------------
// Model-based property tests
// ---------------------------------------------------------------------------------------------

/// Keys for generated operations: the empty key, keys that are prefixes of each other, binary.
const KEYS: [&[u8]; 4] = [b"", b"a", b"ab", b"\xff\x00"];

/// A generated operation. Timestamps are offsets from the current observed stream time, so
/// they cluster around it: mostly in order, often late, sometimes past the grace period.
#[derive(Debug, Clone)]
enum Op {
    Put {
        key: usize,
        value: Option<Vec<u8>>,
        dt: i64,
    },
    Delete {
        key: usize,
        dt: i64,
    },
    PutBatch(Vec<(usize, Option<Vec<u8>>, i64)>),
    DeleteBatch(Vec<(usize, i64)>),
    Reopen,
}

fn resolve(stream_time: i64, dt: i64) -> i64 {
    (stream_time + dt).max(0)
}

fn arb_dt() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => -4i64..=4,
        4 => -25i64..=-5,
        2 => 5i64..=12,
        1 => 25i64..=60,
    ]
}

fn arb_value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        3 => proptest::collection::vec(any::<u8>(), 0..3).prop_map(Some),
    ]
}

fn arb_key() -> impl Strategy<Value = usize> {
    0..KEYS.len()
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (arb_key(), arb_value(), arb_dt()).prop_map(|(key, value, dt)| Op::Put { key, value, dt }),
        3 => (arb_key(), arb_dt()).prop_map(|(key, dt)| Op::Delete { key, dt }),
        2 => proptest::collection::vec((arb_key(), arb_value(), arb_dt()), 1..6).prop_map(Op::PutBatch),
        1 => proptest::collection::vec((arb_key(), arb_dt()), 1..4).prop_map(Op::DeleteBatch),
        1 => Just(Op::Reopen),
    ]
}

fn arb_config() -> impl Strategy<Value = StoreConfig> {
    (
        proptest::sample::select(vec![0i64, 5, 20]),
        proptest::sample::select(vec![1i64, 3, 10]),
    )
        .prop_map(|(retention, interval)| config(retention, interval))
}

fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A store under test that can be closed and reopened (a no-op in memory).
struct Sut {
    store: Option<VersionedStore>,
    dir: Option<tempfile::TempDir>,
    config: StoreConfig,
    options: RocksOptions,
}

impl Sut {
    fn new(config: StoreConfig, backing: Backing) -> Self {
        match backing.options() {
            Some(options) => {
                let dir = tempfile::tempdir().expect("tempdir");
                let store = VersionedStore::open_with(dir.path(), config, options).expect("open");
                Self {
                    store: Some(store),
                    dir: Some(dir),
                    config,
                    options,
                }
            }
            None => Self {
                store: Some(VersionedStore::in_memory(config)),
                dir: None,
                config,
                options: RocksOptions::default(),
            },
        }
    }

    fn store(&self) -> &VersionedStore {
        self.store.as_ref().expect("store is open")
    }

    fn store_mut(&mut self) -> &mut VersionedStore {
        self.store.as_mut().expect("store is open")
    }

    fn reopen(&mut self) {
        if let Some(dir) = &self.dir {
            // Close first: the directory lock is held until the store is dropped.
            self.store = None;
            let store = VersionedStore::open_with(dir.path(), self.config, self.options);
            self.store = Some(store.expect("reopen"));
        }
    }
}

/// Applies one generated operation to the model and the store; returns the keys it wrote.
fn apply(model: &mut Model, sut: &mut Sut, op: &Op) -> Result<Vec<usize>, TestCaseError> {
    let err = |e: Error| describe(&e);
    match op {
        Op::Put { key, value, dt } => {
            let ts = resolve(model.stream_time, *dt);
            let expected = model.put(KEYS[*key], value.as_deref(), ts);
            let actual = sut.store_mut().put(KEYS[*key], value.as_deref(), ts);
            prop_assert_eq!(
                actual.map(PutOutcome::code).map_err(err),
                Ok(expected),
                "put at {}",
                ts
            );
            Ok(vec![*key])
        }
        Op::Delete { key, dt } => {
            let ts = resolve(model.stream_time, *dt);
            let expected = model.delete(KEYS[*key], ts);
            let actual = sut.store_mut().delete(KEYS[*key], ts);
            prop_assert_eq!(actual.map_err(err), Ok(expected), "delete at {}", ts);
            Ok(vec![*key])
        }
        Op::PutBatch(rows) => {
            let mut resolved = Vec::new();
            let mut expected = Vec::new();
            for (key, value, dt) in rows {
                let ts = resolve(model.stream_time, *dt);
                expected.push(model.put(KEYS[*key], value.as_deref(), ts));
                resolved.push((KEYS[*key], value.as_deref(), ts));
            }
            let actual = sut
                .store_mut()
                .put_batch(resolved.iter().copied())
                .map(|outcomes| {
                    outcomes
                        .into_iter()
                        .map(PutOutcome::code)
                        .collect::<Vec<_>>()
                });
            prop_assert_eq!(
                actual.map_err(err),
                Ok(expected),
                "put_batch {:?}",
                resolved
            );
            Ok(rows.iter().map(|r| r.0).collect())
        }
        Op::DeleteBatch(rows) => {
            let mut resolved = Vec::new();
            let mut expected = Vec::new();
            for (key, dt) in rows {
                let ts = resolve(model.stream_time, *dt);
                expected.push(model.delete(KEYS[*key], ts));
                resolved.push((KEYS[*key], ts));
            }
            let actual = sut.store_mut().delete_batch(resolved.iter().copied());
            prop_assert_eq!(
                actual.map_err(err),
                Ok(expected),
                "delete_batch {:?}",
                resolved
            );
            Ok(rows.iter().map(|r| r.0).collect())
        }
        Op::Reopen => {
            sut.reopen();
            Ok((0..KEYS.len()).collect())
        }
    }
}

fn compare(sut: &Sut, model: &Model, keys: &[&[u8]], plan: &Plan) -> Result<(), TestCaseError> {
    assert_same(
        &observe(sut.store(), keys, plan),
        &observe(model, keys, plan),
    )
    .map_err(TestCaseError::fail)
}

/// What a model test's store keeps its data in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    Memory,
    /// RocksDB with its write-ahead log: every call written through.
    Logged,
    /// RocksDB without it: calls gather in the write buffer, here a tiny one (written every few
    /// calls), and the cache of latest values is tiny too (forgets often).
    Buffered,
}

impl Backing {
    fn options(self) -> Option<RocksOptions> {
        match self {
            Self::Memory => None,
            Self::Logged => Some(RocksOptions::default()),
            Self::Buffered => Some(RocksOptions {
                wal: false,
                write_buffer_bytes: 2048,
                latest_cache_bytes: 600,
                ..RocksOptions::default()
            }),
        }
    }
}

fn run_model_test(config: StoreConfig, ops: &[Op], backing: Backing) -> Result<(), TestCaseError> {
    let persistent = backing != Backing::Memory;
    let mut model = Model::new(config);
    let mut sut = Sut::new(config, backing);
    let retention = config.history_retention_ms();
    for (step, op) in ops.iter().enumerate() {
        let touched = apply(&mut model, &mut sut, op)
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
        let mut keys: Vec<&[u8]> = touched.iter().map(|&k| KEYS[k]).collect();
        keys.sort_unstable();
        keys.dedup();
        compare(
            &sut,
            &model,
            &keys,
            &Plan::narrow(model.stream_time, retention),
        )
        .map_err(|e| TestCaseError::fail(format!("after step {step} {op:?}: {e}")))?;
    }
    let wide = Plan::wide(model.stream_time, retention);
    compare(&sut, &model, &KEYS, &wide)
        .map_err(|e| TestCaseError::fail(format!("at the end: {e}")))?;
    if persistent {
        sut.reopen();
        compare(&sut, &model, &KEYS, &wide)
            .map_err(|e| TestCaseError::fail(format!("after the final reopen: {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn in_memory_store_matches_the_model(
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
    ) {
        run_model_test(config, &ops, Backing::Memory)?;
    }
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn rocksdb_store_matches_the_model_across_reopens(
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
    ) {
        run_model_test(config, &ops, Backing::Logged)?;
    }

    #[test]
    fn buffered_rocksdb_store_matches_the_model_across_reopens(
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
    ) {
        run_model_test(config, &ops, Backing::Buffered)?;
    }
}

proptest! {
    #![proptest_config(cases(128))]

    /// A batch is the same as its rows applied one by one, whatever the chunking.
    #[test]
    fn put_batch_equals_a_loop_of_puts(
        config in arb_config(),
        rows in proptest::collection::vec((arb_key(), arb_value(), 0i64..80), 1..40),
        chunk in 1usize..40,
    ) {
        let mut batched = VersionedStore::in_memory(config);
        let mut looped = VersionedStore::in_memory(config);
        let mut batch_codes = Vec::new();
        for part in rows.chunks(chunk) {
            let outcomes = batched
                .put_batch(part.iter().map(|(k, v, t)| (KEYS[*k], v.as_deref(), *t)))
                .expect("put_batch");
            batch_codes.extend(outcomes.into_iter().map(PutOutcome::code));
        }
        let loop_codes: Vec<i64> = rows
            .iter()
            .map(|(k, v, t)| looped.put(KEYS[*k], v.as_deref(), *t).expect("put").code())
            .collect();
        prop_assert_eq!(batch_codes, loop_codes);
        let plan = Plan::wide(looped.observed_stream_time(), config.history_retention_ms());
        assert_same(&observe(&batched, &KEYS, &plan), &observe(&looped, &KEYS, &plan))
            .map_err(TestCaseError::fail)?;
    }

    /// §4: replaying the same accepted writes in another order gives the same reads (no write
    /// is rejected or expired here: the retention covers the whole range).
    #[test]
    fn replaying_writes_in_another_order_gives_the_same_reads(
        interval in proptest::sample::select(vec![1i64, 3, 10]),
        (writes, shuffled) in proptest::collection::btree_map((arb_key(), 0i64..60), arb_value(), 1..40)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_flat_map(|w| (Just(w.clone()), Just(w).prop_shuffle())),
    ) {
        let config = config(1_000, interval);
        let mut in_order = VersionedStore::in_memory(config);
        let mut reordered = VersionedStore::in_memory(config);
        let mut model = Model::new(config);
        for ((key, ts), value) in &writes {
            in_order.put(KEYS[*key], value.as_deref(), *ts).expect("put");
        }
        for ((key, ts), value) in &shuffled {
            let expected = model.put(KEYS[*key], value.as_deref(), *ts);
            let code = reordered.put(KEYS[*key], value.as_deref(), *ts).expect("put").code();
            prop_assert_eq!(code, expected);
        }
        let plan = Plan::wide(model.stream_time, 1_000);
        let expected = observe(&model, &KEYS, &plan);
        assert_same(&observe(&in_order, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
        assert_same(&observe(&reordered, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Persistence: reopen, configuration, lock
// ---------------------------------------------------------------------------------------------

/// A few hundred writes over five keys: mostly in order, some late, some tombstones, a few past
/// the grace period.
fn scripted_writes() -> Vec<(Vec<u8>, Option<Vec<u8>>, i64)> {
    (0..300i64)
        .map(|step| {
            let key = format!("k{}", step % 5).into_bytes();
            let mut ts = (step * 97 - (step % 4) * 150).max(0);
            if step % 50 == 49 {
                ts = (ts - 12_000).max(0);
            }
            let value = (step % 7 != 3).then(|| format!("v{step}").into_bytes());
            (key, value, ts)
        })
        .collect()
}

#[test]
fn reopen_keeps_data_stream_time_grace_and_history_across_many_segments() {
    let config = config(10_000, 500);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::new(config);
    let keys_owned: Vec<Vec<u8>> = (0..5).map(|k| format!("k{k}").into_bytes()).collect();
    let keys: Vec<&[u8]> = keys_owned.iter().map(Vec::as_slice).collect();
    let writes = scripted_writes();
    let (first, second) = writes.split_at(200);

    let mut store = VersionedStore::open(dir.path(), config).expect("open");
    for (key, value, ts) in first {
        let expected = model.put(key, value.as_deref(), *ts);
        assert_eq!(
            store.put(key, value.as_deref(), *ts).expect("put").code(),
            expected
        );
    }
    assert!(model.stream_time > 0);
    let segments = store.live_segment_count();
    assert!(segments > 15, "history spans many segments: {segments}");
    let plan = Plan::wide(model.stream_time, 10_000);
    let before = observe(&store, &keys, &plan);
    assert_same(&before, &observe(&model, &keys, &plan)).expect("store matches the model");

    // close after a flush (reads come from SST files)
    store.flush().expect("flush");
    drop(store);
    let mut store = VersionedStore::open(dir.path(), config).expect("reopen");
    assert_eq!(store.observed_stream_time(), model.stream_time);
    assert_eq!(store.live_segment_count(), segments);
    assert_same(&observe(&store, &keys, &plan), &before).expect("same reads after reopen");

    // grace decisions use the persisted stream time
    let h = model.stream_time - 10_000;
    assert_eq!(
        store.put(b"late", Some(b"x"), h - 1).expect("put").code(),
        NOT_PUT
    );
    assert_eq!(store.delete(b"k0", h - 1).expect("delete"), None);
    assert_eq!(store.put(b"edge", Some(b"x"), h).expect("put").code(), U);
    model.put(b"edge", Some(b"x"), h);

    // more writes, then close without a flush (write-ahead log recovery)
    for (key, value, ts) in second {
        let expected = model.put(key, value.as_deref(), *ts);
        assert_eq!(
            store.put(key, value.as_deref(), *ts).expect("put").code(),
            expected
        );
    }
    let plan = Plan::wide(model.stream_time, 10_000);
    let before = observe(&store, &keys, &plan);
    let segments = store.live_segment_count();
    drop(store);
    let store = VersionedStore::open(dir.path(), config).expect("reopen");
    assert_eq!(store.observed_stream_time(), model.stream_time);
    assert_eq!(store.live_segment_count(), segments);
    assert_same(&observe(&store, &keys, &plan), &before).expect("same reads after reopen");
    assert_same(&before, &observe(&model, &keys, &plan)).expect("store matches the model");
    assert_eq!(store.get(b"edge").expect("get"), model.latest(b"edge"));
}

#[test]
fn fresh_store_starts_at_stream_time_minus_one_also_after_reopen() {
    on_both_backends(kafka_config(), |s| {
        assert_eq!(s.store.observed_stream_time(), -1);
        assert_eq!(s.store.live_segment_count(), 0);
        s.get_null("k");
        s.as_of_null("k", 0);
        s.versions("k", None, None, DESC, &[]);
        // reads and flushes do not advance stream time
        s.store.flush().expect("flush");
        assert_eq!(s.store.observed_stream_time(), -1);
        // the first write may be at 0
        s.put("k", Some("v"), 0, U);
        assert_eq!(s.store.observed_stream_time(), 0);
    });
    let dir = tempfile::tempdir().expect("tempdir");
    drop(VersionedStore::open(dir.path(), kafka_config()).expect("open"));
    let store = VersionedStore::open(dir.path(), kafka_config()).expect("reopen");
    assert_eq!(store.observed_stream_time(), -1);
    assert_eq!(store.live_segment_count(), 0);
}

#[test]
fn reopen_keeps_dropped_segments_dropped_and_live_ones_live() {
    let config = kafka_config();
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = VersionedStore::open(dir.path(), config).expect("open");
        store.put(b"k", Some(b"v_old"), 0).expect("put");
        store.put(b"k", Some(b"v"), 99_990).expect("put");
        store.put(b"other", Some(b"x"), 399_990).expect("put");
        store.put(b"other", Some(b"y"), 399_999).expect("put");
    }
    {
        let mut store = VersionedStore::open(dir.path(), config).expect("reopen");
        assert_eq!(store.observed_stream_time(), 399_999);
        assert_eq!(store.live_segment_count(), 2);
        let versions = store.versions(b"k", None, None, DESC).expect("versions");
        assert_eq!(
            versions,
            vec![record("v", 99_990, U), record("v_old", 0, 99_990)]
        );
        store.put(b"other", Some(b"z"), 400_000).expect("put");
        store.flush().expect("flush");
    }
    let store = VersionedStore::open(dir.path(), config).expect("reopen");
    assert_eq!(store.live_segment_count(), 2);
    let versions = store.versions(b"k", None, None, DESC).expect("versions");
    assert_eq!(versions, vec![record("v", 99_990, U)]);
    assert_eq!(
        store.get_as_of(b"k", 99_990).expect("get_as_of"),
        Some(record("v", 99_990, U))
    );
}

#[test]
fn reopen_with_another_retention_or_interval_is_incompatible() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = VersionedStore::open(dir.path(), kafka_config()).expect("open");
        store.put(b"k", Some(b"v"), 10).expect("put");
    }
    let err =
        VersionedStore::open(dir.path(), config(200_000, SEGMENT_INTERVAL)).expect_err("retention");
    assert!(
        matches!(
            err,
            Error::IncompatibleConfig {
                setting: "history_retention_ms",
                stored: 300_000,
                requested: 200_000,
                ..
            }
        ),
        "{err:?}"
    );
    let err =
        VersionedStore::open(dir.path(), config(HISTORY_RETENTION, 50_000)).expect_err("interval");
    assert!(
        matches!(
            err,
            Error::IncompatibleConfig {
                setting: "segment_interval_ms",
                stored: 100_000,
                requested: 50_000,
                ..
            }
        ),
        "{err:?}"
    );
    // the default interval for 300 000 is 60 000, not the stored 100 000
    let default_interval = StoreConfig::new(HISTORY_RETENTION, None).expect("valid");
    let err = VersionedStore::open(dir.path(), default_interval).expect_err("default interval");
    assert!(
        matches!(
            err,
            Error::IncompatibleConfig {
                setting: "segment_interval_ms",
                requested: 60_000,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );

    // the failed opens released the directory and changed nothing
    let store = VersionedStore::open(dir.path(), kafka_config()).expect("reopen");
    assert_eq!(store.get(b"k").expect("get"), Some(record("v", 10, U)));
    assert_eq!(store.observed_stream_time(), 10);
}

#[test]
fn second_open_of_the_same_path_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = VersionedStore::open(dir.path(), kafka_config()).expect("open");
    first.put(b"k", Some(b"v"), 10).expect("put");
    let err = VersionedStore::open(dir.path(), kafka_config()).expect_err("locked");
    assert!(
        matches!(&err, Error::Locked { path } if path == dir.path()),
        "{err:?}"
    );
    // the holder is unaffected
    first.put(b"k", Some(b"w"), 20).expect("put");
    drop(first);
    let second = VersionedStore::open(dir.path(), kafka_config()).expect("open after close");
    assert_eq!(second.get(b"k").expect("get"), Some(record("w", 20, U)));
}

// ---------------------------------------------------------------------------------------------
// Corruption
// ---------------------------------------------------------------------------------------------

/// Overwrites, with a raw `rocksdb::DB`, the value of every key in `segment` whose user key is `key`;
/// `mangle` gets the stored bytes. Returns how many keys were overwritten.
fn mangle_raw(
    dir: &std::path::Path,
    segment: i64,
    key: &[u8],
    mangle: impl Fn(&[u8]) -> Vec<u8>,
) -> usize {
    let db = rocksdb::DB::open(&crate::backend::rocks::db_options(8 << 20, 8 << 20), dir)
        .expect("raw open");
    let targets: Vec<_> = db
        .iterator(rocksdb::IteratorMode::Start)
        .map(|item| item.expect("iterate"))
        .filter(|(k, _)| segment_of(k) == Some(segment) && k.get(8..) == Some(key))
        .collect();
    for (k, v) in &targets {
        db.put(k, mangle(&v[..])).expect("overwrite");
    }
    targets.len()
}

#[test]
fn corrupted_row_is_reported_with_its_segment_and_other_keys_still_read() {
    let config = kafka_config();
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = VersionedStore::open(dir.path(), config).expect("open");
        let keys: [&[u8]; 3] = [b"bad", b"good", b"bad_latest"];
        for key in keys {
            store.put(key, Some(b"v1"), 10).expect("put");
            store.put(key, Some(b"v2"), SI + 10).expect("put");
            store.put(key, Some(b"v3"), SI + 20).expect("put");
        }
    }
    // the row of "bad" lives in segment 1 (valid-to SI + 10 and SI + 20); cut it in half
    let n = mangle_raw(dir.path(), 1, b"bad", |row| row[..row.len() / 2].to_vec());
    assert_eq!(n, 1);
    // the latest-value entry of "bad_latest" loses its timestamp
    let n = mangle_raw(dir.path(), LATEST_SEGMENT, b"bad_latest", |entry| {
        entry[..3].to_vec()
    });
    assert_eq!(n, 1);

    let mut store = VersionedStore::open(dir.path(), config).expect("reopen");
    let err = store.get_as_of(b"bad", 50).expect_err("corrupt row");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("segment 1"), "{err}");
    let err = store
        .versions(b"bad", None, None, DESC)
        .expect_err("corrupt row");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("segment 1"), "{err}");
    let err = store.get(b"bad_latest").expect_err("corrupt latest entry");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("latest-value store"), "{err}");

    // reads that do not touch the corrupt row still work
    assert_eq!(
        store.get(b"bad").expect("get"),
        Some(record("v3", SI + 20, U))
    );
    assert_eq!(
        store.get_as_of(b"bad", SI + 25).expect("get_as_of"),
        Some(record("v3", SI + 20, U))
    );
    assert_eq!(
        store.get_as_of(b"good", 50).expect("good"),
        Some(record("v1", 10, SI + 10))
    );
    assert_eq!(
        store
            .versions(b"good", None, None, ASC)
            .expect("good")
            .len(),
        3
    );
    // every read of "bad_latest" starts at its latest-value entry
    let err = store
        .get_as_of(b"bad_latest", 50)
        .expect_err("corrupt latest entry");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");

    // a write that needs the corrupt row fails and changes nothing
    let err = store
        .put(b"bad", Some(b"v2b"), SI + 15)
        .expect_err("corrupt row");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("segment 1"), "{err}");
    assert_eq!(store.observed_stream_time(), SI + 20);
    assert_eq!(
        store.get(b"bad").expect("get"),
        Some(record("v3", SI + 20, U))
    );
    // an in-order write appends to the row without reading it: it succeeds, and the row stays
    // reported as corrupt (the merge keeps the bad bytes behind a poisoned header)
    assert_eq!(
        store.put(b"bad", Some(b"v4"), SI + 25).expect("put").code(),
        U
    );
    assert_eq!(
        store.get(b"bad").expect("get"),
        Some(record("v4", SI + 25, U))
    );
    let err = store.get_as_of(b"bad", SI + 22).expect_err("corrupt row");
    assert!(err.to_string().contains("segment 1"), "{err}");
    store.flush().expect("flush survives the poisoned merge");
    let err = store.get_as_of(b"bad", 50).expect_err("corrupt row");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    // other keys can still be written
    assert_eq!(
        store
            .put(b"good", Some(b"v4"), SI + 30)
            .expect("put")
            .code(),
        U
    );
    assert_eq!(store.observed_stream_time(), SI + 30);
}

// ---------------------------------------------------------------------------------------------
// Edge inputs (issue 8, point 2): the whole i64 time range, empty and large keys
// ---------------------------------------------------------------------------------------------

/// Times from the whole `i64` range, the bounds and their neighbours most often.
fn arb_any_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => prop::sample::select(vec![i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX]),
        2 => any::<i64>(),
        2 => (i64::MAX - 100)..=i64::MAX,
        1 => 0i64..100,
    ]
}

/// The empty key, short keys, and a large one (64 KiB and more).
fn arb_edge_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => Just(Vec::new()),
        3 => proptest::collection::vec(any::<u8>(), 1..4),
        1 => (65_536usize..70_000).prop_map(|n| vec![0xAB; n]),
    ]
}

#[derive(Debug, Clone)]
enum EdgeCall {
    Puts(Vec<(Vec<u8>, Option<Vec<u8>>, i64)>),
    Deletes(Vec<(Vec<u8>, i64)>),
    Reads(Vec<(Vec<u8>, i64)>),
    Versions(Vec<u8>, i64, i64),
}

fn arb_edge_call() -> impl Strategy<Value = EdgeCall> {
    let value = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3));
    prop_oneof![
        3 => proptest::collection::vec((arb_edge_key(), value, arb_any_time()), 1..6)
            .prop_map(EdgeCall::Puts),
        1 => proptest::collection::vec((arb_edge_key(), arb_any_time()), 1..4)
            .prop_map(EdgeCall::Deletes),
        2 => proptest::collection::vec((arb_edge_key(), arb_any_time()), 1..6)
            .prop_map(EdgeCall::Reads),
        1 => (arb_edge_key(), arb_any_time(), arb_any_time())
            .prop_map(|(k, a, b)| EdgeCall::Versions(k, a, b)),
    ]
}

/// Every call returns a result or refuses an argument: never a panic (which pyo3 would raise
/// as `PanicException`) and never `Corrupt` (which would mean the store misread its own writes).
fn check_edge_calls(store: &mut VersionedStore, calls: &[EdgeCall]) -> Result<(), TestCaseError> {
    let ok_or_invalid = |result: Result<(), Error>, what: &str| match result {
        Ok(()) | Err(Error::InvalidArgument { .. }) => Ok(()),
        Err(other) => Err(TestCaseError::fail(format!("{what}: {other:?}"))),
    };
    for call in calls {
        match call {
            EdgeCall::Puts(rows) => ok_or_invalid(
                store
                    .put_batch(
                        rows.iter()
                            .map(|(k, v, t)| (k.as_slice(), v.as_deref(), *t)),
                    )
                    .map(drop),
                "put_batch",
            )?,
            EdgeCall::Deletes(rows) => ok_or_invalid(
                store
                    .delete_batch(rows.iter().map(|(k, t)| (k.as_slice(), *t)))
                    .map(drop),
                "delete_batch",
            )?,
            EdgeCall::Reads(rows) => {
                let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
                let times: Vec<i64> = rows.iter().map(|(_, t)| *t).collect();
                // reads refuse nothing: any error is a failure
                let batch = store
                    .get_batch(&keys, AsOf::PerRow(&times))
                    .map_err(|e| TestCaseError::fail(format!("get_batch: {e:?}")))?;
                for (i, (key, t)) in rows.iter().enumerate() {
                    let single = store
                        .get_as_of(key, *t)
                        .map_err(|e| TestCaseError::fail(format!("get_as_of: {e:?}")))?;
                    prop_assert_eq!(batch.get(i), single);
                }
                store
                    .get_batch(&keys, AsOf::Latest)
                    .map_err(|e| TestCaseError::fail(format!("get_batch latest: {e:?}")))?;
            }
            EdgeCall::Versions(key, a, b) => ok_or_invalid(
                store
                    .versions(key, Some(*a.min(b)), Some(*a.max(b)), ASC)
                    .map(drop),
                "versions",
            )?,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn batch_calls_over_the_whole_time_range_never_panic_or_misread(
        calls in proptest::collection::vec(arb_edge_call(), 1..10),
        retention in prop::sample::select(vec![0i64, 1, 1_000, i64::MAX]),
        interval in prop::sample::select(vec![1i64, 1_000, i64::MAX]),
    ) {
        let config = StoreConfig::new(retention, Some(interval)).expect("config");
        let mut memory = VersionedStore::in_memory(config);
        check_edge_calls(&mut memory, &calls)?;
        let buffered_dir = tempfile::tempdir().expect("tempdir");
        let options = Backing::Buffered.options().expect("persistent");
        let mut buffered = VersionedStore::open_with(buffered_dir.path(), config, options).expect("open");
        check_edge_calls(&mut buffered, &calls)?;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rocks = VersionedStore::open(dir.path(), config).expect("open");
        check_edge_calls(&mut rocks, &calls)?;
        drop(rocks);
        // and everything written reads back the same after a reopen
        let mut reopened = VersionedStore::open(dir.path(), config).expect("reopen");
        let reads: Vec<EdgeCall> = calls
            .iter()
            .filter(|c| matches!(c, EdgeCall::Reads(_)))
            .cloned()
            .collect();
        check_edge_calls(&mut reopened, &reads)?;
    }
}

#[test]
fn writes_at_the_largest_time_read_back_on_both_backends() {
    on_both_backends(config(10, 3), |s| {
        s.put("k", Some("v"), i64::MAX - 5, U);
        assert_eq!(s.delete("k", i64::MAX), Some(record("v", i64::MAX - 5, U)));
        assert_eq!(s.delete("fresh", i64::MAX), None);
        s.get_null("k");
        s.get_null("fresh");
        s.as_of_value("k", i64::MAX - 1, "v", i64::MAX - 5, i64::MAX);
        s.as_of_null("k", i64::MAX);
        s.versions("k", None, None, DESC, &[("v", i64::MAX - 5, i64::MAX)]);
        s.put("k", Some("w"), i64::MAX, U);
        s.get_value("k", "w", i64::MAX);
    });
}
