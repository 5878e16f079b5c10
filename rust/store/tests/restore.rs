//! Recording accepted writes and replaying them from changelogs (`docs/semantics.md` §2.10,
//! §Q6): a replayed changelog gives the state of the store that recorded it, whatever the
//! chunking, and holds exactly the accepted writes of successful calls. The Kafka scenarios also
//! run through restore (`kafka`); the changelog bytes are tested in `format/changelog.rs`.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::harness::{Check, PutRow, U, config, on_both_backends};
use super::model::{Model, Plan, assert_same, observe};
use super::properties::{KEYS, Op, apply, arb_config, arb_op, cases};
use super::sut::{Backing, Sut};
use crate::format::changelog::{self, Record};
use crate::record::NOT_PUT;
use crate::{Error, VersionedStore};

const ATTEMPT: &[u8] = &[1; 16];

/// The records of the changelog taken from `store`, as `(key, value, timestamp)`.
fn take_records(store: &mut VersionedStore) -> Vec<(String, Option<String>, i64)> {
    let bytes = store.take_changelog(1, ATTEMPT, ATTEMPT).expect("take");
    let (header, records) = changelog::decode(&bytes, "taken").expect("decodes");
    assert_eq!(header.record_count, records.len() as u64);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("utf-8");
    records
        .iter()
        .map(|r: &Record<'_>| (text(r.key), r.value.map(text), r.timestamp))
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
        for op in ops.iter().filter(|op| !matches!(op, Op::Reopen | Op::Crash)) {
            apply(&mut model, &mut sut, op)?;
        }
        let (replica, _dir) = replica_of(&mut sut, chunk);
        let plan = Plan::wide(model.stream_time, config.history_retention_ms());
        let expected = observe(&model, &KEYS, &plan);
        assert_same(&observe(&replica, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
    }
}
