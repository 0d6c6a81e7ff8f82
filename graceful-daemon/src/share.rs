//! Each caller's fair share of a server: the gate's and the local API's.
//! A caller (for the gate, a pod or, outside pods, a cgroup; for the API,
//! a peer address) holds at most [`Limits::per_caller`] connections at
//! once, and the server at most [`Limits::total`], so no caller, or many,
//! can take the agent's file descriptors or memory from the others. On
//! the gate, each container also holds at most one drain. Past its share a
//! caller is told so (429, or 503 for a full server) and graceful-wait
//! retries within its own deadline.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use crate::sync;

/// A server's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, over all callers.
    pub total: usize,
    /// Connections open at once from one caller.
    pub per_caller: usize,
}

impl Limits {
    /// A pod's hooks need one connection per container; 32 leaves room
    /// for the largest pods seen and their retries.
    pub const PER_CALLER: usize = 32;
    /// Connections in all: each holds a socket, and a drain its network
    /// namespace (two descriptors, about 60 KiB).
    pub const TOTAL: usize = 1024;
    /// The local API's connections in all.
    pub const API_TOTAL: usize = 256;

    /// The gate's bounds for an agent that may open `nofile` descriptors:
    /// at most a quarter of them. The API takes at most an eighth
    /// ([`Limits::api_for_nofile`]); the rest are the node's (maps,
    /// namespaces during repair passes, the watch).
    pub fn for_nofile(nofile: u64) -> Limits {
        let total = (nofile / 4).clamp(8, Self::TOTAL as u64) as usize;
        Limits {
            total,
            per_caller: Self::PER_CALLER.min(total),
        }
    }

    /// These bounds, within `cap` (a server's share of the descriptors).
    pub fn within(self, cap: Limits) -> Limits {
        Limits {
            total: self.total.min(cap.total),
            per_caller: self.per_caller.min(cap.per_caller),
        }
    }

    /// The local API's bounds: a scraper, the probes, the CLI and a few
    /// event streams need a handful each.
    pub fn api_for_nofile(nofile: u64) -> Limits {
        let total = (nofile / 8).clamp(8, Self::API_TOTAL as u64) as usize;
        Limits {
            total,
            per_caller: Self::PER_CALLER.min(total),
        }
    }
}

/// Why a connection or a drain was not admitted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Busy {
    #[error("the agent holds its limit of {0} connections here: retry shortly")]
    Full(usize),
    #[error("{who} already holds {limit} connections, its limit: close some, or retry shortly")]
    Caller { who: String, limit: usize },
    #[error("a drain of {who} is already running: one per container at a time; retry once it ends")]
    Draining { who: String },
}

impl Busy {
    /// The HTTP answer: 503 when the server is full (nothing the caller
    /// did), 429 when the caller is past its own share.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Busy::Full(_) => http::StatusCode::SERVICE_UNAVAILABLE,
            _ => http::StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

/// The shares in use.
#[derive(Debug)]
pub struct Shares {
    limits: Limits,
    inner: Mutex<InUse>,
}

#[derive(Debug, Default)]
struct InUse {
    total: usize,
    per_caller: HashMap<String, usize>,
    drains: HashSet<String>,
}

/// A connection's share, given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    shares: Arc<Shares>,
    caller: String,
}

/// A container's one drain, given back when dropped.
#[derive(Debug)]
pub struct DrainTicket {
    shares: Arc<Shares>,
    key: String,
}

impl Shares {
    pub fn new(limits: Limits) -> Arc<Shares> {
        Arc::new(Shares {
            limits,
            inner: Mutex::new(InUse::default()),
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Admits one connection of `caller` (a pod's uid, or a cgroup path).
    pub fn connect(self: &Arc<Self>, caller: &str) -> Result<Ticket, Busy> {
        let mut u = sync::lock(&self.inner);
        if u.total >= self.limits.total {
            return Err(Busy::Full(self.limits.total));
        }
        let n = u.per_caller.entry(caller.to_string()).or_default();
        if *n >= self.limits.per_caller {
            return Err(Busy::Caller {
                who: shown(caller),
                limit: self.limits.per_caller,
            });
        }
        *n += 1;
        u.total += 1;
        Ok(Ticket {
            shares: self.clone(),
            caller: caller.to_string(),
        })
    }

    /// Admits the one drain of `pod`'s `container` in the pod's `epoch`
    /// (`None` before its deletion; the deletion's time during it), so
    /// that a drain begun before the deletion never holds the slot of the
    /// termination's hook.
    pub fn drain(
        self: &Arc<Self>,
        pod: &str,
        container: Option<&str>,
        epoch: Option<&str>,
    ) -> Result<DrainTicket, Busy> {
        let key = format!("{pod}/{}/{}", container.unwrap_or("-"), epoch.unwrap_or("live"));
        let mut u = sync::lock(&self.inner);
        if !u.drains.insert(key.clone()) {
            let who = match container {
                Some(c) => format!("container {} of pod {}", shown(c), shown(pod)),
                None => format!("pod {}", shown(pod)),
            };
            return Err(Busy::Draining { who });
        }
        Ok(DrainTicket {
            shares: self.clone(),
            key,
        })
    }

    /// Connections open now, in all.
    pub fn open(&self) -> usize {
        sync::lock(&self.inner).total
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut u = sync::lock(&self.shares.inner);
        u.total -= 1;
        if let Some(n) = u.per_caller.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                u.per_caller.remove(&self.caller);
            }
        }
    }
}

impl Drop for DrainTicket {
    fn drop(&mut self) {
        sync::lock(&self.shares.inner).drains.remove(&self.key);
    }
}

/// A caller's name in a message: never more than a line's worth.
fn shown(s: &str) -> String {
    graceful_api::clip(s, 100)
}

#[cfg(test)]
mod tests;
