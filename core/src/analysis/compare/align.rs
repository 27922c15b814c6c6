//! Aligning the events of two traces by block: which event of trace B is "the same" as each
//! event of trace A, which of them B delivers in another order, and which verdicts differ.
//!
//! **The key.** An event is named by what it does to which block, not by its position: its
//! kind (stored, removed, cleared), its tier (medium and ownership, `identity.rs`), its KV
//! group and its first block hash. Two full-attention groups store the same hashes, so the
//! group is part of the name. When both traces name the same set of engines (sources, DP
//! ranks), the engine is part of it too; otherwise (a capture against a generated trace) it is
//! left out. A key that occurs several times (a block stored, evicted and stored again) pairs
//! its occurrences in order: the first in A with the first in B, and so on.
//!
//! **Order.** Of the aligned events, the longest run that both traces deliver in the same
//! relative order stays put; every other aligned event is *moved* (the fewest events whose
//! moving turns A's order into B's, as a line diff counts changed lines). Found with patience
//! sorting in `O(n log n)`.

use serde::Serialize;

use super::super::Rule;
use super::side::{Side, NONE};
use crate::consumers::VerdictKind;

/// An event's name across two traces: (engine, tier, group, kind, first block hash); see the
/// module docs.
type Key = (u32, u32, u32, u8, u64);

/// One router whose final verdict on an aligned event differs between the traces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerdictDelta {
    /// The router model.
    pub consumer: String,
    /// Its verdict in trace A.
    pub a: VerdictKind,
    /// Its verdict in trace B.
    pub b: VerdictKind,
}

/// An event of A with its partner in B (or an event of one trace only) that differs: moved,
/// judged differently by a router, breaking a different ordering rule, or on one side only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventPair {
    /// The event's global index in A (`None`: only in B).
    pub a: Option<usize>,
    /// Its partner's in B (`None`: only in A).
    pub b: Option<usize>,
    /// The 0-based ordinal of A's event's batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_a: Option<u32>,
    /// The 0-based ordinal of B's event's batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_b: Option<u32>,
    /// What the event is: type, tier, KV group (when not 0) and first block
    /// (`BlockStored CPU 159301…791386`).
    pub what: String,
    /// B delivers it in another order relative to the other aligned events.
    pub moved: bool,
    /// The routers whose final verdicts differ.
    pub verdicts: Vec<VerdictDelta>,
    /// The first ordering rule the event breaks in A.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_a: Option<Rule>,
    /// The first ordering rule its partner breaks in B.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_b: Option<Rule>,
}

impl EventPair {
    /// What differs, in words: `moved`, `only in A`, each rule and router verdict that
    /// changes (`child-before-parent-in-job → none`, `llmd dropped_orphan → applied`).
    pub fn changes(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        match (self.a, self.b) {
            (Some(_), None) => parts.push("only in A".into()),
            (None, Some(_)) => parts.push("only in B".into()),
            _ => {}
        }
        if self.moved {
            parts.push("moved".into());
        }
        if self.rule_a != self.rule_b && self.a.is_some() && self.b.is_some() {
            let name = |r: Option<Rule>| r.map_or("none", Rule::name);
            parts.push(format!("{} → {}", name(self.rule_a), name(self.rule_b)));
        }
        for v in &self.verdicts {
            parts.push(format!(
                "{} {} → {}",
                v.consumer,
                v.a.as_str(),
                v.b.as_str()
            ));
        }
        parts.join("; ")
    }
}

/// What event `i` of `side` is (see [`EventPair::what`]) and its batch ordinal.
fn what(side: &Side, i: usize) -> (String, Option<u32>) {
    let Some(r) = side.row(i) else {
        return (String::new(), None);
    };
    let mut s = r.type_name().to_owned();
    if let Some(t) = side.label(r) {
        s += " ";
        s += &t;
    }
    if r.group != 0 {
        s += &format!(" group {}", r.group);
    }
    if let Some(h) = r.first() {
        s += " ";
        s += &super::short_hash(h);
    }
    (s, Some(r.batch))
}

/// The events of two traces aligned by block (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Alignment {
    /// Per event of A: its partner in B ([`NONE`] for none).
    a_to_b: Vec<u32>,
    /// Per event of B: its partner in A.
    b_to_a: Vec<u32>,
    /// The events of A whose partner B delivers in another order, ascending.
    moved: Vec<u32>,
    /// Whether the engine is part of the key (both traces name the same engines).
    pub by_engine: bool,
}

