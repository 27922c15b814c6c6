//! How a transfer job's keys are ordered when `complete_store` receives them.
//!
//! * [`OrderMode::Fixed`]: the fix, prefix order de-duplicated ([`crate::keys::JobKeys`]).
//! * [`OrderMode::Legacy`]: a seeded deterministic permutation, standing in for the
//!   unspecified order of the old `set[OffloadKey]`.
//! * [`OrderMode::CPython`]: CPython 3.11's exact iteration order of `set(set(keys))` for
//!   36-byte `bytes` keys under a given `PYTHONHASHSEED` (see [`cpython`]).

pub mod cpython;
pub mod legacy;

use serde::{Deserialize, Serialize};

use crate::keys::{JobKeys, OffloadKey};

/// Which order a store job's keys take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum OrderMode {
    /// Prefix order, de-duplicated, first occurrence kept (the fix).
    Fixed,
    /// The bug, as a seeded permutation of the de-duplicated keys (any seed).
    Legacy {
        /// Permutation seed (combined with the job id so jobs differ).
        seed: u64,
    },
    /// The bug, exactly as CPython 3.11 iterates `set(set(keys_to_store))`.
    #[serde(rename = "cpython")]
    CPython {
        /// `PYTHONHASHSEED` (0 = hash randomisation off, zero SipHash key).
        python_hash_seed: u32,
    },
}

impl OrderMode {
    /// Order `keys_to_store` (in `prepare_store` order, possibly with duplicates) as the job's
    /// `TransferJobStatus.keys` would iterate. `job_id` decorrelates legacy permutations.
    pub fn order(&self, keys_to_store: &[OffloadKey], job_id: u64) -> Vec<OffloadKey> {
        match *self {
            OrderMode::Fixed => JobKeys::from_keys(keys_to_store.iter().copied()).to_vec(),
            OrderMode::Legacy { seed } => {
                legacy::permute(&JobKeys::from_keys(keys_to_store.iter().copied()).to_vec(), seed, job_id)
            }
            OrderMode::CPython { python_hash_seed } => {
                cpython::set_of_set_order(keys_to_store, python_hash_seed)
            }
        }
    }
}
