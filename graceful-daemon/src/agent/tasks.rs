//! The agent's long-running tasks, each under a name: one that ends on its
//! own (a panic, or a loop that returned) is logged when it ends, not
//! discovered later by its silence, and all of them are stopped on
//! shutdown within a bound.

use std::{collections::HashMap, future::Future, time::Duration};

use tokio::task::{Id, JoinError, JoinSet};
use tracing::{debug, error, warn};

#[derive(Default)]
pub struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
}

impl Tasks {
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Waits for the next task to end and says which it was and how; pends
    /// forever when there is none, so it can sit in a `select!`.
    pub async fn ended(&mut self) -> (&'static str, Result<(), JoinError>) {
        match self.set.join_next_with_id().await {
            Some(Ok((id, ()))) => (self.name(id), Ok(())),
            Some(Err(e)) => (self.name(e.id()), Err(e)),
            None => std::future::pending().await,
        }
    }

    fn name(&mut self, id: Id) -> &'static str {
        self.names.remove(&id).unwrap_or("unnamed")
    }

    /// Logs a task that ended while the agent runs: none of them should.
    pub fn report(name: &'static str, how: Result<(), JoinError>) {
        match how {
            Ok(()) => warn!(task = name, "an agent task ended on its own; the rest go on"),
            Err(e) if e.is_panic() => error!(task = name, "an agent task panicked; the rest go on"),
            Err(e) => warn!(task = name, error = %e, "an agent task stopped"),
        }
    }

    /// Stops every task and waits for them, `limit` at most. Returns the
    /// names of those still running past it (they are left to the
    /// runtime's own shutdown).
    pub async fn shutdown(mut self, limit: Duration) -> Vec<&'static str> {
        self.set.abort_all();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.set.join_next_with_id()).await {
                Ok(Some(Ok((id, ())))) => debug!(task = self.name(id), "task stopped"),
                Ok(Some(Err(e))) => {
                    let name = self.name(e.id());
                    if e.is_panic() {
                        error!(task = name, "an agent task panicked while stopping");
                    }
                }
                Ok(None) => return Vec::new(),
                Err(_) => {
                    let mut left: Vec<_> = self.names.into_values().collect();
                    left.sort_unstable();
                    return left;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
