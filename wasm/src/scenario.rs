//! Scenario generation (cargo feature `sim`, on by default): run a built-in or custom
//! scenario through kvscope's vLLM-faithful offload simulator with a chosen key order and
//! seeds (core: `kvscope_core::scenario`, `kvscope_core::sim`).

use kvscope_core::scenario::{builtin, Overrides, Scenario};
use kvscope_core::text::Quoted;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::js::{js_error, Obj, ToJs};
use crate::options::{parse_options, read};
use crate::trace::Trace;

#[wasm_bindgen]
extern "C" {
    /// A `GenerateOptions` object passed by JavaScript.
    #[wasm_bindgen(typescript_type = "GenerateOptions")]
    pub type GenerateOptionsArg;
}

/// Overrides applied to the scenario before it runs (the `kvscope generate` flags).
#[derive(Clone, Debug, Default, Tsify)]
#[serde(default, deny_unknown_fields)]
pub struct GenerateOptions {
    /// Key order of a store job at `complete_store`: `"fixed"` (prefix order, the fix),
    /// `"legacy"` (seeded permutation, `seed`), `"cpython"` (CPython 3.11 `set` order under
    /// `python_hash_seed`, default 0). Default: the scenario's own.
    #[tsify(type = "\"fixed\" | \"legacy\" | \"cpython\"", optional)]
    pub order: Option<String>,
    /// Scenario seed (also the legacy permutation seed).
    #[tsify(type = "number | bigint", optional)]
    pub seed: Option<u64>,
    /// `PYTHONHASHSEED` for the `cpython` order.
    #[tsify(optional)]
    pub python_hash_seed: Option<u32>,
    /// Seed string of vLLM's `NONE_HASH` (default `"vllm-none-hash"`).
    #[tsify(optional)]
    pub none_hash_seed: Option<String>,
    /// Wire hash format: `"int"` (vLLM's default) or `"bytes"` (raw 32-byte digests).
    #[tsify(type = "\"int\" | \"bytes\"", optional)]
    pub hash_format: Option<String>,
}

impl GenerateOptions {
    /// The keys a `GenerateOptions` object may have.
    pub const KEYS: [&'static str; 5] = [
        "order",
        "seed",
        "python_hash_seed",
        "none_hash_seed",
        "hash_format",
    ];

    /// Read the options from a JS object (`seed` may be a number or a `bigint`).
    pub fn from_js(value: &JsValue) -> Result<Self, String> {
        let [order, seed, python_hash_seed, none_hash_seed, hash_format] =
            read::fields(value, &Self::KEYS)?;
        Ok(GenerateOptions {
            order: order.as_ref().map(read::string).transpose()?,
            seed: seed
                .as_ref()
                .map(|v| read::u64(v).map_err(|e| format!("seed must be in 0..2^64: {e}")))
                .transpose()?,
            python_hash_seed: python_hash_seed.as_ref().map(read::u32).transpose()?,
            none_hash_seed: none_hash_seed.as_ref().map(read::string).transpose()?,
            hash_format: hash_format.as_ref().map(read::string).transpose()?,
        })
    }

    /// Apply the overrides, exactly like `kvscope generate`'s flags.
    pub fn apply(&self, s: &mut Scenario) -> Result<(), String> {
        s.apply_overrides(&Overrides {
            seed: self.seed,
            order: self.order.as_deref().map(str::parse).transpose()?,
            python_hash_seed: self.python_hash_seed,
            none_hash_seed: self.none_hash_seed.clone(),
            hash_format: self.hash_format.as_deref().map(str::parse).transpose()?,
        });
        Ok(())
    }
}

/// A built-in scenario's name and one-line description.
#[derive(Debug, Tsify)]
pub struct ScenarioInfo {
    /// Name (pass it to `generate`).
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
}

impl ToJs for ScenarioInfo {
    fn to_js(&self) -> JsValue {
        let ScenarioInfo { name, description } = self;
        let o = Obj::new();
        o.str("name", name).str("description", description);
        o.done()
    }
}

/// Resolve a scenario given as a built-in name or as scenario JSON text.
pub fn scenario_from_text(spec: &str) -> Result<Scenario, String> {
    if spec.trim_start().starts_with('{') {
        return Scenario::from_json(spec).map_err(|e| format!("scenario: {e}"));
    }
    match builtin::load(spec) {
        Some(res) => res.map_err(|e| format!("built-in {spec}: {e}")),
        None => {
            let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
            Err(format!(
                "unknown built-in scenario {} (built-ins: {})",
                Quoted(spec),
                names.join(", ")
            ))
        }
    }
}

