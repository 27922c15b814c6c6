//! `kvscope check`'s report in its three formats (`docs/cli.md`, check report):
//!
//! - **text**, for a person: a summary first (per rule: level, count, first occurrence; per
//!   router: events and blocks lost, unreachable prefixes), then at most `--max-findings`
//!   findings per rule, then how many more there are;
//! - **json**, for programs: one compact JSON document, complete (every finding);
//! - **github**: GitHub Actions workflow commands (`::error ...`, `::warning ...`), one per
//!   shown finding, so `check` gates a CI job natively.
//!
//! The analysis decides; this module only renders what it found. The findings stay compact
//! in the [`Report`] until shown: the text and github reports render the first
//! `--max-findings` of each rule, and the JSON report renders each finding straight to the
//! output, one at a time.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Context as _;
use kvscope_core::analysis::{Finding, Level, Report, Rule};
use kvscope_core::text::{Count, Thousands};

/// How many findings of each rule the text and github reports show: `Some(n)`, or `None` =
/// all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxFindings(pub Option<usize>);

impl Default for MaxFindings {
    fn default() -> Self {
        MaxFindings(Some(20))
    }
}

/// Parse `--max-findings`: a number (0 = summary only) or `all`.
pub fn parse_max_findings(s: &str) -> Result<MaxFindings, String> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(MaxFindings(None));
    }
    s.parse::<usize>()
        .map(|n| MaxFindings(Some(n)))
        .map_err(|_| format!("{s:?} is not a number of findings or `all`"))
}

/// Rules about whether the trace itself is whole (lost or recovered batches), and the routing
/// preconditions (one of them explains thousands of losses): what every other finding rests
/// on, so they come first in the summary and the findings.
fn is_precondition(rule: Rule) -> bool {
    matches!(rule, Rule::SeqGap | Rule::SeqGapRecovered) || rule.is_routing_precondition()
}

/// The rules in report order: preconditions first, then the analysis' own order.
fn report_order() -> impl Iterator<Item = Rule> {
    let pre = Rule::ALL.into_iter().filter(|r| is_precondition(*r));
    pre.chain(Rule::ALL.into_iter().filter(|r| !is_precondition(*r)))
}

/// One rule's findings: how many, the first (rendered) and the ones shown (rendered).
struct RuleFindings {
    rule: Rule,
    level: Level,
    total: usize,
    first: Finding,
    shown: Vec<Finding>,
}

/// The findings grouped per rule, in report order, with at most `max` rendered per rule (and
/// the first, for the summary); rules without findings left out. One pass over the compact
/// findings: only what is shown is rendered.
fn by_rule(a: &Report, max: MaxFindings) -> Vec<RuleFindings> {
    let mut first: Vec<Option<Finding>> = vec![None; Rule::ALL.len()];
    let mut shown: Vec<Vec<Finding>> = vec![Vec::new(); Rule::ALL.len()];
    for f in a.findings.iter() {
        let r = f.rule as usize;
        let (Some(first), Some(shown)) = (first.get_mut(r), shown.get_mut(r)) else {
            continue;
        };
        let room = max.0.is_none_or(|m| shown.len() < m);
        if !room && first.is_some() {
            continue;
        }
        let rendered = f.render();
        if first.is_none() {
            *first = Some(rendered.clone());
        }
        if room {
            shown.push(rendered);
        }
    }
    report_order()
        .filter_map(|rule| {
            let first = first.get_mut(rule as usize)?.take()?;
            Some(RuleFindings {
                rule,
                level: first.level,
                total: a.findings.count(rule),
                first,
                shown: shown.get_mut(rule as usize).map(std::mem::take)?,
            })
        })
        .collect()
}

fn count(a: &Report, level: Level) -> usize {
    a.findings.count_level(level)
}

/// How many findings a rule shows and how many it leaves out.
fn shown(max: MaxFindings, total: usize) -> (usize, usize) {
    let n = max.0.map_or(total, |m| m.min(total));
    (n, total - n)
}

fn level_word(l: Level) -> &'static str {
    match l {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "allowed",
    }
}

