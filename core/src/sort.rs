//! Shared sorting helpers. Every `sort_by` on a new element type is a new copy of the
//! standard library's sort (3-5 KB of wasm each); the core sorts through one instance,
//! [`sort_keyed`] on (u64 key, u32 index) pairs (stable orders of larger items; u64 values
//! through [`sort_u64`], which goes through it), and an insertion sort for the few-element
//! lists sorted per event or per snapshot.

/// Sort `v` ascending, through [`sort_keyed`] (the crate's one instance of the standard sort:
/// a temporary pair per value is cheaper than a second copy of the sort code).
pub(crate) fn sort_u64(v: &mut [u64]) {
    let mut keyed: Vec<(u64, u32)> = v.iter().map(|x| (*x, 0)).collect();
    sort_keyed(&mut keyed);
    for (x, (k, _)) in v.iter_mut().zip(keyed) {
        *x = k;
    }
}

/// Sort `(key, index)` pairs by key, then index (the one instance on pairs). With distinct
/// indices this is a stable order by key.
#[inline(never)]
pub(crate) fn sort_keyed(v: &mut [(u64, u32)]) {
    v.sort_unstable();
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
