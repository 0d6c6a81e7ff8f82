//! libFuzzer's entry for `hook_query`: what it asserts is
//! `graceful_fuzz_checks::hook_query`, which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graceful_fuzz_checks::hook_query::check(data));
