//! The core against raw `rocksdb` crate calls on the same keys and values, without Python.
//!
//! Workload (seeded): `VERSTORE_BENCH_KEYS` random 16-byte keys (default 50 000), 4 versions
//! each, written in time order (round r writes every key at times `r·n + i`), 32-byte values,
//! in batches of 10 000; then 10 000-key batches of as-of reads. Every group pairs the store
//! with its ceiling: a raw `WriteBatch` of the same keys and values (write-ahead log off, as for
//! the store), and a sorted `batched_multi_get` of the same keys.
//!
//! Groups: `put_batch` (persistent and in-memory store vs raw `WriteBatch`), `get_batch`
//! (as-of at the newest version and into history vs raw sorted `MultiGet`), `hot_key` (one key
//! written n times in one segment: linear time means a flat per-version cost), `handoff` (a
//! store's write buffer handed to the next open: flushed, or saved to a file and loaded).
//!
//! Run: `make bench` (all suites) or
//! `cargo bench --profile release --bench core` (this one; the release profile shares the
//! RocksDB build).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use verstore::{AsOf, RocksOptions, StoreConfig, VersionedStore};

const BATCH: usize = 10_000;
const VERSIONS: usize = 4;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift64*), so the bench needs no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|_| self.next().to_le_bytes())
            .take(n)
            .collect()
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
}

struct Workload {
    keys: Vec<Vec<u8>>,
    /// `(key index, value, time)` in write order.
    rows: Vec<(usize, Vec<u8>, i64)>,
    /// 10 000 probe keys (indices) and, per probe, a time in the newest version and in history.
    probes: Vec<usize>,
}

fn workload(n: usize) -> Workload {
    let mut rng = Rng(0x5eed);
    let keys: Vec<Vec<u8>> = (0..n).map(|_| rng.bytes(16)).collect();
    let mut rows = Vec::with_capacity(n * VERSIONS);
    for round in 0..VERSIONS {
        for i in 0..n {
            let t = i64::try_from(round * n + i).unwrap_or(i64::MAX);
            rows.push((i, rng.bytes(32), t));
        }
    }
    let probes = (0..BATCH).map(|_| rng.below(n)).collect();
    Workload { keys, rows, probes }
}

fn config() -> StoreConfig {
    StoreConfig::new(1 << 40, None).expect("config")
}

fn wal_off() -> RocksOptions {
    RocksOptions {
        wal: false,
        ..RocksOptions::default()
    }
}

fn fill(store: &mut VersionedStore, w: &Workload) {
    for chunk in w.rows.chunks(BATCH) {
        let rows = chunk
            .iter()
            .map(|(k, v, t)| (w.keys[*k].as_slice(), Some(v.as_slice()), *t));
        store.put_batch(rows).expect("put_batch");
    }
}

/// The ceiling: RocksDB tuned like the store (bloom filters, LZ4, 64 MiB memtable), no merge
/// operator, keys and values as given.
fn raw_db(dir: &std::path::Path) -> rocksdb::DB {
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.set_block_based_table_factory(&table);
    options.set_compression_type(rocksdb::DBCompressionType::Lz4);
    options.set_write_buffer_size(64 << 20);
    rocksdb::DB::open_cf(&options, dir, [rocksdb::DEFAULT_COLUMN_FAMILY_NAME]).expect("raw open")
}

fn raw_fill(db: &rocksdb::DB, w: &Workload) {
    let mut write_options = rocksdb::WriteOptions::default();
    write_options.disable_wal(true);
    for chunk in w.rows.chunks(BATCH) {
        let mut batch = rocksdb::WriteBatch::default();
        for (k, v, _) in chunk {
            batch.put(&w.keys[*k], v);
        }
        db.write_opt(batch, &write_options).expect("write");
    }
}

