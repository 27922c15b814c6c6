//! Analysis results as JS objects: findings, loss summaries, jobs. Hashes are decimal strings
//! (kvscope's analysis keys blocks by the router-normalised u64, `BlockHash::as_u64`).

use kvscope_core::analysis::{self as ka, Rule};
use kvscope_core::trace::ProvenanceKind;
use tsify::Tsify;
use wasm_bindgen::JsValue;

use crate::js::{str_array, Obj, Pairs, ToJs};

/// A u64-normalised block hash as its exact decimal string.
pub fn hash_str(h: u64) -> String {
    h.to_string()
}

/// A list of normalised hashes as decimal strings.
pub fn hash_strs(hs: &[u64]) -> Vec<String> {
    hs.iter().map(|h| hash_str(*h)).collect()
}

/// A count or index as a JS number (exact: counts stay far below 2^53).
pub fn num(v: usize) -> f64 {
    v as f64
}

/// One reported finding.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Finding {
    /// The rule.
    #[tsify(type = "RuleName")]
    pub rule: &'static str,
    /// Its level in this run.
    #[tsify(type = "Level")]
    pub level: &'static str,
    /// Global index of the offending event.
    pub event: f64,
    /// 1-based JSONL line / msgpack batch number of that event (0 when not tied to one).
    pub line: f64,
    /// 0-based index of the event in its batch.
    pub index: f64,
    /// Source name.
    pub source: String,
    /// The hashes concerned (decimal strings).
    #[tsify(type = "BlockHashString[]")]
    pub hashes: Vec<String>,
    /// The KV cache group of those blocks (`group_idx`; 0 for a single-group engine).
    pub group: f64,
    /// The parent concerned (reorders, unknown parents).
    #[tsify(type = "BlockHashString | null")]
    pub parent: Option<String>,
    /// Global index of the related event (the later parent store for reorders).
    pub related_event: Option<f64>,
    /// Whether the job classification was inferred (no provenance).
    pub inferred: bool,
    /// Child-before-parent findings: the class of the inversion.
    #[tsify(type = "ReorderClass | null")]
    pub class: Option<&'static str>,
    /// Child-before-parent findings: what the class rests on.
    #[tsify(type = "Evidence | null")]
    pub evidence: Option<&'static str>,
    /// Human-readable detail.
    pub message: String,
    /// Per consumer: the event's final verdict.
    #[tsify(type = "Partial<Record<ConsumerName, VerdictKind>>")]
    pub verdicts: Pairs<String, &'static str>,
    /// Per consumer: how many later events were lost because this one was dropped.
    #[tsify(type = "Partial<Record<ConsumerName, number>>")]
    pub cascade: Pairs<String, f64>,
}

impl ToJs for Finding {
    fn to_js(&self) -> JsValue {
        let Finding {
            rule,
            level,
            event,
            line,
            index,
            source,
            hashes,
            group,
            parent,
            related_event,
            inferred,
            class,
            evidence,
            message,
            verdicts,
            cascade,
        } = self;
        let o = Obj::new();
        o.str("rule", rule)
            .str("level", level)
            .num("event", *event)
            .num("line", *line)
            .num("index", *index)
            .str("source", source)
            .val("hashes", &str_array(hashes))
            .num("group", *group)
            .opt_str("parent", parent.as_deref())
            .opt_num("related_event", *related_event)
            .flag("inferred", *inferred)
            .opt_str("class", *class)
            .opt_str("evidence", *evidence)
            .str("message", message)
            .to("verdicts", verdicts)
            .to("cascade", cascade);
        o.done()
    }
}

impl From<&ka::Finding> for Finding {
    fn from(f: &ka::Finding) -> Self {
        Finding {
            rule: f.rule.name(),
            level: level_str(f.level),
            event: num(f.event),
            line: f.line as f64,
            index: num(f.index),
            source: f.source.clone(),
            hashes: hash_strs(&f.hashes),
            group: f64::from(f.group),
            parent: f.parent.map(hash_str),
            related_event: f.related_event.map(num),
            inferred: f.inferred,
            class: f.class.map(|c| c.name()),
            evidence: f.evidence.map(|e| e.name()),
            message: f.message.clone(),
            verdicts: Pairs(
                f.verdicts
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str()))
                    .collect(),
            ),
            cascade: Pairs(
                f.cascade
                    .iter()
                    .map(|(k, v)| (k.clone(), num(*v)))
                    .collect(),
            ),
        }
    }
}

