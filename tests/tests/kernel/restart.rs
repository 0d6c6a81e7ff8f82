//! kill -9 the agent with connections open, change things while it is
//! down, restart it: the counts are exact, and no event was missed.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
};

use crate::{require_root, settle};

#[test]
fn counts_survive_kill_9_and_changes_while_down() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::started();
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", port), 10);
    settle(&agent, &[&a, &b], &[None]);

    agent.kill9();
    // The pinned programs keep counting while no agent runs.
    client.connect(&addr("127.0.0.1", port), 5);
    client.cmd("close-out 3 rst");
    server.cmd("close-in 2 fin");
    let mut late = Peer::spawn(&a, None);
    let late_port = late.listen("[::1]:0", "hold");
    client.connect(&addr("::1", late_port), 4);
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!(views[0].listeners, 2);

    agent.start();
    assert!(
        agent.log_text().contains("reused_link=true"),
        "the restarted agent should reuse the pinned link"
    );
    let views = settle(&agent, &[&a, &b], &[None]);
    // 15 opened, 3 reset; the 2 closed by the server stay live (CLOSE_WAIT) on the client; 4 more.
    assert_eq!(views[1].outbound_live, 16);
    let k = agent.counters(a.id());
    assert_eq!(
        k.inbound_total, 19,
        "every connection opened while the agent was down was counted"
    );
    drop((server, client, late));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    assert_eq!(agent.counters(a.id()).inbound_closed_total, 19);
}
