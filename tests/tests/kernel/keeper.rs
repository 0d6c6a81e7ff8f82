//! An agent under its keeper (`graceful daemon --keeper on`, as the
//! DaemonSet's container runs it) killed with SIGKILL, as the OOM killer
//! or `kill -9` would: the keeper held a duplicate of every listener and
//! held hook, starts the agent again, and the new agent serves each hook
//! on from its original start. An exec hook's `graceful-wait` does not
//! reconnect; a kubelet's httpGet hook gets its one answer; a hook that
//! comes while no agent runs waits in the kept listener; a hook whose
//! deadline passed while no agent ran is released at once. The counts
//! stay exact throughout.

use std::time::{Duration, Instant};

use graceful_tests::{
    agent::{since_pause_ms, Agent},
    cgroup::Cgroup,
    event_slack_ms,
    gate::{
        abstract_listening, engaged, finish_engaged, hook, hook_at, pod_holding, pod_socket, wait_draining,
    },
    http_hook::{wait_listening, Scene, PORT},
    peer::held_connections,
    pod::SimPod,
};
use serde_json::json;

use crate::{
    carried_over, drains, held_hook, held_http_hook, http_answered_once, http_still_held, released_across,
    require_root, still_held, HELD,
};

/// The keeper's line for the restart, and the new agent's for the take.
fn restarted(agent: &Agent, hooks: usize) {
    let log = agent.log_text();
    assert!(log.contains("keeper: the agent was killed by SIGKILL"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("taking the listeners and held hooks it kept")
                && l.contains(&format!("hooks={hooks}"))),
        "{log}"
    );
    let since = since_pause_ms(&log);
    eprintln!("no agent ran for {since:.1} ms: from the crash to the held hooks served again");
}

/// The keeper is `graceful-keeper`, exec'd by `graceful daemon --keeper on`
/// in the same process; its agent runs the very `graceful` that started
/// it, named `graceful` (not after the descriptor it was exec'd through).
fn runs_as_programs(agent: &Agent, kept: u32) {
    let keeper = agent.pid().unwrap();
    let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let comm = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    let graceful = std::fs::canonicalize(graceful_tests::agent::graceful_bin()).unwrap();
    assert_eq!(exe(keeper), graceful.with_file_name("graceful-keeper"));
    assert_eq!(comm(keeper).trim(), "graceful-keeper");
    assert_eq!(exe(kept), graceful);
    assert_eq!(comm(kept).trim(), "graceful");
}

#[test]
fn a_crash_cuts_no_held_exec_hook_and_the_counts_stay_exact() {
    require_root!();
    let mut first = Agent::with_gate().kept();
    first.start();
    let (pod, lb, mut app, _pool) = pod_holding(4);
    let (child, stdout) = held_hook(&first, &pod);
    // What the agent's report has so far, the keeper keeps too.
    app.cmd("close-in 1 fin");
    std::thread::sleep(Duration::from_millis(200));

    let killed = first.kept_agent().unwrap();
    runs_as_programs(&first, killed);
    let again = first.crash();
    assert_ne!(again, killed);
    restarted(&first, 1);
    runs_as_programs(&first, again);
    // Released and answered: the keeper let it go.
    carried_over(&first, &pod, &lb, &mut app, child, stdout);

    // A successor under its own keeper takes the node over: the first
    // keeper keeps nothing from then on, and ends when its pod would.
    let mut second = first.successor().kept();
    second.start();
    graceful_tests::wait_for(10, "the first keeper to let go", || {
        first
            .log_text()
            .contains("handed the node over; keeping nothing")
            .then_some(())
    });
    first.handed_over();
    first.stop();
    drains(hook(&second, pod.container(0), &["--min", "0s", "--max", "10s"]));
    second.stop();
    let log = second.log_text();
    assert!(
        log.contains("keeper: the agent ended; so does the keeper"),
        "{log}"
    );
}

