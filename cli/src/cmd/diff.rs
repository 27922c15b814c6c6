//! `kvscope diff`: compare two traces (e.g. one scenario in legacy and fixed order): the core's
//! comparison (events aligned by block, what differs, why each count differs), the same
//! comparison the debugger's Compare dialog shows. Each trace is read and analysed record by
//! record into a compact side of the comparison (`SideBuilder`, as `check` streams), one trace
//! after the other; only the differing events printed are rendered.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use kvscope_core::analysis::compare::{compare_sides, Side, SideBuilder, TraceComparison};
use kvscope_core::analysis::AnalysisConfig;
use kvscope_core::text::Thousands;

use super::check::{config, open, ModelArgs};
use crate::out;
use crate::report::{self, MaxFindings};

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
    /// Print the comparison as JSON (every violation and differing event).
    #[arg(long)]
    pub json: bool,
    /// Violations on one side and differing events listed per list in the text report: a
    /// number, or `all` (the counts above them are always complete).
    #[arg(long, value_name = "N|all", default_value = "20", value_parser = report::parse_max_findings)]
    pub max_findings: MaxFindings,
    #[command(flatten)]
    pub models: ModelArgs,
}

/// "... N more" under a list cut at `shown` of `total`.
fn more(out: &mut String, shown: usize, total: usize) {
    if total > shown {
        out.push_str(&format!(
            "  ... {} more (see --json or --max-findings all)\n",
            Thousands(total - shown)
        ));
    }
}

fn render(c: &TraceComparison, a: &str, b: &str, max: MaxFindings) -> String {
    let listed = |total: usize| max.0.map_or(total, |m| m.min(total));
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
        for v in list.iter().take(listed(list.len())) {
            out.push_str(&format!(
                "  {sign} {} block {} parent {}\n",
                v.rule.name(),
                v.block,
                v.parent
            ));
        }
        more(&mut out, listed(list.len()), list.len());
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
    if c.differing() > 0 {
        out.push_str(&format!(
            "\nevents that differ ({} of {}; A | B):\n",
            listed(c.differing()),
            c.differing()
        ));
        let side = |i: Option<usize>, batch: Option<u32>| match (i, batch) {
            (Some(i), Some(b)) => format!("#{i} batch {b}"),
            (Some(i), None) => format!("#{i}"),
            _ => "-".to_string(),
        };
        for p in c.events().take(listed(c.differing())) {
            out.push_str(&format!(
                "  {:<16} | {:<16} {}: {}\n",
                side(p.a, p.batch_a),
                side(p.b, p.batch_b),
                p.what,
                p.changes()
            ));
        }
        more(&mut out, listed(c.differing()), c.differing());
    }
    out
}

/// Read and analyse one trace into its side of the comparison; any read failure is bad input,
/// found at the first bad record.
fn side(path: &Path, config: &AnalysisConfig) -> anyhow::Result<Side> {
    let mut input = open(path)?;
    let mut side = SideBuilder::new(config);
    while let Some(rec) = input.next_record()? {
        side.push(&rec);
    }
    Ok(side.finish())
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args.consumers, &[], &args.models)?;
    // One trace after the other: the first's models are gone before the second is read.
    let a = side(&args.trace_a, &config)?;
    let b = side(&args.trace_b, &config)?;
    let d = compare_sides(a, b);
    if args.json {
        // Written as rendered (a comparison can list an event per event of the traces).
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        serde_json::to_writer_pretty(&mut w, &d).map_err(|e| match e.io_error_kind() {
            Some(kind) => anyhow::Error::new(std::io::Error::from(kind)).context("writing stdout"),
            None => anyhow::Error::new(e).context("serialising the comparison"),
        })?;
        w.write_all(b"\n").context("writing stdout")?;
        w.flush().context("writing stdout")
    } else {
        let text = render(
            &d,
            &args.trace_a.display().to_string(),
            &args.trace_b.display().to_string(),
            args.max_findings,
        );
        out::stdout(text.as_bytes())
    }
}
