//! The truth the agent is held to, and the drift arithmetic: what the
//! workers counted (connections established, by the cgroup that made them
//! and the cgroup that served them), what `ss` sees live at the end, and
//! the agent's figures less those.

use anyhow::Context as _;

/// Counts, comma-separated (the workers' answers).
pub fn csv(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

pub fn parse_csv(s: &str) -> anyhow::Result<Vec<u64>> {
    s.split(',')
        .map(|w| w.parse().with_context(|| format!("not a count: {w:?} in {s:?}")))
        .collect()
}

/// Connections established, by cgroup index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Truth {
    /// Made by the cgroup (outbound).
    pub outbound: Vec<u64>,
    /// Served by the cgroup (inbound: established on its side, accepted or not).
    pub inbound: Vec<u64>,
    /// Of those, held open to the end.
    pub held_out: Vec<u64>,
    pub held_in: Vec<u64>,
}

impl Truth {
    pub fn new(cgroups: usize) -> Truth {
        Truth {
            outbound: vec![0; cgroups],
            inbound: vec![0; cgroups],
            held_out: vec![0; cgroups],
            held_in: vec![0; cgroups],
        }
    }

    /// Cgroup `from` established `per_target[j]` connections to cgroup j.
    pub fn add(&mut self, from: usize, per_target: &[u64]) {
        self.outbound[from] += per_target.iter().sum::<u64>();
        for (i, n) in self.inbound.iter_mut().zip(per_target) {
            *i += n;
        }
    }

    /// As [`Truth::add`], for connections held open to the end.
    pub fn hold(&mut self, from: usize, per_target: &[u64]) {
        self.add(from, per_target);
        self.held_out[from] += per_target.iter().sum::<u64>();
        for (i, n) in self.held_in.iter_mut().zip(per_target) {
            *i += n;
        }
    }

    /// Every connection established (each has one client and one server side).
    pub fn connections(&self) -> u64 {
        self.outbound.iter().sum()
    }
}

/// One cgroup's figures, as the agent has them or as they should be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub inbound_live: i64,
    pub outbound_live: i64,
    pub listeners: i64,
    pub inbound_total: i64,
    pub outbound_total: i64,
    pub inbound_closed_total: i64,
}

impl Figures {
    /// What cgroup `i` should show: live counts and listeners from the
    /// kernel's view (`ss`), totals from what the workers counted; every
    /// inbound connection no longer live was closed.
    pub fn expected(truth: &Truth, i: usize, ss: &graceful_test_support::ss::View) -> Figures {
        let inbound_total = truth.inbound[i] as i64;
        Figures {
            inbound_live: ss.inbound_live as i64,
            outbound_live: ss.outbound_live as i64,
            listeners: ss.listeners as i64,
            inbound_total,
            outbound_total: truth.outbound[i] as i64,
            inbound_closed_total: inbound_total - ss.inbound_live as i64,
        }
    }

    /// The agent's row, as signed figures (a live count below zero, which
    /// the kernel side keeps as a wrapped u64, shows as negative).
    pub fn of_agent(r: &crate::bench::agent::Row) -> Figures {
        Figures {
            inbound_live: r.inbound_live as i64,
            outbound_live: r.outbound_live as i64,
            listeners: r.listeners as i64,
            inbound_total: r.inbound_total as i64,
            outbound_total: r.outbound_total as i64,
            inbound_closed_total: r.inbound_closed_total as i64,
        }
    }

    /// Field by field, `self - other`: the drift when `self` is the agent's.
    pub fn minus(self, o: Figures) -> Figures {
        Figures {
            inbound_live: self.inbound_live - o.inbound_live,
            outbound_live: self.outbound_live - o.outbound_live,
            listeners: self.listeners - o.listeners,
            inbound_total: self.inbound_total - o.inbound_total,
            outbound_total: self.outbound_total - o.outbound_total,
            inbound_closed_total: self.inbound_closed_total - o.inbound_closed_total,
        }
    }

    pub fn plus(self, o: Figures) -> Figures {
        self.minus(Figures::default().minus(o))
    }

    /// The live part: connections and listeners.
    pub fn live_is_zero(&self) -> bool {
        self.inbound_live == 0 && self.outbound_live == 0 && self.listeners == 0
    }

    pub fn totals_are_zero(&self) -> bool {
        self.inbound_total == 0 && self.outbound_total == 0 && self.inbound_closed_total == 0
    }
}

/// Sum of every cgroup's drift.
pub fn total(drifts: &[Figures]) -> Figures {
    drifts.iter().fold(Figures::default(), |a, d| a.plus(*d))
}

#[cfg(test)]
mod tests;
