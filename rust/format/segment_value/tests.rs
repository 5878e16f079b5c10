//! The segment row codec's tests: case tables of the layout and its corruptions, and proptests
//! of round trips, merged appends and lookups against the full decoder.

use proptest::prelude::*;

use super::accessor::lookup_each;
use super::appends::POISON;
use super::*;
use crate::error::{Error, Result};

fn loc() -> String {
    "test row".to_owned()
}

fn row(next: i64, entries: &[(i64, Option<&'static [u8]>)]) -> SegmentRow<'static> {
    SegmentRow {
        next_timestamp: next,
        entries: entries
            .iter()
            .map(|&(timestamp, value)| Entry { timestamp, value })
            .collect(),
    }
}

/// Case table: (row, exact bytes).
#[test]
fn encodes_the_documented_layout() {
    let mut expected = Vec::new();
    for chunk in [
        &9i64.to_be_bytes()[..],
        &3i64.to_be_bytes(),
        &7i64.to_be_bytes(),
        &2i32.to_be_bytes(),
        &5i64.to_be_bytes(),
        &(-1i32).to_be_bytes(),
        &3i64.to_be_bytes(),
        &1i32.to_be_bytes(),
        b"x",
        b"yz",
    ] {
        expected.extend_from_slice(chunk);
    }
    let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
    assert_eq!(r.encode(), expected);
    assert_eq!(SegmentRow::decode(&expected, &loc).ok(), Some(r));
}

#[test]
fn round_trips_case_table() {
    let cases = [
        // degenerate single tombstone
        row(10, &[(10, None)]),
        // single value
        row(10, &[(4, Some(b"v"))]),
        // empty values are not tombstones
        row(10, &[(6, Some(b"")), (5, None), (4, Some(b""))]),
        // tombstones only
        row(10, &[(6, None), (2, None)]),
        // many versions
        row(
            1_000,
            &[
                (900, Some(b"a")),
                (800, Some(b"bb")),
                (700, None),
                (600, Some(b"")),
                (10, Some(b"ccc")),
            ],
        ),
    ];
    for case in cases {
        let bytes = case.encode();
        let decoded = SegmentRow::decode(&bytes, &loc).expect("decodes");
        assert_eq!(decoded, case);
        assert_eq!(
            decoded.min_timestamp(),
            case.entries.last().map_or(-1, |e| e.timestamp)
        );
    }
}

#[test]
fn degenerate_row_is_recognised() {
    assert!(row(10, &[(10, None)]).is_degenerate());
    assert!(!row(11, &[(10, None)]).is_degenerate());
    assert!(!row(10, &[(10, Some(b""))]).is_degenerate());
}

#[test]
fn valid_to_and_find() {
    let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
    assert_eq!((r.valid_to(0), r.valid_to(1), r.valid_to(2)), (9, 7, 5));
    assert_eq!(r.find(2), None);
    assert_eq!(r.find(3), Some(2));
    assert_eq!(r.find(6), Some(1));
    assert_eq!(r.find(100), Some(0));
}

#[test]
fn append_fills_a_gap_with_an_explicit_tombstone() {
    let mut r = row(5, &[(3, Some(b"x"))]);
    r.append_newest(
        Entry {
            timestamp: 7,
            value: Some(b"y"),
        },
        9,
    )
    .expect("append");
    assert_eq!(r, row(9, &[(7, Some(b"y")), (5, None), (3, Some(b"x"))]));
    // no gap: the row ended where the new version starts
    let mut r = row(5, &[(3, Some(b"x"))]);
    r.append_newest(
        Entry {
            timestamp: 5,
            value: Some(b"y"),
        },
        9,
    )
    .expect("append");
    assert_eq!(r, row(9, &[(5, Some(b"y")), (3, Some(b"x"))]));
    // a row ending after the new version is an invariant violation, not a panic
    let mut r = row(5, &[(3, Some(b"x"))]);
    assert!(
        r.append_newest(
            Entry {
                timestamp: 4,
                value: None
            },
            9
        )
        .is_err()
    );
}

#[test]
fn degenerate_rows_become_normal_rows() {
    let mut r = SegmentRow::degenerate(10);
    r.insert_oldest(Entry {
        timestamp: 5,
        value: Some(b"v"),
    });
    assert_eq!(r, row(10, &[(5, Some(b"v"))]));
    let mut r = SegmentRow::degenerate(10);
    r.append_newest(
        Entry {
            timestamp: 12,
            value: Some(b"v"),
        },
        20,
    )
    .expect("append");
    assert_eq!(r, row(20, &[(12, Some(b"v")), (10, None)]));
    let mut r = SegmentRow::degenerate(10);
    r.end_with_tombstone(15);
    assert_eq!(r, row(15, &[(10, None)]));
}

#[test]
fn corrupted_input_is_an_error_not_a_panic() {
    let good = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]).encode();
    // every truncation
    for len in 0..good.len() {
        assert!(
            SegmentRow::decode(&good[..len], &loc).is_err(),
            "truncated to {len}"
        );
    }
    // trailing garbage
    let mut long = good.clone();
    long.push(0);
    assert!(SegmentRow::decode(&long, &loc).is_err());
    // a min_timestamp that no entry reaches
    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&4i64.to_be_bytes());
    assert!(SegmentRow::decode(&bad, &loc).is_err());
    // a size below -1
    let mut bad = good;
    bad[24..28].copy_from_slice(&(-2i32).to_be_bytes());
    let err = SegmentRow::decode(&bad, &loc).expect_err("corrupt");
    assert!(err.to_string().contains("test row"), "{err}");
}

