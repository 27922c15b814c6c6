//! Shared sorting helpers. Every `sort_by` on a new element type is a new copy of the
//! standard library's sort (3-5 KB of wasm each); the core sorts through one function,
//! [`sort_keyed`] on (u64 key, u32 index) pairs (stable orders of larger items; u64 values
//! through [`sort_u64`], which goes through it), and an insertion sort for the few-element
//! lists sorted per event or per snapshot.
//!
//! [`sort_keyed`] is a radix sort, not the standard sort: its one instance of the standard
//! sort was ~4 KB of the npm package's wasm, whose size is gated (`wasm/README.md`, "Size"),
//! and the radix sort is a few hundred bytes, linear in the pairs (the findings of a
//! million-event trace, its lost block hashes) and no slower on them
//! (`docs/performance.md`, "The replay's tables in slices").

/// Sort `v` ascending, through [`sort_keyed`] (the crate's one sort: a temporary pair per
/// value is cheaper than a second sort's code).
pub(crate) fn sort_u64(v: &mut [u64]) {
    let mut keyed: Vec<(u64, u32)> = v.iter().map(|x| (*x, 0)).collect();
    sort_keyed(&mut keyed);
    for (x, (k, _)) in v.iter_mut().zip(keyed) {
        *x = k;
    }
}

/// Sort `(key, index)` pairs by key, then index. With distinct indices this is a stable
/// order by key.
///
/// A least-significant-digit radix sort, a byte at a time: the index's four bytes, then the
/// key's eight, each pass a stable scatter by that byte; a byte every pair shares (the high
/// bytes of small keys and indices) is skipped. Short or already sorted input is done
/// without the passes.
#[inline(never)]
pub fn sort_keyed(v: &mut [(u64, u32)]) {
    if v.len() < 32 {
        insertion_sort_by(v, |a, b| a < b);
        return;
    }
    if v.windows(2).all(|w| w.first() <= w.last()) {
        return;
    }
    let byte = |p: &(u64, u32), d: u32| -> usize {
        let b = if d < 4 {
            p.1 >> (8 * d)
        } else {
            (p.0 >> (8 * (d - 4))) as u32
        };
        (b & 0xff) as usize
    };
    let mut from = v.to_vec();
    let mut to = vec![(0u64, 0u32); v.len()];
    for d in 0..12 {
        // Pairs per byte value, then where each value's pairs start.
        let mut at = [0usize; 256];
        for p in &from {
            if let Some(n) = at.get_mut(byte(p, d)) {
                *n += 1;
            }
        }
        if at.contains(&from.len()) {
            continue;
        }
        let mut start = 0;
        for n in &mut at {
            (*n, start) = (start, start + *n);
        }
        for p in &from {
            if let Some(n) = at.get_mut(byte(p, d)) {
                if let Some(slot) = to.get_mut(*n) {
                    *slot = *p;
                }
                *n += 1;
            }
        }
        std::mem::swap(&mut from, &mut to);
    }
    v.copy_from_slice(&from);
}

/// Reorder `items` by `order` (a permutation of their indices, as from [`sort_keyed`]).
pub(crate) fn permute<T>(items: Vec<T>, order: impl Iterator<Item = u32>) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order
        .filter_map(|i| slots.get_mut(i as usize).and_then(Option::take))
        .collect()
}

/// Stable insertion sort by `less`: for lists of a few elements (quadratic otherwise, linear
/// on sorted input), much smaller than a standard sort instance.
pub(crate) fn insertion_sort_by<T>(v: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 {
            let (Some(a), Some(b)) = (v.get(j - 1), v.get(j)) else {
                break;
            };
            if !less(b, a) {
                break;
            }
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_sort_and_permute_are_a_stable_sort() {
        let items = vec![(3, 'a'), (1, 'b'), (3, 'c'), (0, 'd'), (1, 'e')];
        let mut keyed: Vec<(u64, u32)> = items
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k as u64, i as u32))
            .collect();
        sort_keyed(&mut keyed);
        let got = permute(items.clone(), keyed.iter().map(|(_, i)| *i));
        let mut want = items;
        want.sort_by_key(|(k, _)| *k);
        assert_eq!(got, want);
    }

    proptest::proptest! {
        /// The radix sort orders pairs as the standard sort does: short and long lists, keys
        /// and indices over every byte, repeated keys, sorted input.
        #[test]
        fn keyed_sort_is_the_standard_sort(
            pairs in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::prelude::any::<u32>()),
                0..300,
            ),
            small in proptest::collection::vec((0u64..4, 0u32..1000), 0..300),
        ) {
            for mut v in [pairs.clone(), small.clone(), {
                let mut s = small.clone();
                s.sort_unstable();
                s
            }] {
                let mut want = v.clone();
                want.sort_unstable();
                sort_keyed(&mut v);
                proptest::prop_assert_eq!(v, want);
            }
        }
    }

    #[test]
    fn insertion_sort_is_stable() {
        let mut v = vec![(2, 0), (1, 1), (2, 2), (0, 3), (1, 4)];
        let mut want = v.clone();
        want.sort_by_key(|x| x.0);
        insertion_sort_by(&mut v, |a, b| a.0 < b.0);
        assert_eq!(v, want);
        let mut u = vec![5u64, 3, 9, 1, 1];
        sort_u64(&mut u);
        assert_eq!(u, [1, 1, 3, 5, 9]);
    }
}
