//! Named lint rules, their one-line explanations and levels (`allow` / `warn` / `deny`).
//!
//! Defaults: `child-before-parent-in-job` and `seq-gap` deny, every other rule (including
//! `seq-gap-recovered`: the batches are in the trace) warns, because vLLM guarantees neither
//! cross-job, cross-tier nor promotion order, so a correct multi-tier trace passes. The upstream
//! sources of each rule's facts are in `docs/rules.md`.

use crate::text::Quoted;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A lint rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A child delivered before its parent within one transfer job.
    ChildBeforeParentInJob,
    /// A child delivered before its parent, the parent coming in a later job of the same tier.
    ChildBeforeParentAcrossJobs,
    /// A child delivered before its parent in the same lane and batch, where the evidence
    /// cannot tell one job in set order from several jobs completing out of order.
    ChildBeforeParentAmbiguous,
    /// A child delivered before its parent, the parent coming later in another tier only.
    CrossTierReorder,
    /// A child delivered before its parent, the parent coming later from another source only.
    CrossSourceReorder,
    /// A child-before-parent where a promotion job delivers the child or the parent.
    PromotionReorder,
    /// A parent that is never stored anywhere in the trace (trace starts mid-stream, or a
    /// boundary never announced).
    UnknownParent,
    /// A removal of a hash the lane does not hold.
    RemoveUnknown,
    /// A store of a hash the lane already holds.
    DoubleStore,
    /// A hole in a publisher's sequence numbers, or an unrecovered gap record.
    SeqGap,
    /// A gap record that capture marked `recovered: true`: the missing batches were fetched
    /// over the replay socket and are in the trace (right after the record).
    SeqGapRecovered,
    /// A consumer model lost stored blocks (dropped, misrooted, truncated or skipped).
    ConsumerLoss,
    /// Routing precondition: batches a router cannot decode at all (llm-d: small-integer
    /// hashes, bad `extra_keys`; Dynamo: bytes hashes), with the events they take down.
    UndecodableBatch,
    /// Routing precondition: grouped events without `kv_cache_spec_kind`, which llm-d ignores.
    MissingSpecKind,
    /// Routing precondition: two sources store the same leading tokens under different
    /// hashes (another NONE_HASH seed, PYTHONHASHSEED or hash algorithm; or a cache salt).
    HashSeedMismatch,
    /// Routing precondition: a router block size the engine's blocks do not fit, or one
    /// source mixing block sizes that no single router setting fits.
    RouterBlockSizeMismatch,
    /// Routing precondition: a source a router ignores entirely, or one that publishes nothing
    /// for far longer than its usual interval while others publish.
    SilentSource,
    /// Routing precondition: more than 10 `(pod, tier, group)` entries for one llm-d request
    /// key, so llm-d's LRU silently evicts the oldest.
    PodEntryOverflow,
    /// Routing precondition: a publisher restart llm-d (replay off) does not notice: the blocks
    /// still credited to the source that its new incarnation never re-announced.
    StaleAfterRestart,
}

impl Rule {
    /// Every rule, in report order.
    pub const ALL: [Rule; 19] = [
        Rule::ChildBeforeParentInJob,
        Rule::ChildBeforeParentAcrossJobs,
        Rule::ChildBeforeParentAmbiguous,
        Rule::CrossTierReorder,
        Rule::CrossSourceReorder,
        Rule::PromotionReorder,
        Rule::UnknownParent,
        Rule::RemoveUnknown,
        Rule::DoubleStore,
        Rule::SeqGap,
        Rule::SeqGapRecovered,
        Rule::ConsumerLoss,
        Rule::UndecodableBatch,
        Rule::MissingSpecKind,
        Rule::HashSeedMismatch,
        Rule::RouterBlockSizeMismatch,
        Rule::SilentSource,
        Rule::PodEntryOverflow,
        Rule::StaleAfterRestart,
    ];

