//! Findings as compact records ([`Rec`]): ids and numbers, rendered to a [`Finding`] (message,
//! names, every model's verdict and cascade) only when shown. A trace can have a finding per
//! event (a device tier Dynamo orphans, a capture whose parents were never stored), so the run
//! keeps about a hundred bytes per finding, not a kilobyte, and the findings a model's losses
//! imply (`consumer-loss`, one per unreachable prefix) are not stored at all: the
//! [`FindingStore`] derives them from the loss roots when it is read.

use super::roots::{Losses, Places, Root, RootAt};
use super::UnreachablePrefix;
use super::{Evidence, Finding, Level, LossSummary, ReorderClass, Rule, RuleLevels};
use crate::consumers::{ConsumerKind, Hashes, VerdictKind};
use crate::event::Tier;
use crate::text::Count;

/// What a compact finding's message says (rendered by [`FindingStore::render`]).
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    /// A finding rendered when it was found (the rare kinds: sequence gaps, routing
    /// preconditions): its message, source and hashes.
    Full(Box<Finding>),
    /// `double-store` into tier `tier` (interned) of KV group `group`.
    Double { tier: u32, group: u32 },
    /// `remove-unknown` from tier `tier` of KV group `group`.
    Removed { tier: u32, group: u32 },
    /// A child-before-parent inversion: the child's first block, the parent's tier and group,
    /// the parent's source when it came from another engine, and why it got its class.
    Reorder {
        first: u64,
        tier: u32,
        group: u32,
        from: Option<u32>,
        why: Why,
    },
    /// `unknown-parent` in KV group `group`.
    Unknown { group: u32 },
}

/// One finding, compact (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Rec {
    pub(crate) event: usize,
    pub(crate) line: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) related: Option<usize>,
    pub(crate) hashes: Hashes,
    pub(crate) msg: Msg,
    pub(crate) pos: u32,
    /// Interned source id (unused by [`Msg::Full`]).
    pub(crate) source: u32,
    pub(crate) rule: Rule,
    pub(crate) inferred: bool,
    pub(crate) class: Option<(ReorderClass, Evidence)>,
}

impl Rec {
    /// A finding of `rule` at event `event` (line `line`, position `pos`, source `source`).
    pub(crate) fn new(rule: Rule, event: usize, line: u64, pos: u32, source: u32, msg: Msg) -> Rec {
        Rec {
            event,
            line,
            parent: None,
            related: None,
            hashes: Hashes::new(),
            msg,
            pos,
            source,
            rule,
            inferred: false,
            class: None,
        }
    }

    /// A finding already rendered (its rule, event, line and position are the finding's).
    pub(crate) fn full(f: Finding) -> Rec {
        let (rule, event, line, pos) = (f.rule, f.event, f.line, f.index as u32);
        Rec::new(rule, event, line, pos, u32::MAX, Msg::Full(Box::new(f)))
    }

    /// The sort key of the findings' order: by event, then rule.
    fn key(&self) -> u64 {
        ((self.event as u64) << 5) | self.rule as u64
    }
}

/// Why a same-lane inversion got its class (rendered by [`Because`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Why {
    /// Cross-tier / cross-source / promotion: the lanes said it.
    Lanes,
    /// No job (GPU-tier events).
    NoJob,
    /// Different batches.
    SeparateBatches,
    /// Provenance job ids (the parent's job, when another).
    Provenance,
    /// GPU events partition the batch into store jobs.
    GpuEvents,
    /// The request's runs in the batch: descents, runs.
    BatchOrder(u32, u32),
    /// A secondary tier without provenance or GPU events.
    Secondary,
    /// A secondary tier's cascade copies a CPU-tier job (same keys, same order).
    Cascade,
    /// The child's and the parent's jobs rest on different evidence.
    Mixed,
}

