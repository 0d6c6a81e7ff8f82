//! libFuzzer's entry for `drain_request`: what it asserts is
//! `graceful_fuzz_checks::drain_request`, which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graceful_fuzz_checks::drain_request::check(data));