    /// The rule's name.
    pub fn name(self) -> &'static str {
        match self {
            Rule::ChildBeforeParentInJob => "child-before-parent-in-job",
            Rule::ChildBeforeParentAcrossJobs => "child-before-parent-across-jobs",
            Rule::ChildBeforeParentAmbiguous => "child-before-parent-ambiguous",
            Rule::CrossTierReorder => "cross-tier-reorder",
            Rule::CrossSourceReorder => "cross-source-reorder",
            Rule::PromotionReorder => "promotion-reorder",
            Rule::UnknownParent => "unknown-parent",
            Rule::RemoveUnknown => "remove-unknown",
            Rule::DoubleStore => "double-store",
            Rule::SeqGap => "seq-gap",
            Rule::SeqGapRecovered => "seq-gap-recovered",
            Rule::ConsumerLoss => "consumer-loss",
            Rule::UndecodableBatch => "undecodable-batch",
            Rule::MissingSpecKind => "missing-spec-kind",
            Rule::HashSeedMismatch => "hash-seed-mismatch",
            Rule::RouterBlockSizeMismatch => "router-block-size-mismatch",
            Rule::SilentSource => "silent-source",
            Rule::PodEntryOverflow => "pod-entry-overflow",
            Rule::StaleAfterRestart => "stale-after-restart",
        }
    }

    /// One-line explanation.
    pub fn explain(self) -> &'static str {
        match self {
            Rule::ChildBeforeParentInJob => "a transfer job announced a child block before its parent: this is how vLLM 0.28.0-0.33.0 behave (TransferJobStatus.keys is a set in their offloading scheduler; vLLM 0.34.0 keeps prefix order within a job); to report it without failing, use --rule child-before-parent-in-job=warn",
            Rule::ChildBeforeParentAcrossJobs => "a child was announced before its parent, which came in a later job of the same tier (not guaranteed by vLLM)",
            Rule::ChildBeforeParentAmbiguous => "a child was announced before its parent in the same batch and tier, and the evidence cannot tell one job in set order from several jobs completing out of order on several workers; GPU-tier events in the capture, provenance, or the worker count (--workers) would decide it",
            Rule::CrossTierReorder => "a child was announced before its parent, which only came later in another tier",
            Rule::CrossSourceReorder => "a child was announced before its parent, which only came later from another source",
            Rule::PromotionReorder => "a child-before-parent involving a promotion job (secondary tier into the primary tier)",
            Rule::UnknownParent => "a parent that is never stored anywhere in the trace: parent-strict routers drop the child and its descendants",
            Rule::RemoveUnknown => "a block was removed from a tier that did not hold it",
            Rule::DoubleStore => "a block was stored into a tier that already held it",
            Rule::SeqGap => "batches are missing from a publisher's sequence (lost or restarted); routers without replay lose them",
            Rule::SeqGapRecovered => "capture saw a sequence gap and recovered the missing batches over the replay socket (they are in the trace); a live router without replay would have lost them",
            Rule::ConsumerLoss => "a router model lost stored blocks (dropped orphan, misrooted, truncated or skipped)",
            Rule::UndecodableBatch => "a router cannot decode these batches at all and drops every event of them (llm-d: a block or parent hash below 2^32, or an extra_keys entry that is not an array; Dynamo: a bytes hash)",
            Rule::MissingSpecKind => "grouped events (group_idx) without kv_cache_spec_kind: llm-d cannot tell the group's kind and ignores the stores, then skips the group's removals",
            Rule::HashSeedMismatch => "two sources store the same leading tokens under different hashes: their NONE_HASH seed, PYTHONHASHSEED or hash algorithm differ (or a cache salt), so no prefix can match across them",
            Rule::RouterBlockSizeMismatch => "the router's block size (--llmd-block-size, --dynamo-block-size, auto: the source's first store) does not fit the engine's blocks: llm-d ignores them as sub_canonical, Dynamo truncates them",
            Rule::SilentSource => "a router ignores every store of a source, or a source published nothing for far longer than its median interval between batches while other sources published",
            Rule::PodEntryOverflow => "more than 10 (pod, tier, group) entries for one llm-d request key: llm-d's per-key LRU silently evicts the oldest, losing a mapping a pod still holds",
            Rule::StaleAfterRestart => "a publisher restarted (seq went back) and llm-d without replay did not notice: the blocks of the old incarnation stay credited to the source",
        }
    }

    /// Whether this rule is a child-before-parent violation class.
    pub fn is_reorder(self) -> bool {
        matches!(
            self,
            Rule::ChildBeforeParentInJob
                | Rule::ChildBeforeParentAcrossJobs
                | Rule::ChildBeforeParentAmbiguous
                | Rule::CrossTierReorder
                | Rule::CrossSourceReorder
                | Rule::PromotionReorder
        )
    }

    /// Whether this rule names a routing precondition: what makes a real router lose everything
    /// or most of it (`docs/rules.md`, "Routing preconditions").
    pub fn is_routing_precondition(self) -> bool {
        matches!(
            self,
            Rule::UndecodableBatch
                | Rule::MissingSpecKind
                | Rule::HashSeedMismatch
                | Rule::RouterBlockSizeMismatch
                | Rule::SilentSource
                | Rule::PodEntryOverflow
                | Rule::StaleAfterRestart
        )
    }

    /// Whether a finding of this rule marks an event's order: every rule but the per-model
    /// `consumer-loss` (one finding per lost event and model) and the routing preconditions
    /// (aggregated conditions that explain losses). Viewers mark and navigate these by default.
    pub fn marks_order(self) -> bool {
        self != Rule::ConsumerLoss && !self.is_routing_precondition()
    }

    /// Default level.
    pub fn default_level(self) -> Level {
        match self {
            Rule::ChildBeforeParentInJob | Rule::SeqGap => Level::Deny,
            _ => Level::Warn,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Rule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rule::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                RuleError(format!(
                    "unknown rule {} (known: {})",
                    Quoted(s),
                    Rule::ALL.map(Rule::name).join(", ")
                ))
            })
    }
}