/// Where a finding is, in words: `line 3, event 2` (msgpack: `batch 3, event 2`).
fn location(f: &Finding, msgpack: bool) -> String {
    let unit = if msgpack { "batch" } else { "line" };
    format!("{unit} {}, event {}", f.line, f.event)
}

fn render_finding(out: &mut String, f: &Finding, msgpack: bool) {
    let _ = writeln!(
        out,
        "{}[{}]: {} (index {} in batch), source {:?}: {}",
        level_word(f.level),
        f.rule,
        location(f, msgpack),
        f.index,
        f.source,
        f.message
    );
    if !f.hashes.is_empty() || f.parent.is_some() {
        let hashes: Vec<String> = f.hashes.iter().map(u64::to_string).collect();
        let _ = write!(out, "    hashes: [{}]", hashes.join(", "));
        if let Some(p) = f.parent {
            let _ = write!(out, "  parent: {p}");
        }
        out.push('\n');
    }
    if !f.verdicts.is_empty() {
        let parts: Vec<String> = f
            .verdicts
            .iter()
            .map(|(c, v)| match f.cascade.get(c).copied().unwrap_or(0) {
                0 => format!("{c}: {}", v.as_str()),
                casc => format!("{c}: {} (cascade {casc})", v.as_str()),
            })
            .collect();
        let _ = writeln!(out, "    consumers: {}", parts.join(", "));
    }
}

/// The text report. `msgpack` says the input was a msgpack stream (locations are batch
/// numbers, not lines).
pub fn text(a: &Report, name: &str, msgpack: bool, max: MaxFindings) -> String {
    let (deny, warn) = (count(a, Level::Deny), count(a, Level::Warn));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kvscope check {name}: {}, {}, {}: {}, {}",
        Count(a.events, "event", "events"),
        Count(a.sources.len(), "source", "sources"),
        Count(a.jobs, "job", "jobs"),
        Count(deny, "error", "errors"),
        Count(warn, "warning", "warnings"),
    );
    let groups = by_rule(a, max);
    if !groups.is_empty() {
        out.push_str("\nfindings per rule (level, count, first occurrence):\n");
        let width = groups
            .iter()
            .map(|g| g.rule.name().len())
            .max()
            .unwrap_or(0);
        let totals: Vec<String> = groups
            .iter()
            .map(|g| Thousands(g.total).to_string())
            .collect();
        let count_width = totals.iter().map(String::len).max().unwrap_or(0).max(6);
        for (g, total) in groups.iter().zip(&totals) {
            let _ = writeln!(
                out,
                "  {:<width$}  {:<7}  {total:>count_width$}  first at {}, source {:?}",
                g.rule.name(),
                level_word(g.level),
                location(&g.first, msgpack),
                g.first.source,
            );
        }
    }
    out.push_str("\nrouter losses (events lost, blocks lost, unreachable prefixes):\n");
    for l in a.losses() {
        let _ = write!(
            out,
            "  {:<7} {}, {} lost; {}",
            l.consumer(),
            Count(l.events_lost(), "event", "events"),
            Count(l.blocks_lost(), "block", "blocks"),
            Count(
                l.prefix_count(),
                "unreachable prefix",
                "unreachable prefixes"
            ),
        );
        if l.pending_at_end() > 0 {
            let events = Count(l.pending_at_end(), "event", "events");
            let _ = write!(out, "; {events} still pending");
        }
        out.push('\n');
    }
    for g in &groups {
        let (_, more) = shown(max, g.total);
        out.push('\n');
        for f in &g.shown {
            render_finding(&mut out, f, msgpack);
        }
        if more > 0 {
            let _ = writeln!(
                out,
                "... {} more (see --json or --max-findings all)",
                Thousands(more)
            );
        }
    }
    out
}

