//! `graceful-wait`'s parts, as a library so they can be fuzzed and tested:
//! flag parsing, and who the server is (the HTTP/1.1 client and the codec
//! are the contract's, `graceful_api::client` and `graceful_api::codec`).
pub mod args;
pub mod seen;
pub mod server;