#[test]
fn a_hook_that_comes_while_no_agent_runs_waits_and_a_passed_deadline_releases_at_once() {
    require_root!();
    let first = {
        let mut a = Agent::with_gate().kept();
        a.start();
        a
    };
    let (pod, other) = (SimPod::create(1), SimPod::create(1));
    let lb = Cgroup::unique("lb");
    let (_app, _pool) = held_connections(pod.container(0), &lb, 2);
    let (mut app1, _pool1) = held_connections(other.container(0), &lb, 2);
    // Its deadline comes while no agent runs.
    let mut short = hook(
        &first,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "1500ms"],
    );
    let short_out = engaged(&mut short);
    let short_started = Instant::now();

    // Two crashes in a row: the keeper waits a second before the third
    // agent, and a hook comes meanwhile.
    first.crash();
    let (_, before) = first.kill_kept();
    std::thread::sleep(Duration::from_millis(100));
    let mut late = hook(&first, other.container(0), &HELD);
    first.wait_kept_ready(before);
    let back = Instant::now();
    let log = first.log_text();
    assert!(
        log.contains("again soon after its start; starting it again after a pause"),
        "{log}"
    );

    let (report, out) = finish_engaged(short, short_out);
    assert_eq!(report["reason"], "deadline", "{out}");
    assert!(!out.contains("reconnecting"), "the hook reconnected: {out}");
    // At its deadline, or at once once an agent ran again.
    let due = back.max(short_started + Duration::from_millis(1500));
    let late_by = Instant::now().saturating_duration_since(due);
    assert!(
        late_by < Duration::from_millis(2 * event_slack_ms()),
        "released {late_by:?} after it was due (its deadline, or the agent's return): {out}"
    );

    let late_out = engaged(&mut late);
    app1.cmd("close-in 2 fin");
    let (report, out) = finish_engaged(late, late_out);
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(!out.contains("reconnecting"), "the hook reconnected: {out}");
    drop(first);
}

#[test]
fn a_crash_cuts_no_held_http_hook_and_it_is_answered_once() {
    require_root!();
    let mut s = Scene::build_kept(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut clients) = s.clients(3);
    let (answer, closed_ns) = std::thread::scope(|t| {
        let hook = held_http_hook(t, &s, &mut clients);
        s.agent.crash();
        restarted(&s.agent, 1);
        let closed_ns = http_still_held(&s.agent, &s.net.b, &hook, &mut clients);
        (hook.join().unwrap(), closed_ns)
    });
    let answer = answer.expect("the hook's answer, from the new agent");
    // The pod's gate is served from the kept listener.
    http_answered_once(&s, &s.agent, answer, closed_ns);
}

/// The socket gate through a crash: the keeper held its abstract socket,
/// so it stays bound while no agent runs; the exec hook held through it
/// never reconnects, and the new agent serves the socket it was lent.
#[test]
fn a_crash_cuts_no_hook_held_through_a_pods_socket_gate() {
    require_root!();
    let mut s = Scene::build_kept(json!({"graceful.dev/gate": "socket"}));
    graceful_tests::gate::wait_socket_gate(&s.net.b);
    let (_lb, mut clients) = s.clients(3);
    let mut child = hook_at(&s.agent, s.pod.container(0), Some(&s.net.b), &pod_socket(), &HELD);
    let stdout = engaged(&mut child);
    wait_draining(&s.agent, 1);
    clients.cmd("close-out 1 fin");
    std::thread::sleep(Duration::from_millis(200));
    s.agent.crash();
    // Bound all along: the keeper's duplicate keeps the name.
    assert!(
        abstract_listening(&s.net.b, &pod_socket()),
        "the socket went with the agent"
    );
    restarted(&s.agent, 1);
    still_held(&s.agent, &mut child);
    clients.cmd("close-out 2 fin");
    released_across(child, stdout, &[3, 2]);
    assert!(
        s.agent
            .log_text()
            .contains("socket gate: serving the listener handed over"),
        "{}",
        s.agent.log_text()
    );
    drains(hook_at(
        &s.agent,
        s.pod.container(0),
        Some(&s.net.b),
        &pod_socket(),
        &["--min", "0s", "--max", "10s"],
    ));
}
