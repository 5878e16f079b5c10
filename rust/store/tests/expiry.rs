//! A latest TTL (§2.15): expired latest values leave storage in bulk and no read changes, the
//! live-key count follows stream time, and an open scan keeps its answers through a
//! reclamation.

use super::harness::config;
use super::model::{Model, Plan, assert_same, observe};
use super::sut::{Backing, Sut};
use crate::format::key::LATEST_SEGMENT;
use crate::{KeyRange, StoreConfig};

/// Retention 100, interval 10, TTL 50: buckets of 10 ms; a bucket `b` leaves the live count at
/// stream time `(b + 1) * 10 + 50` and is reclaimable 100 later.
fn ttl_config() -> StoreConfig {
    config(100, 10)
        .with_latest_ttl(Some(50))
        .expect("valid ttl")
}

fn keys(round: i64) -> Vec<Vec<u8>> {
    (0..40)
        .map(|k| format!("r{round}-k{k}").into_bytes())
        .collect()
}

/// Rounds of 40 keys written once each, ten ms apart: a table whose keys churn.
fn churn(sut: &mut Sut, model: &mut Model, rounds: i64) {
    for round in 0..rounds {
        for key in keys(round) {
            let value = format!("v{round}");
            let code = sut
                .store_mut()
                .put(&key, Some(value.as_bytes()), round * 10)
                .expect("put")
                .code();
            assert_eq!(code, model.put(&key, Some(value.as_bytes()), round * 10));
        }
    }
}

/// Every read of the keys of `rounds` rounds, checked against the model.
fn reads(sut: &Sut, model: &Model, rounds: i64) -> Vec<(String, String)> {
    let keys: Vec<Vec<u8>> = (0..rounds).flat_map(keys).collect();
    let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let plan = Plan::narrow(model.stream_time, 100);
    let got = observe(sut.store(), &keys, &plan);
    assert_same(&got, &observe(model, &keys, &plan)).expect("reads as the model");
    got
}

fn stored_latest(sut: &Sut) -> u64 {
    sut.store()
        .backend
        .count_keys(LATEST_SEGMENT)
        .expect("count")
}

#[test]
fn expired_latest_values_leave_storage_in_bulk_and_no_read_changes() {
    for backing in [Backing::Memory, Backing::Logged, Backing::Buffered] {
        let mut sut = Sut::new(ttl_config(), backing);
        let mut model = Model::new(ttl_config());
        churn(&mut sut, &mut model, 20);
        let before = reads(&sut, &model, 20);
        let stats = sut.store_mut().stats().expect("stats");
        // stream time 190: buckets 0-13 retired, 14-19 live; horizon 90: 0-3 reclaimable,
        // 160 entries against 240 live keys, so none started by itself
        assert_eq!(stats.latest_keys, 6 * 40, "{backing:?}");
        assert_eq!(stats.latest_keys, model.counted_keys());
        assert_eq!(stats.ttl_expired_keys, 14 * 40, "{backing:?}");
        assert_eq!(stats.ttl_reclaims, 0, "{backing:?}");
        sut.store_mut().reclaim_expired().expect("reclaim");
        assert_eq!(stored_latest(&sut), 16 * 40, "{backing:?}");
        assert_eq!(reads(&sut, &model, 20), before, "{backing:?}");
        let stats = sut.store_mut().stats().expect("stats");
        assert_eq!((stats.latest_keys, stats.ttl_reclaims), (6 * 40, 1));
        if backing != Backing::Memory {
            sut.reopen();
            assert_eq!(reads(&sut, &model, 20), before, "{backing:?} reopened");
            let stats = sut.store_mut().stats().expect("stats");
            assert_eq!(stats.latest_keys, 6 * 40, "{backing:?} reopened");
            // the count since the open starts over
            assert_eq!(stats.ttl_expired_keys, 0, "{backing:?} reopened");
        }
    }
}

#[test]
fn reclamation_starts_by_itself_once_dead_entries_outnumber_live_keys() {
    for backing in [Backing::Memory, Backing::Logged] {
        let mut sut = Sut::new(ttl_config(), backing);
        let mut model = Model::new(ttl_config());
        churn(&mut sut, &mut model, 60);
        let stats = sut.store_mut().stats().expect("stats");
        assert!(stats.ttl_reclaims >= 1, "{backing:?}: {stats:?}");
        sut.store_mut().backend.await_reclamation();
        // at most: 6 rounds live, 11 retired and not yet reclaimable, and as many reclaimable
        // as live before the next reclamation, or, while one ran, all that came meanwhile
        // (writes go on beside it); never the 2,400 written
        let stored = stored_latest(&sut);
        assert!(stored <= 2_400 - 20 * 40, "{backing:?}: {stored}");
        sut.reopen();
        reads(&sut, &model, 60);
    }
}

#[test]
fn an_open_scan_keeps_its_answers_through_a_reclamation() {
    for backing in [Backing::Memory, Backing::Logged] {
        let mut sut = Sut::new(ttl_config(), backing);
        for key in keys(0) {
            sut.store_mut().put(&key, Some(b"old"), 0).expect("put");
        }
        // as of 20 every key of round 0 lived; the scan holds that snapshot
        let scan = sut
            .store_mut()
            .scan(KeyRange::All, Some(20), 1)
            .expect("scan");
        sut.store_mut().put(b"z", Some(b"now"), 1_000).expect("put");
        sut.store_mut()
            .reclaim_expired()
            .expect("reclaim while the scan is open");
        let rows: usize = scan.map(|batch| batch.expect("batch").num_rows()).sum();
        assert_eq!(rows, 40, "{backing:?}");
        while sut.store().scans.any_running() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        sut.store_mut().reclaim_expired().expect("reclaim");
        assert_eq!(stored_latest(&sut), 1, "{backing:?}: only z is left");
    }
}

/// The horizon moves only through `move_horizon` (`store/expiry.rs`), which takes the proof that
/// no scan is open: no other file calls the backend's `set_reclaim_horizon`.
#[test]
fn only_move_horizon_moves_the_horizon() {
    fn calls(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("rust/") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                calls(&path, found);
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("a source file");
            for (n, line) in source.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if code.contains("set_reclaim_horizon(") && !code.contains("fn set_reclaim_horizon")
                {
                    found.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rust");
    let mut found = Vec::new();
    calls(&root, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("store/expiry.rs"), "{found:?}");
}
