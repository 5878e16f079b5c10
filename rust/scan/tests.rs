//! Scans against point reads: on both backends (and RocksDB with its write buffer), every scan
//! returns exactly what `get`, `get_as_of` and `versions` return key by key, over random
//! histories with tombstones, expired segments and keys at the edges of the byte order; scans
//! see the state of their start; closing scans and stores ends them cleanly. The statistics'
//! exact latest-key count is checked here too.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::batches::schema;
use super::*;
use crate::record::VersionedRecord;
use crate::store::tests::sut::{Backing, Sut};
use crate::{StoreConfig, VersionedStore};

/// Keys at the edges: empty, prefixes of each other, 0x00 and 0xFF runs.
const KEYS: [&[u8]; 9] = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"a",
    b"a\x00",
    b"a\xff",
    b"ab",
    b"\xff",
    b"\xff\xff",
];

fn config(retention: i64, interval: i64) -> StoreConfig {
    StoreConfig::new(retention, Some(interval)).expect("config")
}

/// A versions scan without tombstones.
fn versions(from: Option<i64>, to: Option<i64>, order: ResultOrder) -> ScanVersions {
    ScanVersions {
        from,
        to,
        order,
        tombstones: false,
    }
}

/// A scan row: key, value, valid-from, valid-to.
type Row = (Vec<u8>, Vec<u8>, i64, Option<i64>);

/// Every row of a scan, checking each batch's schema and size.
fn collect(scan: Scan, batch_rows: usize) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for batch in scan {
        let batch = batch.map_err(|e| e.to_string())?;
        if batch.schema() != schema() {
            return Err(format!("schema {:?}", batch.schema()));
        }
        if batch.num_rows() == 0 || batch.num_rows() > batch_rows {
            return Err(format!("a batch of {} rows", batch.num_rows()));
        }
        let keys = batch.column(0).as_binary::<i32>();
        let values = batch.column(1).as_binary::<i32>();
        let from = batch.column(2).as_primitive::<Int64Type>();
        let to = batch.column(3).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            let valid_to = (!to.is_null(i)).then(|| to.value(i));
            rows.push((
                keys.value(i).to_vec(),
                values.value(i).to_vec(),
                from.value(i),
                valid_to,
            ));
        }
    }
    Ok(rows)
}

fn rows_of(key: &[u8], records: impl IntoIterator<Item = VersionedRecord>) -> Vec<Row> {
    records
        .into_iter()
        .map(|r| (key.to_vec(), r.value, r.timestamp, r.valid_to))
        .collect()
}

/// The keys of `KEYS` in `range`, ascending.
fn keys_in(range: &KeyRange) -> Vec<&'static [u8]> {
    let mut keys: Vec<&[u8]> = KEYS
        .iter()
        .copied()
        .filter(|k| match range {
            KeyRange::All => true,
            KeyRange::Between { start, end } => {
                start.as_deref().is_none_or(|s| *k >= s) && end.as_deref().is_none_or(|e| *k < e)
            }
            KeyRange::Prefix(p) => k.starts_with(p),
        })
        .collect();
    keys.sort_unstable();
    keys
}

/// What a scan as of `as_of` must return: `get`/`get_as_of` key by key.
fn expected_as_of(store: &VersionedStore, range: &KeyRange, as_of: Option<i64>) -> Vec<Row> {
    keys_in(range)
        .into_iter()
        .flat_map(|key| {
            let found = match as_of {
                None => store.get(key),
                Some(t) => store.get_as_of(key, t),
            };
            rows_of(key, found.expect("get"))
        })
        .collect()
}

/// What a version scan must return: `versions` key by key.
fn expected_versions(
    store: &VersionedStore,
    range: &KeyRange,
    from: Option<i64>,
    to: Option<i64>,
    order: ResultOrder,
) -> Vec<Row> {
    keys_in(range)
        .into_iter()
        .flat_map(|key| rows_of(key, store.versions(key, from, to, order).expect("versions")))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Option<Vec<u8>>, i64),
    Delete(usize, i64),
    Reopen,
    /// To another process with the write buffer (`Sut::hand_off`).
    HandOff,
}

