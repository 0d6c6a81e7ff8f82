//! The simulated node's network, all inside namespaces the run creates: a
//! "node" namespace holding a Linux bridge (the node's `cni0`), the load
//! balancer and the load generator; each pod gets a namespace of its own,
//! joined to the bridge by a veth pair, with an address of `10.213.0.0/24`.
//! Nothing touches the host's interfaces or routes; deleting the namespaces
//! deletes it all.

use std::net::Ipv4Addr;

use anyhow::bail;

use crate::netns::NetNs;

const BRIDGE: &str = "br0";
const SUBNET: [u8; 3] = [10, 213, 0];
/// Pod addresses: .10 to .250, a new one per pod, as a CNI hands them out.
const FIRST_POD: u8 = 10;
const LAST_POD: u8 = 250;

pub struct Node {
    pub ns: NetNs,
    next: u8,
}

impl Node {
    /// The node namespace, with the bridge up at 10.213.0.1/24.
    pub fn create() -> Node {
        let ns = NetNs::create();
        ns.exec("ip", &["link", "add", BRIDGE, "type", "bridge"]);
        let [a, b, c] = SUBNET;
        ns.exec(
            "ip",
            &["addr", "add", &format!("{a}.{b}.{c}.1/24"), "dev", BRIDGE],
        );
        ns.exec("ip", &["link", "set", BRIDGE, "up"]);
        Node { ns, next: FIRST_POD }
    }

    /// Plugs a pod's namespace into the bridge: a veth pair made in the node
    /// namespace, its node end on the bridge, its other end moved into the
    /// pod as `eth0`. Returns the pod's new address.
    pub fn plug(&mut self, pod: &NetNs) -> anyhow::Result<Ipv4Addr> {
        if self.next > LAST_POD {
            bail!(
                "out of pod addresses: a run has {} at most",
                LAST_POD - FIRST_POD + 1
            );
        }
        let [a, b, c] = SUBNET;
        let ip = Ipv4Addr::new(a, b, c, self.next);
        let host_end = format!("veth{}", self.next);
        self.next += 1;
        self.ns.exec(
            "ip",
            &[
                "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", &pod.name,
            ],
        );
        self.ns
            .exec("ip", &["link", "set", &host_end, "master", BRIDGE, "up"]);
        pod.exec("ip", &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        pod.exec("ip", &["link", "set", "eth0", "up"]);
        Ok(ip)
    }
}
