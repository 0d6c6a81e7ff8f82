//! Whether a pod opted in to graceful, and the workload it belongs to.
//!
//! A pod has **opted in** when it carries anything of graceful's: a
//! `graceful.dev/` annotation or label (a gate, a drain setting, what
//! injection by label wrote) or a preStop exec hook that runs
//! `graceful-wait`. Only those pods get the terminating report, unless the
//! report scope widens it ([`super::report_scope`]).
//!
//! The workload is the pod's controller as `kind/name`, lower-case as
//! kubectl prints it, with a ReplicaSet named for its Deployment (its name
//! less the pod's `pod-template-hash`) and a CronJob's Job named for its
//! CronJob; a pod without a controller is `pod` (one value for all of
//! them: the label's values stay bounded).

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::PodSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta};

/// The prefix of graceful's annotations and labels (the drain settings'
/// too).
pub const PREFIX: &str = "graceful.dev/";
/// What the exec gate runs (from the gate directory or an image volume).
const WAIT: &str = "graceful-wait";
/// The workload of a pod without a controller.
pub const NO_CONTROLLER: &str = "pod";

/// A kind as Kubernetes spells them: `Deployment`, `StatefulSet`.
fn is_kind(k: &str) -> bool {
    (1..=63).contains(&k.len()) && k.chars().all(|c| c.is_ascii_alphanumeric())
}

/// An object's name as the API server allows a controller's: a DNS
/// subdomain (lower-case letters, digits, `-` and `.`, at most 253).
fn is_name(n: &str) -> bool {
    (1..=253).contains(&n.len())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// Whether the pod carries anything of graceful's.
pub fn opted_in(meta: &ObjectMeta, spec: Option<&PodSpec>) -> bool {
    let ours = |m: &Option<BTreeMap<String, String>>| m.iter().flatten().any(|(k, _)| k.starts_with(PREFIX));
    ours(&meta.annotations) || ours(&meta.labels) || spec.is_some_and(runs_graceful_wait)
}

/// A container's preStop exec runs `graceful-wait`, by its first word's
/// file name (`/graceful/graceful-wait`, `graceful-wait`).
fn runs_graceful_wait(spec: &PodSpec) -> bool {
    super::hooks::pre_stops(spec)
        .filter_map(|(_, h)| h.exec.as_ref()?.command.as_ref()?.first())
        .any(|first| first.rsplit('/').next() == Some(WAIT))
}

/// The pod's controller, `kind/name`; [`NO_CONTROLLER`] without one.
pub fn workload(meta: &ObjectMeta) -> String {
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    // A bare pod's author may write any ownerReference (the API server
    // checks only that kind and name are there): one that is not a kind
    // and an object name as Kubernetes makes them names no workload, so a
    // label value stays short and printable.
    let Some(o) = owner.filter(|o| is_kind(&o.kind) && is_name(&o.name)) else {
        return NO_CONTROLLER.into();
    };
    let hash = meta.labels.as_ref().and_then(|l| l.get("pod-template-hash"));
    if o.kind == "ReplicaSet" {
        if let Some(deploy) = hash.and_then(|h| o.name.strip_suffix(&format!("-{h}"))) {
            return format!("deployment/{deploy}");
        }
    }
    if o.kind == "Job" {
        if let Some(cron) = cron_job(&o.name) {
            return format!("cronjob/{cron}");
        }
    }
    format!("{}/{}", o.kind.to_lowercase(), o.name)
}

/// The CronJob a Job was made by, from its name: the CronJob controller
/// names each run `<cronjob>-<its scheduled time in minutes since the
/// epoch>`, eight digits from 2019 (26,000,000) to 2160. Without this each
/// run of a CronJob is a workload of its own: a per-minute one would take
/// the node's every workload series (`--metrics-max-workloads`, 256) in
/// four hours and leave every other team's under `_other`, and its drains
/// could never be read together. A Job a person named so is counted as a
/// CronJob's: the pod cannot tell, as the Job's own owner is not on it.
fn cron_job(job: &str) -> Option<&str> {
    let (cron, run) = job.rsplit_once('-')?;
    let minutes = (run.len() == 8 && run.bytes().all(|b| b.is_ascii_digit()))
        .then(|| run.parse::<u32>().ok())
        .flatten()?;
    (minutes >= 26_000_000 && !cron.is_empty()).then_some(cron)
}

#[cfg(test)]
mod tests;
