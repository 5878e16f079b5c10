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
//! store's write buffer handed to the next open: flushed, or saved to a file and loaded),
//! `join_state` (the as-of join's state work on one partition: the in-memory store vs a
//! structure built for nothing else, the ceiling of a store without its history format),
//! `latest_ttl` (a latest TTL on and off: the same puts and reads with a TTL that never fires,
//! the accounting alone, on the logged, buffered and in-memory stores; and a churn of fresh keys
//! that a TTL keeps flat, with the time `reclaim_expired` takes).
//!
//! Run: `make bench` (all suites) or
//! `cargo bench --profile release --bench core` (this one; the release profile shares the
//! RocksDB build).

use std::collections::HashMap;
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
    // All of it in the buffer, as a kept store's few micro-batches: a budget whose share for
    // write buffers holds it.
    verstore::set_memory_limit(1 << 30).expect("memory limit");
    let options = RocksOptions {
        buffer_bytes: Some(256 << 20),
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

/// One micro-batch of the as-of join's partition at 100 000 keys (`benches/spark_asof.py`'s
/// one-partition profile): 25 000 keys, 75 000 table updates in time order put as one batch,
/// then 150 000 as-of lookups as one batch. Times are in the micro-batch's minute, 10% of them
/// late (anywhere in an earlier minute), as the profile's data.
struct JoinBatch {
    /// `(time, key index)`, sorted by time then key, distinct.
    updates: Vec<(i64, usize)>,
    /// `(key index, time)` in arrival order.
    lookups: Vec<(usize, i64)>,
}

const JOIN_KEYS: usize = 25_000;
const MINUTE: i64 = 60_000;

fn join_batches(count: usize) -> (Vec<Vec<u8>>, Vec<JoinBatch>) {
    let mut rng = Rng(0xa50f_a50f);
    let keys: Vec<Vec<u8>> = (0..JOIN_KEYS).map(|_| rng.bytes(11)).collect();
    let time = |rng: &mut Rng, batch: i64| {
        let late = batch > 0 && rng.below(10) == 0;
        let start = if late { 0 } else { batch * MINUTE };
        let span = if late { batch * MINUTE } else { MINUTE };
        start + i64::try_from(rng.below(usize::try_from(span).unwrap_or(1))).unwrap_or(0)
    };
    let batches = (0..count)
        .map(|b| {
            let b = i64::try_from(b).unwrap_or(0);
            let mut updates: Vec<(i64, usize)> = (0..3 * JOIN_KEYS)
                .map(|_| (time(&mut rng, b), rng.below(JOIN_KEYS)))
                .collect();
            if b == 0 {
                updates.extend((0..JOIN_KEYS).map(|k| (0, k)));
            }
            updates.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(keys[x.1].cmp(&keys[y.1])));
            updates.dedup();
            let lookups = (0..6 * JOIN_KEYS)
                .map(|_| (rng.below(JOIN_KEYS), time(&mut rng, b)))
                .collect();
            JoinBatch { updates, lookups }
        })
        .collect();
    (keys, batches)
}

/// The ceiling: per key its versions in time order (time, and where the value lies in one
/// arena of values), a put a binary-search insert (dropped when older than the grace period),
/// an as-of lookup a binary search, answers copied out as the store's are. No history format,
/// no segments, no durability.
#[derive(Default)]
struct PerKeyIndex {
    versions: HashMap<Vec<u8>, Vec<(i64, u32, u32)>, foldhash::fast::RandomState>,
    values: Vec<u8>,
    stream_time: i64,
}

impl PerKeyIndex {
    fn put(&mut self, key: &[u8], value: &[u8], ts: i64, grace: i64) {
        if ts < self.stream_time.saturating_sub(grace) {
            return;
        }
        self.stream_time = self.stream_time.max(ts);
        let at = u32::try_from(self.values.len()).expect("arena");
        let version = (ts, at, u32::try_from(value.len()).expect("value"));
        self.values.extend_from_slice(value);
        let Some(versions) = self.versions.get_mut(key) else {
            self.versions.insert(key.to_vec(), vec![version]);
            return;
        };
        match versions.binary_search_by_key(&ts, |v| v.0) {
            Ok(i) => versions[i] = version,
            Err(i) => versions.insert(i, version),
        }
    }

