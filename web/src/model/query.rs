//! The search box's query language over the view-model's events ([`GRAMMAR`] is what the `?`
//! help shows). A query is parsed once into typed terms; [`Model::matches`] lists every
//! matching event (the match count, the timeline's highlights and next/previous match).

use super::*;
use kvscope_core::analysis::Analysis;
use kvscope_core::consumers::{ConsumerKind, VerdictKind};
use kvscope_core::hash::BlockHash;
use kvscope_core::replay::{LensMark, RouterLens};

/// The query grammar, one `(form, meaning)` per row, as the `?` help lists it.
pub const GRAMMAR: &[(&str, &str)] = &[
    ("a b  or  a && b", "every term must match"),
    ("hash=123456…567890", "a block or parent hash: decimal, 0x hex, a prefix, or shortened as shown"),
    ("llmd=dropped_orphan", "a router's final verdict (llmd, dynamo, smg, sglang, ideal): a verdict or a mark (dropped, misrooted, …)"),
    ("verdict=…", "the same, by any router"),
    ("rule=in-job", "a finding whose rule contains the text"),
    ("tier=CPU", "the event's tier (GPU, CPU, a STORAGE tier name)"),
    ("job=3", "the transfer job (~3: inferred)"),
    ("source=pod-a  seq=7  req=r1", "the batch's source or seq, the provenance request id"),
    ("type=removed", "the event type"),
    ("text", "free text: a type, tier, source, rule or hash"),
];

/// One term of a [`Query`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    /// Type name contains.
    Type(String),
    /// Lane (tier) label equals.
    Tier(String),
    /// Batch source equals.
    Source(String),
    /// The job, as its lane shows it (`3`, `~3` for inferred).
    Job(String),
    /// Provenance request id.
    Req(String),
    /// Batch seq.
    Seq(u64),
    /// Any block or parent hash.
    Hash(HashPattern),
    /// A finding whose rule name contains the text.
    Rule(String),
    /// What a router (any, for `None`) finally did.
    Verdict(Option<ConsumerKind>, VerdictPattern),
    /// Free text: type, tier, source, rule or hash.
    Text(String, Option<HashPattern>),
    /// Never matches (an unknown field or an unusable value): why.
    Nothing(&'static str),
}

/// How a hash is written in a query.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HashPattern {
    /// Decimal digits: the decimal form starts with them (the full value is its own prefix).
    Decimal(String),
    /// `0x` hex: the value, zero-padding ignored; or bytes hashes by their hex.
    Hex(String),
    /// The shortened form the page shows (`123456…567890`): start and end.
    Elided(String, String),
}

impl HashPattern {
    fn parse(v: &str) -> Option<HashPattern> {
        let v = v.trim();
        if let Some(hex) = v.strip_prefix("0x") {
            return (!hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| HashPattern::Hex(hex.trim_start_matches('0').to_owned()));
        }
        for sep in ["…", "..."] {
            if let Some((a, b)) = v.split_once(sep) {
                return Some(HashPattern::Elided(a.to_owned(), b.to_owned()));
            }
        }
        (!v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()))
            .then(|| HashPattern::Decimal(v.to_owned()))
    }

    fn hit(&self, h: &BlockHash) -> bool {
        match self {
            HashPattern::Decimal(d) => h.to_display_string().starts_with(d.as_str()),
            HashPattern::Hex(x) => {
                let hex = h.to_hex_string();
                let hex = hex.trim_start_matches("0x").trim_start_matches('0');
                hex == x || matches!(h, BlockHash::Bytes(_)) && hex.starts_with(x.as_str())
            }
            HashPattern::Elided(a, b) => {
                let s = h.to_display_string();
                s.len() >= a.len() + b.len() && s.starts_with(a.as_str()) && s.ends_with(b.as_str())
            }
        }
    }
}

/// A verdict in a query: one of the core's verdict names or a lens mark word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VerdictPattern {
    Kind(VerdictKind),
    Mark(LensMark),
}

impl VerdictPattern {
    fn parse(v: &str) -> Option<VerdictPattern> {
        VerdictKind::ALL
            .into_iter()
            .find(|k| k.as_str() == v)
            .map(VerdictPattern::Kind)
            .or_else(|| {
                LensMark::ALL
                    .into_iter()
                    .find(|m| m.as_str() == v)
                    .map(VerdictPattern::Mark)
            })
    }

