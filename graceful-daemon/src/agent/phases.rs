//! The agent's start, in named phases: each phase's time is logged as it
//! ends (at debug), and the whole start once, in one line, when the agent
//! serves (`start phases`), so that a slow start says where it went.

use std::time::Instant;

use tracing::{debug, info};

pub struct Phases {
    began: Instant,
    last: Instant,
    done: Vec<(&'static str, u128)>,
}

impl Default for Phases {
    fn default() -> Phases {
        Phases::new()
    }
}

impl Phases {
    pub fn new() -> Phases {
        let now = Instant::now();
        Phases {
            began: now,
            last: now,
            done: Vec::new(),
        }
    }

    /// Ends phase `name`, which ran since the last one ended.
    pub fn done(&mut self, name: &'static str) {
        let ms = self.last.elapsed().as_millis();
        debug!(phase = name, ms, "start phase done");
        self.done.push((name, ms));
        self.last = Instant::now();
    }

    /// Logs every phase so far, in order, and the total.
    pub fn report(&self) {
        let phases: Vec<String> = self.done.iter().map(|(n, ms)| format!("{n} {ms} ms")).collect();
        info!(
            total_ms = self.began.elapsed().as_millis(),
            phases = %phases.join(", "),
            "start phases"
        );
    }
}
