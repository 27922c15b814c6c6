//! `kvscope generate`: run a scenario (file or built-in) through the vLLM-faithful offload
//! simulation and write the trace (JSON Lines with a header record, or a msgpack stream of
//! the wire batches).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use kvscope_core::scenario::{builtin, HashFormat, OrderChoice, Overrides, Scenario};
use kvscope_core::sim;
use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::{jsonl, msgpack, EventEncoding};

use crate::exit::BadInput;

/// Key order of a store job at `complete_store`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderArg {
    /// Prefix order, de-duplicated: the proposed key-order fix (upstream vLLM has it from
    /// 0.34.0; 0.28.0-0.33.0 keep a set).
    Fixed,
    /// A seeded stand-in for set order (a permutation per job, `--seed`; not CPython's).
    Legacy,
    /// What vLLM 0.28.0-0.33.0 do (a set): CPython 3.11's `set(set(keys))` order under
    /// `--python-hash-seed`.
    Cpython,
}

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    /// kvscope JSON Lines trace (header + one batch per line, with provenance).
    Jsonl,
    /// Concatenated msgpack `KVEventBatch` payloads, byte-identical to vLLM's encoder.
    Msgpack,
}

/// Wire hash format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashArg {
    /// u64 (last 8 digest bytes, big-endian): vLLM's default.
    Int,
    /// Raw 32-byte digests.
    Bytes,
}

/// Arguments of `kvscope generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario JSON file or built-in scenario name (see `--list`).
    #[arg(required_unless_present = "list")]
    pub scenario: Option<String>,
    /// List the built-in scenarios (name, then a short description) and exit.
    #[arg(long)]
    pub list: bool,
    /// Override the scenario's key order: cpython = what vLLM 0.28.0-0.33.0 do (set order),
    /// fixed = prefix order (the proposed fix; upstream from 0.34.0), legacy = a seeded
    /// stand-in for set order.
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,
    /// Override the scenario seed (also the legacy permutation seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// PYTHONHASHSEED for `--order cpython` (default 0).
    #[arg(long)]
    pub python_hash_seed: Option<u32>,
    /// Seed string of NONE_HASH (default "vllm-none-hash"); independent of the set order.
    #[arg(long)]
    pub none_hash_seed: Option<String>,
    /// Wire hash format.
    #[arg(long, value_enum)]
    pub hash_format: Option<HashArg>,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: FormatArg,
}

/// Load a scenario from a built-in name or a file path; bad content is `BadInput`.
pub fn load_scenario(arg: &str) -> anyhow::Result<Scenario> {
    if let Some(res) = builtin::load(arg) {
        return res.map_err(|e| anyhow::Error::new(BadInput(format!("built-in {arg}: {e}"))));
    }
    let path = PathBuf::from(arg);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
            return Err(BadInput(format!(
                "{arg}: no such file and not a built-in scenario (built-ins: {})",
                names.join(", ")
            ))
            .into());
        }
        Err(e) => return Err(BadInput(format!("cannot read {}: {e}", path.display())).into()),
    };
    Scenario::from_json(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
}

/// Apply command-line overrides.
pub fn apply_overrides(s: &mut Scenario, args: &Args) {
    s.apply_overrides(&Overrides {
        seed: args.seed,
        order: args.order.map(|o| match o {
            OrderArg::Fixed => OrderChoice::Fixed,
            OrderArg::Legacy => OrderChoice::Legacy,
            OrderArg::Cpython => OrderChoice::CPython,
        }),
        python_hash_seed: args.python_hash_seed,
        none_hash_seed: args.none_hash_seed.clone(),
        hash_format: args.hash_format.map(|h| match h {
            HashArg::Int => HashFormat::Int,
            HashArg::Bytes => HashFormat::Bytes,
        }),
    });
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.list {
        let mut out = std::io::stdout().lock();
        for b in builtin::BUILTINS {
            writeln!(out, "{}\t{}", b.name, b.description)?;
        }
        return Ok(());
    }
    let Some(name) = args.scenario.as_deref() else {
        return Err(BadInput("a scenario file or built-in name is required".into()).into());
    };
    let mut scenario = load_scenario(name)?;
    apply_overrides(&mut scenario, &args);

    let bar = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb
    });
    let trace = sim::simulate_with_progress(&scenario, &mut |steps, events| {
        if let Some(pb) = &bar {
            if steps % 64 == 0 {
                pb.set_message(format!("step {steps}, {events} events"));
                pb.tick();
            }
        }
    })
    .map_err(|e| BadInput(format!("{name}: {e}")))?;
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }

    let bytes: Vec<u8> = match args.format {
        FormatArg::Jsonl => jsonl::write_trace(&trace).into_bytes(),
        FormatArg::Msgpack => {
            let mut out = Vec::new();
            for r in &trace.records {
                if let TraceRecord::Batch(b) = r {
                    out.extend(msgpack::encode_batch(&b.to_wire(), EventEncoding::Map));
                }
            }
            out
        }
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?
        }
        None => crate::out::stdout(&bytes)?,
    }
    Ok(())
}
