//! `cargo fuzz run decode`: see `kvscope_core::fuzzing::decode` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kvscope_core::fuzzing::decode(data));
