//! Offload keys and a transfer job's ordered key set (the fix).
//!
//! `OffloadKey = block hash ‖ group_idx (u32 big-endian)` (`make_offload_key`,
//! `vllm/v1/kv_offload/base.py`). A chunk's key uses the hash at the chunk's *last* boundary.

use indexmap::IndexSet;

use crate::hashing::Digest;

/// A 36-byte offload key: 32-byte block digest followed by the group index, big-endian.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffloadKey {
    /// The digest of the chunk's last block.
    pub digest: Digest,
    /// The KV cache group index.
    pub group_idx: u32,
}

impl OffloadKey {
    /// `make_offload_key(hash, group_idx)`.
    pub fn new(digest: Digest, group_idx: u32) -> Self {
        OffloadKey { digest, group_idx }
    }

    /// The 36 bytes Python sees (`bytes` object hashed by CPython's set).
    pub fn to_bytes(&self) -> [u8; 36] {
        let mut out = [0u8; 36];
        out[..32].copy_from_slice(&self.digest.0);
        out[32..].copy_from_slice(&self.group_idx.to_be_bytes());
        out
    }
}

impl std::fmt::Debug for OffloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OffloadKey({}‖{})",
            &self.digest.to_hex()[..16],
            self.group_idx
        )
    }
}

/// `TransferJobStatus.keys` after the fix: insertion (prefix) order, duplicates dropped keeping
/// the first occurrence (`list(dict.fromkeys(keys))` upstream; an `IndexSet` here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobKeys(IndexSet<OffloadKey>);

impl JobKeys {
    /// Build from `prepare_store`'s `keys_to_store`, keeping the first occurrence of each key.
    pub fn from_keys<I: IntoIterator<Item = OffloadKey>>(keys: I) -> Self {
        JobKeys(keys.into_iter().collect())
    }

    /// Keys in job order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &OffloadKey> + '_ {
        self.0.iter()
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the job has no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Membership test.
    pub fn contains(&self, key: &OffloadKey) -> bool {
        self.0.contains(key)
    }

    /// The keys as a vector, in job order.
    pub fn to_vec(&self) -> Vec<OffloadKey> {
        self.0.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8, g: u32) -> OffloadKey {
        OffloadKey::new(Digest([b; 32]), g)
    }

    #[test]
    fn first_occurrence_wins_and_order_is_kept() {
        let jk = JobKeys::from_keys([key(3, 0), key(1, 0), key(3, 0), key(2, 0), key(1, 0)]);
        assert_eq!(jk.to_vec(), vec![key(3, 0), key(1, 0), key(2, 0)]);
    }

    #[test]
    fn group_index_is_part_of_the_key() {
        let jk = JobKeys::from_keys([key(1, 0), key(1, 1)]);
        assert_eq!(jk.len(), 2);
        let bytes = key(1, 258).to_bytes();
        assert_eq!(&bytes[32..], &[0, 0, 1, 2]);
    }
}
