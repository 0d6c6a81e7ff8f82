use super::*;

#[test]
fn parses_children_shares_and_adds_repeated_symbols() {
    let text = "# Samples: 67K of event 'cpu-clock:ppp'\n\
                #\n\
                #  Children      Self  Symbol\n\
                \n    32.19%     0.38%  [k] ip_protocol_deliver_rcu\n\
                \x20    5.41%     1.39%  [k] bpf_trace_run3\n\
                \x20    0.50%     0.50%  [.] memcpy\n\
                \x20    0.25%     0.25%  [k] memcpy\n";
    let m = parse_report(text);
    assert_eq!(m.len(), 3);
    assert_eq!(m["bpf_trace_run3"], 5.41);
    assert_eq!(m["memcpy"], 0.75);
}

#[test]
fn shares_are_of_busy_time() {
    let p = Profile {
        children: HashMap::from([("do_idle".to_string(), 50.0), ("bpf_trace_run3".to_string(), 5.0)]),
    };
    assert_eq!(p.busy_share(&["bpf_trace_run3"]), 10.0);
    assert_eq!(p.busy_share(&["missing"]), 0.0);
}

#[test]
fn a_star_root_matches_programs_whatever_their_tag() {
    let p = Profile {
        children: HashMap::from([
            ("bpf_prog_b908c0d4d25d78d1_sock_set_state".to_string(), 3.0),
            ("bpf_prog_5f67ef42df196e76_sock_state_twin".to_string(), 1.0),
            ("__traceiter_inet_sock_set_state".to_string(), 6.0),
        ]),
    };
    assert_eq!(p.share(&["prog:sock_set_state"]), 3.0);
    assert_eq!(p.share(&["prog:sock_state_twin"]), 1.0);
}

#[test]
fn a_paths_roots_are_alternatives_and_the_largest_holds_the_others() {
    // Two programs on the tracepoint: its iterator holds both dispatches.
    let two = Profile {
        children: HashMap::from([
            ("__traceiter_inet_sock_set_state".to_string(), 6.0),
            ("bpf_trace_run3".to_string(), 5.5),
        ]),
    };
    // One: the tracepoint calls the dispatcher directly.
    let one = Profile {
        children: HashMap::from([("bpf_trace_run3".to_string(), 4.0)]),
    };
    let roots = ["__traceiter_inet_sock_set_state", "bpf_trace_run3"];
    assert_eq!(two.share(&roots), 6.0);
    assert_eq!(one.share(&roots), 4.0);
}
