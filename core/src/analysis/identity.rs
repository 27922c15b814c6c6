//! A block's identity in the analysis: `(source, DP rank, tier, KV cache group, hash)`. The
//! lane (source, DP rank, tier) is where a block is held; the group and the hash name the
//! block. Two full-attention KV groups hash the same tokens to the same block hashes, told
//! apart only by `group_idx` (vLLM's offload key is `hash ‖ group_idx`,
//! `vllm/v1/kv_offload/base.py` `make_offload_key`), so the group is part of a block's name.
//! The consumer models keep the keying of the router each one models.

use crate::consumers::Interner;
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

/// Dense ids of `(group, hash)` block names. A trace with one KV group (every `group_idx` 0 or
/// absent, known once the index is built) uses the models' hash ids instead
/// ([`BlockKeys::by_hash`]): the same ids, without a second map of every block.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockKeys {
    ids: HashMap<(u32, u64), u32>,
    keys: Vec<(u32, u64)>,
    hashes: Option<Interner>,
    /// Streaming: whether [`BlockKeys::index_keys`] ran.
    indexed: bool,
}

impl BlockKeys {
    /// Room for the names of `blocks` block ids (a whole-trace run's, see `Run::new`).
    pub(crate) fn reserve(&mut self, blocks: usize) {
        self.keys.reserve_exact(blocks);
    }

    /// The names of a single-group trace: group 0, by the models' hash ids (`self.keys`,
    /// filled by [`GroupIds::copy`], is the reverse table).
    pub(crate) fn by_hash(mut self, interner: Interner) -> BlockKeys {
        self.ids = HashMap::default();
        self.hashes = Some(interner);
        self
    }

    /// A trace first seen with one KV group turned out to have more (a streaming run learns it
    /// late): name the ids given so far (group 0, the models' hash ids, `interner`), which a
    /// streaming run does not copy while the trace has one group (16 bytes a block), so that
    /// [`GroupIds::fill`] goes on with the same ids. Ids the run released are left out of the
    /// look-up: their hash may have come back under another id.
    pub(crate) fn index_keys(&mut self, interner: &Interner) {
        if self.indexed {
            return;
        }
        self.indexed = true;
        self.keys.clear();
        let mut id = 0u32;
        while let Some(h) = interner.hash(id) {
            self.keys.push((0, h));
            if interner.live(id) {
                self.ids.insert((0, h), id);
            }
            id += 1;
        }
    }

    /// Id `id` (a models' id of a single-group trace) names `hash` of group 0.
    fn name(&mut self, id: u32, hash: u64) {
        match self.keys.get_mut(id as usize) {
            Some(k) => *k = (0, hash),
            None => {
                if id as usize == self.keys.len() {
                    self.keys.push((0, hash));
                }
            }
        }
    }

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
        match &self.hashes {
            Some(h) => (group == 0).then(|| h.get(hash)).flatten(),
            None => self.ids.get(&(group, hash)).copied(),
        }
    }

    /// The `(group, hash)` of an id.
    pub(crate) fn key(&self, id: u32) -> Option<(u32, u64)> {
        match &self.hashes {
            Some(_) | None => self.keys.get(id as usize).copied(),
        }
    }

    /// Approximate heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        // The models' map (when kept) costs about what `ids` would: ~13 bytes per block.
        self.hashes
            .as_ref()
            .map_or(0, |_| self.keys.capacity() * 13)
            + self.ids.capacity() * 17
            + self.keys.capacity() * 16
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
    /// The ids of a single-group trace's event: the models' hash ids (see [`BlockKeys::by_hash`]);
    /// `name`: keep the reverse table (not while streaming: [`BlockKeys::index_keys`]).
    pub(crate) fn copy(
        &mut self,
        keys: &mut BlockKeys,
        ids: &crate::consumers::EventIds,
        ev: &KvEvent,
        name: bool,
    ) {
        self.group = 0;
        self.blocks.clear();
        self.blocks.extend_from_slice(&ids.blocks);
        self.parent = ids.parent;
        if !name {
            return;
        }
        // The models' ids are dense in first-seen order (blocks, then the parent): extend the
        // reverse table with the new ones, and name the ids a streaming run took again.
        for (&id, &h) in ids.blocks.iter().zip(&ids.hashes) {
            keys.name(id, h);
        }
        let parent_hash = match ev {
            KvEvent::BlockStored(e) => e.parent_block_hash.as_ref().map(|p| p.as_u64()),
            _ => None,
        };
        if let (Some(id), Some(h)) = (ids.parent, parent_hash) {
            keys.name(id, h);
        }
    }

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
