//! Kafka's `RocksDBVersionedStoreTest`, ported once, as data: `tests/data/kafka_scenarios.json`
//! (its `format` entry describes the steps), which `tests/core/test_store_semantics.py` runs too.
//!
//! Every scenario runs on the in-memory store, on RocksDB, and through changelog restore from
//! either: the writes go to a recording store, and before each read the changelog of the writes
//! so far is taken and replayed into a fresh store (in small chunks), which must answer the read
//! as the scenario says.

use serde::Deserialize;

use crate::{PutOutcome, ResultOrder, StoreConfig, VersionedRecord, VersionedStore};

const CATALOGUE: &str = include_str!("../../../tests/data/kafka_scenarios.json");

#[derive(Debug, Deserialize)]
struct Catalogue {
    config: Config,
    scenarios: Vec<Scenario>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct Config {
    history_retention_ms: i64,
    segment_interval_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct Scenario {
    name: String,
    config: Option<Config>,
    steps: Vec<Step>,
}

/// `(value, timestamp, valid_to)`.
type Record = (String, i64, Option<i64>);
/// `(key, value, timestamp)`.
type Write = (String, Option<String>, i64);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Call {
    Put(String, Option<String>, i64),
    PutBatch(Vec<Write>),
    Delete(String, i64),
    Get((String,)),
    GetAsOf(String, i64),
    Versions(String, Option<i64>, Option<i64>),
    ObservedStreamTime(i64),
}

#[derive(Debug, Deserialize)]
struct Step {
    #[serde(flatten)]
    call: Call,
    #[serde(default)]
    returns: serde_json::Value,
}

impl Step {
    /// What the step says the call returns.
    fn returns<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.returns.clone()).expect("a well-formed scenario")
    }
}

fn catalogue() -> Catalogue {
    serde_json::from_str(CATALOGUE).expect("tests/data/kafka_scenarios.json parses")
}

fn to_record((value, timestamp, valid_to): Record) -> VersionedRecord {
    VersionedRecord {
        value: value.into_bytes(),
        timestamp,
        valid_to,
    }
}

fn bytes(value: Option<&String>) -> Option<&[u8]> {
    value.map(String::as_bytes)
}

/// Where a scenario's writes go and where its reads are answered.
#[derive(Debug, Clone, Copy)]
enum Mode {
    InMemory,
    RocksDb,
    /// Writes recorded in memory, replayed from changelog bytes into an in-memory store.
    RestoredInMemory,
    /// Writes recorded by RocksDB (a spool file), replayed from changelog files into RocksDB.
    RestoredRocksDb,
}

const ATTEMPT: &[u8] = &[7; 16];

/// The stores of one scenario run.
struct Subject {
    mode: Mode,
    writer: VersionedStore,
    /// The restored store (restore modes) and the last changelog version replayed into it.
    replica: Option<(VersionedStore, i64)>,
    dir: tempfile::TempDir,
}

impl Subject {
    fn new(mode: Mode, config: StoreConfig) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str| VersionedStore::open(dir.path().join(name), config).expect("open");
        let (writer, replica) = match mode {
            Mode::InMemory => (VersionedStore::in_memory(config), None),
            Mode::RocksDb => (open("writer"), None),
            Mode::RestoredInMemory => (
                VersionedStore::in_memory(config),
                Some(VersionedStore::in_memory(config)),
            ),
            Mode::RestoredRocksDb => (open("writer"), Some(open("replica"))),
        };
        let mut subject = Self {
            mode,
            writer,
            replica: replica.map(|r| (r, 0)),
            dir,
        };
        subject.writer.set_record_changes(true).expect("record");
        subject
    }

    /// The store that answers reads: the writer, or the replica caught up with the writes.
    fn reader(&mut self) -> &VersionedStore {
        let Some((replica, version)) = &mut self.replica else {
            return &self.writer;
        };
        *version += 1;
        let name = format!("{version}.changelog");
        if matches!(self.mode, Mode::RestoredInMemory) {
            let changelog = self
                .writer
                .take_changelog(*version, ATTEMPT, ATTEMPT)
                .expect("take");
            replica
                .apply_changelog(&changelog, &name, 2)
                .expect("replay");
        } else {
            let path = self.dir.path().join(&name);
            self.writer
                .take_changelog_to(&path, *version, ATTEMPT, ATTEMPT)
                .expect("take");
            replica
                .apply_changelog_file(&path, &name, 3)
                .expect("replay");
        }
        replica
    }
}

