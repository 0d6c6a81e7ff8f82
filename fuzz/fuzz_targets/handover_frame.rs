//! libFuzzer's entry for `handover_frame`: what it asserts is
//! `graceful_fuzz_checks::handover_frame`, which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graceful_fuzz_checks::handover_frame::check(data));