/// Every finding of a run, compact, with what rendering them needs: read them in order with
/// [`FindingStore::iter`] and render the ones shown with [`FindingRef::render`].
#[derive(Clone, Debug, Default)]
pub struct FindingStore {
    recs: Vec<Rec>,
    /// Indices into `recs` in (event, rule) order (stable).
    order: Vec<u32>,
    /// Per model (in `consumers` order): its loss summary, without its unreachable prefixes:
    /// those are the loss roots, kept compact in `roots` (a trace can have a root per event
    /// per model) and rebuilt when shown.
    losses: Vec<LossSummary>,
    roots: Vec<Vec<Root>>,
    /// Per model: the roots replayed later (no finding, no prefix, but still the cascade of
    /// their event).
    replayed: Vec<Vec<Root>>,
    /// Where each loss root is and its hashes (shared by the models).
    places: Places,
    consumers: Vec<ConsumerKind>,
    /// Per model: the final verdict of every event.
    pub(crate) kinds: Vec<Vec<VerdictKind>>,
    levels: RuleLevels,
    sources: Vec<String>,
    tiers: Vec<String>,
    workers: u32,
    /// Reported findings (warn and deny), per rule.
    counts: [usize; Rule::ALL.len()],
}

/// What a [`FindingStore`] is built from (the run's results).
pub(crate) struct StoreParts {
    pub(crate) recs: Vec<Rec>,
    pub(crate) losses: Vec<LossSummary>,
    pub(crate) roots: Vec<Vec<Root>>,
    pub(crate) replayed: Vec<Vec<Root>>,
    pub(crate) places: Places,
    pub(crate) consumers: Vec<ConsumerKind>,
    pub(crate) kinds: Vec<Vec<VerdictKind>>,
    pub(crate) levels: RuleLevels,
    pub(crate) sources: Vec<String>,
    pub(crate) tiers: Vec<Tier>,
    pub(crate) workers: u32,
}

/// One finding of a [`FindingStore`], not rendered yet.
#[derive(Clone, Copy, Debug)]
pub struct FindingRef<'a> {
    /// The rule.
    pub rule: Rule,
    /// Its level in this run.
    pub level: Level,
    /// The event it is about.
    pub event: usize,
    store: &'a FindingStore,
    what: What,
}

#[derive(Clone, Copy, Debug)]
enum What {
    /// `recs[k]`.
    Rec(usize),
    /// Model `c`'s loss root `j` (`consumer-loss`).
    Loss(usize, usize),
}

impl FindingRef<'_> {
    /// The finding, rendered.
    pub fn render(&self) -> Finding {
        self.store.render(self.what)
    }

    /// Its id in its store: stable and dense (the records, then each model's loss roots);
    /// a replay finds it again by this id ([`FindingStore::get`]).
    pub fn id(&self) -> usize {
        match self.what {
            What::Rec(k) => k,
            What::Loss(c, j) => self.store.roots_before(c) + j,
        }
    }

    fn rec(&self) -> Option<&Rec> {
        match self.what {
            What::Rec(k) => self.store.recs.get(k),
            What::Loss(..) => None,
        }
    }

    /// The related event (the later parent store of a reorder), without rendering.
    pub fn related_event(&self) -> Option<usize> {
        match self.rec().map(|r| (r, &r.msg)) {
            Some((_, Msg::Full(f))) => f.related_event,
            Some((r, _)) => r.related,
            None => None,
        }
    }

    /// A child-before-parent finding's class, without rendering.
    pub fn class(&self) -> Option<ReorderClass> {
        match self.rec().map(|r| (r, &r.msg)) {
            Some((_, Msg::Full(f))) => f.class,
            Some((r, _)) => r.class.map(|c| c.0),
            None => None,
        }
    }

    /// What a child-before-parent finding's class rests on, without rendering.
    pub fn evidence(&self) -> Option<Evidence> {
        match self.rec().map(|r| (r, &r.msg)) {
            Some((_, Msg::Full(f))) => f.evidence,
            Some((r, _)) => r.class.map(|c| c.1),
            None => None,
        }
    }
}

/// A position in a [`FindingStore`]'s findings (see [`FindingStore::next`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cursor {
    rec: usize,
    roots: Vec<usize>,
}

