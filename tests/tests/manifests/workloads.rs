//! Invariants on the workloads: pinned images, hooks that fit their grace
//! periods and reach the gate (exec or httpGet), and one example for each
//! case.

use super::*;

#[test]
fn images_are_pinned_and_name_no_registry() {
    let mut seen = 0;
    for (owner, spec) in rendered().values().flat_map(|objs| pod_templates(objs)) {
        for c in containers(spec) {
            let image = c
                .image
                .as_deref()
                .unwrap_or_else(|| panic!("{owner}: container {} has no image", c.name));
            let r = image_ref(image);
            assert!(
                r.tag.is_some() || r.digest.is_some(),
                "{owner}: image {image} has no tag"
            );
            assert_ne!(r.tag, Some("latest"), "{owner}: image {image}: never `latest`");
            assert_eq!(r.registry, None, "{owner}: image {image} names a registry host");
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} containers rendered");
}

#[test]
fn every_hook_fits_in_its_grace_period_and_reaches_the_gate() {
    let gate = gate_dir();
    for (dir, objs) in rendered()
        .iter()
        .filter(|(d, _)| d.starts_with("deploy/examples/"))
    {
        let pods = pod_templates(objs);
        assert!(!pods.is_empty(), "{dir} runs no pod");
        for (owner, spec) in pods {
            let hooks = hooks(spec);
            let annotations = template_annotations(objs, &owner);
            // The httpGet gate's hooks: opted in, on the gate's port, a
            // query that parses, a max that fits (see http_gate).
            let gated = http_gate::gate_findings(spec, &annotations);
            assert!(gated.is_empty(), "{owner}:{}", report(&gated));
            assert!(
                !hooks.is_empty() || !http_hooks(spec).is_empty(),
                "{owner}: no graceful preStop hook (exec graceful-wait, or httpGet to the gate)"
            );
            let grace_s = spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE);
            for h in &hooks {
                let name = &h.container.name;
                let sent = graceful_api::codec::request(&h.args.request(0));
                let req = DrainRequest::parse(sent.as_bytes()).unwrap();
                let acc = drain_fits(&req, &annotations, name, spec, grace_s)
                    .unwrap_or_else(|e| panic!("{owner}: container {name}: {e}"));
                // The hook's binary and socket come from the agent's gate directory.
                let bin_dir = Path::new(&h.argv[0]).parent().unwrap().to_str().unwrap();
                let m = h
                    .container
                    .volume_mounts
                    .iter()
                    .flatten()
                    .find(|m| m.mount_path.trim_end_matches('/') == bin_dir)
                    .unwrap_or_else(|| {
                        panic!(
                            "{owner}: container {name} runs {} but mounts nothing at {bin_dir}",
                            h.argv[0]
                        )
                    });
                assert!(
                    m.sub_path.is_none(),
                    "{owner}: {name}: a subPath mount does not see the agent's updates"
                );
                let v = spec.volumes.iter().flatten().find(|v| v.name == m.name).unwrap();
                match (&v.host_path, &v.image) {
                    // The node's gate: the agent's --gate-dir, its socket there.
                    (Some(host), _) => {
                        assert_eq!(
                            host.path.trim_end_matches('/'),
                            gate.trim_end_matches('/'),
                            "{owner}: {name}: {bin_dir} must be the agent's --gate-dir"
                        );
                        assert_eq!(
                            h.args.socket,
                            format!("{bin_dir}/gate.sock"),
                            "{owner}: {name}: the gate socket"
                        );
                    }
                    // The socket gate: graceful-wait from the agent's own
                    // image, the socket in the pod's namespace, opted in.
                    (None, Some(image)) => {
                        assert_eq!(
                            image.reference.as_deref(),
                            Some(format!("graceful/agent:{}", workspace().version).as_str()),
                            "{owner}: {name}: the image volume is the agent's image"
                        );
                        assert_eq!(
                            h.args.socket,
                            format!("@{}", graceful_api::POD_SOCKET),
                            "{owner}: {name}: graceful-wait from an image volume reaches the socket gate"
                        );
                        assert_eq!(
                            annotations.get(GATE_ANNOTATION).map(String::as_str),
                            Some("socket"),
                            "{owner}: the socket gate is opted in"
                        );
                    }
                    _ => panic!("{owner}: {name}: {bin_dir} is neither the agent's --gate-dir nor its image"),
                }
                for after in &acc.after_containers {
                    assert!(
                        after != name && containers(spec).any(|c| &c.name == after),
                        "{owner}: {name} waits for container {after}, which the pod does not have"
                    );
                }
            }
        }
    }
}

