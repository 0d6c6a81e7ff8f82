//! libFuzzer's entry for `api_request`: what it asserts is
//! `graceful_fuzz_checks::api_request`, which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graceful_fuzz_checks::api_request::check(data));
