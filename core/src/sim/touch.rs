//! The connector's `_touch` of one request, in time proportional to what changed since that
//! request's previous touch.
//!
//! vLLM's `_touch` (`.../offloading/scheduler.py`) calls the LRU's `touch(keys)` with **every**
//! offload key of the request, group by group, after each lookup and each non-empty
//! `prepare_store`; `touch` walks the keys in reverse and `move_to_end`s the evictable ones
//! (`cpu/policies/lru.py`; `docs/vllm-offloading.md`, fact 9). A prompt of N tokens stored B
//! tokens a step is therefore touched N/B times with up to N/block_size keys each: quadratic
//! in vLLM, and it was the quadratic part of `kvscope generate`.
//!
//! The walk's result is simple: the request's evictable keys end up at the MRU end ordered by
//! group, then by chunk from the last to the first, and everything else keeps its order.
//! [`TouchMemo`] remembers, for one request (the *owner*), where that ordered run is: one run
//! of list nodes per group (a node is marked with the memo's stamp while it sits in its run)
//! plus the owner's keys that became evictable since (`pushed`). A run stays a run: the list
//! only ever inserts at the MRU end, so removing a node (eviction, a load pinning it) leaves
//! its neighbours adjacent. The next touch then only sorts the newly evictable keys, puts
//! each group's new keys before the group's run and splices the runs to the MRU end, which is
//! exactly where the full walk would have put them: the new keys of a long prefill are later
//! chunks than any already in the run. Whenever that shape does not hold (another request's
//! touch moved one of the run's nodes, a newly evictable key is not later than its group's
//! run, the groups' first chunks changed), the touch does the full walk and rebuilds the memo
//! from it. The property test below checks the result against the plain walk.
//!
//! One memo serves one request at a time (the first long request to touch; released by
//! [`TouchMemo::forget`] when it finishes). Other requests, and touches of fewer than
//! [`MEMO_MIN_KEYS`] keys, take the plain walk.

use rustc_hash::FxHashMap;

use crate::keys::OffloadKey;

use super::lru::OrderedKeys;

/// Touches of fewer keys than this walk them directly (the memo's bookkeeping would cost
/// more than it saves).
pub const MEMO_MIN_KEYS: usize = 64;

/// The keys of one group in one touch: chunks `skip..len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TouchSpan {
    /// First chunk touched (`chunks_to_skip` for a sliding-window group, else 0).
    pub skip: usize,
    /// Number of chunks (`len(group_state.offload_keys)`).
    pub len: usize,
}

/// A key's place in its request's touch: group (span index), then chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rank {
    group: u32,
    chunk: u32,
}

/// The run of one group's evictable keys, in order (chunks decreasing), after the last touch.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    /// First and last node, `None` when empty.
    ends: Option<(u32, u32)>,
}

/// What one request's last touch left in the LRU order (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct TouchMemo {
    owner: Option<u64>,
    /// The owner's keys can repeat (equal hashes): then the memo is never used for it.
    unusable: bool,
    /// `runs` and `pushed` describe the list.
    valid: bool,
    /// Nodes carrying this stamp are in a run. Never 0.
    stamp: u32,
    spans: Vec<TouchSpan>,
    ranks: FxHashMap<OffloadKey, Rank>,
    runs: Vec<Run>,
    /// The owner's keys made evictable since the last touch, with their node.
    pushed: Vec<(u32, OffloadKey)>,
}

impl TouchMemo {
    /// `key` was appended as node `i`.
    pub fn pushed(&mut self, list: &OrderedKeys, i: u32) {
        let key = list.key(i);
        if self.valid && self.ranks.contains_key(key) {
            self.pushed.push((i, *key));
        }
    }

    /// Node `i` is about to be removed.
    pub fn removing(&mut self, list: &OrderedKeys, i: u32) {
        if !self.valid || list.stamp(i) != self.stamp {
            return;
        }
        let group = self.ranks[list.key(i)].group as usize;
        let run = &mut self.runs[group];
        let Some((first, last)) = run.ends else {
            return;
        };
        run.ends = match (first == i, last == i) {
            (true, true) => None,
            (true, false) => list.next(i).map(|n| (n, last)),
            (false, true) => list.prev(i).map(|p| (first, p)),
            (false, false) => Some((first, last)),
        };
    }

