//! The parent→child edges of the timeline, indexed in slices: at a million events the index
//! takes seconds in the browser, so the loader paints the first timeline without it (edges are
//! drawn only zoomed in) and then builds it a slice at a time ([`Model::index_edges_some`]),
//! yielding to the page between slices like the analysis does.

use super::*;

/// The state of an edge index under way: one pass over the events in delivery order.
pub(super) struct EdgeBuilder {
    /// The next event to look at.
    next: usize,
    /// Forward edges, in child order (one per child event).
    forward: Vec<Edge>,
    /// Child-first and cross-lane edges, sorted and merged in at the end.
    late: Vec<Edge>,
    /// (lane, group, hash) -> latest event storing that block. Sized for every event up
    /// front: growing a table of a million entries rehashes it (hundreds of ms in wasm).
    stored: HashMap<(u16, u32, u64), u32>,
    /// (lane, group, parent hash) -> children waiting for that parent.
    waiting: HashMap<(u16, u32, u64), Vec<u32>>,
    /// Every edge, sorted by child, once [`EdgeBuilder::finish`] ran.
    sorted: Option<Vec<Edge>>,
    /// Edge ids by the low 16 bits of their parent, then child: the first pass of the sort
    /// by parent ([`by_parent_digit`]).
    by_low_parent: Option<Vec<u32>>,
}

/// The stored event at `r`, if it is a `BlockStored`.
fn stored_event(t: &Trace, r: EventAt) -> Option<&kvscope_core::event::BlockStored> {
    match batch_of(t, r).and_then(|b| b.events.get(r.pos as usize)) {
        Some(KvEvent::BlockStored(s)) => Some(s),
        _ => None,
    }
}

impl EdgeBuilder {
    fn new(n: usize) -> EdgeBuilder {
        EdgeBuilder {
            next: 0,
            forward: Vec::with_capacity(n),
            late: Vec::new(),
            stored: HashMap::with_capacity_and_hasher(n, Default::default()),
            waiting: HashMap::default(),
            sorted: None,
            by_low_parent: None,
        }
    }

    /// Link up to `budget` more events: each stored child to the latest earlier store of its
    /// parent (same lane, same KV group: a block is named by its group and hash); a parent
    /// stored only later gives a child-first edge.
    fn advance(&mut self, m: &Model, t: &Trace, budget: usize) {
        let end = self.next.saturating_add(budget.max(1)).min(m.events.len());
        // A batch at a time: one lookup in the event map per batch, not per event.
        let mut i = self.next;
        while i < end {
            let Some(at) = m.events.get(i) else { break };
            let Some(b) = batch_of(t, at) else {
                i += 1;
                continue;
            };
            let rest = b.events.get(at.pos as usize..).unwrap_or_default();
            for ev in rest.iter().take(end - i) {
                if let KvEvent::BlockStored(s) = ev {
                    self.link(m, i as u32, s);
                }
                i += 1;
            }
            if rest.is_empty() {
                i += 1;
            }
        }
        self.next = end;
    }

    /// Link stored event `i` (`s`) to its parent's latest store in its lane, or wait for it.
    fn link(&mut self, m: &Model, i: u32, s: &kvscope_core::event::BlockStored) {
        let lane = m.lane_of.get(i as usize).copied().unwrap_or(0);
        let group = s.group_idx.unwrap_or(0);
        if let Some(p) = &s.parent_block_hash {
            let key = (lane, group, p.as_u64());
            match self.stored.get(&key) {
                Some(&pe) => self.forward.push(Edge {
                    parent: pe,
                    child: i,
                    kind: EdgeKind::Forward,
                }),
                None => self.waiting.entry(key).or_default().push(i),
            }
        }
        for h in &s.block_hashes {
            let key = (lane, group, h.as_u64());
            self.stored.insert(key, i);
            if self.waiting.is_empty() {
                continue;
            }
            if let Some(children) = self.waiting.remove(&key) {
                self.late.extend(children.into_iter().map(|c| Edge {
                    parent: i,
                    child: c,
                    kind: EdgeKind::ChildFirst,
                }));
            }
        }
    }