/// A level's name.
pub fn level_str(l: kvscope_core::analysis::Level) -> &'static str {
    use kvscope_core::analysis::Level;
    match l {
        Level::Allow => "allow",
        Level::Warn => "warn",
        Level::Deny => "deny",
    }
}

/// A prefix a consumer can no longer route to.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct UnreachablePrefix {
    /// Global index of the root lost event.
    pub event: f64,
    /// The parent it could not attach to.
    #[tsify(type = "BlockHashString | null")]
    pub missing_parent: Option<String>,
    /// Its first block.
    #[tsify(type = "BlockHashString | null")]
    pub first_block: Option<String>,
    /// Events lost in total (itself plus its cascade).
    pub events: f64,
    /// Blocks lost in total.
    pub blocks: f64,
}

impl ToJs for UnreachablePrefix {
    fn to_js(&self) -> JsValue {
        let UnreachablePrefix {
            event,
            missing_parent,
            first_block,
            events,
            blocks,
        } = self;
        let o = Obj::new();
        o.num("event", *event)
            .opt_str("missing_parent", missing_parent.as_deref())
            .opt_str("first_block", first_block.as_deref())
            .num("events", *events)
            .num("blocks", *blocks);
        o.done()
    }
}

impl From<&ka::UnreachablePrefix> for UnreachablePrefix {
    fn from(u: &ka::UnreachablePrefix) -> Self {
        UnreachablePrefix {
            event: num(u.event),
            missing_parent: u.missing_parent.map(hash_str),
            first_block: u.first_block.map(hash_str),
            events: num(u.events),
            blocks: num(u.blocks),
        }
    }
}

/// What one consumer model lost over the whole trace.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct LossSummary {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: String,
    /// Stored blocks not indexed or not reachable at the end.
    pub blocks_lost: f64,
    /// `BlockStored` events with at least one lost block.
    pub events_lost: f64,
    /// Final verdict counts over all events.
    #[tsify(type = "Partial<Record<VerdictKind, number>>")]
    pub verdicts: Pairs<&'static str, f64>,
    /// Events still pending at the end (ideal).
    pub pending_at_end: f64,
    /// Unreachable prefixes (root losses with their cascade), in delivery order.
    pub unreachable_prefixes: Vec<UnreachablePrefix>,
}

impl ToJs for LossSummary {
    fn to_js(&self) -> JsValue {
        let LossSummary {
            consumer,
            blocks_lost,
            events_lost,
            verdicts,
            pending_at_end,
            unreachable_prefixes,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .num("blocks_lost", *blocks_lost)
            .num("events_lost", *events_lost)
            .to("verdicts", verdicts)
            .num("pending_at_end", *pending_at_end)
            .to("unreachable_prefixes", unreachable_prefixes);
        o.done()
    }
}

impl From<&ka::LossSummary> for LossSummary {
    fn from(l: &ka::LossSummary) -> Self {
        LossSummary {
            consumer: l.consumer.clone(),
            blocks_lost: num(l.blocks_lost),
            events_lost: num(l.events_lost),
            verdicts: Pairs(
                l.verdicts
                    .iter()
                    .map(|(k, v)| (k.as_str(), num(*v)))
                    .collect(),
            ),
            pending_at_end: num(l.pending_at_end),
            unreachable_prefixes: l
                .unreachable_prefixes
                .iter()
                .map(UnreachablePrefix::from)
                .collect(),
        }
    }
}

/// A transfer job: explicit (provenance `job_id`) or inferred from batch structure.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Job {
    /// kvscope's id for the job (index into the analysis' job table).
    pub id: u32,
    /// The provenance job id, when explicit.
    pub job_id: Option<u64>,
    /// True when inferred from batch structure (no provenance).
    pub inferred: bool,
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Provenance kind of its first event, when known.
    #[tsify(type = "ProvenanceKind | null")]
    pub kind: Option<ProvenanceKind>,
    /// Global index of its first event.
    pub first_event: f64,
    /// Global index of its last event.
    pub last_event: f64,
    /// Number of events.
    pub events: f64,
}

