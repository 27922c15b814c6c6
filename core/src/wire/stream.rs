//! Reading a trace record by record as its bytes arrive: from a [`std::io::Read`]
//! ([`TraceReader`]) or from chunks pushed by the caller ([`Decoder`], for the page and the
//! package, which get bytes in pieces). Only the unread part of the input is buffered, so memory
//! is one record's bytes plus one read chunk, not the file, and a bad first byte is an error
//! before the rest is read.
//!
//! Records, their numbering and their errors are exactly those of [`super::read_trace`] on the
//! whole input: the format is detected from the first non-whitespace byte; a msgpack stream
//! gives one batch per payload (`source` as given, `seq` = 0-based position, `origin` = 1-based
//! batch number) with errors at absolute byte offsets; JSON Lines give one record per non-blank
//! line with errors naming the 1-based line.
//!
//! ```
//! use kvscope_core::wire::stream::TraceReader;
//! let text: &[u8] = b"{\"source\": \"a\", \"seq\": 0, \"ts\": 1.0, \"events\": []}\n";
//! let mut n = 0;
//! for record in TraceReader::new(text, "trace") {
//!     let _record = record?; // a TraceRecord
//!     n += 1;
//! }
//! assert_eq!(n, 1);
//! # Ok::<(), kvscope_core::wire::stream::ReadError>(())
//! ```

use std::io::Read;

use crate::trace::{TraceBatch, TraceRecord};

use super::jsonl::{read_line_with, Scratch};
use super::msgpack::{decode_prefix, Prefix};
use super::{FloatParser, InputFormat, Location, WireError};

/// A single record (a msgpack payload or a JSON Lines line) larger than this is refused rather
/// than buffered: vLLM's batches are kilobytes, and a hostile declared length could otherwise
/// make the reader hold the whole input.
pub const MAX_RECORD_BYTES: usize = 1 << 30;

/// Bytes asked of the underlying reader at a time by [`TraceReader`].
const READ_CHUNK: usize = 1 << 16;

/// An error while reading a trace from a [`std::io::Read`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes are not a trace (located like [`super::read_trace`]'s errors).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The underlying reader failed.
    #[error("reading the input: {0}")]
    Io(#[from] std::io::Error),
}

/// A push decoder: give it bytes with [`Decoder::push`] as they come, take records with
/// [`Decoder::next_record`] until it returns `Ok(None)`, and call [`Decoder::finish`] once the
/// input has ended so the last record (and any truncation error) comes out.
pub struct Decoder {
    /// Input pushed and not yet dropped: `buf[start..end]` is not consumed yet; bytes past
    /// `end` are room for the next read (so that [`TraceReader`] reads straight into the
    /// buffer, not through a second one).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Absolute offset of `buf[start]` in the input.
    base: u64,
    /// The input has ended.
    ended: bool,
    /// Known once the first non-whitespace byte arrived.
    format: Option<InputFormat>,
    /// A leading UTF-8 BOM was looked for (JSON Lines).
    bom_checked: bool,
    /// Source name of a msgpack stream's batches.
    source: String,
    /// Records decoded from a msgpack stream (its next `seq`) / JSON Lines lines read.
    count: u64,
    /// A partial msgpack payload is retried only once the buffer has grown past this (so a
    /// large payload arriving in small chunks is not decoded from its start at every chunk).
    retry_at: usize,
    floats: FloatParser,
    scratch: Scratch,
    /// An error was returned: nothing more comes.
    failed: bool,
}

impl Decoder {
    /// A decoder naming a msgpack stream's publisher `source` (JSON Lines carry their own).
    pub fn new(source: &str) -> Self {
        Self::with_floats(source, super::parse_float)
    }

    /// [`Decoder::new`], converting JSON Lines floats with `floats`.
    pub fn with_floats(source: &str, floats: FloatParser) -> Self {
        Decoder {
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            ended: false,
            format: None,
            bom_checked: false,
            source: source.to_owned(),
            count: 0,
            retry_at: 0,
            floats,
            scratch: Scratch::default(),
            failed: false,
        }
    }

