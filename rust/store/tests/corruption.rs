//! Damaged bytes on disk are reported (`Corrupt`, naming the segment), never panicked on, and
//! other keys stay readable and writable (§Q10).

use super::harness::{ASC, DESC, SI, U, kafka_config, record};
use crate::VersionedStore;
use crate::error::Error;
use crate::format::key::{LATEST_SEGMENT, segment_of};

/// Overwrites, with a raw `rocksdb::DB`, the value of every key in `segment` whose user key is
/// `key`; `mangle` gets the stored bytes. Returns how many keys were overwritten.
fn mangle_raw(
    dir: &std::path::Path,
    segment: i64,
    key: &[u8],
    mangle: impl Fn(&[u8]) -> Vec<u8>,
) -> usize {
    let db = rocksdb::DB::open(
        &crate::backend::rocks::db_options(&crate::backend::rocks::budget::Hold::take(), 8 << 20),
        dir,
    )
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
