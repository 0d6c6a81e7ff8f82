//! How fast a pod may start drains: a token bucket per pod. A pod's hooks
//! start one drain per container at its termination (and again after an
//! agent restart cut them); a pod that starts and abandons drains in a loop
//! costs the agent a namespace walk and the API an Event each, so past its
//! burst it gets a 429 that says when to retry, and costs nothing more.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::sync;

/// Drains a pod may start at once: as many as its connections to the gate
/// (a container's hook each, with room for scopes and retries).
pub const BURST: f64 = 32.0;
/// Then one more each this long.
pub const EVERY: Duration = Duration::from_secs(1);
/// Pods tracked before the full buckets are forgotten.
const TRACKED: usize = 4096;

/// A pod past its pace.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("pod {pod} started {burst} drains within {window_s} s, its pace: retry in {retry_ms} ms")]
pub struct TooFast {
    pub pod: String,
    pub burst: u32,
    pub window_s: u64,
    pub retry_ms: u64,
}

#[derive(Default)]
pub struct Pace {
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(&self, now: Instant) -> f64 {
        let gained = now.duration_since(self.at).as_secs_f64() / EVERY.as_secs_f64();
        (self.tokens + gained).min(BURST)
    }
}

impl Pace {
    /// Takes one start for `pod`, or says when the next one comes.
    pub fn take(&self, pod: &str) -> Result<(), TooFast> {
        self.take_at(pod, Instant::now())
    }

    pub fn take_at(&self, pod: &str, now: Instant) -> Result<(), TooFast> {
        let mut b = sync::lock(&self.buckets);
        if b.len() >= TRACKED && !b.contains_key(pod) {
            b.retain(|_, bucket| bucket.refilled(now) < BURST);
        }
        let bucket = b.entry(pod.to_string()).or_insert(Bucket {
            tokens: BURST,
            at: now,
        });
        let tokens = bucket.refilled(now);
        if tokens < 1.0 {
            return Err(TooFast {
                pod: graceful_api::clip(pod, 64),
                burst: BURST as u32,
                window_s: (BURST * EVERY.as_secs_f64()) as u64,
                retry_ms: ((1.0 - tokens) * EVERY.as_secs_f64() * 1000.0).ceil() as u64,
            });
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests;
