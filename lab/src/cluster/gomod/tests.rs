use super::local_replaces;

#[test]
fn local_replaces_are_the_ones_into_the_tree() {
    // The shapes of Kubernetes' and etcd's go.mod: a block and single lines,
    // a comment, a versioned replace and a FORBIDDEN_DEPENDENCY guard.
    let go_mod = r#"module k8s.io/kubernetes

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery // the machinery
	github.com/x/y => github.com/x/y v1.2.3
)

replace go.etcd.io/etcd/api/v3 => ../api
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
require k8s.io/klog/v2 v2.130.1
"#;
    assert_eq!(
        local_replaces(go_mod),
        ["k8s.io/api", "k8s.io/apimachinery", "go.etcd.io/etcd/api/v3"]
    );
}
