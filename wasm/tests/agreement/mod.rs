//! The package agrees with `kvscope check --json` (issue 14, "one source of truth"): every trace
//! of `tests/fixtures/agreement/` loaded through the package's API as JavaScript calls it
//! (`loadTrace(bytes)`, `trace.analyze({workers})`) gives the findings of
//! `tests/fixtures/agreement/expected.txt`, which `cli/tests/agreement.rs` pins to
//! `check --json` and `web/tests/web/agreement.rs` (`page_agrees_with_check`) to the page:
//! per finding the rule, event, related event, class, level and message (the message names the
//! block, its parent and, for group > 0, the KV group), and the package's own `hashes`, `parent` and
//! `group` fields say the same as its message.
//!
//! Node only: the fixture list is read from the directory at run time (Node's `fs`), so a new
//! trace there is never silently skipped: a trace without a case in `expected.txt` fails.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::wasm_bindgen_test;

use super::cases::support::{get, json, len, number, path, string};

#[wasm_bindgen(module = "fs")]
extern "C" {
    #[wasm_bindgen(js_name = readdirSync)]
    fn readdir_sync(path: &str) -> js_sys::Array;
    #[wasm_bindgen(js_name = readFileSync)]
    fn read_file_sync(path: &str) -> js_sys::Uint8Array;
    #[wasm_bindgen(js_name = readFileSync)]
    fn read_text_sync(path: &str, encoding: &str) -> String;
}

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/agreement");

/// The trace files of the directory (msgpack streams and JSON Lines; the `.json` files next
/// to them are the scenarios that made them).
fn traces() -> Vec<String> {
    let mut files: Vec<String> = readdir_sync(DIR)
        .iter()
        .filter_map(|f| f.as_string())
        .filter(|f| f.ends_with(".msgpack") || f.ends_with(".jsonl"))
        .collect();
    files.sort();
    files
}

/// A value that may be absent, as `check --json`'s rows print it (`-` for none).
fn opt(v: &JsValue, render: impl Fn(&JsValue) -> String) -> String {
    if v.is_null() || v.is_undefined() {
        "-".to_owned()
    } else {
        render(v)
    }
}

/// The package's findings as `expected.txt` rows, checking on the way that each finding's
/// structured fields agree with its message.
fn rows(analysis: &JsValue, head: &str) -> String {
    let findings = get(analysis, "findings");
    let mut out = String::new();
    for i in 0..len(&findings) {
        let f = path(&findings, &i.to_string());
        let rule = string(&get(&f, "rule"));
        let message = string(&get(&f, "message"));
        let class = opt(&get(&f, "class"), string);
        out.push_str(&format!(
            "{} {} {} {} {}: {}\n",
            rule,
            number(&get(&f, "event")),
            opt(&get(&f, "related_event"), |v| number(v).to_string()),
            class,
            string(&get(&f, "level")),
            message
        ));
        if class == "-" {
            continue;
        }
        // A child-before-parent finding: block, parent and group as the message names them.
        let block = string(&path(&f, "hashes.0"));
        let parent = string(&get(&f, "parent"));
        let group = number(&get(&f, "group"));
        assert!(
            message.starts_with(&format!(
                "block {block} delivered before its parent {parent}"
            )),
            "{head}: {message:?} vs block {block}, parent {parent}"
        );
        assert_eq!(
            message.contains(" group "),
            group != 0.0,
            "{head}: group {group} vs {message:?}"
        );
        if group != 0.0 {
            assert!(
                message.contains(&format!(" group {group})")),
                "{head}: {message:?}"
            );
        }
        assert!(
            get(&f, "evidence").as_string().is_some(),
            "{head}: no evidence"
        );
    }
    out
}

#[wasm_bindgen_test]
fn the_package_agrees_with_check_on_every_agreement_trace() {
    let expected = read_text_sync(&format!("{DIR}/expected.txt"), "utf8");
    let files = traces();
    assert!(!files.is_empty(), "no traces in {DIR}");
    let mut covered: Vec<&str> = Vec::new();
    for block in expected.split("== ").filter(|b| !b.is_empty()) {
        let (head, want) = block.split_once('\n').expect("a case header");
        let (file, workers) = head.split_once(" workers=").expect("workers=");
        assert!(
            files.iter().any(|f| f == file),
            "{head}: no such trace in {DIR}"
        );
        covered.push(file);
        let bytes = read_file_sync(&format!("{DIR}/{file}"));
        let trace = kvscope_wasm::load_trace(bytes.unchecked_ref(), None)
            .unwrap_or_else(|e| panic!("{head}: loadTrace threw {e:?}"));
        let options = match workers.parse::<u32>() {
            Ok(w) => format!(r#"{{"workers": {w}}}"#),
            Err(_) => "{}".to_owned(),
        };
        let analysis = trace
            .analyze(Some(json(&options)))
            .unwrap_or_else(|e| panic!("{head}: analyze threw {e:?}"));
        assert_eq!(
            rows(&analysis, head),
            want,
            "{head}: the package disagrees with check --json"
        );
        // `has_deny` is check's exit code.
        assert_eq!(
            get(&analysis, "has_deny").as_bool(),
            Some(want.lines().any(|r| r.contains(" deny: "))),
            "{head}"
        );
    }
    for f in &files {
        assert!(
            covered.contains(&f.as_str()),
            "{f}: a trace in {DIR} with no case in expected.txt (add it to cli/tests/agreement.rs's CASES and bless)"
        );
    }
}