#[test]
fn the_examples_show_each_case() {
    let hooks_of = |example: &str| -> Vec<(String, wait_args::Args, usize)> {
        let objs = &rendered()[&format!("deploy/examples/{example}")];
        pod_templates(objs)
            .into_iter()
            .flat_map(|(_, spec)| {
                hooks(spec)
                    .into_iter()
                    .map(|h| (h.container.name.clone(), h.args, spec.containers.len()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let web = hooks_of("web");
    assert!(
        web.iter().any(|(_, a, _)| a.policy.as_deref() != Some("quiet")),
        "web: a drained hook"
    );
    assert!(
        rendered()["deploy/examples/web"]
            .iter()
            .any(|o| matches!(o.kind, Kind::Service(_))),
        "web: behind a Service"
    );
    let sidecar = hooks_of("policy-sidecar");
    assert!(
        sidecar
            .iter()
            .any(|(c, a, n)| c == "opa" && a.scope.as_deref() == Some("pod") && *n > 1),
        "policy-sidecar: the policy engine's hook uses --scope pod"
    );
    let waf = hooks_of("haproxy-waf");
    assert!(
        waf.iter()
            .any(|(c, a, _)| c == "waf" && a.scope.as_deref() == Some("container")),
        "haproxy-waf: the WAF agent's hook uses --scope container"
    );
    let restricted = &rendered()["deploy/examples/restricted"];
    assert!(
        pod_templates(restricted)
            .iter()
            .all(|(_, spec)| hooks(spec).is_empty() && !http_hooks(spec).is_empty()),
        "restricted: the httpGet gate alone, no exec hook"
    );
    let mesh = hooks_of("mesh-proxy");
    assert!(
        mesh.iter()
            .any(|(c, a, _)| c == "proxy" && a.after_containers.as_deref() == Some(&["app".to_string()][..])),
        "mesh-proxy: the proxy's hook uses --after-containers app"
    );
    // The native forms: the sidecar is an init container that restarts,
    // with no hook (the kubelet stops it after the app); the app's hook is
    // the classic form's.
    for (example, sidecar, classic) in [
        ("mesh-proxy-native", "proxy", "mesh-proxy"),
        ("policy-sidecar-native", "opa", "policy-sidecar"),
    ] {
        for (_, spec) in pod_templates(&rendered()[&format!("deploy/examples/{example}")]) {
            let s = spec
                .init_containers
                .iter()
                .flatten()
                .find(|c| c.name == sidecar)
                .unwrap_or_else(|| panic!("{example}: no init container {sidecar}"));
            assert_eq!(s.restart_policy.as_deref(), Some("Always"), "{example}");
            assert!(s.lifecycle.is_none(), "{example}: {sidecar} has a hook");
            assert!(spec.containers.iter().all(|c| c.name != sidecar), "{example}");
        }
        let app = |e: &str| -> Vec<graceful_api::DrainRequest> {
            hooks_of(e)
                .into_iter()
                .filter(|(c, _, _)| c == "app")
                .map(|(_, a, _)| a.request(0))
                .collect()
        };
        assert_eq!(app(example), app(classic), "{example}: the app's hook");
    }
}

#[test]
fn image_refs_are_split_as_the_runtime_does() {
    let r = |registry, repository, tag, digest| ImageRef {
        registry,
        repository,
        tag,
        digest,
    };
    assert_eq!(image_ref("nginx:1.27.3"), r(None, "nginx", Some("1.27.3"), None));
    assert_eq!(image_ref("nginx"), r(None, "nginx", None, None));
    assert_eq!(image_ref("a/b:1"), r(None, "a/b", Some("1"), None));
    assert_eq!(
        image_ref("reg.io/a/b"),
        r(Some("reg.io"), "reg.io/a/b", None, None)
    );
    assert_eq!(
        image_ref("localhost:5000/a:2"),
        r(Some("localhost:5000"), "localhost:5000/a", Some("2"), None)
    );
    assert_eq!(image_ref("a@sha256:00"), r(None, "a", None, Some("sha256:00")));
}
