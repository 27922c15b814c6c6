//! Replay engine (WIP).