fn run(scenario: &Scenario, default: Config, mode: Mode) {
    let config = scenario.config.unwrap_or(default);
    let config = StoreConfig::new(config.history_retention_ms, config.segment_interval_ms)
        .expect("scenario config");
    let mut subject = Subject::new(mode, config);
    for (i, step) in scenario.steps.iter().enumerate() {
        let at = format!("{} [{mode:?}] step {i}: {:?}", scenario.name, step.call);
        match &step.call {
            Call::Put(key, value, timestamp) => {
                let outcome = subject
                    .writer
                    .put(key.as_bytes(), bytes(value.as_ref()), *timestamp);
                let code = outcome.expect("put").code();
                assert_eq!(code, step.returns::<i64>(), "{at}");
            }
            Call::PutBatch(rows) => {
                let rows = rows
                    .iter()
                    .map(|(k, v, t)| (k.as_bytes(), bytes(v.as_ref()), *t));
                let codes: Vec<i64> = subject
                    .writer
                    .put_batch(rows)
                    .expect("put_batch")
                    .into_iter()
                    .map(PutOutcome::code)
                    .collect();
                assert_eq!(codes, step.returns::<Vec<i64>>(), "{at}");
            }
            Call::Delete(key, timestamp) => {
                let deleted = subject.writer.delete(key.as_bytes(), *timestamp);
                let expected = step.returns::<Option<Record>>().map(to_record);
                assert_eq!(deleted.expect("delete"), expected, "{at}");
            }
            Call::Get((key,)) => {
                let found = subject.reader().get(key.as_bytes()).expect("get");
                let expected = step.returns::<Option<Record>>().map(to_record);
                assert_eq!(found, expected, "{at}");
            }
            Call::GetAsOf(key, as_of) => {
                let found = subject.reader().get_as_of(key.as_bytes(), *as_of);
                let expected = step.returns::<Option<Record>>().map(to_record);
                assert_eq!(found.expect("get_as_of"), expected, "{at}");
            }
            Call::Versions(key, from, to) => {
                let reader = subject.reader();
                let mut expected: Vec<VersionedRecord> = step
                    .returns::<Vec<Record>>()
                    .into_iter()
                    .map(to_record)
                    .collect();
                for order in [ResultOrder::Descending, ResultOrder::Ascending] {
                    let found = reader.versions(key.as_bytes(), *from, *to, order);
                    assert_eq!(found.expect("versions"), expected, "{at} {order:?}");
                    expected.reverse();
                }
            }
            Call::ObservedStreamTime(time) => {
                assert_eq!(subject.reader().observed_stream_time(), *time, "{at}");
            }
        }
    }
}

#[test]
fn the_catalogue_names_each_scenario_once_and_reads_in_each() {
    let catalogue = catalogue();
    let mut names: Vec<&str> = catalogue
        .scenarios
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names.len(), 33);
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 33, "scenario names are unique");
    for scenario in &catalogue.scenarios {
        let reads = scenario.steps.iter().filter(|s| {
            matches!(
                s.call,
                Call::Get(_) | Call::GetAsOf(..) | Call::Versions(..) | Call::ObservedStreamTime(_)
            )
        });
        assert!(reads.count() > 0, "{} checks no read", scenario.name);
    }
}

#[test]
fn kafka_scenarios_on_both_backends_and_through_restore() {
    let catalogue = catalogue();
    for mode in [
        Mode::InMemory,
        Mode::RocksDb,
        Mode::RestoredInMemory,
        Mode::RestoredRocksDb,
    ] {
        for scenario in &catalogue.scenarios {
            run(scenario, catalogue.config, mode);
        }
    }
}
