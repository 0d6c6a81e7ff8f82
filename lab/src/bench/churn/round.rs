//! One round of the churn bench: its windows (without, with, and the
//! compared build), their throughput and CPU, and whether the machine was
//! quiet enough to count it.

use std::time::Duration;

use crate::bench::tcp_load::Outcome;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cond {
    Without,
    With,
    /// The `--compare` agent.
    Compared,
}

pub(super) struct Round {
    pub(super) without: Outcome,
    pub(super) with: Outcome,
    /// The `--compare` agent's window.
    pub(super) compared: Option<Outcome>,
    /// The order the windows ran in.
    pub(super) order: Vec<Cond>,
    /// Time from spawning the agent to its `ready` line (not measured load).
    pub(super) agent_ready: Duration,
    /// Connections the agent counted (inbound_total) during its measurement.
    pub(super) agent_counted: u64,
    /// `sock_set_state` programs loaded by someone else during the round.
    pub(super) foreign: usize,
}

impl Round {
    pub(super) fn ratio(&self) -> f64 {
        self.with.per_second() / self.without.per_second()
    }

    pub(super) fn cpu_ratio(&self) -> f64 {
        self.with.cpu_us_per_conn() / self.without.cpu_us_per_conn()
    }

    /// "without→with", or with `--compare` e.g. "w.o→with→cmp".
    pub(super) fn order_label(&self) -> String {
        let three = self.order.len() > 2;
        let name = |c: &Cond| match c {
            Cond::Without if three => "w.o",
            Cond::Without => "without",
            Cond::With => "with",
            Cond::Compared => "cmp",
        };
        self.order.iter().map(name).collect::<Vec<_>>().join("→")
    }

    pub(super) fn compared_ratio(&self) -> Option<f64> {
        self.compared.map(|c| c.per_second() / self.without.per_second())
    }

    pub(super) fn compared_cpu_ratio(&self) -> Option<f64> {
        self.compared
            .map(|c| c.cpu_us_per_conn() / self.without.cpu_us_per_conn())
    }

    /// Other work's share of the CPUs, the worst of the windows.
    pub(super) fn others_pct(&self) -> f64 {
        let compared = self.compared.map_or(0.0, |c| c.others_pct());
        self.without
            .others_pct()
            .max(self.with.others_pct())
            .max(compared)
    }

    /// Nothing else disturbed either window.
    pub(super) fn clean(&self, max_others_pct: f64) -> bool {
        self.foreign == 0 && self.others_pct() <= max_others_pct
    }
}
