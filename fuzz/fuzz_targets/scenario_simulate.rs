//! `cargo fuzz run scenario_simulate`: see `kvscope_core::fuzzing::scenario_simulate` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvscope_core::fuzzing::scenario_simulate(data));
