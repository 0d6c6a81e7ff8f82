//! The mix of endings: which way each connection of the churn ends, and to
//! which other cgroup it goes, decided from (seed, worker, connection
//! number) alone, so a run can be repeated exactly.

/// How one connection of the churn ends. The client tells the server with
/// the first byte it sends ([`Ending::byte`]); the queued ones send nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ending {
    /// The client closes first (FIN); the server reads EOF and closes.
    ClientFin,
    /// The server closes first (FIN); the client reads EOF and closes.
    ServerFin,
    /// The client aborts (SO_LINGER 0: RST).
    ClientRst,
    /// The server aborts (SO_LINGER 0: RST).
    ServerRst,
    /// Never accepted: left in the listener's queue; the client closes.
    QueuedClientCloses,
    /// Never accepted: the listener closes with it queued (RST to the client).
    QueuedListenerCloses,
}

impl Ending {
    pub const ALL: [Ending; 6] = [
        Ending::ClientFin,
        Ending::ServerFin,
        Ending::ClientRst,
        Ending::ServerRst,
        Ending::QueuedClientCloses,
        Ending::QueuedListenerCloses,
    ];

    /// Share of the churn, in percent (they add up to 100).
    pub const fn weight(self) -> u64 {
        match self {
            Ending::ClientFin => 30,
            Ending::ServerFin => 25,
            Ending::ClientRst => 15,
            Ending::ServerRst => 15,
            Ending::QueuedClientCloses => 8,
            Ending::QueuedListenerCloses => 7,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Ending::ClientFin => "client FIN first",
            Ending::ServerFin => "server FIN first",
            Ending::ClientRst => "client RST",
            Ending::ServerRst => "server RST",
            Ending::QueuedClientCloses => "queued, client closes",
            Ending::QueuedListenerCloses => "queued, listener closes",
        }
    }

    /// The byte the client sends first, telling the server what to do.
    /// None: the connection is never accepted, nothing is sent.
    pub const fn byte(self) -> Option<u8> {
        match self {
            Ending::ClientFin => Some(b'c'),
            Ending::ServerFin => Some(b's'),
            Ending::ClientRst => Some(b'r'),
            Ending::ServerRst => Some(b'R'),
            Ending::QueuedClientCloses | Ending::QueuedListenerCloses => None,
        }
    }

    pub const fn queued(self) -> bool {
        self.byte().is_none()
    }

    pub fn index(self) -> usize {
        Ending::ALL.iter().position(|e| *e == self).expect("in ALL")
    }
}

/// The server's side of a connection, from the client's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerDoes {
    /// Read to EOF (or the reset), then close.
    Drain,
    /// Close at once (FIN).
    Close,
    /// Abort at once (RST).
    Abort,
    /// Keep it open, unread, to the end of the soak.
    Hold,
    /// Read to EOF on a thread of its own: the client is a peer that will
    /// be killed while holding it.
    DrainAside,
}

/// Sent by the held connections, and by those of a peer that is killed.
pub const HOLD: u8 = b'h';
pub const KILLED: u8 = b'k';

pub fn server_does(byte: u8) -> ServerDoes {
    match byte {
        b's' => ServerDoes::Close,
        b'R' => ServerDoes::Abort,
        HOLD => ServerDoes::Hold,
        KILLED => ServerDoes::DrainAside,
        _ => ServerDoes::Drain,
    }
}

/// One connection of the churn: how it ends, where it goes, by which family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub ending: Ending,
    /// Index of the cgroup (worker) it connects to; never the caller's own.
    pub target: usize,
    /// Over ::1 instead of 127.x (accepted endings only: the queue
    /// listeners are IPv4).
    pub ipv6: bool,
}

/// splitmix64: a well-mixed 64-bit hash of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Connection `n` of worker `worker` (of `workers`, at least 2).
pub fn plan(seed: u64, worker: usize, workers: usize, n: u64) -> Plan {
    let h = mix(seed ^ mix((worker as u64) << 40 ^ n));
    let mut pick = h % 100;
    let mut ending = Ending::ClientFin;
    for e in Ending::ALL {
        if pick < e.weight() {
            ending = e;
            break;
        }
        pick -= e.weight();
    }
    let others = workers.max(2) as u64 - 1;
    let target = (worker + 1 + ((h >> 8) % others) as usize) % workers.max(2);
    let ipv6 = !ending.queued() && (h >> 40).is_multiple_of(4);
    Plan { ending, target, ipv6 }
}

#[cfg(test)]
mod tests;
