//! `kvscope convert`: JSON Lines trace ⇄ msgpack stream (`docs/trace-format.md`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::{self, msgpack, EventEncoding, InputFormat};

use crate::exit::BadInput;

/// Output format of `convert`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// kvscope JSON Lines trace.
    Jsonl,
    /// Concatenated msgpack `KVEventBatch` payloads, as vLLM publishes them.
    Msgpack,
}

/// Event encoding inside msgpack output.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// One map per event, `"type"` first (vLLM since #42892).
    Map,
    /// Legacy positional arrays `[tag, field1, ...]`.
    Array,
}

/// Arguments of `kvscope convert`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Convert a trace between JSON Lines and a msgpack stream (input format auto-detected)",
    after_help = "Batch lines that carry `raw` payload bytes are written verbatim to msgpack.\n\
                  msgpack has no place for headers, gap markers, provenance or source names: \
                  they are dropped with a note on stderr."
)]
pub struct Args {
    /// Input trace: JSON Lines or a msgpack stream (auto-detected); `-` reads stdin.
    pub input: PathBuf,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Output format (default: the other one).
    #[arg(long, value_enum)]
    pub to: Option<To>,
    /// Event encoding for msgpack output.
    #[arg(long, value_enum, default_value_t = Encoding::Map)]
    pub encoding: Encoding,
    /// Source name for the batches of a msgpack stream (default: the input file's stem).
    #[arg(long)]
    pub source: Option<String>,
    /// With msgpack input and JSONL output: keep each payload's exact bytes as `raw` (base64).
    #[arg(long)]
    pub raw: bool,
}

/// Inputs at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: usize = 32 << 20;

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let bytes = crate::input::read(&args.input)?;
    let name = if args.input == Path::new("-") {
        "stdin".to_owned()
    } else {
        args.input.display().to_string()
    };
    let source = args.source.clone().unwrap_or_else(|| {
        args.input
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| *s != "-")
            .unwrap_or("stdin")
            .to_owned()
    });
    let format = wire::detect_format(&bytes);
    let to = args.to.unwrap_or(match format {
        InputFormat::Jsonl => To::Msgpack,
        InputFormat::MsgpackStream => To::Jsonl,
    });

    let bar = progress_bar(bytes.len());
    let mut trace = wire::read_trace_with_progress(&bytes, &source, &mut |done| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    })
    .map_err(|e| BadInput(format!("{name}: {e}")))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }

    if args.raw && format == InputFormat::MsgpackStream {
        let ranges = msgpack::split_stream(&bytes).map_err(|e| BadInput(format!("{name}: {e}")))?;
        let batches = trace.records.iter_mut().filter_map(|r| match r {
            TraceRecord::Batch(b) => Some(b),
            _ => None,
        });
        for (b, range) in batches.zip(ranges) {
            b.raw = bytes.get(range).map(<[u8]>::to_vec);
        }
    }

    let out = match to {
        To::Jsonl => {
            let mut out = Vec::with_capacity(bytes.len() * 2);
            wire::jsonl::write_trace_into(&mut out, &trace);
            out
        }
        To::Msgpack => to_msgpack(&trace, args.encoding),
    };
    write_output(args.output.as_deref(), &out)
}

fn to_msgpack(trace: &kvscope_core::Trace, encoding: Encoding) -> Vec<u8> {
    let encoding = match encoding {
        Encoding::Map => EventEncoding::Map,
        Encoding::Array => EventEncoding::Array,
    };
    let mut out = Vec::new();
    let (mut other, mut provenance) = (0usize, 0usize);
    let mut sources = std::collections::BTreeSet::new();
    for r in &trace.records {
        match r {
            TraceRecord::Batch(b) => {
                sources.insert((b.source.as_str(), b.dp_rank));
                if b.provenance.is_some() {
                    provenance += 1;
                }
                match &b.raw {
                    Some(raw) => out.extend_from_slice(raw),
                    None => msgpack::encode_batch_into(&mut out, &b.to_wire(), encoding),
                }
            }
            _ => other += 1,
        }
    }
    if other > 0 {
        eprintln!("kvscope: note: {other} non-batch record(s) (header, gaps, notes) have no msgpack form and were not written");
    }
    if provenance > 0 {
        eprintln!("kvscope: note: provenance of {provenance} batch(es) has no msgpack form and was not written");
    }
    if sources.len() > 1 {
        eprintln!(
            "kvscope: note: {} publishers (source, dp_rank) merged into one msgpack stream; source names are not kept",
            sources.len()
        );
    }
    out
}

fn write_output(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match path {
        Some(p) => std::fs::write(p, bytes).with_context(|| format!("writing {}", p.display())),
        None => crate::out::stdout(bytes),
    }
}

fn progress_bar(len: usize) -> Option<indicatif::ProgressBar> {
    if len < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} reading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}
