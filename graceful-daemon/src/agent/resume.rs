//! What the previous agent held (a handover's, or a keeper's after a
//! crash), served again: each held hook from its own start, on the
//! transport it came by, and each hook whose record cannot be read
//! answered at once, so that it fails open.

use std::sync::Arc;

use tracing::{info, warn};

use crate::{
    continuity::handover::{self, take::Inherited, wire::Record},
    drain::hook::{record, Hooks},
    serve::gate::exec_resume,
    serve::httpgate::http_resume,
};

/// Serves every hook the previous agent held, each from its own start.
pub fn resume(inherited: Inherited, hooks: &Arc<Hooks>, http_gate: bool) {
    let paused_ms = (graceful_common::clock::monotonic_ns().saturating_sub(inherited.paused_ns)) as f64 / 1e6;
    info!(
        exec_hooks = inherited.exec_hooks.len(),
        http_hooks = inherited.http_hooks.len(),
        since_pause_ms = paused_ms,
        "handover: serving the hooks the previous agent held"
    );
    // Each registered before this returns (a keeper keeps it from then
    // on), served by a task of its own.
    for u in inherited.unreadable {
        answer_unreadable(hooks, u);
    }
    let read = |r: Record| record::hook_of(r).expect("a held hook's record");
    for (h, fd) in inherited.exec_hooks {
        let pod = h.pod.clone();
        if let Some(h) = hooks.resume_on(&pod, read(Record::ExecHook(h)), fd, exec_resume::open) {
            tokio::spawn(exec_resume::exec(h));
        }
    }
    for (h, fd) in inherited.http_hooks {
        if !http_gate {
            warn!(pod = %h.pod, "handover: an httpGet hook came, and this agent has no httpGet gate (no Kubernetes API): it fails open");
            continue;
        }
        let pod = h.pod.clone();
        if let Some(h) = hooks.resume_on(&pod, read(Record::HttpHook(h)), fd, http_resume::open) {
            tokio::spawn(http_resume::http(h));
        }
    }
}

/// A held hook whose record could not be read: answered at once, so that
/// it fails open (its SIGTERM comes now, without the rest of its drain)
/// rather than hang or be cut; said in the log and on the pod.
fn answer_unreadable(hooks: &Hooks, u: handover::take::Unreadable) {
    let why = format!(
        "the previous agent's record of this hook cannot be read ({})",
        u.why
    );
    warn!(pod = ?u.pod, "handover: {why}; answered now, so the hook fails open");
    hooks.drainer.metrics.error("handover_unreadable");
    if let (Some(api), Some(uid)) = (&hooks.drainer.pod_kube, &u.pod) {
        if let Some(p) = api.store.get(uid) {
            api.events.post_later(
                p.pod_ref(),
                "HandoverUnreadable",
                format!("{why}: its preStop hook was answered at once"),
                true,
            );
        }
    }
    let exec =
        rustix::net::sockopt::socket_domain(&u.conn).is_ok_and(|d| d == rustix::net::AddressFamily::UNIX);
    tokio::spawn(async move {
        if exec {
            exec_resume::fail_open(u.conn, &why).await
        } else {
            http_resume::fail_open(u.conn, &why).await
        }
    });
}