/// Each rule a row can break, and the complaint that names it: `decode`, `lookup` and
/// `lookup_each` report the same one (the one validator finds it).
#[test]
fn a_broken_rule_is_named_alike_by_every_reader() {
    // [9][3] [7,2] [5,-1] [3,1] "x" "yz": entries at 16, 28, 40; values from 52; 55 bytes
    let good = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]).encode();
    let edited = |at: usize, bytes: &[u8]| {
        let mut edited = good.clone();
        edited[at..at + bytes.len()].copy_from_slice(bytes);
        edited
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            good[..10].to_vec(),
            "row of 10 bytes is shorter than its 16-byte header",
        ),
        (
            edited(8, &(-1i64).to_be_bytes()),
            "header has min_timestamp -1 and next_timestamp 9",
        ),
        (
            edited(0, &2i64.to_be_bytes()),
            "header has min_timestamp 3 and next_timestamp 2",
        ),
        (
            good[..34].to_vec(),
            "index entry 1 at offset 28 is truncated",
        ),
        (
            edited(24, &(-2i32).to_be_bytes()),
            "index entry 0 has timestamp 7 and size -2",
        ),
        (
            edited(28, &8i64.to_be_bytes()),
            "index entry 1 has timestamp 8 and size -1",
        ),
        // a min_timestamp that no entry has: the oldest entry is below it
        (
            edited(8, &4i64.to_be_bytes()),
            "index entry 2 has timestamp 3 and size 1",
        ),
        (
            good[..54].to_vec(),
            "value of the version at 7 runs past the end of the row",
        ),
        (
            [&good[..], &[0]].concat(),
            "1 trailing bytes after the last value",
        ),
        (
            edited(0, &7i64.to_be_bytes()),
            "newest version is not older than next_timestamp 7",
        ),
    ];
    for (bytes, detail) in cases {
        let expected = format!("corrupt data in test row: {detail}");
        let decoded = SegmentRow::decode(&bytes, &loc).expect_err(detail);
        assert_eq!(decoded.to_string(), expected);
        let looked = lookup(&bytes, 4, &loc).expect_err(detail);
        assert_eq!(looked.to_string(), expected);
        let each = lookup_each(&bytes, &[4, 6], &loc, |_, _| Ok(())).expect_err(detail);
        assert_eq!(each.to_string(), expected);
    }
}

/// A lookup's answer as plain data: `(timestamp, valid_to, value, 0)` found, `1` after,
/// `(min_timestamp, .., 2)` before.
type Flat = (i64, i64, Option<Vec<u8>>, u8);

