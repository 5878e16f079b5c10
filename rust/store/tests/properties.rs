//! Property tests: every backend against the reference model (`model`), batches against loops
//! of single calls, replay order (§2.9), and batch calls over the whole `i64` time range with
//! empty and large keys.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::harness::{ASC, config};
use super::model::{Model, Plan, assert_same, describe, observe};
use super::sut::{Backing, Sut};
use crate::config::Tuning;
use crate::{AsOf, Error, PutOutcome, StoreConfig, VersionedStore};

/// Keys for generated operations: the empty key, keys that are prefixes of each other, binary.
pub(super) const KEYS: [&[u8]; 4] = [b"", b"a", b"ab", b"\xff\x00"];

/// A generated operation. Timestamps are offsets from the current observed stream time, so
/// they cluster around it: mostly in order, often late, sometimes past the grace period.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Put {
        key: usize,
        value: Option<Vec<u8>>,
        dt: i64,
    },
    Delete {
        key: usize,
        dt: i64,
    },
    PutBatch(Vec<(usize, Option<Vec<u8>>, i64)>),
    /// A put batch that fails at row `.1` (`put::fault`), after the rows before it were placed:
    /// the store must be as before the call.
    FailingBatch(Vec<(usize, Option<Vec<u8>>, i64)>, usize),
    DeleteBatch(Vec<(usize, i64)>),
    /// `advance_stream_time`: a no-op when `dt <= 0`.
    AdvanceStreamTime {
        dt: i64,
    },
    Reopen,
    /// The store moves to another process with its write buffer (`Sut::hand_off`).
    HandOff,
    /// The process dies after the last call returned (`Sut::crash`).
    Crash,
    /// `reclaim_expired`: expired latest values leave storage; no read changes.
    Reclaim,
    /// `settle`: unsettled history moves to its rows (no read changes) and the key count is
    /// exact again.
    Settle,
}

pub(super) fn resolve(stream_time: i64, dt: i64) -> i64 {
    (stream_time + dt).max(0)
}

fn arb_dt() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => -4i64..=4,
        4 => -25i64..=-5,
        2 => 5i64..=12,
        1 => 25i64..=60,
    ]
}

pub(super) fn arb_value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        3 => proptest::collection::vec(any::<u8>(), 0..3).prop_map(Some),
    ]
}

pub(super) fn arb_key() -> impl Strategy<Value = usize> {
    0..KEYS.len()
}

pub(super) fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (arb_key(), arb_value(), arb_dt()).prop_map(|(key, value, dt)| Op::Put { key, value, dt }),
        3 => (arb_key(), arb_dt()).prop_map(|(key, dt)| Op::Delete { key, dt }),
        2 => proptest::collection::vec((arb_key(), arb_value(), arb_dt()), 1..6).prop_map(Op::PutBatch),
        1 => proptest::collection::vec((arb_key(), arb_dt()), 1..4).prop_map(Op::DeleteBatch),
        1 => arb_dt().prop_map(|dt| Op::AdvanceStreamTime { dt }),
        1 => (proptest::collection::vec((arb_key(), arb_value(), arb_dt()), 1..6), 0usize..6)
            .prop_map(|(rows, at)| { let at = at % rows.len(); Op::FailingBatch(rows, at) }),
        1 => Just(Op::Reopen),
        1 => Just(Op::HandOff),
        1 => Just(Op::Crash),
        1 => Just(Op::Reclaim),
        1 => Just(Op::Settle),
    ]
}

pub(super) fn arb_config() -> impl Strategy<Value = StoreConfig> {
    (
        proptest::sample::select(vec![0i64, 5, 20]),
        proptest::sample::select(vec![1i64, 3, 10]),
        proptest::sample::select(vec![None, None, Some(1i64), Some(3), Some(10), Some(40)]),
    )
        .prop_map(|(retention, interval, ttl)| {
            config(retention, interval)
                .with_latest_ttl(ttl)
                .expect("valid ttl")
        })
}