fn put_batch(c: &mut Criterion) {
    let w = workload(env("VERSTORE_BENCH_KEYS", 50_000));
    let mut group = c.benchmark_group("put_batch");
    group.throughput(Throughput::Elements(w.rows.len() as u64));
    group.bench_function("store", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            |dir| {
                let mut store =
                    VersionedStore::open_with(dir.path(), config(), wal_off()).expect("open");
                fill(&mut store, &w);
                drop(store);
                dir
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("store_in_memory", |b| {
        b.iter_batched(
            || VersionedStore::in_memory(config()),
            |mut store| {
                fill(&mut store, &w);
                store
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("raw_rocksdb_write_batch", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            |dir| {
                let db = raw_db(dir.path());
                raw_fill(&db, &w);
                drop(db);
                dir
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn get_batch(c: &mut Criterion) {
    let w = workload(env("VERSTORE_BENCH_KEYS", 50_000));
    let n = w.keys.len();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store =
        VersionedStore::open_with(dir.path().join("store"), config(), wal_off()).expect("open");
    fill(&mut store, &w);
    store.flush().expect("flush");
    let db = raw_db(&dir.path().join("raw"));
    raw_fill(&db, &w);
    db.flush().expect("flush");
    let keys: Vec<&[u8]> = w.probes.iter().map(|&k| w.keys[k].as_slice()).collect();
    // The newest version of key i starts at (VERSIONS - 1)·n + i; history: an older round.
    let last = i64::try_from((VERSIONS - 1) * n).unwrap_or(0);
    let newest: Vec<i64> = w
        .probes
        .iter()
        .map(|&k| last + i64::try_from(k).unwrap_or(0))
        .collect();
    let history: Vec<i64> = w
        .probes
        .iter()
        .enumerate()
        .map(|(i, &k)| i64::try_from((i % (VERSIONS - 1)) * n + k).unwrap_or(0))
        .collect();
    let mut group = c.benchmark_group("get_batch");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("store_as_of_newest", |b| {
        b.iter(|| {
            let found = store.get_batch(&keys, AsOf::PerRow(&newest)).expect("get");
            assert!(found.present.iter().all(|&p| p));
            black_box(found)
        });
    });
    group.bench_function("store_as_of_history", |b| {
        b.iter(|| {
            let found = store.get_batch(&keys, AsOf::PerRow(&history)).expect("get");
            assert!(found.present.iter().all(|&p| p));
            black_box(found)
        });
    });
    group.bench_function("raw_rocksdb_sorted_multi_get", |b| {
        let cf = db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .expect("default column family");
        b.iter(|| {
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            let found = db.batched_multi_get_cf(cf, &sorted, true);
            assert!(found.iter().all(|r| matches!(r, Ok(Some(_)))));
            black_box(found.len())
        });
    });
    group.finish();
}

fn hot_key(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_key");
    for versions in [5_000usize, 20_000] {
        group.throughput(Throughput::Elements(versions as u64));
        group.bench_function(format!("store_{versions}_single_puts"), |b| {
            b.iter_batched(
                || tempfile::tempdir().expect("tempdir"),
                |dir| {
                    // One segment: interval far larger than the times written.
                    let config = StoreConfig::new(1 << 40, Some(1 << 40)).expect("config");
                    let mut store =
                        VersionedStore::open_with(dir.path(), config, wal_off()).expect("open");
                    for t in 0..versions {
                        let t = i64::try_from(t).unwrap_or(0);
                        store.put(b"hot", Some(&t.to_be_bytes()), t).expect("put");
                    }
                    drop(store);
                    dir
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

/// A store with the workload in its write buffer, handed to the next open: written into RocksDB
/// and flushed, then reopened (`flush`, as a handoff did), or closed keeping the buffer in a
/// file and reopened with it (`keep_buffer`). The fill is not timed.
fn handoff(c: &mut Criterion) {
    let w = workload(env("VERSTORE_BENCH_KEYS", 50_000));
    let options = RocksOptions {
        buffer_bytes: 256 << 20, // all of it in the buffer, as a kept store's few micro-batches
        ..wal_off()
    };
    let filled = || {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let mut store = VersionedStore::open_with(&db, config(), options).expect("open");
        fill(&mut store, &w);
        (dir, store)
    };
    let mut group = c.benchmark_group("handoff");
    group.throughput(Throughput::Elements(w.rows.len() as u64));
    group.bench_function("flush", |b| {
        b.iter_batched(
            filled,
            |(dir, store)| {
                store.close().expect("close");
                let store = VersionedStore::open_with(dir.path().join("db"), config(), options);
                (dir, store.expect("reopen"))
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("keep_buffer", |b| {
        b.iter_batched(
            filled,
            |(dir, store)| {
                let file = dir.path().join("buffer");
                let saved = store.close_keeping_buffer(&file).expect("close");
                let db = dir.path().join("db");
                let mut store = VersionedStore::open_with(db, config(), options).expect("reopen");
                store.load_buffer(&file, saved).expect("load");
                (dir, store)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = put_batch, get_batch, hot_key, handoff
}
criterion_main!(benches);
