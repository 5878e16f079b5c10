//! Where verstore differs from Kafka on purpose: `docs/semantics.md` §6 (§Q1, §Q2).

use super::harness::{ASC, DESC, SI, U, kafka_config, on_both_backends};

/// §Q1 (§E1): Kafka just deletes the latest value, losing the tombstone; verstore keeps it,
/// whatever came before it and whichever segment it is in.
#[test]
fn tombstone_replacing_latest_at_same_timestamp_bounds_older_writes() {
    on_both_backends(kafka_config(), |s| {
        // (key, the version at 3 if any, the time of the latest value and its tombstone)
        let cases = [
            ("k", None, 10),
            ("a", Some(Some("u")), 10),
            ("b", Some(None), 10),
            ("c", None, SI + 10),
        ];
        for (key, previous, t) in cases {
            if let Some(value) = previous {
                s.put(key, value, 3, U);
            }
            s.put(key, Some("v"), t, U);
            s.put(key, None, t, U);
            s.put(key, Some("w"), 5, t);
            s.get_null(key);
            assert!(!s.has_latest(key));
            s.as_of_value(key, t - 1, "w", 5, t);
            s.as_of_null(key, t);
            match previous {
                Some(Some(value)) => s.as_of_value(key, 4, value, 3, 5),
                _ => s.as_of_null(key, 4),
            }
        }
        s.history("k", &[("w", 5, 10)]);
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
            s.history(key, &[("w", 5, 10)]);
        }
    });
}

/// §Q2 (§E2): Kafka only scans segments up to `segment_id(to)`; a version valid at `to` can live
/// in a later segment because rows are placed by valid-to.
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
