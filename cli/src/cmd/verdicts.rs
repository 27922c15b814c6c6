//! `kvscope verdicts`: one JSON line per input event with a consumer model's verdict.

use std::io::Write;
use std::path::PathBuf;

use std::collections::VecDeque;

use anyhow::Context;
use kvscope_core::analysis::Analyzer;
use kvscope_core::consumers::{ConsumerKind, EventVerdict, VerdictKind};
use kvscope_core::trace::TraceRecord;

use super::check::{config, open, ModelArgs};
use crate::exit::BadInput;

/// Arguments of `kvscope verdicts`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace (JSON Lines or msgpack stream; auto-detected).
    pub trace: PathBuf,
    /// Consumer model (llmd, dynamo, smg, sglang, ideal).
    #[arg(long = "consumer", value_name = "NAME")]
    pub consumer: String,
    #[command(flatten)]
    pub models: ModelArgs,
}

/// One output line waiting for its event's final verdict.
struct Line {
    line: u64,
    index: usize,
    event: usize,
    kind: &'static str,
    delivered: EventVerdict,
    /// The final verdict and the event that resolved it, once a later event resolved it.
    resolved: Option<(VerdictKind, usize)>,
}

impl Line {
    /// Whether a later event may still change the verdict (a pending one, not resolved yet).
    fn open(&self) -> bool {
        self.delivered.verdict == VerdictKind::Pending && self.resolved.is_none()
    }

    fn write(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let v = &self.delivered;
        let final_kind = self.resolved.map_or(v.verdict, |r| r.0);
        let mut obj = serde_json::json!({
            "line": self.line,
            "index": self.index,
            "event": self.event,
            "type": self.kind,
            "verdict": final_kind.as_str(),
        });
        if let Some(m) = obj.as_object_mut() {
            if final_kind != v.verdict {
                m.insert("delivered_as".into(), v.verdict.as_str().into());
                if let Some((_, by)) = self.resolved {
                    m.insert("resolved_by".into(), by.into());
                }
            }
            if let Some(p) = v.missing_parent {
                m.insert("missing_parent".into(), p.into());
            }
            if let Some(r) = &v.reason {
                m.insert("reason".into(), r.as_ref().into());
            }
            if let Some(s) = &v.status {
                m.insert("status".into(), s.as_ref().into());
            }
            m.insert(
                "blocks".into(),
                serde_json::to_value(&v.blocks).context("serialising blocks")?,
            );
        }
        writeln!(out, "{obj}").context("writing to stdout")
    }
}

/// Run the command. The trace is analysed as it is read; each event's line is written once
/// its verdict is final (a pending event's when a later event resolves it, or at the end), so
/// only the lines from the oldest pending event on are held.
pub fn run(args: Args) -> anyhow::Result<()> {
    ConsumerKind::parse(&args.consumer).ok_or_else(|| {
        BadInput(format!(
            "unknown consumer {:?} (llmd, dynamo, smg, sglang, ideal)",
            args.consumer
        ))
    })?;
    let config = config(std::slice::from_ref(&args.consumer), &[], &args.models)?;
    let mut input = open(&args.trace)?;
    let mut a = Analyzer::new(&config);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Lines of events `front..`, in event order.
    let mut queue: VecDeque<Line> = VecDeque::new();
    let mut front = 0usize;
    while let Some(rec) = input.next_record()? {
        let TraceRecord::Batch(b) = &rec else {
            a.push(&rec);
            continue;
        };
        let first = a.events();
        a.push_with(&rec, &mut |i, _, v, resolved| {
            for r in resolved {
                if let Some(l) = r.event.checked_sub(front).and_then(|k| queue.get_mut(k)) {
                    l.resolved = Some((r.verdict, i));
                }
            }
            let index = i - first;
            queue.push_back(Line {
                line: b.origin,
                index,
                event: i,
                kind: b.events.get(index).map_or("", |e| e.type_name()),
                delivered: v.clone(),
                resolved: None,
            });
        });
        while queue.front().is_some_and(|l| !l.open()) {
            if let Some(l) = queue.pop_front() {
                l.write(&mut out)?;
                front += 1;
            }
        }
    }
    let _report = a.finish();
    for l in &queue {
        l.write(&mut out)?;
    }
    out.flush().context("writing to stdout")?;
    Ok(())
}