pub(super) fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Applies one generated operation to the model and the store; returns the keys it wrote.
pub(super) fn apply(
    model: &mut Model,
    sut: &mut Sut,
    op: &Op,
) -> Result<Vec<usize>, TestCaseError> {
    let err = |e: Error| describe(&e);
    match op {
        Op::Put { key, value, dt } => {
            let ts = resolve(model.stream_time, *dt);
            let expected = model.put(KEYS[*key], value.as_deref(), ts);
            let actual = sut.store_mut().put(KEYS[*key], value.as_deref(), ts);
            prop_assert_eq!(
                actual.map(PutOutcome::code).map_err(err),
                Ok(expected),
                "put at {}",
                ts
            );
            Ok(vec![*key])
        }
        Op::Delete { key, dt } => {
            let ts = resolve(model.stream_time, *dt);
            let expected = model.delete(KEYS[*key], ts);
            let actual = sut.store_mut().delete(KEYS[*key], ts);
            prop_assert_eq!(actual.map_err(err), Ok(expected), "delete at {}", ts);
            Ok(vec![*key])
        }
        Op::PutBatch(rows) => {
            let mut resolved = Vec::new();
            let mut expected = Vec::new();
            for (key, value, dt) in rows {
                let ts = resolve(model.stream_time, *dt);
                expected.push(model.put(KEYS[*key], value.as_deref(), ts));
                resolved.push((KEYS[*key], value.as_deref(), ts));
            }
            let actual = sut
                .store_mut()
                .put_batch(resolved.iter().copied())
                .map(|outcomes| {
                    outcomes
                        .into_iter()
                        .map(PutOutcome::code)
                        .collect::<Vec<_>>()
                });
            prop_assert_eq!(
                actual.map_err(err),
                Ok(expected),
                "put_batch {:?}",
                resolved
            );
            Ok(rows.iter().map(|r| r.0).collect())
        }
        Op::FailingBatch(rows, at) => failing_batch(model, sut, rows, *at),
        Op::DeleteBatch(rows) => {
            let mut resolved = Vec::new();
            let mut expected = Vec::new();
            for (key, dt) in rows {
                let ts = resolve(model.stream_time, *dt);
                expected.push(model.delete(KEYS[*key], ts));
                resolved.push((KEYS[*key], ts));
            }
            let actual = sut.store_mut().delete_batch(resolved.iter().copied());
            prop_assert_eq!(
                actual.map_err(err),
                Ok(expected),
                "delete_batch {:?}",
                resolved
            );
            Ok(rows.iter().map(|r| r.0).collect())
        }
        Op::AdvanceStreamTime { dt } => {
            let ts = resolve(model.stream_time, *dt);
            let expected = model.advance_stream_time(ts);
            let actual = sut.store_mut().advance_stream_time(ts);
            prop_assert_eq!(actual.map_err(err), Ok(expected), "advance to {}", ts);
            // Expiry may have dropped versions of any key.
            Ok((0..KEYS.len()).collect())
        }
        // Nothing is read right after a reopen: the next call then meets the store's cold
        // caches, as a real first call does (reads here would fill them). The test reads every
        // key at its end and after a final reopen.
        Op::Reopen => {
            sut.reopen();
            Ok(Vec::new())
        }
        Op::HandOff => {
            let time = sut.store().observed_stream_time();
            sut.hand_off().map_err(|e| TestCaseError::fail(err(e)))?;
            prop_assert_eq!(
                sut.store().observed_stream_time(),
                time,
                "stream time after it"
            );
            Ok(Vec::new())
        }
        Op::Crash => crash(sut),
        Op::Settle => settle(sut),
        Op::Reclaim => {
            sut.store_mut()
                .reclaim_expired()
                .map_err(|e| TestCaseError::fail(err(e)))?;
            Ok((0..KEYS.len()).collect())
        }
    }
}