    /// The version of each key valid at its time, as the store's batch read answers.
    fn get_batch(&self, lookups: &[(&[u8], i64)]) -> Answers {
        let mut out = Answers::default();
        for &(key, t) in lookups {
            let versions = self.versions.get(key);
            let versions = versions.map_or(&[][..], Vec::as_slice);
            let at = versions.partition_point(|v| v.0 <= t);
            let found = at.checked_sub(1).map(|i| versions[i]);
            if let Some((_, start, len)) = found {
                let start = start as usize;
                out.values
                    .extend_from_slice(&self.values[start..start + len as usize]);
            }
            out.ends.push(out.values.len());
            out.valid_from.push(found.map(|v| v.0));
            out.valid_to.push(found.and(versions.get(at)).map(|v| v.0));
        }
        out
    }
}

/// Per lookup: the value (`values[ends[i - 1]..ends[i]]`), its version's time and the next
/// version's (`None`: not found, or the newest).
#[derive(Default, PartialEq, Debug)]
struct Answers {
    values: Vec<u8>,
    ends: Vec<usize>,
    valid_from: Vec<Option<i64>>,
    valid_to: Vec<Option<i64>>,
}

impl Answers {
    fn of(found: &verstore::RecordColumns) -> Self {
        let n = found.present.len();
        Self {
            values: found.values.clone(),
            ends: found.offsets[1..].to_vec(),
            valid_from: (0..n)
                .map(|i| found.present[i].then_some(found.timestamps[i]))
                .collect(),
            valid_to: found.valid_to.clone(),
        }
    }
}

/// The join's work: warm-up micro-batches, then the one timed; what a put and a lookup need.
struct JoinWork {
    keys: Vec<Vec<u8>>,
    warm: Vec<JoinBatch>,
    measured: JoinBatch,
}

impl JoinWork {
    const GRACE: i64 = 7 * 86_400_000;
    const VALUE: [u8; 9] = [0x3f; 9];

    fn new(warm: usize) -> Self {
        let (keys, mut batches) = join_batches(warm + 1);
        let measured = batches.pop().expect("batches");
        Self {
            keys,
            warm: batches,
            measured,
        }
    }

    fn put_store(&self, store: &mut VersionedStore, batch: &JoinBatch) {
        let rows = batch.updates.iter();
        let rows = rows.map(|&(t, k)| (self.keys[k].as_slice(), Some(&Self::VALUE[..]), t));
        store.put_batch(rows).expect("put_batch");
    }

    fn put_index(&self, index: &mut PerKeyIndex, batch: &JoinBatch) {
        for &(t, k) in &batch.updates {
            index.put(&self.keys[k], &Self::VALUE, t, Self::GRACE);
        }
    }

    fn warm_store(&self) -> VersionedStore {
        let config = StoreConfig::new(Self::GRACE, None).expect("config");
        let mut store = VersionedStore::in_memory(config);
        self.warm.iter().for_each(|b| self.put_store(&mut store, b));
        store
    }

    fn warm_index(&self) -> PerKeyIndex {
        let mut index = PerKeyIndex::default();
        self.warm.iter().for_each(|b| self.put_index(&mut index, b));
        index
    }

    /// The measured batch's lookups: `(keys, times)`.
    fn lookups(&self) -> (Vec<&[u8]>, Vec<i64>) {
        let lookups = self.measured.lookups.iter();
        lookups.map(|&(k, t)| (self.keys[k].as_slice(), t)).unzip()
    }
}

