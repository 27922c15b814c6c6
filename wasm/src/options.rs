//! Options objects JavaScript passes in (analysis, violation filters, scenario generation),
//! parsed strictly: an unknown key, consumer, rule or level is an error naming it.

use kvscope_core::analysis::{AnalysisConfig, Level, Rule, RuleLevels};
use kvscope_core::consumers::{ConsumerConfig, ConsumerKind};
use kvscope_core::replay::ViolationFilter;
use serde::Deserialize;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::js::Pairs;

#[wasm_bindgen(typescript_custom_section)]
const TS_NAMES: &'static str = r#"
/** A consumer (router) model. */
export type ConsumerName = "llmd" | "dynamo" | "sglang" | "ideal";
/** A lint rule. */
export type RuleName = "child-before-parent-in-job" | "child-before-parent-across-jobs"
  | "cross-tier-reorder" | "cross-source-reorder" | "promotion-reorder" | "unknown-parent"
  | "remove-unknown" | "double-store" | "seq-gap" | "seq-gap-recovered" | "consumer-loss";
/** How a rule's findings count. */
export type Level = "allow" | "warn" | "deny";
/** What a consumer did with an event or a block. */
export type VerdictKind = "applied" | "dropped_orphan" | "misrooted" | "pending" | "replayed"
  | "truncated" | "removed" | "remove_unknown" | "ignored" | "cleared";
"#;

#[wasm_bindgen]
extern "C" {
    /// An `AnalyzeOptions` object passed by JavaScript (parsed with [`AnalyzeOptions`]).
    #[wasm_bindgen(typescript_type = "AnalyzeOptions")]
    pub type AnalyzeOptionsArg;
    /// A `ViolationFilterOptions` object passed by JavaScript.
    #[wasm_bindgen(typescript_type = "ViolationFilterOptions")]
    pub type ViolationFilterArg;
    /// A msgpack event encoding name passed by JavaScript.
    #[wasm_bindgen(typescript_type = "\"map\" | \"array\"")]
    pub type EncodingArg;
}

/// Options of `Trace.analyze()` / `Trace.replay()`. Every key is optional.
#[derive(Clone, Debug, Default, Deserialize, Tsify)]
#[serde(default, deny_unknown_fields)]
pub struct AnalyzeOptions {
    /// Consumer models to run (default: all, in the order llmd, dynamo, sglang, ideal).
    #[tsify(type = "ConsumerName[]", optional)]
    pub consumers: Option<Vec<String>>,
    /// Only report these rules (the others are set to `allow`); default: every rule.
    #[tsify(type = "RuleName[]", optional)]
    pub rules: Option<Vec<String>>,
    /// Level overrides, e.g. `{ "cross-tier-reorder": "deny" }` (applied after `rules`).
    #[tsify(type = "Partial<Record<RuleName, Level>>", optional)]
    pub levels: Option<Pairs<String, String>>,
    /// Model settings (llm-d / Dynamo block sizes, Dynamo clear scope, ideal pending limit).
    #[tsify(type = "Partial<ConsumerConfig>", optional)]
    pub consumer_config: Option<ConsumerConfigOptions>,
}

/// Model settings; unset keys keep kvscope's defaults.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsumerConfigOptions {
    /// llm-d's `blockSizeTokens` (default: auto = the trace's engine block size).
    pub llmd_canonical_block_size: Option<u32>,
    /// Dynamo's `kv_block_size` (default: auto = the trace's engine block size).
    pub dynamo_kv_block_size: Option<u32>,
    /// Dynamo: clear every DP rank on `AllBlocksCleared` (default false).
    pub dynamo_clear_all_ranks: Option<bool>,
    /// Ideal consumer: orphan events held pending at once (default 1024).
    pub ideal_pending_limit: Option<u32>,
}

#[wasm_bindgen(typescript_custom_section)]
const TS_CONSUMER_CONFIG: &'static str = r#"
/** Consumer model settings (see `ConsumerConfig` in kvscope-core). */
export interface ConsumerConfig {
    /** llm-d's `blockSizeTokens` (default: auto = the trace's engine block size). */
    llmd_canonical_block_size: number;
    /** Dynamo's `kv_block_size` (default: auto = the trace's engine block size). */
    dynamo_kv_block_size: number;
    /** Dynamo: clear every DP rank of the worker on `AllBlocksCleared` (default false). */
    dynamo_clear_all_ranks: boolean;
    /** Ideal consumer: how many orphan events may be held pending at once (default 1024). */
    ideal_pending_limit: number;
}
"#;

/// Parse a consumer name (`llmd`/`llm-d`, `dynamo`, `sglang`, `ideal`).
pub fn parse_consumer(name: &str) -> Result<ConsumerKind, String> {
    ConsumerKind::parse(name).ok_or_else(|| {
        let known: Vec<&str> = ConsumerKind::ALL.iter().map(|c| c.as_str()).collect();
        format!("unknown consumer {name:?} (known: {})", known.join(", "))
    })
}