/// `Op::Settle`: no read changes (every key is compared after it), and the count is exact.
fn settle(sut: &mut Sut) -> Result<Vec<usize>, TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(describe(&e));
    sut.store_mut().settle().map_err(fail)?;
    let stats = sut.store_mut().stats().map_err(fail)?;
    prop_assert_eq!(stats.unsettled_puts, 0, "after settle");
    Ok((0..KEYS.len()).collect())
}

/// `Op::Crash`: the store comes back with what it held, its key count too (an open that
/// recounts after a crash also counts the keys read-free puts left uncounted).
fn crash(sut: &mut Sut) -> Result<Vec<usize>, TestCaseError> {
    let count = |sut: &mut Sut| {
        let stats = sut
            .store_mut()
            .stats()
            .map_err(|e| TestCaseError::fail(describe(&e)))?;
        Ok::<_, TestCaseError>((stats.latest_keys, stats.unsettled_puts))
    };
    let (before, unsettled) = count(sut)?;
    sut.crash();
    let (after, _) = count(sut)?;
    prop_assert!(
        before <= after && after <= before + unsettled,
        "latest-key count after the crash: {} from {} with {} unsettled",
        after,
        before,
        unsettled
    );
    Ok(Vec::new())
}

/// `Op::FailingBatch`: the batch fails at row `at` unless that row is too late to be placed.
fn failing_batch(
    model: &mut Model,
    sut: &mut Sut,
    rows: &[(usize, Option<Vec<u8>>, i64)],
    at: usize,
) -> Result<Vec<usize>, TestCaseError> {
    let err = |e: Error| describe(&e);
    // Times resolve against the model's stream time, which the failed call keeps.
    let resolved: Vec<_> = rows
        .iter()
        .map(|(key, value, dt)| {
            (
                KEYS[*key],
                value.as_deref(),
                resolve(model.stream_time, *dt),
            )
        })
        .collect();
    let grace = sut.store().config().grace_period_ms();
    let keys_before = sut
        .store_mut()
        .stats()
        .map_err(|e| TestCaseError::fail(err(e)))?
        .latest_keys;
    // The buckets as a copy would have kept them, against the record a failed call undoes.
    let buckets_before = sut.store().state.latest_buckets.clone();
    let expired = resolved
        .iter()
        .take(at + 1)
        .scan(model.stream_time, |st, &(_, _, ts)| {
            let late = ts < st.saturating_sub(grace);
            *st = (*st).max(ts);
            Some(late)
        })
        .collect::<Vec<_>>();
    if !expired[at] {
        let placed_before = expired[..at].iter().filter(|&&e| !e).count();
        crate::put::fault::fail_after(placed_before);
    }
    let actual = sut.store_mut().put_batch(resolved.iter().copied());
    crate::put::fault::clear();
    if expired[at] {
        // The failing row is too late to be placed: the whole batch is as PutBatch.
        let expected: Vec<_> = resolved
            .iter()
            .map(|&(key, value, ts)| model.put(key, value, ts))
            .collect();
        let actual = actual.map(|o| o.into_iter().map(PutOutcome::code).collect::<Vec<_>>());
        prop_assert_eq!(
            actual.map_err(err),
            Ok(expected),
            "put_batch {:?}",
            resolved
        );
    } else {
        prop_assert!(
            actual.is_err(),
            "the injected failure was not raised: {:?}",
            actual
        );
        prop_assert_eq!(
            sut.store().observed_stream_time(),
            model.stream_time,
            "stream time after a failed call"
        );
        prop_assert_eq!(
            &sut.store().state.latest_buckets,
            &buckets_before,
            "a latest TTL's buckets after a failed call"
        );
        let keys_after = sut
            .store_mut()
            .stats()
            .map_err(|e| TestCaseError::fail(err(e)))?
            .latest_keys;
        prop_assert_eq!(
            keys_after,
            keys_before,
            "latest-key count after a failed call"
        );
    }
    Ok((0..KEYS.len()).collect())
}

