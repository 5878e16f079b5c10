//! The edge cases of `docs/semantics.md` §8 (§E3–§E12), with the physical row moves of §3
//! step 2 (§E8) and the argument checks of §7; §E1 and §E2 are in `deviations`.

use super::harness::{ASC, DESC, PutRow, SI, U, config, kafka_config, on_both_backends, record};
use super::model::{Plan, assert_same, observe};
use crate::record::NOT_PUT;
use crate::{Error, VersionedRecord, VersionedStore};

/// §E3: `ST − R` itself is inside the grace period and the retention, one less is not.
#[test]
fn grace_and_retention_boundaries_are_inclusive_at_the_horizon() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("old", Some("o"), 100, U);
        s.put("k", Some("a"), 3_000, U);
        s.put("k", Some("b"), 4_500, U);
        s.put("other", Some("x"), 5_000, U);
        // H = 4 000
        s.put("late", Some("y"), 3_999, NOT_PUT);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        s.get_null("late");
        assert_eq!(s.delete("k", 3_999), None);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        s.get_value("k", "b", 4_500);

        s.as_of_value("k", 4_000, "a", 3_000, 4_500);
        s.as_of_null("k", 3_999);
        s.versions("k", None, Some(4_000), DESC, &[("a", 3_000, 4_500)]);
        s.versions("k", Some(0), Some(4_000), DESC, &[("a", 3_000, 4_500)]);
        s.versions("k", None, Some(3_999), DESC, &[]);

        // an expired bound still sees a latest value at or before it
        s.as_of_value("old", 3_999, "o", 100, U);
        s.versions("old", Some(0), Some(3_999), DESC, &[("o", 100, U)]);

        s.put("edge", Some("z"), 4_000, U);
        s.get_value("edge", "z", 4_000);
        assert_eq!(s.store.observed_stream_time(), 5_000);
        assert_eq!(s.delete("k", 4_000), Some(record("a", 3_000, 4_500)));
        s.as_of_null("k", 4_000);
    });
}

/// §E4: the latest value never expires, whatever the stream time.
#[test]
fn latest_value_never_expires() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", Some("v"), 0, U);
        s.put("other", Some("x"), 10_000_000, U);

        s.get_value("k", "v", 0);
        s.as_of_value("k", 5, "v", 0, U);
        s.as_of_value("k", 0, "v", 0, U);
        s.versions("k", None, Some(5), DESC, &[("v", 0, U)]);
        s.history("k", &[("v", 0, U)]);
        s.versions("k", Some(3), Some(3), DESC, &[("v", 0, U)]);
        // but it is not valid before its own timestamp
        s.as_of_null("other", 5);
    });
}

/// §E5: deleting an unknown key still writes a tombstone that bounds later writes.
#[test]
fn delete_of_unknown_key_writes_a_bounding_tombstone() {
    on_both_backends(config(1_000, 100), |s| {
        assert_eq!(s.delete("k", 50), None);
        assert_eq!(s.store.observed_stream_time(), 50);
        s.assert_row(0, "k", Some((50, &[(50, None)])));
        s.put("k", Some("v"), 40, 50);
        s.get_null("k");
        s.as_of_value("k", 45, "v", 40, 50);
        s.as_of_null("k", 50);

        // deleting where no record is valid (before the first version) also writes a tombstone
        s.put("j", Some("v"), 60, U);
        assert_eq!(s.delete("j", 20), None);
        s.put("j", Some("w"), 10, 20);
        s.as_of_value("j", 15, "w", 10, 20);
        s.as_of_null("j", 20);
        s.get_value("j", "v", 60);
    });
}

/// §E6: an empty value is a value, in the latest-value store and in rows.
#[test]
fn empty_value_is_not_a_tombstone() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", Some(""), 5, U);
        s.get_value("k", "", 5);
        assert!(s.has_latest("k"));
        s.put("k", None, 150, U);
        s.get_null("k");
        assert!(!s.has_latest("k"));
        s.assert_row(1, "k", Some((150, &[(5, Some(""))])));
        s.as_of_value("k", 149, "", 5, 150);
        s.put("k", Some(""), 160, U);
        s.put("k", Some("x"), 170, U);
        s.assert_row(
            1,
            "k",
            Some((170, &[(160, Some("")), (150, None), (5, Some(""))])),
        );
        s.history("k", &[("x", 170, U), ("", 160, 170), ("", 5, 150)]);
    });
}