fn arb_op() -> impl Strategy<Value = Op> {
    let dt = prop_oneof![6 => -4i64..=4, 3 => -25i64..=-5, 2 => 5i64..=12, 1 => 25i64..=60];
    let value = prop_oneof![
        1 => Just(None),
        3 => proptest::collection::vec(any::<u8>(), 0..3).prop_map(Some),
    ];
    prop_oneof![
        10 => (0..KEYS.len(), value, dt.clone()).prop_map(|(k, v, dt)| Op::Put(k, v, dt)),
        3 => (0..KEYS.len(), dt).prop_map(|(k, dt)| Op::Delete(k, dt)),
        1 => Just(Op::Reopen),
        1 => Just(Op::HandOff),
    ]
}

fn arb_range() -> impl Strategy<Value = KeyRange> {
    let bound = proptest::option::of(proptest::sample::select(vec![
        &b""[..],
        b"\x00",
        b"\x00\x01",
        b"a",
        b"a\x00",
        b"ab",
        b"b",
        b"\xff",
        b"\xff\xff\xff",
    ]));
    prop_oneof![
        1 => Just(KeyRange::All),
        3 => (bound.clone(), bound).prop_map(|(s, e)| {
            let (s, e) = match (s, e) {
                (Some(s), Some(e)) if e < s => (Some(e), Some(s)),
                other => other,
            };
            KeyRange::Between { start: s.map(<[u8]>::to_vec), end: e.map(<[u8]>::to_vec) }
        }),
        2 => proptest::sample::select(vec![&b""[..], b"\x00", b"a", b"a\xff", b"\xff", b"\xff\xff", b"z"])
            .prop_map(|p| KeyRange::Prefix(p.to_vec())),
    ]
}

fn apply(sut: &mut Sut, ops: &[Op]) {
    for op in ops {
        let stream_time = sut.store_mut().observed_stream_time();
        let at = |dt: i64| (stream_time + dt).max(0);
        match op {
            Op::Put(key, value, dt) => {
                sut.store_mut()
                    .put(KEYS[*key], value.as_deref(), at(*dt))
                    .expect("put");
            }
            Op::Delete(key, dt) => {
                sut.store_mut().delete(KEYS[*key], at(*dt)).expect("delete");
            }
            Op::Reopen => sut.reopen(),
            Op::HandOff => sut.hand_off().expect("hand off"),
        }
    }
}

/// Every scan of `range` with `batch_rows` equals the point reads: as of the latest, as of
/// times around the horizon and the stream time, and versions in several windows and orders.
fn check_scans(sut: &mut Sut, range: &KeyRange, batch_rows: usize) -> Result<(), TestCaseError> {
    let store = sut.store_mut();
    let st = store.observed_stream_time();
    let horizon = st - store.config().history_retention_ms();
    let mut times = vec![None, Some(-1), Some(0), Some(st), Some(st + 5)];
    times.extend((horizon - 2..=horizon + 2).map(Some));
    times.extend((0..st).step_by(7).map(Some));
    // Every stored version's start, and the instant before its end.
    for key in KEYS {
        for r in store
            .versions(key, None, None, ResultOrder::Descending)
            .expect("versions")
        {
            times.push(Some(r.timestamp));
            times.extend(r.valid_to.map(|t| Some(t - 1)));
        }
    }
    for as_of in times {
        let expected = expected_as_of(store, range, as_of);
        let scan = store.scan(range.clone(), as_of, batch_rows).expect("scan");
        prop_assert_eq!(collect(scan, batch_rows), Ok(expected), "as_of {:?}", as_of);
    }
    let windows = [
        (None, None),
        (Some(horizon), None),
        (None, Some(horizon - 1)),
        (Some(horizon - 3), Some(horizon + 3)),
        (Some(st - 2), Some(st - 2)),
        (Some(-5), Some(3)),
    ];
    for (from, to) in windows {
        for order in [ResultOrder::Descending, ResultOrder::Ascending] {
            let expected = expected_versions(store, range, from, to, order);
            let scan = store
                .scan_versions(range.clone(), versions(from, to, order), batch_rows)
                .expect("scan_versions");
            prop_assert_eq!(
                collect(scan, batch_rows),
                Ok(expected),
                "versions {:?}..{:?} {:?}",
                from,
                to,
                order
            );
        }
    }
    Ok(())
}

