//! Harness of the differential tests (real crate driver, trace generator, comparison).

pub mod diff;
pub mod gen;
pub mod real;