/// Every answer of a `lookup_each`-like `read` of `n` times, each given exactly once.
fn answers(
    n: usize,
    read: impl FnOnce(&mut dyn FnMut(usize, Lookup<'_>) -> Result<()>) -> Result<()>,
) -> Result<Vec<Option<Flat>>> {
    let mut got: Vec<Option<Flat>> = vec![None; n];
    read(&mut |k, found| {
        let flat = match found {
            Lookup::Found {
                timestamp,
                valid_to,
                value,
            } => (timestamp, valid_to, value.map(<[u8]>::to_vec), 0),
            Lookup::After => (0, 0, None, 1),
            Lookup::Before { min_timestamp } => (min_timestamp, 0, None, 2),
        };
        assert!(got[k].replace(flat).is_none(), "time {k} answered twice");
        Ok(())
    })?;
    Ok(got)
}

type ArbRow = (i64, Vec<(i64, Option<Vec<u8>>)>);

fn arb_row() -> impl Strategy<Value = ArbRow> {
    (
        proptest::collection::btree_set(0i64..1_000_000, 1..20),
        proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
            20,
        ),
        1i64..1_000,
    )
        .prop_map(|(timestamps, values, gap)| {
            let newest = *timestamps.iter().next_back().unwrap_or(&0);
            let entries = timestamps
                .iter()
                .rev()
                .zip(values)
                .map(|(&t, v)| (t, v))
                .collect();
            (newest + gap, entries)
        })
}

/// `(timestamp, valid_to, value)` of each append, in order.
type Appends = Vec<(i64, i64, Option<Vec<u8>>)>;

/// Appends as the put algorithm makes them: each newer than the row's end.
fn appends_after(
    next: i64,
    gaps: &[(i64, i64, Option<Vec<u8>>)],
) -> Vec<(i64, i64, Option<Vec<u8>>)> {
    let mut end = next;
    gaps.iter()
        .map(|(gap, len, value)| {
            let ts = end + gap;
            end = ts + len;
            (ts, end, value.clone())
        })
        .collect()
}

fn by_decode_and_append(base: Option<&[u8]>, appends: &[(i64, i64, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut row = base.map(|b| SegmentRow::decode(b, &loc).expect("base decodes"));
    for (ts, valid_to, value) in appends {
        let entry = Entry {
            timestamp: *ts,
            value: value.as_deref(),
        };
        match &mut row {
            Some(r) => r.append_newest(entry, *valid_to).expect("append"),
            None => row = Some(SegmentRow::single(entry, *valid_to)),
        }
    }
    row.expect("a row").encode()
}

fn operand(appends: &[(i64, i64, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ts, valid_to, value) in appends {
        encode_append(
            Entry {
                timestamp: *ts,
                value: value.as_deref(),
            },
            *valid_to,
            &mut out,
        );
    }
    out
}

#[test]
fn appends_merge_like_append_newest_case_table() {
    let degenerate = SegmentRow::degenerate(10).encode();
    let normal = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]).encode();
    let cases: Vec<(Option<&[u8]>, Appends)> = vec![
        (None, vec![(1, 2, Some(b"a".to_vec()))]),
        (
            None,
            vec![
                (1, 2, None),
                (2, 5, Some(Vec::new())),
                (7, 9, Some(b"b".to_vec())),
            ],
        ),
        // a degenerate tombstone at the appended time is replaced; an older one stays
        (Some(&degenerate), vec![(10, 12, Some(b"v".to_vec()))]),
        (Some(&degenerate), vec![(11, 12, Some(b"v".to_vec()))]),
        // a gap after the row's end becomes an explicit tombstone
        (
            Some(&normal),
            vec![(9, 11, Some(b"v".to_vec())), (15, 20, None)],
        ),
    ];
    for (base, appends) in cases {
        let op = operand(&appends);
        let merged = merge_appends(base, [&op[..]].into_iter());
        assert_eq!(merged, by_decode_and_append(base, &appends), "{appends:?}");
        // operands concatenate: one append per operand gives the same row
        let ops: Vec<Vec<u8>> = appends
            .iter()
            .map(|a| operand(std::slice::from_ref(a)))
            .collect();
        let split = merge_appends(base, ops.iter().map(Vec::as_slice));
        assert_eq!(split, merged);
    }
}

#[test]
fn an_append_that_does_not_fit_poisons_the_row_and_keeps_the_bytes() {
    let base = row(9, &[(7, Some(b"yz"))]).encode();
    // starts before the row ends: the put algorithm never makes this
    let op = operand(&[(8, 12, Some(b"v".to_vec()))]);
    let merged = merge_appends(Some(&base), [&op[..]].into_iter());
    assert!(SegmentRow::decode(&merged, &loc).is_err());
    assert_eq!(&merged[..8], &POISON);
    assert_eq!(&merged[8..8 + base.len()], &base[..]);
    // an undecodable base likewise
    let merged = merge_appends(Some(b"junk"), [&op[..]].into_iter());
    assert!(SegmentRow::decode(&merged, &loc).is_err());
    assert!(matches!(
        lookup(&merged, 9, &loc),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn lookup_agrees_with_decode() {
    let r = row(9, &[(7, Some(b"yz")), (5, None), (3, Some(b"x"))]);
    let bytes = r.encode();
    assert_eq!(
        lookup(&bytes, 2, &loc).ok(),
        Some(Lookup::Before { min_timestamp: 3 })
    );
    assert_eq!(lookup(&bytes, 9, &loc).ok(), Some(Lookup::After));
    assert_eq!(
        lookup(&bytes, 4, &loc).ok(),
        Some(Lookup::Found {
            timestamp: 3,
            valid_to: 5,
            value: Some(b"x")
        })
    );
    assert_eq!(
        lookup(&bytes, 6, &loc).ok(),
        Some(Lookup::Found {
            timestamp: 5,
            valid_to: 7,
            value: None
        })
    );
    assert_eq!(
        lookup(&bytes, 8, &loc).ok(),
        Some(Lookup::Found {
            timestamp: 7,
            valid_to: 9,
            value: Some(b"yz")
        })
    );
    let newest_at_max = SegmentRow::degenerate(i64::MAX).encode();
    assert!(SegmentRow::decode(&newest_at_max, &loc).is_ok());
    assert_eq!(
        lookup(&newest_at_max, i64::MAX, &loc).ok(),
        Some(Lookup::After)
    );
    for len in 0..bytes.len() {
        assert!(
            lookup(&bytes[..len], 4, &loc).is_err(),
            "truncated to {len}"
        );
    }
}

/// What `lookup` must answer for `t`, from a decoded row.
fn decoded_lookup<'a>(row: &SegmentRow<'a>, t: i64) -> Lookup<'a> {
    if row.next_timestamp() <= t {
        Lookup::After
    } else if row.min_timestamp() > t {
        Lookup::Before {
            min_timestamp: row.min_timestamp(),
        }
    } else {
        let i = row.find(t).expect("covered");
        Lookup::Found {
            timestamp: row.entries()[i].timestamp,
            valid_to: row.valid_to(i),
            value: row.entries()[i].value,
        }
    }
}

proptest! {
    #[test]
    fn merged_appends_equal_append_newest(
        (next, entries) in arb_row(),
        gaps in proptest::collection::vec(
            (0i64..3, 1i64..4, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4))),
            1..6,
        ),
        no_base in any::<bool>(),
    ) {
        let base = SegmentRow {
            next_timestamp: next,
            entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
        }.encode();
        let base = (!no_base).then_some(&base[..]);
        let appends = appends_after(next, &gaps);
        let op = operand(&appends);
        prop_assert_eq!(merge_appends(base, [&op[..]].into_iter()), by_decode_and_append(base, &appends));
    }

    #[test]
    fn lookup_finds_what_decode_finds((next, entries) in arb_row(), t in 0i64..1_100_000) {
        let r = SegmentRow {
            next_timestamp: next,
            entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
        };
        let bytes = r.encode();
        prop_assert_eq!(lookup(&bytes, t, &loc).ok(), Some(decoded_lookup(&r, t)));
    }

    /// A row with bytes overwritten (or cut short) is read by `lookup` exactly as the full
    /// decoder reads it: the same answer when it decodes, an error when it does not,
    /// except where the 16-byte header alone answers.
    #[test]
    fn lookup_checks_what_decode_checks(
        (next, entries) in arb_row(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        t in 0i64..1_100_000,
    ) {
        let r = SegmentRow {
            next_timestamp: next,
            entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
        };
        let mut bytes = r.encode();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        let looked = lookup(&bytes, t, &loc);
        match SegmentRow::decode(&bytes, &loc) {
            Ok(decoded) => {
                let expected = decoded_lookup(&decoded, t);
                prop_assert_eq!(looked.ok(), Some(expected));
            }
            Err(_) => prop_assert!(
                !matches!(looked, Ok(Lookup::Found { .. })),
                "lookup found {:?} in a row that does not decode", looked
            ),
        }
    }

    /// `lookup_each_appended` answers as `lookup_each` on the merged row, valid or not.
    #[test]
    fn lookup_each_appended_agrees_with_the_merged_row(
        (next, entries) in arb_row(),
        gaps in proptest::collection::vec(
            (-2i64..3, 1i64..4, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4))),
            0..5,
        ),
        no_base in any::<bool>(),
        lone_tombstone in any::<bool>(),
        edit in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        times in proptest::collection::vec(0i64..1_100_000, 0..6),
        near in proptest::collection::vec(-3i64..20, 0..6),
    ) {
        let base = if lone_tombstone {
            SegmentRow::degenerate(next).encode()
        } else {
            SegmentRow {
                next_timestamp: next,
                entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
            }.encode()
        };
        let base = (!no_base).then_some(&base[..]);
        let mut op = operand(&appends_after(next, &gaps));
        if let Some((at, byte)) = edit.filter(|_| !op.is_empty()) {
            let i = at.index(op.len());
            op[i] = byte;
        }
        // Times around the base's end and the appended versions, and anywhere.
        let times: Vec<i64> = times.into_iter().chain(near.iter().map(|d| next + d)).collect();
        let merged = merge_appends(base, std::iter::once(&op[..]));
        let expected = answers(times.len(), |f| lookup_each(&merged, &times, &loc, f));
        let split = answers(times.len(), |f| lookup_each_appended(base, &op, &times, &loc, f));
        match expected {
            Ok(expected) => prop_assert_eq!(split.ok(), Some(expected)),
            Err(_) => prop_assert!(split.is_err()),
        }
    }

    /// `lookup_each` answers every time as `lookup` does, and fails when one of them fails.
    #[test]
    fn lookup_each_agrees_with_lookup(
        (next, entries) in arb_row(),
        edit in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        times in proptest::collection::vec(0i64..1_100_000, 0..6),
    ) {
        let r = SegmentRow {
            next_timestamp: next,
            entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
        };
        let mut bytes = r.encode();
        if let Some((at, byte)) = edit {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let one_by_one: Result<Vec<Lookup<'_>>> =
            times.iter().map(|&t| lookup(&bytes, t, &loc)).collect();
        let mut each = vec![None; times.len()];
        let all = lookup_each(&bytes, &times, &loc, |k, found| {
            assert!(each[k].replace(found).is_none(), "time {k} answered twice");
            Ok(())
        });
        match one_by_one {
            Ok(expected) => {
                prop_assert!(all.is_ok());
                prop_assert_eq!(each, expected.into_iter().map(Some).collect::<Vec<_>>());
            }
            Err(_) => prop_assert!(all.is_err()),
        }
    }

    #[test]
    fn round_trips_any_row((next, entries) in arb_row()) {
        let r = SegmentRow {
            next_timestamp: next,
            entries: entries.iter().map(|(t, v)| Entry { timestamp: *t, value: v.as_deref() }).collect(),
        };
        let bytes = r.encode();
        prop_assert_eq!(SegmentRow::decode(&bytes, &loc).ok(), Some(r));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = SegmentRow::decode(&bytes, &loc);
    }
}
