//! Helpers shared by the integration tests that read `tests/fixtures/vllm/`.

/// Every upstream fixture: the stems of `tests/fixtures/vllm/*.json`, read from the directory
/// so a new fixture is never silently skipped.
pub fn fixture_names() -> Vec<String> {
    fixture_names_in("", 10)
}

/// The stems of `tests/fixtures/vllm/SUBDIR/*.json`, sorted; at least `min` of them.
pub fn fixture_names_in(subdir: &str, min: usize) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/vllm")
        .join(subdir);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert!(
        names.len() >= min,
        "only {} fixtures in {}",
        names.len(),
        dir.display()
    );
    names
}