pub(super) fn compare(
    sut: &Sut,
    model: &Model,
    keys: &[&[u8]],
    plan: &Plan,
) -> Result<(), TestCaseError> {
    assert_same(
        &observe(sut.store(), keys, plan),
        &observe(model, keys, plan),
    )
    .map_err(TestCaseError::fail)?;
    batch_agrees(sut.store(), keys, plan)
}

/// One `get_batch` of every key at every time of `plan` (and of the latest values) answers as
/// the single reads, which `compare` checked against the model: the batch path reads the write
/// buffer, the cache and RocksDB its own way (sorted, one `MultiGet` per round).
fn batch_agrees(store: &VersionedStore, keys: &[&[u8]], plan: &Plan) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("get_batch: {}", describe(&e)));
    let mut probe_keys = Vec::new();
    let mut probe_times = Vec::new();
    for &key in keys {
        for &t in plan.times() {
            probe_keys.push(key);
            probe_times.push(t);
        }
    }
    let batch = store
        .get_batch(&probe_keys, AsOf::PerRow(&probe_times))
        .map_err(fail)?;
    for (i, (key, t)) in probe_keys.iter().zip(&probe_times).enumerate() {
        let single = store.get_as_of(key, *t).map_err(fail)?;
        prop_assert_eq!(
            batch.get(i),
            single,
            "get_batch row {} ({:?} at {})",
            i,
            key,
            t
        );
    }
    let latest = store.get_batch(keys, AsOf::Latest).map_err(fail)?;
    for (i, key) in keys.iter().enumerate() {
        prop_assert_eq!(
            latest.get(i),
            store.get(key).map_err(fail)?,
            "get_batch latest {:?}",
            key
        );
    }
    Ok(())
}

fn run_model_test(config: StoreConfig, ops: &[Op], backing: Backing) -> Result<(), TestCaseError> {
    let persistent = backing != Backing::Memory;
    let mut model = Model::new(config);
    let mut sut = Sut::new(config, backing);
    let retention = config.history_retention_ms();
    for (step, op) in ops.iter().enumerate() {
        let touched = apply(&mut model, &mut sut, op)
            .map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
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
        let stats = sut
            .store_mut()
            .stats()
            .map_err(|e| TestCaseError::fail(describe(&e)))?;
        // Exact unless read-free puts may have created keys they did not count (§2.16).
        let counted = model.counted_keys();
        prop_assert!(
            stats.latest_keys <= counted && counted <= stats.latest_keys + stats.unsettled_puts,
            "latest keys after step {} {:?}: {:?}, model {}",
            step,
            op,
            stats,
            counted
        );
    }
    let wide = Plan::wide(model.stream_time, retention);
    compare(&sut, &model, &KEYS, &wide)
        .map_err(|e| TestCaseError::fail(format!("at the end: {e}")))?;
    if persistent {
        sut.reopen();
        compare(&sut, &model, &KEYS, &wide)
            .map_err(|e| TestCaseError::fail(format!("after the final reopen: {e}")))?;
    }
    Ok(())
}

fn arb_backing() -> impl Strategy<Value = Backing> {
    prop_oneof![
        2 => Just(Backing::Memory),
        1 => Just(Backing::Logged),
        1 => Just(Backing::Buffered),
        1 => Just(Backing::Pushing),
        1 => Just(Backing::PushingBuffered),
    ]
}

proptest! {
    #![proptest_config(cases(256))]

    /// Every backend gives the model's results and reads, across reopens of RocksDB.
    #[test]
    fn every_backend_matches_the_model(
        backing in arb_backing(),
        config in arb_config(),
        ops in proptest::collection::vec(arb_op(), 1..40),
    ) {
        run_model_test(config, &ops, backing)?;
    }
}

