use std::collections::BTreeSet;

use super::{programmed, ready_addresses};

/// kube-proxy 1.37's nat rules, as `iptables-save -t nat` printed them on
/// the test node: the `kubernetes` Service with one endpoint, a Service
/// `web` with two, and a Service with none yet (its ClusterIP is only in
/// the filter table's REJECT rule, so nothing here).
const NAT: &str = r#"*nat
:KUBE-SEP-LVZ4NBCKXYY3TZZQ - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-NPX46M4PTMTKRN6Y - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SEP-LVZ4NBCKXYY3TZZQ -s 10.201.0.1/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
-A KUBE-SEP-LVZ4NBCKXYY3TZZQ -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination 10.201.0.1:6443
-A KUBE-SEP-AAAA -p tcp -m comment --comment "ns/web" -m tcp -j DNAT --to-destination 10.202.0.7:80
-A KUBE-SEP-BBBB -p tcp -m comment --comment "ns/web" -m tcp -j DNAT --to-destination 10.202.0.9:80
-A KUBE-SEP-CCCC -p tcp -m comment --comment "other/app" -m tcp -j DNAT --to-destination 10.202.0.11:80
-A KUBE-SERVICES -d 10.203.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
-A KUBE-SERVICES -d 10.203.0.40/32 -p tcp -m comment --comment "ns/web cluster IP" -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.202.0.0/24 -d 10.203.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/kubernetes:https -> 10.201.0.1:6443" -j KUBE-SEP-LVZ4NBCKXYY3TZZQ
-A KUBE-SVC-WEB -m comment --comment "ns/web -> 10.202.0.7:80" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-AAAA
-A KUBE-SVC-WEB -m comment --comment "ns/web -> 10.202.0.9:80" -j KUBE-SEP-BBBB
COMMIT
"#;

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_rules_send_a_service_to_its_endpoints_chains_only() {
    assert_eq!(programmed(NAT, "10.203.0.1", 443), Some(set(&["10.201.0.1"])));
    assert_eq!(
        programmed(NAT, "10.203.0.40", 80),
        Some(set(&["10.202.0.7", "10.202.0.9"]))
    );
    // Another port of the same address, and a Service not synced yet.
    assert_eq!(programmed(NAT, "10.203.0.40", 8080), None);
    assert_eq!(programmed(NAT, "10.203.0.77", 80), None);
}

#[test]
fn only_ready_endpoints_count() {
    let slice = serde_json::json!({
        "kind": "EndpointSlice",
        "endpoints": [
            {"addresses": ["10.202.0.7"], "conditions": {"ready": true, "serving": true}},
            {"addresses": ["10.202.0.9"], "conditions": {"ready": false, "serving": true, "terminating": true}},
            {"addresses": ["10.202.0.12"], "conditions": {}},
        ]
    });
    assert_eq!(ready_addresses(&slice), set(&["10.202.0.7", "10.202.0.12"]));
    assert!(ready_addresses(&serde_json::json!({"endpoints": null})).is_empty());
}
