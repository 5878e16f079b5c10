//! What the example-based cases share: Kafka's test configuration, expected records as Kafka's
//! test spells them, and [`Check`], a store under test with assertions that name its backend.

use crate::format::key::{LATEST_SEGMENT, storage_key};
use crate::format::segment_value::SegmentRow;
use crate::record::VALID_TO_UNDEFINED;
use crate::view::read_map;
use crate::{ResultOrder, StoreConfig, VersionedRecord, VersionedStore};

/// History retention of Kafka's `RocksDBVersionedStoreTest` (also its grace period).
pub(super) const HISTORY_RETENTION: i64 = 300_000;
/// Its segment interval.
pub(super) const SEGMENT_INTERVAL: i64 = HISTORY_RETENTION / 3;
pub(super) const SI: i64 = SEGMENT_INTERVAL;

/// Kafka's "valid-to undefined" (`-1`): the record is the newest version.
pub(super) const U: i64 = VALID_TO_UNDEFINED;
pub(super) const DESC: ResultOrder = ResultOrder::Descending;
pub(super) const ASC: ResultOrder = ResultOrder::Ascending;

pub(super) fn config(history_retention_ms: i64, segment_interval_ms: i64) -> StoreConfig {
    StoreConfig::new(history_retention_ms, Some(segment_interval_ms)).expect("valid config")
}

pub(super) fn kafka_config() -> StoreConfig {
    config(HISTORY_RETENTION, SEGMENT_INTERVAL)
}

/// A record as Kafka's test spells it: `valid_to == -1` means "newest version".
pub(super) fn record(value: &str, timestamp: i64, valid_to: i64) -> VersionedRecord {
    VersionedRecord {
        value: value.as_bytes().to_vec(),
        timestamp,
        valid_to: (valid_to != U).then_some(valid_to),
    }
}

/// A physical segment row: `(next_timestamp, [(timestamp, value)])`, newest entry first.
pub(super) type Row = (i64, Vec<(i64, Option<Vec<u8>>)>);
/// An expected row as tests spell it: `(next_timestamp, [(timestamp, value)])`.
pub(super) type RowSpec<'a> = (i64, &'a [(i64, Option<&'a str>)]);
/// A put as `put_batch` takes it.
pub(super) type PutRow<'a> = (&'a [u8], Option<&'a [u8]>, i64);

/// One store under test plus the name of its backend, for failure messages.
pub(super) struct Check {
    pub(super) store: VersionedStore,
    pub(super) backend: &'static str,
}

impl Check {
    #[track_caller]
    pub(super) fn put(&mut self, key: &str, value: Option<&str>, timestamp: i64, expected: i64) {
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
    pub(super) fn delete(&mut self, key: &str, timestamp: i64) -> Option<VersionedRecord> {
        self.store
            .delete(key.as_bytes(), timestamp)
            .expect("delete")
    }

    #[track_caller]
    pub(super) fn get_value(&self, key: &str, value: &str, timestamp: i64) {
        let actual = self.store.get(key.as_bytes()).expect("get");
        assert_eq!(
            actual,
            Some(record(value, timestamp, U)),
            "[{}] get({key:?})",
            self.backend
        );
    }

    #[track_caller]
    pub(super) fn get_null(&self, key: &str) {
        let actual = self.store.get(key.as_bytes()).expect("get");
        assert_eq!(actual, None, "[{}] get({key:?})", self.backend);
    }

    #[track_caller]
    pub(super) fn as_of_value(
        &self,
        key: &str,
        as_of: i64,
        value: &str,
        timestamp: i64,
        valid_to: i64,
    ) {
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
    pub(super) fn as_of_null(&self, key: &str, as_of: i64) {
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
    pub(super) fn versions(
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

    /// Every version of `key`: `newest_first`, and its reverse in ascending order.
    #[track_caller]
    pub(super) fn history(&self, key: &str, newest_first: &[(&str, i64, i64)]) {
        self.versions(key, None, None, DESC, newest_first);
        let oldest_first: Vec<_> = newest_first.iter().rev().copied().collect();
        self.versions(key, None, None, ASC, &oldest_first);
    }

    /// What storage holds under `key`: the backend's bytes under the store's write buffer
    /// (an in-memory store keeps one), as the store's own reads see them.
    fn stored(&self, key: &[u8]) -> Option<Vec<u8>> {
        read_map(&self.store.reader(), key, |bytes| {
            Ok(bytes.map(<[u8]>::to_vec))
        })
        .expect("storage read")
    }

    /// The decoded row of `key` in `segment`, as storage holds it.
    pub(super) fn row(&self, segment: i64, key: &str) -> Option<Row> {
        let bytes = self.stored(&storage_key(segment, key.as_bytes()))?;
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
    pub(super) fn assert_row(&self, segment: i64, key: &str, expected: Option<RowSpec<'_>>) {
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
    pub(super) fn has_latest(&self, key: &str) -> bool {
        self.stored(&storage_key(LATEST_SEGMENT, key.as_bytes()))
            .is_some()
    }
}

/// Runs `test` against an in-memory store and against a fresh persistent store.
pub(super) fn on_both_backends(config: StoreConfig, test: impl Fn(&mut Check)) {
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
