//! `kvscope check`: lint a trace's event order and report what each router model loses.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kvscope_core::analysis::{analyze, Analysis, AnalysisConfig, Finding, Level, Rule};
use kvscope_core::consumers::ConsumerKind;
use kvscope_core::trace::Trace;

use crate::exit::{BadInput, Findings};

/// Arguments of `kvscope check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to check (JSON Lines or msgpack stream; auto-detected).
    pub trace: PathBuf,
    /// Consumer model to run (llmd, dynamo, sglang, ideal); repeatable; default all.
    #[arg(long = "consumer", value_name = "NAME")]
    pub consumers: Vec<String>,
    /// Override a rule's level, e.g. `--rule seq-gap=warn`; repeatable.
    #[arg(long = "rule", value_name = "NAME=allow|warn|deny")]
    pub rules: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub models: ModelArgs,
}

/// A router block size: `Some(n)`, or `None` = `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockSizeArg(pub Option<u32>);

fn parse_block_size(s: &str) -> Result<BlockSizeArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(BlockSizeArg(None));
    }
    match s.parse::<u32>() {
        Ok(n) if n > 0 => Ok(BlockSizeArg(Some(n))),
        _ => Err(format!("{s:?} is not a positive block size or `auto`")),
    }
}

/// Consumer model options shared by `check`, `verdicts` and `diff`.
#[derive(clap::Args, Debug, Default)]
pub struct ModelArgs {
    /// llm-d canonical block size (`blockSizeTokens`): a number, or `auto` (default) = the
    /// engine block size the trace shows (per source).
    #[arg(long, default_value = "auto", value_parser = parse_block_size)]
    pub llmd_block_size: BlockSizeArg,
    /// Dynamo `kv_block_size`: a number, or `auto` (default) = the engine block size the
    /// trace shows (per source).
    #[arg(long, default_value = "auto", value_parser = parse_block_size)]
    pub dynamo_block_size: BlockSizeArg,
    /// Dynamo: AllBlocksCleared clears every DP rank of the worker.
    #[arg(long)]
    pub dynamo_clear_all_ranks: bool,
    /// Ideal consumer: pending buffer size (events).
    #[arg(long, default_value_t = 1024)]
    pub ideal_pending: usize,
    /// Workers that reported the trace's store jobs (vLLM's world size): with N workers, jobs
    /// finishing in one step may come out of order, so inversions within what N allows are
    /// `child-before-parent-ambiguous`, not in-job. Default: the trace header's
    /// `meta.world_size`, else 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
}

/// Read and decode a trace; any failure is bad input (exit 2).
pub fn load_trace(path: &Path) -> anyhow::Result<Trace> {
    let bytes = std::fs::read(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    let source = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    kvscope_core::wire::read_trace(&bytes, &source)
        .map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
}

/// Build the analysis configuration from the command line.
pub fn config(
    consumers: &[String],
    rules: &[String],
    models: &ModelArgs,
) -> anyhow::Result<AnalysisConfig> {
    let mut config = AnalysisConfig::default();
    if !consumers.is_empty() {
        config.consumers = consumers
            .iter()
            .map(|c| {
                ConsumerKind::parse(c).ok_or_else(|| {
                    BadInput(format!(
                        "unknown consumer {c:?} (llmd, dynamo, sglang, ideal)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        config.consumers.dedup();
    }
    for r in rules {
        config
            .rules
            .apply_override(r)
            .map_err(|e| BadInput(format!("--rule: {e}")))?;
    }
    config.consumer_config.llmd_canonical_block_size = models.llmd_block_size.0;
    config.consumer_config.dynamo_kv_block_size = models.dynamo_block_size.0;
    config.consumer_config.dynamo_clear_all_ranks = models.dynamo_clear_all_ranks;
    config.consumer_config.ideal_pending_limit = models.ideal_pending;
    config.workers = models.workers;
    Ok(config)
}

fn level_word(l: Level) -> &'static str {
    match l {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "allowed",
    }
}

fn render_finding(f: &Finding) -> String {
    let mut s = format!(
        "{}[{}]: line {}, event {} (index {} in batch), source {:?}: {}\n",
        level_word(f.level),
        f.rule,
        f.line,
        f.event,
        f.index,
        f.source,
        f.message
    );
    if !f.hashes.is_empty() || f.parent.is_some() {
        let hashes: Vec<String> = f.hashes.iter().map(u64::to_string).collect();
        s.push_str(&format!("    hashes: [{}]", hashes.join(", ")));
        if let Some(p) = f.parent {
            s.push_str(&format!("  parent: {p}"));
        }
        s.push('\n');
    }
    if !f.verdicts.is_empty() {
        let parts: Vec<String> = f
            .verdicts
            .iter()
            .map(|(c, v)| {
                let casc = f.cascade.get(c).copied().unwrap_or(0);
                if casc > 0 {
                    format!("{c}: {} (cascade {casc})", v.as_str())
                } else {
                    format!("{c}: {}", v.as_str())
                }
            })
            .collect();
        s.push_str(&format!("    consumers: {}\n", parts.join(", ")));
    }
    s
}

/// The human-readable report.
pub fn render(a: &Analysis, name: &str) -> String {
    let mut out = format!(
        "kvscope check {name}: {} events, {} sources, {} jobs\n\n",
        a.event_count(),
        a.index.sources.len(),
        a.index.jobs.len()
    );
    for f in &a.findings {
        out.push_str(&render_finding(f));
    }
    if !a.findings.is_empty() {
        out.push('\n');
    }
    out.push_str("consumer losses:\n");
    for l in &a.losses {
        out.push_str(&format!(
            "  {:<7} {} event(s), {} block(s) lost; {} unreachable prefix(es){}\n",
            l.consumer,
            l.events_lost,
            l.blocks_lost,
            l.unreachable_prefixes.len(),
            if l.pending_at_end > 0 {
                format!("; {} event(s) still pending", l.pending_at_end)
            } else {
                String::new()
            }
        ));
    }
    let deny = a.findings.iter().filter(|f| f.level == Level::Deny).count();
    let warn = a.findings.iter().filter(|f| f.level == Level::Warn).count();
    out.push_str(&format!("\n{deny} error(s), {warn} warning(s)\n"));
    out
}

/// The JSON report.
pub fn json(a: &Analysis) -> serde_json::Value {
    let rules: Vec<serde_json::Value> = Rule::ALL
        .iter()
        .map(|r| serde_json::json!({"rule": r.name(), "level": a.config.rules.level(*r).name(), "explanation": r.explain()}))
        .collect();
    serde_json::json!({
        "events": a.event_count(),
        "findings": a.findings,
        "losses": a.losses,
        "rules": rules,
        "deny": a.findings.iter().filter(|f| f.level == Level::Deny).count(),
        "warn": a.findings.iter().filter(|f| f.level == Level::Warn).count(),
    })
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args.consumers, &args.rules, &args.models)?;
    let trace = load_trace(&args.trace)?;
    let a = analyze(&trace, &config);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json(&a)).context("serialising the report")?
        );
    } else {
        print!("{}", render(&a, &args.trace.display().to_string()));
    }
    let deny = a.findings.iter().filter(|f| f.level == Level::Deny).count();
    if deny > 0 {
        return Err(Findings(if args.json {
            String::new()
        } else {
            format!("{deny} deny-level finding(s)")
        })
        .into());
    }
    Ok(())
}
