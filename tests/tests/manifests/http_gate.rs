//! The httpGet gate's hooks, read as the agent reads them: a pod opts in
//! with `graceful.dev/gate: http`, the kubelet's `preStop: httpGet` hook
//! goes to the gate's port (`graceful.dev/gate-port`, default 9711) on the
//! pod's own IP, and its path is `/drain?QUERY` with graceful-wait's
//! settings, parsed by `graceful_api::hook_query`. Each rule is then broken
//! on a copy of the restricted example's pod spec, to show that it bites.

use super::*;

/// What a pod's httpGet gate hooks break, given its annotations.
pub(super) fn gate_findings(spec: &PodSpec, annotations: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut f = Findings::default();
    let opted_in = annotations.get(GATE_ANNOTATION).map(String::as_str) == Some("http");
    let all = http_hooks(spec);
    // In a pod that has not opted in, an httpGet hook is the gate's only if
    // it asks for the gate's path; in one that has, every one is.
    let gate_hooks: Vec<&HttpHook> = all
        .iter()
        .filter(|h| opted_in || path_of(h.get).0 == hook_query::PATH)
        .collect();
    if gate_hooks.is_empty() {
        f.check(Rule::GateOptIn, !opted_in, || {
            format!("the pod sets {GATE_ANNOTATION}: http but no container has a preStop httpGet hook")
        });
        return f.0;
    }
    f.check(Rule::GateOptIn, opted_in, || {
        format!(
            "a preStop hook asks for {} but the pod lacks the annotation {GATE_ANNOTATION}: http: \
             the agent opens no gate, and the hook is refused at once",
            hook_query::PATH
        )
    });
    f.check(Rule::GateOptIn, spec.host_network != Some(true), || {
        "a hostNetwork pod has no network namespace of its own: the agent refuses the httpGet \
         gate there (HttpGateRefused); use the exec hook"
            .into()
    });
    let raw_port = annotations.get(GATE_PORT_ANNOTATION);
    let port = match raw_port {
        None => Some(DEFAULT_GATE_PORT),
        Some(p) => p.trim().parse::<u16>().ok().filter(|p| *p > 0).map(i32::from),
    };
    f.check(Rule::GateTarget, port.is_some(), || {
        format!("{GATE_PORT_ANNOTATION}: {raw_port:?} is not a port (1-65535): the agent refuses the gate")
    });
    let container_ports: Vec<i32> = containers(spec)
        .flat_map(|c| c.ports.iter().flatten().map(|p| p.container_port))
        .collect();
    let grace_s = spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE);
    for h in &gate_hooks {
        let n = &h.container.name;
        let g = h.get;
        f.check(Rule::GateTarget, g.host.is_none(), || {
            format!(
                "container {n}: the hook sets host {:?}; without it the kubelet calls the pod's own \
                 IP, where the gate listens",
                g.host
            )
        });
        f.check(
            Rule::GateTarget,
            matches!(g.scheme.as_deref(), None | Some("HTTP")),
            || format!("container {n}: the gate speaks plain HTTP, not {:?}", g.scheme),
        );
        match &g.port {
            IntOrString::Int(p) => {
                f.check(Rule::GateTarget, !container_ports.contains(p), || {
                    format!(
                        "container {n}: the hook's port {p} is a containerPort of the pod: the \
                         agent refuses the gate on a port the app may use"
                    )
                });
                if let Some(want) = port {
                    f.check(Rule::GateTarget, *p == want, || {
                        format!("container {n}: the hook calls port {p}, but the gate opens {want} ({GATE_PORT_ANNOTATION})")
                    });
                }
            }
            IntOrString::String(name) => f.0.push(Finding {
                rule: Rule::GateTarget,
                msg: format!(
                    "container {n}: the hook's port is the name {name:?}, which only a containerPort \
                     has; the gate's port must not be one: give the number"
                ),
            }),
        }
        let (path, query) = path_of(g);
        f.check(Rule::GateQuery, path == hook_query::PATH, || {
            format!(
                "container {n}: the hook's path is {path:?}, not {}",
                hook_query::PATH
            )
        });
        let q = match hook_query::parse(query, 0) {
            Ok(q) => q,
            Err(e) => {
                f.0.push(Finding {
                    rule: Rule::GateQuery,
                    msg: format!("container {n}: the gate would answer 400 to {path:?}?{query:?}: {e}"),
                });
                continue;
            }
        };
        for after in q.request.after_containers.iter().flatten() {
            f.check(
                Rule::GateQuery,
                after != n && containers(spec).any(|c| &c.name == after),
                || format!("container {n} waits for container {after}, which the pod does not have"),
            );
        }
        f.check(
            Rule::GateContainer,
            q.container.as_ref().is_none_or(|c| c == n),
            || {
                format!(
                    "container {n}: its hook says container={:?}: that container's settings and \
                     scope would be used",
                    q.container
                )
            },
        );
        f.check(
            Rule::GateContainer,
            gate_hooks.len() == 1 || q.container.is_some(),
            || {
                format!(
                    "container {n}: {} containers have the gate's hook, and the kubelet does not say \
                     whose it is: each must give container=<its name>",
                    gate_hooks.len()
                )
            },
        );
        if let Err(e) = drain_fits(&q.request, annotations, n, spec, grace_s) {
            f.0.push(Finding {
                rule: Rule::GateFitsGrace,
                msg: format!("container {n}: {e}"),
            });
        }
    }
    f.0
}

