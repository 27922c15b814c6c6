//! Built-in named scenarios. Each is also a JSON file under the repository's `scenarios/`
//! folder; the built-in is that file's text (included at compile time), and a test checks
//! that every file there is registered here and parses.

use super::{Scenario, ScenarioError};

/// A built-in scenario: name, one-line description, JSON text.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    /// Name (also the file stem under `scenarios/`).
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// The JSON text.
    pub json: &'static str,
}

macro_rules! builtin {
    ($name:literal, $desc:literal) => {
        Builtin {
            name: $name,
            description: $desc,
            json: include_str!(concat!("../../../scenarios/", $name, ".json")),
        }
    };
}

/// All built-ins, in listing order.
pub const BUILTINS: &[Builtin] = &[
    builtin!(
        "single-request",
        "one 32-token request, 8 one-block CPU chunks in one store job"
    ),
    builtin!(
        "chunked",
        "blocks_per_chunk 2, chunked prefill over several steps"
    ),
    builtin!(
        "shared-prefix",
        "requests sharing a prefix, with LoRA and cache salt"
    ),
    builtin!(
        "lru-eviction",
        "small LRU CPU tier: removals precede the stores reusing slots"
    ),
    builtin!(
        "two-tiers-async",
        "CPU + two STORAGE tiers with seeded async completion"
    ),
    builtin!(
        "multi-worker-reorder",
        "two workers: store jobs of one step completing reversed"
    ),
    builtin!(
        "two-workers-late-report",
        "two workers, worker 1 reports job 0 late: job 1 completes first (fixed order)"
    ),
    builtin!(
        "two-workers-late-report-cpython",
        "the same late report in cpython order (what vLLM 0.28.0-0.33.0 do)"
    ),
    builtin!(
        "two-pods-dp",
        "two pods, one with two DP ranks, interleaved"
    ),
    builtin!(
        "fs-cascade-out-of-order",
        "CPU + FS tier: lookups wait on the FS check, FS jobs finish 2, 0, 1 (vLLM 0.28.0)"
    ),
    builtin!(
        "fs-promotion-evicts",
        "CPU + FS tier: promotions from FS evict CPU chunks one key at a time (vLLM 0.28.0)"
    ),
    builtin!(
        "fs-preloaded",
        "FS directory filled by another instance: promotion, then STORAGE parents never announced"
    ),
    builtin!(
        "legacy-vs-fixed",
        "demo: two requests in cpython order (vLLM 0.28.0-0.33.0); --order fixed shows prefix order (the fix, vLLM 0.34.0)"
    ),
];

/// Look a built-in up by name.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Parse a built-in by name (`None` if unknown).
pub fn load(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    find(name).map(|b| Scenario::from_json(b.json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_names_itself() {
        for b in BUILTINS {
            let s = Scenario::from_json(b.json).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(s.name, b.name);
        }
    }

    #[test]
    fn scenario_files_and_builtins_agree() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
        let mut stems = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let b =
                find(&stem).unwrap_or_else(|| panic!("scenarios/{stem}.json is not a built-in"));
            assert_eq!(
                Scenario::from_json(&text).unwrap(),
                Scenario::from_json(b.json).unwrap(),
                "{stem}"
            );
            stems.push(stem);
        }
        for b in BUILTINS {
            assert!(
                stems.iter().any(|s| s == b.name),
                "built-in {} has no file",
                b.name
            );
        }
    }
}