/// Every event's key of `side`; `engines` and `tiers` map this side's interned ids to the
/// shared ones (`None`: the engine is left out of the key).
fn key(side: &Side, i: usize, engines: Option<&[u32]>, tiers: &[u32]) -> Key {
    let Some(r) = side.row(i) else {
        return (NONE, NONE, NONE, u8::MAX, 0);
    };
    let at = side.place(r);
    let engine = engines.map_or(0, |e| {
        e.get(at.source as usize).copied().unwrap_or(NONE) ^ at.dp_rank.rotate_left(16)
    });
    let tier = tiers.get(at.tier as usize).copied().unwrap_or(NONE);
    (engine, tier, r.group, r.kind(), r.first().unwrap_or(0))
}

/// The events of `side` with their keys, sorted by key, then by position (each key's
/// occurrences in order).
fn by_key(side: &Side, engines: Option<&[u32]>, tiers: &[u32]) -> Vec<(Key, u32)> {
    let mut keyed: Vec<(Key, u32)> = (0..side.len())
        .map(|i| (key(side, i, engines, tiers), i as u32))
        .collect();
    keyed.sort_unstable();
    keyed
}

/// Ids shared by both sides for a list of names: A's are `0..`, B's are A's id for an equal
/// name and fresh ids for names A lacks.
fn shared_ids<T: PartialEq>(a: &[T], b: &[T]) -> (Vec<u32>, Vec<u32>) {
    let mut next = a.len() as u32;
    let ids_b = b
        .iter()
        .map(|x| {
            a.iter().position(|y| y == x).map_or_else(
                || {
                    next += 1;
                    next - 1
                },
                |p| p as u32,
            )
        })
        .collect();
    ((0..a.len() as u32).collect(), ids_b)
}

impl Alignment {
    /// Align the events of `a` and `b` (see the module docs).
    pub(crate) fn new(a: &Side, b: &Side) -> Alignment {
        let mut sa: Vec<&String> = a.sources.iter().collect();
        let mut sb: Vec<&String> = b.sources.iter().collect();
        sa.sort();
        sb.sort();
        let by_engine = sa == sb;
        let (ea, eb) = shared_ids(&a.sources, &b.sources);
        let (ta, tb) = shared_ids(&a.tiers, &b.tiers);
        let (ea, eb) = (
            by_engine.then_some(ea.as_slice()),
            by_engine.then_some(eb.as_slice()),
        );
        // Both sides' events sorted by key (then position), merged: the k-th occurrence of a
        // key in A pairs with its k-th in B (no map of keys to lists of positions).
        let (oa, ob) = (by_key(a, ea, &ta), by_key(b, eb, &tb));
        let mut a_to_b = vec![NONE; a.len()];
        let mut b_to_a = vec![NONE; b.len()];
        let (mut x, mut y) = (0, 0);
        while let (Some(&(ki, i)), Some(&(kj, j))) = (oa.get(x), ob.get(y)) {
            match ki.cmp(&kj) {
                std::cmp::Ordering::Less => x += 1,
                std::cmp::Ordering::Greater => y += 1,
                std::cmp::Ordering::Equal => {
                    a_to_b[i as usize] = j;
                    b_to_a[j as usize] = i;
                    x += 1;
                    y += 1;
                }
            }
        }
        let moved = moved(&a_to_b);
        Alignment {
            a_to_b,
            b_to_a,
            moved,
            by_engine,
        }
    }

    /// The partner in B of event `i` of A.
    pub fn partner_in_b(&self, i: usize) -> Option<usize> {
        self.a_to_b
            .get(i)
            .filter(|j| **j != NONE)
            .map(|j| *j as usize)
    }

    /// The partner in A of event `j` of B.
    pub fn partner_in_a(&self, j: usize) -> Option<usize> {
        self.b_to_a
            .get(j)
            .filter(|i| **i != NONE)
            .map(|i| *i as usize)
    }

    /// Number of aligned events (pairs).
    pub fn aligned(&self) -> usize {
        self.a_to_b.iter().filter(|j| **j != NONE).count()
    }

    /// Events of A without a partner in B.
    pub fn only_in_a(&self) -> usize {
        self.a_to_b.len() - self.aligned()
    }

    /// Events of B without a partner in A.
    pub fn only_in_b(&self) -> usize {
        self.b_to_a.len() - self.aligned()
    }

    /// Whether B delivers the partner of A's event `i` in another order.
    pub fn is_moved(&self, i: usize) -> bool {
        self.moved.binary_search(&(i as u32)).is_ok()
    }

    /// Number of moved events.
    pub fn moved(&self) -> usize {
        self.moved.len()
    }

