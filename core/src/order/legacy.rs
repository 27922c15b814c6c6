//! Seeded deterministic permutation standing in for Python `set` order.
//! (To be completed: see issue 2.)

use crate::keys::OffloadKey;

/// Permute `keys` deterministically from `(seed, job_id)`.
pub fn permute(keys: &[OffloadKey], seed: u64, job_id: u64) -> Vec<OffloadKey> {
    let _ = (seed, job_id);
    keys.to_vec()
}
