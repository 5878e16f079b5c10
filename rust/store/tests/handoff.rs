//! A store handed to another process with its write buffer (`store/handoff.rs`): the directory
//! and the saved file are the store; a file that is not what was saved is corruption naming it.
//! Its memtables flushed ahead of the handoff, the buffer stays and every read is the same.

use std::path::{Path, PathBuf};

use super::harness::config;
use super::model::{Model, Plan, assert_same, observe};
use super::persistence::{Write, script_keys, scripted_writes};
use crate::{Error, RocksOptions, SavedBuffer, StoreConfig, VersionedStore};

fn buffered() -> RocksOptions {
    RocksOptions::default().with_wal(false)
}

/// A store without a write-ahead log holding `writes`, most of them still in its write buffer.
fn store_with(dir: &Path, config: StoreConfig, writes: &[Write]) -> VersionedStore {
    let mut store = VersionedStore::open_with(dir, config, buffered()).expect("open");
    for (key, value, ts) in writes {
        store.put(key, value.as_deref(), *ts).expect("put");
    }
    store
}

/// `err` is the refusal of an argument, naming `buffer`.
fn assert_names_buffer(err: &Error) {
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                argument: "buffer",
                ..
            }
        ),
        "{err:?}"
    );
}

fn saved_beside(dir: &Path) -> PathBuf {
    dir.with_extension("buffer")
}

#[test]
fn a_store_handed_off_with_its_buffer_reads_and_writes_as_before() {
    let config = config(10_000, 500);
    let dir = tempfile::tempdir().expect("tempdir");
    let keys_owned = script_keys();
    let keys: Vec<&[u8]> = keys_owned.iter().map(Vec::as_slice).collect();
    let writes = scripted_writes();
    let (first, second) = writes.split_at(200);
    let mut model = Model::new(config);
    for (key, value, ts) in first {
        model.put(key, value.as_deref(), *ts);
    }
    let store = store_with(dir.path(), config, first);
    let plan = Plan::wide(model.stream_time, 10_000);
    let before = observe(&store, &keys, &plan);
    let segments = store.live_segment_count();
    assert!(segments > 15, "history spans many segments: {segments}");

    let file = saved_beside(dir.path());
    let saved = store
        .close_keeping_buffer(&file)
        .expect("close keeping the buffer");
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), saved.bytes);
    assert!(
        saved.bytes > 2_000,
        "the buffer left in the file: {saved:?}"
    );

    let mut store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
    store.load_buffer(&file, saved).expect("load");
    assert_eq!(store.observed_stream_time(), model.stream_time);
    assert_eq!(store.live_segment_count(), segments);
    assert_same(&observe(&store, &keys, &plan), &before).expect("same reads after the handoff");

    for (key, value, ts) in second {
        let expected = model.put(key, value.as_deref(), *ts);
        let outcome = store.put(key, value.as_deref(), *ts).expect("put");
        assert_eq!(outcome.code(), expected, "put at {ts}");
    }
    let plan = Plan::wide(model.stream_time, 10_000);
    assert_same(
        &observe(&store, &keys, &plan),
        &observe(&model, &keys, &plan),
    )
    .expect("the store matches the model after more writes");
    drop(store);
    let store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
    assert_same(
        &observe(&store, &keys, &plan),
        &observe(&model, &keys, &plan),
    )
    .expect("and after a close that wrote the buffer into the directory");
}

