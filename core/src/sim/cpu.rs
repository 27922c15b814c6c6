//! The CPU (primary) offload tier: `CPUOffloadingManager` with the LRU `CachePolicy`.
//!
//! Mirrors `vllm/v1/kv_offload/cpu/manager.py` and `vllm/v1/kv_offload/cpu/policies/lru.py`
//! (upstream, ~August 2026):
//! * `prepare_store(keys)`: `keys_to_store` = keys not in the policy, **in caller order**
//!   (duplicates that are both absent are both kept: slots are allocated per occurrence,
//!   `docs/vllm-offloading.md`, fact 7); if more slots are needed than are free, `policy.evict(n, protected =
//!   set(keys))` walks the evictable `OrderedDict` from the LRU end skipping protected keys;
//!   all evicted keys → **one** raw `Removed` event appended at prepare time; `None` when the
//!   evictable count or the unprotected candidates do not suffice (allocation failure).
//! * `complete_store(keys)`: in the given order, each present not-ready block gets
//!   `ref_cnt = 0` and `mark_evictable` (appended at the MRU end); **one** raw `Stored` event
//!   with those keys.
//! * `touch(keys)`: `for key in reversed(keys): if key in evictable: move_to_end(key)`
//!   (a request's touch of all its keys: `touch.rs`).
//! * `lookup(key)`: MISS / HIT_PENDING (in flight, `ref_cnt == -1`) / HIT.
//! * `prepare_load` pins (`ref_cnt += 1`, `mark_non_evictable` on 0 → 1); `complete_load`
//!   unpins (`mark_evictable` on 1 → 0, i.e. moves the key to the MRU end).
//! * `reset_cache()`: clears everything, no events.

use rustc_hash::FxHashSet;

use crate::keys::OffloadKey;

use super::lru::LruPolicy;
use super::touch::TouchSpan;

/// `LookupResult` (`vllm/v1/kv_offload/base.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupResult {
    /// Not present.
    Miss,
    /// Present and readable.
    Hit,
    /// Present, store still in flight.
    HitPending,
    /// Ask again later (a secondary tier is promoting the key).
    Retry,
}

/// A raw `OffloadingEvent` of one manager.
#[derive(Clone, Debug, PartialEq)]
pub struct RawEvent {
    /// `event.keys`, in order.
    pub keys: Vec<OffloadKey>,
    /// `event.removed`.
    pub removed: bool,
}

/// `CPUOffloadingManager` with LRU.
#[derive(Clone, Debug)]
pub struct CpuManager {
    capacity: u64,
    /// Slots in use (allocated minus freed; leaked duplicate slots stay used).
    used: u64,
    policy: LruPolicy,
    events_enabled: bool,
    events: Vec<RawEvent>,
}

/// `PrepareStoreOutput` (keys only; kvscope has no block ids).
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareStoreOutput {
    /// `keys_to_store`, caller order.
    pub keys_to_store: Vec<OffloadKey>,
    /// `evicted_keys`, policy order.
    pub evicted_keys: Vec<OffloadKey>,
}

impl CpuManager {
    /// A manager with `capacity` chunk slots.
    pub fn new(capacity: u64, events_enabled: bool) -> Self {
        CpuManager {
            capacity,
            used: 0,
            policy: LruPolicy::default(),
            events_enabled,
            events: Vec::new(),
        }
    }

    /// Capacity in chunks.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slots in use (never above capacity).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Whether `key` is present (ready or in flight).
    pub fn contains(&self, key: &OffloadKey) -> bool {
        self.policy.blocks.contains_key(key)
    }

    /// Evictable keys, LRU first.
    pub fn evictable_order(&self) -> Vec<OffloadKey> {
        self.policy.evictable().iter().copied().collect()
    }

    fn num_evictable(&self) -> u64 {
        self.policy.evictable().len() as u64
    }

    /// `lookup(key)`.
    pub fn lookup(&self, key: &OffloadKey) -> LookupResult {
        match self.policy.blocks.get(key) {
            None => LookupResult::Miss,
            Some(-1) => LookupResult::HitPending,
            Some(_) => LookupResult::Hit,
        }
    }

