//! Where verstore differs from Kafka on purpose: `docs/semantics.md` §6 (§Q1, §Q2).

use super::harness::{ASC, DESC, SI, U, kafka_config, on_both_backends};

/// §Q1 (§E1): Kafka just deletes the latest value, losing the tombstone; verstore keeps it.
#[test]
fn tombstone_replacing_latest_at_same_timestamp_bounds_older_writes() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 10, U);
        s.put("k", None, 10, U);
        s.put("k", Some("w"), 5, 10);

        s.get_null("k");
        s.as_of_null("k", 10);
        s.as_of_value("k", 7, "w", 5, 10);
        s.versions("k", None, None, DESC, &[("w", 5, 10)]);
        assert!(!s.has_latest("k"));
    });
}

#[test]
fn tombstone_replacing_latest_keeps_bounding_with_older_versions_present() {
    on_both_backends(kafka_config(), |s| {
        // previous version is a value
        s.put("a", Some("u"), 3, U);
        s.put("a", Some("v"), 10, U);
        s.put("a", None, 10, U);
        s.put("a", Some("w"), 5, 10);
        s.get_null("a");
        s.as_of_value("a", 4, "u", 3, 5);
        s.as_of_value("a", 9, "w", 5, 10);
        s.as_of_null("a", 10);

        // previous version is a tombstone
        s.put("b", None, 3, U);
        s.put("b", Some("v"), 10, U);
        s.put("b", None, 10, U);
        s.put("b", Some("w"), 5, 10);
        s.get_null("b");
        s.as_of_null("b", 4);
        s.as_of_value("b", 9, "w", 5, 10);

        // the tombstone is in a later segment than the older write
        s.put("c", Some("v"), SI + 10, U);
        s.put("c", None, SI + 10, U);
        s.put("c", Some("w"), 5, SI + 10);
        s.get_null("c");
        s.as_of_value("c", SI + 9, "w", 5, SI + 10);
        s.as_of_null("c", SI + 10);
    });
}

/// §Q1 breaks order independence in Kafka (§2.9); here both orders give the same reads.
#[test]
fn tombstone_at_latest_timestamp_gives_the_same_reads_in_any_order() {
    on_both_backends(kafka_config(), |s| {
        s.put("x", Some("v"), 10, U);
        s.put("x", None, 10, U);
        s.put("x", Some("w"), 5, 10);

        s.put("y", Some("w"), 5, U);
        s.put("y", Some("v"), 10, U);
        s.put("y", None, 10, U);

        for key in ["x", "y"] {
            s.get_null(key);
            s.as_of_null(key, 4);
            s.as_of_value(key, 5, "w", 5, 10);
            s.as_of_value(key, 9, "w", 5, 10);
            s.as_of_null(key, 10);
            s.versions(key, None, None, DESC, &[("w", 5, 10)]);
        }
    });
}

/// §Q2 (§E2): Kafka only scans segments up to `segment_id(to)`; a version valid at `to` can live in a
/// later segment because rows are placed by valid-to.
#[test]
fn versions_finds_a_version_stored_in_a_later_segment() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v1"), 10, U);
        s.put("k", Some("v2"), SI + 10, U);

        s.as_of_value("k", 50, "v1", 10, SI + 10);
        s.versions("k", Some(0), Some(50), DESC, &[("v1", 10, SI + 10)]);
        s.versions("k", Some(0), Some(50), ASC, &[("v1", 10, SI + 10)]);
        s.versions("k", Some(50), Some(50), DESC, &[("v1", 10, SI + 10)]);
        s.versions(
            "k",
            Some(0),
            Some(SI + 10),
            ASC,
            &[("v1", 10, SI + 10), ("v2", SI + 10, U)],
        );
        // the version is physically in segment 1, the segment of its valid-to
        s.assert_row(1, "k", Some((SI + 10, &[(10, Some("v1"))])));
        s.assert_row(0, "k", None);
    });
}