/// §E7 / §1.6: the first write of a key as a tombstone makes a degenerate row, which bounds
/// later older writes and turns into a normal row when a version is inserted.
#[test]
fn degenerate_row_bounds_older_writes_and_becomes_a_normal_row() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 250, U);
        s.assert_row(2, "k", Some((250, &[(250, None)])));
        s.get_null("k");
        s.put("k", Some("v"), 120, 250);
        // the tombstone is now implicit as the row's next_timestamp
        s.assert_row(2, "k", Some((250, &[(120, Some("v"))])));
        s.assert_row(1, "k", None);
        s.as_of_value("k", 200, "v", 120, 250);
        s.as_of_null("k", 250);
        s.put("k", Some("w"), 260, U);
        s.as_of_null("k", 255);
        s.get_value("k", "w", 260);
        s.history("k", &[("w", 260, U), ("v", 120, 250)]);
    });
}

#[test]
fn value_at_a_degenerate_tombstone_timestamp_replaces_the_row() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 250, U);
        s.put("k", Some("v"), 250, U);
        s.assert_row(2, "k", None);
        assert!(s.has_latest("k"));
        s.get_value("k", "v", 250);
        s.history("k", &[("v", 250, U)]);
    });
}

#[test]
fn tombstones_after_a_degenerate_row_keep_bounding_in_order() {
    on_both_backends(config(1_000, 100), |s| {
        s.put("k", None, 210, U);
        s.put("k", None, 220, U);
        s.put("k", Some("v"), 215, 220);
        s.put("k", Some("u"), 205, 210);
        s.as_of_value("k", 207, "u", 205, 210);
        s.as_of_null("k", 212);
        s.as_of_value("k", 217, "v", 215, 220);
        s.as_of_null("k", 220);
        s.get_null("k");

        // a degenerate row in an older segment than the next value
        s.put("j", None, 150, U);
        s.put("j", Some("v"), 250, U);
        s.put("j", Some("w"), 200, 250);
        s.put("j", Some("x"), 100, 150);
        s.as_of_value("j", 120, "x", 100, 150);
        s.as_of_null("j", 175);
        s.as_of_value("j", 225, "w", 200, 250);
        s.assert_row(1, "j", Some((150, &[(100, Some("x"))])));
        s.assert_row(2, "j", Some((250, &[(200, Some("w"))])));
    });
}

/// §E8 / §3 step 2: a write that splits a version whose valid-from and valid-to lie in
/// different segments moves the older part to the older segment.
#[test]
fn splitting_a_version_moves_its_older_part_to_the_older_segment() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("vp20"), SI + 20, U);
        s.put("k", Some("vp10"), SI + 10, SI + 20);
        s.put("k", Some("vn10"), SI - 10, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 10, Some("vn10"))])),
        );
        s.assert_row(0, "k", None);

        s.put("k", Some("vn2"), SI - 2, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 2, Some("vn2"))])),
        );
        s.assert_row(0, "k", Some((SI - 2, &[(SI - 10, Some("vn10"))])));

        s.put("k", Some("vn1"), SI - 1, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((SI + 20, &[(SI + 10, Some("vp10")), (SI - 1, Some("vn1"))])),
        );
        s.assert_row(
            0,
            "k",
            Some((SI - 1, &[(SI - 2, Some("vn2")), (SI - 10, Some("vn10"))])),
        );

        // vn1 now ends at SI + 1, still in segment 1: nothing moves
        s.put("k", Some("vp1"), SI + 1, SI + 10);
        s.assert_row(
            1,
            "k",
            Some((
                SI + 20,
                &[
                    (SI + 10, Some("vp10")),
                    (SI + 1, Some("vp1")),
                    (SI - 1, Some("vn1")),
                ],
            )),
        );
        s.assert_row(
            0,
            "k",
            Some((SI - 1, &[(SI - 2, Some("vn2")), (SI - 10, Some("vn10"))])),
        );
        s.history(
            "k",
            &[
                ("vp20", SI + 20, U),
                ("vp10", SI + 10, SI + 20),
                ("vp1", SI + 1, SI + 10),
                ("vn1", SI - 1, SI + 1),
                ("vn2", SI - 2, SI - 1),
                ("vn10", SI - 10, SI - 2),
            ],
        );
    });
}

