//! Persistence: reopening restores data, observed stream time, grace decisions and the live
//! segments (§2.9, §Q4, §E10); another configuration is refused (§Q9); a directory opens once.

use super::harness::{
    DESC, HISTORY_RETENTION, SEGMENT_INTERVAL, U, config, kafka_config, on_both_backends, record,
};
use super::model::{Model, Plan, assert_same, observe};
use crate::record::NOT_PUT;
use crate::{Error, RocksOptions, StoreConfig, VersionedStore};

/// The five keys `scripted_writes` writes.
pub(super) fn script_keys() -> Vec<Vec<u8>> {
    (0..5).map(|k| format!("k{k}").into_bytes()).collect()
}

/// A put: key, value (None: a tombstone), timestamp.
pub(super) type Write = (Vec<u8>, Option<Vec<u8>>, i64);

/// A few hundred writes over five keys: mostly in order, some late, some tombstones, a few past
/// the grace period.
pub(super) fn scripted_writes() -> Vec<Write> {
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
    let keys_owned = script_keys();
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
                stored: Some(300_000),
                requested: Some(200_000),
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
                stored: Some(100_000),
                requested: Some(50_000),
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
                requested: Some(60_000),
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

/// Files RocksDB finds damaged at open are [`Error::Corrupt`] naming the store, not a storage
/// error: a caller with another copy of the data rebuilds, where it would retry a failing disk.
#[test]
fn damaged_files_are_corruption_naming_the_store() {
    type Damage = fn(&std::path::Path);
    let truncate: Damage = |sst| {
        let len = std::fs::metadata(sst).expect("stat").len();
        std::fs::File::options()
            .write(true)
            .open(sst)
            .and_then(|f| f.set_len(len / 2))
            .expect("truncate");
    };
    let remove: Damage = |sst| std::fs::remove_file(sst).expect("remove");
    let flip: Damage = |sst| {
        let mut bytes = std::fs::read(sst).expect("read");
        bytes[40] ^= 0xFF; // in the first data block, which the open reads
        std::fs::write(sst, bytes).expect("write");
    };
    let damages = [
        ("truncated", truncate),
        ("removed", remove),
        ("flipped", flip),
    ];
    for (name, damage) in damages {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = RocksOptions::default().with_wal(false);
        let mut store =
            VersionedStore::open_with(dir.path(), kafka_config(), options).expect("open");
        for ts in 0..1000 {
            store
                .put(format!("k{ts}").as_bytes(), Some(b"v"), ts)
                .expect("put");
        }
        drop(store); // flushes into an SST (no write-ahead log)
        let sst = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|entry| entry.expect("entry").path())
            .find(|path| path.extension().is_some_and(|ext| ext == "sst"))
            .expect("an SST");
        damage(&sst);
        let err = VersionedStore::open_with(dir.path(), kafka_config(), options).expect_err(name);
        assert!(
            matches!(&err, Error::Corrupt { location, .. } if location.contains(&dir.path().display().to_string())),
            "{name}: {err:?}"
        );
    }
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

/// The store's metadata entry `name`, read from its files with RocksDB directly.
pub(super) fn raw_metadata(dir: &std::path::Path, name: &[u8]) -> Option<Vec<u8>> {
    let db = rocksdb::DB::open(
        &crate::backend::rocks::db_options(&crate::backend::rocks::budget::Hold::take(), 1 << 20),
        dir,
    )
    .expect("raw open");
    let key = crate::format::key::storage_key(crate::format::key::META_SEGMENT, name);
    db.get(key).expect("raw get")
}

fn set_raw_format_version(dir: &std::path::Path, version: u32) {
    let db = rocksdb::DB::open(
        &crate::backend::rocks::db_options(&crate::backend::rocks::budget::Hold::take(), 1 << 20),
        dir,
    )
    .expect("raw open");
    let key = crate::format::key::storage_key(
        crate::format::key::META_SEGMENT,
        crate::format::meta::FORMAT_VERSION_KEY,
    );
    db.put(key, version.to_be_bytes()).expect("raw put");
}

/// Format 2 differs from 3 only in never deferring metadata: it opens, reads the same, and is
/// version 3 afterwards. Versions this build does not know are refused, naming what it reads.
#[test]
fn a_format_2_store_is_upgraded_and_unknown_formats_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = VersionedStore::open(dir.path(), kafka_config()).expect("open");
        store.put(b"k", Some(b"v"), 10).expect("put");
        store.put(b"k", Some(b"w"), 20).expect("put");
    }
    set_raw_format_version(dir.path(), 2);
    {
        let store = VersionedStore::open(dir.path(), kafka_config()).expect("open format 2");
        assert_eq!(
            store.get_as_of(b"k", 15).expect("get"),
            Some(record("v", 10, 20))
        );
        assert_eq!(store.observed_stream_time(), 20);
    }
    assert_eq!(
        raw_metadata(dir.path(), crate::format::meta::FORMAT_VERSION_KEY),
        Some(3u32.to_be_bytes().to_vec())
    );
    for unknown in [1, 6] {
        set_raw_format_version(dir.path(), unknown);
        let err = VersionedStore::open(dir.path(), kafka_config()).expect_err("refused");
        assert!(
            matches!(err, Error::IncompatibleFormat { found, oldest: 2, supported: 5, .. } if found == unknown),
            "{err:?}"
        );
        assert!(
            err.to_string().ends_with(&format!(
                "has format version {unknown}, this build reads versions 2 to 5"
            )),
            "{err}"
        );
    }
    // format 4 is a store with a latest TTL: without its entry the metadata is damaged
    set_raw_format_version(dir.path(), 4);
    let err = VersionedStore::open(dir.path(), kafka_config()).expect_err("no ttl entry");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
}

