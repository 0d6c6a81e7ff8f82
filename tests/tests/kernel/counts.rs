//! Exact counts: three cgroups, IPv4, IPv6 and v4-mapped, on loopback and
//! across a veth pair between two namespaces the test creates.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    netns::VethPair,
    peer::{addr, Peer},
};

use crate::{require_root, settle};

#[test]
fn counts_match_the_kernel_across_cgroups_families_and_namespaces() {
    require_root!();
    let agent = Agent::started();
    let (a, b, c) = (Cgroup::unique("a"), Cgroup::unique("b"), Cgroup::unique("c"));
    let net = VethPair::create();

    // A: servers on the host's loopback, IPv4 and dual-stack IPv6.
    let mut server_a = Peer::spawn(&a, None);
    let p4 = server_a.listen("127.0.0.1:0", "hold");
    let p6 = server_a.listen("[::]:0", "hold");
    // B: clients of A over v4, v6 and v4-mapped v6.
    let mut client_b = Peer::spawn(&b, None);
    client_b.connect(&addr("127.0.0.1", p4), 5);
    client_b.connect(&addr("::1", p6), 4);
    client_b.connect(&addr("::ffff:127.0.0.1", p6), 3);
    // C: servers in namespace b, reached over the veth from namespace a by
    // another client in B, and by C itself over b's loopback.
    let mut server_c = Peer::spawn(&c, Some(&net.b));
    let q4 = server_c.listen("0.0.0.0:0", "hold");
    let q6 = server_c.listen("[::]:0", "hold");
    let mut client_b_in_a = Peer::spawn(&b, Some(&net.a));
    client_b_in_a.connect(&addr(&net.b_v4, q4), 6);
    client_b_in_a.connect(&addr(&net.b_v6, q6), 2);
    let mut client_c = Peer::spawn(&c, Some(&net.b));
    client_c.connect(&addr("127.0.0.1", q4), 2);

    let spaces = [None, Some(&net.a), Some(&net.b)];
    let views = settle(&agent, &[&a, &b, &c], &spaces);
    // The kernel agrees with what the test did, and so does the agent.
    assert_eq!(
        (views[0].inbound_live, views[0].outbound_live, views[0].listeners),
        (12, 0, 2)
    );
    assert_eq!(
        (views[1].inbound_live, views[1].outbound_live, views[1].listeners),
        (0, 20, 0)
    );
    assert_eq!(
        (views[2].inbound_live, views[2].outbound_live, views[2].listeners),
        (10, 2, 2)
    );
    let ca = agent.counters(a.id());
    assert_eq!(
        (ca.inbound_total, ca.inbound_closed_total, ca.outbound_total),
        (12, 0, 0)
    );
    assert!(ca.last_inbound_open_ns > 0 && ca.last_inbound_close_ns == 0);
    assert_eq!(agent.counters(b.id()).outbound_total, 20);
    assert_eq!(agent.counters(c.id()).inbound_total, 10);

    // Close some every way: client FIN (the server side stays live in
    // CLOSE_WAIT until it closes too), client RST, server FIN.
    client_b.cmd("close-out 3 fin");
    client_b.cmd("close-out 2 rst");
    server_a.cmd("close-in 4 fin");
    client_b_in_a.cmd("close-out 3 rst");
    server_c.cmd("close-in 2 fin");
    settle(&agent, &[&a, &b, &c], &spaces);

    // Everything gone: every live count returns to zero, and every inbound
    // connection that opened was closed exactly once.
    drop((server_a, client_b, server_c, client_b_in_a, client_c));
    let views = settle(&agent, &[&a, &b, &c], &spaces);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    for cg in [&a, &c] {
        let k = agent.counters(cg.id());
        assert_eq!(k.inbound_total, k.inbound_closed_total, "{}", cg.path());
        assert!(k.last_inbound_close_ns >= k.last_inbound_open_ns);
    }
}
