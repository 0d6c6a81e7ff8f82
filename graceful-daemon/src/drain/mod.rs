//! The drain engine: decides when a terminating container may receive its
//! SIGTERM, from its pod's live inbound connections.
//!
//! - [`policy`]: when a drain is done (pure, testable without a kernel);
//! - [`engine`]: one drain, event-driven from start to release.
pub mod engine;
pub mod exits;
pub mod policy;