    /// The events that differ, side by side, as `(A's event, B's event)` ([`NONE`]: only on
    /// the other side): A's in A's order, each event only in B after the aligned event that
    /// precedes it in B (before every one when none does). [`Alignment::pair`] renders one.
    pub(crate) fn differing(&self, a: &Side, b: &Side) -> Vec<(u32, u32)> {
        let consumers = shared_models(a, b);
        // (sort key, A, B): A's event i at (2i + 1, 0); an event only in B at (2x + 2, j)
        // after A's event x (its anchor), or at (0, j) before every one.
        let mut rows: Vec<((u64, u32), u32, u32)> = Vec::new();
        for (i, &j) in self.a_to_b.iter().enumerate() {
            let differs = j == NONE
                || self.is_moved(i)
                || a.rule(i) != b.rule(j as usize)
                || consumers.iter().any(|(_, va, vb)| {
                    matches!((va.get(i), vb.get(j as usize)), (Some(x), Some(y)) if x != y)
                });
            if differs {
                rows.push(((2 * i as u64 + 1, 0), i as u32, j));
            }
        }
        let mut anchor = None;
        for (j, &i) in self.b_to_a.iter().enumerate() {
            if i != NONE {
                anchor = Some(i as u64);
                continue;
            }
            rows.push(((anchor.map_or(0, |x| 2 * x + 2), j as u32), NONE, j as u32));
        }
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|r| (r.1, r.2)).collect()
    }

    /// The differing events `(i, j)` of [`Alignment::differing`], rendered.
    pub(crate) fn pair(&self, a: &Side, b: &Side, (i, j): (u32, u32)) -> EventPair {
        let (i, j) = (
            (i != NONE).then_some(i as usize),
            (j != NONE).then_some(j as usize),
        );
        let mut p = EventPair {
            a: i,
            b: j,
            batch_a: None,
            batch_b: None,
            what: String::new(),
            moved: i.is_some_and(|i| self.is_moved(i)),
            verdicts: Vec::new(),
            rule_a: i.and_then(|i| a.rule(i)),
            rule_b: j.and_then(|j| b.rule(j)),
        };
        match (i, j) {
            (Some(i), _) => {
                (p.what, p.batch_a) = what(a, i);
                p.batch_b = j.and_then(|j| b.row(j)).map(|r| r.batch);
            }
            (None, Some(j)) => (p.what, p.batch_b) = what(b, j),
            (None, None) => {}
        }
        if let (Some(i), Some(j)) = (i, j) {
            for (name, va, vb) in shared_models(a, b) {
                if let (Some(x), Some(y)) = (va.get(i), vb.get(j)) {
                    if x != y {
                        p.verdicts.push(VerdictDelta {
                            consumer: name.to_owned(),
                            a: *x,
                            b: *y,
                        });
                    }
                }
            }
        }
        p
    }
}

/// The models both sides ran: name and each side's final verdicts.
fn shared_models<'s>(
    a: &'s Side,
    b: &'s Side,
) -> Vec<(&'static str, &'s [VerdictKind], &'s [VerdictKind])> {
    let mut out = Vec::new();
    for (ca, k) in a.consumers.iter().enumerate() {
        let Some(cb) = b.consumers.iter().position(|x| x == k) else {
            continue;
        };
        if let (Some(va), Some(vb)) = (a.kinds.get(ca), b.kinds.get(cb)) {
            out.push((k.as_str(), va.as_slice(), vb.as_slice()));
        }
    }
    out
}

/// The events of A (by index) whose partners are not on one longest increasing run of B
/// positions: the fewest moved events (patience sorting with back links).
pub(crate) fn moved(a_to_b: &[u32]) -> Vec<u32> {
    // (A event, B position) of the aligned events, in A order.
    let seq: Vec<(u32, u32)> = a_to_b
        .iter()
        .enumerate()
        .filter(|(_, j)| **j != NONE)
        .map(|(i, j)| (i as u32, *j))
        .collect();
    // tails[k]: index in `seq` of the smallest tail of an increasing run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut back = vec![usize::MAX; seq.len()];
    for (n, &(_, j)) in seq.iter().enumerate() {
        let k = tails.partition_point(|&t| seq[t].1 < j);
        if k > 0 {
            back[n] = tails[k - 1];
        }
        if k == tails.len() {
            tails.push(n);
        } else {
            tails[k] = n;
        }
    }
    let mut kept = vec![false; seq.len()];
    let mut n = tails.last().copied().unwrap_or(usize::MAX);
    while n != usize::MAX {
        kept[n] = true;
        n = back[n];
    }
    seq.iter()
        .zip(kept)
        .filter(|(_, k)| !k)
        .map(|((i, _), _)| *i)
        .collect()
}
