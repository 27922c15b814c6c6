//! The streaming reader (`wire::stream`) against the whole-input reader: the same records and
//! the same located errors for every fixture, whatever the chunk sizes; and a bad input fails
//! at its first bad byte without the rest being read.

use std::io::Read;
use std::path::{Path, PathBuf};

use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::stream::{Decoder, ReadError, TraceReader};
use kvscope_core::wire::{read_trace, Location, WireError};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Every file below `dir` (all depths) with one of `exts`, sorted: a new fixture, or a new
/// folder of them, is never skipped.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(files(&path, exts));
        } else if exts
            .iter()
            .any(|x| path.extension().is_some_and(|e| e == *x))
        {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A reader handing out at most `chunk` bytes per call.
struct Trickle<'a> {
    bytes: &'a [u8],
    chunk: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

fn streamed(bytes: &[u8], chunk: usize) -> Result<Vec<TraceRecord>, WireError> {
    TraceReader::new(Trickle { bytes, chunk }, "s")
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| match e {
            ReadError::Wire(w) => w,
            ReadError::Io(e) => panic!("{e}"),
        })
}

/// The push decoder fed `chunk` bytes at a time, by `push` and `push_with` in turn.
fn pushed(bytes: &[u8], chunk: usize) -> Result<Vec<TraceRecord>, WireError> {
    let mut d = Decoder::new("s");
    let mut out = Vec::new();
    for (k, piece) in bytes.chunks(chunk).enumerate() {
        if k % 2 == 0 {
            d.push(piece);
        } else {
            d.push_with(piece.len(), |room| room.copy_from_slice(piece));
        }
        while let Some(r) = d.next_record()? {
            out.push(r);
        }
    }
    d.finish();
    while let Some(r) = d.next_record()? {
        out.push(r);
    }
    Ok(out)
}

fn check_like_whole(path: &Path, bytes: &[u8]) {
    let whole = read_trace(bytes, "s").map(|t| t.records);
    for chunk in [1, 7, 4096, 1 << 20] {
        assert_eq!(
            streamed(bytes, chunk),
            whole,
            "{} in {chunk}-byte reads",
            path.display()
        );
        assert_eq!(
            pushed(bytes, chunk),
            whole,
            "{} pushed by {chunk}",
            path.display()
        );
    }
}

#[test]
fn every_fixture_streams_like_the_whole_input() {
    let mut n = 0;
    for path in files(&fixtures(), &["msgpack", "jsonl"]) {
        let bytes = std::fs::read(&path).expect("fixture");
        check_like_whole(&path, &bytes);
        n += 1;
    }
    assert!(n > 40, "{n} fixtures");
}

#[test]
fn truncations_and_odd_layouts_stream_like_the_whole_input() {
    let stream = std::fs::read(fixtures().join("wire/stream.msgpack")).expect("stream");
    for cut in (0..stream.len()).step_by(7) {
        check_like_whole(Path::new("stream.msgpack cut"), &stream[..cut]);
    }
    for text in [
        &b""[..],
        b"\n\n  \r\n",
        b"\xef\xbb\xbf{\"kind\": \"note\"}",
        b"{\"kind\": \"note\"}\r\n\r\n{\"source\": \"a\", \"seq\": 0, \"ts\": 1.0, \"events\": []}",
        b"{\"kind\": \"note\"}\n{\"source\": \"a\", \"seq\": 0}\n",
        b"{\"kind\": \"note\"}\n{\"kind\": \"note\", \"bad\": \xff}\n",
        b"   \x00",
        b" ",
    ] {
        check_like_whole(Path::new("text"), text);
    }
}

/// An endless input of zero bytes, counting what was read.
struct Zeros {
    read: usize,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(0);
        self.read += buf.len();
        Ok(buf.len())
    }
}

/// Issue 20: a 2 GB file of zeros fails at byte 0, and the reader stops after its first read.
#[test]
fn an_endless_input_of_zeros_fails_at_byte_0_after_one_read() {
    let mut zeros = Zeros { read: 0 };
    let err = TraceReader::new(&mut zeros, "z")
        .next()
        .expect("an error, not the end")
        .expect_err("zeros are not a trace");
    let ReadError::Wire(e) = err else {
        panic!("{err}")
    };
    assert_eq!(e.location, Location::Byte(0));
    assert_eq!(
        e.to_string(),
        "byte offset 0: batch 1: batch: expected array [ts, events, data_parallel_rank], found int"
    );
    assert!(zeros.read <= 1 << 16, "read {} bytes", zeros.read);
}

/// A payload declaring more events than arrive keeps asking for input, and is an error (not an
/// empty trace) once the input ends.
#[test]
fn a_payload_cut_short_is_an_error_only_at_the_end() {
    let mut d = Decoder::new("s");
    d.push(&[0x93, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x92]);
    assert_eq!(d.next_record(), Ok(None));
    d.finish();
    let err = d.next_record().expect_err("truncated");
    assert_eq!(err.location, Location::Byte(11));
    assert!(
        err.message
            .starts_with("batch 1: event 0: unexpected end of input"),
        "{err}"
    );
    assert_eq!(d.next_record(), Ok(None));
}

/// The records a decoder returned before an error, and its position then.
fn until_error(bytes: &[u8], chunk: usize) -> (Vec<TraceRecord>, Option<WireError>, u64) {
    let mut d = Decoder::new("s");
    let mut out = Vec::new();
    let mut pieces = bytes.chunks(chunk);
    loop {
        let more = match pieces.next() {
            Some(p) => {
                d.push(p);
                true
            }
            None => {
                d.finish();
                false
            }
        };
        loop {
            match d.next_record() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => return (out, Some(e), d.position()),
            }
        }
        if !more {
            return (out, None, d.position());
        }
    }
}

/// Issue 16 point 10: a capture cut anywhere (msgpack mid-payload, JSON Lines mid-line) keeps
/// its complete leading batches. Before the located error the decoder has returned every
/// record complete before the cut, and `position()` is where they end: the input up to it
/// reads back, with no error, as exactly those records.
#[test]
fn a_cut_capture_keeps_its_complete_leading_records() {
    let msgpack = std::fs::read(fixtures().join("wire/stream.msgpack")).expect("stream");
    let jsonl = std::fs::read(fixtures().join("agreement/two-jobs-fixed-provenance.jsonl"))
        .expect("a JSON Lines fixture");
    let mut partial = 0;
    for (input, step) in [(&msgpack, 5), (&jsonl, 97)] {
        let whole = read_trace(input, "s")
            .expect("the whole input reads")
            .records;
        for cut in (1..input.len()).step_by(step) {
            let cut_input = &input[..cut];
            for chunk in [3, 4096] {
                let (records, error, at) = until_error(cut_input, chunk);
                let at = usize::try_from(at).expect("fits");
                assert_eq!(
                    records.as_slice(),
                    &whole[..records.len()],
                    "cut at {cut}: a prefix"
                );
                let prefix = read_trace(&cut_input[..at], "s").expect("the prefix reads");
                assert_eq!(prefix.records, records, "cut at {cut}, chunk {chunk}");
                if let Some(e) = error {
                    partial += usize::from(!records.is_empty());
                    match e.location {
                        Location::Byte(o) => assert!(o as usize >= at, "{e} before {at}"),
                        Location::Line { line, .. } => {
                            let lines = cut_input[..at].iter().filter(|b| **b == b'\n').count();
                            assert_eq!(line as usize, lines + 1, "{e}");
                        }
                    }
                }
            }
        }
    }
    assert!(partial > 10, "{partial} cuts kept records");
}
