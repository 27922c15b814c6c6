//! The precondition findings: one per condition, with its counts and the upstream behaviour
//! that makes it cost routing (`docs/rules.md`, "Routing preconditions").

use super::{At, Context, Preconditions, Tally, LISTED_HASHES};
use crate::analysis::{Finding, Rule};
use crate::consumers::{AnyConsumer, BlockSizes, ConsumerKind};
use crate::text::Count;

impl Preconditions {
    /// The findings, once every event was delivered (the models still alive).
    pub(crate) fn findings(&mut self, cx: &Context<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        self.undecodable_findings(cx, &mut out);
        self.missing_kind_findings(cx, &mut out);
        self.hash_seed_findings(cx, &mut out);
        self.block_size_findings(cx, &mut out);
        self.silent_findings(cx, &mut out);
        self.overflow_findings(cx, &mut out);
        stale_findings(cx, &self.restarts, &mut out);
        out
    }

    fn undecodable_findings(&self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        for ((kind, _, cause), t) in &self.undecodable.list {
            let why = match *cause {
                "small_int_hash" => "a block or parent hash below 2^32: vLLM writes it as a small msgpack integer, which llm-d's getHashAsUint64 rejects",
                "empty_bytes_hash" => "an empty bytes hash, which llm-d's getHashAsUint64 rejects",
                "extra_keys_entry_not_array" => "an extra_keys entry that is neither an array nor nil, which llm-d's convertExtraKeys rejects",
                "extra_keys_map_key_not_string" => "a map in extra_keys with a key that is not a string, bytes or nil, which llm-d's msgpack decoder (map[string]any) rejects",
                "bytes_hash" => "a bytes block hash, which Dynamo's BlockHashValue (i64 | u64) cannot hold",
                other => other,
            };
            out.push(cx.finding(
                Rule::UndecodableBatch,
                t.first,
                &t.hashes,
                format!(
                    "{}: {} of this source cannot be decoded ({cause}: {why}): all {} of them are dropped ({})",
                    kind.as_str(),
                    Count(t.batches, "batch", "batches"),
                    Count(t.events, "event", "events"),
                    Count(t.blocks, "stored block", "stored blocks"),
                ),
            ));
        }
    }

    fn missing_kind_findings(&self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        for (_, t) in &self.missing_kind.list {
            if t.events == 0 {
                continue;
            }
            out.push(cx.finding(
                Rule::MissingSpecKind,
                t.first,
                &t.hashes,
                format!(
                    "llmd: {} ({}, {} {}) carry no kv_cache_spec_kind and llm-d has not learnt the group's kind, so it ignores them (unsupported_cache_kind) and skipped {} of unknown groups; vLLM sends the kind since #40984",
                    Count(t.events, "grouped store", "grouped stores"),
                    Count(t.blocks, "block", "blocks"),
                    if t.notes.len() == 1 { "group" } else { "groups" },
                    t.notes.join(", "),
                    Count(t.other, "grouped removal", "grouped removals"),
                ),
            ));
        }
    }

    fn hash_seed_findings(&self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        for m in &self.mismatches {
            let salt = if m.salt_possible {
                "; the events carry no extra_keys, so a cache salt (cache_salt) on one side's requests would explain it too"
            } else {
                ""
            };
            out.push(
                cx.finding(
                    Rule::HashSeedMismatch,
                    m.at,
                    &m.hashes,
                    format!(
                        "sources {:?} and {:?} store the same leading tokens (a root block with identical token_ids, lora_name and block_size) under different hashes ({} vs {}, {}): their NONE_HASH seed, PYTHONHASHSEED or hash algorithm differ, so no prefix can match across them{salt}",
                        cx.source(m.other_source),
                        cx.source(m.at.source),
                        m.hashes[1],
                        m.hashes[0],
                        Count(m.roots, "root block", "root blocks"),
                    ),
                )
                .related(m.other_event),
            );
        }
    }