impl FindingStore {
    /// Sort the records.
    pub(crate) fn new(p: StoreParts) -> FindingStore {
        let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(p.recs.len());
        for (k, r) in p.recs.iter().enumerate() {
            keyed.push((r.key(), k as u32));
        }
        crate::sort::sort_keyed(&mut keyed);
        let mut order = Vec::with_capacity(keyed.len());
        for (_, k) in keyed {
            order.push(k);
        }
        let mut tiers = Vec::with_capacity(p.tiers.len());
        for t in &p.tiers {
            tiers.push(t.label());
        }
        FindingStore {
            recs: p.recs,
            order,
            losses: p.losses,
            roots: p.roots,
            replayed: p.replayed,
            places: p.places,
            consumers: p.consumers,
            kinds: p.kinds,
            levels: p.levels,
            sources: p.sources,
            tiers,
            workers: p.workers,
            counts: [0; Rule::ALL.len()],
        }
    }

    /// Count what is reported, per rule (for [`FindingStore::count`]; the whole-trace
    /// analysis, which renders every finding, does not need it).
    pub(crate) fn count_all(&mut self) {
        let mut counts = [0usize; Rule::ALL.len()];
        let mut cur = Cursor::default();
        while let Some(f) = self.next(&mut cur) {
            if f.level != Level::Allow {
                counts[f.rule as usize] += 1;
            }
        }
        self.counts = counts;
    }

    /// Reported findings (warn and deny) of `rule`.
    pub fn count(&self, rule: Rule) -> usize {
        self.counts.get(rule as usize).copied().unwrap_or(0)
    }

    /// Reported findings (warn and deny).
    pub fn len(&self) -> usize {
        self.counts.iter().sum()
    }

    /// Whether nothing is reported.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reported findings at `level`.
    pub fn count_level(&self, level: Level) -> usize {
        Rule::ALL
            .iter()
            .filter(|r| self.levels.level(**r) == level)
            .map(|r| self.count(*r))
            .sum()
    }

    /// The reported findings (warn and deny), in event order (by rule within an event).
    pub fn iter(&self) -> impl Iterator<Item = FindingRef<'_>> + '_ {
        let mut cur = Cursor::default();
        std::iter::from_fn(move || loop {
            let f = self.next(&mut cur)?;
            if f.level != Level::Allow {
                return Some(f);
            }
        })
    }

    /// Every child-before-parent finding, whatever its level, in event order.
    pub fn violations(&self) -> impl Iterator<Item = FindingRef<'_>> + '_ {
        self.order.iter().filter_map(move |k| {
            let r = self.recs.get(*k as usize)?;
            r.rule.is_reorder().then(|| self.at(What::Rec(*k as usize)))
        })
    }

    /// Every finding rendered, as an [`super::Analysis`] lists them: the reported ones (warn
    /// and deny; `findings`) and every child-before-parent one at any level (`violations`),
    /// both in event order. Renders them all: for a whole report, not for a viewer.
    pub(crate) fn rendered(&self) -> (Vec<Finding>, Vec<Finding>) {
        let (mut findings, mut violations) = (Vec::new(), Vec::new());
        let mut cur = Cursor::default();
        while let Some(f) = self.next(&mut cur) {
            let reported = f.level != Level::Allow;
            if !reported && !f.rule.is_reorder() {
                continue;
            }
            let rendered = f.render();
            if f.rule.is_reorder() {
                violations.push(rendered.clone());
            }
            if reported {
                findings.push(rendered);
            }
        }
        (findings, violations)
    }

    /// The final verdict of event `i` for the `c`-th model.
    pub(crate) fn verdict(&self, c: usize, i: usize) -> Option<VerdictKind> {
        self.kinds.get(c)?.get(i).copied()
    }

