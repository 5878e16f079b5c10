//! The byte order of sort keys: the stable sort behind the Spark helpers' external sort
//! (`verstore.spark._spill.ExternalSorter`), whose keys are tuple encodings that order like the
//! rows they encode.
//!
//! Keys are compared by a 16-byte integer prefix first (most comparisons end there, in
//! registers) and by their whole bytes only on a tie; equal keys keep their input order. A
//! generic byte-string sort (Arrow's `sort_indices` on a binary column) compares through a
//! pointer and a length each time, and was the largest single step of a join's micro-batch
//! outside the store.

use crate::format::key::sort_prefix;

/// The indices that put `keys` in ascending byte order, stable: equal keys keep their order,
/// and absent keys (`None`) come last, in their order.
#[must_use]
pub fn byte_order(keys: &[Option<&[u8]>]) -> Vec<u64> {
    let mut present: Vec<((u64, u64), usize)> = Vec::with_capacity(keys.len());
    let mut absent: Vec<usize> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match key {
            Some(k) => present.push((sort_prefix(k), i)),
            None => absent.push(i),
        }
    }
    // Unstable on (prefix, bytes, index), which is a total order: as stable as a stable sort.
    present.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| keys[a.1].cmp(&keys[b.1]))
            .then(a.1.cmp(&b.1))
    });
    present
        .into_iter()
        .map(|(_, i)| i)
        .chain(absent)
        .map(|i| i as u64)
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::byte_order;

    #[test]
    fn orders_by_bytes_then_input_order_with_absent_last() {
        let keys: Vec<Option<&[u8]>> = vec![
            Some(b"b"),
            None,
            Some(b"a\0"),
            Some(b"a"),
            Some(b"b"),
            Some(b""),
            None,
            Some(b"0123456789abcdefZ"),
            Some(b"0123456789abcdefA"),
        ];
        assert_eq!(byte_order(&keys), [5, 8, 7, 3, 2, 0, 4, 1, 6]);
        assert!(byte_order(&[]).is_empty());
    }

    proptest! {
        #[test]
        fn agrees_with_a_stable_sort_of_the_bytes(
            keys in proptest::collection::vec(
                proptest::option::weighted(0.9, proptest::collection::vec(0u8..4, 0..20)),
                0..60,
            ),
        ) {
            let keys: Vec<Option<&[u8]>> = keys.iter().map(Option::as_deref).collect();
            let mut expected: Vec<usize> = (0..keys.len()).collect();
            // Some(..) before None: absent keys last.
            expected.sort_by_key(|&i| (keys[i].is_none(), keys[i]));
            let expected: Vec<u64> = expected.into_iter().map(|i| i as u64).collect();
            prop_assert_eq!(byte_order(&keys), expected);
        }
    }
}
