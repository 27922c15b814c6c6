//! What the Compare dialog asks the simulator for: the contract between the debugger and its
//! lazily loaded simulator module (`web/sim`, which includes this file), passed as JSON.

use serde::{Deserialize, Serialize};

/// What the user picked in the Compare dialog.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Built-in scenario name.
    pub scenario: String,
    /// Order of the left trace (`fixed`, `legacy`, `cpython`).
    pub left: String,
    /// Order of the right trace.
    pub right: String,
    /// Scenario seed (also the legacy permutation seed).
    pub seed: u64,
    /// `PYTHONHASHSEED` for `cpython`.
    pub python_hash_seed: u32,
    /// Workers (`completion.workers`), `None`: the scenario's.
    pub workers: Option<u32>,
    /// CPU capacity in chunks, `None`: the scenario's.
    pub capacity: Option<u64>,
    /// Number of STORAGE tiers, `None`: the scenario's.
    pub tiers: Option<usize>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            scenario: "legacy-vs-fixed".into(),
            left: "cpython".into(),
            right: "fixed".into(),
            seed: 0,
            python_hash_seed: 0,
            workers: None,
            capacity: None,
            tiers: None,
        }
    }
}

/// A built-in scenario as the dialog lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Builtin {
    /// Name (`legacy-vs-fixed`, ...).
    pub name: String,
    /// One line on what it shows.
    pub description: String,
}

/// One row of the comparison table: a label and the left / right values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Row label (a rule name, `llmd: blocks / events lost`, ...).
    pub label: String,
    /// The label is a rule name (styled as one).
    pub rule: bool,
    /// Left value.
    pub a: String,
    /// Right value.
    pub b: String,
    /// The left side is worse on this row.
    pub a_worse: bool,
    /// The right side is worse on this row.
    pub b_worse: bool,
}

/// Both sides of a comparison: the traces (JSON Lines, to open in the debugger; empty for two
/// loaded traces), the table comparing their analyses, why each count differs and the events
/// that differ, aligned by block (the core's `compare_traces`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// The left trace as JSON Lines.
    pub left: String,
    /// The right trace as JSON Lines.
    pub right: String,
    /// Table rows: first the headings (an empty label, the two traces' names in `a` and `b`),
    /// then the events, every rule with findings, the losses.
    pub rows: Vec<Row>,
    /// One plain sentence per count that differs.
    pub why: Vec<String>,
    /// The events that differ, in the left trace's order (at most a few hundred: `note` says
    /// how many there are), five texts each, one after the other: the left event (`#3 · batch
    /// 2`, empty when only the right trace has it), the right one, what the event is
    /// (`BlockStored CPU 159301…791386`), what differs (`moved; llmd dropped_orphan → applied`)
    /// and its marks (`moved`, `judged`: a router's verdict differs; space-separated).
    pub events: Vec<String>,
    /// How many events differ and how many are listed.
    pub note: String,
}
