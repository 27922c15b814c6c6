//! The kvscope JSON Lines trace (`docs/trace-format.md`).
//!
//! One record per line, in delivery order:
//!
//! * batch line (has an `events` key), keys written in this order:
//!   `{"source": "...", "dp_rank": 0, "seq": 3, "ts": 1700000000.5, "events": [...]}`, then the
//!   optional `provenance` (array parallel to `events`) and `raw` (base64 of the exact msgpack
//!   payload). Events are vLLM's map form with vLLM's field names (`type` first, defaulted
//!   `None` fields omitted, non-defaulted `None` fields written as `null`); integer hashes are
//!   JSON integers (parsed as `u64`, never through `f64`), bytes hashes lowercase hex strings.
//! * raw-only batch line (has `raw`, no `events`, no `kind`): events, `ts` and `dp_rank` are
//!   decoded from the payload.
//! * `{"kind": "header", ...}` → [`TraceRecord::Header`], `{"kind": "gap", ...}` →
//!   [`TraceRecord::Gap`]; any other line without `events` → [`TraceRecord::Other`], kept as is.
//!
//! Blank lines are skipped. Lines are written with `", "` / `": "` separators (the layout of
//! Python's `json.dumps`). Unknown keys on a batch line are ignored by the reader.

use crate::trace::{Trace, TraceRecord};

use super::json::Parser;
use super::{FloatParser, Location, WireError};

mod read;
mod records;
#[cfg(test)]
mod tests;
mod write;

use read::parse_line;
pub(crate) use read::Scratch;
pub use write::{write_record, write_trace, write_trace_into};

/// Parse a JSON Lines trace. Line numbers in errors (and in [`TraceBatch::origin`]) are 1-based.
pub fn read_trace(bytes: &[u8]) -> Result<Trace, WireError> {
    read_trace_with_progress(bytes, &mut |_| {})
}

/// [`read_trace`], calling `progress(bytes_done)` after each line.
pub fn read_trace_with_progress(
    bytes: &[u8],
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    read_trace_with(bytes, super::parse_float, progress)
}

/// [`read_trace_with_progress`], converting floats with `floats` instead of
/// [`super::parse_float`].
pub fn read_trace_with(
    bytes: &[u8],
    floats: FloatParser,
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    let mut reader = Reader::with_floats(bytes, floats);
    while !reader.step(0)? {
        progress(reader.position());
    }
    progress(reader.position());
    Ok(reader.finish_read())
}

/// A JSON Lines trace read a bounded number of bytes at a time, for callers that report
/// progress or yield between steps (the web debugger): records, line numbers (errors and
/// [`TraceBatch::origin`]) and errors are exactly those of [`read_trace`] on the whole input.
///
/// ```
/// # use kvscope_core::wire::jsonl::Reader;
/// let text = b"{\"kind\": \"header\", \"kvscope\": 1}\n{\"source\": \"a\", \"seq\": 0, \"ts\": 1.0, \"events\": []}\n";
/// let mut r = Reader::new(text);
/// while !r.step(4 << 20)? {
///     // show r.position() of text.len() bytes, r.events() events; yield to the UI
/// }
/// assert_eq!(r.finish()?.records.len(), 2);
/// # Ok::<(), kvscope_core::wire::WireError>(())
/// ```
pub struct Reader<'a> {
    /// The input after a leading BOM.
    bytes: &'a [u8],
    /// Length of the skipped BOM (0 or 3).
    bom: usize,
    /// Start of the next line in `bytes`; past the end once the last line was read.
    start: usize,
    /// Number of the last line read (1-based).
    line_no: u64,
    done: bool,
    events: usize,
    records: Vec<TraceRecord>,
    scratch: Scratch,
    floats: FloatParser,
}

impl<'a> Reader<'a> {
    /// A reader over the whole input (a leading UTF-8 BOM is skipped).
    pub fn new(input: &'a [u8]) -> Self {
        Self::with_floats(input, super::parse_float)
    }

