//! One line about an event, for the timeline's hover tooltip.

use super::*;
use crate::text::{mid_ellipsis, HASH_CHARS};
use kvscope_core::consumers::{ConsumerKind, VerdictKind};
use kvscope_core::replay::RouterLens;

impl Model {
    /// The timeline axis' second line under event `i`: its batch and the time since the first
    /// batch (`batch 12 · +350 ms`, `batch 40 · +2.25 s`).
    pub fn axis_label(&self, i: u32) -> String {
        let b = format!("batch {}", self.batch_ordinal(i));
        match self.seconds_at(i) {
            Some(s) if s.abs() < 1.0 => format!("{b} · +{} ms", crate::fixed(s * 1000.0, 0)),
            Some(s) => format!("{b} · +{} s", crate::fixed(s, 2)),
            None => b,
        }
    }

    /// What event `i` is, in one line: index, type, lane, first block and parent, the rules it
    /// breaks and what the routers finally did with it (only `router`'s verdict when one is
    /// chosen; otherwise the routers that did not apply it):
    /// `#2 BlockStored · CPU · block 4294967298 · parent 4294967297 · child-before-parent-in-job
    /// · llmd dropped_orphan`.
    pub fn describe(&self, i: u32, router: Option<ConsumerKind>) -> String {
        let short =
            |h: &kvscope_core::hash::BlockHash| mid_ellipsis(&h.to_display_string(), HASH_CHARS);
        let lane = self
            .lane_of
            .get(i as usize)
            .and_then(|l| self.lanes.get(*l as usize))
            .map(Lane::title);
        let mut parts = Vec::new();
        let ev = self.with_event(i, |_, ev, _| {
            let mut p = vec![format!("#{i} {}", ev.type_name())];
            p.extend(lane);
            let hashes = ev.block_hashes();
            if let Some(h) = hashes.first() {
                let more = match hashes.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                p.push(format!("block {}{more}", short(h)));
            }
            if let KvEvent::BlockStored(s) = ev {
                p.push(match &s.parent_block_hash {
                    Some(h) => format!("parent {}", short(h)),
                    None => "root block".to_owned(),
                });
            }
            p
        });
        parts.extend(ev.unwrap_or_default());
        let mut rules: Vec<&str> = Vec::new();
        for v in self.violations_at(i) {
            if !rules.contains(&v.rule) {
                rules.push(v.rule);
            }
        }
        if !rules.is_empty() {
            parts.push(rules.join(", "));
        }
        if let Some(r) = self.replay() {
            let a = r.analysis();
            let verdict = |k: ConsumerKind| RouterLens::new(a, k).and_then(|l| l.verdict(i));
            let said: Vec<String> = match router {
                Some(k) => verdict(k)
                    .map(|v| format!("{} {}", k.as_str(), v.as_str()))
                    .into_iter()
                    .collect(),
                None => a
                    .config
                    .consumers
                    .iter()
                    .filter_map(|k| Some((k, verdict(*k)?)))
                    .filter(|(_, v)| {
                        !matches!(
                            v,
                            VerdictKind::Applied | VerdictKind::Removed | VerdictKind::Cleared
                        )
                    })
                    .map(|(k, v)| format!("{} {}", k.as_str(), v.as_str()))
                    .collect(),
            };
            if said.is_empty() && router.is_none() {
                parts.push("every router applied it".to_owned());
            }
            parts.extend(said);
        }
        parts.join(" · ")
    }
}
