use graceful_test_support::ss::View;

use super::*;

#[test]
fn counts_go_through_csv_and_back() {
    assert_eq!(parse_csv(&csv(&[0, 7, 12])).unwrap(), vec![0, 7, 12]);
    assert!(parse_csv("1,x").is_err());
}

#[test]
fn each_connection_counts_once_for_its_client_and_once_for_its_server() {
    let mut t = Truth::new(3);
    t.add(0, &[0, 5, 2]);
    t.add(1, &[4, 0, 1]);
    t.hold(2, &[1, 1, 0]);
    assert_eq!(t.outbound, vec![7, 5, 2]);
    assert_eq!(t.inbound, vec![5, 6, 3]);
    assert_eq!(t.held_out, vec![0, 0, 2]);
    assert_eq!(t.held_in, vec![1, 1, 0]);
    assert_eq!(t.connections(), 14);
    assert_eq!(t.inbound.iter().sum::<u64>(), t.connections());
}

#[test]
fn drift_is_the_agent_less_the_truth() {
    let mut t = Truth::new(1);
    t.add(0, &[0]);
    t.inbound[0] = 100;
    t.outbound[0] = 90;
    let ss = View {
        inbound_live: 10,
        outbound_live: 4,
        listeners: 2,
    };
    let want = Figures::expected(&t, 0, &ss);
    assert_eq!(want.inbound_closed_total, 90);
    let agent = Figures {
        inbound_live: 10,
        outbound_live: 3,
        listeners: 2,
        inbound_total: 101,
        outbound_total: 90,
        inbound_closed_total: 91,
    };
    let d = agent.minus(want);
    assert_eq!(
        d,
        Figures {
            outbound_live: -1,
            inbound_total: 1,
            inbound_closed_total: 1,
            ..Figures::default()
        }
    );
    assert!(!d.live_is_zero());
    assert!(!d.totals_are_zero());
    assert_eq!(total(&[d, d]).inbound_total, 2);
    assert_eq!(total(&[d, Figures::default().minus(d)]), Figures::default());
}

#[test]
fn a_wrapped_live_count_is_negative() {
    let row = crate::bench::agent::Row {
        inbound_live: u64::MAX,
        ..Default::default()
    };
    assert_eq!(Figures::of_agent(&row).inbound_live, -1);
}
