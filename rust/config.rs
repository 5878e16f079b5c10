//! Store configuration: history retention (which is also the grace period for writes) and the
//! segment interval, with Kafka's default interval rule.
//!
//! The configuration is recorded in the store itself (see `format/meta`) because reinterpreting
//! existing segments with another interval or retention would silently return wrong reads.

use crate::error::{Error, Result};
use crate::ttl::LatestTtl;

/// Thresholds of a store's work below which it does less (reads ahead, reclaims, caches, repairs):
/// the shipped ones are [`Tuning::default`], which every store opened through the public API
/// takes. A test that must reach the paths above them in a few rows hands a store others
/// ([`Tuning::SMALL`], through `VersionedStore::open_tuned` or `in_memory_tuned`), and says so;
/// every other test runs the shipped ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tuning {
    /// Rows of a batch put whose latest values are read ahead at once: large enough for the
    /// sorted read to share blocks, small enough to hold (about 150 bytes a row).
    pub(crate) read_ahead_rows: usize,
    /// Reclaimable latest values below which no reclamation is worth a compaction's start
    /// (docs/semantics.md §2.15).
    pub(crate) min_reclaim: u64,
    /// Rows shorter than this are read from RocksDB each time rather than kept in its cache of
    /// decoded rows: their walk is short, and caching them would spend the budget on rows that
    /// gain little (`backend/rocks/row_cache.rs`).
    pub(crate) min_cached_row_bytes: usize,
    /// Whether a read that merged a row writes it back at its first merge whatever the store's
    /// size (shipped: only while its files fit in its share of the block cache, at the second
    /// merge otherwise; `backend/rocks/repair.rs`).
    pub(crate) repair_at_first_merge: bool,
}

impl Default for Tuning {
    /// The shipped thresholds.
    fn default() -> Self {
        Self {
            read_ahead_rows: 65_536,
            min_reclaim: 256,
            min_cached_row_bytes: 1024,
            repair_at_first_merge: false,
        }
    }
}

impl Tuning {
    /// Thresholds that a few rows cross: batches cross from one read ahead to the next, a
    /// few expired values start a reclamation, every row is cached and every merged row
    /// repaired, so that the property suites meet those paths at every step.
    #[cfg(test)]
    pub(crate) const SMALL: Self = Self {
        read_ahead_rows: 3,
        min_reclaim: 4,
        min_cached_row_bytes: 1,
        repair_at_first_merge: true,
    };
}

/// History retention and segment interval of a store, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    history_retention_ms: i64,
    segment_interval_ms: i64,
    latest_ttl: Option<LatestTtl>,
}

impl StoreConfig {
    /// Validates the settings; `segment_interval_ms = None` applies Kafka's default rule.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative retention or an interval below 1.
    pub fn new(history_retention_ms: i64, segment_interval_ms: Option<i64>) -> Result<Self> {
        if history_retention_ms < 0 {
            return Err(Error::invalid(
                "history_retention_ms",
                format!("history_retention_ms must be >= 0, got {history_retention_ms}"),
            ));
        }
        let segment_interval_ms = match segment_interval_ms {
            Some(interval) if interval < 1 => {
                return Err(Error::invalid(
                    "segment_interval_ms",
                    format!("segment_interval_ms must be >= 1, got {interval}"),
                ));
            }
            Some(interval) => interval,
            None => default_segment_interval_ms(history_retention_ms),
        };
        Ok(Self {
            history_retention_ms,
            segment_interval_ms,
            latest_ttl: None,
        })
    }

    /// This configuration with a time-to-live on keys' newest versions (`None`: none).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a TTL below 1.
    pub fn with_latest_ttl(self, latest_ttl_ms: Option<i64>) -> Result<Self> {
        if let Some(ttl) = latest_ttl_ms
            && ttl < 1
        {
            return Err(Error::invalid(
                "latest_ttl_ms",
                format!("latest_ttl_ms must be >= 1 or None, got {ttl}"),
            ));
        }
        Ok(Self {
            latest_ttl: latest_ttl_ms.map(|ttl| LatestTtl::new(ttl, self.segment_interval_ms)),
            ..self
        })
    }

