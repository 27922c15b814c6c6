//! Hostile but well-formed scenarios (`tests/fixtures/scenarios/invalid/*.json`, read from the
//! directory): each must be rejected up front with the error in its `.err` file, which names
//! the field and the limit, and simulating it must return that error, never abort or run for
//! minutes. `KVSCOPE_BLESS=1` rewrites the `.err` files.

use kvscope_core::scenario::Scenario;
use kvscope_core::sim::simulate;

#[test]
fn invalid_scenarios_end_in_the_recorded_error() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/scenarios/invalid");
    let bless = std::env::var_os("KVSCOPE_BLESS").is_some();
    let mut n = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let err = Scenario::from_json(&text)
            .expect_err(&format!("{} must be rejected", path.display()))
            .to_string();
        let expected_path = path.with_extension("err");
        if bless {
            std::fs::write(&expected_path, format!("{err}\n")).unwrap();
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        assert_eq!(err, expected.trim_end(), "{}", path.display());
        // the simulator validates too (overrides may change a parsed scenario)
        let raw: Scenario = serde_json::from_str(&text).unwrap();
        let sim_err = simulate(&raw)
            .expect_err("simulate must refuse it")
            .to_string();
        assert!(sim_err.ends_with(&err), "{}: {sim_err}", path.display());
        n += 1;
    }
    assert!(n >= 10, "only {n} fixtures found in {}", dir.display());
}
