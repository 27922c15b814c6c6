//! Sorts for the view-model that keep the wasm small: the standard sort is instantiated once
//! per element type (several KB each), so the model sorts through these two instead, the
//! second through the core's radix sort (`kvscope_core::sort::sort_keyed`).

/// Stable insertion sort, for lists of a few elements (rule names): much smaller in
/// wasm than a standard sort instance per element type.
pub fn insertion_sort<T: Ord>(v: &mut [T]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j] < v[j - 1] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// Stable sort of `v` by a `u64` key. Every call goes through one sort of `(key, index)`
/// pairs, so the wasm carries one sort implementation instead of one per element type (each
/// is several KB).
pub fn sort_by_u64<T>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    let mut keys: Vec<(u64, u32)> = v
        .iter()
        .enumerate()
        .map(|(i, x)| (key(x), i as u32))
        .collect();
    kvscope_core::sort::sort_keyed(&mut keys);
    let mut slots: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    *v = keys
        .iter()
        .filter_map(|&(_, i)| slots.get_mut(i as usize).and_then(Option::take))
        .collect();
}
