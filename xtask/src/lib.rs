//! What `cargo xtask` and the lab (`lab/`) share: making the machine ready,
//! building the agent, and running commands with errors that say what
//! failed. The lab depends on this library; xtask reaches the lab only as a
//! program ([`lab`]), so the dependency runs one way.

pub mod build;
pub mod host;
pub mod image;
pub mod lab;
pub mod plugin;
pub mod setup;
pub mod util;
