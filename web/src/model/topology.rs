//! The topology tab's layout: the block tree around an event, drawn as chains. A prompt of
//! 150 blocks is one parent→child chain, so a tree drawn one level per block is a staircase off
//! the pane. Here a node with a single child continues its chain on the same row, and
//! consecutive blocks of the same look (state, current or not, under a dropped ancestor or
//! not) collapse into a run shown with its count; only where the tree branches do new rows
//! start. Pure: the caller supplies each block's children and state.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Runs shorter than this stay individual blocks.
pub const RUN_MIN: usize = 3;

/// How one block looks: its state (a CSS-safe word: `indexed`, `dropped`, ...) and marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// The block's state for the chosen router (at the cursor or at the end).
    pub state: &'static str,
    /// A block of the event shown.
    pub current: bool,
    /// An ancestor was dropped (the block is in a cascade).
    pub under_dropped: bool,
}

/// One piece of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// A single block.
    Block {
        /// Its hash.
        hash: u64,
        /// How it looks.
        look: Look,
    },
    /// `count` consecutive blocks that look the same, from `first` to `last`.
    Run {
        /// The run's first block.
        first: u64,
        /// The run's last block.
        last: u64,
        /// Blocks in the run.
        count: usize,
        /// How they look.
        look: Look,
    },
}

/// A chain of blocks, each the only child of the one before, and the chains starting at the
/// children of its last block (where the tree branches).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    /// The chain, collapsed into runs.
    pub segments: Vec<Segment>,
    /// One chain per child of the last block.
    pub branches: Vec<Chain>,
}

/// The laid-out tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// The tree from its root.
    pub root: Chain,
    /// Blocks laid out.
    pub blocks: usize,
    /// Whether blocks were left out (more than the limit).
    pub truncated: bool,
}

/// The block tree below `root`: `children` of each block (those stored by then), `state` of
/// each; `current` are the shown event's blocks. At most `limit` blocks are laid out.
pub fn layout(
    root: u64,
    children: &HashMap<u64, Vec<u64>>,
    state: impl Fn(u64) -> &'static str,
    current: &HashSet<u64>,
    limit: usize,
) -> Topology {
    let mut b = Builder {
        children,
        state: &state,
        current,
        limit,
        seen: HashSet::default(),
        truncated: false,
    };
    let root = b.chain(root, false, 0);
    Topology {
        root,
        blocks: b.seen.len(),
        truncated: b.truncated,
    }
}

/// Nesting depth (branch points) beyond which branches are left out.
const MAX_DEPTH: usize = 48;

struct Builder<'a> {
    children: &'a HashMap<u64, Vec<u64>>,
    state: &'a dyn Fn(u64) -> &'static str,
    current: &'a HashSet<u64>,
    limit: usize,
    seen: HashSet<u64>,
    truncated: bool,
}

impl Builder<'_> {
    fn chain(&mut self, start: u64, under_dropped: bool, depth: usize) -> Chain {
        let mut blocks: Vec<(u64, Look)> = Vec::new();
        let mut at = Some(start);
        let mut under = under_dropped;
        let mut kids: Vec<u64> = Vec::new();
        while let Some(h) = at.take() {
            if self.seen.len() >= self.limit {
                self.truncated = true;
                break;
            }
            if !self.seen.insert(h) {
                break; // a cycle in hostile input: stop
            }
            let look = Look {
                state: (self.state)(h),
                current: self.current.contains(&h),
                under_dropped: under,
            };
            under |= look.state == "dropped";
            blocks.push((h, look));
            kids = self.children.get(&h).cloned().unwrap_or_default();
            kids.retain(|k| !self.seen.contains(k));
            if let [only] = kids.as_slice() {
                at = Some(*only);
                kids.clear();
            }
        }
        let mut branches = Vec::new();
        if depth < MAX_DEPTH {
            for k in kids {
                if self.seen.len() >= self.limit {
                    self.truncated = true;
                    break;
                }
                branches.push(self.chain(k, under, depth + 1));
            }
        } else if !kids.is_empty() {
            self.truncated = true;
        }
        Chain {
            segments: collapse(&blocks),
            branches,
        }
    }
}

