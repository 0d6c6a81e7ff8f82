//! Connections and listeners opened before the agent starts are adopted, in
//! every network namespace, and their later closes are counted.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    netns::VethPair,
    peer::{addr, Peer},
};

use crate::{require_root, settle};

#[test]
fn connections_older_than_the_agent_are_adopted() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let net = VethPair::create();

    // Before the agent: listeners and connections on the host's loopback
    // and across the veth pair.
    let mut server = Peer::spawn(&a, None);
    let p4 = server.listen("127.0.0.1:0", "hold");
    let p6 = server.listen("[::1]:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", p4), 7);
    client.connect(&addr("::1", p6), 3);
    let mut server_ns = Peer::spawn(&a, Some(&net.b));
    let q = server_ns.listen("0.0.0.0:0", "hold");
    let mut client_ns = Peer::spawn(&b, Some(&net.a));
    client_ns.connect(&addr(&net.b_v4, q), 4);
    // One connection still in the accept queue of a listener that never accepts.
    let mut queue = Peer::spawn(&a, None);
    let never = queue.listen("127.0.0.1:0", "noaccept");
    client.connect(&addr("127.0.0.1", never), 1);
    graceful_tests::wait_for(10, "accepts", || {
        (server.accepted() == 10 && server_ns.accepted() == 4).then_some(())
    });

    let agent = Agent::started();
    let spaces = [None, Some(&net.a), Some(&net.b)];
    let views = settle(&agent, &[&a, &b], &spaces);
    assert_eq!((views[0].inbound_live, views[0].listeners), (15, 4));
    assert_eq!(views[1].outbound_live, 15);

    // Adopted connections' closes are counted, and adopted listeners' new
    // connections too.
    client.cmd("close-out 3 rst");
    server.cmd("close-in 2 fin");
    client_ns.cmd("close-out 4 fin");
    client.connect(&addr("127.0.0.1", p4), 2);
    settle(&agent, &[&a, &b], &spaces);
    drop((server, client, server_ns, client_ns, queue));
    let views = settle(&agent, &[&a, &b], &spaces);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    let k = agent.counters(a.id());
    assert_eq!((k.inbound_total, k.inbound_closed_total), (17, 17));
}
