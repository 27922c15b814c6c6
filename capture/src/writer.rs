//! Streaming kvscope JSON Lines writer: one record per line, flushed on demand, so a killed
//! capture loses at most what was not yet flushed (the record being written).

use std::io::{self, Write};

use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::jsonl;
use serde_json::{json, Value};

/// Writes trace records as JSON Lines to `W`.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    line: Vec<u8>,
    records: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Wrap an output.
    pub fn new(out: W) -> Self {
        Self {
            out,
            line: Vec::new(),
            records: 0,
        }
    }

    /// Append one record as a `\n`-terminated line (`kvscope_core::wire::jsonl::write_record`).
    /// Not flushed.
    pub fn write(&mut self, record: &TraceRecord) -> io::Result<()> {
        self.line.clear();
        jsonl::write_record(&mut self.line, record);
        self.out.write_all(&self.line)?;
        self.records += 1;
        Ok(())
    }

    /// Flush everything written so far to the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The output.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A non-batch line `{"kind": "note", "note": what, ...fields}`. It never has an `events` key,
/// so readers that do not know it skip it (`docs/trace-format.md`, non-batch records).
pub(crate) fn note(what: &str, fields: Value) -> TraceRecord {
    let mut v = json!({ "kind": "note", "note": what });
    if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), fields) {
        obj.extend(extra);
    }
    TraceRecord::Other(v)
}

/// Write one record and flush it, so a killed capture loses at most the record in flight.
pub(crate) fn emit<W: Write>(out: &mut TraceWriter<W>, record: TraceRecord) -> io::Result<()> {
    out.write(&record)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvscope_core::trace::SeqGap;

    #[test]
    fn one_line_per_record() {
        let mut w = TraceWriter::new(Vec::new());
        let gap = TraceRecord::Gap(SeqGap {
            source: "a".into(),
            dp_rank: Some(0),
            expected_seq: 3,
            received_seq: 6,
            recovered: true,
        });
        w.write(&gap).unwrap();
        w.write(&TraceRecord::Other(serde_json::json!({"kind": "note"})))
            .unwrap();
        assert_eq!(w.records(), 2);
        let text = String::from_utf8(w.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let back = jsonl::read_trace(text.as_bytes()).unwrap();
        assert_eq!(back.records[0], gap);
    }

    #[test]
    fn notes_have_no_events_key() {
        let TraceRecord::Other(v) = note("x", json!({"a": 1})) else {
            panic!("not a note")
        };
        assert_eq!(v, json!({"kind": "note", "note": "x", "a": 1}));
        assert!(v.get("events").is_none());
    }
}