/// A hook's path split at `?`: (`/drain`, `policy=drained&max=25s`).
fn path_of(g: &HTTPGetAction) -> (&str, &str) {
    let p = g.path.as_deref().unwrap_or("/");
    p.split_once('?').unwrap_or((p, ""))
}

#[test]
fn each_gate_rule_fails_a_broken_copy() {
    let objs = &rendered()["deploy/examples/restricted"];
    let (owner, spec) = pod_templates(objs).remove(0);
    let annotations = template_annotations(objs, &owner);
    let f = gate_findings(spec, &annotations);
    assert!(f.is_empty(), "{owner}:{}", report(&f));

    type Break = fn(&mut PodSpec, &mut BTreeMap<String, String>);
    let breaks: &[(Rule, &str, Break)] = &[
        (Rule::GateOptIn, "no gate annotation", |_, a| {
            a.remove(GATE_ANNOTATION);
        }),
        (Rule::GateOptIn, "hostNetwork", |s, _| s.host_network = Some(true)),
        (Rule::GateOptIn, "the annotation without a hook", |s, _| {
            s.containers[0].lifecycle = None
        }),
        (Rule::GateTarget, "a bad gate-port", |_, a| {
            a.insert(GATE_PORT_ANNOTATION.into(), "97x1".into());
        }),
        (Rule::GateTarget, "the hook on a containerPort", |s, a| {
            pre_stop_get(s).port = IntOrString::Int(8080);
            a.insert(GATE_PORT_ANNOTATION.into(), "8080".into());
        }),
        (Rule::GateTarget, "a named port", |s, _| {
            pre_stop_get(s).port = IntOrString::String("http".into())
        }),
        (Rule::GateTarget, "a port that is not the gate's", |s, _| {
            pre_stop_get(s).port = IntOrString::Int(9712)
        }),
        (Rule::GateTarget, "a host", |s, _| {
            pre_stop_get(s).host = Some("127.0.0.1".into())
        }),
        (Rule::GateTarget, "HTTPS", |s, _| {
            pre_stop_get(s).scheme = Some("HTTPS".into())
        }),
        (Rule::GateQuery, "a typo in the path", |s, _| {
            pre_stop_get(s).path = Some("/drian?policy=drained&max=25s".into())
        }),
        (Rule::GateQuery, "a typo in a key", |s, _| {
            pre_stop_get(s).path = Some("/drain?polcy=drained&max=25s".into())
        }),
        (Rule::GateQuery, "a bad duration", |s, _| {
            pre_stop_get(s).path = Some("/drain?policy=drained&max=25q".into())
        }),
        (Rule::GateQuery, "after-containers naming no container", |s, _| {
            pre_stop_get(s).path = Some("/drain?after-containers=app&max=25s".into())
        }),
        (Rule::GateContainer, "container= naming another", |s, _| {
            pre_stop_get(s).path = Some("/drain?max=25s&container=proxy".into())
        }),
        (
            Rule::GateContainer,
            "two gated containers, neither named",
            |s, _| {
                let mut second = s.containers[0].clone();
                second.name = "sidecar".into();
                second.ports = None;
                s.containers.push(second);
            },
        ),
        (Rule::GateFitsGrace, "max past the grace period", |s, _| {
            pre_stop_get(s).path = Some("/drain?policy=drained&max=32s".into())
        }),
        (Rule::GateFitsGrace, "a grace period too short", |s, _| {
            s.termination_grace_period_seconds = Some(20)
        }),
        (
            Rule::GateFitsGrace,
            "an annotation that overrides max past it",
            |_, a| {
                a.insert("graceful.dev/max".into(), "40s".into());
            },
        ),
    ];
    for (rule, what, brk) in breaks {
        let (mut s, mut a) = (spec.clone(), annotations.clone());
        brk(&mut s, &mut a);
        let f = gate_findings(&s, &a);
        assert!(
            f.iter().any(|x| x.rule == *rule),
            "{what}: the copy should break {rule:?}, but the findings are:{}",
            report(&f)
        );
    }
}
