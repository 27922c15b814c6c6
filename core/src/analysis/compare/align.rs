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

use super::super::{Analysis, Rule};
use crate::consumers::VerdictKind;
use crate::event::KvEvent;
use crate::trace::{EventMap, Trace};

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// "No partner" in [`Alignment`]'s partner tables.
const NONE: u32 = u32::MAX;

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
fn what(side: &Side<'_>, i: usize) -> (String, Option<u32>) {
    let Some((batch, ev)) = side.event(i) else {
        return (String::new(), None);
    };
    let mut s = ev.type_name().to_owned();
    if let Some(t) = ev.tier() {
        s += " ";
        s += &t.label();
    }
    let group = match ev {
        KvEvent::BlockStored(e) => e.group_idx.unwrap_or(0),
        KvEvent::BlockRemoved(e) => e.group_idx.unwrap_or(0),
        KvEvent::AllBlocksCleared => 0,
    };
    if group != 0 {
        s += &format!(" group {group}");
    }
    if let Some(h) = ev.block_hashes().first() {
        s += " ";
        s += &super::short_hash(h.as_u64());
    }
    (s, Some(batch))
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

/// One trace's side of a comparison: the trace, its analysis and where its events sit.
pub(crate) struct Side<'a> {
    pub(crate) trace: &'a Trace,
    pub(crate) analysis: &'a Analysis,
    pub(crate) map: EventMap,
    /// Per event: the first ordering rule it breaks (sorted by event).
    rules: Vec<(u32, Rule)>,
}

