//! Inputs kvscope refuses with a located error (issue 20: nothing kvscope writes that it cannot
//! read back): non-finite floats (`ts`, values in `extra_keys`), a `raw` payload that is not
//! exactly the line's own batch. Every file in `tests/fixtures/wire/refused/` must have its
//! exact error in that directory's `expected.txt` (`file<TAB>error`), so a new fixture is never
//! silently skipped.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kvscope_core::wire::read_trace;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/wire/refused")
}

#[test]
fn every_refused_fixture_fails_with_its_located_error() {
    let expected: BTreeMap<String, String> = std::fs::read_to_string(dir().join("expected.txt"))
        .expect("expected.txt")
        .lines()
        .map(|l| {
            let (file, error) = l.split_once('\t').expect("file<TAB>error");
            (file.to_owned(), error.to_owned())
        })
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("fixture dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .into_string()
                .expect("UTF-8 name")
        })
        .filter(|n| n != "expected.txt")
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        let bytes = std::fs::read(dir().join(file)).expect("fixture");
        let got = match read_trace(&bytes, "refused") {
            Ok(t) => panic!(
                "{file}: read as {} record(s), expected an error",
                t.records.len()
            ),
            Err(e) => e.to_string(),
        };
        let want = expected
            .get(file)
            .unwrap_or_else(|| panic!("{file}: no line in expected.txt (got: {got})"));
        assert_eq!(&got, want, "{file}");
    }
    let unused: Vec<_> = expected.keys().filter(|k| !files.contains(k)).collect();
    assert!(
        unused.is_empty(),
        "expected.txt names missing files: {unused:?}"
    );
}
