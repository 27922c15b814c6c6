//! Timeline lanes: which tier, KV group, source and transfer job an event is drawn in, and
//! the lane modes the page offers.

use kvscope_core::event::Tier;

/// A timeline lane: one tier (GPU, CPU, each STORAGE tier), split per KV group when the trace
/// has more than one (both groups' blocks carry the same hashes), and optionally by source or
/// by transfer job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    /// The tier (ordering: GPU, CPU, STORAGE tiers, others).
    pub tier: Tier,
    /// Tier label shown in the gutter (provenance tier name for unnamed STORAGE tiers).
    pub label: String,
    /// The KV group (`group_idx`, absent as 0), when the trace has more than one group.
    pub group: Option<u32>,
    /// Source the lane is restricted to when lanes are split per source (or per job in a trace
    /// with several sources).
    pub source: Option<String>,
    /// The job sub-lane, when lanes are split per job.
    pub job: Option<JobLane>,
}

/// A per-job sub-lane of a tier (lane mode [`LaneMode::TierJob`]). Ordered: the tier's
/// "no job" lane first, then jobs by first event, then the overflow lane.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobLane {
    /// Events of the tier without a job (GPU events, removals without provenance job).
    NoJob,
    /// One transfer job (see `kvscope_core::analysis::Job`).
    Job {
        /// Delivery index of its first event (sort key: jobs in order of appearance).
        first_event: u32,
        /// Provenance `job_id`, or the analysis' interned id when inferred.
        id: u64,
        /// Inferred from batch structure (no provenance).
        inferred: bool,
    },
    /// Jobs beyond [`MAX_JOB_LANES`], sharing one lane per tier.
    More,
}

/// At most this many per-job lanes; later jobs share a "more jobs" lane of their tier.
pub const MAX_JOB_LANES: usize = 256;

impl Lane {
    /// The job part of a per-job lane's title (`job 7`, `job ~3 (inferred)`, `no job`,
    /// `more jobs`); `None` when lanes are not split per job.
    pub fn job_title(&self) -> Option<String> {
        Some(match self.job.as_ref()? {
            JobLane::NoJob => "no job".to_owned(),
            JobLane::Job {
                id, inferred: true, ..
            } => format!("job ~{id} (inferred)"),
            JobLane::Job { id, .. } => format!("job {id}"),
            JobLane::More => "more jobs".to_owned(),
        })
    }

    /// The full label: `GPU`, `CPU · group 1` in a trace of several KV groups, `pod-a · CPU`
    /// when split per source, `CPU · job 7`, `CPU · job ~3 (inferred)` or `GPU · no job` when
    /// split per job.
    pub fn title(&self) -> String {
        let tier = match self.group {
            Some(g) => format!("{} · group {g}", self.label),
            None => self.label.clone(),
        };
        let base = match &self.source {
            Some(s) => format!("{s} · {tier}"),
            None => tier,
        };
        match self.job_title() {
            Some(j) => format!("{base} · {j}"),
            None => base,
        }
    }
}

/// How lanes are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LaneMode {
    /// One lane per tier.
    #[default]
    Tier,
    /// One lane per (source, tier).
    SourceTier,
    /// One lane per tier, split into one sub-lane per transfer job (plus a "no job" lane).
    TierJob,
}

impl LaneMode {
    /// Every mode, in picker order.
    pub const ALL: [LaneMode; 3] = [LaneMode::Tier, LaneMode::SourceTier, LaneMode::TierJob];

    /// Short name (picker value and permalink `l=`).
    pub fn as_str(self) -> &'static str {
        match self {
            LaneMode::Tier => "tier",
            LaneMode::SourceTier => "source",
            LaneMode::TierJob => "job",
        }
    }

    /// Parse [`LaneMode::as_str`] (unknown: `Tier`).
    pub fn parse(s: &str) -> LaneMode {
        LaneMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .unwrap_or_default()
    }

    /// Label in the lane picker.
    pub fn label(self) -> &'static str {
        match self {
            LaneMode::Tier => "lanes: tier",
            LaneMode::SourceTier => "lanes: source × tier",
            LaneMode::TierJob => "lanes: tier × job",
        }
    }
}