impl<'a> Side<'a> {
    pub(crate) fn new(trace: &'a Trace, analysis: &'a Analysis) -> Side<'a> {
        let mut rules: Vec<(u32, Rule)> = Vec::new();
        for f in &analysis.violations {
            let e = u32::try_from(f.event).unwrap_or(NONE);
            if rules.last().is_none_or(|r| r.0 != e) {
                rules.push((e, f.rule));
            }
        }
        Side {
            trace,
            analysis,
            map: EventMap::new(trace),
            rules,
        }
    }

    /// The first ordering rule event `i` breaks.
    pub(crate) fn rule(&self, i: usize) -> Option<Rule> {
        let k = self.rules.binary_search_by_key(&(i as u32), |r| r.0).ok()?;
        self.rules.get(k).map(|r| r.1)
    }

    /// Event `i` and its batch's 0-based ordinal.
    pub(crate) fn event(&self, i: usize) -> Option<(u32, &'a KvEvent)> {
        let at = self.map.get(i)?;
        let (_, ev) = self.map.event(self.trace, i)?;
        Some((at.batch, ev))
    }

    /// Number of events.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every event's key; `engines` and `tiers` map this side's interned ids to the shared
    /// ones (`None`: the engine is left out of the key).
    fn keys(&self, engines: Option<&[u32]>, tiers: &[u32]) -> Vec<Key> {
        let idx = &self.analysis.index;
        let mut out = Vec::with_capacity(self.len());
        for (at, loc) in self.map.iter().zip(&idx.events) {
            let Some(ev) = self
                .trace
                .records
                .get(at.record as usize)
                .and_then(|r| match r {
                    crate::trace::TraceRecord::Batch(b) => b.events.get(at.pos as usize),
                    _ => None,
                })
            else {
                continue;
            };
            let engine = engines.map_or(0, |e| {
                e.get(loc.source as usize).copied().unwrap_or(NONE) ^ loc.dp_rank.rotate_left(16)
            });
            let tier = tiers.get(loc.tier as usize).copied().unwrap_or(NONE);
            let (kind, group) = match ev {
                KvEvent::BlockStored(e) => (0, e.group_idx.unwrap_or(0)),
                KvEvent::BlockRemoved(e) => (1, e.group_idx.unwrap_or(0)),
                KvEvent::AllBlocksCleared => (2, 0),
            };
            let first = ev.block_hashes().first().map_or(0, |h| h.as_u64());
            out.push((engine, tier, group, kind, first));
        }
        out
    }
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
    pub(crate) fn new(a: &Side<'_>, b: &Side<'_>) -> Alignment {
        let (ia, ib) = (&a.analysis.index, &b.analysis.index);
        let mut sa: Vec<&String> = ia.sources.iter().collect();
        let mut sb: Vec<&String> = ib.sources.iter().collect();
        sa.sort();
        sb.sort();
        let by_engine = sa == sb;
        let (ea, eb) = shared_ids(&ia.sources, &ib.sources);
        let (ta, tb) = shared_ids(&ia.tiers, &ib.tiers);
        let ka = a.keys(by_engine.then_some(ea.as_slice()), &ta);
        let kb = b.keys(by_engine.then_some(eb.as_slice()), &tb);
        // Each key's occurrences in B, in order (reversed: the next one is popped).
        let mut in_b: HashMap<Key, Vec<u32>> = HashMap::default();
        for (j, k) in kb.iter().enumerate().rev() {
            in_b.entry(*k).or_default().push(j as u32);
        }
        let mut a_to_b = vec![NONE; ka.len()];
        let mut b_to_a = vec![NONE; kb.len()];
        for (i, k) in ka.iter().enumerate() {
            if let Some(j) = in_b.get_mut(k).and_then(Vec::pop) {
                a_to_b[i] = j;
                b_to_a[j as usize] = i as u32;
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

    /// The events that differ, side by side: A's in A's order, each event only in B after the
    /// aligned event that precedes it in B (before every one when none does).
    pub(crate) fn differing(&self, a: &Side<'_>, b: &Side<'_>) -> Vec<EventPair> {
        let consumers: Vec<_> = a
            .analysis
            .config
            .consumers
            .iter()
            .enumerate()
            .filter_map(|(ca, k)| {
                let cb = b.analysis.config.consumers.iter().position(|x| x == k)?;
                Some((
                    k.as_str(),
                    a.analysis.verdict_kinds.get(ca)?,
                    b.analysis.verdict_kinds.get(cb)?,
                ))
            })
            .collect();
        // (sort key, pair): A's event i at (2i + 1, 0); an event only in B at (2x + 2, j) after
        // A's event x (its anchor), or at (0, j) before every one.
        let mut rows: Vec<((usize, usize), EventPair)> = Vec::new();
        for (i, &j) in self.a_to_b.iter().enumerate() {
            let j = (j != NONE).then_some(j as usize);
            let mut p = EventPair {
                a: Some(i),
                b: j,
                batch_a: None,
                batch_b: None,
                what: String::new(),
                moved: self.is_moved(i),
                verdicts: Vec::new(),
                rule_a: a.rule(i),
                rule_b: j.and_then(|j| b.rule(j)),
            };
            if let Some(j) = j {
                for (name, va, vb) in &consumers {
                    if let (Some(x), Some(y)) = (va.get(i), vb.get(j)) {
                        if x != y {
                            p.verdicts.push(VerdictDelta {
                                consumer: (*name).to_owned(),
                                a: *x,
                                b: *y,
                            });
                        }
                    }
                }
            }
            if j.is_none() || p.moved || !p.verdicts.is_empty() || p.rule_a != p.rule_b {
                (p.what, p.batch_a) = what(a, i);
                p.batch_b = j.and_then(|j| b.event(j)).map(|e| e.0);
                rows.push(((2 * i + 1, 0), p));
            }
        }
        let mut anchor = None;
        for (j, &i) in self.b_to_a.iter().enumerate() {
            if i != NONE {
                anchor = Some(i as usize);
                continue;
            }
            let (what, batch_b) = what(b, j);
            rows.push((
                (anchor.map_or(0, |x| 2 * x + 2), j),
                EventPair {
                    a: None,
                    b: Some(j),
                    batch_a: None,
                    batch_b,
                    what,
                    moved: false,
                    verdicts: Vec::new(),
                    rule_a: None,
                    rule_b: b.rule(j),
                },
            ));
        }
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|r| r.1).collect()
    }
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