    fn hit(self, k: VerdictKind) -> bool {
        match self {
            VerdictPattern::Kind(want) => k == want,
            VerdictPattern::Mark(m) => LensMark::of(k) == m,
        }
    }
}

/// A search query: terms joined by `&&` (or spaces), each `field=value` or free text (see
/// [`GRAMMAR`]). Fields and values are case-insensitive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    terms: Vec<Term>,
    /// The first term that can never match and why (`colour=red`, `unknown field`).
    problem: Option<(String, &'static str)>,
}

impl Query {
    /// Parse a query string (never fails: a term it cannot use (an unknown field, a value
    /// that is not a number, hash or verdict) matches nothing, and [`Query::problem`] names
    /// the first such term).
    pub fn parse(s: &str) -> Query {
        let mut q = Query::default();
        for t in s
            .split("&&")
            .flat_map(|part| part.split_whitespace())
            .filter(|t| !t.is_empty())
        {
            let term = match t.split_once('=') {
                Some((k, v)) => Query::field(
                    &k.trim().to_ascii_lowercase(),
                    &v.trim().to_ascii_lowercase(),
                ),
                None => {
                    let v = t.to_ascii_lowercase();
                    let h = HashPattern::parse(&v);
                    Term::Text(v, h)
                }
            };
            if let (Term::Nothing(why), None) = (&term, &q.problem) {
                q.problem = Some((t.to_owned(), why));
            }
            q.terms.push(term);
        }
        q
    }

    /// The term `k=v` ([`Term::Nothing`] says why it cannot match).
    fn field(k: &str, v: &str) -> Term {
        match k {
            "type" => Term::Type(v.to_owned()),
            "tier" => Term::Tier(v.to_owned()),
            "source" => Term::Source(v.to_owned()),
            "job" => Term::Job(v.to_owned()),
            "req" => Term::Req(v.to_owned()),
            "rule" => Term::Rule(v.to_owned()),
            "seq" => v.parse().map_or(Term::Nothing("not a number"), Term::Seq),
            "hash" => HashPattern::parse(v).map_or(Term::Nothing("not a hash"), Term::Hash),
            _ => {
                let router = if k == "verdict" {
                    None
                } else {
                    match ConsumerKind::parse(k) {
                        Some(r) => Some(r),
                        None => return Term::Nothing("unknown field"),
                    }
                };
                VerdictPattern::parse(v)
                    .map_or(Term::Nothing("not a verdict"), |p| Term::Verdict(router, p))
            }
        }
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The first term that can never match and why (`llmd=gone`, `not a verdict`), if any.
    pub fn problem(&self) -> Option<(&str, &'static str)> {
        self.problem.as_ref().map(|(t, why)| (t.as_str(), *why))
    }

    /// Whether event `i` of `m` matches every term; `a` is the analysis, once done (verdict
    /// terms match nothing before it).
    fn matches(&self, m: &Model, t: &Trace, a: Option<&Analysis>, i: u32) -> bool {
        let Some(r) = m.events.get(i as usize) else {
            return false;
        };
        let Some(b) = batch_of(t, r) else {
            return false;
        };
        let Some(ev) = b.events.get(r.pos as usize) else {
            return false;
        };
        let prov = b.provenance.as_ref().and_then(|p| p.get(r.pos as usize));
        let tier = m
            .lane_of
            .get(i as usize)
            .and_then(|l| m.lanes.get(*l as usize))
            .map(|l| l.label.to_ascii_lowercase());
        let any_hash = |p: &HashPattern| {
            ev.block_hashes().iter().any(|h| p.hit(h))
                || matches!(ev, KvEvent::BlockStored(s) if s.parent_block_hash.as_ref().is_some_and(|h| p.hit(h)))
        };
        let rule_hit = |v: &str| m.violations_at(i).any(|x| x.rule.contains(v));
        let type_hit = |v: &str| ev.type_name().to_ascii_lowercase().contains(v);
        self.terms.iter().all(|term| match term {
            Term::Type(v) => type_hit(v),
            Term::Tier(v) => tier.as_deref() == Some(v.as_str()),
            Term::Source(v) => b.source.to_ascii_lowercase() == *v,
            Term::Job(v) => job_hit(a, prov, i, v),
            Term::Req(v) => prov
                .and_then(|p| p.req_id.as_deref())
                .is_some_and(|q| q.to_ascii_lowercase() == *v),
            Term::Seq(n) => b.seq == *n,
            Term::Hash(p) => any_hash(p),
            Term::Rule(v) => rule_hit(v),
            Term::Verdict(router, p) => a.is_some_and(|a| verdict_hit(a, *router, *p, i)),
            Term::Text(v, h) => {
                type_hit(v)
                    || tier.as_deref() == Some(v.as_str())
                    || b.source.to_ascii_lowercase() == *v
                    || rule_hit(v)
                    || h.as_ref().is_some_and(|p| v.len() >= 4 && any_hash(p))
            }
            Term::Nothing(_) => false,
        })
    }
}

/// Whether event `i`'s job is `v` (`3`: provenance job id or interned id; `~3`: inferred).
fn job_hit(a: Option<&Analysis>, prov: Option<&Provenance>, i: u32, v: &str) -> bool {
    if let Some(a) = a {
        let job = a
            .index
            .events
            .get(i as usize)
            .and_then(|e| a.index.jobs.get(e.job as usize));
        return job.is_some_and(|j| {
            let id = if j.inferred {
                u64::from(j.id)
            } else {
                j.job_id.unwrap_or(u64::from(j.id))
            };
            let (want, inferred) = match v.strip_prefix('~') {
                Some(n) => (n, true),
                None => (v, j.inferred),
            };
            inferred == j.inferred && id.to_string() == want
        });
    }
    prov.and_then(|p| p.job_id)
        .is_some_and(|j| j.to_string() == v)
}

/// Whether `router` (any, for `None`) finally did `p` with event `i`.
fn verdict_hit(a: &Analysis, router: Option<ConsumerKind>, p: VerdictPattern, i: u32) -> bool {
    let hit = |k: ConsumerKind| {
        RouterLens::new(a, k)
            .and_then(|l| l.verdict(i))
            .is_some_and(|v| p.hit(v))
    };
    match router {
        Some(k) => hit(k),
        None => a.config.consumers.iter().any(|k| hit(*k)),
    }
}

impl Model {
    /// Every event matching `query`, ascending (empty for an empty query).
    pub fn matches(&self, query: &Query) -> Vec<u32> {
        if query.is_empty() {
            return Vec::new();
        }
        let n = self.events.len() as u32;
        let scan = |t: &Trace, a: Option<&Analysis>| {
            (0..n).filter(|&i| query.matches(self, t, a, i)).collect()
        };
        // One lock for the whole scan: the replay engine owns the trace once analysed.
        match self.replay() {
            Some(r) => scan(r.trace(), Some(r.analysis())),
            None => self.with_trace(|t| scan(t, None)),
        }
    }

