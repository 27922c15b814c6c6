//! The page and `kvscope check --json` list the same findings.

use super::*;

/// A fixture of `tests/fixtures/agreement/` by name.
fn agreement_trace(file: &str) -> Vec<u8> {
    macro_rules! fixtures {
        ($($f:literal),*) => {
            match file {
                $($f => include_bytes!(concat!("../../../tests/fixtures/agreement/", $f)).to_vec(),)*
                other => panic!("no agreement fixture {other}"),
            }
        };
    }
    fixtures!(
        "two-groups-fixed.msgpack",
        "two-groups-cpython.msgpack",
        "one-job-cpython.msgpack",
        "two-jobs-fixed.msgpack",
        "two-jobs-cpython.msgpack",
        "two-jobs-gpu-fixed.msgpack",
        "two-jobs-gpu-cpython.msgpack",
        "two-jobs-fixed-provenance.jsonl",
        "routing-preconditions.jsonl",
        "cascade-one-job-cpython.msgpack",
        "cascade-two-jobs-fixed.msgpack",
        "cascade-two-jobs-cpython.msgpack"
    )
}

/// The page and `kvscope check --json` agree: every case of
/// `tests/fixtures/agreement/expected.txt` (written from `check --json` and checked against it
/// by `cli/tests/agreement.rs`) loaded in the page with the same worker count lists the same
/// findings (rule, event, related event, class, level, message). A case that repeats the previous trace
/// with another worker count changes it through the page's workers setting (the analysis runs
/// again), as a user would.
#[wasm_bindgen_test]
async fn page_agrees_with_check() {
    use std::sync::Arc;
    let expected = include_str!("../../../tests/fixtures/agreement/expected.txt");
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! {
            <kvscope_web::controls::StepBar/>
            <kvscope_web::panels::Violations/>
        }
    });
    sleep(10).await;
    let mut last_file = String::new();
    let mut cases = 0;
    for block in expected.split("== ").filter(|b| !b.is_empty()) {
        let (head, rows) = block.split_once('\n').expect("a case header");
        let (file, workers) = head.split_once(" workers=").expect("workers=");
        let workers = workers.parse::<u32>().ok();
        let before = st.model.get_untracked();
        if file == last_file {
            let select: web_sys::HtmlSelectElement = el(&root, "workers")
                .expect("the workers setting")
                .unchecked_into();
            select.set_value(&workers.map_or(String::new(), |w| w.to_string()));
            select
                .dispatch_event(&web_sys::Event::new("change").unwrap())
                .unwrap();
        } else {
            st.workers.set(workers);
            load::load_bytes(
                st,
                file.into(),
                agreement_trace(file),
                TraceOrigin::Local,
                None,
            );
        }
        last_file = file.to_owned();
        let mut done = false;
        for _ in 0..500 {
            done = st.model.with_untracked(|m| {
                m.as_ref().is_some_and(|m| {
                    m.is_analysed() && before.as_ref().is_none_or(|b| !Arc::ptr_eq(b, m))
                })
            });
            if done {
                break;
            }
            sleep(10).await;
        }
        assert!(done, "{head}: the analysis never finished");
        assert_eq!(st.workers.get_untracked(), workers, "{head}");
        let got: String = st.model.with_untracked(|m| {
            m.as_ref()
                .map(|m| {
                    m.violations()
                        .iter()
                        .filter(|v| v.level != "allow")
                        .map(|v| {
                            format!(
                                "{} {} {} {} {}: {}\n",
                                v.rule,
                                v.event,
                                v.related.map_or("-".into(), |r| r.to_string()),
                                v.class.unwrap_or("-"),
                                v.level,
                                m.message(v)
                            )
                        })
                        .collect()
                })
                .unwrap_or_default()
        });
        assert_eq!(got, rows, "{head}: the page disagrees with check --json");
        // The violation list renders them: the rules that mark an event's order by default,
        // the others (the routing preconditions) once the rule filter picks them.
        for r in rows.lines().filter(|r| !r.starts_with("consumer-loss")) {
            let rule = r.split(' ').next().unwrap_or_default();
            let marks_order = rule
                .parse::<kvscope_core::analysis::Rule>()
                .is_ok_and(|r| r.marks_order());
            st.rule.set((!marks_order).then(|| rule.to_owned()));
            sleep(10).await;
            let shown = text(&root, "violations");
            assert!(
                shown.contains(rule),
                "{head}: {rule} not listed in {shown:?}"
            );
        }
        st.rule.set(None);
        cases += 1;
    }
    assert_eq!(cases, 14);
}