fn join_state(c: &mut Criterion) {
    let work = JoinWork::new(3);
    let (keys, times) = work.lookups();
    let pairs: Vec<(&[u8], i64)> = keys.iter().copied().zip(times.iter().copied()).collect();
    // The ceiling answers as the store does.
    let (mut store, mut index) = (work.warm_store(), work.warm_index());
    work.put_store(&mut store, &work.measured);
    work.put_index(&mut index, &work.measured);
    let found = store.get_batch(&keys, AsOf::PerRow(&times)).expect("get");
    let answers = index.get_batch(&pairs);
    assert!(
        Answers::of(&found) == answers,
        "the ceiling answers differently"
    );

    let mut group = c.benchmark_group("join_state");
    let ops = work.measured.updates.len() + work.measured.lookups.len();
    group.throughput(Throughput::Elements(ops as u64));
    group.bench_function("store_in_memory", |b| {
        b.iter_batched(
            || work.warm_store(),
            |mut store| {
                work.put_store(&mut store, &work.measured);
                black_box(store.get_batch(&keys, AsOf::PerRow(&times)).expect("get"));
                store
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("raw_per_key_index", |b| {
        b.iter_batched(
            || work.warm_index(),
            |mut index| {
                work.put_index(&mut index, &work.measured);
                black_box(index.get_batch(&pairs));
                index
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

// --- latest_ttl ----------------------------------------------------------------------------

/// The stores a latest TTL is measured on: the write-ahead log on and no write buffer
/// (`logged`), the log off with the write buffer (`buffered`, the checkpointed mode), in memory.
#[derive(Clone, Copy)]
enum Backing {
    Logged,
    Buffered,
    InMemory,
}

impl Backing {
    const ALL: [Self; 3] = [Self::Logged, Self::Buffered, Self::InMemory];

    fn name(self) -> &'static str {
        match self {
            Self::Logged => "logged",
            Self::Buffered => "buffered",
            Self::InMemory => "in_memory",
        }
    }

    /// A new store of this backing in `dir` (unused in memory).
    fn open(self, dir: &std::path::Path, config: StoreConfig) -> VersionedStore {
        match self {
            Self::Logged => VersionedStore::open_with(dir, config, RocksOptions::default()),
            Self::Buffered => VersionedStore::open_with(dir, config, wal_off()),
            Self::InMemory => Ok(VersionedStore::in_memory(config)),
        }
        .expect("open")
    }
}

/// A TTL far beyond every time the workload writes: nothing expires, so a store with it does
/// what a store without does plus the TTL's accounting and checks.
const NEVER_MS: i64 = 1 << 50;

/// TTL off and a TTL that never fires: `(name, latest_ttl_ms)`.
const TTL_SETTINGS: [(&str, Option<i64>); 2] = [("off", None), ("on", Some(NEVER_MS))];

fn ttl_config(config: StoreConfig, ttl: Option<i64>) -> StoreConfig {
    config.with_latest_ttl(ttl).expect("latest_ttl_ms")
}

/// The workload's puts (`fill`), not inlined, so that callgrind can count its instructions
/// alone (`--toggle-collect=*ttl_fill*`, BENCHMARKS.md "Latest TTL").
#[inline(never)]
fn ttl_fill(store: &mut VersionedStore, w: &Workload) {
    fill(store, w);
}

/// One batch read, not inlined for the same reason (`--toggle-collect=*ttl_read*`).
#[inline(never)]
fn ttl_read(store: &mut VersionedStore, keys: &[&[u8]], times: &[i64]) -> verstore::RecordColumns {
    let found = store.get_batch(keys, AsOf::PerRow(times)).expect("get");
    assert!(found.present.iter().all(|&p| p));
    found
}

/// Rounds of fresh keys, as sessions or orders that stop changing: round r writes
/// `per_round` keys never written before (16 random bytes, 32-byte values) at times spread over
/// `[r·ROUND_MS, (r + 1)·ROUND_MS)`, in batches of 10 000, and every tenth round flushes (a
/// checkpoint's work, which moves a buffered store's durable horizon). History retention is
/// one round, the TTL three.
struct Churn {
    per_round: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
}

const ROUND_MS: i64 = 10_000;
const CHURN_ROUNDS: usize = 100;
const CHURN_TTL_MS: i64 = 3 * ROUND_MS;
/// Rounds after which `latest_ttl` prints the stores' `latest_keys` and `disk_bytes`.
const CHURN_REPORTED: [usize; 4] = [25, 50, 75, 100];

impl Churn {
    fn new(per_round: usize) -> Self {
        let mut rng = Rng(0xc4_0e2);
        let rows = per_round * CHURN_ROUNDS;
        Self {
            per_round,
            keys: rng.bytes(16 * rows),
            values: rng.bytes(32 * rows),
        }
    }

    fn config(ttl: Option<i64>) -> StoreConfig {
        let config = StoreConfig::new(ROUND_MS, None).expect("config");
        ttl_config(config, ttl.map(|_| CHURN_TTL_MS))
    }

    /// Writes the rounds into `store`; after each of `CHURN_REPORTED`, its stats:
    /// `(latest_keys, disk_bytes)`.
    fn run(&self, store: &mut VersionedStore) -> Vec<(u64, u64)> {
        let mut reported = Vec::new();
        for round in 0..CHURN_ROUNDS {
            let first = round * self.per_round;
            for start in (first..first + self.per_round).step_by(BATCH) {
                let end = (start + BATCH).min(first + self.per_round);
                store
                    .put_batch((start..end).map(|row| self.row(round, row)))
                    .expect("put");
            }
            if (round + 1) % 10 == 0 {
                store.flush().expect("flush");
            }
            if CHURN_REPORTED.contains(&(round + 1)) {
                let stats = store.stats().expect("stats");
                reported.push((stats.latest_keys, stats.disk_bytes));
            }
        }
        reported
    }

    fn row(&self, round: usize, row: usize) -> (&[u8], Option<&[u8]>, i64) {
        let at = i64::try_from(row - round * self.per_round).unwrap_or(0);
        let spread = ROUND_MS / i64::try_from(self.per_round).unwrap_or(1).max(1);
        let time = i64::try_from(round).unwrap_or(0) * ROUND_MS + at * spread.max(1);
        let key = &self.keys[16 * row..16 * (row + 1)];
        (key, Some(&self.values[32 * row..32 * (row + 1)]), time)
    }

    /// `dead` keys at times of round 0, then `live` keys late enough that every one of the
    /// dead is reclaimable (three rounds of TTL, one of retention, and a bucket past them).
    fn dead_and_live(&self, store: &mut VersionedStore, dead: usize, live: usize) {
        let late = 6 * ROUND_MS;
        let rows = (0..dead + live).map(|row| {
            let time = if row < dead { 0 } else { late };
            let key = &self.keys[16 * row..16 * (row + 1)];
            (key, Some(&self.values[32 * row..32 * (row + 1)]), time)
        });
        let rows: Vec<_> = rows.collect();
        for chunk in rows.chunks(BATCH) {
            store.put_batch(chunk.iter().copied()).expect("put");
        }
    }
}

type Group<'c> = criterion::BenchmarkGroup<'c, criterion::measurement::WallTime>;

fn latest_ttl(c: &mut Criterion) {
    let keys = env("VERSTORE_BENCH_KEYS", 50_000);
    let w = workload(keys);
    let mut group = c.benchmark_group("latest_ttl");
    ttl_puts(&mut group, &w);
    ttl_reads(&mut group, &w);
    ttl_churn(&mut group, keys);
    ttl_reclaim(&mut group, keys);
    group.finish();
}

/// The accounting alone: the `put_batch` workload, TTL off and never firing.
fn ttl_puts(group: &mut Group<'_>, w: &Workload) {
    group.throughput(Throughput::Elements(w.rows.len() as u64));
    for backing in Backing::ALL {
        for (setting, ttl) in TTL_SETTINGS {
            let name = format!("put_{}_{setting}", backing.name());
            group.bench_function(name, |b| {
                b.iter_batched(
                    || tempfile::tempdir().expect("tempdir"),
                    |dir| {
                        let mut store = backing.open(dir.path(), ttl_config(config(), ttl));
                        ttl_fill(&mut store, w);
                        drop(store);
                        dir
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
}

/// The accounting and checks alone: the `get_batch` workload, TTL off and never firing.
fn ttl_reads(group: &mut Group<'_>, w: &Workload) {
    let keys = w.keys.len();
    let probes: Vec<&[u8]> = w.probes.iter().map(|&k| w.keys[k].as_slice()).collect();
    let last = i64::try_from((VERSIONS - 1) * keys).unwrap_or(0);
    let at = |k: usize| i64::try_from(k).unwrap_or(0);
    let newest: Vec<i64> = w.probes.iter().map(|&k| last + at(k)).collect();
    let history: Vec<i64> = (w.probes.iter().enumerate())
        .map(|(i, &k)| at((i % (VERSIONS - 1)) * keys + k))
        .collect();
    group.throughput(Throughput::Elements(probes.len() as u64));
    for backing in Backing::ALL {
        for (setting, ttl) in TTL_SETTINGS {
            for (read, times) in [("newest", &newest), ("history", &history)] {
                let name = format!("get_{read}_{}_{setting}", backing.name());
                // Built at the first sample, so that a run filtered to other benchmarks does not
                // pay for it.
                let mut built = None;
                group.bench_function(name, |b| {
                    let (_, store) = built.get_or_insert_with(|| {
                        let dir = tempfile::tempdir().expect("tempdir");
                        let mut store = backing.open(dir.path(), ttl_config(config(), ttl));
                        fill(&mut store, w);
                        store.flush().expect("flush");
                        (dir, store)
                    });
                    b.iter(|| black_box(ttl_read(store, &probes, times)));
                });
            }
        }
    }
}

/// Churn: fresh keys that stop changing, without a TTL and with one of three rounds.
fn ttl_churn(group: &mut Group<'_>, keys: usize) {
    let churn = std::cell::OnceCell::new();
    let churn = || churn.get_or_init(|| Churn::new(keys / 5));
    group.throughput(Throughput::Elements((keys / 5 * CHURN_ROUNDS) as u64));
    for backing in Backing::ALL {
        for setting in ["off", "on"] {
            let ttl = (setting == "on").then_some(CHURN_TTL_MS);
            let name = format!("churn_{}_{setting}", backing.name());
            let mut reported = false;
            group.bench_function(name.clone(), |b| {
                b.iter_batched(
                    || tempfile::tempdir().expect("tempdir"),
                    |dir| {
                        let mut store = backing.open(dir.path(), Churn::config(ttl));
                        let stats = churn().run(&mut store);
                        if !std::mem::replace(&mut reported, true) {
                            // Once: how state grows (TTL off) or stays flat (on), by round.
                            println!("{name}: (latest_keys, disk_bytes) after rounds {CHURN_REPORTED:?}: {stats:?}");
                        }
                        drop(store);
                        dir
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
}

/// The time a reclamation takes: a buffered store of `2 · keys` dead keys and one more live
/// key, all in its write buffer and memtables; `reclaim_expired` (a flush, then the compaction
/// of the latest values) against a flush of the same store without a TTL. One live key more
/// than dead, so that the flush does not start the store's own reclamation (due once as many
/// are reclaimable as are live) before `reclaim_expired` runs its own.
fn ttl_reclaim(group: &mut Group<'_>, keys: usize) {
    let (dead, live) = (2 * keys, 2 * keys + 1);
    group.throughput(Throughput::Elements((dead + live) as u64));
    for setting in ["off", "on"] {
        let ttl = (setting == "on").then_some(CHURN_TTL_MS);
        let name = if ttl.is_some() {
            "reclaim_buffered"
        } else {
            "flush_buffered"
        };
        group.bench_function(name, |b| {
            let many = std::cell::OnceCell::new();
            let many = || many.get_or_init(|| Churn::new((dead + live).div_ceil(CHURN_ROUNDS)));
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let mut store = Backing::Buffered.open(dir.path(), Churn::config(ttl));
                    many().dead_and_live(&mut store, dead, live);
                    (dir, store)
                },
                |(dir, mut store)| {
                    if ttl.is_some() {
                        store.reclaim_expired().expect("reclaim");
                    } else {
                        store.flush().expect("flush");
                    }
                    (dir, store)
                },
                BatchSize::PerIteration,
            );
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = put_batch, get_batch, hot_key, handoff, join_state, latest_ttl
}
criterion_main!(benches);
