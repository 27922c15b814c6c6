//! `kvscope convert`: JSON Lines trace ⇄ msgpack stream (`docs/trace-format.md`).

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::{self, msgpack, EventEncoding, InputFormat};

use crate::input::TraceInput;

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
    /// Source name for the batches of a msgpack stream (default: the input file name up to its
    /// first dot, as the debugger names it; `stdin` for `-`).
    #[arg(long)]
    pub source: Option<String>,
    /// With msgpack input and JSONL output: keep each payload's exact bytes as `raw` (base64).
    #[arg(long)]
    pub raw: bool,
}

/// Inputs at least this large get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

/// Run the command: read a record, write a record, so memory does not grow with the trace.
///
/// The output is written as the input is read: bad input stops the command (exit 2) after the
/// records before the bad one were written to stdout; an `-o` file is removed then (it is
/// created only once the first record has been read).
pub fn run(args: Args) -> anyhow::Result<()> {
    let name = if args.input == Path::new("-") {
        "stdin".to_owned()
    } else {
        args.input.display().to_string()
    };
    let source = args
        .source
        .clone()
        .unwrap_or_else(|| crate::input::source_name(&args.input));
    let mut input = TraceInput::open(&args.input, &name, &source, args.raw)?;
    // The first record settles the format, and bad input from the start fails before the
    // output is touched.
    let first = input.next_record()?;
    let format = input.format();
    let to = args.to.unwrap_or(match format {
        InputFormat::Jsonl => To::Msgpack,
        InputFormat::MsgpackStream => To::Jsonl,
    });
    let keep_raw = args.raw && format == InputFormat::MsgpackStream;
    let mut output = Output::create(args.output.as_deref())?;
    let mut writer = RecordWriter::new(to, args.encoding);
    let bar = input.file_len().and_then(progress_bar);
    let convert_all = || -> anyhow::Result<()> {
        let mut start = 0;
        let mut next = first;
        while let Some(mut record) = next {
            let raw = input.take_raw(start);
            if let (TraceRecord::Batch(b), true) = (&mut record, keep_raw) {
                b.raw = raw;
            }
            writer.write(&mut output, &record)?;
            if let Some(b) = &bar {
                b.set_position(input.position());
            }
            start = input.position();
            next = input.next_record()?;
        }
        output.finish()
    };
    let result = convert_all();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Err(e) = result {
        output.discard();
        return Err(e);
    }
    writer.notes();
    Ok(())
}

/// Writes records in the output format, one at a time.
struct RecordWriter {
    to: To,
    encoding: EventEncoding,
    /// One record's bytes.
    buf: Vec<u8>,
    /// Records that msgpack has no form for, so far.
    other: usize,
    provenance: usize,
    sources: std::collections::BTreeSet<(String, Option<u32>)>,
}

impl RecordWriter {
    fn new(to: To, encoding: Encoding) -> Self {
        RecordWriter {
            to,
            encoding: match encoding {
                Encoding::Map => EventEncoding::Map,
                Encoding::Array => EventEncoding::Array,
            },
            buf: Vec::new(),
            other: 0,
            provenance: 0,
            sources: std::collections::BTreeSet::new(),
        }
    }

    fn write(&mut self, out: &mut Output, record: &TraceRecord) -> anyhow::Result<()> {
        self.buf.clear();
        match (self.to, record) {
            (To::Jsonl, r) => wire::jsonl::write_record(&mut self.buf, r),
            (To::Msgpack, TraceRecord::Batch(b)) => {
                self.sources.insert((b.source.clone(), b.dp_rank));
                if b.provenance.is_some() {
                    self.provenance += 1;
                }
                match &b.raw {
                    Some(raw) => self.buf.extend_from_slice(raw),
                    None => msgpack::encode_trace_batch_into(&mut self.buf, b, self.encoding),
                }
            }
            (To::Msgpack, _) => self.other += 1,
        }
        out.write(&self.buf)
    }

    /// Say on stderr what msgpack output could not carry.
    fn notes(&self) {
        let (other, provenance) = (self.other, self.provenance);
        if other > 0 {
            eprintln!("kvscope: note: {other} non-batch record(s) (header, gaps, notes) have no msgpack form and were not written");
        }
        if provenance > 0 {
            eprintln!("kvscope: note: provenance of {provenance} batch(es) has no msgpack form and was not written");
        }
        if self.sources.len() > 1 {
            eprintln!(
                "kvscope: note: {} publishers (source, dp_rank) merged into one msgpack stream; source names are not kept",
                self.sources.len()
            );
        }
    }
}

/// Where `convert` writes: stdout or an `-o` file.
struct Output {
    out: BufWriter<Box<dyn Write>>,
    /// The `-o` path (for error messages and [`Output::discard`]).
    path: Option<PathBuf>,
}

impl Output {
    fn create(path: Option<&Path>) -> anyhow::Result<Self> {
        let out: Box<dyn Write> = match path {
            Some(p) => Box::new(
                std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?,
            ),
            None => Box::new(std::io::stdout().lock()),
        };
        Ok(Output {
            out: BufWriter::with_capacity(1 << 16, out),
            path: path.map(Path::to_path_buf),
        })
    }

    fn context(&self) -> String {
        match &self.path {
            Some(p) => format!("writing {}", p.display()),
            None => "writing stdout".into(),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        match self.out.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context(self.context())),
        }
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        match self.out.flush() {
            Ok(()) => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context(self.context())),
        }
    }

    /// After a failure: remove a partly written `-o` file (a regular file only: never a device
    /// or a pipe such as `/dev/stdout`).
    fn discard(&self) {
        if let Some(p) = &self.path {
            if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

fn progress_bar(len: u64) -> Option<indicatif::ProgressBar> {
    if len < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} reading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}