    /// Append the next bytes of the input.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.truncate(self.end);
        self.compact();
        self.buf.extend_from_slice(bytes);
        self.end = self.buf.len();
    }

    /// Append the next `len` bytes of the input, written by `fill` straight into the decoder's
    /// buffer: the page copies each chunk out of a JavaScript buffer this way, once, instead of
    /// into a fresh `Vec` first and then here (a second copy, and fresh memory per chunk).
    pub fn push_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) {
        self.buf.truncate(self.end);
        self.compact();
        self.buf.resize(self.end.saturating_add(len), 0);
        fill(self.buf.get_mut(self.end..).unwrap_or_default());
        self.end = self.buf.len();
    }

    /// Drop the consumed bytes once they are half the input held (amortised O(1) per byte).
    fn compact(&mut self) {
        if self.start > self.end / 2 {
            self.buf.drain(..self.start);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Read the next bytes of the input from `input` straight into the room past `end` (at
    /// least half of `READ_CHUNK`: the room is compacted and regrown only when it is below that,
    /// so a reader giving a few bytes at a time costs no more per byte); `Ok(0)` at its end.
    fn read_from(&mut self, input: &mut impl Read) -> std::io::Result<usize> {
        if self.buf.len().saturating_sub(self.end) < READ_CHUNK / 2 {
            self.compact();
            let want = self.end.saturating_add(READ_CHUNK);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
        }
        let room = self.buf.get_mut(self.end..).unwrap_or_default();
        let n = loop {
            match input.read(room) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.end += n;
        Ok(n)
    }

    /// The input not consumed yet.
    fn rest(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// Mark the end of the input.
    pub fn finish(&mut self) {
        self.ended = true;
    }

    /// Bytes of the input consumed so far (records returned).
    pub fn position(&self) -> u64 {
        self.base
    }

    /// The next record; `Ok(None)` when more input is needed (or, after [`Decoder::finish`],
    /// when the input is done). After an error nothing more is returned.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, WireError> {
        if self.failed {
            return Ok(None);
        }
        let result = self.next_inner();
        if result.is_err() {
            self.failed = true;
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
        result
    }

    fn next_inner(&mut self) -> Result<Option<TraceRecord>, WireError> {
        let format = match self.format {
            Some(f) => f,
            None => match self.rest().iter().find(|b| !b.is_ascii_whitespace()) {
                Some(_) => *self.format.insert(super::detect_format(self.rest())),
                None if self.ended && self.rest().is_empty() => return Ok(None),
                // All whitespace so far: JSON Lines blank lines, or a msgpack stream of fixints
                // (the whole-input reader decides the same way at the end).
                None if self.ended => *self.format.insert(super::detect_format(self.rest())),
                None => return Ok(None),
            },
        };
        match format {
            InputFormat::MsgpackStream => self.next_batch(),
            InputFormat::Jsonl => self.next_line(),
        }
    }

    /// Consume the next `n` bytes.
    fn consume(&mut self, n: usize) {
        self.start += n;
        self.base += n as u64;
        self.retry_at = 0;
    }

    fn next_batch(&mut self) -> Result<Option<TraceRecord>, WireError> {
        let pending = self.rest().len();
        if pending == 0 || (!self.ended && pending < self.retry_at) {
            return Ok(None);
        }
        let batch_no = self.count + 1;
        let located = |e: Box<WireError>, base: u64| {
            let mut e = *e;
            if let Location::Byte(o) = &mut e.location {
                *o += base;
            }
            e.message = format!("batch {batch_no}: {}", e.message);
            e
        };
        match decode_prefix(self.rest()) {
            Prefix::Batch(b, len) => {
                self.consume(len);
                let seq = self.count;
                self.count += 1;
                Ok(Some(TraceRecord::Batch(TraceBatch {
                    source: self.source.clone(),
                    dp_rank: b.data_parallel_rank,
                    seq,
                    ts: b.ts,
                    events: b.events,
                    provenance: None,
                    raw: None,
                    origin: seq + 1,
                })))
            }
            Prefix::Truncated(e) if self.ended => Err(located(e, self.base)),
            Prefix::Truncated(_) if pending > MAX_RECORD_BYTES => Err(WireError {
                location: Location::Byte(self.base),
                message: format!(
                    "batch {batch_no}: a payload over {MAX_RECORD_BYTES} bytes (refused)"
                ),
            }),
            Prefix::Truncated(_) => {
                self.retry_at = pending.saturating_mul(2);
                Ok(None)
            }
            Prefix::Invalid(e) => Err(located(e, self.base)),
        }
    }

    fn next_line(&mut self) -> Result<Option<TraceRecord>, WireError> {
        loop {
            if !self.bom_checked {
                let rest = self.rest();
                if rest.len() < 3 && !self.ended && b"\xef\xbb\xbf".starts_with(rest) {
                    return Ok(None);
                }
                self.bom_checked = true;
                if self.rest().starts_with(b"\xef\xbb\xbf") {
                    self.consume(3);
                }
            }
            let rest = self.rest();
            let (line_len, next) = match memchr::memchr(b'\n', rest) {
                Some(nl) => (nl, nl + 1),
                None if self.ended && !rest.is_empty() => (rest.len(), rest.len()),
                None if self.ended => return Ok(None),
                None if rest.len() > MAX_RECORD_BYTES => {
                    return Err(WireError {
                        location: Location::Line {
                            line: self.count + 1,
                            column: None,
                        },
                        message: format!("a line over {MAX_RECORD_BYTES} bytes (refused)"),
                    })
                }
                None => return Ok(None),
            };
            self.count += 1;
            let line = self
                .buf
                .get(self.start..self.start + line_len)
                .unwrap_or_default();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let record = if line.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(read_line_with(
                    line,
                    self.count,
                    &mut self.scratch,
                    self.floats,
                )?)
            };
            self.consume(next);
            if record.is_some() {
                return Ok(record);
            }
        }
    }
}

/// Records read from a [`std::io::Read`] a chunk at a time (see the module docs).
pub struct TraceReader<R> {
    input: R,
    decoder: Decoder,
}

impl<R: Read> TraceReader<R> {
    /// A reader naming a msgpack stream's publisher `source`.
    pub fn new(input: R, source: &str) -> Self {
        Self::from_decoder(input, Decoder::new(source))
    }

    /// A reader feeding `decoder` (e.g. one made with [`Decoder::with_floats`]).
    pub fn from_decoder(input: R, decoder: Decoder) -> Self {
        TraceReader { input, decoder }
    }

    /// Bytes of the input consumed by the records returned so far.
    pub fn position(&self) -> u64 {
        self.decoder.position()
    }

    /// The next record, `Ok(None)` at the end of the input.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, ReadError> {
        loop {
            if let Some(r) = self.decoder.next_record()? {
                return Ok(Some(r));
            }
            if self.decoder.ended || self.decoder.failed {
                return Ok(None);
            }
            match self.decoder.read_from(&mut self.input) {
                Ok(0) => self.decoder.finish(),
                Ok(_) => {}
                Err(e) => {
                    self.decoder.failed = true;
                    return Err(e.into());
                }
            }
        }
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}