/// How a rule's findings count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Not reported.
    Allow,
    /// Reported; does not fail `check`.
    Warn,
    /// Reported; fails `check` (exit 1).
    Deny,
}

impl Level {
    /// The level's name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Warn => "warn",
            Level::Deny => "deny",
        }
    }
}

impl FromStr for Level {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Level::Allow),
            "warn" => Ok(Level::Warn),
            "deny" => Ok(Level::Deny),
            _ => Err(RuleError(format!(
                "unknown level {} (allow, warn, deny)",
                Quoted(s)
            ))),
        }
    }
}

/// A bad rule or level name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

/// The level of every rule (indexed by the rule's position in [`Rule::ALL`]). Serializes as
/// a map from rule name to level, in [`Rule::ALL`] order; a deserialized map sets the rules
/// it names and leaves the others at their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleLevels([Level; Rule::ALL.len()]);

impl Default for RuleLevels {
    fn default() -> Self {
        RuleLevels(Rule::ALL.map(Rule::default_level))
    }
}

impl RuleLevels {
    /// The level of `rule`.
    pub fn level(&self, rule: Rule) -> Level {
        self.0
            .get(rule as usize)
            .copied()
            .unwrap_or(rule.default_level())
    }

    /// Set a level.
    pub fn set(&mut self, rule: Rule, level: Level) {
        if let Some(slot) = self.0.get_mut(rule as usize) {
            *slot = level;
        }
    }

    /// Apply an override written `NAME=allow|warn|deny`.
    pub fn apply_override(&mut self, spec: &str) -> Result<(), RuleError> {
        let (name, level) = spec.split_once('=').ok_or_else(|| {
            RuleError(format!(
                "expected NAME=allow|warn|deny, got {}",
                Quoted(spec)
            ))
        })?;
        self.set(name.trim().parse()?, level.trim().parse()?);
        Ok(())
    }
}

impl Serialize for RuleLevels {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(Rule::ALL.len()))?;
        for r in Rule::ALL {
            m.serialize_entry(&r, &self.level(r))?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for RuleLevels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = super::SortedPairs::<Rule, Level>::deserialize(d)?;
        let mut levels = RuleLevels::default();
        for (r, l) in pairs.iter() {
            levels.set(*r, *l);
        }
        Ok(levels)
    }
}

#[cfg(test)]
mod level_tests {
    use super::*;

    #[test]
    fn rule_levels_index_by_rule_all_order_and_serialize_as_a_map() {
        for (i, r) in Rule::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r:?}");
        }
        let mut l = RuleLevels::default();
        l.set(Rule::CrossTierReorder, Level::Deny);
        assert_eq!(l.level(Rule::CrossTierReorder), Level::Deny);
        assert_eq!(l.level(Rule::SeqGap), Level::Deny);
        assert_eq!(l.level(Rule::DoubleStore), Level::Warn);
        let json = serde_json::to_string(&l).unwrap();
        let expected: std::collections::BTreeMap<Rule, Level> =
            Rule::ALL.into_iter().map(|r| (r, l.level(r))).collect();
        assert_eq!(json, serde_json::to_string(&expected).unwrap());
        let back: RuleLevels = serde_json::from_str(r#"{"double-store": "allow"}"#).unwrap();
        assert_eq!(back.level(Rule::DoubleStore), Level::Allow);
        assert_eq!(back.level(Rule::SeqGap), Level::Deny);
    }
}