fn run(
    backing: Backing,
    (retention, interval): (i64, i64),
    ops: &[Op],
    range: &KeyRange,
    batch_rows: usize,
) -> Result<(), TestCaseError> {
    let mut sut = Sut::new(config(retention, interval), backing);
    apply(&mut sut, ops);
    check_scans(&mut sut, range, batch_rows)?;
    // The count of latest values, also after a reopen: exact once settled, and before that
    // low by at most the read-free puts that may have created a key (docs/semantics.md §2.16).
    for _ in 0..2 {
        let latest = KEYS
            .iter()
            .filter(|k| sut.store_mut().get(k).expect("get").is_some())
            .count() as u64;
        let stats = sut.store_mut().stats().expect("stats");
        prop_assert!(stats.latest_keys <= latest, "{stats:?}: {latest}");
        prop_assert!(
            latest <= stats.latest_keys + stats.unsettled_puts,
            "{stats:?}: {latest}"
        );
        sut.store_mut().settle().expect("settle");
        let stats = sut.store_mut().stats().expect("stats");
        prop_assert_eq!((stats.latest_keys, stats.unsettled_puts), (latest, 0));
        prop_assert_eq!(
            stats.live_segments,
            sut.store_mut().live_segment_count() as u64
        );
        sut.reopen();
    }
    Ok(())
}

fn arb_config() -> impl Strategy<Value = (i64, i64)> {
    (
        proptest::sample::select(vec![0i64, 5, 20]),
        proptest::sample::select(vec![1i64, 3, 10]),
    )
}

fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    // Most cases in memory (fast); RocksDB with and without its log (a tiny write buffer).
    #![proptest_config(cases(224))]

    #[test]
    fn scans_equal_point_reads(
        backing in prop_oneof![5 => Just(Backing::Memory), 1 => Just(Backing::Logged), 1 => Just(Backing::Buffered), 1 => Just(Backing::Pushing)],
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
        range in arb_range(),
        batch_rows in 1usize..5,
    ) {
        run(backing, config, &ops, &range, batch_rows)?;
    }
}

const BACKINGS: [Backing; 4] = [
    Backing::Memory,
    Backing::Logged,
    Backing::Buffered,
    Backing::Pushing,
];

