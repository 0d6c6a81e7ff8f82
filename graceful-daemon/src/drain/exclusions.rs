//! A drain's exclusions (`ignore-ports`, `ignore-peers`) as the programs
//! match them: one [`Filter`] for its cgroups, and the rules as written,
//! in the order of the filter's tallies. `node` becomes the node's own
//! addresses as the drain starts.

use std::net::IpAddr;

use graceful_api::{
    exclusions::{mapped, mask},
    Peer,
};
use graceful_common::{Filter, IgnoreNet, MAX_IGNORE_NETS, MAX_IGNORE_PORTS, MAX_IGNORE_RULES};

/// What [`compile`] makes of a drain's exclusions.
#[derive(Debug)]
pub struct Exclusions {
    pub filter: Filter,
    /// Rule `i` as written: its connections are tallied at index `i`.
    pub rules: Vec<String>,
}

/// The filter for `ports` and `peers`, `node` standing for `node_addrs`
/// (`None`: unknown to the agent). `None` when there is nothing to leave
/// out. What cannot be matched is said in `warnings`, one line each.
pub fn compile(
    ports: &[u16],
    peers: &[Peer],
    node_addrs: Option<&[IpAddr]>,
    warnings: &mut Vec<String>,
) -> Option<Exclusions> {
    if ports.is_empty() && peers.is_empty() {
        return None;
    }
    let mut f = Filter::default();
    let mut rules = Vec::new();
    for (i, p) in ports.iter().take(MAX_IGNORE_PORTS).enumerate() {
        f.ports[i] = *p;
        f.port_rules[i] = rules.len() as u8;
        rules.push(p.to_string());
    }
    let mut nets: Vec<IgnoreNet> = Vec::new();
    for peer in peers {
        if rules.len() >= MAX_IGNORE_RULES {
            break;
        }
        let rule = rules.len() as u32;
        let addrs: Vec<(u128, u8)> = match peer {
            Peer::Node => match node_addrs {
                Some(a) => a.iter().map(|ip| (u128::from(mapped(*ip)), 128)).collect(),
                None => {
                    warnings.push(
                        "ignore-peers: node: the agent does not know the node's addresses (see its --node-netns): \
                         left out nothing"
                            .into(),
                    );
                    Vec::new()
                }
            },
            net => {
                let (a, len) = net.as_v6().expect("a network");
                vec![(u128::from(a), len)]
            }
        };
        for (a, len) in addrs {
            nets.push(net(a, len, rule));
        }
        rules.push(peer.to_string());
    }
    if nets.len() > MAX_IGNORE_NETS {
        warnings.push(format!(
            "ignore-peers: {} networks and node addresses, past the {MAX_IGNORE_NETS} one drain can match: \
             the last {} are not left out",
            nets.len(),
            nets.len() - MAX_IGNORE_NETS
        ));
        nets.truncate(MAX_IGNORE_NETS);
    }
    f.nets_len = nets.len() as u32;
    f.nets[..nets.len()].copy_from_slice(&nets);
    Some(Exclusions { filter: f, rules })
}

/// A network in the programs' form: the 16 bytes in memory order, as two
/// native words (see [`IgnoreNet`]).
fn net(addr: u128, len: u8, rule: u32) -> IgnoreNet {
    let words = |v: u128| {
        let b = v.to_be_bytes();
        let (hi, lo) = b.split_at(8);
        [
            u64::from_ne_bytes(hi.try_into().expect("8 bytes")),
            u64::from_ne_bytes(lo.try_into().expect("8 bytes")),
        ]
    };
    let m = mask(len);
    IgnoreNet {
        addr: words(addr & m),
        mask: words(m),
        rule,
        _pad: 0,
    }
}

#[cfg(test)]
mod tests;
