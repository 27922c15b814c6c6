//! `kvscope diff`: compare two traces (e.g. one scenario in legacy and fixed order): the core's
//! `compare_traces` (events aligned by block, what differs, why each count differs), the same
//! comparison the debugger's Compare dialog shows.

use std::path::PathBuf;

use anyhow::Context;
use kvscope_core::analysis::{analyze, compare_traces, TraceComparison};

use super::check::{config, load_trace, ModelArgs};
use crate::out;

/// Arguments of `kvscope diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace A (e.g. the legacy order).
    pub trace_a: PathBuf,
    /// Trace B (e.g. the fixed order).
    pub trace_b: PathBuf,
    /// Consumer model to run; repeatable; default all.
    #[arg(long = "consumer", value_name = "NAME")]
    pub consumers: Vec<String>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub models: ModelArgs,
}

/// Differing events listed in the text report (all of them are in `--json`).
const LISTED: usize = 20;

fn render(c: &TraceComparison, a: &str, b: &str) -> String {
    let d = &c.diff;
    let mut out = format!(
        "kvscope diff\n  A: {a}\n  B: {b}\n\nevents: {} in A, {} in B; {} aligned by block ({} only in A, {} only in B), {} moved\n",
        c.events_a, c.events_b, c.aligned, c.only_a, c.only_b, c.moved
    );
    if !c.explanations.is_empty() {
        out.push_str("\nwhy the counts differ:\n");
        for e in &c.explanations {
            out.push_str(&format!("  {}\n", e.text));
        }
    }
    out.push_str("\nfindings per rule (A -> B):\n");
    for r in d.rules.iter().filter(|r| r.a + r.b > 0) {
        out.push_str(&format!(
            "  {:<34} {:>6} -> {:<6}\n",
            r.rule.name(),
            r.a,
            r.b
        ));
    }
    out.push_str(&format!(
        "\nviolations only in A (disappear): {}\nviolations only in B (appear):    {}\n",
        d.disappeared.len(),
        d.appeared.len()
    ));
    for (sign, list) in [('-', &d.disappeared), ('+', &d.appeared)] {
        for v in list.iter().take(20) {
            out.push_str(&format!(
                "  {sign} {} block {} parent {}\n",
                v.rule.name(),
                v.block,
                v.parent
            ));
        }
    }
    out.push_str("\nconsumer losses (blocks, A -> B):\n");
    for l in &d.losses {
        out.push_str(&format!(
            "  {:<7} {:>6} -> {:<6} ({} no longer lost, {} newly lost)\n",
            l.consumer,
            l.a_blocks_lost,
            l.b_blocks_lost,
            l.disappeared.len(),
            l.appeared.len()
        ));
    }
    if !c.events.is_empty() {
        out.push_str(&format!(
            "\nevents that differ ({} of {}; A | B):\n",
            c.events.len().min(LISTED),
            c.events.len()
        ));
        let side = |i: Option<usize>, batch: Option<u32>| match (i, batch) {
            (Some(i), Some(b)) => format!("#{i} batch {b}"),
            (Some(i), None) => format!("#{i}"),
            _ => "-".to_string(),
        };
        for p in c.events.iter().take(LISTED) {
            out.push_str(&format!(
                "  {:<16} | {:<16} {}: {}\n",
                side(p.a, p.batch_a),
                side(p.b, p.batch_b),
                p.what,
                p.changes()
            ));
        }
    }
    out
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args.consumers, &[], &args.models)?;
    let (ta, tb) = (load_trace(&args.trace_a)?, load_trace(&args.trace_b)?);
    let d = compare_traces(&ta, &analyze(&ta, &config), &tb, &analyze(&tb, &config));
    let text = if args.json {
        let mut t = serde_json::to_string_pretty(&d).context("serialising the comparison")?;
        t.push('\n');
        t
    } else {
        render(
            &d,
            &args.trace_a.display().to_string(),
            &args.trace_b.display().to_string(),
        )
    };
    out::stdout(text.as_bytes())
}
