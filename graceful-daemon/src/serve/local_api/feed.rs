//! `GET /v1/events`: one NDJSON line per thing that happened, for
//! `graceful pods --watch` and for tools.
//!
//! - `{"type":"pods","pods":[...]}`: every pod with its counts, first on
//!   connect, then whenever something in it changed (checked on every
//!   cgroup change and every [`TICK`]: counts move with every connection,
//!   and a display needs no more than this);
//! - `{"type":"drain_started",...}`, `drain_released`, `drain_abandoned`:
//!   the drains, as they happen;
//! - `{"type":"termination",...}`: a terminating pod's report.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use graceful_api::drain::DrainEvent;
use serde::Serialize;
use tokio::sync::{broadcast, mpsc};

use super::node::Node;
use crate::{
    drain::terminations::{recv, TerminationReport},
    node::resolver::{counts::PodView, index::Change},
    serve::reply::{line_bytes, ndjson, Body},
};

pub const TICK: Duration = Duration::from_millis(250);

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Pods { pods: &'a [PodView] },
    Termination(&'a TerminationReport),
}

pub fn stream(node: Arc<Node>, changes: broadcast::Receiver<Change>) -> http::Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    // Subscribed before the response goes out: nothing after it is missed.
    let drains = Some(node.drains.subscribe());
    let terms = node.terminations.as_ref().map(|t| t.subscribe());
    tokio::spawn(run(node, changes, drains, terms, tx));
    ndjson(rx)
}

async fn run(
    node: Arc<Node>,
    mut changes: broadcast::Receiver<Change>,
    mut drains: Option<broadcast::Receiver<DrainEvent>>,
    mut terms: Option<broadcast::Receiver<TerminationReport>>,
    tx: mpsc::Sender<Bytes>,
) {
    use broadcast::error::RecvError::{Closed, Lagged};
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Bytes::new();
    loop {
        let line = tokio::select! {
            _ = tx.closed() => return,
            _ = tick.tick() => None,
            c = changes.recv() => match c {
                Err(Closed) => return,
                _ => None,
            },
            e = recv(&mut drains) => match e {
                Ok(e) => Some(line_bytes(&e)),
                Err(Lagged(_)) => { node.metrics.error("feed_lagged"); None }
                Err(Closed) => { drains = None; None }
            },
            t = recv(&mut terms) => match t {
                Ok(t) => Some(line_bytes(&Line::Termination(&t))),
                Err(Lagged(_)) => { node.metrics.error("feed_lagged"); None }
                Err(Closed) => { terms = None; None }
            },
        };
        if let Some(line) = line {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let pods = node.pods();
        let snapshot = line_bytes(&Line::Pods { pods: &pods });
        if snapshot != last {
            last = snapshot.clone();
            if tx.send(snapshot).await.is_err() {
                return;
            }
        }
    }
}
