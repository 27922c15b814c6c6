//! A block's identity in the analysis: `(source, DP rank, tier, KV cache group, hash)`. The
//! lane (source, DP rank, tier) is where a block is held; the group and the hash name the
//! block. Two full-attention KV groups hash the same tokens to the same block hashes, told
//! apart only by `group_idx` (vLLM's offload key is `hash ‖ group_idx`,
//! `vllm/v1/kv_offload/base.py` `make_offload_key`), so the group is part of a block's name.
//! The consumer models keep the keying of the router each one models.

use crate::event::KvEvent;

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// The KV cache group of an event's blocks (`group_idx`, 0 when absent: a single-group engine).
pub(crate) fn group_of(ev: &KvEvent) -> u32 {
    match ev {
        KvEvent::BlockStored(e) => e.group_idx.unwrap_or(0),
        KvEvent::BlockRemoved(e) => e.group_idx.unwrap_or(0),
        KvEvent::AllBlocksCleared => 0,
    }
}

/// Dense ids of `(group, hash)` block names.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockKeys {
    ids: HashMap<(u32, u64), u32>,
    keys: Vec<(u32, u64)>,
}

impl BlockKeys {
    /// The id of block `hash` of group `group`, assigned if new.
    pub(crate) fn intern(&mut self, group: u32, hash: u64) -> u32 {
        let next = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        let id = *self.ids.entry((group, hash)).or_insert(next);
        if id == next && self.keys.len() < u32::MAX as usize {
            self.keys.push((group, hash));
        }
        id
    }

    /// The id of a block, if it was ever named.
    pub(crate) fn get(&self, group: u32, hash: u64) -> Option<u32> {
        self.ids.get(&(group, hash)).copied()
    }

    /// The `(group, hash)` of an id.
    pub(crate) fn key(&self, id: u32) -> Option<(u32, u64)> {
        self.keys.get(id as usize).copied()
    }

    /// Approximate heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.ids.capacity() * 17 + self.keys.capacity() * 16
    }
}

/// The ids of one event's blocks and parent, by `(group, hash)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct GroupIds {
    /// One per block hash of the event.
    pub(crate) blocks: Vec<u32>,
    /// The parent's (stores only).
    pub(crate) parent: Option<u32>,
    /// The event's group.
    pub(crate) group: u32,
}

impl GroupIds {
    /// Intern the blocks and parent of `ev`.
    pub(crate) fn fill(&mut self, keys: &mut BlockKeys, ev: &KvEvent) {
        self.group = group_of(ev);
        self.blocks.clear();
        for h in ev.block_hashes() {
            self.blocks.push(keys.intern(self.group, h.as_u64()));
        }
        self.parent = match ev {
            KvEvent::BlockStored(e) => e
                .parent_block_hash
                .as_ref()
                .map(|p| keys.intern(self.group, p.as_u64())),
            _ => None,
        };
    }
}
