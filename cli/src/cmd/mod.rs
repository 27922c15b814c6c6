//! One module per subcommand.

pub mod capture;
pub mod check;
pub mod convert;
pub mod diff;
pub mod generate;
pub mod verdicts;
