//! Recording accepted writes and replaying them from changelogs (`docs/semantics.md` §2.10,
//! §Q6): a replayed changelog gives the state of the store that recorded it, whatever the
//! chunking, and holds exactly the accepted writes of successful calls. The Kafka scenarios also
//! run through restore (`kafka`); the changelog bytes are tested in `format/changelog.rs`.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::harness::{ASC, Check, PutRow, U, config, on_both_backends};
use super::model::{Model, Plan, assert_same, observe};
use super::properties::{KEYS, Op, apply, arb_config, arb_op, cases};
use super::sut::{Backing, Sut};
use crate::format::changelog::{self, Record};
use crate::record::NOT_PUT;
use crate::{Error, VersionedStore};

const ATTEMPT: &[u8] = &[1; 16];

/// The records of the changelog taken from `store`, as `(key, value, timestamp)`; a
/// stream-time record is `("<stream time>", None, timestamp)`.
fn take_records(store: &mut VersionedStore) -> Vec<(String, Option<String>, i64)> {
    let bytes = store.take_changelog(1, ATTEMPT, ATTEMPT).expect("take");
    let (header, records) = changelog::decode(&bytes, "taken").expect("decodes");
    assert_eq!(header.record_count, records.len() as u64);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("utf-8");
    records
        .iter()
        .map(|r: &Record<'_>| match r {
            Record::Put(w) => (text(w.key), w.value.map(text), w.timestamp),
            Record::StreamTime(t) => ("<stream time>".to_owned(), None, *t),
        })
        .collect()
}

fn recording(check: &mut Check) {
    check.store.set_record_changes(true).expect("record");
}

/// §Q6: rejected writes (older than the grace period) never reach the changelog; a delete is
/// its tombstone write, also when nothing was valid.
#[test]
fn only_accepted_writes_are_recorded() {
    on_both_backends(config(10, 5), |s| {
        recording(s);
        s.put("k", Some("v"), 100, U);
        s.put("k", Some("late"), 50, NOT_PUT);
        assert_eq!(s.store.delete(b"k", 50).expect("delete"), None);
        assert_eq!(s.store.delete(b"j", 95).expect("delete"), None);
        s.put("k", Some("w"), 95, 100);
        let expected = vec![
            ("k".to_owned(), Some("v".to_owned()), 100),
            ("j".to_owned(), None, 95),
            ("k".to_owned(), Some("w".to_owned()), 95),
        ];
        assert_eq!(take_records(&mut s.store), expected, "[{}]", s.backend);
        // the spool starts over after a take
        assert_eq!(take_records(&mut s.store), vec![], "[{}]", s.backend);
    });
}

/// A call that fails writes nothing (§2.8), so it records nothing either.
#[test]
fn a_failed_call_records_nothing() {
    on_both_backends(config(10, 5), |s| {
        recording(s);
        let rows: [PutRow<'_>; 2] = [(b"a", Some(b"1"), 5), (b"b", None, -1)];
        let err = s
            .store
            .put_batch(rows.iter().copied())
            .expect_err("bad row");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert_eq!(take_records(&mut s.store), vec![], "[{}]", s.backend);
    });
}

/// §2.10: replayed writes are not recorded again; writes after the replay are.
#[test]
fn replayed_writes_are_not_recorded_again() {
    let mut source = VersionedStore::in_memory(config(10, 5));
    source.set_record_changes(true).expect("record");
    source.put(b"k", Some(b"v"), 3).expect("put");
    let bytes = source.take_changelog(1, ATTEMPT, ATTEMPT).expect("take");
    on_both_backends(config(10, 5), |s| {
        recording(s);
        s.store
            .apply_changelog(&bytes, "1.changelog", 1)
            .expect("replay");
        s.get_value("k", "v", 3);
        s.put("k", Some("w"), 4, U);
        let expected = vec![("k".to_owned(), Some("w".to_owned()), 4)];
        assert_eq!(take_records(&mut s.store), expected, "[{}]", s.backend);
    });
}

/// §2.14: an advance of stream time is recorded as a stream-time record when it raises the
/// stream time, and not at all when it does not (nor when it fails); the changelog is then
/// format version 2, and its record count counts the advance.
#[test]
fn an_advance_of_stream_time_is_recorded_only_when_it_advances() {
    on_both_backends(config(10, 5), |s| {
        recording(s);
        s.put("k", Some("v"), 100, U);
        assert_eq!(s.store.advance_stream_time(100).expect("advance"), 100);
        assert_eq!(s.store.advance_stream_time(40).expect("advance"), 100);
        assert_eq!(s.store.advance_stream_time(130).expect("advance"), 130);
        let err = s.store.advance_stream_time(-1).expect_err("negative");
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
        s.put("k", Some("late"), 119, NOT_PUT);
        s.put("k", Some("w"), 120, U);
        let bytes = s.store.take_changelog(1, ATTEMPT, ATTEMPT).expect("take");
        assert_eq!(bytes[4..8], 2u32.to_be_bytes(), "[{}]", s.backend);
        let (header, records) = changelog::decode(&bytes, "1").expect("decodes");
        assert_eq!(header.record_count, 3, "[{}]", s.backend);
        assert_eq!(records[1], Record::StreamTime(130), "[{}]", s.backend);
        // the next changelog, of writes alone, is format version 1 again
        s.put("k", Some("x"), 125, U);
        let bytes = s.store.take_changelog(2, ATTEMPT, ATTEMPT).expect("take");
        assert_eq!(bytes[4..8], 1u32.to_be_bytes(), "[{}]", s.backend);
    });
}

/// §2.14: an advance expires segments as a put at its time would, and a replay of its
/// changelog gives the same stream time, expiry and reads, from bytes and from a file.
#[test]
fn a_replayed_advance_reproduces_stream_time_and_expiry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut source = VersionedStore::in_memory(config(10, 5));
    source.set_record_changes(true).expect("record");
    source.put(b"k", Some(b"a"), 1).expect("put");
    source.put(b"k", Some(b"b"), 3).expect("put");
    source.put(b"k", Some(b"c"), 12).expect("put");
    source.delete(b"j", 13).expect("delete");
    // a@1..3 lives in segment 0, b@3..12 in segment 2: an advance to 20 drops segment 0 only
    assert_eq!(source.live_segment_count(), 2);
    assert_eq!(source.advance_stream_time(20).expect("advance"), 20);
    assert_eq!(source.live_segment_count(), 1);
    let versions =
        |store: &VersionedStore| store.versions(b"k", None, None, ASC).expect("versions");
    assert_eq!(versions(&source).len(), 2);
    let path = dir.path().join("1.changelog");
    source
        .take_changelog_to(&path, 1, ATTEMPT, ATTEMPT)
        .expect("take");
    let bytes = std::fs::read(&path).expect("read");
    let mut from_bytes = VersionedStore::in_memory(config(10, 5));
    from_bytes.apply_changelog(&bytes, "1", 2).expect("replay");
    let mut from_file = VersionedStore::open(dir.path().join("db"), config(10, 5)).expect("open");
    from_file
        .apply_changelog_file(&path, "1.changelog", 1)
        .expect("replay");
    for replica in [&from_bytes, &from_file] {
        assert_eq!(replica.observed_stream_time(), 20);
        assert_eq!(replica.live_segment_count(), 1);
        assert_eq!(versions(replica), versions(&source));
        for t in 0..30 {
            assert_eq!(
                replica.get_as_of(b"k", t).ok(),
                source.get_as_of(b"k", t).ok()
            );
        }
    }
    // a late write is rejected alike
    for store in [&mut source, &mut from_bytes, &mut from_file] {
        assert_eq!(store.put(b"k", Some(b"z"), 9).expect("put").code(), NOT_PUT);
    }
}