fn with_ttl(ttl: Option<i64>) -> StoreConfig {
    kafka_config().with_latest_ttl(ttl).expect("valid ttl")
}

fn refused_ttl(dir: &std::path::Path, stored: Option<i64>, requested: Option<i64>) {
    let err = VersionedStore::open(dir, with_ttl(requested)).expect_err("refused");
    assert!(
        matches!(
            &err,
            Error::IncompatibleConfig { setting: "latest_ttl_ms", stored: s, requested: r, .. }
                if *s == stored && *r == requested
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("never raised or removed"), "{err}");
}

/// §2.15: a store with a latest TTL is format 4 and records it; reopening may add a TTL or
/// lower it, never raise or remove it. A store without one stays format 3.
#[test]
fn a_latest_ttl_is_recorded_and_may_only_be_added_or_lowered() {
    let format = |dir: &std::path::Path| raw_metadata(dir, crate::format::meta::FORMAT_VERSION_KEY);
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = VersionedStore::open(dir.path(), with_ttl(None)).expect("open");
        store.put(b"k", Some(b"v"), 10).expect("put");
    }
    assert_eq!(format(dir.path()), Some(3u32.to_be_bytes().to_vec()));
    {
        let store = VersionedStore::open(dir.path(), with_ttl(Some(50_000))).expect("add");
        assert_eq!(
            store.config().latest_ttl().map(|t| t.ttl_ms()),
            Some(50_000)
        );
    }
    assert_eq!(format(dir.path()), Some(4u32.to_be_bytes().to_vec()));
    refused_ttl(dir.path(), Some(50_000), None);
    refused_ttl(dir.path(), Some(50_000), Some(50_001));
    {
        let mut store = VersionedStore::open(dir.path(), with_ttl(Some(20_000))).expect("lower");
        store.put(b"o", Some(b"x"), 40_000).expect("put");
        // k@10 ended at 20 010 under the lowered TTL
        assert_eq!(store.get(b"k").expect("get"), None);
        assert_eq!(
            store.get_as_of(b"k", 20_009).expect("get"),
            Some(record("v", 10, 20_010))
        );
    }
    refused_ttl(dir.path(), Some(20_000), Some(50_000));
    let store = VersionedStore::open(dir.path(), with_ttl(Some(20_000))).expect("same");
    assert_eq!(store.get(b"o").expect("get"), Some(record("x", 40_000, U)));
}

/// With the write-ahead log, the stream time and key count are recorded by the first write
/// and when the store settles (flush, close); in between the marker says they may lag, and an
/// open after a crash recomputes them, also when the newest write was a tombstone.
#[test]
fn deferred_metadata_is_settled_on_close_and_recomputed_after_a_crash() {
    use crate::format::meta::{METADATA_DEFERRED_KEY, STREAM_TIME_KEY};
    let dir = tempfile::tempdir().expect("tempdir");
    let stream_time = |dir: &std::path::Path| {
        raw_metadata(dir, STREAM_TIME_KEY).map(|b| i64::from_be_bytes(b.try_into().expect("8")))
    };
    let config = config(1_000, 100);
    let mut store = VersionedStore::open(dir.path(), config).expect("open");
    store.put(b"a", Some(b"1"), 10).expect("put");
    store.put(b"b", Some(b"2"), 20).expect("put");
    store.abandon();
    // the first write recorded the metadata exactly, with the marker; the second did not
    assert_eq!(stream_time(dir.path()), Some(10));
    assert!(raw_metadata(dir.path(), METADATA_DEFERRED_KEY).is_some());

    let mut store = VersionedStore::open(dir.path(), config).expect("open after a crash");
    assert_eq!(store.observed_stream_time(), 20);
    assert_eq!(store.stats().expect("stats").latest_keys, 2);
    // the newest write is a tombstone: its time is in no latest value, only in a row
    store.delete(b"a", 450).expect("delete");
    store.put(b"b", Some(b"3"), 30).expect("late put");
    store.abandon();
    let mut store = VersionedStore::open(dir.path(), config).expect("open after a crash");
    assert_eq!(store.observed_stream_time(), 450);
    assert_eq!(store.stats().expect("stats").latest_keys, 1);
    assert_eq!(store.get(b"b").expect("get"), Some(record("3", 30, U)));
    drop(store);
    // a closed store holds its metadata and no marker
    assert_eq!(stream_time(dir.path()), Some(450));
    assert!(raw_metadata(dir.path(), METADATA_DEFERRED_KEY).is_none());

    // a flush settles too
    let mut store = VersionedStore::open(dir.path(), config).expect("open");
    store.put(b"c", Some(b"4"), 500).expect("put");
    store.put(b"c", Some(b"5"), 600).expect("put");
    store.flush().expect("flush");
    store.abandon();
    assert_eq!(stream_time(dir.path()), Some(600));
    assert!(raw_metadata(dir.path(), METADATA_DEFERRED_KEY).is_none());
}

