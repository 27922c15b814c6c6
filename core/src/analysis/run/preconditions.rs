//! The routing-precondition hooks of a [`Run`] (the checks: [`crate::analysis::preconditions`]).

use super::Run;
use crate::analysis::findings::Rec;
use crate::analysis::preconditions::{At, Context};
use crate::analysis::EventLoc;

impl Run {
    /// Where event `i` (at `loc`, in the batch of line `origin`) is, for the watcher.
    pub(super) fn precondition_at(&self, i: usize, loc: &EventLoc, origin: u64) -> At {
        At {
            event: i,
            line: origin,
            pos: loc.pos,
            source: loc.source,
            record: loc.record,
        }
    }

    /// Every event was delivered and the models are still alive: add the precondition
    /// findings (they get their levels, verdicts and order in the finishing stage).
    pub(super) fn precondition_findings(&mut self) {
        let cx = Context {
            index: &self.index.idx,
            consumers: &self.consumers,
            kinds: &self.config.consumers,
            consumer_config: &self.config.consumer_config,
            interner: &self.interner,
            silent_factor: self.config.silent_source_factor,
        };
        for f in self.pre.findings(&cx) {
            self.raw.push(Rec::full(f));
        }
    }
}