proptest! {
    #![proptest_config(cases(128))]

    /// A batch is the same as its rows applied one by one, whatever the chunking.
    #[test]
    fn put_batch_equals_a_loop_of_puts(
        config in arb_config(),
        rows in proptest::collection::vec((arb_key(), arb_value(), 0i64..80), 1..40),
        chunk in 1usize..40,
    ) {
        let mut batched = VersionedStore::in_memory(config);
        let mut looped = VersionedStore::in_memory(config);
        let mut batch_codes = Vec::new();
        for part in rows.chunks(chunk) {
            let outcomes = batched
                .put_batch(part.iter().map(|(k, v, t)| (KEYS[*k], v.as_deref(), *t)))
                .expect("put_batch");
            batch_codes.extend(outcomes.into_iter().map(PutOutcome::code));
        }
        let loop_codes: Vec<i64> = rows
            .iter()
            .map(|(k, v, t)| looped.put(KEYS[*k], v.as_deref(), *t).expect("put").code())
            .collect();
        prop_assert_eq!(batch_codes, loop_codes);
        let plan = Plan::wide(looped.observed_stream_time(), config.history_retention_ms());
        assert_same(&observe(&batched, &KEYS, &plan), &observe(&looped, &KEYS, &plan))
            .map_err(TestCaseError::fail)?;
    }

    /// §2.9: replaying the same accepted writes in another order gives the same reads (no write
    /// is rejected or expired here: the retention covers the whole range).
    #[test]
    fn replaying_writes_in_another_order_gives_the_same_reads(
        interval in proptest::sample::select(vec![1i64, 3, 10]),
        ttl in proptest::sample::select(vec![None, Some(3i64), Some(20)]),
        (writes, shuffled) in proptest::collection::btree_map((arb_key(), 0i64..60), arb_value(), 1..40)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_flat_map(|w| (Just(w.clone()), Just(w).prop_shuffle())),
    ) {
        let config = config(1_000, interval).with_latest_ttl(ttl).expect("valid ttl");
        let mut in_order = VersionedStore::in_memory(config);
        let mut reordered = VersionedStore::in_memory(config);
        let mut model = Model::new(config);
        for ((key, ts), value) in &writes {
            in_order.put(KEYS[*key], value.as_deref(), *ts).expect("put");
        }
        for ((key, ts), value) in &shuffled {
            let expected = model.put(KEYS[*key], value.as_deref(), *ts);
            let code = reordered.put(KEYS[*key], value.as_deref(), *ts).expect("put").code();
            prop_assert_eq!(code, expected);
        }
        let plan = Plan::wide(model.stream_time, 1_000);
        let expected = observe(&model, &KEYS, &plan);
        assert_same(&observe(&in_order, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
        assert_same(&observe(&reordered, &KEYS, &plan), &expected).map_err(TestCaseError::fail)?;
    }
}

// Edge inputs: the whole i64 time range, empty and large keys.

/// Times from the whole `i64` range, the bounds and their neighbours most often.
fn arb_any_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => prop::sample::select(vec![i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX]),
        2 => any::<i64>(),
        2 => (i64::MAX - 100)..=i64::MAX,
        1 => 0i64..100,
    ]
}

/// The empty key, short keys, and a large one (64 KiB and more).
fn arb_edge_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => Just(Vec::new()),
        3 => proptest::collection::vec(any::<u8>(), 1..4),
        1 => (65_536usize..70_000).prop_map(|n| vec![0xAB; n]),
    ]
}

#[derive(Debug, Clone)]
enum EdgeCall {
    Puts(Vec<(Vec<u8>, Option<Vec<u8>>, i64)>),
    Deletes(Vec<(Vec<u8>, i64)>),
    Reads(Vec<(Vec<u8>, i64)>),
    Versions(Vec<u8>, i64, i64),
}

