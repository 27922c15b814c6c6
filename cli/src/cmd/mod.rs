//! One module per subcommand.

pub mod capture;
pub mod convert;
pub mod generate;