    fn at(&self, what: What) -> FindingRef<'_> {
        let (rule, event) = match what {
            What::Rec(k) => self
                .recs
                .get(k)
                .map_or((Rule::SeqGap, 0), |r| (r.rule, r.event)),
            What::Loss(c, j) => (
                Rule::ConsumerLoss,
                self.roots.get(c).and_then(|r| r.get(j)).map_or(0, Root::at),
            ),
        };
        FindingRef {
            rule,
            level: self.levels.level(rule),
            event,
            store: self,
            what,
        }
    }

    /// The loss summaries, per model (in the configuration's order), their unreachable
    /// prefixes rebuilt from the compact roots as they are read.
    pub fn losses(&self) -> impl ExactSizeIterator<Item = Losses<'_>> + '_ {
        self.losses.iter().enumerate().map(move |(c, l)| {
            let roots = self.roots.get(c).map_or(&[][..], Vec::as_slice);
            Losses::new(l, roots, &self.places, c)
        })
    }

    /// Move the loss summaries out, with their prefixes rebuilt from the roots ([`Self::losses`]
    /// is then empty). The store keeps the roots: it still renders the `consumer-loss`
    /// findings and every finding's cascades.
    pub(crate) fn take_losses(&mut self) -> Vec<LossSummary> {
        for c in 0..self.losses.len() {
            self.fill_prefixes(c, usize::MAX);
        }
        std::mem::take(&mut self.losses)
    }

    /// Rebuild up to `budget` more of model `c`'s unreachable prefixes into its loss summary
    /// (a replay, in slices); returns how many: fewer than `budget` once they are all there.
    pub(crate) fn fill_prefixes(&mut self, c: usize, budget: usize) -> usize {
        let (Some(l), Some(roots)) = (self.losses.get_mut(c), self.roots.get(c)) else {
            return 0;
        };
        let from = l.unreachable_prefixes.len();
        let rest = roots.get(from..).unwrap_or_default();
        if from == 0 {
            l.unreachable_prefixes.reserve_exact(rest.len());
        }
        for r in rest.iter().take(budget) {
            l.unreachable_prefixes.push(self.places.prefix(c, r));
        }
        l.unreachable_prefixes.len() - from
    }

    /// Findings at any level: their ids ([`FindingRef::id`]) are below this.
    pub(crate) fn id_count(&self) -> usize {
        self.roots_before(self.roots.len())
    }

    /// Loss roots of the models before the `c`-th, after the records (ids, see
    /// [`FindingRef::id`]).
    fn roots_before(&self, c: usize) -> usize {
        let mut n = self.recs.len();
        for r in self.roots.iter().take(c) {
            n += r.len();
        }
        n
    }

    /// The finding with id `id` ([`FindingRef::id`]).
    pub(crate) fn get(&self, id: usize) -> Option<FindingRef<'_>> {
        let mut k = match id.checked_sub(self.recs.len()) {
            None => return Some(self.at(What::Rec(id))),
            Some(k) => k,
        };
        for (c, r) in self.roots.iter().enumerate() {
            if k < r.len() {
                return Some(self.at(What::Loss(c, k)));
            }
            k -= r.len();
        }
        None
    }

    /// Events lost later because `event` was lost, for the `c`-th model.
    fn cascade(&self, c: usize, event: usize) -> usize {
        let find = |roots: &[Root]| {
            let i = roots.binary_search_by_key(&event, Root::at).ok()?;
            roots.get(i).map(|r| r.events.saturating_sub(1) as usize)
        };
        self.roots
            .get(c)
            .and_then(|r| find(r))
            .or_else(|| self.replayed.get(c).and_then(|r| find(r)))
            .unwrap_or(0)
    }

    fn root(&self, c: usize, j: usize) -> Option<(UnreachablePrefix, RootAt)> {
        let root = self.roots.get(c)?.get(j)?;
        Some((self.places.prefix(c, root), self.places.at(root.event)))
    }

    /// The next finding at any level (the prefixes leave out the loss roots replayed later:
    /// no finding).
    pub(crate) fn next(&self, cur: &mut Cursor) -> Option<FindingRef<'_>> {
        if cur.roots.len() < self.roots.len() {
            cur.roots.resize(self.roots.len(), 0);
        }
        // The smallest (event, rule) among the records and each model's next root; ties go
        // to the records, then to the models in order.
        let mut best: Option<(u64, What)> = self.order.get(cur.rec).and_then(|k| {
            self.recs
                .get(*k as usize)
                .map(|r| (r.key(), What::Rec(*k as usize)))
        });
        for (c, pos) in cur.roots.iter().enumerate() {
            let Some(root) = self.roots.get(c).and_then(|r| r.get(*pos)) else {
                continue;
            };
            let key = ((root.event as u64) << 5) | Rule::ConsumerLoss as u64;
            if best.as_ref().is_none_or(|(b, _)| key < *b) {
                best = Some((key, What::Loss(c, *pos)));
            }
        }
        let (_, what) = best?;
        match what {
            What::Rec(_) => cur.rec += 1,
            What::Loss(c, _) => {
                if let Some(p) = cur.roots.get_mut(c) {
                    *p += 1;
                }
            }
        }
        Some(self.at(what))
    }

    fn source(&self, id: u32) -> &str {
        self.sources.get(id as usize).map_or("", String::as_str)
    }

    fn tier(&self, id: u32) -> &str {
        self.tiers.get(id as usize).map_or("", String::as_str)
    }

    fn render(&self, what: What) -> Finding {
        let mut f = match what {
            What::Rec(k) => match self.recs.get(k) {
                Some(r) => self.render_rec(r),
                None => Finding::new(Rule::SeqGap, 0, String::new()),
            },
            What::Loss(c, j) => self.render_loss(c, j),
        };
        f.level = self.levels.level(f.rule);
        // Gaps are not tied to an event's verdicts; neither are findings without a line.
        if f.line == 0 || matches!(f.rule, Rule::SeqGap | Rule::SeqGapRecovered) {
            return f;
        }
        for (c, (kind, kinds)) in self.consumers.iter().zip(&self.kinds).enumerate() {
            if c >= self.roots.len() {
                break;
            }
            if let Some(v) = kinds.get(f.event) {
                f.verdicts.insert(kind.as_str().into(), *v);
            }
            f.cascade
                .insert(kind.as_str().into(), self.cascade(c, f.event));
        }
        f
    }

    fn render_rec(&self, r: &Rec) -> Finding {
        let message = match &r.msg {
            Msg::Full(f) => return (**f).clone(),
            Msg::Double { tier, group } => format!(
                "stored into {}{} again while already held",
                self.tier(*tier),
                GroupNote(*group)
            ),
            Msg::Removed { tier, group } => format!(
                "removed from {}{} which does not hold it",
                self.tier(*tier),
                GroupNote(*group)
            ),
            Msg::Reorder {
                first,
                tier,
                group,
                from,
                why,
            } => {
                // " from <source>" only across engines.
                let (word, from) = match from {
                    Some(s) => (" from ", self.source(*s)),
                    None => ("", ""),
                };
                format!(
                    "block {first} delivered before its parent {}, which arrives at event {} ({}{}{word}{from}){}",
                    r.parent.unwrap_or_default(),
                    r.related.unwrap_or_default(),
                    self.tier(*tier),
                    GroupNote(*group),
                    Because {
                        why: *why,
                        class: r.class.map_or(ReorderClass::Ambiguous, |c| c.0),
                        workers: self.workers
                    },
                )
            }
            Msg::Unknown { group } => {
                let p = r.parent.unwrap_or_default();
                if *group == 0 {
                    format!("parent {p} is never stored in this trace")
                } else {
                    format!("parent {p} is never stored in KV group {group} in this trace")
                }
            }
        };
        let mut f = Finding::new(r.rule, r.event, message)
            .at(r.line, r.pos as usize)
            .source(self.source(r.source))
            .hashes(r.hashes.to_vec())
            .parent_opt(r.parent)
            .inferred(r.inferred);
        if let Some(e) = r.related {
            f = f.related(e);
        }
        if let Some((class, evidence)) = r.class {
            f = f.classed(class, evidence);
        }
        match r.msg {
            Msg::Double { group, .. } | Msg::Removed { group, .. } | Msg::Reorder { group, .. } => {
                f.group(group)
            }
            _ => f,
        }
    }

    fn render_loss(&self, c: usize, j: usize) -> Finding {
        let Some((root, at)) = self.root(c, j) else {
            return Finding::new(Rule::ConsumerLoss, 0, String::new());
        };
        let kind = self.consumers.get(c).map_or("", |k| k.as_str());
        let verdict = self.kinds.get(c).and_then(|k| k.get(root.event)).copied();
        Finding::new(
            Rule::ConsumerLoss,
            root.event,
            format!(
                "{}: {} ({}, {} lost including cascade)",
                kind,
                verdict.map_or("lost", VerdictKind::as_str),
                Count(root.events, "event", "events"),
                Count(root.blocks, "block", "blocks"),
            ),
        )
        .at(at.line, at.pos as usize)
        .source(self.source(at.source))
        .hashes(root.first_block.map_or_else(Vec::new, |b| vec![b]))
        .parent_opt(root.missing_parent)
    }

    /// Move the per-event verdicts out (the store then renders findings without verdicts).
    pub(crate) fn take_kinds(&mut self) -> Vec<Vec<VerdictKind>> {
        std::mem::take(&mut self.kinds)
    }
}