fn arb_edge_call() -> impl Strategy<Value = EdgeCall> {
    let value = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3));
    prop_oneof![
        3 => proptest::collection::vec((arb_edge_key(), value, arb_any_time()), 1..6)
            .prop_map(EdgeCall::Puts),
        1 => proptest::collection::vec((arb_edge_key(), arb_any_time()), 1..4)
            .prop_map(EdgeCall::Deletes),
        2 => proptest::collection::vec((arb_edge_key(), arb_any_time()), 1..6)
            .prop_map(EdgeCall::Reads),
        1 => (arb_edge_key(), arb_any_time(), arb_any_time())
            .prop_map(|(k, a, b)| EdgeCall::Versions(k, a, b)),
    ]
}

/// Every call returns a result or refuses an argument: never a panic (which pyo3 would raise
/// as `PanicException`) and never `Corrupt` (which would mean the store misread its own writes).
fn check_edge_calls(store: &mut VersionedStore, calls: &[EdgeCall]) -> Result<(), TestCaseError> {
    let ok_or_invalid = |result: Result<(), Error>, what: &str| match result {
        Ok(()) | Err(Error::InvalidArgument { .. }) => Ok(()),
        Err(other) => Err(TestCaseError::fail(format!("{what}: {other:?}"))),
    };
    for call in calls {
        match call {
            EdgeCall::Puts(rows) => ok_or_invalid(
                store
                    .put_batch(
                        rows.iter()
                            .map(|(k, v, t)| (k.as_slice(), v.as_deref(), *t)),
                    )
                    .map(drop),
                "put_batch",
            )?,
            EdgeCall::Deletes(rows) => ok_or_invalid(
                store
                    .delete_batch(rows.iter().map(|(k, t)| (k.as_slice(), *t)))
                    .map(drop),
                "delete_batch",
            )?,
            EdgeCall::Reads(rows) => {
                let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
                let times: Vec<i64> = rows.iter().map(|(_, t)| *t).collect();
                // reads refuse nothing: any error is a failure
                let batch = store
                    .get_batch(&keys, AsOf::PerRow(&times))
                    .map_err(|e| TestCaseError::fail(format!("get_batch: {e:?}")))?;
                for (i, (key, t)) in rows.iter().enumerate() {
                    let single = store
                        .get_as_of(key, *t)
                        .map_err(|e| TestCaseError::fail(format!("get_as_of: {e:?}")))?;
                    prop_assert_eq!(batch.get(i), single);
                }
                store
                    .get_batch(&keys, AsOf::Latest)
                    .map_err(|e| TestCaseError::fail(format!("get_batch latest: {e:?}")))?;
            }
            EdgeCall::Versions(key, a, b) => ok_or_invalid(
                store
                    .versions(key, Some(*a.min(b)), Some(*a.max(b)), ASC)
                    .map(drop),
                "versions",
            )?,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn batch_calls_over_the_whole_time_range_never_panic_or_misread(
        calls in proptest::collection::vec(arb_edge_call(), 1..10),
        retention in prop::sample::select(vec![0i64, 1, 1_000, i64::MAX]),
        interval in prop::sample::select(vec![1i64, 1_000, i64::MAX]),
    ) {
        let config = StoreConfig::new(retention, Some(interval)).expect("config");
        let mut memory = VersionedStore::in_memory(config);
        check_edge_calls(&mut memory, &calls)?;
        let buffered_dir = tempfile::tempdir().expect("tempdir");
        let options = Backing::Buffered.options().expect("persistent");
        // The buffered store with thresholds a few rows cross, the other with the shipped ones.
        let mut buffered = VersionedStore::open_tuned(buffered_dir.path(), config, options, Tuning::SMALL)
            .expect("open");
        check_edge_calls(&mut buffered, &calls)?;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rocks = VersionedStore::open(dir.path(), config).expect("open");
        check_edge_calls(&mut rocks, &calls)?;
        drop(rocks);
        // and everything written reads back the same after a reopen
        let mut reopened = VersionedStore::open(dir.path(), config).expect("reopen");
        let reads: Vec<EdgeCall> = calls
            .iter()
            .filter(|c| matches!(c, EdgeCall::Reads(_)))
            .cloned()
            .collect();
        check_edge_calls(&mut reopened, &reads)?;
    }
}