    /// The edges, sorted by child, once every event is done. Children whose parent never
    /// arrived in their lane get a cross-lane edge from the first store of that parent in any
    /// lane, found by a second pass (only when there are some).
    fn finish(&mut self, m: &Model, t: &Trace) -> Vec<Edge> {
        self.stored = HashMap::default();
        let forward = std::mem::take(&mut self.forward);
        let mut late = std::mem::take(&mut self.late);
        let waiting = std::mem::take(&mut self.waiting);
        if !waiting.is_empty() {
            let mut first: HashMap<(u32, u64), u32> = waiting
                .keys()
                .map(|(_, g, p)| ((*g, *p), u32::MAX))
                .collect();
            let mut missing = first.len();
            for (i, r) in m.events.iter().enumerate() {
                if missing == 0 {
                    break;
                }
                let Some(s) = stored_event(t, r) else {
                    continue;
                };
                let group = s.group_idx.unwrap_or(0);
                for h in &s.block_hashes {
                    if let Some(slot) = first.get_mut(&(group, h.as_u64())) {
                        if *slot == u32::MAX {
                            *slot = i as u32;
                            missing -= 1;
                        }
                    }
                }
            }
            for ((_, g, p), children) in waiting {
                if let Some(&pe) = first.get(&(g, p)).filter(|e| **e != u32::MAX) {
                    late.extend(children.into_iter().map(|c| Edge {
                        parent: pe,
                        child: c,
                        kind: EdgeKind::CrossLane,
                    }));
                }
            }
        }
        let key = |e: &Edge| u64::from(e.child) << 32 | u64::from(e.parent);
        sort_by_u64(&mut late, key);
        // Merge the two sorted lists.
        let mut edges = Vec::with_capacity(forward.len() + late.len());
        let mut late = late.into_iter().peekable();
        for e in forward {
            while let Some(l) = late.next_if(|l| key(l) < key(&e)) {
                edges.push(l);
            }
            edges.push(e);
        }
        edges.extend(late);
        edges
    }
}

/// One pass of a stable radix sort of edge ids by parent: `ids` ordered by the 16 bits of
/// their edge's parent at `shift`, keeping their order within a digit. The edges are sorted by
/// child, so the passes at 0 then 16 order every id by (parent, child). A pass is a count and
/// a scatter, a few milliseconds at a million edges.
pub(super) fn by_parent_digit(edges: &[Edge], ids: &[u32], shift: u32) -> Vec<u32> {
    let digit = |k: u32| {
        edges
            .get(k as usize)
            .map_or(0, |e| (e.parent >> shift) & 0xffff) as usize
    };
    // Ids per digit, then where each digit's ids start.
    let mut at = vec![0u32; 1 << 16];
    for &k in ids {
        if let Some(n) = at.get_mut(digit(k)) {
            *n += 1;
        }
    }
    let mut start = 0;
    for n in &mut at {
        (*n, start) = (start, start + *n);
    }
    let mut out = vec![0u32; ids.len()];
    for &k in ids {
        if let Some(p) = at.get_mut(digit(k)) {
            if let Some(slot) = out.get_mut(*p as usize) {
                *slot = k;
            }
            *p += 1;
        }
    }
    out
}

impl Model {
    /// The edges part of [`Model::layout`] (after [`Model::layout_lanes`]), all at once. Which
    /// edges are violations, of which class and level, is the core analysis' finding, not
    /// decided here.
    pub fn index_edges(&mut self) {
        while !self.index_edges_some(usize::MAX) {}
    }

    /// Index about `budget` events' edges (see [`Model::index_edges`]); returns whether the
    /// index is complete (then [`Model::edges`] and [`Model::children_of`] hold every edge).
    /// Until then the timeline draws no edges.
    pub fn index_edges_some(&mut self, budget: usize) -> bool {
        if self.edges_indexed {
            return true;
        }
        let mut b = self
            .edge_build
            .take()
            .unwrap_or_else(|| Box::new(EdgeBuilder::new(self.events.len())));
        // Link the next events; then the edges sorted by child, then by parent in two
        // passes, a call each (sorts over every edge: together, after a budget of events,
        // they made the page's longest pause of the load, ~100 ms at a million events; a
        // comparison sort by parent alone was still ~90 ms).
        if b.next < self.events.len() {
            self.with_trace(|t| b.advance(self, t, budget));
            self.edge_build = Some(b);
            return false;
        }
        let Some(edges) = b.sorted.take() else {
            b.sorted = Some(self.with_trace(|t| b.finish(self, t)));
            self.edge_build = Some(b);
            return false;
        };
        let Some(low) = b.by_low_parent.take() else {
            let ids: Vec<u32> = (0..edges.len() as u32).collect();
            b.by_low_parent = Some(by_parent_digit(&edges, &ids, 0));
            b.sorted = Some(edges);
            self.edge_build = Some(b);
            return false;
        };
        self.by_parent = by_parent_digit(&edges, &low, 16);
        self.edges = edges;
        self.edges_indexed = true;
        true
    }

    /// Whether the edge index is complete for the current lanes (a loaded trace's edges are
    /// indexed after its first paint).
    pub fn edges_indexed(&self) -> bool {
        self.edges_indexed
    }
}
