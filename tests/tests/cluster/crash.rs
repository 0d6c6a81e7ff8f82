//! `kill -9` of the agent process on the node, in the middle of two drains
//! (one through each gate), as the OOM killer would: the container's
//! first process (the keeper, `deploy/base` as shipped) kept both held
//! hooks and starts the agent again in the same container; each pod's
//! SIGTERM still comes just after its own last client closes, and the
//! kubelet records no `FailedPreStopHook`.

use graceful_tests::{
    agent::parent_of,
    cluster::{pod::Pod, Namespace, AGENT_NAMESPACE},
};

use crate::handover::TwoDrains;

/// The agent's pid in its pod: the container's process whose parent (the
/// keeper) is in the container too.
pub fn agent_pid(pod: &Pod) -> u32 {
    let procs = std::fs::read_to_string(pod.container_cgroup_dir("agent").join("cgroup.procs")).unwrap();
    let pids: Vec<u32> = procs.lines().filter_map(|l| l.parse().ok()).collect();
    let agents: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| parent_of(*p).is_some_and(|pp| pids.contains(&pp)))
        .collect();
    assert_eq!(agents.len(), 1, "the agent container's processes: {pids:?}");
    agents[0]
}

/// `kill -9` of the agent in pod `name`, as the OOM killer would; once
/// the keeper's new agent serves the held hooks: the pid killed, and the
/// new agent's line that says so.
pub fn kill_the_agent(cluster: &graceful_tests::cluster::Cluster, name: &str) -> (u32, String) {
    const SERVING: &str = "serving the hooks the previous agent held";
    let logs = || cluster.kubectl(&["-n", AGENT_NAMESPACE, "logs", name]);
    let seen = logs().matches(SERVING).count();
    let pod = Pod::from_json(&cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", name]));
    let pid = agent_pid(&pod);
    // SAFETY: kill(2) on the node's agent, which this suite's node runs.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let log = graceful_tests::wait_for(60, "the keeper's new agent to serve the held hooks", || {
        let log = logs();
        (log.matches(SERVING).count() > seen).then_some(log)
    });
    assert!(log.contains("keeper: the agent was killed by SIGKILL"), "{log}");
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(SERVING))
        .unwrap_or_default();
    (pid, line.to_string())
}

fn restarts(cluster: &graceful_tests::cluster::Cluster, name: &str) -> u64 {
    let p = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", name]);
    p["status"]["containerStatuses"][0]["restartCount"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_kill_9_of_the_agent_mid_drain_cuts_no_hook() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "crash");
    let mut drains = TwoDrains::start(&cluster, &ns);

    let name = cluster.agent_pod(10);
    let before = restarts(&cluster, &name);
    let (killed, line) = kill_the_agent(&cluster, &name);
    eprintln!("{line}");
    assert!(
        line.contains("exec_hooks=1 http_hooks=1"),
        "the new agent did not serve both hooks: {line}"
    );
    assert_eq!(
        restarts(&cluster, &name),
        before,
        "the container restarted: its keeper died with the agent"
    );
    let agent_pod = Pod::from_json(&cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &name]));
    assert_ne!(agent_pid(&agent_pod), killed);
    drains.no_sigterm_yet("the agent's crash");
    drains.finish(&ns, "a crash");
}
