//! Options objects JavaScript passes in (analysis, violation filters, scenario generation),
//! parsed strictly: an unknown key, consumer, rule or level is an error naming it.
//!
//! Objects are read straight from the JS value ([`read`]: own enumerable keys, `typeof`
//! checks), not through `JSON.stringify` + serde_json, so the package needs no JSON
//! deserializer for its options. Keys whose value is `undefined` and `null` values count as
//! absent (as they did through JSON); messages use serde's wording (`unknown field `x`,
//! expected one of ...`, `invalid type: string "16", expected u32`).

use kvscope_core::analysis::{AnalysisConfig, Level, Rule, RuleLevels};
use kvscope_core::consumers::{ConsumerConfig, ConsumerKind};
use kvscope_core::replay::ViolationFilter;
use kvscope_core::text::Quoted;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::js::{js_error, Pairs};

#[wasm_bindgen(typescript_custom_section)]
const TS_NAMES: &'static str = r#"
/** A consumer (router) model. */
export type ConsumerName = "llmd" | "dynamo" | "smg" | "sglang" | "ideal";
/** A lint rule. */
export type RuleName = "child-before-parent-in-job" | "child-before-parent-across-jobs"
  | "child-before-parent-ambiguous"
  | "cross-tier-reorder" | "cross-source-reorder" | "promotion-reorder" | "unknown-parent"
  | "remove-unknown" | "double-store" | "seq-gap" | "seq-gap-recovered" | "consumer-loss"
  | "undecodable-batch" | "missing-spec-kind" | "hash-seed-mismatch"
  | "router-block-size-mismatch" | "silent-source" | "pod-entry-overflow"
  | "stale-after-restart";
/** The class of a child-before-parent inversion (each has its rule). */
export type ReorderClass = "in-job" | "across-jobs" | "ambiguous" | "cross-tier" | "cross-source"
  | "promotion";
/** What the class of a child-before-parent finding rests on. */
export type Evidence = "provenance" | "gpu-events" | "batch-order" | "separate-batches" | "no-job"
  | "lanes" | "cascade";
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
#[derive(Clone, Debug, Default, Tsify)]
#[serde(default, deny_unknown_fields)]
pub struct AnalyzeOptions {
    /// Consumer models to run (default: all, in the order llmd, dynamo, smg, sglang, ideal).
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
    /// Workers that reported the trace's store jobs (vLLM's world size; default: the trace
    /// header's `meta.world_size`, else 1): inversions within what they allow are ambiguous.
    #[tsify(optional)]
    pub workers: Option<u32>,
}

/// Model settings; unset keys keep kvscope's defaults.
#[derive(Clone, Debug, Default)]
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

impl AnalyzeOptions {
    /// The keys an `AnalyzeOptions` object may have.
    pub const KEYS: [&'static str; 5] =
        ["consumers", "rules", "levels", "consumer_config", "workers"];

    /// Read the options from a JS object (see [`read`]).
    pub fn from_js(value: &JsValue) -> Result<Self, String> {
        let [consumers, rules, levels, consumer_config, workers] =
            read::fields(value, &Self::KEYS)?;
        Ok(AnalyzeOptions {
            consumers: consumers.as_ref().map(read::strings).transpose()?,
            rules: rules.as_ref().map(read::strings).transpose()?,
            levels: levels
                .as_ref()
                .map(|v| read::string_map(v, "an object"))
                .transpose()?,
            consumer_config: consumer_config
                .as_ref()
                .map(ConsumerConfigOptions::from_js)
                .transpose()?,
            workers: workers.as_ref().map(read::u32).transpose()?,
        })
    }
}

impl ConsumerConfigOptions {
    /// The keys a `consumer_config` object may have.
    pub const KEYS: [&'static str; 4] = [
        "llmd_canonical_block_size",
        "dynamo_kv_block_size",
        "dynamo_clear_all_ranks",
        "ideal_pending_limit",
    ];