/// A store holding `count` keys (`key(i)` = `v` at 10).
fn with_keys(backing: Backing, count: u32) -> Sut {
    let mut sut = Sut::new(config(100, 10), backing);
    for i in 0..count {
        sut.store_mut().put(&key(i), Some(b"v"), 10).expect("put");
    }
    sut
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

#[test]
fn a_scan_sees_the_state_of_its_start() {
    for backing in BACKINGS {
        let mut sut = Sut::new(config(100, 10), backing);
        for i in 0..50 {
            sut.store_mut().put(&key(i), Some(b"old"), 10).expect("put");
        }
        sut.store_mut()
            .put(&key(7), Some(b"older"), 5)
            .expect("put");
        let expected = vec![(key(7), b"older".to_vec(), 5, Some(10))];
        assert_eq!(
            sut.store_mut().get_as_of(&key(7), 7).ok(),
            Some(Some(VersionedRecord {
                value: b"older".to_vec(),
                timestamp: 5,
                valid_to: Some(10),
            }))
        );
        let expected_latest: Vec<Row> = (0..50)
            .map(|i| (key(i), b"old".to_vec(), 10, None))
            .collect();
        let as_of = sut
            .store_mut()
            .scan(KeyRange::All, Some(7), 3)
            .expect("scan");
        let latest = sut.store_mut().scan(KeyRange::All, None, 1).expect("scan");
        // Rewrites, deletes, new keys, and enough stream time to drop every segment.
        for i in 0..60 {
            sut.store_mut().put(&key(i), Some(b"new"), 20).expect("put");
        }
        sut.store_mut().delete(&key(3), 21).expect("delete");
        sut.store_mut()
            .put(b"zzz", Some(b"late"), 1_000)
            .expect("put");
        assert_eq!(collect(latest, 1), Ok(expected_latest), "{backing:?}");
        assert_eq!(collect(as_of, 3), Ok(expected), "{backing:?}");
        assert_eq!(sut.store_mut().get(&key(3)).expect("get"), None);
    }
}

#[test]
fn closing_the_store_ends_its_scans() {
    for backing in BACKINGS {
        let mut sut = with_keys(backing, 20);
        let mut scan = sut.store_mut().scan(KeyRange::All, None, 2).expect("scan");
        let idle = sut.store_mut().scan(KeyRange::All, None, 2).expect("scan");
        assert!(matches!(scan.next(), Some(Ok(batch)) if batch.num_rows() == 2));
        sut.take().close().expect("close");
        assert!(matches!(scan.next(), Some(Err(Error::Closed))));
        assert!(matches!(scan.next(), Some(Err(Error::Closed))));
        scan.close();
        assert!(scan.next().is_none());
        drop(idle);
        // The directory is free again: the scans' threads let go of RocksDB.
        if backing != Backing::Memory {
            sut.reopen();
            sut.store_mut().settle().expect("settle");
            assert_eq!(sut.store_mut().stats().expect("stats").latest_keys, 20);
        }
    }
}

#[test]
fn a_closed_or_dropped_scan_stops_early() {
    for backing in BACKINGS {
        let mut sut = with_keys(backing, 100);
        let mut scan = sut.store_mut().scan(KeyRange::All, None, 10).expect("scan");
        assert!(matches!(scan.next(), Some(Ok(_))));
        scan.close();
        assert!(scan.next().is_none());
        let dropped = sut.store_mut().scan(KeyRange::All, None, 1).expect("scan");
        drop(dropped);
        // Writes go on, and closing the store does not wait for anything left behind.
        sut.store_mut().put(b"after", Some(b"v"), 11).expect("put");
        sut.take().close().expect("close");
    }
}

#[test]
fn batches_hold_at_most_batch_rows_and_split_a_keys_versions() {
    for backing in BACKINGS {
        let mut sut = Sut::new(config(1_000, 10), backing);
        for t in 0..25i64 {
            sut.store_mut()
                .put(b"k", Some(&t.to_be_bytes()), t)
                .expect("put");
        }
        let scan = sut
            .store_mut()
            .scan_versions(
                KeyRange::All,
                versions(None, None, ResultOrder::Ascending),
                4,
            )
            .expect("scan");
        let sizes: Vec<usize> = scan.map(|b| b.expect("batch").num_rows()).collect();
        assert_eq!(sizes, [4, 4, 4, 4, 4, 4, 1], "{backing:?}");
        let empty = sut
            .store_mut()
            .scan(KeyRange::Prefix(b"x".to_vec()), None, 4)
            .expect("scan");
        assert_eq!(empty.count(), 0);
    }
}

#[test]
fn bad_arguments_name_the_argument() {
    let named = |e: Error| match e {
        Error::InvalidArgument { argument, .. } => argument,
        other => panic!("{other}"),
    };
    let err = KeyRange::new(Some(b"a".to_vec()), None, Some(b"a".to_vec()));
    assert_eq!(err.map_err(named), Err("prefix"));
    let err = KeyRange::new(Some(b"b".to_vec()), Some(b"a".to_vec()), None);
    assert_eq!(err.map_err(named), Err("end"));
    assert_eq!(
        KeyRange::new(Some(b"a".to_vec()), Some(b"a".to_vec()), None).ok(),
        Some(KeyRange::Between {
            start: Some(b"a".to_vec()),
            end: Some(b"a".to_vec())
        })
    );
    let mut store = VersionedStore::in_memory(config(10, 1));
    let err = store.scan(KeyRange::All, None, 0).map(drop);
    assert_eq!(err.map_err(named), Err("batch_rows"));
    let err = store
        .scan_versions(
            KeyRange::All,
            versions(Some(2), Some(1), ResultOrder::Descending),
            1,
        )
        .map(drop);
    assert_eq!(err.map_err(named), Err("from_time"));
}

#[test]
fn prefix_bounds_stop_before_the_next_prefix() {
    let bounds = |p: &[u8]| KeyRange::Prefix(p.to_vec()).bounds();
    assert_eq!(bounds(b"ab"), (b"ab".to_vec(), Some(b"ac".to_vec())));
    assert_eq!(
        bounds(b"a\xff\xff"),
        (b"a\xff\xff".to_vec(), Some(b"b".to_vec()))
    );
    assert_eq!(bounds(b"\xff\xff"), (b"\xff\xff".to_vec(), None));
    assert_eq!(bounds(b""), (Vec::new(), None));
}

#[test]
fn latest_key_count_is_kept_and_counted_for_older_stores() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(100, 10);
    {
        let mut store = VersionedStore::open(dir.path(), cfg).expect("open");
        store.put(b"a", Some(b"1"), 1).expect("put");
        store.put(b"b", Some(b"1"), 2).expect("put");
        store.put(b"b", None, 3).expect("put");
        store.put(b"c", None, 4).expect("put");
        store.put(b"c", Some(b"1"), 2).expect("put");
        store.put(b"d", Some(b"1"), 5).expect("put");
        store.put(b"d", None, 5).expect("put");
        store.put(b"e", Some(b"1"), 6).expect("put");
        store.put(b"e", Some(b"2"), 7).expect("put");
        let stats = store.stats().expect("stats");
        assert_eq!(stats.latest_keys, 2);
        assert_eq!(stats.observed_stream_time, 7);
        assert!(stats.disk_bytes > 0, "{stats:?}");
    }
    // A store written before the count existed: the entry is missing, and is counted on open.
    {
        let options = crate::backend::rocks::db_options(
            &crate::backend::rocks::budget::Hold::take(),
            1 << 20,
        );
        let db = rocksdb::DB::open(&options, dir.path()).expect("raw open");
        db.delete(crate::format::key::storage_key(
            crate::format::key::META_SEGMENT,
            crate::format::meta::LATEST_KEYS_KEY,
        ))
        .expect("delete");
    }
    let mut store = VersionedStore::open(dir.path(), cfg).expect("open");
    assert_eq!(store.stats().expect("stats").latest_keys, 2);
}

#[test]
fn in_memory_statistics_are_exact() {
    let mut store = VersionedStore::in_memory(config(100, 10));
    for i in 0..10 {
        store.put(&key(i), Some(b"a"), 5).expect("put");
        store.put(&key(i), Some(b"b"), 15).expect("put");
        store.put(&key(i), Some(b"c"), 25).expect("put");
    }
    store.delete(&key(0), 30).expect("delete");
    let stats = store.stats().expect("stats");
    assert_eq!(stats.latest_keys, 9);
    // Each key has a row in segments 1 and 2; key 0 one more in segment 3 (its tombstone).
    assert_eq!(stats.history_rows, 21);
    assert_eq!(stats.live_segments, 3);
    assert_eq!((stats.disk_bytes, stats.memtable_bytes), (0, 0));
}