/// With the write-ahead log, a store defers its stream time; an advance stores no version an
/// open after a crash could recompute it from, so it records the stream time itself.
#[test]
fn an_advance_survives_a_crash_of_a_store_that_defers_its_stream_time() {
    let mut sut = Sut::new(config(10, 5), Backing::Logged);
    sut.store_mut().put(b"k", Some(b"v"), 3).expect("put");
    sut.store_mut().put(b"k", Some(b"w"), 4).expect("put");
    sut.store_mut().advance_stream_time(40).expect("advance");
    sut.crash();
    assert_eq!(sut.store().observed_stream_time(), 40);
    assert_eq!(sut.store().live_segment_count(), 0);
    assert_eq!(
        sut.store_mut()
            .put(b"k", Some(b"x"), 29)
            .expect("put")
            .code(),
        NOT_PUT
    );
}

/// The change feed leaves stream-time records out: they change no key.
#[test]
fn the_change_feed_leaves_stream_time_records_out() {
    let mut store = VersionedStore::in_memory(config(10, 5));
    store.set_record_changes(true).expect("record");
    store.put(b"k", Some(b"v"), 3).expect("put");
    store.advance_stream_time(9).expect("advance");
    store.delete(b"k", 9).expect("delete");
    let bytes = store.take_changelog(1, ATTEMPT, ATTEMPT).expect("take");
    let (header, batch) = crate::read_changelog(&bytes, "1").expect("read");
    assert_eq!((header.record_count, batch.num_rows()), (3, 2));
    assert_eq!(crate::verify_changelog(&bytes, "1").ok(), Some(header));
}

/// Replays a changelog taken from `sut` into a fresh store of the same kind, `chunk` records
/// per write: from bytes in memory, from a spooled file on RocksDB.
fn replica_of(sut: &mut Sut, chunk: usize) -> (VersionedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = sut.store().config();
    let replica = if sut.store().path().is_none() {
        let bytes = sut
            .store_mut()
            .take_changelog(1, ATTEMPT, ATTEMPT)
            .expect("take");
        let mut replica = VersionedStore::in_memory(config);
        replica
            .apply_changelog(&bytes, "1.changelog", chunk)
            .expect("replay");
        replica
    } else {
        let path = dir.path().join("1.changelog");
        sut.store_mut()
            .take_changelog_to(&path, 1, ATTEMPT, ATTEMPT)
            .expect("take");
        let mut replica = VersionedStore::open(dir.path().join("db"), config).expect("open");
        replica
            .apply_changelog_file(&path, "1.changelog", chunk)
            .expect("replay");
        replica
    };
    (replica, dir)
}

proptest! {
    #![proptest_config(cases(64))]

    /// Whatever the writes, a fresh store that replays their changelog reads as the model (and
    /// so as the store that recorded them) at the end.
    #[test]
    fn a_replayed_changelog_reads_as_the_recording_store(
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
        chunk in 1usize..8,
        persistent in any::<bool>(),
    ) {
        let backing = if persistent { Backing::Buffered } else { Backing::Memory };
        let mut model = Model::new(config);
        let mut sut = Sut::new(config, backing);
        sut.store_mut().set_record_changes(true).expect("record");
        // A reopen would end the recording session: the changelog is one session's writes.
        for op in ops.iter().filter(|op| !matches!(op, Op::Reopen | Op::HandOff | Op::Crash)) {
            apply(&mut model, &mut sut, op)?;
        }
        let (replica, _dir) = replica_of(&mut sut, chunk);
        let plan = Plan::wide(model.stream_time, config.history_retention_ms());
        let expected = observe(&model, &KEYS, &plan);
        assert_same(&observe(&replica, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
    }
}
