//! One drain: watch a scope's cgroups, wake on each of their inbound
//! changes, and release the moment the policy allows.

use std::time::Duration;

use graceful_api::Resumed;
use graceful_common::{clock::monotonic_ns, watch};
use tokio::sync::broadcast::error::RecvError;

use super::policy::{decide, Decision, Observed, Params, Policy, Reason};
use crate::kernel::bpf::{Kernel, MapError};

/// How a drain ended, what its exclusions left out, and one point of its
/// inbound timeline: the contract's types, which every client reads.
pub use graceful_api::{
    drain::{Ignored, Report},
    Point,
};

/// What the counters say of `cgroups`, with the connections the exclusions
/// leave out taken away when the drain has them (`excluding`), and those
/// apart: (observed, inbound opened ever, left out now).
fn observe(kernel: &Kernel, cgroups: &[u64], excluding: bool) -> (Observed, u64, u64) {
    let mut o = Observed::default();
    let mut total = 0;
    let mut ignored = 0;
    for c in cgroups {
        let k = kernel.counters.get(*c);
        let left_out = if excluding { k.inbound_ignored_live } else { 0 };
        o.inbound_live += k.inbound_live.saturating_sub(left_out);
        ignored += left_out;
        o.last_inbound_open_ns = o.last_inbound_open_ns.max(k.last_inbound_open_ns);
        o.last_inbound_close_ns = o.last_inbound_close_ns.max(k.last_inbound_close_ns);
        o.last_inbound_rx_ns = o.last_inbound_rx_ns.max(k.last_inbound_rx_ns);
        total += k.inbound_total;
    }
    (o, total, ignored)
}

/// Runs a drain over `cgroups` until the policy releases it. `progress` is
/// called whenever the inbound count changes.
///
/// `exited` resolves when the containers the drain waits for (`--after-containers`)
/// have exited; pass `None` when there are none. With it, only their exit
/// or the deadline releases the drain: a mesh proxy must outlive the app's
/// outbound calls, whatever its inbound traffic does.
pub async fn run(
    kernel: &Kernel,
    cgroups: &[u64],
    params: Params,
    exited: Option<impl std::future::Future<Output = ()>>,
    progress: impl FnMut(&Point),
) -> Result<Report, MapError> {
    resume(kernel, cgroups, params, &[], None, exited, progress).await
}

/// [`run`], for a drain whose cgroups have exclusions set (`rules`, as
/// written, in the order of their tallies: see [`Kernel::exclude`]), or
/// that an earlier agent ran before (`before`, as its client saw it): the
/// report starts from what was seen then, and `progress` is called for the
/// new points only.
#[expect(
    clippy::too_many_lines,
    reason = "a drain's whole loop (its first look, then each wake and its decision), kept in one place so that the report's figures come from one pass"
)]
pub async fn resume(
    kernel: &Kernel,
    cgroups: &[u64],
    params: Params,
    rules: &[String],
    before: Option<&Resumed>,
    exited: Option<impl std::future::Future<Output = ()>>,
    mut progress: impl FnMut(&Point),
) -> Result<Report, MapError> {
    let waits_for_exits = exited.is_some();
    let exited = async move {
        match exited {
            Some(f) => f.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(exited);
    let mut containers_exited = false;
    // Subscribe before the first read, so no change falls between the two.
    let mut rx = kernel.events.subscribe();
    let flags = watch::CONNECTIONS
        | if params.policy == Policy::Quiet {
            watch::PAYLOAD
        } else {
            0
        };
    let _watching = kernel.watch(cgroups, flags)?;

    let excluding = !rules.is_empty();
    let (first, total_at_start, _) = observe(kernel, cgroups, excluding);
    let tallies_at_start = kernel.tallies(cgroups);
    // A resumed drain's first look is not its start: its points count
    // from the original start like the earlier ones.
    let first_ms = match before {
        Some(_) => monotonic_ns().saturating_sub(params.start_ns) / 1_000_000,
        None => 0,
    };
    // A client that saw no progress line saw nothing to carry on.
    let before = before.filter(|b| !b.timeline.is_empty());
    let mut timeline: Vec<Point> = before.map(|b| b.timeline.clone()).unwrap_or_default();
    let first_point = Point {
        ms: first_ms.max(timeline.last().map_or(0, |p| p.ms)),
        inbound: first.inbound_live,
    };
    progress(&first_point);
    timeline.push(first_point);
    let inbound_at_start = before.map_or(first.inbound_live, |b| b.inbound_at_start);
    let mut peak = first
        .inbound_live
        .max(before.map_or(0, |b| b.peak_inbound.max(b.inbound_at_start)));
    loop {
        let now = monotonic_ns();
        let (o, total, ignored_now) = observe(kernel, cgroups, excluding);
        let ms = now.saturating_sub(params.start_ns) / 1_000_000;
        if timeline.last().map(|p| p.inbound) != Some(o.inbound_live) {
            let p = Point {
                ms,
                inbound: o.inbound_live,
            };
            progress(&p);
            timeline.push(p);
        }
        peak = peak.max(o.inbound_live);
        let decision = match decide(&params, &o, now) {
            _ if containers_exited => Decision::Release(Reason::ContainersExited),
            // Waiting for containers to exit: only they, or the deadline, release.
            Decision::Release(Reason::Drained | Reason::Quiet) if waits_for_exits => {
                Decision::WaitUntil(params.deadline_ns())
            }
            d => d,
        };
        match decision {
            Decision::Release(reason) => {
                let tallies = kernel.tallies(cgroups);
                // Those live at the start were left out as it began.
                let ignored: Vec<Ignored> = rules
                    .iter()
                    .zip(tallies)
                    .map(|(rule, n)| Ignored {
                        rule: rule.clone(),
                        connections: n,
                    })
                    .collect();
                let ignored_since: u64 = tallies
                    .iter()
                    .zip(tallies_at_start)
                    .map(|(now, then)| now.saturating_sub(then))
                    .sum();
                let after_last_close_ms = (reason == Reason::Drained
                    && o.last_inbound_close_ns >= params.start_ns)
                    .then(|| now.saturating_sub(o.last_inbound_close_ns) / 1_000_000);
                return Ok(Report {
                    reason,
                    policy: params.policy,
                    waited_ms: ms,
                    inbound_at_start,
                    peak_inbound: peak,
                    inbound_at_release: o.inbound_live,
                    new_connections: total.saturating_sub(total_at_start).saturating_sub(ignored_since),
                    start_ns: params.start_ns,
                    release_ns: now,
                    after_last_close_ms,
                    timeline,
                    cgroups: cgroups.to_vec(),
                    ignored,
                    ignored_at_release: ignored_now,
                    uncounted: params.uncounted,
                });
            }
            Decision::WaitUntil(at) => {
                let sleep = tokio::time::sleep(Duration::from_nanos(at.saturating_sub(now)));
                tokio::pin!(sleep);
                // Wake for our cgroups' events or the next instant the
                // answer can change, whichever comes first.
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        _ = &mut exited, if !containers_exited => { containers_exited = true; break }
                        ev = rx.recv() => match ev {
                            Ok(ev) if cgroups.contains(&ev.cgroup_id) => break,
                            Ok(_) => continue,
                            // Missed some: just look again.
                            Err(RecvError::Lagged(_)) => break,
                            Err(RecvError::Closed) => { (&mut sleep).await; break }
                        },
                    }
                }
            }
        }
    }
}
