//! Events on a pod, aggregated and paced as client-go's event correlator
//! does for the kubelet's, in its three stages:
//! 1. **Similar Events are combined**: past [`SIMILAR`] different messages
//!    of one reason on one pod within [`WINDOW`], the next are posted as
//!    one Event, its message prefixed [`COMBINED`] (a drain's message names
//!    figures that differ each time, so repeats are rarely identical);
//! 2. **a repeat is counted**: an Event that repeats one already posted on
//!    the same pod (same reason and message, or combined) within
//!    [`WINDOW`] is counted on it, its `count` and `lastTimestamp` written
//!    at most once every [`FLUSH`];
//! 3. **each pod has a budget of writes** ([`BURST`], then one each
//!    [`REFILL`]), past which its Events are dropped and counted.
//!
//! So a pod that makes the agent post in a loop (a drain started and
//! abandoned, again and again) costs the API server a few writes, not one
//! each.

use std::{
    collections::{HashMap, HashSet},
    hash::{Hash, Hasher},
    time::{Duration, Instant},
};

/// How long a posted Event takes its repeats.
pub const WINDOW: Duration = Duration::from_secs(600);
/// How often a repeated Event's count is written.
pub const FLUSH: Duration = Duration::from_secs(30);
/// A pod's writes at once (client-go's spam filter: 25)...
pub const BURST: f64 = 25.0;
/// ...then one each (client-go's: 5 minutes).
pub const REFILL: Duration = Duration::from_secs(300);
/// Different messages of one reason on one pod posted as they are, within
/// [`WINDOW`], before the next are combined (client-go's: 10).
pub const SIMILAR: usize = 10;
/// The message prefix of a combined Event (client-go's words).
pub const COMBINED: &str = "(combined from similar events): ";
/// Pods and Events remembered, at most.
const REMEMBERED: usize = 4096;

/// What to do with one Event.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Post a new Event with this message (the Event's own, or combined:
    /// [`COMBINED`] and it).
    Create(String),
    /// Counted on the Event posted as `name`; `flush`: the caller writes
    /// the count after [`FLUSH`] ([`Correlator::flush`]), none being due.
    Counted { name: String, flush: bool },
    /// Over the pod's budget: dropped.
    Dropped,
}

/// A repeated Event's count, to write.
#[derive(Debug, PartialEq, Eq)]
pub struct Flush {
    pub name: String,
    pub count: u32,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    pod: String,
    reason: String,
    message: String,
}

struct Posted {
    /// The Event's name once created (`None` while the create is in flight).
    name: Option<String>,
    count: u32,
    written: u32,
    flush_due: bool,
    at: Instant,
}

struct Budget {
    tokens: f64,
    at: Instant,
}

/// The messages one reason had on one pod, as hashes, within [`WINDOW`].
struct Similar {
    messages: HashSet<u64>,
    at: Instant,
}

#[derive(Default)]
pub struct Correlator {
    posted: HashMap<Key, Posted>,
    budgets: HashMap<String, Budget>,
    similar: HashMap<(String, String), Similar>,
}