/// Parse a rule name.
pub fn parse_rule(name: &str) -> Result<Rule, String> {
    name.parse::<Rule>().map_err(|e| e.to_string())
}

impl AnalyzeOptions {
    /// The core configuration these options describe.
    pub fn to_config(&self) -> Result<AnalysisConfig, String> {
        let mut config = AnalysisConfig::default();
        if let Some(names) = &self.consumers {
            let mut kinds = Vec::new();
            for n in names {
                let k = parse_consumer(n)?;
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            config.consumers = kinds;
        }
        if let Some(rules) = &self.rules {
            let chosen = rules
                .iter()
                .map(|r| parse_rule(r))
                .collect::<Result<Vec<_>, _>>()?;
            let mut levels = RuleLevels::default();
            for r in Rule::ALL {
                if !chosen.contains(&r) {
                    levels.set(r, Level::Allow);
                }
            }
            config.rules = levels;
        }
        if let Some(levels) = &self.levels {
            for (rule, level) in &levels.0 {
                let level: Level =
                    level
                        .parse()
                        .map_err(|e: kvscope_core::analysis::RuleError| {
                            format!("rule {rule:?}: {e}")
                        })?;
                config.rules.set(parse_rule(rule)?, level);
            }
        }
        if let Some(cc) = &self.consumer_config {
            let d = ConsumerConfig::default();
            config.consumer_config = ConsumerConfig {
                llmd_canonical_block_size: cc
                    .llmd_canonical_block_size
                    .or(d.llmd_canonical_block_size),
                dynamo_kv_block_size: cc.dynamo_kv_block_size.or(d.dynamo_kv_block_size),
                dynamo_clear_all_ranks: cc
                    .dynamo_clear_all_ranks
                    .unwrap_or(d.dynamo_clear_all_ranks),
                ideal_pending_limit: cc
                    .ideal_pending_limit
                    .map_or(d.ideal_pending_limit, |v| v as usize),
            };
        }
        Ok(config)
    }
}

/// Which violations `nextViolation` / `previousViolation` stop at. Without either key: any
/// finding (every rule, any level, plus every child-before-parent violation).
#[derive(Clone, Debug, Default, Deserialize, Tsify)]
#[serde(default, deny_unknown_fields)]
pub struct ViolationFilterOptions {
    /// Only findings of this rule (any level, including allowed ones).
    #[tsify(type = "RuleName", optional)]
    pub rule: Option<String>,
    /// Only events this consumer loses (with `rule`: both must hold).
    #[tsify(type = "ConsumerName", optional)]
    pub consumer: Option<String>,
}

impl ViolationFilterOptions {
    /// The core filter.
    pub fn to_filter(&self) -> Result<ViolationFilter, String> {
        Ok(ViolationFilter {
            rule: self.rule.as_deref().map(parse_rule).transpose()?,
            consumer: self.consumer.as_deref().map(parse_consumer).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(json: &str) -> Result<AnalysisConfig, String> {
        serde_json::from_str::<AnalyzeOptions>(json)
            .map_err(|e| e.to_string())?
            .to_config()
    }

    #[test]
    fn empty_options_are_the_core_defaults() {
        assert_eq!(opts("{}").unwrap(), AnalysisConfig::default());
    }

    #[test]
    fn consumers_rules_and_levels_are_applied() {
        let c = opts(
            r#"{"consumers": ["llm-d", "ideal", "llmd"], "rules": ["child-before-parent-in-job", "seq-gap"],
                "levels": {"seq-gap": "warn"}, "consumer_config": {"dynamo_kv_block_size": 32}}"#,
        )
        .unwrap();
        assert_eq!(c.consumers, vec![ConsumerKind::Llmd, ConsumerKind::Ideal]);
        assert_eq!(c.rules.level(Rule::ChildBeforeParentInJob), Level::Deny);
        assert_eq!(c.rules.level(Rule::SeqGap), Level::Warn);
        assert_eq!(c.rules.level(Rule::CrossTierReorder), Level::Allow);
        assert_eq!(c.consumer_config.dynamo_kv_block_size, Some(32));
        assert_eq!(c.consumer_config.llmd_canonical_block_size, None);
    }

    #[test]
    fn bad_names_are_errors_naming_them() {
        assert!(opts(r#"{"consumers": ["vllm"]}"#)
            .unwrap_err()
            .contains("\"vllm\""));
        assert!(opts(r#"{"rules": ["no-such-rule"]}"#)
            .unwrap_err()
            .contains("\"no-such-rule\""));
        assert!(opts(r#"{"levels": {"seq-gap": "fatal"}}"#)
            .unwrap_err()
            .contains("\"fatal\""));
        assert!(opts(r#"{"consumer": ["llmd"]}"#)
            .unwrap_err()
            .contains("unknown field `consumer`"));
        let f = ViolationFilterOptions {
            rule: None,
            consumer: Some("x".into()),
        };
        assert!(f
            .to_filter()
            .unwrap_err()
            .contains("unknown consumer \"x\""));
    }
}
