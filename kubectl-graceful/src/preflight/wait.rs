//! One node's preflight pod: made, watched to its end, its findings read
//! from its log, and deleted whatever happened. A pod that cannot start
//! (its image not pulled, a host directory missing) says why from its
//! container's waiting reason or its Warning events, without waiting out
//! the time limit.

use std::time::{Duration, Instant};

use graceful_api::views::doctor::Finding;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    api::{DeleteParams, ListParams, LogParams, PostParams},
    Api,
};

use crate::agents::said;

/// Waiting reasons that end the wait: the kubelet will not get further
/// without a change made by hand.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Warning event reasons of a pod that will not start.
const STUCK_EVENTS: &[&str] = &["FailedMount", "FailedCreatePodSandBox", "FailedAttachVolume"];

/// Creates `pod`, waits up to `limit` for its answer, deletes it.
pub async fn doctor(pods: &Api<Pod>, pod: Pod, limit: Duration) -> Result<Vec<Finding>, String> {
    let made = pods
        .create(&PostParams::default(), &pod)
        .await
        .map_err(|e| format!("cannot create the preflight pod: {}", said(&e)))?;
    let name = made.metadata.name.clone().unwrap_or_default();
    let got = answer(pods, &name, limit).await;
    let gone = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    if let Err(e) = pods.delete(&name, &gone).await {
        let what = format!("the preflight pod {name} was not deleted: {}", said(&e));
        return got.map_err(|g| format!("{g}; {what}")).and(Err(what));
    }
    got
}

async fn answer(pods: &Api<Pod>, name: &str, limit: Duration) -> Result<Vec<Finding>, String> {
    let start = Instant::now();
    let mut turn = 0u32;
    loop {
        let pod = pods.get(name).await.map_err(|e| said(&e))?;
        let status = pod.status.clone().unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return findings(pods, name, &pod).await;
        }
        let waiting = status
            .container_statuses
            .iter()
            .flatten()
            .find_map(|c| c.state.as_ref()?.waiting.clone());
        if let Some(w) = waiting.filter(|w| STUCK.contains(&w.reason.as_deref().unwrap_or_default())) {
            return Err(format!(
                "the pod cannot start: {}: {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            ));
        }
        // Every 5 s: a Warning event that means it never will.
        if turn % 10 == 9 {
            if let Some(e) = stuck_event(pods, name).await {
                return Err(format!("the pod cannot start: {e}"));
            }
        }
        if start.elapsed() > limit {
            let why = stuck_event(pods, name)
                .await
                .unwrap_or_else(|| format!("phase {}", if phase.is_empty() { "Pending" } else { &phase }));
            return Err(format!("no answer within {} s ({why})", limit.as_secs()));
        }
        turn += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The newest Warning event of the pod that says it will not start.
async fn stuck_event(pods: &Api<Pod>, name: &str) -> Option<String> {
    let ns = pods.namespace()?.to_string();
    let events: Api<Event> = Api::namespaced(pods.clone().into_client(), &ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name},type=Warning"));
    let list = events.list(&lp).await.ok()?;
    list.items
        .into_iter()
        .filter(|e| STUCK_EVENTS.contains(&e.reason.as_deref().unwrap_or_default()))
        .max_by_key(|e| e.last_timestamp.clone().map(|t| t.0))
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
}

/// The doctor's findings from the ended pod's log.
async fn findings(pods: &Api<Pod>, name: &str, pod: &Pod) -> Result<Vec<Finding>, String> {
    let lp = LogParams {
        container: Some("agent".into()),
        ..LogParams::default()
    };
    let log = pods.logs(name, &lp).await.map_err(|e| {
        format!(
            "cannot read the preflight pod's log: {} (needs `get` on pods/log)",
            said(&e)
        )
    })?;
    let line = log.lines().rev().find(|l| l.trim_start().starts_with('['));
    match line.map(serde_json::from_str::<Vec<Finding>>) {
        Some(Ok(f)) => Ok(f),
        _ => {
            // Not the doctor's answer: the container's own end says why
            // (an image without `graceful doctor --json`, a crash).
            let ended = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref()?.terminated.clone());
            let how = ended.map_or(String::new(), |t| {
                format!(
                    " (exit {}{}{})",
                    t.exit_code,
                    t.reason.map(|r| format!(", {r}")).unwrap_or_default(),
                    t.message.map(|m| format!(": {}", m.trim())).unwrap_or_default()
                )
            });
            let last = log.lines().last().unwrap_or("(empty)");
            Err(format!(
                "the pod's output is not the doctor's findings{how}: {last} (is --image an agent of this version?)"
            ))
        }
    }
}
