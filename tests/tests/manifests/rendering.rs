//! What `kubectl kustomize` renders, read strictly into k8s-openapi types, and
//! the pieces of it the invariants look at: the agent's DaemonSet, pod
//! templates, containers, their `graceful-wait` and `httpGet` gate hooks,
//! and image references.

use super::*;

pub(super) fn kubectl() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

/// `kubectl kustomize dir`.
pub(super) fn render(dir: &Path) -> String {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{} kustomize`: {e}. kubectl renders deploy/ offline: install it with \
                 `apt-get install kubernetes-client` (Debian; `cargo xtask setup` installs what the \
                 tests need), or point KUBECTL at one",
                kubectl()
            )
        });
    assert!(
        out.status.success(),
        "`kubectl kustomize {}` failed:\n{}",
        rel(dir),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What every kustomization renders, typed: `deploy/base` → objects.
pub(super) fn rendered() -> &'static BTreeMap<String, Vec<Object>> {
    static R: OnceLock<BTreeMap<String, Vec<Object>>> = OnceLock::new();
    R.get_or_init(|| {
        kustomization_dirs()
            .iter()
            .map(|d| {
                let origin = format!("`kubectl kustomize {}`", rel(d));
                (rel(d), objects::parse_stream(&render(d), &origin))
            })
            .collect()
    })
}

pub(super) fn all_rendered() -> impl Iterator<Item = &'static Object> {
    rendered().values().flatten()
}

pub(super) fn base() -> &'static [Object] {
    rendered()
        .get("deploy/base")
        .expect("deploy/base has no kustomization.yaml")
}

/// The agent's DaemonSet, from the rendered base.
pub(super) fn agent() -> &'static DaemonSet {
    let mut it = base().iter().filter_map(|o| match &o.kind {
        Kind::DaemonSet(ds) => Some(ds),
        _ => None,
    });
    let ds = it.next().expect("deploy/base renders no DaemonSet");
    assert!(it.next().is_none(), "deploy/base renders more than one DaemonSet");
    ds
}

pub(super) fn agent_pod() -> &'static PodSpec {
    agent()
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .expect("the DaemonSet has no pod spec")
}

pub(super) fn agent_container() -> &'static Container {
    match &agent_pod().containers[..] {
        [c] => c,
        cs => panic!("the agent's pod should have one container, not {}", cs.len()),
    }
}

/// The agent's `--gate-dir`.
pub(super) fn gate_dir() -> String {
    let args = agent_container().args.clone().unwrap_or_default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--gate-dir" {
            return it.next().expect("--gate-dir without a value").clone();
        }
        if let Some(v) = a.strip_prefix("--gate-dir=") {
            return v.to_string();
        }
    }
    panic!("the agent's DaemonSet passes no --gate-dir: pods would find no graceful-wait and no gate.sock");
}

/// Every pod template, with its owner (`DaemonSet/graceful in deploy/base`).
/// The annotations of the pod template `owner` names (as `pod_templates` names it).
pub(super) fn template_annotations(objs: &[Object], owner: &str) -> BTreeMap<String, String> {
    objs.iter()
        .filter(|o| format!("{} ({})", o.name(), o.origin) == owner)
        .find_map(|o| {
            let t = match &o.kind {
                Kind::DaemonSet(d) => &d.spec.as_ref()?.template,
                Kind::Deployment(d) => &d.spec.as_ref()?.template,
                _ => return None,
            };
            t.metadata.as_ref()?.annotations.clone()
        })
        .unwrap_or_default()
}

pub(super) fn pod_templates(objs: &[Object]) -> Vec<(String, &PodSpec)> {
    objs.iter()
        .filter_map(|o| {
            let spec = match &o.kind {
                Kind::DaemonSet(d) => d.spec.as_ref()?.template.spec.as_ref(),
                Kind::Deployment(d) => d.spec.as_ref()?.template.spec.as_ref(),
                _ => None,
            }?;
            Some((format!("{} ({})", o.name(), o.origin), spec))
        })
        .collect()
}

/// Regular and init containers (native sidecars are init containers).
pub(super) fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

/// A container's `graceful-wait` preStop hook, read as graceful-wait reads it.
pub(super) struct Hook<'a> {
    pub(super) container: &'a Container,
    pub(super) argv: Vec<String>,
    pub(super) args: wait_args::Args,
}

pub(super) fn hooks(spec: &PodSpec) -> Vec<Hook<'_>> {
    containers(spec)
        .filter_map(|c| {
            let argv = c
                .lifecycle
                .as_ref()?
                .pre_stop
                .as_ref()?
                .exec
                .as_ref()?
                .command
                .clone()?;
            if !argv.first()?.ends_with("/graceful-wait") {
                return None;
            }
            let env = |k: &str| {
                c.env
                    .iter()
                    .flatten()
                    .find(|e| e.name == k)
                    .and_then(|e| e.value.clone())
            };
            let args = wait_args::parse(argv[1..].iter().cloned(), env).unwrap_or_else(|e| {
                panic!(
                    "container {}: its graceful-wait hook {argv:?} is refused: {e}",
                    c.name
                )
            });
            Some(Hook {
                container: c,
                argv,
                args,
            })
        })
        .collect()
}

/// A container's `preStop: httpGet` hook: the kubelet's request to the
/// httpGet gate, when the pod has opted in (see `http_gate`).
pub(super) struct HttpHook<'a> {
    pub(super) container: &'a Container,
    pub(super) get: &'a HTTPGetAction,
}

pub(super) fn http_hooks(spec: &PodSpec) -> Vec<HttpHook<'_>> {
    containers(spec)
        .filter_map(|c| {
            let get = c.lifecycle.as_ref()?.pre_stop.as_ref()?.http_get.as_ref()?;
            Some(HttpHook { container: c, get })
        })
        .collect()
}

/// The first container's preStop httpGet, to break in a copy of a spec.
pub(super) fn pre_stop_get(s: &mut PodSpec) -> &mut HTTPGetAction {
    let h = s.containers[0]
        .lifecycle
        .as_mut()
        .unwrap()
        .pre_stop
        .as_mut()
        .unwrap();
    h.http_get.as_mut().unwrap()
}

/// The settings the agent will run a hook's drain with: annotations over
/// the hook's own values, the deadline from the grace period by default.
/// Err names what does not fit: a warning the agent would log, or a
/// deadline that leaves the app less than `BUDGET` of its grace period.
pub(super) fn drain_fits(
    req: &DrainRequest,
    annotations: &BTreeMap<String, String>,
    container: &str,
    spec: &PodSpec,
    grace_s: i64,
) -> Result<Accepted, String> {
    // The gate's own annotations are among them: the agent knows they are
    // no drain setting, and a warning about them fails the check. The
    // kubelet's stop order, as the agent reads it from the pod: a wait for
    // a native sidecar from the app is one of those warnings.
    let sidecars: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let facts = PodFacts {
        annotations: annotations.clone(),
        container: Some(container.to_string()),
        grace_period_seconds: Some(grace_s),
        deletion_requested_unix_ms: None,
        stop_ranks: graceful::drain::stop_order::ranks(
            spec.containers.iter().map(|c| c.name.as_str()),
            &sidecars,
        ),
        mesh_ports: Vec::new(),
    };
    let acc = settings::resolve(req, &facts, BUDGET);
    if !acc.warnings.is_empty() {
        return Err(format!("{:?}", acc.warnings));
    }
    let grace = Duration::from_secs(u64::try_from(grace_s).unwrap_or(0));
    let max = Duration::from_millis(acc.max_ms);
    if grace < max + BUDGET {
        return Err(format!(
            "it may wait {max:?} and then needs its shutdown budget of {BUDGET:?}, but \
             terminationGracePeriodSeconds is {grace:?}"
        ));
    }
    Ok(acc)
}

/// An image reference split up: `[registry/]repository[:tag][@digest]`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ImageRef<'a> {
    pub(super) registry: Option<&'a str>,
    pub(super) repository: &'a str,
    pub(super) tag: Option<&'a str>,
    pub(super) digest: Option<&'a str>,
}

pub(super) fn image_ref(s: &str) -> ImageRef<'_> {
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    let (repository, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    let first = repository.split('/').next().unwrap_or_default();
    let registry =
        (repository.contains('/') && (first.contains(['.', ':']) || first == "localhost")).then_some(first);
    ImageRef {
        registry,
        repository,
        tag,
        digest,
    }
}
