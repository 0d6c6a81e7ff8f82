//! An OOM kill of the agent where the container's group kill is on, as
//! the kubelet sets it on cgroup v2 (`memory.oom.group=1` on every
//! container): the kernel kills every process of the container but those
//! it spares, and a keeper killed with its agent cuts every hook it held.
//! The keeper turns its container's group kill off as it starts; the OOM
//! killer then takes the agent alone, and the keeper starts it again with
//! the held hook kept. Runs where cgroup v2 has the memory controller (the
//! qemu guests); a hybrid host (this machine) has no group kill, and the
//! test says it skipped.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use graceful_tests::{
    agent::Agent,
    gate::{engaged, finish_engaged, hook, pod_holding, wait_draining},
    memcg::{self, MemCgroup},
    process::Stopped,
    unique,
};

use crate::require_root;

/// `memory.events`' `oom_kill` count of `memcg`.
fn oom_kills(memcg: &MemCgroup) -> u64 {
    std::fs::read_to_string(memcg.dir().join("memory.events"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill ").and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// `pid` has exited: gone, or a zombie its (frozen) parent has not reaped.
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn an_oom_kill_of_the_agent_under_the_group_kill_cuts_no_held_hook() {
    require_root!();
    let memcg = MemCgroup::create(&unique("oom")).unwrap();
    if memcg.version() != "v2" {
        // The guests boot a pure cgroup v2: there, not running is a failure.
        assert!(
            std::env::var_os("GRACEFUL_VM").is_none(),
            "a guest without the memory controller on cgroup v2"
        );
        eprintln!("SKIPPED {}: no memory controller on cgroup v2 here, so no group OOM kill to survive (the qemu guests run it)", module_path!());
        return;
    }
    // As the kubelet leaves every container on cgroup v2.
    std::fs::write(memcg.dir().join("memory.oom.group"), "1").unwrap();
    let mut agent = Agent::with_gate().kept();
    agent.cgroup = Some(memcg.dir().to_path_buf());
    agent.start();
    let group = std::fs::read_to_string(memcg.dir().join("memory.oom.group")).unwrap();
    assert_eq!(
        group.trim(),
        "0",
        "the keeper left the group kill on: {}",
        agent.log_text()
    );

    let (pod, _lb, mut app, _pool) = pod_holding(2);
    let mut child = hook(
        &agent,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "60s"],
    );
    let stdout = engaged(&mut child);
    wait_draining(&agent, 1);

    // The container at its limit, as in production: a limit 1 MiB over
    // the usage, then allocations in the cgroup by a third process, a hog,
    // a page at a time, until the kernel kills: in the charging process's
    // context, the process it weighs most, the agent, whose death makes
    // the room. The hog stops within 64 KiB of that kill. The kernel may
    // still kill a second time for the hog's charge in flight: from the
    // moment the agent's threads all begin to exit until its memory is
    // uncharged (about 6 to 11 ms here), it no longer lists the agent
    // as a victim in progress, and takes the next heaviest process. That
    // is the test's charger at work, not the container's: the agent
    // charging for itself ends its charges as it dies. So the hog weighs
    // itself between the agent and the keeper (its `oom_score_adj`):
    // never the first victim, always the second if there is one, which
    // also ends its charge. It aims halfway between them as they weigh
    // at each step, not as they weighed at the start: the charges reclaim
    // the cgroup's page cache, the binary both map among it, and lighten
    // both by the same pages. (Lowering `memory.max` beneath the usage
    // instead kills in the writer's loop, which meets the same window.)
    // The keeper is stopped meanwhile, so that it starts the next agent
    // once the limit is back, as a transient peak leaves it: under a limit
    // the new agent cannot start in, the next kill could take the keeper
    // instead of an agent still smaller than it.
    let keeper = agent.pid().unwrap();
    let procs = std::fs::read_to_string(memcg.dir().join("cgroup.procs")).unwrap();
    let agent_pid: u32 = procs
        .lines()
        .filter_map(|l| l.parse().ok())
        .find(|p| *p != keeper)
        .unwrap_or_else(|| panic!("no agent beside the keeper: {procs}"));
    let weight = |pid: u32| memcg::oom_weight(&pid.to_string()).unwrap();
    let (agent_weight, keeper_weight) = (weight(agent_pid), weight(keeper));
    assert!(
        agent_weight > keeper_weight + 512,
        "the agent weighs {agent_weight} pages, the keeper {keeper_weight}: no room for the hog between"
    );
    let usage = memcg.usage().unwrap();
    let margin = 1 << 20;
    let limit = usage + margin;
    let before = oom_kills(&memcg);
    let stopped = Stopped::stop(keeper);
    memcg.set_limit(limit).unwrap();
    let mut hog = Command::new(graceful_tests::peer::peer_bin());
    hog.arg("hog")
        .arg(memcg.dir().join("memory.events"))
        .arg(before.to_string())
        .arg((16 * margin).to_string())
        .arg(agent_pid.to_string())
        .arg(keeper.to_string())
        .arg((limit / 4096).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    graceful_tests::cgroup::start_in(&mut hog, memcg.dir());
    let mut hog = hog.spawn().expect("graceful-peer hog");
    graceful_tests::wait_for(30, "the OOM killer", || {
        (oom_kills(&memcg) > before).then_some(())
    });
    graceful_tests::wait_for(30, "the killed agent to exit", || gone(agent_pid).then_some(()));
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(hog.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    memcg.set_limit(u64::MAX / 2).unwrap();
    drop(hog.stdin.take());
    let hog_status = hog.wait().unwrap();
    drop(stopped);
    let kills = oom_kills(&memcg) - before;
    let events = std::fs::read_to_string(memcg.dir().join("memory.events")).unwrap_or_default();
    // The second victim, if the kernel took one, is the hog: it may have
    // stopped and printed first (a write to its pipe charges too).
    let hog_said = {
        use std::os::unix::process::ExitStatusExt;
        let stopped_at = line.trim().strip_prefix("done ").unwrap_or("-");
        match (kills, hog_status.signal()) {
            (1, None) => format!("the hog stopped after {stopped_at} (bytes, oom_score_adj)"),
            (2, Some(9)) => format!(
                "the hog, the test's own charger, was the second victim (it had stopped after {stopped_at})"
            ),
            _ => panic!("{kills} kills and the hog {hog_status} ({line:?}): only the agent, and then the hog, may go\n{events}"),
        }
    };
    assert!(gone(agent_pid));

    let log = graceful_tests::wait_for(60, "the keeper's new agent to serve the held hook", || {
        let log = agent.log_text();
        (log.contains("keeper: the agent was killed by SIGKILL")
            && log.contains("taking the listeners and held hooks it kept"))
        .then_some(log)
    });
    assert!(
        !log.contains("keeper: the agent ended; so does the keeper"),
        "{log}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the hook ended with the agent: {log}"
    );
    app.cmd("close-in 2 fin");
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(
        !out.contains("reconnecting"),
        "the hook was cut and reconnected: {out}"
    );
    assert!(
        std::path::Path::new(&format!("/proc/{keeper}")).exists(),
        "the keeper died"
    );
    eprintln!(
        "memory.oom.group 1 -> 0 by the keeper; the agent OOM-killed (weighing {agent_weight} pages, the keeper {keeper_weight}) when the cgroup crossed its limit of {} KiB (usage {} KiB before); {hog_said}: the keeper lived, 0 hooks cut",
        limit / 1024,
        usage / 1024
    );
}
