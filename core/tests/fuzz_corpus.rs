//! Every fuzz target's body over its committed corpus (`fuzz/corpus/<target>/`, read from the
//! directory), so the corpus keeps passing in `cargo test --workspace` without libFuzzer.
//! The targets themselves run with cargo-fuzz: `docs/fuzzing.md`.

use std::path::PathBuf;

use kvscope_core::fuzzing::TARGETS;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

#[test]
fn every_target_passes_its_corpus() {
    for (name, run) in TARGETS {
        let dir = corpus_dir().join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(
            files.len() >= 10,
            "{name}: only {} corpus files",
            files.len()
        );
        for path in files {
            let data = std::fs::read(&path).expect("corpus file");
            // A panic names the file.
            let result = std::panic::catch_unwind(|| run(&data));
            assert!(result.is_ok(), "{name} fails on {}", path.display());
        }
    }
}

#[test]
fn every_corpus_folder_is_a_target() {
    let mut folders: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("fuzz/corpus")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    folders.sort();
    let mut targets: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    targets.sort();
    assert_eq!(folders, targets);
    for name in targets {
        let target = corpus_dir().join(format!("../fuzz_targets/{name}.rs"));
        assert!(target.is_file(), "{} is missing", target.display());
    }
}
