//! A short plain explanation of each count that differs between two traces: the counts, then
//! the first event on the side with more that the other side does not share, said as what
//! happened ("llmd lost 7 blocks on A and 0 on B: on A, batch 12 delivers 159301…791386 before
//! its parent 166429…151050; on B the parent comes first").
//!
//! Blocks are named by their hash shortened in the middle (the first and last 6 digits), the
//! form the debugger shows; events by `#index` and their batch's 0-based ordinal.

use serde::Serialize;

use super::align::Alignment;
use super::side::{Side, Violation, NONE};
use super::TraceDiff;
use crate::analysis::{Rule, UnreachablePrefix};
use crate::consumers::ConsumerKind;
use crate::text::Count;

/// A count that differs between trace A and trace B, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// What is counted: `events`, a rule name, or `<router> blocks lost`.
    pub count: String,
    /// The count in A.
    pub a: usize,
    /// The count in B.
    pub b: usize,
    /// One plain sentence: both counts and the first event that makes the difference.
    pub text: String,
}

/// A block hash as the debugger shows it: decimal, longer than 13 characters shortened to its
/// first and last 6 digits around an ellipsis.
pub fn short_hash(h: u64) -> String {
    let s = h.to_string();
    if s.len() <= 13 {
        return s;
    }
    format!("{}…{}", &s[..6], &s[s.len() - 6..])
}

/// One direction of a comparison: the side with more (`x`, named `xn`) and the other.
struct Dir<'s> {
    x: &'s Side,
    y: &'s Side,
    xn: &'static str,
    yn: &'static str,
    /// Whether `x` is A (partners are looked up A → B) or B.
    x_is_a: bool,
    al: &'s Alignment,
}

impl Dir<'_> {
    /// The partner on `y` of `x`'s event `i`.
    fn partner(&self, i: usize) -> Option<usize> {
        if self.x_is_a {
            self.al.partner_in_b(i)
        } else {
            self.al.partner_in_a(i)
        }
    }

    /// The batch ordinal of `x`'s event `i`.
    fn batch(&self, i: usize) -> u32 {
        self.x.row(i).map_or(0, |r| r.batch)
    }

    /// "on A, batch 12 delivers C before its parent P" for a child-before-parent violation
    /// `f` (with what the other side does with the same two events), or its message.
    fn violation(&self, f: &Violation) -> String {
        let (xn, yn) = (self.xn, self.yn);
        let event = f.event as usize;
        let batch = self.batch(event);
        let child = f.first.map_or_else(String::new, short_hash);
        match f.parent {
            Some(p) => {
                let mut s = format!(
                    "on {xn}, batch {batch} delivers {child} before its parent {}",
                    short_hash(p)
                );
                let (c, p) = (
                    self.partner(event),
                    (f.related != NONE)
                        .then_some(f.related as usize)
                        .and_then(|r| self.partner(r)),
                );
                s += &match (c, p) {
                    (None, _) => format!("; {yn} does not deliver {child}"),
                    (Some(c), Some(p)) if p < c => format!("; on {yn} the parent comes first"),
                    (Some(c), _) if self.y.rule(c).is_some() => format!(
                        "; on {yn} it breaks {} instead",
                        self.y.rule(c).map_or("", |r| r.name())
                    ),
                    (Some(_), _) => format!("; on {yn} it breaks no ordering rule"),
                };
                s
            }
            None => self.message(event, f.message.as_deref().unwrap_or("")),
        }
    }

    /// "on A, #7 in batch 2: MESSAGE" for a finding at event `event`.
    fn message(&self, event: usize, message: &str) -> String {
        format!(
            "on {}, #{event} in batch {}: {message}",
            self.xn,
            self.batch(event)
        )
    }

    /// The first finding of `rule` on `x` that `y` does not share, said (see
    /// [`Dir::violation`]); the first of all when `y` shares every one.
    fn first(&self, rule: Rule) -> Option<String> {
        if !rule.is_reorder() {
            // `y` flags events with ordering rules only: the first finding is not shared.
            let (_, event, message) = self.x.firsts.iter().find(|f| f.0 == rule)?;
            return Some(self.message(*event, message));
        }
        let mut mine = self.x.violations.iter().filter(|f| f.rule == rule);
        let unshared = mine
            .clone()
            .find(|f| self.partner(f.event as usize).and_then(|j| self.y.rule(j)) != Some(rule));
        unshared.or_else(|| mine.next()).map(|f| self.violation(f))
    }

    /// Why `router` lost root `r` on `x`: the ordering finding there, else the parent it
    /// could not attach to; and what `router` did with the same event on `y`.
    fn root(&self, router: ConsumerKind, r: &UnreachablePrefix) -> String {
        let (xn, yn) = (self.xn, self.yn);
        let name = router.as_str();
        let at = self
            .x
            .violations
            .iter()
            .find(|f| f.event as usize == r.event && f.parent.is_some());
        let mut s = match at {
            Some(f) => self.violation(f),
            None => {
                let block = r.first_block.map_or_else(String::new, short_hash);
                let why = match r.missing_parent {
                    Some(p) => format!(" whose parent {} it does not hold", short_hash(p)),
                    None => String::new(),
                };
                let s = format!(
                    "on {xn}, {name} drops {block} in batch {}{why}",
                    self.batch(r.event)
                );
                match self
                    .partner(r.event)
                    .and_then(|j| self.y.verdict_kind(router, j))
                {
                    Some(v) => format!("{s}; on {yn} it is {}", v.as_str()),
                    None => format!("{s}; {yn} does not deliver it"),
                }
            }
        };
        if r.events > 1 {
            s += &format!(
                " ({} lost with it on {xn})",
                Count(r.events - 1, "event", "events")
            );
        }
        s
    }
}

