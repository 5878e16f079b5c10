//! Repartitioning a store (docs/semantics.md §2.12, §2.14): every key's history with its tombstones,
//! read by `scan_versions` with `tombstones`, put in timestamp order into an empty store that
//! then advances to the source's stream time, gives a store that reads as the source and takes
//! later writes as the source does. And the rows such a scan returns: each key's a suffix of its
//! whole history (the model's, tombstones included) that holds every value still stored.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::harness::{ASC, DESC, config, on_both_backends};
use super::model::{Model, Plan, assert_same, describe, observe};
use super::properties::{KEYS, Op, apply, arb_config, arb_op, cases};
use super::sut::{Backing, Sut};
use crate::scan::batches::schema_with;
use crate::{KeyRange, PutOutcome, ResultOrder, Scan, ScanVersions, StoreConfig, VersionedStore};

/// A scan row: key, value (`None`: a tombstone), valid-from, valid-to.
type Row = (Vec<u8>, Option<Vec<u8>>, i64, Option<i64>);

fn with_tombstones(from: Option<i64>, to: Option<i64>, order: ResultOrder) -> ScanVersions {
    ScanVersions {
        from,
        to,
        order,
        tombstones: true,
    }
}

fn rows(scan: Scan) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for batch in scan {
        let batch = batch.map_err(|e| e.to_string())?;
        if batch.schema() != schema_with(true) {
            return Err(format!("schema {:?}", batch.schema()));
        }
        let keys = batch.column(0).as_binary::<i32>();
        let values = batch.column(1).as_binary::<i32>();
        let from = batch.column(2).as_primitive::<Int64Type>();
        let to = batch.column(3).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            let value = (!values.is_null(i)).then(|| values.value(i).to_vec());
            let valid_to = (!to.is_null(i)).then(|| to.value(i));
            rows.push((keys.value(i).to_vec(), value, from.value(i), valid_to));
        }
    }
    Ok(rows)
}

fn scan_rows(store: &mut VersionedStore, query: ScanVersions) -> Result<Vec<Row>, TestCaseError> {
    let scan = store
        .scan_versions(KeyRange::All, query, 3)
        .map_err(|e| TestCaseError::fail(describe(&e)))?;
    rows(scan).map_err(TestCaseError::fail)
}

/// The repartitioning of `source` into a new store on `backing`: its rows with tombstones, oldest
/// first, sorted by time (stably) and put, then its stream time.
fn repartition(source: &mut Sut, backing: Backing) -> Result<Sut, TestCaseError> {
    let config = source.store().config();
    let mut rows = scan_rows(source.store_mut(), with_tombstones(None, None, ASC))?;
    rows.sort_by_key(|row| row.2);
    let mut target = Sut::new(config, backing);
    for (key, value, timestamp, _) in &rows {
        let outcome = target
            .store_mut()
            .put(key, value.as_deref(), *timestamp)
            .map_err(|e| TestCaseError::fail(describe(&e)))?;
        prop_assert_ne!(
            outcome,
            PutOutcome::Expired,
            "a repartitioned put was rejected"
        );
    }
    let stream_time = source.store().observed_stream_time();
    if stream_time >= 0 {
        let advanced = target.store_mut().advance_stream_time(stream_time);
        prop_assert_eq!(advanced.ok(), Some(stream_time));
    }
    Ok(target)
}

/// Each key's rows of a full scan with tombstones (oldest first) are a suffix of its history
/// that holds every value still stored; a windowed scan returns the full scan's rows that meet
/// the window.
fn check_rows_against_model(
    store: &mut VersionedStore,
    model: &Model,
) -> Result<(), TestCaseError> {
    let all = scan_rows(store, with_tombstones(None, None, ASC))?;
    for key in KEYS {
        let history = model.history(key);
        let got: Vec<_> = all
            .iter()
            .filter(|row| row.0 == key)
            .map(|row| (row.1.clone(), row.2, row.3))
            .collect();
        let suffix = history.len().checked_sub(got.len());
        prop_assert!(
            suffix.is_some_and(|at| history[at..] == got[..]),
            "{:?}: rows {:?} are no suffix of {:?}",
            key,
            got,
            history
        );
        let oldest_stored_value = model.oldest_stored_value(key);
        if let (Some(at), Some(stored)) = (suffix, oldest_stored_value) {
            prop_assert!(
                at <= stored,
                "{:?}: a stored value is missing: {:?}",
                key,
                got
            );
        }
    }
    let st = model.stream_time;
    let h = st - store.config().history_retention_ms();
    // A row that ended at or before `h` is past retention: a compaction may drop it at any
    // moment, also between the full scan and a windowed one, so only the rows the store must
    // keep are compared.
    let kept = |row: &Row| row.3.is_none_or(|vt| vt > h);
    for (from, to) in [
        (Some(h), None),
        (Some(h - 3), Some(h + 3)),
        (Some(st), Some(st)),
    ] {
        let expected: Vec<Row> = all
            .iter()
            .filter(|row| row.2 <= to.unwrap_or(i64::MAX))
            .filter(|row| row.3.is_none_or(|vt| vt > from.unwrap_or(i64::MIN)))
            .filter(|row| kept(row))
            .cloned()
            .collect();
        let mut window = scan_rows(store, with_tombstones(from, to, ASC))?;
        window.retain(kept);
        prop_assert_eq!(&window, &expected, "window {:?}..{:?}", from, to);
        let mut newest_first = scan_rows(store, with_tombstones(from, to, DESC))?;
        newest_first.retain(kept);
        newest_first.reverse();
        newest_first.sort_by(|a, b| a.0.cmp(&b.0));
        prop_assert_eq!(newest_first, expected, "newest first {:?}..{:?}", from, to);
    }
    Ok(())
}