/// The key of an Event posted with `message`: a combined one's is its
/// prefix alone, so every combined Event of a reason is one.
fn key(pod: &str, reason: &str, message: &str) -> Key {
    let message = if message.starts_with(COMBINED) {
        COMBINED
    } else {
        message
    };
    Key {
        pod: pod.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

impl Correlator {
    /// Decides for an Event on pod `pod` (its uid) at `now`.
    pub fn decide(&mut self, pod: &str, reason: &str, message: &str, now: Instant) -> Decision {
        self.forget(now);
        let message = self.combine(pod, reason, message, now);
        let key = key(pod, reason, &message);
        if let Some(p) = self
            .posted
            .get_mut(&key)
            .filter(|p| now.duration_since(p.at) < WINDOW)
        {
            p.count += 1;
            p.at = now;
            let Some(name) = p.name.clone() else {
                // Its create is in flight: counted with it.
                return Decision::Counted {
                    name: String::new(),
                    flush: false,
                };
            };
            let flush = !std::mem::replace(&mut p.flush_due, true);
            return Decision::Counted { name, flush };
        }
        if !self.spend(pod, now) {
            return Decision::Dropped;
        }
        self.posted.insert(
            key,
            Posted {
                name: None,
                count: 1,
                written: 1,
                flush_due: false,
                at: now,
            },
        );
        Decision::Create(message)
    }

    /// `message`, or combined: the first `SIMILAR - 1` different messages
    /// of a reason on a pod within [`WINDOW`] are posted as they are (and
    /// their repeats counted on them); from the `SIMILAR`th on, as client-go
    /// does, each other one is combined.
    fn combine(&mut self, pod: &str, reason: &str, message: &str, now: Instant) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        message.hash(&mut h);
        let h = h.finish();
        let similar = self
            .similar
            .entry((pod.into(), reason.into()))
            .or_insert_with(|| Similar {
                messages: HashSet::new(),
                at: now,
            });
        if now.duration_since(similar.at) >= WINDOW {
            similar.messages.clear();
        }
        similar.at = now;
        if similar.messages.contains(&h) {
            return message.to_string();
        }
        if similar.messages.len() < SIMILAR - 1 {
            similar.messages.insert(h);
            return message.to_string();
        }
        format!("{COMBINED}{message}")
    }

    /// The Event created with `message` (as [`Decision::Create`] gave it)
    /// for `pod` and `reason` is named `name`.
    pub fn created(&mut self, pod: &str, reason: &str, message: &str, name: String) {
        let key = key(pod, reason, message);
        if let Some(p) = self.posted.get_mut(&key) {
            p.name = Some(name);
            // Repeats counted while it was created: written at the next flush.
            p.flush_due = false;
        }
    }

    /// The count to write for the Event named `name`, once [`FLUSH`] has
    /// passed; `None` if nothing new, or over the pod's budget.
    pub fn flush(&mut self, name: &str, now: Instant) -> Option<Flush> {
        let (key, p) = self
            .posted
            .iter_mut()
            .find(|(_, p)| p.name.as_deref() == Some(name))?;
        p.flush_due = false;
        if p.count == p.written {
            return None;
        }
        let pod = key.pod.clone();
        let count = p.count;
        if !self.spend(&pod, now) {
            return None;
        }
        if let Some(p) = self.posted.values_mut().find(|p| p.name.as_deref() == Some(name)) {
            p.written = count;
        }
        Some(Flush {
            name: name.to_string(),
            count,
        })
    }

    /// Takes one write from `pod`'s budget.
    fn spend(&mut self, pod: &str, now: Instant) -> bool {
        let b = self.budgets.entry(pod.to_string()).or_insert(Budget {
            tokens: BURST,
            at: now,
        });
        let gained = now.duration_since(b.at).as_secs_f64() / REFILL.as_secs_f64();
        let tokens = (b.tokens + gained).min(BURST);
        if tokens < 1.0 {
            return false;
        }
        *b = Budget {
            tokens: tokens - 1.0,
            at: now,
        };
        true
    }

    /// Forgets Events past their window, and full budgets, when many are kept.
    fn forget(&mut self, now: Instant) {
        if self.posted.len() >= REMEMBERED {
            self.posted.retain(|_, p| now.duration_since(p.at) < WINDOW);
        }
        if self.similar.len() >= REMEMBERED {
            self.similar.retain(|_, s| now.duration_since(s.at) < WINDOW);
        }
        if self.budgets.len() >= REMEMBERED {
            self.budgets.retain(|_, b| {
                b.tokens + now.duration_since(b.at).as_secs_f64() / REFILL.as_secs_f64() < BURST
            });
        }
    }
}

#[cfg(test)]
mod tests;
