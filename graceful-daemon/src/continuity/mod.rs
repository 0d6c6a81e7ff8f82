//! What outlives one agent process, so that no hook is cut when the agent
//! is upgraded, restarted or killed.
//!
//! - [`handover`]: a new agent takes over the listeners and held hooks of
//!   the running one, and nothing is cut;
//! - [`keeper`]: a process that outlives the agent and keeps its
//!   listeners and held hooks, so that a crash cuts none.
//!
//! The pins (in [`crate::kernel::bpf`]) keep every count meanwhile.

pub mod handover;
pub mod keeper;
