//! Reading a command's input. A file that is missing or unreadable is bad input (exit 2),
//! exactly like a file that does not parse: the one rule for every command
//! (`docs/cli.md`, exit codes).
//!
//! Traces are read record by record ([`TraceInput`], over `kvscope_core::wire::stream`), so a
//! file that is bad from its first byte fails there, without the rest being read, and a
//! command that handles one record at a time (`convert`) holds one record, not the file.

use std::cell::RefCell;
use std::io::{BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use kvscope_core::trace::{stream_source_name, TraceRecord};
use kvscope_core::wire::stream::{ReadError, TraceReader};
use kvscope_core::wire::InputFormat;

use crate::exit::BadInput;

/// Read `path` whole (`-` = stdin); any failure is [`BadInput`] naming the path.
pub fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| BadInput(format!("cannot read stdin: {e}")))?;
        return Ok(buf);
    }
    std::fs::read(path).map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())).into())
}

/// The source name a bare msgpack stream read from `path` gets: the file name up to its first
/// dot, as the debugger and the npm package name it (`trace::stream_source_name`), so
/// `pod-a.trace.msgpack` is `pod-a` everywhere; `stdin` for `-`.
pub fn source_name(path: &Path) -> String {
    if path == Path::new("-") {
        return "stdin".into();
    }
    let name = path.file_name().map(|s| s.to_string_lossy());
    match name {
        Some(name) => stream_source_name(&name).to_owned(),
        None => "trace".into(),
    }
}

/// What [`Tap`] saw of the bytes going to the decoder.
#[derive(Default)]
struct Seen {
    /// The input's first non-whitespace byte, once read: it decides the format, as
    /// `wire::detect_format` decides it on the whole input.
    first: Option<u8>,
    /// Keep the bytes read (for [`TraceInput::take_raw`]).
    keep: bool,
    /// Bytes read from input offset `kept_from` on, while `keep`.
    kept: Vec<u8>,
    kept_from: u64,
}

/// Passes the input through to the decoder, noting what [`Seen`] records. The state is shared
/// because `TraceReader` owns its reader and does not lend it back.
struct Tap {
    inner: Box<dyn Read>,
    seen: Rc<RefCell<Seen>>,
}

impl Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = buf.get(..n).unwrap_or_default();
        let mut seen = self.seen.borrow_mut();
        if seen.first.is_none() {
            seen.first = got.iter().copied().find(|b| !b.is_ascii_whitespace());
        }
        if seen.keep {
            seen.kept.extend_from_slice(got);
        }
        Ok(n)
    }
}

/// A trace read record by record from a file or stdin (`-`); every failure is [`BadInput`].
pub struct TraceInput {
    reader: TraceReader<Tap>,
    seen: Rc<RefCell<Seen>>,
    /// How read failures name the input: the path, or `stdin`.
    read_name: String,
    /// How decoding errors name the input (`{name}: {location}: ...`).
    name: String,
    /// The file's size, when it is a file.
    len: Option<u64>,
}

impl TraceInput {
    /// Open `path` (`-` = stdin). `name` prefixes decoding errors; `source` names a msgpack
    /// stream's publisher. With `keep_raw`, the bytes of each record can be had with
    /// [`TraceInput::take_raw`].
    pub fn open(path: &Path, name: &str, source: &str, keep_raw: bool) -> anyhow::Result<Self> {
        let (inner, read_name, len): (Box<dyn Read>, String, Option<u64>) =
            if path == Path::new("-") {
                (Box::new(std::io::stdin().lock()), "stdin".into(), None)
            } else {
                let read_name = path.display().to_string();
                let file = std::fs::File::open(path)
                    .map_err(|e| BadInput(format!("cannot read {read_name}: {e}")))?;
                let len = file
                    .metadata()
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len());
                (Box::new(BufReader::new(file)), read_name, len)
            };
        let seen = Rc::new(RefCell::new(Seen {
            keep: keep_raw,
            ..Seen::default()
        }));
        let tap = Tap {
            inner,
            seen: Rc::clone(&seen),
        };
        Ok(TraceInput {
            reader: TraceReader::new(tap, source),
            seen,
            read_name,
            name: name.to_owned(),
            len,
        })
    }

    /// The next record, `None` at the end of the input.
    pub fn next_record(&mut self) -> anyhow::Result<Option<TraceRecord>> {
        self.reader.next_record().map_err(|e| {
            match e {
                ReadError::Wire(e) => BadInput(format!("{}: {e}", self.name)),
                ReadError::Io(e) => BadInput(format!("cannot read {}: {e}", self.read_name)),
            }
            .into()
        })
    }

    /// The input's format as far as it has been read (a msgpack stream until a first `{`
    /// shows JSON Lines, as for an empty input).
    pub fn format(&self) -> InputFormat {
        match self.seen.borrow().first {
            Some(b'{') => InputFormat::Jsonl,
            _ => InputFormat::MsgpackStream,
        }
    }

    /// Bytes of the input consumed by the records returned so far.
    pub fn position(&self) -> u64 {
        self.reader.position()
    }

    /// The input file's size (`None` for stdin and other non-files).
    pub fn file_len(&self) -> Option<u64> {
        self.len
    }

    /// The input bytes from offset `start` to [`TraceInput::position`] (the last record's, when
    /// `start` was the position before it), and forget those before; `None` unless opened with
    /// `keep_raw`.
    pub fn take_raw(&mut self, start: u64) -> Option<Vec<u8>> {
        let end = self.position();
        let mut seen = self.seen.borrow_mut();
        if !seen.keep {
            return None;
        }
        let from = usize::try_from(start.checked_sub(seen.kept_from)?).ok()?;
        let to = usize::try_from(end.checked_sub(seen.kept_from)?).ok()?;
        let raw = seen.kept.get(from..to).map(<[u8]>::to_vec);
        let drop = to.min(seen.kept.len());
        seen.kept.drain(..drop);
        seen.kept_from += drop as u64;
        raw
    }
}
