//! The store's behaviour suite, by subject. Each case cites what it checks in
//! `docs/semantics.md` (sections `§N`, deviations `§QN`, edge cases `§EN`).
//!
//! * [`kafka`]: Kafka's `RocksDBVersionedStoreTest`, as data shared with the Python suite
//!   (`tests/data/kafka_scenarios.json`), on both backends and through changelog restore;
//! * [`deviations`]: where verstore differs from Kafka on purpose (§6);
//! * [`edge_cases`]: the edge cases of §8, with the physical row moves of §3, argument checks
//!   and batches;
//! * [`model`]: a reference model of the documented semantics and the query plans that compare
//!   a store with it;
//! * [`properties`]: property tests: every backend against the model, batches against loops of
//!   single calls, replay order, the whole `i64` time range;
//! * [`persistence`]: reopening, configuration and lock checks;
//! * [`expiry`]: a latest TTL's expired values leaving storage with no read changed;
//! * [`handoff`]: a store closed with its write buffer saved, and reopened with it;
//! * [`failures`]: failed writes to storage leave a failed store or a failed call, never lost
//!   acknowledged writes;
//! * [`corruption`]: damaged rows are reported with their segment, never panicked on;
//! * [`restore`]: recording accepted writes and replaying them from changelogs;
//! * [`repartition`]: a store's history with its tombstones, copied into a new store in
//!   timestamp order, reads and takes writes as the store it came from;
//! * [`unsettled`]: the read-free path of in-order puts (§2.16): pushes, their settling by a
//!   put that reads, by a merge that finds a long history and by `settle`, against the model
//!   through reopens and crashes between a put and its settling.
//!
//! [`sut`] is the store under test of the property suites (scans use it too); [`harness`] holds
//! what the example-based cases share; they run against both backends
//! ([`harness::on_both_backends`]).

mod corruption;
mod deviations;
mod edge_cases;
mod expiry;
mod failures;
mod handoff;
mod harness;
mod kafka;
mod model;
mod persistence;
mod properties;
mod repartition;
mod restore;
pub(crate) mod sut;
mod unsettled;
