//! `kvscope check`: lint a trace's event order and report what each router model loses.

use std::path::{Path, PathBuf};

use kvscope_core::analysis::{AnalysisConfig, Analyzer, Report};
use kvscope_core::consumers::ConsumerKind;
use kvscope_core::wire::InputFormat;

use crate::exit::{BadInput, Findings};
use crate::input::TraceInput;
use crate::out;
use crate::report::{self, MaxFindings};

/// Arguments of `kvscope check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to check (JSON Lines or msgpack stream; auto-detected).
    pub trace: PathBuf,
    /// Consumer model to run (llmd, dynamo, smg, sglang, ideal); repeatable; default all.
    #[arg(long = "consumer", value_name = "NAME")]
    pub consumers: Vec<String>,
    /// Override a rule's level, e.g. `--rule seq-gap=warn`; repeatable.
    #[arg(long = "rule", value_name = "NAME=allow|warn|deny")]
    pub rules: Vec<String>,
    /// Report format: `text` (a summary, then at most --max-findings findings per rule),
    /// `json` (one compact document with every finding) or `github` (GitHub Actions
    /// `::error` / `::warning` annotations).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Findings shown per rule in the text and github reports: a number, or `all`.
    #[arg(long, value_name = "N|all", default_value = "20", value_parser = report::parse_max_findings)]
    pub max_findings: MaxFindings,
    #[command(flatten)]
    pub models: ModelArgs,
}

/// `check`'s report format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// For a person: summary first, then the first findings of each rule.
    Text,
    /// Compact JSON with every finding.
    Json,
    /// GitHub Actions workflow annotations.
    Github,
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
    /// llm-d subscriber replay, `on` or `off` (default, as llm-d): off, a publisher restart
    /// goes unnoticed and its blocks stay credited; on, it clears the pod.
    #[arg(long, default_value = "off", value_parser = ["on", "off"])]
    pub llmd_replay: String,
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

/// Open a trace for reading record by record (its file name names a msgpack stream's source:
/// [`crate::input::source_name`]).
pub fn open(path: &Path) -> anyhow::Result<TraceInput> {
    let source = crate::input::source_name(path);
    TraceInput::open(path, &path.display().to_string(), &source, false)
}

/// Analyse a trace as it is read, record by record (the trace is never held whole: memory is
/// the models' state and the compact findings), saying which format it was in; any read
/// failure is bad input, found at the first bad record.
pub fn analyze_file(
    path: &Path,
    config: &AnalysisConfig,
    mut sink: Option<&mut kvscope_core::analysis::VerdictSink<'_>>,
) -> anyhow::Result<(Report, InputFormat)> {
    let mut input = open(path)?;
    let mut a = Analyzer::new(config);
    while let Some(rec) = input.next_record()? {
        match sink.as_deref_mut() {
            Some(s) => a.push_with(&rec, s),
            None => a.push(&rec),
        }
    }
    Ok((a.finish(), input.format()))
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
                        "unknown consumer {c:?} (llmd, dynamo, smg, sglang, ideal)"
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
    config.consumer_config.llmd_replay = models.llmd_replay == "on";
    config.consumer_config.ideal_pending_limit = models.ideal_pending;
    config.workers = models.workers;
    Ok(config)
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args.consumers, &args.rules, &args.models)?;
    let (a, input) = analyze_file(&args.trace, &config, None)?;
    let format = if args.json { Format::Json } else { args.format };
    let name = args.trace.display().to_string();
    let msgpack = input == InputFormat::MsgpackStream;
    match format {
        Format::Text => {
            out::stdout(report::text(&a, &name, msgpack, args.max_findings).as_bytes())?
        }
        Format::Json => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            report::write_json(&a, &mut w)?;
        }
        Format::Github => {
            out::stdout(report::github(&a, &name, msgpack, args.max_findings).as_bytes())?
        }
    }
    let deny = a.findings.count_level(kvscope_core::analysis::Level::Deny);
    if deny > 0 {
        return Err(Findings(if format == Format::Json {
            String::new()
        } else {
            format!("{deny} deny-level finding(s)")
        })
        .into());
    }
    Ok(())
}
