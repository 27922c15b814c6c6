//! The search box's query language over the view-model's events.

use super::*;

/// A search query: terms joined by `&&` (or spaces), each `field=value` or free text.
/// Fields: `type`, `tier`, `source`, `job`, `seq`, `hash` (any block or parent hash, decimal or
/// hex), `rule`, `req`. Free text matches the type, tier, source or any hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    terms: Vec<(Option<String>, String)>,
}

impl Query {
    /// Parse a query string (never fails; unknown fields match nothing).
    pub fn parse(s: &str) -> Query {
        let terms = s
            .split("&&")
            .flat_map(|part| part.split_whitespace())
            .filter(|t| !t.is_empty())
            .map(|t| match t.split_once('=') {
                Some((k, v)) => (
                    Some(k.trim().to_ascii_lowercase()),
                    v.trim().to_ascii_lowercase(),
                ),
                None => (None, t.to_ascii_lowercase()),
            })
            .collect();
        Query { terms }
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether event `i` of `m` matches every term.
    pub fn matches(&self, m: &Model, t: &Trace, i: u32) -> bool {
        let Some(r) = m.events.get(i as usize) else {
            return false;
        };
        let Some(b) = batch_of(t, r) else {
            return false;
        };
        let Some(ev) = b.events.get(r.pos as usize) else {
            return false;
        };
        let prov = b.provenance.as_ref().and_then(|p| p.get(r.pos as usize));
        let lane = m
            .lane_of
            .get(i as usize)
            .and_then(|l| m.lanes.get(*l as usize));
        let hash_hit = |v: &str| {
            let mut hashes = ev.block_hashes().iter().collect::<Vec<_>>();
            if let KvEvent::BlockStored(s) = ev {
                hashes.extend(s.parent_block_hash.iter());
            }
            hashes.iter().any(|h| {
                let v = v.trim_start_matches("0x");
                h.to_display_string() == v
                    || h.to_hex_string()
                        .trim_start_matches("0x")
                        .trim_start_matches('0')
                        == v.trim_start_matches('0')
            })
        };
        self.terms.iter().all(|(k, v)| match k.as_deref() {
            Some("type") => ev.type_name().to_ascii_lowercase().contains(v.as_str()),
            Some("tier") => lane.is_some_and(|l| l.label.to_ascii_lowercase() == *v),
            Some("source") => b.source.to_ascii_lowercase() == *v,
            Some("job") => prov
                .and_then(|p| p.job_id)
                .is_some_and(|j| j.to_string() == *v),
            Some("req") => prov
                .and_then(|p| p.req_id.as_deref())
                .is_some_and(|q| q.to_ascii_lowercase() == *v),
            Some("seq") => b.seq.to_string() == *v,
            Some("hash") => hash_hit(v),
            Some("rule") => m.violations_at(i).any(|x| x.rule == *v),
            Some(_) => false,
            None => {
                ev.type_name().to_ascii_lowercase().contains(v.as_str())
                    || lane.is_some_and(|l| l.label.to_ascii_lowercase() == *v)
                    || b.source.to_ascii_lowercase() == *v
                    || hash_hit(v)
            }
        })
    }
}

impl Model {
    /// The first event after `from` (wrapping) matching `query` (see [`Query`]).
    pub fn search(&self, query: &Query, from: Option<u32>) -> Option<u32> {
        let n = self.events.len() as u32;
        if n == 0 || query.is_empty() {
            return None;
        }
        let start = from.map(|f| f.saturating_add(1)).unwrap_or(0);
        self.with_trace(|t| {
            (start..n)
                .chain(0..start.min(n))
                .find(|&i| query.matches(self, t, i))
        })
    }
}