/// A tombstone that splits a version across segments moves the value, the tombstone takes the
/// slot.
#[test]
fn splitting_a_version_with_a_tombstone_moves_the_value() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("new"), SI + 20, U);
        s.put("k", Some("old"), SI - 10, SI + 20);
        s.put("k", None, SI - 5, SI + 20);
        s.assert_row(0, "k", Some((SI - 5, &[(SI - 10, Some("old"))])));
        s.assert_row(1, "k", Some((SI + 20, &[(SI - 5, None)])));
        s.as_of_value("k", SI - 6, "old", SI - 10, SI - 5);
        s.as_of_null("k", SI + 19);
        s.history("k", &[("new", SI + 20, U), ("old", SI - 10, SI - 5)]);
    });
}

/// §E9 example and §Q7: expiry is segment-granular and visible only through `versions()`.
#[test]
fn segment_expiry_is_visible_only_through_versions() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v_old"), 0, U);
        s.put("k", Some("v"), 99_990, U);
        s.put("other", Some("x"), 399_990, U);
        assert_eq!(s.store.live_segment_count(), 1);

        // H = 99 990: v_old ended at H and is still in segment 0
        let both = [("v", 99_990, U), ("v_old", 0, 99_990)];
        s.versions("k", Some(0), Some(99_990), DESC, &both);
        s.versions("k", None, None, DESC, &both);
        // an expired bound sees only the newest version
        s.versions("k", Some(0), Some(99_989), DESC, &[]);
        s.as_of_null("k", 99_989);
        s.as_of_value("k", 99_990, "v", 99_990, U);

        // H = 99 999: segment 0 is still live
        s.put("other", Some("y"), 399_999, U);
        s.versions("k", None, None, DESC, &both);
        assert_eq!(s.store.live_segment_count(), 2);

        // H = 100 000: segment 0 is dropped
        s.put("other", Some("z"), 400_000, U);
        s.history("k", &[("v", 99_990, U)]);
        s.versions("k", Some(0), Some(100_000), DESC, &[("v", 99_990, U)]);
        s.as_of_value("k", 99_990, "v", 99_990, U);
        s.get_value("k", "v", 99_990);
        s.assert_row(0, "k", None);
        assert_eq!(s.store.live_segment_count(), 2);

        // puts and point reads are unaffected by the drop
        s.as_of_value("other", 399_999, "y", 399_999, 400_000);
        s.put("other", Some("y2"), 399_999, 400_000);
    });
}

/// Nothing is dropped by reads or rejected writes.
#[test]
fn rejected_writes_and_reads_do_not_drop_segments() {
    on_both_backends(config(10, 10), |s| {
        s.put("k", Some("a"), 0, U);
        s.put("k", Some("b"), 5, U);
        s.put("k", Some("c"), 15, U);
        assert_eq!(s.store.live_segment_count(), 2);
        s.put("j", Some("x"), 2, NOT_PUT);
        let _ = s.store.versions(b"k", None, None, DESC).expect("versions");
        let _ = s.store.get_as_of(b"k", 0).expect("get_as_of");
        assert_eq!(s.store.live_segment_count(), 2);
        s.history("k", &[("c", 15, U), ("b", 5, 15), ("a", 0, 5)]);
    });
}

