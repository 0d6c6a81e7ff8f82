//! What each fuzz target asserts, one module a target, each a `check`
//! that panics on any input breaking it. cargo fuzz runs them under
//! libFuzzer with the address sanitizer (`cargo xtask fuzz`); `cargo test`
//! replays each target's seeds (`fuzz/seeds/<target>/`) and a fixed run of
//! mutations of them ([`mutate`]), so CI checks every target on every
//! commit without the sanitizer build.

pub mod api_request;
pub mod drain_request;
pub mod handover_frame;
pub mod hook_query;
pub mod mutate;
pub mod wait_response;

/// A target's assertions over one input.
pub type Check = fn(&[u8]);

/// Every target by its name (the name of its cargo fuzz binary and of its
/// seed directory).
pub const TARGETS: [(&str, Check); 5] = [
    ("drain_request", drain_request::check),
    ("wait_response", wait_response::check),
    ("hook_query", hook_query::check),
    ("api_request", api_request::check),
    ("handover_frame", handover_frame::check),
];
