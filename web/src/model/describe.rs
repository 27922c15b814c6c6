//! One line about an event, for the timeline's hover tooltip.

use super::*;
use crate::text::{mid_ellipsis, HASH_CHARS};
use kvscope_core::consumers::{ConsumerKind, VerdictKind};
use kvscope_core::replay::RouterLens;

impl Model {
    /// The timeline axis' second line under event `i`: its batch and the time since the first
    /// batch (`batch 12 · +350 ms`, `batch 40 · +2.25 s`, `batch 9000 · +4500 s`).
    pub fn axis_label(&self, i: u32) -> String {
        let mut b = format!("batch {}", self.batch_ordinal(i));
        if let Some(s) = self.seconds_at(i) {
            // Three significant digits or so: `+350 ms`, `+2.25 s`, `+62.5 s`, `+5000 s`.
            let (v, digits, unit) = match s.abs() {
                a if a < 1.0 => (s * 1000.0, 0, " ms"),
                a if a < 10.0 => (s, 2, " s"),
                a if a < 100.0 => (s, 1, " s"),
                _ => (s, 0, " s"),
            };
            b.push_str(" · +");
            b.push_str(&crate::fixed(v, digits));
            b.push_str(unit);
        }
        b
    }

    /// What event `i` is, in one line: index, type, lane, first block and parent, the rules it
    /// breaks and what the routers finally did with it (only `router`'s verdict when one is
    /// chosen; otherwise the routers that did not apply it):
    /// `#2 BlockStored · CPU · block 4294967298 · parent 4294967297 · child-before-parent-in-job
    /// · llmd dropped_orphan`.
    pub fn describe(&self, i: u32, router: Option<ConsumerKind>) -> String {
        // One string, parts pushed with `part` (cheaper in the page's wasm than a Vec joined).
        let mut out = format!("#{i}");
        let part = |out: &mut String, s: &str| {
            out.push_str(" · ");
            out.push_str(s);
        };
        let short =
            |h: &kvscope_core::hash::BlockHash| mid_ellipsis(&h.to_display_string(), HASH_CHARS);
        let lane = self
            .lane_of
            .get(i as usize)
            .and_then(|l| self.lanes.get(*l as usize))
            .map(Lane::title);
        self.with_event(i, |_, ev, _| {
            out.push(' ');
            out.push_str(ev.type_name());
            if let Some(l) = &lane {
                part(&mut out, l);
            }
            let hashes = ev.block_hashes();
            if let Some(h) = hashes.first() {
                let more = match hashes.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                part(&mut out, &format!("block {}{more}", short(h)));
            }
            if let KvEvent::BlockStored(s) = ev {
                part(
                    &mut out,
                    &match &s.parent_block_hash {
                        Some(h) => format!("parent {}", short(h)),
                        None => "root block".to_owned(),
                    },
                );
            }
        });
        let mut rules: Vec<&str> = Vec::new();
        for v in self.violations_at(i) {
            if !rules.contains(&v.rule.as_str()) {
                rules.push(&v.rule);
            }
        }
        if !rules.is_empty() {
            part(&mut out, &rules.join(", "));
        }
        if let Some(r) = self.replay() {
            let a = r.analysis();
            let mut said = false;
            for &k in &a.config.consumers {
                if router.is_some_and(|r| r != k) {
                    continue;
                }
                let Some(v) = RouterLens::new(a, k).and_then(|l| l.verdict(i)) else {
                    continue;
                };
                // Without a chosen router, only what did not simply apply the event.
                if router.is_none()
                    && matches!(
                        v,
                        VerdictKind::Applied | VerdictKind::Removed | VerdictKind::Cleared
                    )
                {
                    continue;
                }
                part(&mut out, &format!("{} {}", k.as_str(), v.as_str()));
                said = true;
            }
            if !said && router.is_none() {
                part(&mut out, "every router applied it");
            }
        }
        out
    }
}