    /// Read the settings from a JS object.
    pub fn from_js(value: &JsValue) -> Result<Self, String> {
        read::object(value, "struct ConsumerConfigOptions")?;
        let [llmd, dynamo, clear, ideal] = read::fields(value, &Self::KEYS)?;
        Ok(ConsumerConfigOptions {
            llmd_canonical_block_size: llmd.as_ref().map(read::u32).transpose()?,
            dynamo_kv_block_size: dynamo.as_ref().map(read::u32).transpose()?,
            dynamo_clear_all_ranks: clear.as_ref().map(read::boolean).transpose()?,
            ideal_pending_limit: ideal.as_ref().map(read::u32).transpose()?,
        })
    }
}

/// Parse optional options (`undefined` / `null` = defaults) with `from_js`; errors other
/// than a non-object are prefixed `invalid {what}: `. (`from_js` is a function pointer, not
/// a trait: one copy of this function instead of one per options type, 265 B gzip smaller.)
pub fn parse_options<T: Default>(
    value: Option<JsValue>,
    what: &str,
    from_js: fn(&JsValue) -> Result<T, String>,
) -> Result<T, JsValue> {
    let Some(value) = value.filter(|v| !v.is_undefined() && !v.is_null()) else {
        return Ok(T::default());
    };
    if !value.is_object() || js_sys::Array::is_array(&value) {
        return Err(js_error(&format!("invalid {what}: expected an object")));
    }
    from_js(&value).map_err(|m| js_error(&format!("invalid {what}: {m}")))
}

/// Typed reads of JS values with serde-style messages.
pub mod read {
    use kvscope_core::text::Quoted;
    use wasm_bindgen::{JsCast, JsValue};

    use crate::js::{js_string, Pairs};

    /// 2^64 as an f64: integral numbers below it print as integers in messages.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

    /// How a value is described in a type error (serde's `Unexpected` wording; numbers and
    /// bigints printed by JavaScript's `String()`).
    pub fn unexpected(v: &JsValue) -> String {
        if v.is_null() || v.is_undefined() {
            "null".to_owned()
        } else if let Some(b) = v.as_bool() {
            format!("boolean `{b}`")
        } else if let Some(n) = v.as_f64() {
            let kind = if n.fract() == 0.0 && n.abs() < TWO_POW_64 {
                "integer"
            } else {
                "floating point"
            };
            format!("{kind} `{}`", js_string(v))
        } else if let Some(s) = v.as_string() {
            format!("string {}", Quoted(&s))
        } else if js_sys::Array::is_array(v) {
            "sequence".to_owned()
        } else if v.is_bigint() {
            format!("bigint `{}`", js_string(v))
        } else if v.is_object() {
            "map".to_owned()
        } else {
            v.js_typeof().as_string().unwrap_or_default()
        }
    }

    /// `invalid type: {unexpected}, expected {expected}`.
    pub fn invalid_type(v: &JsValue, expected: &str) -> String {
        format!("invalid type: {}, expected {expected}", unexpected(v))
    }

    /// Check that `v` is a (non-array) object.
    pub fn object(v: &JsValue, expected: &str) -> Result<(), String> {
        if v.is_object() && !js_sys::Array::is_array(v) {
            Ok(())
        } else {
            Err(invalid_type(v, expected))
        }
    }

    /// The values of `keys` in object `v` (`None` when absent, `undefined` or `null`); any
    /// other own enumerable key is an error naming it.
    pub fn fields<const N: usize>(
        v: &JsValue,
        keys: &[&str; N],
    ) -> Result<[Option<JsValue>; N], String> {
        let mut out: [Option<JsValue>; N] = std::array::from_fn(|_| None);
        fields_into(v, keys, &mut out)?;
        Ok(out)
    }

