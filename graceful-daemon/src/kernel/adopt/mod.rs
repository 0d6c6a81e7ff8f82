//! The sockets the programs did not see open: those older than the agent,
//! adopted once at its start, and those whose first state change both
//! copies of the state program missed, repaired.
//!
//! - [`pass`]: the adoption pass, run once the programs are attached;
//! - [`repair`]: the same iterator run again, checking stored sockets only;
//! - [`sockdiag`]: the kernel's own view of a namespace's TCP sockets;
//! - [`netns`]: every network namespace on the host, and running inside one.

pub mod netns;
pub mod pass;
pub mod repair;
pub mod sockdiag;
