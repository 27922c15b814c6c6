//! `kvscope diff`: compare two traces of the same scenario (e.g. legacy vs fixed order).

use std::path::PathBuf;

use anyhow::Context;
use kvscope_core::analysis::{analyze, compare, TraceDiff};

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

fn render(d: &TraceDiff, a: &str, b: &str) -> String {
    let mut out = format!("kvscope diff\n  A: {a}\n  B: {b}\n\nfindings per rule (A -> B):\n");
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
    out
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args.consumers, &[], &args.models)?;
    let a = analyze(&load_trace(&args.trace_a)?, &config);
    let b = analyze(&load_trace(&args.trace_b)?, &config);
    let d = compare(&a, &b);
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