/// Consecutive blocks that look the same become one run when there are at least [`RUN_MIN`].
pub fn collapse(blocks: &[(u64, Look)]) -> Vec<Segment> {
    let mut out = Vec::new();
    for group in blocks.chunk_by(|a, b| a.1 == b.1) {
        match group {
            [(first, look), .., (last, _)] if group.len() >= RUN_MIN => out.push(Segment::Run {
                first: *first,
                last: *last,
                count: group.len(),
                look: *look,
            }),
            _ => out.extend(
                group
                    .iter()
                    .map(|&(hash, look)| Segment::Block { hash, look }),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_of(n: u64) -> HashMap<u64, Vec<u64>> {
        (0..n.saturating_sub(1)).map(|k| (k, vec![k + 1])).collect()
    }

    const fn look(state: &'static str, current: bool, under_dropped: bool) -> Look {
        Look {
            state,
            current,
            under_dropped,
        }
    }

    /// Issue 16 point 3: a 150-block chain whose block 10 was dropped reads as one chain of
    /// three pieces: 10 indexed, the dropped root, and its cascade of 139.
    #[test]
    fn a_150_block_chain_is_one_row_of_runs() {
        let kids = chain_of(150);
        let state = |h: u64| if h >= 10 { "dropped" } else { "indexed" };
        let t = layout(0, &kids, state, &HashSet::default(), 1000);
        assert_eq!(t.blocks, 150);
        assert!(!t.truncated);
        assert!(t.root.branches.is_empty());
        assert_eq!(
            t.root.segments,
            vec![
                Segment::Run {
                    first: 0,
                    last: 9,
                    count: 10,
                    look: look("indexed", false, false)
                },
                Segment::Block {
                    hash: 10,
                    look: look("dropped", false, false)
                },
                Segment::Run {
                    first: 11,
                    last: 149,
                    count: 139,
                    look: look("dropped", false, true)
                },
            ]
        );
    }

    #[test]
    fn the_current_block_stands_out_and_short_runs_stay_blocks() {
        let kids = chain_of(8);
        let current: HashSet<u64> = [5].into_iter().collect();
        let t = layout(0, &kids, |_| "indexed", &current, 1000);
        let plain = look("indexed", false, false);
        assert_eq!(
            t.root.segments,
            vec![
                Segment::Run {
                    first: 0,
                    last: 4,
                    count: 5,
                    look: plain
                },
                Segment::Block {
                    hash: 5,
                    look: look("indexed", true, false)
                },
                Segment::Block {
                    hash: 6,
                    look: plain
                },
                Segment::Block {
                    hash: 7,
                    look: plain
                },
            ]
        );
    }

    #[test]
    fn branches_start_new_chains() {
        // 0 → 1 → {2 → 3 → 4 → 5, 6}
        let kids: HashMap<u64, Vec<u64>> = [
            (0, vec![1]),
            (1, vec![2, 6]),
            (2, vec![3]),
            (3, vec![4]),
            (4, vec![5]),
        ]
        .into_iter()
        .collect();
        let t = layout(0, &kids, |_| "pending", &HashSet::default(), 1000);
        assert_eq!(t.blocks, 7);
        assert_eq!(t.root.segments.len(), 2, "0 and 1 as blocks");
        assert_eq!(t.root.branches.len(), 2);
        assert_eq!(
            t.root.branches[0].segments,
            vec![Segment::Run {
                first: 2,
                last: 5,
                count: 4,
                look: look("pending", false, false)
            }]
        );
        assert_eq!(
            t.root.branches[1].segments,
            vec![Segment::Block {
                hash: 6,
                look: look("pending", false, false)
            }]
        );
    }

    #[test]
    fn limits_and_cycles_end_the_walk() {
        let t = layout(0, &chain_of(5000), |_| "indexed", &HashSet::default(), 1000);
        assert_eq!(t.blocks, 1000);
        assert!(t.truncated);
        // A cycle (hostile input): every block once, then stop.
        let kids: HashMap<u64, Vec<u64>> = [(0, vec![1]), (1, vec![2]), (2, vec![0])]
            .into_iter()
            .collect();
        let t = layout(0, &kids, |_| "indexed", &HashSet::default(), 1000);
        assert_eq!(t.blocks, 3);
        // A star: more children than the limit.
        let star: HashMap<u64, Vec<u64>> = [(0, (1..50).collect())].into_iter().collect();
        let t = layout(0, &star, |_| "indexed", &HashSet::default(), 10);
        assert_eq!((t.blocks, t.truncated), (10, true));
    }
}
