//! One plain sentence of what happened at an event, built from its findings and the routers'
//! verdicts: what a debugger shows first ("child delivered before its parent; llmd dropped it
//! and 6 descendants; dynamo, smg kept it; ideal held it until its parent came").

use super::{Replay, RouterLens};
use crate::analysis::Rule;
use crate::consumers::VerdictKind;

impl Replay {
    /// What happened at event `i`, in one sentence: the first ordering finding there (a
    /// reorder rule, said plainly) and what each router finally did with the event (with the
    /// descendants lost with it); `None` when the event has no reorder finding.
    pub fn story(&self, i: usize) -> Option<String> {
        let step = self.step_at(i)?;
        let rule = step.findings.iter().find(|f| f.rule.is_reorder())?.rule;
        let mut parts = vec![match rule {
            Rule::ChildBeforeParentInJob
            | Rule::ChildBeforeParentAcrossJobs
            | Rule::ChildBeforeParentAmbiguous => "child delivered before its parent".to_string(),
            r => r.name().to_string(),
        }];
        let mut kept = Vec::new();
        for c in &step.verdicts {
            let name = c.consumer.as_str();
            let fin = c.final_verdict.unwrap_or(c.verdict.verdict);
            let lost_with = RouterLens::new(&self.analysis, c.consumer)
                .and_then(|l| l.root_at(i as u32).map(|r| r.events.saturating_sub(1)))
                .unwrap_or(0);
            let dropped = matches!(fin, VerdictKind::DroppedOrphan | VerdictKind::Truncated);
            let what = match fin {
                VerdictKind::Applied | VerdictKind::Removed | VerdictKind::Cleared => {
                    kept.push(name);
                    continue;
                }
                VerdictKind::DroppedOrphan | VerdictKind::Truncated => " dropped it",
                VerdictKind::Misrooted => " indexed it under the wrong parent",
                VerdictKind::Pending => " still holds it",
                VerdictKind::Replayed => " held it until its parent came",
                VerdictKind::RemoveUnknown | VerdictKind::Ignored => " ignored it",
            };
            let mut s = name.to_string() + what;
            if dropped && lost_with > 0 {
                s += " and ";
                s += &lost_with.to_string();
                s += if lost_with == 1 {
                    " descendant"
                } else {
                    " descendants"
                };
            }
            parts.push(s);
        }
        if !kept.is_empty() {
            parts.push(kept.join(", ") + " kept it");
        }
        Some(parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::AnalysisConfig;
    use crate::consumers::testkit::child_first_chain;
    use crate::replay::Replay;

    #[test]
    fn a_child_first_root_says_who_dropped_it_and_its_cascade() {
        // 3 (child of 2) and 4 (child of 3) before 2, in one job.
        let t = child_first_chain();
        let r = Replay::new(t, &AnalysisConfig::default());
        let s = r.story(1).expect("event 1 is a child delivered first");
        assert!(s.starts_with("child delivered before its parent; "), "{s}");
        assert!(s.contains("llmd dropped it and 1 descendant;"), "{s}");
        assert!(s.contains("ideal held it until its parent came"), "{s}");
        assert!(r.story(0).is_none(), "event 0 broke no rule");
    }
}