    /// Node `i` was moved to the MRU end by someone else's touch.
    pub fn moved(&mut self, list: &OrderedKeys, i: u32) {
        if self.valid && list.stamp(i) == self.stamp {
            self.valid = false;
        }
    }

    /// The request `owner` will not touch again.
    pub fn forget(&mut self, owner: u64) {
        if self.owner == Some(owner) {
            *self = TouchMemo {
                stamp: self.stamp,
                ..TouchMemo::default()
            };
        }
    }

    /// `_touch` of request `owner` (see [`super::lru::LruPolicy::touch_request`]).
    pub fn touch(
        &mut self,
        list: &mut OrderedKeys,
        owner: u64,
        spans: &[TouchSpan],
        key: impl Fn(usize, usize) -> OffloadKey,
    ) {
        let keys: usize = spans.iter().map(|s| s.len.saturating_sub(s.skip)).sum();
        let mine = self.owner == Some(owner);
        if (!mine && (self.owner.is_some() || keys < MEMO_MIN_KEYS)) || (mine && self.unusable) {
            // someone else's walk: it may move a node out of the owner's runs
            let (stamp, mut moved_run) = (self.stamp, false);
            walk(list, spans, &key, |list, _, node| {
                moved_run |= node.is_some_and(|i| list.stamp(i) == stamp);
            });
            if moved_run {
                self.valid = false;
            }
            return;
        }
        let mut reuse_ranks = mine;
        if mine && self.valid {
            if !self.extend(list, spans, &key) {
                reuse_ranks = false;
            } else if self.place(list) {
                return;
            }
        }
        self.rebuild(list, owner, spans, &key, reuse_ranks);
    }

    /// Add the chunks the spans gained since the last touch; `false` when the spans changed
    /// otherwise or a key repeats.
    fn extend(
        &mut self,
        list: &OrderedKeys,
        spans: &[TouchSpan],
        key: &impl Fn(usize, usize) -> OffloadKey,
    ) -> bool {
        if spans.len() != self.spans.len() {
            return false;
        }
        for (g, (new, old)) in spans.iter().zip(&self.spans).enumerate() {
            if new.skip != old.skip || new.len < old.len {
                return false;
            }
            for c in old.len..new.len {
                let k = key(g, c);
                let rank = Rank {
                    group: g as u32,
                    chunk: c as u32,
                };
                if self.ranks.insert(k, rank).is_some() {
                    return false;
                }
                if let Some(i) = list.node(&k) {
                    self.pushed.push((i, k));
                }
            }
        }
        self.spans = spans.to_vec();
        true
    }

    /// Put the pushed keys in place: each group's, latest chunk first, before the group's
    /// run, and the groups in order at the MRU end. `false` (nothing moved) when a pushed
    /// key is not a later chunk than its group's run.
    fn place(&mut self, list: &mut OrderedKeys) -> bool {
        let mut fresh: Vec<(Rank, u32)> = Vec::new();
        for (i, k) in std::mem::take(&mut self.pushed) {
            // still that key's node, and not seen twice (removed and pushed again)
            if list.node(&k) != Some(i) || list.stamp(i) == self.stamp {
                continue;
            }
            list.set_stamp(i, self.stamp);
            let rank = self.ranks[&k];
            if let Some((first, _)) = self.runs[rank.group as usize].ends {
                if self.ranks[list.key(first)].chunk >= rank.chunk {
                    return false;
                }
            }
            fresh.push((rank, i));
        }
        fresh.sort_unstable_by_key(|(r, _)| (r.group, std::cmp::Reverse(r.chunk)));
        for &(_, i) in &fresh {
            list.detach(i);
        }
        let mut fresh = fresh.into_iter().peekable();
        for (g, run) in self.runs.iter_mut().enumerate() {
            let mut new_ends: Option<(u32, u32)> = None;
            while let Some((_, i)) = fresh.next_if(|(r, _)| r.group as usize == g) {
                list.attach_back(i);
                new_ends = Some((new_ends.map_or(i, |(f, _)| f), i));
            }
            if let Some((first, last)) = run.ends {
                list.splice_back(first, last);
            }
            run.ends = match (new_ends, run.ends) {
                (Some((f, _)), Some((_, l))) => Some((f, l)),
                (new, old) => new.or(old),
            };
        }
        true
    }

