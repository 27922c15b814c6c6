//! `kvscope verdicts`: one JSON line per input event with a consumer model's verdict.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use kvscope_core::analysis::analyze_with;
use kvscope_core::consumers::{ConsumerKind, EventVerdict};

use super::check::{config, load_trace, ModelArgs};
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

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let kind = ConsumerKind::parse(&args.consumer).ok_or_else(|| {
        BadInput(format!(
            "unknown consumer {:?} (llmd, dynamo, smg, sglang, ideal)",
            args.consumer
        ))
    })?;
    let config = config(std::slice::from_ref(&args.consumer), &[], &args.models)?;
    let trace = load_trace(&args.trace)?;
    let mut lines: Vec<EventVerdict> = Vec::new();
    let mut resolved_by: Vec<Option<usize>> = Vec::new();
    let analysis = analyze_with(&trace, &config, &mut |i, _, v, resolved| {
        lines.push(v.clone());
        resolved_by.push(None);
        for r in resolved {
            if let Some(slot) = resolved_by.get_mut(r.event) {
                *slot = Some(i);
            }
        }
    });
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, v) in lines.iter().enumerate() {
        let Some((batch, ev)) = analysis.index.event(&trace, i) else {
            continue;
        };
        let pos = analysis.index.events.get(i).map_or(0, |l| l.pos);
        let final_kind = analysis.verdict_kind(kind, i).unwrap_or(v.verdict);
        let mut obj = serde_json::json!({
            "line": batch.origin,
            "index": pos,
            "event": i,
            "type": ev.type_name(),
            "verdict": final_kind.as_str(),
        });
        if let Some(m) = obj.as_object_mut() {
            if final_kind != v.verdict {
                m.insert("delivered_as".into(), v.verdict.as_str().into());
                if let Some(Some(by)) = resolved_by.get(i) {
                    m.insert("resolved_by".into(), (*by).into());
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
        writeln!(out, "{obj}").context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(())
}
