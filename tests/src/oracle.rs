//! The kernel's own view of a cgroup's sockets, from `ss` (sock_diag), to
//! check the agent's counts against (graceful-test-support's `ss`, run here
//! or inside a network namespace).

use crate::netns::NetNs;

pub use graceful_test_support::ss::View;

fn ss(ns: Option<&NetNs>, args: &[&str]) -> String {
    match ns {
        Some(ns) => ns.exec("ss", args),
        None => crate::sh("ss", args),
    }
}

/// Every TCP socket of `cgroup`, in every state, with its timers: what a
/// failure message shows when the agent's count and [`view`] disagree.
pub fn sockets(ns: Option<&NetNs>, cgroup: &str) -> String {
    ss(ns, &["-tanoH", "cgroup", cgroup])
}

/// Live (ESTABLISHED or CLOSE-WAIT) connections and listeners of `cgroup`
/// (path relative to the cgroup2 mount); see graceful-test-support's `ss`.
pub fn view(ns: Option<&NetNs>, cgroup: &str) -> View {
    graceful_test_support::ss::view(|args| ss(ns, args), cgroup)
}

/// [`view`] once it shows `inbound` live inbound connections (`secs` at
/// most, then a panic naming `what`): after a client's close, the server's
/// socket stays live (CLOSE-WAIT) until the server's own close, which comes
/// when the server next runs.
pub fn view_settled(ns: Option<&NetNs>, cgroup: &str, inbound: u64, secs: u64, what: &str) -> View {
    crate::wait_for(secs, what, || {
        Some(view(ns, cgroup)).filter(|v| v.inbound_live == inbound)
    })
}
