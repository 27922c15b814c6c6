//! `cargo fuzz run round_trip`: see `kvscope_core::fuzzing::round_trip` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvscope_core::fuzzing::round_trip(data));