    /// The time-to-live of keys' newest versions, if the store has one.
    #[must_use]
    pub fn latest_ttl(&self) -> Option<LatestTtl> {
        self.latest_ttl
    }

    /// How far behind observed stream time reads stay exact; also the grace period for writes.
    #[must_use]
    pub fn history_retention_ms(&self) -> i64 {
        self.history_retention_ms
    }

    /// The grace period for writes. Kafka hard-wires it to the history retention.
    #[must_use]
    pub fn grace_period_ms(&self) -> i64 {
        self.history_retention_ms
    }

    /// Width of the time buckets older versions are stored in (by valid-to).
    #[must_use]
    pub fn segment_interval_ms(&self) -> i64 {
        self.segment_interval_ms
    }

    /// The segment holding versions whose valid-to is `timestamp`: Java's truncating division,
    /// so `-I < t < 0` maps to segment 0, as in Kafka.
    #[must_use]
    pub fn segment_id(&self, timestamp: i64) -> i64 {
        timestamp / self.segment_interval_ms
    }
}

/// Kafka's default segment interval for a history retention
/// (`RocksDbVersionedKeyValueBytesStoreSupplier`).
#[must_use]
pub fn default_segment_interval_ms(history_retention_ms: i64) -> i64 {
    let r = history_retention_ms;
    if r <= 60_000 {
        (r / 3).max(2_000)
    } else if r <= 300_000 {
        (r / 5).max(20_000)
    } else if r <= 3_600_000 {
        (r / 12).max(60_000)
    } else {
        (r / 24).max(300_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_interval_matches_kafka_table() {
        let cases = [
            (0, 2_000),
            (6_000, 2_000),
            (30_000, 10_000),
            (60_000, 20_000),
            (100_000, 20_000),
            (200_000, 40_000),
            (300_000, 60_000),
            (720_000, 60_000),
            (1_200_000, 100_000),
            (3_600_000, 300_000),
            (7_200_000, 300_000),
            (86_400_000, 3_600_000),
        ];
        for (retention, interval) in cases {
            assert_eq!(
                default_segment_interval_ms(retention),
                interval,
                "R={retention}"
            );
        }
    }

    #[test]
    fn rejects_negative_retention_and_non_positive_interval() {
        assert!(StoreConfig::new(-1, None).is_err());
        assert!(StoreConfig::new(0, Some(0)).is_err());
        assert!(StoreConfig::new(0, Some(-5)).is_err());
        assert_eq!(
            StoreConfig::new(0, Some(1))
                .map(|c| c.segment_interval_ms())
                .ok(),
            Some(1)
        );
    }

    #[test]
    fn a_latest_ttl_below_one_is_refused_naming_it() {
        let config = StoreConfig::new(100, Some(10)).expect("valid");
        assert_eq!(config.latest_ttl(), None);
        for bad in [0, -1, i64::MIN] {
            let error = config.with_latest_ttl(Some(bad)).expect_err("refused");
            assert!(error.to_string().contains("latest_ttl_ms"), "{error}");
        }
        let with = config.with_latest_ttl(Some(50)).expect("valid");
        assert_eq!(with.latest_ttl().map(|t| t.ttl_ms()), Some(50));
        assert_eq!(with.with_latest_ttl(None).expect("valid"), config);
    }

    #[test]
    fn segment_id_truncates_toward_zero() {
        let config = StoreConfig::new(0, Some(10)).expect("valid");
        assert_eq!(config.segment_id(0), 0);
        assert_eq!(config.segment_id(9), 0);
        assert_eq!(config.segment_id(10), 1);
        assert_eq!(config.segment_id(-9), 0);
        assert_eq!(config.segment_id(-10), -1);
    }
}