fn arb_backing() -> impl Strategy<Value = Backing> {
    prop_oneof![
        2 => Just(Backing::Memory),
        1 => Just(Backing::Logged),
        1 => Just(Backing::Buffered),
    ]
}

fn run(
    config: StoreConfig,
    (source_backing, target_backing): (Backing, Backing),
    history: &[Op],
    later: &[Op],
) -> Result<(), TestCaseError> {
    let mut model = Model::new(config);
    let mut source = Sut::new(config, source_backing);
    for op in history {
        apply(&mut model, &mut source, op)?;
    }
    check_rows_against_model(source.store_mut(), &model)?;
    let mut target = repartition(&mut source, target_backing)?;
    let plan = Plan::wide(model.stream_time, config.history_retention_ms());
    let expected = observe(&model, &KEYS, &plan);
    assert_same(&observe(target.store(), &KEYS, &plan), &expected)
        .map_err(|e| TestCaseError::fail(format!("repartitioned: {e}")))?;
    // Later writes, out of order too, give the model's results on both stores.
    let mut target_model = model.clone();
    for (step, op) in later.iter().enumerate() {
        apply(&mut model, &mut source, op)
            .map_err(|e| TestCaseError::fail(format!("source, later step {step}: {e}")))?;
        apply(&mut target_model, &mut target, op)
            .map_err(|e| TestCaseError::fail(format!("repartitioned, later step {step}: {e}")))?;
    }
    let plan = Plan::wide(model.stream_time, config.history_retention_ms());
    assert_same(
        &observe(target.store(), &KEYS, &plan),
        &observe(source.store(), &KEYS, &plan),
    )
    .map_err(|e| TestCaseError::fail(format!("after later writes: {e}")))?;
    Ok(())
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn a_repartitioned_store_reads_and_takes_writes_as_its_source(
        config in arb_config(),
        backings in (arb_backing(), arb_backing()),
        history in proptest::collection::vec(arb_op(), 1..40),
        later in proptest::collection::vec(arb_op(), 0..12),
    ) {
        run(config, backings, &history, &later)?;
    }
}

/// The tombstones of each kind, in their place: explicit, implicit (a row's end), degenerate
/// (a first write that deletes), consecutive, and a delete at a value's own time (§Q1); values
/// only without the option, in the same places.
#[test]
fn tombstones_of_every_kind_come_in_their_place() {
    on_both_backends(config(1_000, 10), |s| {
        let store = &mut s.store;
        store.delete(b"d", 4).expect("degenerate");
        store.put(b"d", Some(b"x"), 25).expect("put");
        store.put(b"i", Some(b"a"), 1).expect("put");
        store.delete(b"i", 3).expect("implicit at the row's end");
        store.put(b"i", Some(b"b"), 30).expect("put");
        store.put(b"e", Some(b"a"), 1).expect("put");
        store.put(b"e", Some(b"b"), 5).expect("put");
        store.delete(b"e", 5).expect("at the value's own time");
        store.delete(b"e", 7).expect("consecutive");
        store.put(b"e", Some(b"c"), 8).expect("put");
        store.put(b"e", Some(b"d"), 9).expect("explicit");
        let mut all = |order| {
            let scan = store
                .scan_versions(KeyRange::All, with_tombstones(None, None, order), 2)
                .expect("scan");
            rows(scan).expect("rows")
        };
        let row = |key: &[u8], value: Option<&[u8]>, from: i64, to: Option<i64>| {
            (key.to_vec(), value.map(<[u8]>::to_vec), from, to)
        };
        let expected = vec![
            row(b"d", None, 4, Some(25)),
            row(b"d", Some(b"x"), 25, None),
            row(b"e", Some(b"a"), 1, Some(5)),
            row(b"e", None, 5, Some(7)),
            row(b"e", None, 7, Some(8)),
            row(b"e", Some(b"c"), 8, Some(9)),
            row(b"e", Some(b"d"), 9, None),
            row(b"i", Some(b"a"), 1, Some(3)),
            row(b"i", None, 3, Some(30)),
            row(b"i", Some(b"b"), 30, None),
        ];
        assert_eq!(all(ASC), expected, "[{}]", s.backend);
        let mut newest_first = all(DESC);
        newest_first.reverse();
        newest_first.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(newest_first, expected, "[{}]", s.backend);
        // without tombstones: the values alone, the value column not nullable
        let scan = store
            .scan_versions(KeyRange::All, ScanVersions::default(), 2)
            .expect("scan");
        assert_eq!(scan.schema(), crate::scan_schema());
        let values = scan.map(|b| b.expect("batch").num_rows()).sum::<usize>();
        assert_eq!(values, expected.iter().filter(|r| r.1.is_some()).count());
        // a window selects tombstones as values: [6, 7] meets the tombstones at 5 and 7
        let scan = store
            .scan_versions(KeyRange::All, with_tombstones(Some(6), Some(7), ASC), 2)
            .expect("scan");
        let window = rows(scan).expect("rows");
        assert_eq!(
            window,
            vec![
                row(b"d", None, 4, Some(25)),
                row(b"e", None, 5, Some(7)),
                row(b"e", None, 7, Some(8)),
                row(b"i", None, 3, Some(30)),
            ],
            "[{}]",
            s.backend
        );
    });
}
