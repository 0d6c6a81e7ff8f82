//! The addresses the agent's pod has, by family, and what `:PORT` (the
//! chart's `--metrics-addr`, where the kubelet's probes and Prometheus
//! reach it) listens on here: both families on one dual-stack socket, or
//! IPv4 alone on a kernel without IPv6. A cluster's pods may be IPv4,
//! IPv6 or both, in either order.

use std::net::IpAddr;

use super::{Level, Report};

/// The addresses a probe or a scrape can reach: neither loopback nor
/// IPv6 link-local.
pub fn reachable(addrs: impl IntoIterator<Item = IpAddr>) -> (Vec<IpAddr>, Vec<IpAddr>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for a in addrs {
        match a.to_canonical() {
            IpAddr::V4(a) if !a.is_loopback() && !a.is_unspecified() => v4.push(IpAddr::V4(a)),
            IpAddr::V6(a) if !a.is_loopback() && !a.is_unspecified() && !a.is_unicast_link_local() => {
                v6.push(IpAddr::V6(a))
            }
            _ => {}
        }
    }
    v4.sort();
    v6.sort();
    (v4, v6)
}

/// Up to two addresses, then how many more.
fn some(addrs: &[IpAddr]) -> String {
    let shown: Vec<String> = addrs.iter().take(2).map(IpAddr::to_string).collect();
    match addrs.len() {
        0..=2 => shown.join(", "),
        n => format!("{} and {} more", shown.join(", "), n - 2),
    }
}

/// The line, from the reachable addresses and what `:PORT` bound.
pub fn judge(v4: &[IpAddr], v6: &[IpAddr], bound: Result<bool, String>) -> (Level, String) {
    let families = match (v4.is_empty(), v6.is_empty()) {
        (false, false) => format!("IPv4 ({}) and IPv6 ({})", some(v4), some(v6)),
        (false, true) => format!("IPv4 only ({})", some(v4)),
        (true, false) => format!("IPv6 only ({})", some(v6)),
        // The agent counts and gates without one (unix sockets, the
        // pods' own namespaces); in a pod, though, it fails its probes.
        (true, true) => {
            return (
                Level::Warn,
                "no address but loopback here: in a pod, the kubelet's probes and Prometheus cannot \
                 reach the agent (a host or guest without a network is fine)"
                    .to_string(),
            )
        }
    };
    match bound {
        Err(e) => (
            Level::Fail,
            format!("{families}; `:PORT` cannot listen here: {e}"),
        ),
        Ok(false) if !v6.is_empty() => (
            Level::Fail,
            format!("{families}, but `:PORT` could listen on IPv4 alone: probes to the IPv6 addresses fail"),
        ),
        Ok(false) => (
            Level::Ok,
            format!("{families}; `:PORT` listens on IPv4 (no IPv6 in this kernel)"),
        ),
        Ok(true) => (
            Level::Ok,
            format!("{families}; `:PORT` listens on both families (one dual-stack socket)"),
        ),
    }
}

/// This network namespace's addresses and a trial `:0` listener.
pub fn network(r: &mut Report) {
    let addrs = match crate::node::addrs::interface_addrs() {
        Ok(a) => a,
        Err(e) => {
            r.line(
                Level::Warn,
                "network",
                format!("cannot list this namespace's addresses: {e}"),
            );
            return;
        }
    };
    let (v4, v6) = reachable(addrs);
    let bound = crate::listen::any_address(0)
        .and_then(|l| l.local_addr())
        .map(|a| a.is_ipv6())
        .map_err(|e| e.to_string());
    let (level, text) = judge(&v4, &v6, bound);
    r.line(level, "network", text);
}

#[cfg(test)]
mod tests;