/// Generate a trace from a scenario and the overrides (pure Rust side of `generate`).
pub fn generate_trace(spec: &str, options: &GenerateOptions) -> Result<Trace, String> {
    let mut scenario = scenario_from_text(spec)?;
    options.apply(&mut scenario)?;
    kvscope_core::sim::simulate(&scenario)
        .map(Trace::from_core)
        .map_err(|e| e.to_string())
}

/// The built-in scenarios, in listing order.
#[wasm_bindgen(js_name = listScenarios, unchecked_return_type = "ScenarioInfo[]")]
pub fn list_scenarios() -> Result<JsValue, JsValue> {
    let all: Vec<ScenarioInfo> = builtin::BUILTINS
        .iter()
        .map(|b| ScenarioInfo {
            name: b.name,
            description: b.description,
        })
        .collect();
    Ok(all.to_js())
}

/// A built-in scenario's JSON text (a starting point for a custom scenario).
#[wasm_bindgen(js_name = builtinScenario)]
pub fn builtin_scenario(name: &str) -> Result<String, JsValue> {
    builtin::find(name)
        .map(|b| b.json.to_owned())
        .ok_or_else(|| js_error(&format!("unknown built-in scenario {}", Quoted(name))))
}

/// Run a scenario through the simulator and return the trace (with a header record and
/// per-event provenance). `scenario` is a built-in name, scenario JSON text, or a scenario
/// object (the JSON format of `docs/scenario-format.md`). Throws an `Error` naming the
/// problem (with line and column for JSON text).
#[wasm_bindgen]
pub fn generate(
    #[wasm_bindgen(unchecked_param_type = "string | object")] scenario: JsValue,
    options: Option<GenerateOptionsArg>,
) -> Result<Trace, JsValue> {
    let options = parse_options(
        options.map(JsValue::from),
        "generate options",
        GenerateOptions::from_js,
    )?;
    let spec = match scenario.as_string() {
        Some(s) => s,
        None if scenario.is_object() => js_sys::JSON::stringify(&scenario)
            .map(String::from)
            .map_err(|_| js_error("scenario object cannot be converted to JSON"))?,
        None => {
            return Err(js_error(
                "scenario must be a built-in name, JSON text or an object",
            ))
        }
    };
    generate_trace(&spec, &options).map_err(|m| js_error(&m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvscope_core::order::OrderMode;

    #[test]
    fn orders_and_seeds_override_like_the_cli() {
        let mut s = scenario_from_text("single-request").unwrap();
        let o = GenerateOptions {
            order: Some("legacy".into()),
            seed: Some(7),
            ..Default::default()
        };
        o.apply(&mut s).unwrap();
        assert_eq!(s.order, OrderMode::Legacy { seed: 7 });
        let o = GenerateOptions {
            order: Some("cpython".into()),
            python_hash_seed: Some(3),
            ..Default::default()
        };
        o.apply(&mut s).unwrap();
        assert_eq!(
            s.order,
            OrderMode::CPython {
                python_hash_seed: 3
            }
        );
        let bad = GenerateOptions {
            order: Some("random".into()),
            ..Default::default()
        };
        assert!(bad.apply(&mut s).unwrap_err().contains("\"random\""));
    }

    #[test]
    fn unknown_builtins_and_bad_json_are_named() {
        assert!(scenario_from_text("nope").unwrap_err().contains("\"nope\""));
        let err = scenario_from_text("{\n \"name\": 3\n}").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn generation_is_deterministic_and_order_changes_the_trace() {
        let fixed = GenerateOptions {
            order: Some("fixed".into()),
            ..Default::default()
        };
        let cpy = GenerateOptions {
            order: Some("cpython".into()),
            ..Default::default()
        };
        let a = generate_trace("legacy-vs-fixed", &fixed).unwrap();
        let b = generate_trace("legacy-vs-fixed", &fixed).unwrap();
        let c = generate_trace("legacy-vs-fixed", &cpy).unwrap();
        assert_eq!(a.core(), b.core());
        assert!(a.core().event_count() > 0);
        assert_ne!(a.core(), c.core());
    }
}
