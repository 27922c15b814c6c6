//! CPython 3.11 `set` iteration order for `bytes` keys. (To be completed: see issue 2.)

use crate::keys::{JobKeys, OffloadKey};

/// Iteration order of `set(set(keys))` in CPython 3.11 under `PYTHONHASHSEED=python_hash_seed`.
pub fn set_of_set_order(keys: &[OffloadKey], python_hash_seed: u32) -> Vec<OffloadKey> {
    let _ = python_hash_seed;
    JobKeys::from_keys(keys.iter().copied()).to_vec()
}
