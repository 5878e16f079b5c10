//! The latest-value codec's tests: both layouts byte for byte, pushes merged as the put
//! algorithm would place them, corruptions, and a proptest of merges against a list of versions.

use proptest::prelude::*;

use super::*;

fn push(timestamp: i64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_push(timestamp, value, &mut out);
    out
}

fn merged(base: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
    merge(base, operands.iter().copied()).bytes
}

/// `(timestamp, valid_to, value)` of every version an entry holds, oldest first (the newest
/// with `None`).
fn versions(bytes: &[u8]) -> Vec<(i64, Option<i64>, Vec<u8>)> {
    let latest = decode(bytes).expect("decodes");
    let mut out: Vec<_> = latest
        .history()
        .map(|v| (v.timestamp, Some(v.valid_to), v.value.to_vec()))
        .collect();
    out.push((latest.timestamp, None, latest.value.to_vec()));
    out
}

#[test]
fn round_trips_plain_values_including_empty() {
    for (ts, value) in [(0, &b""[..]), (7, b"x"), (i64::MAX, b"hello")] {
        let bytes = encode(ts, value);
        let latest = decode(&bytes).expect("decodes");
        assert_eq!((latest.timestamp, latest.value), (ts, value));
        assert!(!latest.has_history());
        assert_eq!(timestamp_of(&bytes), Some(ts));
    }
}

#[test]
fn short_entries_and_unknown_layouts_are_corrupt() {
    assert!(matches!(decode(b"1234567"), Err(Error::Corrupt { .. })));
    let mut unknown = (5i64 | HISTORY_MARK).to_be_bytes().to_vec();
    unknown.push(7);
    assert!(matches!(decode(&unknown), Err(Error::Corrupt { .. })));
    let mut cut = (5i64 | HISTORY_MARK).to_be_bytes().to_vec();
    cut.extend_from_slice(&[HISTORY_LAYOUT, 0, 0]);
    assert!(matches!(decode(&cut), Err(Error::Corrupt { .. })));
}

/// `x@3`, then pushes `yz@7` and `w@9`: the documented layout.
#[test]
fn encodes_the_documented_layout() {
    let bytes = merged(Some(&encode(3, b"x")), &[&push(7, b"yz"), &push(9, b"w")]);
    let mut expected = Vec::new();
    for chunk in [
        &(9i64 | i64::MIN).to_be_bytes()[..],
        &[1],
        &1u32.to_be_bytes(),
        b"w",
        &3i64.to_be_bytes(),
        &7i64.to_be_bytes(),
        &1i32.to_be_bytes(),
        b"x",
        &7i64.to_be_bytes(),
        &9i64.to_be_bytes(),
        &2i32.to_be_bytes(),
        b"yz",
    ] {
        expected.extend_from_slice(chunk);
    }
    assert_eq!(bytes, expected);
    assert_eq!(timestamp_of(&bytes), Some(9));
    assert_eq!(
        versions(&bytes),
        [
            (3, Some(7), b"x".to_vec()),
            (7, Some(9), b"yz".to_vec()),
            (9, None, b"w".to_vec())
        ]
    );
}

#[test]
fn pushes_follow_the_put_algorithm() {
    // onto nothing: the push is the entry, plain
    assert_eq!(merged(None, &[&push(5, b"a")]), encode(5, b"a").into_vec());
    // the same time replaces the value and moves nothing
    let same = merged(Some(&encode(5, b"a")), &[&push(5, b"b")]);
    assert_eq!(same, encode(5, b"b").into_vec());
    // operands concatenated (a partial merge) merge as separate ones
    let both = [push(6, b"b"), push(8, b"")].concat();
    assert_eq!(
        merged(Some(&encode(5, b"a")), &[&both]),
        merged(Some(&encode(5, b"a")), &[&push(6, b"b"), &push(8, b"")])
    );
    // history survives a same-time replacement of the newest value
    let history = merged(Some(&encode(1, b"a")), &[&push(4, b"b"), &push(4, b"c")]);
    assert_eq!(
        versions(&history),
        [(1, Some(4), b"a".to_vec()), (4, None, b"c".to_vec())]
    );
}

#[test]
fn an_older_push_or_a_bad_input_poisons_the_entry() {
    for (base, operand) in [
        (Some(encode(5, b"a").into_vec()), push(4, b"b")),
        (Some(b"short".to_vec()), push(4, b"b")),
        (None, b"cut".to_vec()),
        (None, push(-3, b"negative")),
    ] {
        let bytes = merged(base.as_deref(), &[&operand]);
        let err = decode(&bytes).expect_err("poisoned");
        assert!(err.to_string().contains("do not follow"), "{err}");
    }
}

