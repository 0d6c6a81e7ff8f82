//! What a drain leaves out: connections to some of the pod's own ports
//! (`ignore-ports`: a scraper's `/metrics`, an admin port) and connections
//! from some peers (`ignore-peers`: the node's own addresses, where the
//! kubelet's probes come from, or networks such as a load balancer's
//! health checkers). Written the same way as an annotation, a hook's flag
//! and a query parameter; a value that does not parse is reported and the
//! drain runs without it, since a hook's drain should never fail over it.

use std::{
    fmt,
    net::{IpAddr, Ipv6Addr},
};

use crate::{clip, MAX_ECHO};

/// Most ports one drain may leave out.
pub const MAX_PORTS: usize = 8;
/// Most peer rules one drain may leave out (`node` counts as one).
pub const MAX_PEERS: usize = 8;
/// The peer rule for the node's own addresses.
pub const NODE: &str = "node";

/// One rule of `ignore-peers`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// The node's own addresses (every address of the node's network
    /// namespace but loopback), read as the drain starts.
    Node,
    /// A network: an address and the length of its prefix.
    Net { addr: IpAddr, prefix: u8 },
}

impl Peer {
    /// The network as 128 bits: IPv4 as mapped IPv6 (`::ffff:a.b.c.d`).
    /// `None` for [`Peer::Node`].
    pub fn as_v6(&self) -> Option<(Ipv6Addr, u8)> {
        match *self {
            Peer::Node => None,
            Peer::Net { addr, prefix } => Some((mapped(addr), prefix + if addr.is_ipv4() { 96 } else { 0 })),
        }
    }
}

/// `ip` as the programs see every peer: IPv4 as mapped IPv6.
pub fn mapped(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Node => f.write_str(NODE),
            Peer::Net { addr, prefix } => write!(f, "{addr}/{prefix}"),
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Peer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Peer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        peer(&s).map_err(serde::de::Error::custom)
    }
}

/// A comma-separated list of `what`s (items trimmed, empty ones dropped,
/// repeats once), each parsed by `item`: at least one, at most `max`.
fn list<T: PartialEq>(
    s: &str,
    what: &str,
    max: usize,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut out: Vec<T> = Vec::new();
    for i in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let v = item(i)?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    match out.len() {
        0 => Err(format!("no {what} given")),
        n if n > max => Err(format!("at most {max} {what}s, not {n}")),
        _ => Ok(out),
    }
}

/// Parses `ignore-ports`: local ports, comma-separated (`9090,15020`).
pub fn parse_ports(s: &str) -> Result<Vec<u16>, String> {
    list(s, "port", MAX_PORTS, |item| {
        item.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{:?} is not a port (1 to 65535)", clip(item, MAX_ECHO)))
    })
}

/// Parses `ignore-peers`: `node`, addresses and networks, comma-separated
/// (`node,10.0.0.0/8,fd00::/8`).
pub fn parse_peers(s: &str) -> Result<Vec<Peer>, String> {
    list(s, "peer", MAX_PEERS, peer)
}

/// One peer rule: `node`, an address, or a network in CIDR notation.
pub fn peer(item: &str) -> Result<Peer, String> {
    if item == NODE {
        return Ok(Peer::Node);
    }
    let bad = || {
        format!(
            "{:?} is not a peer: write node, an address or a network such as 10.0.0.0/8",
            clip(item, MAX_ECHO)
        )
    };
    let (a, len) = match item.split_once('/') {
        Some((a, len)) => (a, Some(len)),
        None => (item, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("{:?}: the prefix length must be 0 to {max}", clip(item, MAX_ECHO)))?,
    };
    let net = Peer::Net { addr, prefix };
    let (v6, p) = net.as_v6().expect("a network");
    if u128::from(v6) & !mask(p) != 0 {
        let base = u128::from(v6) & mask(p);
        let base = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv6Addr::from(base).to_ipv4_mapped().expect("mapped")),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(base)),
        };
        return Err(format!(
            "{:?} has bits set past its prefix: write {base}/{prefix}",
            clip(item, MAX_ECHO)
        ));
    }
    Ok(net)
}

/// The mask of a 128-bit prefix of `len` bits.
pub fn mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l if l >= 128 => u128::MAX,
        l => u128::MAX << (128 - u32::from(l)),
    }
}

// Its tests read and write with serde (the default feature).
#[cfg(all(test, feature = "serde"))]
mod tests;