    /// `prepare_store(keys)`; `None` is an allocation failure.
    pub fn prepare_store(&mut self, keys: &[OffloadKey]) -> Option<PrepareStoreOutput> {
        let keys_to_store: Vec<OffloadKey> = keys
            .iter()
            .filter(|k| !self.policy.blocks.contains_key(k))
            .copied()
            .collect();
        if keys_to_store.is_empty() {
            return Some(PrepareStoreOutput {
                keys_to_store,
                evicted_keys: Vec::new(),
            });
        }
        let free = self.capacity.saturating_sub(self.used);
        let need = keys_to_store.len() as u64;
        let mut evicted = Vec::new();
        if need > free {
            let n = (need - free) as usize;
            if n as u64 > self.num_evictable() {
                return None;
            }
            let protected: FxHashSet<&OffloadKey> = keys.iter().collect();
            let candidates: Vec<OffloadKey> = self
                .policy
                .evictable()
                .iter()
                .filter(|k| !protected.contains(k))
                .take(n)
                .copied()
                .collect();
            if candidates.len() < n {
                return None;
            }
            for k in candidates {
                self.policy.mark_non_evictable(&k);
                self.policy.blocks.remove(&k);
                evicted.push(k);
            }
            self.used -= n as u64;
            if self.events_enabled {
                self.events.push(RawEvent {
                    keys: evicted.clone(),
                    removed: true,
                });
            }
        }
        self.used += need;
        for k in &keys_to_store {
            // A duplicate overwrites the first insert; its slot stays allocated (leaked).
            self.policy.blocks.insert(*k, -1);
        }
        Some(PrepareStoreOutput {
            keys_to_store,
            evicted_keys: evicted,
        })
    }

    /// `complete_store(keys, success=True)`; returns the stored keys.
    pub fn complete_store(&mut self, keys: &[OffloadKey]) -> Vec<OffloadKey> {
        let mut stored = Vec::new();
        for k in keys {
            if let Some(rc) = self.policy.blocks.get_mut(k) {
                if *rc == -1 {
                    *rc = 0;
                    self.policy.mark_evictable(*k);
                    stored.push(*k);
                }
            }
        }
        if !stored.is_empty() && self.events_enabled {
            self.events.push(RawEvent {
                keys: stored.clone(),
                removed: false,
            });
        }
        stored
    }

    /// `touch(keys)`: reversed walk, `move_to_end` for evictable keys.
    pub fn touch(&mut self, keys: &[OffloadKey]) {
        for k in keys.iter().rev() {
            self.policy.move_to_end(k);
        }
    }

    /// `touch` of every group's keys of one request, in span order: the same order as
    /// [`CpuManager::touch`] of each span's keys, in time proportional to what changed since
    /// the request's previous touch (`sim/touch.rs`). `owner` names the request;
    /// `key(span, chunk)` gives its keys.
    pub fn touch_request(
        &mut self,
        owner: u64,
        spans: &[TouchSpan],
        key: impl Fn(usize, usize) -> OffloadKey,
    ) {
        self.policy.touch_request(owner, spans, key);
    }

    /// The request `owner` will not be touched again (it finished).
    pub fn forget_touches(&mut self, owner: u64) {
        self.policy.forget(owner);
    }

    /// `prepare_load(keys)` (also `prepare_read` for cascades): pin ready keys. Keys that are
    /// absent or not ready are skipped (upstream asserts).
    pub fn prepare_load(&mut self, keys: &[OffloadKey]) {
        for k in keys {
            if let Some(rc) = self.policy.blocks.get_mut(k) {
                if *rc < 0 {
                    continue;
                }
                if *rc == 0 {
                    self.policy.mark_non_evictable(k);
                }
                if let Some(rc) = self.policy.blocks.get_mut(k) {
                    *rc += 1;
                }
            }
        }
    }

