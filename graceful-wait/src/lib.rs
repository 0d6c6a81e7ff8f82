//! `graceful-wait`'s parts, as a library so they can be fuzzed and tested:
//! flag parsing, the small HTTP/1.1 client, and who the server is.
pub mod args;
pub mod http;
pub mod seen;
pub mod server;