impl ToJs for Job {
    fn to_js(&self) -> JsValue {
        let Job {
            id,
            job_id,
            inferred,
            source,
            tier,
            kind,
            first_event,
            last_event,
            events,
        } = self;
        let o = Obj::new();
        o.num("id", f64::from(*id))
            .opt_big("job_id", *job_id)
            .flag("inferred", *inferred)
            .str("source", source)
            .str("tier", tier)
            .opt_str("kind", kind.map(ProvenanceKind::name))
            .num("first_event", *first_event)
            .num("last_event", *last_event)
            .num("events", *events);
        o.done()
    }
}

impl From<&ka::Job> for Job {
    fn from(j: &ka::Job) -> Self {
        Job {
            id: j.id,
            job_id: j.job_id,
            inferred: j.inferred,
            source: j.source.clone(),
            tier: j.tier.clone(),
            kind: j.kind,
            first_event: num(j.first_event),
            last_event: num(j.last_event),
            events: num(j.events),
        }
    }
}

/// The result of analysing a trace.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Analysis {
    /// The consumer models that ran, in report order.
    #[tsify(type = "ConsumerName[]")]
    pub consumers: Vec<&'static str>,
    /// Number of delivered events.
    pub event_count: f64,
    /// Whether any deny-level finding exists (what makes `kvscope check` exit 1).
    pub has_deny: bool,
    /// Findings at warn or deny level, in event order.
    pub findings: Vec<Finding>,
    /// Every child-before-parent violation regardless of level, sorted by event.
    pub violations: Vec<Finding>,
    /// Reported findings per rule (rules with none are absent).
    #[tsify(type = "Partial<Record<RuleName, number>>")]
    pub counts: Pairs<&'static str, f64>,
    /// Per consumer: what it lost.
    pub losses: Vec<LossSummary>,
    /// The transfer jobs (explicit or inferred), by id.
    pub jobs: Vec<Job>,
}

impl ToJs for Analysis {
    fn to_js(&self) -> JsValue {
        let Analysis {
            consumers,
            event_count,
            has_deny,
            findings,
            violations,
            counts,
            losses,
            jobs,
        } = self;
        let o = Obj::new();
        o.val("consumers", &str_array(consumers))
            .num("event_count", *event_count)
            .flag("has_deny", *has_deny)
            .to("findings", findings)
            .to("violations", violations)
            .to("counts", counts)
            .to("losses", losses)
            .to("jobs", jobs);
        o.done()
    }
}

impl From<&ka::Analysis> for Analysis {
    fn from(a: &ka::Analysis) -> Self {
        Analysis::with_findings(a, &a.findings, &a.violations)
    }
}

impl Analysis {
    /// `a` with its findings given apart (a replay's analysis keeps them compact, see
    /// `Replay::rendered_findings`).
    pub fn with_findings(
        a: &ka::Analysis,
        findings: &[ka::Finding],
        violations: &[ka::Finding],
    ) -> Self {
        // In `Rule::ALL` order.
        let counts = Pairs(
            Rule::ALL
                .into_iter()
                .map(|r| (r.name(), findings.iter().filter(|f| f.rule == r).count()))
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r, num(n)))
                .collect(),
        );
        Analysis {
            consumers: a.config.consumers.iter().map(|c| c.as_str()).collect(),
            event_count: num(a.event_count()),
            has_deny: findings.iter().any(|f| f.level == ka::Level::Deny),
            findings: findings.iter().map(Finding::from).collect(),
            violations: violations.iter().map(Finding::from).collect(),
            counts,
            losses: a.losses.iter().map(LossSummary::from).collect(),
            jobs: a.index.jobs.iter().map(Job::from).collect(),
        }
    }
}
