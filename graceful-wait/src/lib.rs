//! `graceful-wait`'s parts, as a library so they can be fuzzed and tested:
//! flag parsing and the small HTTP/1.1 client.
pub mod args;
pub mod http;
pub mod seen;