/// The evidence part of a child-before-parent message.
struct Because {
    why: Why,
    class: ReorderClass,
    workers: u32,
}

impl std::fmt::Display for Because {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.workers;
        let (s, allow) = if w == 1 {
            ("", "allows")
        } else {
            ("s", "allow")
        };
        match (self.why, self.class) {
            (Why::Lanes | Why::NoJob, _) => Ok(()),
            (Why::SeparateBatches, _) => {
                f.write_str("; in another batch (a job's events are published in one batch)")
            }
            (Why::Provenance, ReorderClass::InJob) => f.write_str("; one job by provenance"),
            (Why::Provenance, _) => f.write_str("; another job by provenance"),
            (Why::GpuEvents, ReorderClass::InJob) => f.write_str(
                "; one store job by the GPU events (same request, same step)",
            ),
            (Why::GpuEvents, _) => f.write_str(
                "; another store job by the GPU events (another request or step)",
            ),
            (Why::BatchOrder(d, r), ReorderClass::InJob) => write!(
                f,
                "; job inferred from batch structure: this request's {r} runs in the batch start with {}, more than {w} worker{s} {allow} (at most {}), so a job is in set order",
                Count(d as usize, "descent", "descents"),
                w - 1
            ),
            (Why::BatchOrder(d, r), _) => write!(
                f,
                "; ambiguous: this request's {r} runs in the batch start with {}, which {w} worker{s} completing jobs out of order {allow} (at most {}); GPU-tier events in the capture, provenance, or a lower worker count (--workers) would decide it",
                Count(d as usize, "descent", "descents"),
                w - 1
            ),
            (Why::Secondary, _) => f.write_str(
                "; ambiguous: secondary-tier jobs complete asynchronously, so only provenance, GPU-tier events or the CPU tier's events of the job this tier copies would decide it",
            ),
            (Why::Cascade, ReorderClass::AcrossJobs) => f.write_str(
                "; another job: this tier copies CPU store jobs in their order, and the CPU tier got the parent first",
            ),
            (Why::Cascade, ReorderClass::InJob) => f.write_str(
                "; one job: this tier copies CPU store jobs in their order, and the CPU tier has this inversion in one job",
            ),
            (Why::Cascade, _) => f.write_str(
                "; ambiguous: this tier copies CPU store jobs in their order, and the CPU tier's same inversion is ambiguous",
            ),
            (Why::Mixed, _) => f.write_str(
                "; ambiguous: the child's and the parent's jobs rest on different evidence; provenance or GPU-tier events for both would decide it",
            ),
        }
    }
}

/// " group N" for KV groups other than 0 (nothing for a single-group trace).
struct GroupNote(u32);

impl std::fmt::Display for GroupNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 0 {
            Ok(())
        } else {
            write!(f, " group {}", self.0)
        }
    }
}

// What only a comparison's `SideBuilder` reads (feature `compare`).
#[cfg(feature = "compare")]
impl FindingRef<'_> {
    /// A record's KV group, first hash and parent, without rendering (a comparison's name of
    /// a violation); `None` for a `consumer-loss` finding.
    pub(crate) fn block(&self) -> Option<(u32, Option<u64>, Option<u64>)> {
        let r = self.rec()?;
        Some(match &r.msg {
            Msg::Full(f) => (f.group, f.hashes.first().copied(), f.parent),
            Msg::Double { group, .. } | Msg::Removed { group, .. } | Msg::Reorder { group, .. } => {
                (*group, r.hashes.first().copied(), r.parent)
            }
            Msg::Unknown { .. } => (0, r.hashes.first().copied(), r.parent),
        })
    }
}