    /// `complete_load(keys)` (also `complete_read`): unpin; 1 → 0 marks evictable.
    pub fn complete_load(&mut self, keys: &[OffloadKey]) {
        for k in keys {
            if let Some(rc) = self.policy.blocks.get_mut(k) {
                if *rc > 0 {
                    *rc -= 1;
                    if *rc == 0 {
                        self.policy.mark_evictable(*k);
                    }
                }
            }
        }
    }

    /// `reset_cache()`: everything goes, no events.
    pub fn reset_cache(&mut self) {
        self.policy = LruPolicy::default();
        self.used = 0;
    }

    /// `take_events()`: drain FIFO.
    pub fn take_events(&mut self) -> Vec<RawEvent> {
        std::mem::take(&mut self.events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Digest;

    fn k(i: u8) -> OffloadKey {
        OffloadKey::new(Digest([i; 32]), 0)
    }

    #[test]
    fn removal_is_appended_before_store_and_lru_order_is_completion_order() {
        let mut m = CpuManager::new(2, true);
        let out = m.prepare_store(&[k(1), k(2)]).unwrap();
        assert_eq!(out.keys_to_store, vec![k(1), k(2)]);
        // completion order (the job's order) is the LRU insertion order
        m.complete_store(&[k(2), k(1)]);
        assert_eq!(m.evictable_order(), vec![k(2), k(1)]);
        let out = m.prepare_store(&[k(3)]).unwrap();
        assert_eq!(out.evicted_keys, vec![k(2)]);
        m.complete_store(&[k(3)]);
        let ev = m.take_events();
        assert_eq!(ev.len(), 3);
        assert!(ev[1].removed && ev[1].keys == vec![k(2)]);
        assert!(!ev[2].removed && ev[2].keys == vec![k(3)]);
        assert!(m.used() <= m.capacity());
    }

    #[test]
    fn present_keys_filtered_in_order_and_protected_from_eviction() {
        let mut m = CpuManager::new(2, true);
        m.prepare_store(&[k(1), k(2)]).unwrap();
        m.complete_store(&[k(1), k(2)]);
        // k(1) is present: filtered, and protected, so k(2) is evicted for k(3)
        let out = m.prepare_store(&[k(3), k(1)]).unwrap();
        assert_eq!(out.keys_to_store, vec![k(3)]);
        assert_eq!(out.evicted_keys, vec![k(2)]);
        // nothing evictable left unprotected -> allocation failure
        assert!(m.prepare_store(&[k(4), k(1), k(3)]).is_none());
    }

    #[test]
    fn touch_walks_reversed() {
        let mut m = CpuManager::new(4, false);
        m.prepare_store(&[k(1), k(2), k(3)]).unwrap();
        m.complete_store(&[k(1), k(2), k(3)]);
        m.touch(&[k(1), k(2)]);
        // reversed walk: k2 moved first, then k1 -> k1 most recent
        assert_eq!(m.evictable_order(), vec![k(3), k(2), k(1)]);
    }

    #[test]
    fn duplicate_candidates_allocate_twice_store_once() {
        let mut m = CpuManager::new(4, true);
        let out = m.prepare_store(&[k(1), k(1), k(2)]).unwrap();
        assert_eq!(out.keys_to_store, vec![k(1), k(1), k(2)]);
        assert_eq!(m.used(), 3);
        let stored = m.complete_store(&[k(1), k(2)]);
        assert_eq!(stored, vec![k(1), k(2)]);
        assert_eq!(m.used(), 3, "the duplicate's slot is never freed");
    }

    #[test]
    fn loads_pin_and_unpin_to_mru() {
        let mut m = CpuManager::new(4, false);
        m.prepare_store(&[k(1), k(2)]).unwrap();
        m.complete_store(&[k(1), k(2)]);
        m.prepare_load(&[k(1)]);
        assert_eq!(m.evictable_order(), vec![k(2)]);
        assert_eq!(m.lookup(&k(1)), LookupResult::Hit);
        m.complete_load(&[k(1)]);
        assert_eq!(m.evictable_order(), vec![k(2), k(1)]);
    }
}
