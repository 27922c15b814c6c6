//! `completion.reports` (explicit worker reports) and `num_steps` (a fixed number of
//! generated steps): the built-in late-report scenarios, the errors for reports that cannot
//! happen, and runs cut short.

use kvscope_core::scenario::{builtin, Scenario};
use kvscope_core::sim::simulate;
use kvscope_core::trace::Trace;

/// (step, [(job, chunk)]) per batch.
fn shape(t: &Trace) -> Vec<(u64, Vec<(u64, u32)>)> {
    t.batches()
        .map(|b| {
            let prov = b.provenance.as_ref().expect("provenance");
            let step = prov[0].step.expect("step");
            let jobs = prov
                .iter()
                .map(|p| (p.job_id.expect("job"), p.chunk_idx.expect("chunk")))
                .collect();
            (step, jobs)
        })
        .collect()
}

fn late_report(name: &str) -> Scenario {
    builtin::load(name).expect("built-in").expect("parses")
}

#[test]
fn late_report_puts_the_later_job_first_in_both_orders() {
    let fixed = simulate(&late_report("two-workers-late-report")).unwrap();
    assert_eq!(
        shape(&fixed),
        vec![(
            2,
            vec![
                (1, 4),
                (1, 5),
                (1, 6),
                (1, 7),
                (0, 0),
                (0, 1),
                (0, 2),
                (0, 3)
            ]
        )]
    );
    let cpython = simulate(&late_report("two-workers-late-report-cpython")).unwrap();
    let s = shape(&cpython);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, 2);
    let jobs: Vec<u64> = s[0].1.iter().map(|j| j.0).collect();
    assert_eq!(
        jobs,
        vec![1, 1, 1, 1, 0, 0, 0, 0],
        "merged map [1, 0] in any key order"
    );
    let mut chunks: Vec<u32> = s[0].1.iter().map(|j| j.1).collect();
    assert_ne!(
        chunks,
        (0..8).collect::<Vec<_>>(),
        "set order within the jobs"
    );
    chunks.sort_unstable();
    assert_eq!(chunks, (0..8).collect::<Vec<_>>());
}

#[test]
fn without_the_late_report_each_job_completes_in_its_own_step() {
    let mut s = late_report("two-workers-late-report");
    s.completion
        .reports
        .retain(|r| !(r.job == 0 && r.worker == 1));
    assert_eq!(
        shape(&simulate(&s).unwrap()),
        vec![
            (1, vec![(0, 0), (0, 1), (0, 2), (0, 3)]),
            (2, vec![(1, 4), (1, 5), (1, 6), (1, 7)])
        ]
    );
}

fn with_reports(reports: &str) -> String {
    format!(
        r#"{{"block_size": 4, "completion": {{"timing": "next_step", "workers": 2,
            "worker_lag_probability": 0, "reports": {reports}}},
            "requests": [{{"id": "r0", "prompt_len": 16}}],
            "steps": [{{"schedule": {{"r0": 16}}}}]}}"#
    )
}

#[test]
fn reports_that_cannot_happen_are_errors() {
    for (reports, needle) in [
        (
            r#"[{"job": 0, "worker": 2, "step": 1}]"#,
            "completion.reports[0]: worker 2 is not below completion.workers = 2",
        ),
        (
            r#"[{"job": 0, "worker": 0, "step": 1}, {"job": 0, "worker": 0, "step": 2}]"#,
            "completion.reports[1]: worker 0 reports job 0 twice",
        ),
        (
            r#"[{"job": 0, "worker": 0, "step": 1, "source": "x"}]"#,
            "no engine publishes as source \"x\" dp_rank 0",
        ),
    ] {
        let e = Scenario::from_json(&with_reports(reports)).unwrap_err();
        assert!(e.to_string().contains(needle), "{reports}: {e}");
    }
    for (reports, needle) in [
        (
            r#"[{"job": 0, "worker": 1, "step": 0}]"#,
            "worker 1 reports job 0 at step 0, before it can (the job was created at step 0; \
             the earliest report is step 1)",
        ),
        (
            r#"[{"job": 5, "worker": 1, "step": 3}]"#,
            "worker 1 reports job 5 of engine \"vllm\" dp_rank 0, which never ran",
        ),
    ] {
        let s = Scenario::from_json(&with_reports(reports)).unwrap();
        let e = simulate(&s).unwrap_err().to_string();
        assert!(e.contains(needle), "{reports}: {e}");
    }
    let multi = r#"{"completion": {"reports": [{"job": 0, "worker": 0, "step": 0}]},
        "engines": [{"source": "a", "requests": [{"id": "r", "prompt_len": 16}]}]}"#;
    let e = Scenario::from_json(multi).unwrap_err();
    assert!(e.to_string().contains("must name its source"), "{e}");
}

#[test]
fn num_steps_cuts_the_run_and_in_flight_jobs_publish_nothing() {
    let text = |n: u64| {
        format!(
            r#"{{"block_size": 4, "num_steps": {n}, "completion": {{"timing": "next_step"}},
                "scheduler": {{"max_num_batched_tokens": 8}},
                "requests": [{{"id": "r0", "prompt_len": 32}}]}}"#
        )
    };
    // 8 tokens per step = 2 chunks per job; a job is reported the step after it is built
    let two = simulate(&Scenario::from_json(&text(2)).unwrap()).unwrap();
    assert_eq!(shape(&two), vec![(1, vec![(0, 0), (0, 1)])]);
    let six = simulate(&Scenario::from_json(&text(6)).unwrap()).unwrap();
    let steps: Vec<u64> = shape(&six).iter().map(|b| b.0).collect();
    assert_eq!(
        steps,
        vec![1, 2, 3, 4],
        "four jobs, then nothing left to publish"
    );
    let e = Scenario::from_json(
        r#"{"num_steps": 2, "requests": [{"id": "a", "prompt_len": 4}], "steps": [{}]}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot be combined"), "{e}");
    let e =
        Scenario::from_json(r#"{"num_steps": 200000, "requests": [{"id": "a", "prompt_len": 4}]}"#)
            .unwrap_err();
    assert!(e.to_string().contains("above max_steps = 100000"), "{e}");
}
