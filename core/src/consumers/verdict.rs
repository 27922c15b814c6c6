//! Verdicts: what a consumer did with each event and with each block of it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// What a consumer did with an event or with one block of it.
///
/// The names are the ones issue 3 uses; `cleared` is added for `AllBlocksCleared`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Indexed and reachable.
    Applied,
    /// Not indexed because the parent was unknown (`missing_parent` says which).
    DroppedOrphan,
    /// Indexed, but under the wrong parent (attached to the root): unreachable for routing.
    Misrooted,
    /// Held until the parent arrives (ideal consumer).
    Pending,
    /// A previously pending event (or block) applied once its parent arrived.
    Replayed,
    /// Partly applied: blocks after the first bad one were dropped.
    Truncated,
    /// A removal that took effect.
    Removed,
    /// A removal of a hash the consumer did not hold.
    RemoveUnknown,
    /// Deliberately skipped (`reason` says why).
    Ignored,
    /// `AllBlocksCleared` applied.
    Cleared,
}

impl VerdictKind {
    /// Every kind, in declaration (and `Ord`) order.
    pub const ALL: [VerdictKind; 10] = [
        VerdictKind::Applied,
        VerdictKind::DroppedOrphan,
        VerdictKind::Misrooted,
        VerdictKind::Pending,
        VerdictKind::Replayed,
        VerdictKind::Truncated,
        VerdictKind::Removed,
        VerdictKind::RemoveUnknown,
        VerdictKind::Ignored,
        VerdictKind::Cleared,
    ];

    /// Number of kinds (`VerdictKind as usize` is below it).
    pub const COUNT: usize = Self::ALL.len();

    /// The snake_case name used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Applied => "applied",
            VerdictKind::DroppedOrphan => "dropped_orphan",
            VerdictKind::Misrooted => "misrooted",
            VerdictKind::Pending => "pending",
            VerdictKind::Replayed => "replayed",
            VerdictKind::Truncated => "truncated",
            VerdictKind::Removed => "removed",
            VerdictKind::RemoveUnknown => "remove_unknown",
            VerdictKind::Ignored => "ignored",
            VerdictKind::Cleared => "cleared",
        }
    }

    /// Whether this outcome loses a stored block (it is not, and will not be, reachable).
    pub fn is_loss(self) -> bool {
        matches!(
            self,
            VerdictKind::DroppedOrphan | VerdictKind::Misrooted | VerdictKind::Truncated
        )
    }
}

/// The outcome for one block of an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockVerdict {
    /// The block hash (normalised to u64, llm-d style: bytes → last 8 bytes big-endian).
    pub hash: u64,
    /// What happened to it.
    pub verdict: VerdictKind,
    /// Why, for drops and skips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
}

/// A consumer's verdict on one delivered event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventVerdict {
    /// The event-level outcome.
    pub verdict: VerdictKind,
    /// For `dropped_orphan` / `misrooted` / `pending`: the parent that was not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_parent: Option<u64>,
    /// Why, for `ignored` / `truncated` and other non-obvious outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
    /// The consumer's own status name, when it has one (Dynamo's
    /// `kv_cache_events_applied{status}`: `ok`, `parent_block_not_found`, `block_not_found`,
    /// `invalid_block_sequence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Cow<'static, str>>,
    /// Per-block outcomes, in the event's block order (empty for `AllBlocksCleared`).
    #[serde(default)]
    pub blocks: Blocks,
}

/// Per-block outcomes of one event: a vector with one block inline (most events carry one
/// block), so a verdict costs no allocation. Serialises as a JSON array.
pub type Blocks = smallvec::SmallVec<[BlockVerdict; 1]>;

/// Append one block's outcome to `out`, with an optional static reason: what the models'
/// per-block loops call (one out-of-line copy of the push instead of one per site: wasm size).
#[inline(never)]
pub(crate) fn push_block(
    out: &mut Blocks,
    hash: u64,
    verdict: VerdictKind,
    reason: Option<&'static str>,
) {
    out.push(BlockVerdict {
        hash,
        verdict,
        reason: reason.map(Cow::Borrowed),
    });
}

impl EventVerdict {
    /// A verdict with the same outcome for every block.
    pub fn uniform(verdict: VerdictKind, hashes: impl IntoIterator<Item = u64>) -> Self {
        let hashes: Vec<u64> = hashes.into_iter().collect();
        Self::of(verdict, &hashes)
    }

    /// [`EventVerdict::uniform`] over a slice (what the models call: one copy of the code
    /// instead of one per iterator type).
    pub(crate) fn of(verdict: VerdictKind, hashes: &[u64]) -> Self {
        let mut blocks = Blocks::with_capacity(hashes.len());
        // Inline pushes here: this is every event's path (push_block is for the rarer ones).
        for &hash in hashes {
            blocks.push(BlockVerdict {
                hash,
                verdict,
                reason: None,
            });
        }
        Self::of_blocks(verdict, blocks)
    }

    /// A verdict with these per-block outcomes and nothing else set.
    fn of_blocks(verdict: VerdictKind, blocks: Blocks) -> Self {
        EventVerdict {
            verdict,
            missing_parent: None,
            reason: None,
            status: None,
            blocks,
        }
    }

    /// [`EventVerdict::of`] with a static reason: what the models return for skips and drops
    /// (one call instead of a builder chain moving the verdict at every site: wasm size).
    pub(crate) fn because(verdict: VerdictKind, hashes: &[u64], reason: &'static str) -> Self {
        let mut v = Self::of(verdict, hashes);
        v.reason = Some(Cow::Borrowed(reason));
        v
    }

    /// The verdict on a removal with these per-block outcomes: `removed` if any block was
    /// removed, else `remove_unknown` if any was unknown, else `ignored` for no blocks, else the
    /// first block's outcome. Shared by the models (one copy of this code).
    pub(crate) fn removal(blocks: Blocks) -> Self {
        let any = |k: VerdictKind| blocks.iter().any(|b| b.verdict == k);
        let verdict = if any(VerdictKind::Removed) {
            VerdictKind::Removed
        } else if any(VerdictKind::RemoveUnknown) {
            VerdictKind::RemoveUnknown
        } else {
            blocks.first().map_or(VerdictKind::Ignored, |b| b.verdict)
        };
        Self::of_blocks(verdict, blocks)
    }

    /// Set the reason (builder style).
    pub fn with_reason(mut self, reason: impl Into<Cow<'static, str>>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Set the missing parent (builder style).
    pub fn with_missing_parent(mut self, parent: u64) -> Self {
        self.missing_parent = Some(parent);
        self
    }

    /// Set the consumer-native status (builder style).
    pub fn with_status(mut self, status: &'static str) -> Self {
        self.status = Some(Cow::Borrowed(status));
        self
    }

    /// Number of blocks whose outcome is a loss.
    pub fn lost_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.verdict.is_loss()).count()
    }
}

/// A later outcome for an earlier event (the ideal consumer's `replayed`, or a pending event
/// dropped on buffer overflow).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Global index of the earlier (pending) event.
    pub event: usize,
    /// Its final outcome (`replayed` or `dropped_orphan`).
    pub verdict: VerdictKind,
    /// The blocks it concerned.
    pub hashes: Vec<u64>,
}