    /// The full walk, marking the runs it makes, and a fresh memo for `owner` (keeping the
    /// owner's ranks when `reuse_ranks` and its spans only grew).
    fn rebuild(
        &mut self,
        list: &mut OrderedKeys,
        owner: u64,
        spans: &[TouchSpan],
        key: &impl Fn(usize, usize) -> OffloadKey,
        reuse_ranks: bool,
    ) {
        self.stamp = match self.stamp.checked_add(1) {
            Some(s) => s,
            None => {
                list.clear_stamps();
                1
            }
        };
        // the ranks stay right while the spans only grow at their ends
        let reuse_ranks = reuse_ranks
            && spans.len() == self.spans.len()
            && spans
                .iter()
                .zip(&self.spans)
                .all(|(a, b)| a.skip == b.skip && a.len >= b.len);
        if !reuse_ranks {
            self.ranks.clear();
            self.spans = spans
                .iter()
                .map(|s| TouchSpan { len: s.skip, ..*s })
                .collect();
        }
        self.owner = Some(owner);
        self.runs = vec![Run::default(); spans.len()];
        self.pushed.clear();
        let mut repeats = false;
        let stamp = self.stamp;
        let (ranks, runs, old_spans) = (&mut self.ranks, &mut self.runs, &self.spans);
        walk(list, spans, key, |list, (g, c, k), node| {
            if c >= old_spans[g].len
                && ranks
                    .insert(
                        k,
                        Rank {
                            group: g as u32,
                            chunk: c as u32,
                        },
                    )
                    .is_some()
            {
                repeats = true;
            }
            if let Some(i) = node {
                list.set_stamp(i, stamp);
                let run = &mut runs[g];
                run.ends = Some((run.ends.map_or(i, |(f, _)| f), i));
            }
        });
        self.spans = spans.to_vec();
        self.unusable = repeats;
        self.valid = !repeats;
    }
}