#[test]
fn a_saved_buffer_that_is_not_what_was_saved_is_corruption_naming_the_file() {
    type Damage = fn(&Path, SavedBuffer) -> SavedBuffer;
    let damages: [(&str, Damage); 5] = [
        ("truncated", |file, saved| {
            let bytes = std::fs::read(file).expect("read");
            std::fs::write(file, &bytes[..bytes.len() / 2]).expect("write");
            saved
        }),
        ("flipped", |file, saved| {
            let mut bytes = std::fs::read(file).expect("read");
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x20;
            std::fs::write(file, bytes).expect("write");
            saved
        }),
        ("emptied", |file, saved| {
            std::fs::write(file, b"").expect("write");
            saved
        }),
        ("another checksum", |_, saved| SavedBuffer {
            crc32: saved.crc32 ^ 1,
            ..saved
        }),
        ("another size", |_, saved| SavedBuffer {
            bytes: saved.bytes + 1,
            ..saved
        }),
    ];
    let config = config(10_000, 500);
    for (name, damage) in damages {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = saved_beside(dir.path());
        let saved = store_with(dir.path(), config, &scripted_writes())
            .close_keeping_buffer(&file)
            .expect("close keeping the buffer");
        let expected = damage(&file, saved);
        let mut store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
        let err = store.load_buffer(&file, expected).expect_err(name);
        assert!(
            matches!(&err, Error::Corrupt { location, .. } if location.contains(&file.display().to_string())),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn a_saved_buffer_loads_only_into_a_store_just_opened_without_a_log() {
    let config = config(10_000, 500);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = saved_beside(dir.path());
    let saved = store_with(dir.path(), config, &scripted_writes()[..50])
        .close_keeping_buffer(&file)
        .expect("close keeping the buffer");
    let mut store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
    store.put(b"k", Some(b"v"), 1).expect("put");
    let err = store
        .load_buffer(&file, saved)
        .expect_err("a store holding writes");
    assert_names_buffer(&err);

    let other = tempfile::tempdir().expect("tempdir");
    let logged = VersionedStore::open_with(other.path(), config, RocksOptions::default());
    let err = logged
        .expect("open")
        .close_keeping_buffer(&file)
        .expect_err("with a log");
    assert_names_buffer(&err);
    let err = VersionedStore::in_memory(config)
        .close_keeping_buffer(&file)
        .expect_err("in memory");
    assert_names_buffer(&err);
}

#[test]
fn a_buffer_that_cannot_be_saved_is_written_into_the_directory() {
    let config = config(10_000, 500);
    let dir = tempfile::tempdir().expect("tempdir");
    let keys_owned = script_keys();
    let keys: Vec<&[u8]> = keys_owned.iter().map(Vec::as_slice).collect();
    let mut model = Model::new(config);
    for (key, value, ts) in scripted_writes() {
        model.put(&key, value.as_deref(), ts);
    }
    let file = saved_beside(dir.path());
    std::fs::write(&file, b"taken").expect("write"); // a file is never saved over
    let err = store_with(dir.path(), config, &scripted_writes())
        .close_keeping_buffer(&file)
        .expect_err("the name is taken");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
    let plan = Plan::wide(model.stream_time, 10_000);
    assert_same(
        &observe(&store, &keys, &plan),
        &observe(&model, &keys, &plan),
    )
    .expect("every write is in the directory");
}

#[test]
fn flushing_the_memtables_alone_keeps_the_buffer_and_every_read() {
    let config = config(10_000, 500);
    let keys_owned = script_keys();
    let keys: Vec<&[u8]> = keys_owned.iter().map(Vec::as_slice).collect();
    let writes = scripted_writes();
    let (first, second) = writes.split_at(200);
    let mut model = Model::new(config);
    for (key, value, ts) in &writes {
        model.put(key, value.as_deref(), *ts);
    }
    let plan = Plan::wide(model.stream_time, 10_000);
    let expected = observe(&model, &keys, &plan);
    for handed_over in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        // The first writes in the memtables, the rest in the write buffer.
        let mut store = store_with(dir.path(), config, first);
        let empty = store.memtable_bytes().expect("memtable bytes");
        store.release_write_buffer().expect("write the buffer");
        for (key, value, ts) in second {
            store.put(key, value.as_deref(), *ts).expect("put");
        }
        let in_memtables = store.memtable_bytes().expect("memtable bytes");
        let in_buffer = store.write_buffer_bytes();
        assert!(
            in_memtables > empty && in_buffer > 0,
            "{in_memtables}, {in_buffer}"
        );

        store.flush_memtables().expect("flush the memtables");
        let flushed = store.memtable_bytes().expect("memtable bytes");
        assert!(flushed <= empty, "{flushed} after the flush, {empty} empty");
        assert_eq!(store.write_buffer_bytes(), in_buffer, "the buffer is left");
        assert_same(&observe(&store, &keys, &plan), &expected).expect("same reads after it");

        if handed_over {
            let file = saved_beside(dir.path());
            let saved = store
                .close_keeping_buffer(&file)
                .expect("close keeping the buffer");
            store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
            store.load_buffer(&file, saved).expect("load");
            assert_same(&observe(&store, &keys, &plan), &expected).expect("after the handoff");
        }
        store.close().expect("close");
        let store = VersionedStore::open_with(dir.path(), config, buffered()).expect("reopen");
        assert_eq!(store.observed_stream_time(), model.stream_time);
        assert_same(&observe(&store, &keys, &plan), &expected).expect("same reads reopened");
    }
}

#[test]
fn an_in_memory_store_has_no_memtable_to_flush() {
    let mut store = VersionedStore::in_memory(config(10_000, 500));
    store.put(b"k", Some(b"v"), 1).expect("put");
    store.flush_memtables().expect("flush the memtables");
    assert_eq!(store.memtable_bytes().expect("memtable bytes"), 0);
    assert_eq!(
        store.get(b"k").expect("get").map(|r| r.value),
        Some(b"v".to_vec())
    );
}