/// §E11: keys that are prefixes of each other, binary keys and the empty key are independent.
#[test]
fn prefix_binary_and_empty_keys_are_independent() {
    on_both_backends(config(1_000, 10), |s| {
        let keys: [&[u8]; 6] = [
            b"",
            b"a",
            b"ab",
            b"a\x00",
            b"\x00",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for (i, key) in keys.iter().enumerate() {
            let i = i64::try_from(i).expect("small");
            for step in 0..5 {
                let value = format!("{i}-{step}");
                let ts = step * 7 + i;
                let code = s
                    .store
                    .put(key, Some(value.as_bytes()), ts)
                    .expect("put")
                    .code();
                assert_eq!(code, U, "[{}] key {key:?}", s.backend);
            }
        }
        s.store.delete(b"ab", 100).expect("delete");
        for (i, key) in keys.iter().enumerate() {
            let i = i64::try_from(i).expect("small");
            let versions = s.store.versions(key, None, None, ASC).expect("versions");
            let timestamps: Vec<i64> = versions.iter().map(|r| r.timestamp).collect();
            assert_eq!(
                timestamps,
                (0..5).map(|step| step * 7 + i).collect::<Vec<_>>()
            );
            for (step, r) in versions.iter().enumerate() {
                assert_eq!(
                    r.value,
                    format!("{i}-{step}").into_bytes(),
                    "[{}] {key:?}",
                    s.backend
                );
            }
            let latest = s.store.get(key).expect("get");
            if *key == b"ab" {
                assert_eq!(latest, None);
                assert_eq!(versions.last().and_then(|r| r.valid_to), Some(100));
            } else {
                assert_eq!(latest.map(|r| r.timestamp), Some(4 * 7 + i));
            }
        }
    });
}

/// §E12 and §7: argument validation.
#[test]
fn invalid_arguments_are_rejected_without_writing() {
    on_both_backends(kafka_config(), |s| {
        s.put("k", Some("v"), 10, U);
        let err = s
            .store
            .put(b"k", Some(b"w"), -1)
            .expect_err("negative timestamp");
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    argument: "timestamp",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = s.store.delete(b"k", -5).expect_err("negative timestamp");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        let err = s
            .store
            .versions(b"k", Some(6), Some(5), DESC)
            .expect_err("from > to");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        s.versions("k", Some(10), Some(10), DESC, &[("v", 10, U)]);
        s.get_value("k", "v", 10);
        assert_eq!(s.store.observed_stream_time(), 10);

        // a batch with one bad row writes nothing
        let rows: [PutRow<'_>; 3] = [
            (b"a", Some(&b"1"[..]), 20),
            (b"b", Some(&b"2"[..]), 30),
            (b"c", Some(&b"3"[..]), -1),
        ];
        let err = s
            .store
            .put_batch(rows.iter().copied())
            .expect_err("bad row");
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains("[2]"), "{err}");
        s.get_null("a");
        s.get_null("b");
        assert_eq!(s.store.observed_stream_time(), 10);
        let deletes: [(&[u8], i64); 2] = [(b"k", 20), (b"k", -3)];
        assert!(s.store.delete_batch(deletes.iter().copied()).is_err());
        s.get_value("k", "v", 10);
        assert_eq!(s.store.observed_stream_time(), 10);
    });
}

#[test]
fn delete_batch_equals_a_loop_of_deletes() {
    on_both_backends(config(100, 10), |s| {
        for (key, ts) in [("a", 5), ("a", 25), ("b", 30), ("c", 40)] {
            s.put(key, Some(format!("{key}{ts}").as_str()), ts, U);
        }
        let mut looped = VersionedStore::in_memory(s.store.config());
        for (key, ts) in [("a", 5), ("a", 25), ("b", 30), ("c", 40)] {
            looped
                .put(key.as_bytes(), Some(format!("{key}{ts}").as_bytes()), ts)
                .expect("put");
        }
        let deletes: [(&[u8], i64); 6] = [
            (b"a", 20),
            (b"a", 20),
            (b"b", 200),
            (b"z", 50),
            (b"c", 90),
            (b"c", 35),
        ];
        let batched = s
            .store
            .delete_batch(deletes.iter().copied())
            .expect("delete_batch");
        let single: Vec<Option<VersionedRecord>> = deletes
            .iter()
            .map(|&(key, ts)| looped.delete(key, ts).expect("delete"))
            .collect();
        assert_eq!(batched, single, "[{}]", s.backend);
        assert_eq!(
            batched,
            vec![
                Some(record("a5", 5, 25)),
                None,
                Some(record("b30", 30, U)),
                None,
                None,
                None
            ]
        );
        assert_eq!(s.store.observed_stream_time(), 200);
        let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"z"];
        let plan = Plan::wide(200, 100);
        assert_same(
            &observe(&s.store, &keys, &plan),
            &observe(&looped, &keys, &plan),
        )
        .expect("same reads");
    });
}

/// §E12 at the other end: the largest time is a legal write time, read back as any other.
#[test]
fn writes_at_the_largest_time_read_back_on_both_backends() {
    on_both_backends(config(10, 3), |s| {
        s.put("k", Some("v"), i64::MAX - 5, U);
        assert_eq!(s.delete("k", i64::MAX), Some(record("v", i64::MAX - 5, U)));
        assert_eq!(s.delete("fresh", i64::MAX), None);
        s.get_null("k");
        s.get_null("fresh");
        s.as_of_value("k", i64::MAX - 1, "v", i64::MAX - 5, i64::MAX);
        s.as_of_null("k", i64::MAX);
        s.history("k", &[("v", i64::MAX - 5, i64::MAX)]);
        s.put("k", Some("w"), i64::MAX, U);
        s.get_value("k", "w", i64::MAX);
    });
}