    /// [`fields`] into `out` (parallel to `keys`): one copy for every `N`.
    fn fields_into(v: &JsValue, keys: &[&str], out: &mut [Option<JsValue>]) -> Result<(), String> {
        for (key, value) in entries(v)? {
            if value.is_undefined() {
                continue;
            }
            let Some(i) = keys.iter().position(|k| *k == key) else {
                return Err(unknown_field(&key, keys));
            };
            match out.get_mut(i) {
                Some(slot) if !value.is_null() => *slot = Some(value),
                _ => {}
            }
        }
        Ok(())
    }

    /// Own enumerable string-keyed properties of object `v`, in `Object.keys` order.
    fn entries(v: &JsValue) -> Result<Vec<(String, JsValue)>, String> {
        let obj: &js_sys::Object = v.unchecked_ref();
        let keys = js_sys::Object::keys(obj);
        let mut out = Vec::with_capacity(keys.length() as usize);
        for k in keys.iter() {
            let name = k.as_string().unwrap_or_default();
            match js_sys::Reflect::get(obj, &k) {
                Ok(value) => out.push((name, value)),
                Err(_) => return Err(format!("cannot read field `{name}`")),
            }
        }
        Ok(out)
    }

    /// serde's message for an unknown key (`expected `a``, `expected `a` or `b``,
    /// `expected one of `a`, `b`, `c``).
    fn unknown_field(key: &str, keys: &[&str]) -> String {
        let mut m = format!("unknown field `{key}`, expected ");
        if keys.len() > 2 {
            m.push_str("one of ");
        }
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                m.push_str(if keys.len() == 2 { " or " } else { ", " });
            }
            m.push('`');
            m.push_str(k);
            m.push('`');
        }
        m
    }

    /// A string.
    pub fn string(v: &JsValue) -> Result<String, String> {
        v.as_string().ok_or_else(|| invalid_type(v, "a string"))
    }

    /// An array of strings.
    pub fn strings(v: &JsValue) -> Result<Vec<String>, String> {
        if !js_sys::Array::is_array(v) {
            return Err(invalid_type(v, "a sequence"));
        }
        let mut out = Vec::new();
        for e in js_sys::Array::from(v).iter() {
            out.push(string(&e)?);
        }
        Ok(out)
    }

    /// An object whose values are strings, keys in order.
    pub fn string_map(v: &JsValue, expected: &str) -> Result<Pairs<String, String>, String> {
        object(v, expected)?;
        let mut out = Vec::new();
        for (key, value) in entries(v)? {
            if !value.is_undefined() {
                out.push((key, string(&value)?));
            }
        }
        Ok(Pairs(out))
    }

    /// A boolean.
    pub fn boolean(v: &JsValue) -> Result<bool, String> {
        v.as_bool().ok_or_else(|| invalid_type(v, "a boolean"))
    }

    /// An integral number in `0..=max` (`what` names the type in messages).
    fn integer(v: &JsValue, max: f64, what: &str) -> Result<f64, String> {
        let n = v.as_f64().ok_or_else(|| invalid_type(v, what))?;
        if n.fract() != 0.0 || n.abs() >= TWO_POW_64 {
            return Err(invalid_type(v, what));
        }
        if n < 0.0 || n > max {
            return Err(format!("invalid value: {}, expected {what}", unexpected(v)));
        }
        Ok(n)
    }

    /// A `u32` given as a number.
    pub fn u32(v: &JsValue) -> Result<u32, String> {
        integer(v, f64::from(u32::MAX), "u32").map(|n| n as u32)
    }

    /// A `u64` given as a number (exact when integral) or a `bigint` in `0..2^64`.
    pub fn u64(v: &JsValue) -> Result<u64, String> {
        if v.is_bigint() {
            return u64::try_from(v.clone())
                .map_err(|_| format!("invalid value: {}, expected u64", unexpected(v)));
        }
        // Every integral f64 below 2^64 converts exactly.
        integer(v, TWO_POW_64, "u64").map(|n| n as u64)
    }
}

