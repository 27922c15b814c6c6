//! llm-d's pod entries as the model keeps them.

use super::PodEntry;

/// A [`PodEntry`] as the model keeps it, in 12 bytes rather than 16 (llm-d's slots and
/// request keys hold one or two each; on the anchor stream of `docs/performance.md` that is
/// about a million of each): the pod, the tier id with [`GROUPED`] set when `group_idx` was
/// given, and the group (0 when absent). Tier ids index the model's tier names, so they stay
/// far below 2^31.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) pod: u32,
    tier: u32,
    group: u32,
}

/// [`Entry::tier`]'s flag: the entry has a `group_idx`.
const GROUPED: u32 = 1 << 31;

impl Entry {
    pub(super) fn new(pod: u32, tier: u32, group_idx: Option<u32>) -> Entry {
        debug_assert!(tier < GROUPED);
        match group_idx {
            Some(g) => Entry {
                pod,
                tier: tier | GROUPED,
                group: g,
            },
            None => Entry {
                pod,
                tier,
                group: 0,
            },
        }
    }

    /// llm-d's tier id.
    pub(super) fn tier(self) -> u32 {
        self.tier & !GROUPED
    }

    pub(super) fn public(self) -> PodEntry {
        PodEntry {
            pod: self.pod,
            tier: self.tier(),
            group: if self.tier & GROUPED != 0 {
                i64::from(self.group)
            } else {
                -1
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_12_bytes_and_keeps_an_absent_group_apart_from_group_0() {
        assert_eq!(std::mem::size_of::<Entry>(), 12);
        let none = Entry::new(3, 5, None);
        let zero = Entry::new(3, 5, Some(0));
        let big = Entry::new(3, 5, Some(u32::MAX));
        assert_ne!(none, zero);
        assert_eq!((none.tier(), zero.tier(), big.tier()), (5, 5, 5));
        let p = |e: Entry| (e.public().pod, e.public().tier, e.public().group);
        assert_eq!(p(none), (3, 5, -1));
        assert_eq!(p(zero), (3, 5, 0));
        assert_eq!(p(big), (3, 5, i64::from(u32::MAX)));
    }
}
