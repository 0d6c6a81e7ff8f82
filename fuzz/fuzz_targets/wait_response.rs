//! libFuzzer's entry for `wait_response`: what it asserts is
//! `graceful_fuzz_checks::wait_response`, which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graceful_fuzz_checks::wait_response::check(data));
