//! Failed writes to storage (§2.8): a store either persists what it acknowledged or says it
//! did not. Failures are injected into the RocksDB backend (`backend/faults.rs`) for the stores
//! under one test's directory, so tests running side by side are not affected.

use std::path::Path;

use super::harness::config;
use crate::backend::faults::fail_storage_writes;
use crate::{Error, RocksOptions, StoreConfig, VersionedStore};

/// Small memtables and a write buffer of a quarter of one: the buffer is written often.
fn without_log() -> RocksOptions {
    RocksOptions {
        write_buffer_bytes: Some(1 << 20),
        buffer_bytes: Some(1 << 18),
        ..RocksOptions::default().with_wal(false)
    }
}

/// Clears the injected failures of `dir` when the test ends, passed or not.
struct Injected<'a>(&'a Path);

impl<'a> Injected<'a> {
    fn after(dir: &'a Path, writes: u64) -> Self {
        fail_storage_writes(Some(writes), Some(dir));
        Self(dir)
    }
}

impl Drop for Injected<'_> {
    fn drop(&mut self) {
        fail_storage_writes(None, Some(self.0));
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Puts `count` keys from `first` on, each with a 200-byte value at time `first + i`, in
/// batches of 100 rows; stops at the first error and returns it with the keys acknowledged.
fn put_keys(store: &mut VersionedStore, first: u32, count: u32) -> (u32, Option<Error>) {
    let value = vec![7u8; 200];
    let mut acknowledged = 0;
    for batch in (first..first + count).collect::<Vec<_>>().chunks(100) {
        let keys: Vec<Vec<u8>> = batch.iter().map(|&i| key(i)).collect();
        let rows = keys
            .iter()
            .zip(batch)
            .map(|(k, &i)| (k.as_slice(), Some(value.as_slice()), i64::from(i)));
        if let Err(error) = store.put_batch(rows.collect::<Vec<_>>().into_iter()) {
            return (acknowledged, Some(error));
        }
        acknowledged += u32::try_from(batch.len()).expect("small batch");
    }
    (acknowledged, None)
}

/// Opens a store in `dir` without a write-ahead log and puts keys `0..count` into it.
fn filled_without_log(dir: &Path, count: u32) -> VersionedStore {
    let mut store = VersionedStore::open_with(dir, lasting(), without_log()).expect("open");
    assert_eq!(put_keys(&mut store, 0, count).0, count);
    store
}

fn reopen_without_log(dir: &Path) -> VersionedStore {
    VersionedStore::open_with(dir, lasting(), without_log()).expect("reopen")
}

/// Settings under which nothing a test writes expires.
fn lasting() -> StoreConfig {
    config(1 << 40, 1 << 30)
}

#[test]
fn a_failed_write_buffer_write_leaves_the_store_failed_until_reopened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = filled_without_log(dir.path(), 1_000);
    store.flush().expect("flush");

    let injected = Injected::after(dir.path(), 0);
    let (acknowledged, error) = put_keys(&mut store, 1_000, 20_000);
    let error = error.expect("the buffer's write fails once it is full");
    assert!(
        acknowledged > 0,
        "calls before the full buffer are accepted"
    );
    assert!(error.to_string().contains("injected I/O error"), "{error}");

    // Every later call says the store failed, reads included: they would serve lost writes.
    let failed = |e: Error| matches!(e, Error::Failed { .. });
    assert!(failed(store.get(&key(1_000)).expect_err("get")));
    assert!(failed(store.get_as_of(&key(0), 5).expect_err("get_as_of")));
    assert!(failed(put_keys(&mut store, 50_000, 1).1.expect("put")));
    assert!(failed(store.stats().expect_err("stats")));
    assert!(failed(store.flush().expect_err("flush")));
    let message = store.check_usable().expect_err("failed").to_string();
    assert!(message.contains("must be reopened"), "{message}");
    assert!(failed(store.close().expect_err("close")));
    drop(injected);

    // Reopened, the store holds what storage holds: the flushed keys, none of the lost ones,
    // and a stream time that counts only those.
    let mut store = reopen_without_log(dir.path());
    assert!(store.get(&key(999)).expect("get").is_some());
    assert_eq!(store.observed_stream_time(), 999);
    assert!(store.get(&key(1_000)).expect("get").is_none());
    assert_eq!(store.stats().expect("stats").latest_keys, 1_000);
}

#[test]
fn close_without_a_log_reports_a_failed_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = filled_without_log(dir.path(), 100);
    let injected = Injected::after(dir.path(), 1);
    // The buffer's write succeeds; the flush of the memtable it went to fails.
    let error = store
        .close()
        .expect_err("close must report the failed flush");
    assert!(error.to_string().contains("injected I/O error"), "{error}");
    drop(injected);
}

#[test]
fn close_without_a_log_makes_every_acknowledged_write_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = filled_without_log(dir.path(), 3_000);
    store.close().expect("close");
    // No write-ahead log: only SST files can hold them now.
    let mut store = reopen_without_log(dir.path());
    assert_eq!(store.stats().expect("stats").latest_keys, 3_000);
    assert!(store.get(&key(2_999)).expect("get").is_some());
}

#[test]
fn with_the_log_a_failed_write_fails_only_its_own_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = lasting();
    let mut store = VersionedStore::open(dir.path(), config).expect("open");
    assert_eq!(put_keys(&mut store, 0, 500).0, 500);
    let injected = Injected::after(dir.path(), 0);
    let (_, error) = put_keys(&mut store, 500, 100);
    assert!(matches!(error, Some(Error::Io { .. })), "{error:?}");
    drop(injected);

    // Nothing of the failed call is visible, everything before it is, and writing goes on.
    assert!(store.get(&key(500)).expect("get").is_none());
    assert!(store.get(&key(499)).expect("get").is_some());
    assert_eq!(store.observed_stream_time(), 499);
    assert_eq!(put_keys(&mut store, 500, 100).0, 100);
    store.close().expect("close");
    let mut store = VersionedStore::open(dir.path(), config).expect("reopen");
    assert_eq!(store.stats().expect("stats").latest_keys, 600);
}

#[test]
fn failures_injected_under_one_directory_spare_stores_elsewhere() {
    let (failing, spared) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let config = lasting();
    let mut store = VersionedStore::open(spared.path(), config).expect("open");
    let _injected = Injected::after(failing.path(), 0);
    assert_eq!(put_keys(&mut store, 0, 200).0, 200);
    store.close().expect("close");
}
