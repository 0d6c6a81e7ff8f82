use k8s_openapi::api::core::v1::Pod;

use super::*;

fn info(v: serde_json::Value) -> PodInfo {
    PodInfo::from_pod(&serde_json::from_value::<Pod>(v).unwrap()).unwrap()
}

/// A pod of `ns` with these labels and nothing of graceful's.
fn plain(ns: &str, labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": "web-1", "namespace": ns, "uid": "u1", "labels": labels},
        "spec": {"containers": [{"name": "web"}]}
    })
}

#[test]
fn the_scope_widens_by_namespace_and_selector() {
    let web = info(plain("shop", serde_json::json!({"app": "web", "tier": "front"})));
    assert!(
        !ReportScope::default().covers(&web),
        "the default: opted-in pods only"
    );
    let ns = |n: &[&str]| ReportScope {
        namespaces: n.iter().map(|s| s.to_string()).collect(),
        selector: None,
    };
    assert!(ns(&["shop"]).covers(&web));
    assert!(ns(&["*"]).covers(&web));
    assert!(!ns(&["billing"]).covers(&web));
    let sel = |s: &str| ReportScope {
        namespaces: vec![],
        selector: Some(parse_selector(s).unwrap()),
    };
    for yes in [
        "app=web",
        "app==web",
        "tier in (front,back)",
        "app",
        "!canary",
        "app=web,tier!=back",
        "tier notin (back)",
    ] {
        assert!(sel(yes).covers(&web), "{yes}");
    }
    for no in [
        "app=db",
        "!app",
        "tier in (back)",
        "app=web,canary",
        "tier notin (front, back)",
    ] {
        assert!(!sel(no).covers(&web), "{no}");
    }
}

#[test]
fn a_bad_selector_is_one_line_naming_it() {
    for bad in [
        "",
        "app in web",
        "tier in (a",
        "a b=c",
        "=x",
        ")(",
        "app in ()",
        "a,,b",
        "tier in (a,)",
    ] {
        let e = parse_selector(bad).unwrap_err();
        assert!(!e.contains('\n') && !e.is_empty(), "{bad}: {e}");
    }
    assert_eq!(
        parse_selector("app in (b,a), x").unwrap().to_string(),
        "app in (a,b),x"
    );
}