/// The explanation of every count of `d` that differs (events, findings per rule, blocks
/// lost per router), in that order.
pub(crate) fn explain(a: &Side, b: &Side, d: &TraceDiff, al: &Alignment) -> Vec<Explanation> {
    let dir = |a_more: bool| {
        if a_more {
            Dir {
                x: a,
                y: b,
                xn: "A",
                yn: "B",
                x_is_a: true,
                al,
            }
        } else {
            Dir {
                x: b,
                y: a,
                xn: "B",
                yn: "A",
                x_is_a: false,
                al,
            }
        }
    };
    let mut out = Vec::new();
    let (na, nb) = (a.len(), b.len());
    if na != nb || al.only_in_a() + al.only_in_b() > 0 {
        let mut text = format!(
            "events: {na} on A and {nb} on B; {} only on A, {} only on B",
            al.only_in_a(),
            al.only_in_b()
        );
        let first_a = (0..na)
            .find(|i| al.partner_in_b(*i).is_none())
            .map(|i| (a, "A", i));
        let first_b = (0..nb)
            .find(|j| al.partner_in_a(*j).is_none())
            .map(|j| (b, "B", j));
        if let Some((s, n, i)) = first_a.or(first_b) {
            if let Some(r) = s.row(i) {
                let block = r
                    .first()
                    .map_or_else(String::new, |h| format!(" of {}", short_hash(h)));
                text += &format!(
                    " (first: {n}'s #{i} in batch {}, {}{block})",
                    r.batch,
                    r.type_name()
                );
            }
        }
        out.push(Explanation {
            count: "events".into(),
            a: na,
            b: nb,
            text,
        });
    }
    for r in d.rules.iter().filter(|r| r.a != r.b) {
        let dir = dir(r.a > r.b);
        let mut text = format!("{}: {} on A and {} on B", r.rule.name(), r.a, r.b);
        if let Some(s) = dir.first(r.rule) {
            text += ": ";
            text += &s;
        }
        out.push(Explanation {
            count: r.rule.name().into(),
            a: r.a,
            b: r.b,
            text,
        });
    }
    for l in d
        .losses
        .iter()
        .filter(|l| l.a_blocks_lost != l.b_blocks_lost)
    {
        let Some(router) = ConsumerKind::parse(&l.consumer) else {
            continue;
        };
        let dir = dir(l.a_blocks_lost > l.b_blocks_lost);
        let mut text = format!(
            "{} lost {} on A and {} on B",
            l.consumer,
            Count(l.a_blocks_lost, "block", "blocks"),
            l.b_blocks_lost
        );
        let roots = dir
            .x
            .loss(router)
            .map_or(&[][..], |s| &s.unreachable_prefixes);
        // The first root whose event the other side does not lose.
        let unshared = roots.iter().find(|r| {
            dir.partner(r.event)
                .and_then(|j| dir.y.verdict_kind(router, j))
                .is_none_or(|v| !v.is_loss())
        });
        if let Some(r) = unshared.or(roots.first()) {
            text += ": ";
            text += &dir.root(router, r);
        }
        out.push(Explanation {
            count: format!("{} blocks lost", l.consumer),
            a: l.a_blocks_lost,
            b: l.b_blocks_lost,
            text,
        });
    }
    out
}
