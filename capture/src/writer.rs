//! Streaming kvscope JSON Lines writer: one record per line, flushed on demand, so a killed
//! capture loses at most what was not yet flushed (the batch being handled).

use std::io::{self, Write};

use kvscope_core::trace::{Trace, TraceRecord};
use kvscope_core::wire::jsonl;

/// Writes trace records as JSON Lines to `W`.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Wrap an output.
    pub fn new(out: W) -> Self {
        Self { out, records: 0 }
    }

    /// Append one record (one or more `\n`-terminated lines, as `kvscope_core::wire::jsonl`
    /// writes it). Not flushed.
    pub fn write(&mut self, record: TraceRecord) -> io::Result<()> {
        let text = jsonl::write_trace(&Trace {
            records: vec![record],
        });
        self.out.write_all(text.as_bytes())?;
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