/// Parse a consumer name (`llmd`/`llm-d`, `dynamo`, `smg`, `sglang`, `ideal`).
pub fn parse_consumer(name: &str) -> Result<ConsumerKind, String> {
    ConsumerKind::parse(name).ok_or_else(|| {
        let mut m = format!("unknown consumer {} (known: ", Quoted(name));
        for (i, c) in ConsumerKind::ALL.iter().enumerate() {
            if i > 0 {
                m.push_str(", ");
            }
            m.push_str(c.as_str());
        }
        m.push(')');
        m
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
            let mut chosen = Vec::with_capacity(rules.len());
            for r in rules {
                chosen.push(parse_rule(r)?);
            }
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
                            format!("rule {}: {e}", Quoted(rule))
                        })?;
                config.rules.set(parse_rule(rule)?, level);
            }
        }
        if self.workers == Some(0) {
            return Err("workers: expected a positive integer, got 0".into());
        }
        config.workers = self.workers;
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
                ..d
            };
        }
        Ok(config)
    }
}

/// Which violations `nextViolation` / `previousViolation` stop at. Without either key: any
/// finding (every rule, any level, plus every child-before-parent violation).
#[derive(Clone, Debug, Default, Tsify)]
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
    /// The keys a filter object may have.
    pub const KEYS: [&'static str; 2] = ["rule", "consumer"];

    /// Read the filter from a JS object.
    pub fn from_js(value: &JsValue) -> Result<Self, String> {
        let [rule, consumer] = read::fields(value, &Self::KEYS)?;
        Ok(ViolationFilterOptions {
            rule: rule.as_ref().map(read::string).transpose()?,
            consumer: consumer.as_ref().map(read::string).transpose()?,
        })
    }

    /// The core filter.
    pub fn to_filter(&self) -> Result<ViolationFilter, String> {
        Ok(ViolationFilter {
            rule: self.rule.as_deref().map(parse_rule).transpose()?,
            consumer: self.consumer.as_deref().map(parse_consumer).transpose()?,
            ordering: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn empty_options_are_the_core_defaults() {
        assert_eq!(
            AnalyzeOptions::default().to_config().unwrap(),
            AnalysisConfig::default()
        );
    }

    #[test]
    fn consumers_rules_and_levels_are_applied() {
        let c = AnalyzeOptions {
            consumers: strings(&["llm-d", "ideal", "llmd"]),
            rules: strings(&["child-before-parent-in-job", "seq-gap"]),
            levels: Some(Pairs(vec![("seq-gap".into(), "warn".into())])),
            consumer_config: Some(ConsumerConfigOptions {
                dynamo_kv_block_size: Some(32),
                ..Default::default()
            }),
            workers: Some(2),
        }
        .to_config()
        .unwrap();
        assert_eq!(c.workers, Some(2));
        assert_eq!(c.consumers, vec![ConsumerKind::Llmd, ConsumerKind::Ideal]);
        assert_eq!(c.rules.level(Rule::ChildBeforeParentInJob), Level::Deny);
        assert_eq!(c.rules.level(Rule::SeqGap), Level::Warn);
        assert_eq!(c.rules.level(Rule::CrossTierReorder), Level::Allow);
        assert_eq!(c.consumer_config.dynamo_kv_block_size, Some(32));
        assert_eq!(c.consumer_config.llmd_canonical_block_size, None);
    }

    #[test]
    fn bad_names_are_errors_naming_them() {
        let bad = |o: AnalyzeOptions| o.to_config().unwrap_err();
        assert!(bad(AnalyzeOptions {
            consumers: strings(&["vllm"]),
            ..Default::default()
        })
        .contains("\"vllm\""));
        assert!(bad(AnalyzeOptions {
            rules: strings(&["no-such-rule"]),
            ..Default::default()
        })
        .contains("\"no-such-rule\""));
        assert!(bad(AnalyzeOptions {
            levels: Some(Pairs(vec![("seq-gap".into(), "fatal".into())])),
            ..Default::default()
        })
        .contains("\"fatal\""));
        assert!(bad(AnalyzeOptions {
            workers: Some(0),
            ..Default::default()
        })
        .contains("workers"));
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
