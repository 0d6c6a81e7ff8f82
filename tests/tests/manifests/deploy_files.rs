//! The files in deploy/: every document a known kind without unknown
//! fields, and every kustomization renders. The Helm chart
//! (deploy/helm/) is templates and values, not objects: helm renders it,
//! and the node's API server checks what it renders (tests/cluster/helm.rs).

use super::*;

#[test]
fn every_yaml_document_is_a_known_kind_without_unknown_fields() {
    let files: Vec<PathBuf> = files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| is_yaml(p) && !p.starts_with(root().join("deploy/helm")))
        .collect();
    assert!(!files.is_empty(), "no YAML under deploy/");
    let mut listed = BTreeSet::new();
    for f in &files {
        let objs = objects::parse_stream(&read(f), &rel(f));
        assert!(!objs.is_empty(), "{}: no document", rel(f));
        for o in objs {
            if let Kind::Kustomization(k) = o.kind {
                let dir = f.parent().unwrap();
                for r in k.resources.iter().flatten() {
                    let p = dir.join(r);
                    assert!(p.exists(), "{}: resource {r} does not exist", rel(f));
                    listed.insert(p.canonicalize().unwrap());
                }
            }
        }
    }
    // A manifest no kustomization lists is never applied: a silent gap.
    for f in &files {
        if f.file_name().is_some_and(|n| n != "kustomization.yaml") {
            assert!(
                listed.contains(&f.canonicalize().unwrap()),
                "{} is listed by no kustomization.yaml: `kubectl apply -k` would never apply it",
                rel(f)
            );
        }
    }
}

#[test]
fn kubectl_kustomize_renders_every_kustomization() {
    let mut want: Vec<String> = EXAMPLES.iter().map(|e| format!("deploy/examples/{e}")).collect();
    want.push("deploy/base".into());
    // The admission policies: the gate directory read-only, the hooks
    // checked; and injection by label.
    want.push("deploy/admission".into());
    want.push("deploy/inject".into());
    want.sort();
    assert_eq!(
        rendered().keys().cloned().collect::<Vec<_>>(),
        want,
        "the kustomizations under deploy/"
    );
    for (dir, objs) in rendered() {
        assert!(!objs.is_empty(), "{dir} renders nothing");
        for o in objs {
            assert!(
                !matches!(o.kind, Kind::Kustomization(_)),
                "{}: a Kustomization in the output",
                o.origin
            );
            let ns = o.metadata().and_then(|m| m.namespace.as_deref());
            if o.cluster_scoped {
                assert_eq!(
                    ns,
                    None,
                    "{}: {} is cluster-scoped but has a namespace",
                    o.origin,
                    o.name()
                );
            } else if dir == "deploy/base" {
                assert_eq!(ns, Some(NAMESPACE), "{}: {}", o.origin, o.name());
            }
        }
    }
}
