//! `cargo fuzz run analysis_replay`: see `kvscope_core::fuzzing::analysis_replay` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvscope_core::fuzzing::analysis_replay(data));