/// vLLM's walk: for each span in order, its keys from the last chunk to the first, each
/// moved to the MRU end if evictable. `seen(list, (group, chunk, key), node)` is called for
/// every key, with its node when it is evictable (after the move).
fn walk(
    list: &mut OrderedKeys,
    spans: &[TouchSpan],
    key: &impl Fn(usize, usize) -> OffloadKey,
    mut seen: impl FnMut(&mut OrderedKeys, (usize, usize, OffloadKey), Option<u32>),
) {
    for (g, span) in spans.iter().enumerate() {
        for c in (span.skip..span.len).rev() {
            let k = key(g, c);
            let node = list.node(&k);
            if let Some(i) = node {
                list.move_node_to_end(i);
            }
            seen(list, (g, c, k), node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Digest;
    use crate::sim::lru::LruPolicy;

    fn k(i: u8, group: u32) -> OffloadKey {
        OffloadKey::new(Digest([i; 32]), group)
    }

    /// One operation on the LRU.
    #[derive(Clone, Debug)]
    enum Op {
        /// `mark_evictable` of universe key `i`.
        Push(u8),
        /// `mark_non_evictable` of universe key `i`.
        Remove(u8),
        /// a plain `move_to_end`.
        Move(u8),
        /// request `r` touches its first `len` chunks of each of `groups` groups, from `skip`.
        Touch {
            r: u8,
            len: u8,
            skip: u8,
            groups: u8,
        },
        /// request `r` finishes.
        Forget(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u8..160).prop_map(Op::Push),
            2 => (0u8..160).prop_map(Op::Remove),
            1 => (0u8..160).prop_map(Op::Move),
            3 => (0u8..3, 0u8..80, 0u8..3, 1u8..3)
                .prop_map(|(r, len, skip, groups)| Op::Touch { r, len, skip, groups }),
            1 => (0u8..3).prop_map(Op::Forget),
        ]
    }

    /// Request `r`'s key of chunk `c` in group `g`: requests 0 and 1 share their first 20
    /// chunks; request 2's keys repeat (as equal hashes would).
    fn req_key(r: u8, g: usize, c: usize) -> OffloadKey {
        let i = match r {
            2 => (c % 7) as u8,
            _ if c < 20 => c as u8,
            _ => 20 + (((c - 20) * 3 + r as usize) % 60) as u8,
        };
        k(i, g as u32)
    }

    /// The memo's cases one by one: a long prefill (new chunks made evictable between
    /// touches), a run node moved by a plain `move_to_end`, one evicted from the run's middle
    /// and ends, and a key pushed out of order.
    #[test]
    fn a_long_prefill_with_interference_orders_like_the_walk() {
        let mut fast = LruPolicy::default();
        let mut plain = LruPolicy::default();
        let key = |_: usize, c: usize| k(c as u8, 0);
        let spans = [TouchSpan { skip: 0, len: 100 }];
        let check = |fast: &mut LruPolicy, plain: &mut LruPolicy, what: &str| {
            fast.touch_request(7, &spans, key);
            for c in (0..100).rev() {
                plain.move_to_end(&key(0, c));
            }
            let f: Vec<_> = fast.evictable().iter().collect();
            let p: Vec<_> = plain.evictable().iter().collect();
            assert_eq!(f, p, "{what}");
        };
        for p in [&mut fast, &mut plain] {
            p.mark_evictable(k(200, 0)); // not the request's
        }
        check(&mut fast, &mut plain, "first touch");
        for step in 0..5u8 {
            for c in step * 10..step * 10 + 10 {
                for p in [&mut fast, &mut plain] {
                    p.mark_evictable(k(c, 0));
                }
            }
            check(&mut fast, &mut plain, "prefill step");
        }
        for p in [&mut fast, &mut plain] {
            p.mark_non_evictable(&k(25, 0)); // the run's middle
            p.mark_non_evictable(&k(0, 0)); // its last node (chunk 0 is at the MRU end)
            p.mark_non_evictable(&k(49, 0)); // its first node
        }
        check(&mut fast, &mut plain, "removals");
        for p in [&mut fast, &mut plain] {
            p.move_to_end(&k(30, 0)); // a plain touch of one run node
            p.mark_evictable(k(60, 0));
        }
        check(&mut fast, &mut plain, "a run node moved");
        for p in [&mut fast, &mut plain] {
            p.mark_evictable(k(25, 0)); // an earlier chunk than the run's first
            p.mark_evictable(k(61, 0));
        }
        check(&mut fast, &mut plain, "out of order");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// `touch_request` leaves the same order as vLLM's walk, whatever happened between
        /// touches.
        #[test]
        fn touch_request_orders_like_the_walk(
            ops in proptest::collection::vec(op(), 0..300),
            min_keys in proptest::prelude::any::<bool>(),
        ) {
            let mut fast = LruPolicy::default();
            let mut plain = LruPolicy::default();
            // grown touch lengths, so long prefills (the memo's case) come up often
            let mut lens = [0usize; 3];
            for op in ops {
                match op {
                    Op::Push(i) => {
                        for p in [&mut fast, &mut plain] {
                            p.mark_evictable(k(i % 80, u32::from(i >= 80)));
                        }
                    }
                    Op::Remove(i) => {
                        for p in [&mut fast, &mut plain] {
                            p.mark_non_evictable(&k(i % 80, u32::from(i >= 80)));
                        }
                    }
                    Op::Move(i) => {
                        for p in [&mut fast, &mut plain] {
                            p.move_to_end(&k(i % 80, u32::from(i >= 80)));
                        }
                    }
                    Op::Touch { r, len, skip, groups } => {
                        let len = if min_keys {
                            lens[r as usize] = (lens[r as usize] + len as usize % 9).min(80);
                            lens[r as usize].max(MEMO_MIN_KEYS / groups as usize)
                        } else {
                            len as usize
                        };
                        let spans: Vec<TouchSpan> = (0..groups)
                            .map(|g| TouchSpan { skip: if g == 1 { skip as usize } else { 0 }, len })
                            .collect();
                        let key = |g: usize, c: usize| req_key(r, g, c);
                        fast.touch_request(u64::from(r), &spans, key);
                        for (g, s) in spans.iter().enumerate() {
                            for c in (s.skip..s.len).rev() {
                                plain.move_to_end(&key(g, c));
                            }
                        }
                    }
                    Op::Forget(r) => {
                        fast.forget(u64::from(r));
                        lens[r as usize] = 0;
                    }
                }
                proptest::prop_assert_eq!(
                    fast.evictable().iter().collect::<Vec<_>>(),
                    plain.evictable().iter().collect::<Vec<_>>()
                );
            }
        }
    }
}