    fn block_size_findings(&self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        let routers = [
            (
                ConsumerKind::Llmd,
                cx.consumer_config.llmd_canonical_block_size,
                "--llmd-block-size",
            ),
            (
                ConsumerKind::Dynamo,
                cx.consumer_config.dynamo_kv_block_size,
                "--dynamo-block-size",
            ),
        ];
        let sources = 0..cx.index.sources.len() as u32;
        for (kind, setting, flag) in routers {
            if !cx.kinds.contains(&kind) {
                continue;
            }
            let resolved = BlockSizes::resolve(setting, &cx.index.engine_block_sizes);
            for src in sources.clone() {
                let n = resolved.for_source(src).max(1);
                let sizes: Vec<(u32, &Tally)> = self
                    .sizes
                    .list
                    .iter()
                    .filter(|((s, _), _)| *s == src)
                    .map(|((_, size), t)| (*size, t))
                    .collect();
                let fits = |size: u32| match kind {
                    ConsumerKind::Llmd => size.is_multiple_of(n),
                    _ => size == n,
                };
                let bad: Vec<&(u32, &Tally)> = sizes.iter().filter(|(s, _)| !fits(*s)).collect();
                let Some(first) = bad.iter().map(|(_, t)| t.first).min_by_key(|a| a.event) else {
                    continue;
                };
                let stores: usize = bad.iter().map(|(_, t)| t.events).sum();
                let hashes = bad
                    .iter()
                    .find(|(_, t)| t.first.event == first.event)
                    .map_or(&[][..], |(_, t)| t.hashes.as_slice());
                let list = |v: &[&(u32, &Tally)]| {
                    v.iter()
                        .map(|(s, t)| format!("{s} ({})", Count(t.events, "store", "stores")))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let how = if setting.is_some() {
                    "configured"
                } else {
                    "auto: the source's first store"
                };
                let effect = match kind {
                    ConsumerKind::Llmd => "llm-d ignores a store smaller than its block size as sub_canonical (its children then orphan) and drops the partial tail of one that is not a multiple of it",
                    _ => "Dynamo's create_stored_blocks stops at the first block of another size (truncated)",
                };
                let mut msg = format!(
                    "{}: {flag} {n} ({how}) does not fit {} of this source with block size {}: {effect}",
                    kind.as_str(),
                    Count(stores, "store", "stores"),
                    list(&bad),
                );
                if sizes.len() > 1 {
                    let all: Vec<&(u32, &Tally)> = sizes.iter().collect();
                    let g = sizes.iter().fold(0, |g, (s, _)| gcd(g, *s));
                    let advice = match kind {
                        ConsumerKind::Llmd => {
                            format!("only a {flag} dividing every one of them (at most {g}) fits")
                        }
                        _ => format!("no single {flag} fits"),
                    };
                    msg.push_str(&format!(
                        "; the source mixes block sizes {}: {advice}",
                        list(&all)
                    ));
                }
                out.push(cx.finding(Rule::RouterBlockSizeMismatch, first, hashes, msg));
            }
        }
    }

    fn silent_findings(&mut self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        // Ignored entirely.
        for ((kind, _), t) in &self.ignored.list {
            if t.events > 0 && t.other == t.events {
                out.push(cx.finding(
                    Rule::SilentSource,
                    t.first,
                    &t.hashes,
                    format!(
                        "{}: ignores every one of this source's {} ({}; {}): the router never indexes this source",
                        kind.as_str(),
                        Count(t.events, "store", "stores"),
                        Count(t.blocks, "block", "blocks"),
                        t.notes.join(", ")
                    ),
                ));
            }
        }
        // A silence counts only while other sources publish: none with one source (and no
        // copies of every batch's time to sort: 40 bytes a batch at the end of a long trace).
        if cx.index.sources.len() < 2 {
            return;
        }
        // Silences, in whole microseconds (no float formatting or float sorts: wasm size).
        let factor = u64::from(cx.silent_factor.max(1));
        let mut all: Vec<u64> = self.batches.iter().map(|b| b.ts).collect();
        crate::sort::sort_u64(&mut all);
        let Some(&end) = all.last() else {
            return;
        };
        // Batches in the open interval (a, b), or (a, b] when `closed`.
        let between = |a: u64, b: u64, closed: bool| {
            let lo = all.partition_point(|t| *t <= a);
            let hi = all.partition_point(|t| *t < b || (closed && *t == b));
            hi.saturating_sub(lo)
        };
        for src in 0..cx.index.sources.len() as u32 {
            let mut own: Vec<(u64, u32)> = Vec::new();
            for (i, b) in self.batches.iter().enumerate() {
                if b.source == src {
                    own.push((b.ts, i as u32));
                }
            }
            if own.len() < 3 {
                continue;
            }
            crate::sort::sort_keyed(&mut own);
            let mut gaps: Vec<u64> = own.windows(2).map(|w| w[1].0 - w[0].0).collect();
            crate::sort::sort_u64(&mut gaps);
            let median = gaps[gaps.len() / 2];
            if median == 0 {
                continue;
            }
            let limit = factor.saturating_mul(median);
            let at = |i: u32| self.batches.get(i as usize).map(|b| b.at());
            // (duration, where, others, trailing)
            let mut silences: Vec<(u64, Option<At>, usize, bool)> = Vec::new();
            for w in own.windows(2) {
                let d = w[1].0 - w[0].0;
                if d > limit {
                    let others = between(w[0].0, w[1].0, false);
                    if others > 0 {
                        silences.push((d, at(w[1].1), others, false));
                    }
                }
            }
            if let Some(last) = own.last() {
                let d = end - last.0;
                if d > limit {
                    let others = between(last.0, end, true);
                    if others > 0 {
                        silences.push((d, at(last.1), others, true));
                    }
                }
            }
            let mut longest = None;
            for s in &silences {
                if longest.is_none_or(|l: &(u64, Option<At>, usize, bool)| s.0 > l.0) {
                    longest = Some(s);
                }
            }
            let Some(&(d, Some(at), others, trailing)) = longest else {
                continue;
            };
            let (verb, tail) = if trailing {
                (
                    "published nothing after this batch",
                    " until the end of the trace",
                )
            } else {
                ("published nothing before this batch", "")
            };
            out.push(cx.finding(
                Rule::SilentSource,
                at,
                &[],
                format!(
                    "{verb} for {} s, {}x its median interval of {} s between batches (more than {factor}x), while other sources published {}{tail}; {} in total: a dead publisher or a lost subscription looks like this (so does an idle engine)",
                    Seconds(d),
                    d / median,
                    Seconds(median),
                    Count(others, "batch", "batches"),
                    Count(silences.len(), "such silence", "such silences"),
                ),
            ));
        }
    }

    fn overflow_findings(&self, cx: &Context<'_>, out: &mut Vec<Finding>) {
        for (_, t) in &self.overflow.list {
            out.push(cx.finding(
                Rule::PodEntryOverflow,
                t.first,
                &t.hashes,
                format!(
                    "llmd: {} of this source pushed an llm-d request key past {} (pod, tier, group) entries, and the per-key LRU silently evicted {}: llm-d forgets that those pods hold the block",
                    Count(t.events, "store", "stores"),
                    crate::consumers::llmd::PODS_PER_KEY,
                    Count(t.other, "older entry", "older entries"),
                ),
            ));
        }
    }
}

/// `stale-after-restart`: per restart llm-d did not notice, the blocks still credited.
fn stale_findings(cx: &Context<'_>, restarts: &[At], out: &mut Vec<Finding>) {
    for c in cx.consumers {
        let AnyConsumer::Llmd(m) = c else {
            continue;
        };
        for (r, hashes) in m.stale_after_restart(cx.interner) {
            if hashes.is_empty() {
                continue;
            }
            // Where the batch starts (in event order: llm-d sees the restart at its first event).
            let Some(at) = restarts
                .binary_search_by_key(&r.event, |a| a.event)
                .ok()
                .and_then(|k| restarts.get(k).copied())
            else {
                continue;
            };
            let listed = if hashes.len() > LISTED_HASHES {
                format!(" (the first {LISTED_HASHES} listed)")
            } else {
                String::new()
            };
            out.push(cx.finding(
                Rule::StaleAfterRestart,
                at,
                &hashes,
                format!(
                    "llmd: dp_rank {}: seq went back from {} to {} (publisher restart) and llm-d without replay does not notice: {} of the old incarnation stay credited to this source and were never re-announced{listed}",
                    r.dp_rank,
                    r.seq.0,
                    r.seq.1,
                    Count(hashes.len(), "block", "blocks"),
                ),
            ));
        }
    }
}

/// Microseconds shown as seconds with three decimals (integer formatting only).
struct Seconds(u64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = (self.0 + 500) / 1000;
        write!(f, "{}.{:03}", ms / 1000, ms % 1000)
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Context<'_> {
    fn source(&self, source: u32) -> &str {
        self.index
            .sources
            .get(source as usize)
            .map_or("", String::as_str)
    }

    fn finding(&self, rule: Rule, at: At, hashes: &[u64], message: String) -> Finding {
        Finding::new(rule, at.event, message)
            .at(at.line, at.pos as usize)
            .source(self.source(at.source))
            .hashes(hashes.iter().take(LISTED_HASHES).copied().collect())
    }
}
