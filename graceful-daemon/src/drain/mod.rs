//! The drain engine: decides when a terminating container may receive its
//! SIGTERM, from its pod's live inbound connections.
//!
//! - [`policy`]: when a drain is done (pure, testable without a kernel);
//! - [`events`]: the watch map and the event ring shared by all drains;
//! - [`engine`]: one drain, event-driven from start to release.
pub mod engine;
pub mod events;
pub mod exits;
pub mod policy;