    /// [`Reader::new`], converting floats with `floats` instead of [`super::parse_float`].
    pub fn with_floats(input: &'a [u8], floats: FloatParser) -> Self {
        let bytes = input.strip_prefix(b"\xef\xbb\xbf").unwrap_or(input);
        // The decoded trace takes 1.2-1.6x the bytes of its JSON Lines text (benchmark traces,
        // spaced and compact); unused room stays with the allocator.
        super::reserve_heap(bytes.len().saturating_mul(2));
        Reader {
            bytes,
            bom: input.len() - bytes.len(),
            start: 0,
            line_no: 0,
            done: false,
            events: 0,
            records: Vec::new(),
            scratch: Scratch::default(),
            floats,
        }
    }

    /// Read at least one line, and further lines until `budget` bytes were consumed in this
    /// call. Returns whether the input is finished. After an error the reader is finished.
    pub fn step(&mut self, budget: usize) -> Result<bool, WireError> {
        let goal = self.start.saturating_add(budget);
        while !self.done {
            self.line()?;
            if self.start >= goal {
                break;
            }
        }
        Ok(self.done)
    }

    /// Bytes of the input consumed so far (BOM included), up to the input's length.
    pub fn position(&self) -> usize {
        self.bom + self.start.min(self.bytes.len())
    }

    /// Events in the batches read so far.
    pub fn events(&self) -> usize {
        self.events
    }

    /// Read what is left and return the trace.
    pub fn finish(mut self) -> Result<Trace, WireError> {
        while !self.step(usize::MAX)? {}
        Ok(self.finish_read())
    }

    fn finish_read(self) -> Trace {
        Trace {
            records: self.records,
        }
    }

    /// Read the next line: the lines are what `bytes.split(|b| *b == b'\n')` yields (a last,
    /// possibly empty, line after the final `\n` included), found with memchr.
    fn line(&mut self) -> Result<(), WireError> {
        let rest = self.bytes.get(self.start..).unwrap_or_default();
        let newline = memchr::memchr(b'\n', rest);
        let line = rest
            .get(..newline.unwrap_or(rest.len()))
            .unwrap_or_default();
        self.line_no += 1;
        self.start = self.start.saturating_add(line.len() + 1);
        // Finished after the last line, or on an error.
        self.done = true;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            let record = read_line_with(line, self.line_no, &mut self.scratch, self.floats)?;
            if let TraceRecord::Batch(b) = &record {
                self.events += b.events.len();
            }
            self.records.push(record);
        }
        self.done = newline.is_none();
        Ok(())
    }
}

/// Parse one non-blank line (`line_no` is used for errors and [`TraceBatch::origin`]).
pub fn read_line(line: &[u8], line_no: u64) -> Result<TraceRecord, WireError> {
    read_line_with(line, line_no, &mut Scratch::default(), super::parse_float)
}

/// [`read_line`] with reusable buffers: one pass of [`Parser`] over the line, typed fields
/// read straight into the record, other values built as [`Value`]s.
pub(crate) fn read_line_with(
    line: &[u8],
    line_no: u64,
    scratch: &mut Scratch,
    floats: FloatParser,
) -> Result<TraceRecord, WireError> {
    let line = std::str::from_utf8(line).map_err(|e| WireError {
        location: Location::Line {
            line: line_no,
            column: Some(e.valid_up_to() as u64 + 1),
        },
        message: "invalid UTF-8".into(),
    })?;
    let mut p = Parser::new(line, floats);
    let parsed = parse_line(&mut p, scratch)
        .and_then(|l| p.end().map(|()| l))
        .map_err(|e| WireError {
            location: Location::Line {
                line: line_no,
                column: Some(e.column as u64),
            },
            message: e.message,
        })?;
    parsed
        .into_record(line, line_no)
        .map_err(|message| WireError {
            location: Location::Line {
                line: line_no,
                column: None,
            },
            message,
        })
}
