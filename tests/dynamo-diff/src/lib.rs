//! Test-only package: see `tests/` and `MISMATCHES.md`.