    /// The first event after `from` (wrapping) matching `query` (see [`Query`]).
    pub fn search(&self, query: &Query, from: Option<u32>) -> Option<u32> {
        next_match(&self.matches(query), from, true)
    }
}

/// The match to go to from event `from` (`None`: before the first event) among `matches`
/// (ascending): the next one after it (`forward`) or the previous one before it, wrapping.
pub fn next_match(matches: &[u32], from: Option<u32>, forward: bool) -> Option<u32> {
    let first = *matches.first()?;
    let last = *matches.last()?;
    if forward {
        let k = from.map_or(0, |f| matches.partition_point(|&m| m <= f));
        Some(matches.get(k).copied().unwrap_or(first))
    } else {
        let k = from.map_or(0, |f| matches.partition_point(|&m| m < f));
        Some(
            k.checked_sub(1)
                .and_then(|k| matches.get(k))
                .copied()
                .unwrap_or(last),
        )
    }
}

/// The search note: `3 of 17 matches` when the current event is the third match, `17
/// matches` otherwise, `no match`, or why the query cannot match
/// (`no match: colour=red: unknown field`).
pub fn match_note(query: &Query, matches: &[u32], current: Option<u32>) -> String {
    if query.is_empty() {
        return String::new();
    }
    if matches.is_empty() {
        return match query.problem() {
            Some((t, why)) => format!("no match: {t}: {why}"),
            None => "no match".into(),
        };
    }
    let total = crate::text::count(matches.len(), "match", "matches");
    match current.and_then(|c| matches.binary_search(&c).ok()) {
        Some(k) => format!("{} of {total}", k + 1),
        None => total,
    }
}