/// Write the JSON report to `out`: one compact document with every finding, each rendered
/// from its compact record as it is written (the same bytes as serialising the whole
/// document at once: `events`, `findings`, `losses`, `rules`, `deny`, `warn`).
pub fn write_json(a: &Report, out: &mut dyn Write) -> anyhow::Result<()> {
    let rules: Vec<serde_json::Value> = Rule::ALL
        .iter()
        .map(|r| {
            serde_json::json!({
                "rule": r.name(),
                "level": a.config.rules.level(*r).name(),
                "explanation": r.explain(),
            })
        })
        .collect();
    let mut buf = Vec::with_capacity(1 << 16);
    let _ = write!(buf, "{{\"events\":{},\"findings\":[", a.events);
    for (k, f) in a.findings.iter().enumerate() {
        if k > 0 {
            buf.push(b',');
        }
        serde_json::to_writer(&mut buf, &f.render()).context("serialising a finding")?;
        if buf.len() >= 1 << 16 {
            out.write_all(&buf).context("writing stdout")?;
            buf.clear();
        }
    }
    buf.extend_from_slice(b"],\"losses\":");
    // The losses straight to `out`, each prefix rebuilt as it is written (a trace can have a
    // loss root per event per router: not one buffer of all of them).
    out.write_all(&buf).context("writing stdout")?;
    buf.clear();
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
        let losses: Vec<_> = a.losses().collect();
        serde_json::to_writer(&mut w, &losses).context("writing the losses")?;
        w.flush().context("writing stdout")?;
    }
    buf.extend_from_slice(b",\"rules\":");
    serde_json::to_writer(&mut buf, &rules).context("serialising the rules")?;
    let _ = writeln!(
        buf,
        ",\"deny\":{},\"warn\":{}}}",
        count(a, Level::Deny),
        count(a, Level::Warn)
    );
    out.write_all(&buf).context("writing stdout")?;
    out.flush().context("writing stdout")
}

/// Escape the message of a workflow command (`%`, CR, LF).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a property value of a workflow command (also `:` and `,`).
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands: one `::error` / `::warning` per shown finding (at most
/// `max` per rule), then one `::notice` with the totals. A JSON Lines trace's findings point
/// at their line; a msgpack stream has no lines, so its findings name the file only.
pub fn github(a: &Report, file: &str, msgpack: bool, max: MaxFindings) -> String {
    let mut out = String::new();
    let mut hidden = 0;
    for g in by_rule(a, max) {
        let (_, more) = shown(max, g.total);
        hidden += more;
        for f in &g.shown {
            let command = match f.level {
                Level::Deny => "error",
                _ => "warning",
            };
            let mut props = format!("file={}", escape_property(file));
            if !msgpack && f.line > 0 {
                let _ = write!(props, ",line={}", f.line);
            }
            let _ = write!(props, ",title={}", escape_property(f.rule.name()));
            let text = format!(
                "{}: source {:?}: {}",
                location(f, msgpack),
                f.source,
                f.message
            );
            let _ = writeln!(out, "::{command} {props}::{}", escape_data(&text));
        }
    }
    let mut totals = format!(
        "kvscope check: {}, {}",
        Count(count(a, Level::Deny), "error", "errors"),
        Count(count(a, Level::Warn), "warning", "warnings"),
    );
    if hidden > 0 {
        let _ = write!(
            totals,
            "; {} not annotated (see --json or --max-findings all)",
            Count(hidden, "more finding", "more findings")
        );
    }
    let _ = writeln!(
        out,
        "::notice title=kvscope check::{}",
        escape_data(&totals)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_findings_parses_numbers_and_all() {
        assert_eq!(parse_max_findings("all"), Ok(MaxFindings(None)));
        assert_eq!(parse_max_findings("0"), Ok(MaxFindings(Some(0))));
        assert_eq!(parse_max_findings("7"), Ok(MaxFindings(Some(7))));
        assert!(parse_max_findings("-1").is_err());
        assert!(parse_max_findings("lots").is_err());
    }

    #[test]
    fn workflow_command_escapes() {
        assert_eq!(escape_data("50% a\nb\r"), "50%25 a%0Ab%0D");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
    }

    #[test]
    fn preconditions_come_first() {
        let order: Vec<Rule> = report_order().collect();
        assert_eq!(order.len(), Rule::ALL.len());
        assert!(order[..9].iter().all(|r| is_precondition(*r)));
        assert!(order[9..].iter().all(|r| !is_precondition(*r)));
    }
}
