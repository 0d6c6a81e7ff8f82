//! A Service as clients on the node meet it: its ready endpoints, from its
//! EndpointSlices (what kube-proxy watches; v1 Endpoints are deprecated
//! since 1.33), and whether kube-proxy has put exactly those into the
//! node's iptables rules yet.
//!
//! kube-proxy batches its rule updates (`minSyncPeriod`, 1 s by default
//! since 1.28). Until its sync, a new Service's ClusterIP is a REJECT rule
//! ("has no endpoints") and a client is refused. A test that measures
//! traffic starts it only once [`Namespace::wait_service`] has seen the
//! rules match the endpoints.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
};

use super::Namespace;

/// The ready endpoints' addresses of each EndpointSlice object, as a watch
/// or a list shows them.
pub fn ready_addresses(slice: &serde_json::Value) -> BTreeSet<String> {
    slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        // A missing `ready` means ready (the API's own rule).
        .filter(|e| e["conditions"]["ready"].as_bool() != Some(false))
        .flat_map(|e| e["addresses"].as_array().into_iter().flatten())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The pod addresses that kube-proxy's iptables rules (`iptables-save -t
/// nat` of the node) send `cluster_ip:port` to; `None` while the rules have
/// no chain for that Service port (not synced yet, or no endpoints: REJECT).
pub fn programmed(nat: &str, cluster_ip: &str, port: u16) -> Option<BTreeSet<String>> {
    let rules: Vec<Vec<&str>> = nat
        .lines()
        .filter(|l| l.starts_with("-A "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    fn arg<'a>(r: &[&'a str], flag: &str) -> Option<&'a str> {
        r.iter()
            .position(|w| *w == flag)
            .and_then(|i| r.get(i + 1).copied())
    }
    fn chain_of<'a>(r: &[&'a str]) -> Option<&'a str> {
        r.get(1).copied()
    }
    let svc = rules.iter().find_map(|r| {
        (chain_of(r) == Some("KUBE-SERVICES")
            && arg(r, "-d") == Some(&format!("{cluster_ip}/32"))
            && arg(r, "--dport") == Some(&port.to_string()))
        .then(|| arg(r, "-j"))
        .flatten()
        .filter(|j| j.starts_with("KUBE-SVC-"))
    })?;
    let seps: BTreeSet<&str> = rules
        .iter()
        .filter(|r| chain_of(r) == Some(svc))
        .filter_map(|r| arg(r, "-j").filter(|j| j.starts_with("KUBE-SEP-")))
        .collect();
    let dests: BTreeMap<&str, String> = rules
        .iter()
        .filter_map(|r| {
            let chain = chain_of(r)?;
            let to = arg(r, "--to-destination")?;
            Some((chain, to.rsplit_once(':').map_or(to, |(ip, _)| ip).to_string()))
        })
        .collect();
    Some(seps.iter().filter_map(|s| dests.get(s).cloned()).collect())
}

/// The node's NAT rules: `iptables-save` run from a thread in the node's
/// network namespace (a child takes its namespaces from that thread).
fn node_nat(cluster: &super::Cluster) -> String {
    cluster.on_node(|| {
        let out = Command::new("iptables-save")
            .args(["-t", "nat"])
            .output()
            .expect("iptables-save in the node's network namespace");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

impl Namespace<'_> {
    /// The ready endpoints of Service `name`, from its EndpointSlices.
    pub fn ready_endpoints(&self, name: &str) -> BTreeSet<String> {
        let slices = self.json(&[
            "get",
            "endpointslices",
            "-l",
            &format!("kubernetes.io/service-name={name}"),
        ]);
        slices["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(ready_addresses)
            .collect()
    }

    /// Waits until Service `name` has `expect` ready endpoints and kube-proxy's
    /// rules on the node send its port to exactly those; returns the ClusterIP.
    pub fn wait_service(&self, name: &str, expect: usize) -> String {
        let ip = self.kubectl(&["get", "service", name, "-o", "jsonpath={.spec.clusterIP}"]);
        let port: u16 = self
            .kubectl(&["get", "service", name, "-o", "jsonpath={.spec.ports[0].port}"])
            .parse()
            .expect("the Service's port");
        let mut last = (BTreeSet::new(), None);
        let found = super::poll(std::time::Duration::from_secs(30), || {
            let ready = self.ready_endpoints(name);
            let rules = programmed(&node_nat(self.cluster), &ip, port);
            let ok = ready.len() == expect && rules.as_ref() == Some(&ready);
            last = (ready, rules);
            ok.then_some(())
        });
        assert!(
            found.is_some(),
            "Service {}/{name} ({ip}:{port}): kube-proxy's rules did not match its {expect} ready endpoints within 30 s; \
             ready {:?}, rules {:?}",
            self.name,
            last.0,
            last.1
        );
        ip
    }
}

#[cfg(test)]
mod tests;
