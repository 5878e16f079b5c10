//! Persistence: reopening restores data, observed stream time, grace decisions and the live
//! segments (§2.9, §Q4, §E10); another configuration is refused (§Q9); a directory opens once.

use super::harness::{
    DESC, HISTORY_RETENTION, SEGMENT_INTERVAL, U, config, kafka_config, on_both_backends, record,
};
use super::model::{Model, Plan, assert_same, observe};
use crate::record::NOT_PUT;
use crate::{Error, StoreConfig, VersionedStore};

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
        s.history("k", &[]);
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

/// A store reopened once per micro-batch keeps a bounded number of RocksDB info logs.
#[test]
fn reopening_many_times_keeps_few_info_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for ts in 0..12 {
        let mut store = VersionedStore::open(dir.path(), kafka_config()).expect("open");
        store.put(b"k", Some(b"v"), ts).expect("put");
    }
    let logs = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("LOG"))
        .count();
    assert!(logs <= 3, "{logs} info logs");
}
