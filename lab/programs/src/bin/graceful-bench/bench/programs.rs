//! The kernel side without an agent, for the benches that run the drain
//! engine in-process.

use std::time::Duration;

use graceful::{
    drain::policy::{Params, Policy},
    kernel::bpf::{paths::PinDir, Kernel},
};

use graceful_tests::{agent::Agent, monotonic_ns};

/// Pinned programs with no agent reading their event ring (a ring has one
/// read position: a running agent would take the very events a bench
/// waits for), a runtime, and the bench's own handle on the kernel side.
pub fn without_agent() -> (Agent, tokio::runtime::Runtime, Kernel) {
    let mut agent = Agent::started();
    agent.stop();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kernel = rt.block_on(async { Kernel::open(&PinDir::new(&agent.pin_dir)).unwrap() });
    (agent, rt, kernel)
}

/// Drained, starting now, nothing to wait for but the event itself.
pub fn immediate() -> Params {
    Params {
        policy: Policy::Drained,
        start_ns: monotonic_ns(),
        min: Duration::ZERO,
        max: Duration::from_secs(10),
        settle: Duration::ZERO,
        quiet: Duration::ZERO,
        uncounted: false,
    }
}