#[test]
fn history_that_does_not_follow_is_corrupt() {
    let good = merged(Some(&encode(3, b"x")), &[&push(7, b"yz")]);
    // newest moved without its history: the history ends before it
    let mut bad = good.clone();
    bad[..8].copy_from_slice(&(8i64 | HISTORY_MARK).to_be_bytes());
    assert!(matches!(decode(&bad), Err(Error::Corrupt { .. })));
    // a tombstone in the history
    let mut tombstone = Vec::new();
    encode_append(
        Entry {
            timestamp: 3,
            value: None,
        },
        7,
        &mut tombstone,
    );
    let bytes = encode_with_history(7, b"v", &tombstone);
    assert!(matches!(decode(&bytes), Err(Error::Corrupt { .. })));
    // a gap between two versions
    let mut gap = Vec::new();
    for (t, to) in [(1, 2), (3, 7)] {
        let entry = Entry {
            timestamp: t,
            value: Some(b"v"),
        };
        encode_append(entry, to, &mut gap);
    }
    assert!(matches!(
        decode(&encode_with_history(7, b"v", &gap)),
        Err(Error::Corrupt { .. })
    ));
    // cut short
    assert!(matches!(
        decode(&good[..good.len() - 1]),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn finds_the_replaced_version_valid_at_a_time() {
    let bytes = merged(
        Some(&encode(3, b"x")),
        &[&push(7, b"yz"), &push(9, b"w"), &push(12, b"v")],
    );
    let latest = decode(&bytes).expect("decodes");
    assert_eq!(latest.oldest(), 3);
    let at = |t| {
        latest
            .replaced_at(t)
            .map(|v| (v.timestamp, v.valid_to, v.value))
    };
    assert_eq!(at(2), None);
    assert_eq!(at(3), Some((3, 7, &b"x"[..])));
    assert_eq!(at(6), Some((3, 7, &b"x"[..])));
    assert_eq!(at(7), Some((7, 9, &b"yz"[..])));
    assert_eq!(at(11), Some((9, 12, &b"w"[..])));
    assert_eq!(at(12), None, "the newest answers from 12 on");
    // each version's append is the one a row would receive
    let appends: Vec<u8> = latest.history().flat_map(|v| v.append.to_vec()).collect();
    assert_eq!(appends, bytes[13 + 1..]);
}

proptest! {
    /// Pushes merged in any grouping hold every version a list of them does.
    #[test]
    fn merges_keep_every_version(
        start in proptest::option::of((0i64..50, proptest::collection::vec(any::<u8>(), 0..4))),
        steps in proptest::collection::vec((0i64..3, proptest::collection::vec(any::<u8>(), 0..4)), 1..12),
        split in 0usize..12,
    ) {
        let mut model: Vec<(i64, Vec<u8>)> = start.iter().cloned().collect();
        let mut t = start.as_ref().map_or(0, |(t, _)| *t);
        let mut ops = Vec::new();
        for (gap, value) in &steps {
            t += gap;
            ops.push(push(t, value));
            match model.last_mut() {
                Some(last) if last.0 == t => last.1.clone_from(value),
                _ => model.push((t, value.clone())),
            }
        }
        let base = start.map(|(t, v)| encode(t, &v).into_vec());
        let separate: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        let at = split.min(ops.len());
        let grouped = [ops[..at].concat(), ops[at..].concat()];
        let grouped: Vec<&[u8]> = grouped.iter().map(Vec::as_slice).filter(|o| !o.is_empty()).collect();
        let one = merge(base.as_deref(), separate.iter().copied());
        let two = merge(base.as_deref(), grouped.iter().copied());
        prop_assert_eq!(&one.bytes, &two.bytes);
        prop_assert_eq!(one.history_len, model.len() - 1);
        let expected: Vec<_> = model
            .iter()
            .enumerate()
            .map(|(i, (t, v))| (*t, model.get(i + 1).map(|n| n.0), v.clone()))
            .collect();
        prop_assert_eq!(versions(&one.bytes), expected);
        // merged again onto its own result, a later push continues the same history
        let later = merge(Some(&one.bytes), std::iter::once(&push(t + 1, b"z")[..]));
        prop_assert_eq!(later.history_len, model.len());
    }
}
