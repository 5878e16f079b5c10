//! The read-free path of in-order puts (docs/semantics.md §2.16): a put at or after stream time
//! whose key's latest value the cache does not know writes a push, and the version it replaces
//! stays in the latest-value entry until a put reads the entry, a merge finds its history long,
//! or the store settles. Every read answers as the model does all along.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::harness::config;
use super::model::{Model, Plan, describe};
use super::persistence::raw_metadata;
use super::properties::{KEYS, Op, apply, arb_key, arb_value, cases, compare};
use super::sut::{Backing, Sut};
use crate::backend::rocks::histories::LONG_HISTORY;
use crate::format::meta;
use crate::{AsOf, StoreConfig};

const PUSHING: [Backing; 2] = [Backing::Pushing, Backing::PushingBuffered];

fn stats(sut: &mut Sut) -> crate::StoreStats {
    sut.store_mut().stats().expect("stats")
}

fn format_version(sut: &mut Sut) -> Option<u32> {
    let dir = sut.path().expect("persistent");
    sut.close();
    let bytes = raw_metadata(&dir, meta::FORMAT_VERSION_KEY)?;
    sut.reopen();
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Puts `versions` values of every key of `KEYS` in time order, one call per round, into both
/// the store and the model.
fn put_rounds(sut: &mut Sut, model: &mut Model, versions: i64) {
    for round in 0..versions {
        let rows: Vec<_> = KEYS
            .iter()
            .zip(0i64..)
            .map(|(key, i)| {
                (
                    *key,
                    Some(&b"vw"[..usize::try_from(i % 3).unwrap_or(0)]),
                    round * 10 + i,
                )
            })
            .collect();
        for &(key, value, ts) in &rows {
            model.put(key, value, ts);
        }
        let outcomes = sut
            .store_mut()
            .put_batch(rows.iter().copied())
            .expect("put");
        assert!(
            outcomes
                .iter()
                .all(|o| o.code() == crate::VALID_TO_UNDEFINED)
        );
    }
}

fn same(sut: &Sut, model: &Model, retention: i64) {
    let plan = Plan::wide(model.stream_time, retention);
    compare(sut, model, &KEYS, &plan).expect("reads as the model");
}

#[test]
fn in_order_puts_push_and_read_as_the_model_before_and_after_settling() {
    for backing in PUSHING {
        for (retention, interval) in [(1_000, 10), (25, 10)] {
            let config = config(retention, interval);
            let mut sut = Sut::new(config, backing);
            let mut model = Model::new(config);
            put_rounds(&mut sut, &mut model, 6);
            let before = stats(&mut sut);
            assert!(before.unsettled_puts > 0, "{backing:?}: {before:?}");
            assert!(before.latest_keys <= model.counted_keys());
            same(&sut, &model, retention);
            assert_eq!(format_version(&mut sut), Some(meta::FORMAT_VERSION));
            same(&sut, &model, retention);
            sut.store_mut().settle().expect("settle");
            let after = stats(&mut sut);
            assert_eq!(
                (after.latest_keys, after.unsettled_puts),
                (4, 0),
                "{backing:?}"
            );
            same(&sut, &model, retention);
            sut.reopen();
            same(&sut, &model, retention);
            assert_eq!(stats(&mut sut).latest_keys, 4);
        }
    }
}

#[test]
fn a_put_that_reads_settles_the_entry_then_places_as_kafka() {
    for backing in PUSHING {
        let config = config(1_000, 10);
        let mut sut = Sut::new(config, backing);
        let mut model = Model::new(config);
        put_rounds(&mut sut, &mut model, 4);
        // Below stream time: into the unsettled history of every key, and a tombstone.
        for (key, i) in KEYS.iter().zip(0i64..) {
            let ts = 15 + i;
            let expected = model.put(key, Some(b"late"), ts);
            let got = sut.store_mut().put(key, Some(b"late"), ts).expect("put");
            assert_eq!(got.code(), expected, "{backing:?} {key:?}");
        }
        let expected = model.delete(KEYS[1], 100);
        assert_eq!(
            sut.store_mut().delete(KEYS[1], 100).expect("delete"),
            expected
        );
        same(&sut, &model, 1_000);
        sut.reopen();
        same(&sut, &model, 1_000);
    }
}

/// A key put again and again without a read: merges note its long history, and the next
/// write settles it (a read of it, every `LONG_HISTORY` puts or so), so no entry keeps growing.
#[test]
fn a_long_unsettled_history_is_settled_by_the_next_write() {
    let config = config(1_000_000, 1_000);
    let mut sut = Sut::new(config, Backing::Pushing);
    let mut model = Model::new(config);
    let hot = KEYS[1];
    for t in 0..4 * i64::try_from(LONG_HISTORY).expect("small") {
        model.put(KEYS[0], Some(b"other"), t * 2);
        sut.store_mut()
            .put(KEYS[0], Some(b"other"), t * 2)
            .expect("put");
        model.put(hot, Some(b"x"), t * 2 + 1);
        sut.store_mut()
            .put(hot, Some(b"x"), t * 2 + 1)
            .expect("put");
        // A read merges the entry as RocksDB reads it (pushes on a stored base).
        sut.store_mut().get(hot).expect("get");
    }
    let history = |sut: &mut Sut| {
        let key = crate::format::key::storage_key(crate::format::key::LATEST_SEGMENT, hot);
        let mut versions = 0;
        sut.store_mut()
            .backend
            .get_with(&key, &mut |bytes| {
                let latest = crate::format::latest_value::decode(bytes.expect("entry"))?;
                versions = latest.history().count();
                Ok(())
            })
            .expect("read");
        versions
    };
    assert!(
        history(&mut sut) <= LONG_HISTORY + 1,
        "{}",
        history(&mut sut)
    );
    same(&sut, &model, 1_000_000);
}

/// A store with a latest TTL takes no read-free put: one opened with a TTL after pushes is
/// settled at the open and recorded as format 4.
#[test]
fn opening_with_a_latest_ttl_settles_the_store() {
    let config = config(1_000, 10);
    let mut sut = Sut::new(config, Backing::Pushing);
    let mut model = Model::new(config);
    put_rounds(&mut sut, &mut model, 5);
    assert!(stats(&mut sut).unsettled_puts > 0);
    let ttl = StoreConfig::new(1_000, Some(10))
        .and_then(|c| c.with_latest_ttl(Some(1_000_000)))
        .expect("valid");
    let dir = sut.path().expect("persistent");
    sut.close();
    {
        let options = Backing::Pushing.options().expect("persistent");
        let mut store = crate::VersionedStore::open_with(&dir, ttl, options).expect("open");
        let s = store.stats().expect("stats");
        assert_eq!((s.latest_keys, s.unsettled_puts), (4, 0));
        let at = store.get_batch(&KEYS, AsOf::At(21)).expect("read");
        for (i, key) in KEYS.iter().enumerate() {
            assert_eq!(at.get(i), model.as_of(key, 21), "{key:?}");
        }
        store.put(KEYS[0], Some(b"new"), 100).expect("put");
        assert_eq!(store.stats().expect("stats").unsettled_puts, 0);
    }
    assert_eq!(
        raw_metadata(&dir, meta::FORMAT_VERSION_KEY),
        Some(meta::FORMAT_WITH_TTL.to_be_bytes().to_vec())
    );
}

/// Generated calls, mostly in order (the read-free path) with late ones among them (the
/// path that reads and settles), settles, reopens, hand-offs and crashes between a put and
/// its settling.
fn arb_in_order_op() -> impl Strategy<Value = Op> {
    let dt = prop_oneof![8 => 0i64..=3, 2 => -8i64..=-1, 1 => 4i64..=15];
    let batch = proptest::collection::vec((arb_key(), arb_value(), dt.clone()), 1..8);
    prop_oneof![
        10 => (arb_key(), arb_value(), dt.clone()).prop_map(|(key, value, dt)| Op::Put { key, value, dt }),
        1 => (arb_key(), dt).prop_map(|(key, dt)| Op::Delete { key, dt }),
        4 => batch.prop_map(Op::PutBatch),
        1 => Just(Op::Settle),
        1 => Just(Op::Reopen),
        1 => Just(Op::HandOff),
        1 => Just(Op::Crash),
    ]
}

fn run(config: StoreConfig, backing: Backing, ops: &[Op]) -> Result<u64, TestCaseError> {
    let mut model = Model::new(config);
    let mut sut = Sut::new(config, backing);
    let retention = config.history_retention_ms();
    let mut pushed = 0;
    for (step, op) in ops.iter().enumerate() {
        let unsettled = stats(&mut sut).unsettled_puts;
        let touched = apply(&mut model, &mut sut, op)
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
        let now = stats(&mut sut);
        pushed += now.unsettled_puts.saturating_sub(unsettled);
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
        let counted = model.counted_keys();
        prop_assert!(now.latest_keys <= counted && counted <= now.latest_keys + now.unsettled_puts);
    }
    let wide = Plan::wide(model.stream_time, retention);
    compare(&sut, &model, &KEYS, &wide).map_err(|e| TestCaseError::fail(format!("end: {e}")))?;
    sut.store_mut()
        .settle()
        .map_err(|e| TestCaseError::fail(describe(&e)))?;
    prop_assert_eq!(stats(&mut sut).latest_keys, model.counted_keys());
    sut.reopen();
    compare(&sut, &model, &KEYS, &wide)
        .map_err(|e| TestCaseError::fail(format!("reopened: {e}")))?;
    Ok(pushed)
}

proptest! {
    #![proptest_config(cases(128))]

    /// Both paths against the model: pushes, puts that settle, and every way a store ends.
    #[test]
    fn in_order_and_late_puts_read_as_the_model(
        backing in prop_oneof![Just(Backing::Pushing), Just(Backing::PushingBuffered), Just(Backing::Buffered)],
        (retention, interval) in prop_oneof![Just((0i64, 1i64)), Just((6, 3)), Just((20, 10)), Just((1_000, 4))],
        ops in proptest::collection::vec(arb_in_order_op(), 1..40),
    ) {
        run(config(retention, interval), backing, &ops)?;
    }
}

/// The generated runs do take the read-free path (a run of in-order puts pushes).
#[test]
fn the_generated_runs_push() {
    let ops: Vec<Op> = (0..20)
        .map(|i| Op::Put {
            key: i % KEYS.len(),
            value: Some(vec![1]),
            dt: 1,
        })
        .collect();
    for backing in PUSHING {
        let pushed = run(config(20, 10), backing, &ops).expect("matches the model");
        assert!(pushed > 10, "{backing:?}: {pushed}");
    }
}

/// A shrunk case of the generated runs: reads merge the entry of `ab` and find its unsettled
/// history long, so the settle's first transaction settles it at its start; the pass had read
/// the entry before, and settled it again from what it read, appending `[10, 14)` to its row a
/// second time (a poisoned row, read as corrupt).
#[test]
fn a_settle_pass_does_not_settle_again_an_entry_its_transaction_settled() {
    let v = || Some(Vec::new());
    let ops = [
        Op::PutBatch(vec![(2, v(), 0)]),
        Op::PutBatch(vec![(2, v(), 1)]),
        Op::PutBatch(vec![(0, v(), 1), (2, v(), 0), (2, v(), 1), (2, v(), 1)]),
        Op::PutBatch(vec![(2, v(), 1)]),
        Op::Put {
            key: 2,
            value: v(),
            dt: 4,
        },
        Op::PutBatch(vec![(0, v(), 1), (2, v(), 0), (2, v(), 4)]),
        Op::Settle,
    ];
    for backing in PUSHING {
        run(config(0, 1), backing, &ops).unwrap_or_else(|e| panic!("{backing:?}: {e}"));
    }
}