/// A reopened store starts with a cold cache of latest values; the first batch large next to
/// the store fills it in one pass (`LatestCache::warm_for`). Every key's latest value must then
/// be seen by the batch's puts (moved into history, not overwritten) and reads, the empty key
/// (the first in the pass) included, and keys without one must read as absent.
#[test]
fn the_first_large_batch_after_a_reopen_sees_every_latest_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys: [&[u8]; 4] = [b"", b"a", b"ab", b"\xff"];
    for wal in [true, false] {
        let options = RocksOptions::default().with_wal(wal);
        let path = dir.path().join(format!("wal-{wal}"));
        {
            let mut store =
                VersionedStore::open_with(&path, kafka_config(), options).expect("open");
            for (i, key) in keys.iter().enumerate() {
                let ts = 10 + i64::try_from(i).expect("small");
                store.put(key, Some(b"old"), ts).expect("put");
            }
            store.close().expect("close");
        }
        let mut store = VersionedStore::open_with(&path, kafka_config(), options).expect("reopen");
        let new: &[u8] = b"new";
        let outcomes = store
            .put_batch(keys.iter().map(|k| (*k, Some(new), 100)))
            .expect("put_batch");
        assert!(outcomes.iter().all(|o| o.code() == U), "{outcomes:?}");
        for (i, key) in keys.iter().enumerate() {
            let ts = 10 + i64::try_from(i).expect("small");
            assert_eq!(
                store.get_as_of(key, 50).expect("get"),
                Some(record("old", ts, 100)),
                "key {key:?}"
            );
        }
        drop(store);
        let store = VersionedStore::open_with(&path, kafka_config(), options).expect("reopen");
        let mut probe: Vec<&[u8]> = keys.to_vec();
        probe.push(b"never written");
        let read = store
            .get_batch(&probe, crate::AsOf::Latest)
            .expect("get_batch");
        assert_eq!(read.len(), 5);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                store.get(key).expect("get"),
                Some(record("new", 100, U)),
                "{i}"
            );
        }
        assert_eq!(store.get(b"never written").expect("get"), None);
    }
}

/// A panic inside a call (pyo3 raises it in Python as an exception, and the store is used on)
/// leaves the store as the calls before it made it: the failed call's first writes rolled back
/// from the write buffer it ran on, the stream time it advanced restored, and the writes of
/// earlier calls still there, also after a reopen.
#[test]
fn a_call_that_panics_half_way_keeps_what_earlier_calls_wrote() {
    use super::sut::{Backing, Sut};
    for backing in [Backing::Memory, Backing::Logged, Backing::Buffered] {
        let mut sut = Sut::new(kafka_config(), backing);
        let store = sut.store_mut();
        store.put(b"a", Some(b"1"), 10).expect("put");
        store.put(b"a", Some(b"2"), 20).expect("put");
        store.put(b"b", Some(b"x"), 15).expect("put");
        let check = |store: &mut VersionedStore| {
            assert_eq!(store.observed_stream_time(), 20, "{backing:?}");
            assert_eq!(
                store.get(b"a").expect("get"),
                Some(record("2", 20, U)),
                "{backing:?}"
            );
            assert_eq!(
                store.get_as_of(b"a", 12).expect("get"),
                Some(record("1", 10, 20)),
                "{backing:?}"
            );
            assert_eq!(store.get(b"c").expect("get"), None, "{backing:?}");
            let latest = store.stats().expect("stats").latest_keys;
            if backing != Backing::Memory {
                assert_eq!(latest, 2, "{backing:?}");
            }
        };
        crate::put::fault::panic_after(1);
        let rows: [super::harness::PutRow<'_>; 2] = [
            (b"a", Some(b"3"), 30),
            (b"c", Some(b"y"), 4 * SEGMENT_INTERVAL),
        ];
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.put_batch(rows.iter().copied())
        }));
        crate::put::fault::clear();
        assert!(
            outcome.is_err(),
            "{backing:?}: the injected panic did not happen"
        );
        check(sut.store_mut());
        sut.reopen();
        check(sut.store_mut());
    }
}
