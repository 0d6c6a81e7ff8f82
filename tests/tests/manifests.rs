//! The deployment surface, checked without a cluster and without root:
//! `deploy/` (the kustomize base of the agent and the example workloads)
//! and the `Containerfile`.
//!
//! - Every YAML document in deploy/ is a kind these tests know, read into
//!   its k8s-openapi type with unknown fields rejected (see `objects`), and
//!   is listed by the kustomization of its directory.
//! - `kubectl kustomize` renders every kustomization; what it renders is
//!   read the same strict way and is what the invariants are checked on:
//!   nothing privileged, the agent's DaemonSet as its comments say (hostPID,
//!   capabilities, mounts, probes, tolerations, update strategy), the
//!   ClusterRole's exact rules, pinned images, and in every example a grace
//!   period longer than each hook's `--max` plus a shutdown budget.
//! - The Containerfile copies paths that exist, takes the workspace's own
//!   [[bin]] targets from its builder, and those build static for musl.
//!
//! kubectl comes from Debian's kubernetes-client (`kubectl kustomize` works
//! offline); `KUBECTL=/path/to/kubectl` runs another one.

#[path = "manifests/containerfile.rs"]
mod containerfile;
#[path = "manifests/elf.rs"]
mod elf;
#[path = "manifests/objects.rs"]
mod objects;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
    time::Duration,
};

use graceful::gate::settings::{self, PodFacts};
use graceful_api::DrainRequest;
use graceful_wait::args as wait_args;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, PodSpec},
};
use objects::{Kind, Object};

const MUSL: &str = "x86_64-unknown-linux-musl";
/// What an app gets for its own shutdown after its hook returns, at least.
const BUDGET: Duration = Duration::from_secs(5);
/// Kubernetes' terminationGracePeriodSeconds when a pod sets none.
const DEFAULT_GRACE: i64 = 30;
/// The agent's namespace.
const NAMESPACE: &str = "graceful-system";
/// The examples, one for each case graceful exists for.
const EXAMPLES: &[&str] = &["haproxy-waf", "mesh-proxy", "policy-sidecar", "web"];

// ---- the repository ----------------------------------------------------------

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
}

/// `deploy/base/daemonset.yaml`, for messages.
fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// Directories of deploy/ that hold a kustomization.yaml, sorted.
fn kustomization_dirs() -> Vec<PathBuf> {
    files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect()
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root()).stdin(Stdio::null());
    cmd
}

/// What `cargo metadata` says about the workspace.
struct Workspace {
    /// The agent's version (graceful-daemon's).
    version: String,
    /// Member directories, relative to the root.
    members: Vec<String>,
    /// Every [[bin]] target: name → package.
    bins: BTreeMap<String, String>,
}

fn workspace() -> &'static Workspace {
    static W: OnceLock<Workspace> = OnceLock::new();
    W.get_or_init(|| {
        let out = cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .output()
            .expect("cannot run cargo metadata");
        assert!(
            out.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut w = Workspace {
            version: String::new(),
            members: Vec::new(),
            bins: BTreeMap::new(),
        };
        for p in meta["packages"].as_array().unwrap() {
            let name = p["name"].as_str().unwrap();
            if name == "graceful-daemon" {
                w.version = p["version"].as_str().unwrap().to_string();
            }
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            w.members.push(rel(manifest.parent().unwrap()));
            for t in p["targets"].as_array().unwrap() {
                if t["kind"].as_array().unwrap().iter().any(|k| k == "bin") {
                    w.bins
                        .insert(t["name"].as_str().unwrap().to_string(), name.to_string());
                }
            }
        }
        assert!(
            !w.version.is_empty(),
            "no graceful-daemon package in the workspace"
        );
        w
    })
}

// ---- rendering -------------------------------------------------------------

fn kubectl() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

/// `kubectl kustomize dir`.
fn render(dir: &Path) -> String {
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
fn rendered() -> &'static BTreeMap<String, Vec<Object>> {
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

fn all_rendered() -> impl Iterator<Item = &'static Object> {
    rendered().values().flatten()
}

fn base() -> &'static [Object] {
    rendered()
        .get("deploy/base")
        .expect("deploy/base has no kustomization.yaml")
}

/// The agent's DaemonSet, from the rendered base.
fn agent() -> &'static DaemonSet {
    let mut it = base().iter().filter_map(|o| match &o.kind {
        Kind::DaemonSet(ds) => Some(ds),
        _ => None,
    });
    let ds = it.next().expect("deploy/base renders no DaemonSet");
    assert!(it.next().is_none(), "deploy/base renders more than one DaemonSet");
    ds
}

fn agent_pod() -> &'static PodSpec {
    agent()
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .expect("the DaemonSet has no pod spec")
}

fn agent_container() -> &'static Container {
    match &agent_pod().containers[..] {
        [c] => c,
        cs => panic!("the agent's pod should have one container, not {}", cs.len()),
    }
}

/// The agent's `--gate-dir`.
fn gate_dir() -> String {
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
fn template_annotations(objs: &[Object], owner: &str) -> BTreeMap<String, String> {
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

fn pod_templates(objs: &[Object]) -> Vec<(String, &PodSpec)> {
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
fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

/// A container's `graceful-wait` preStop hook, read as graceful-wait reads it.
struct Hook<'a> {
    container: &'a Container,
    argv: Vec<String>,
    args: wait_args::Args,
}

fn hooks(spec: &PodSpec) -> Vec<Hook<'_>> {
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

/// An image reference split up: `[registry/]repository[:tag][@digest]`.
#[derive(Debug, PartialEq, Eq)]
struct ImageRef<'a> {
    registry: Option<&'a str>,
    repository: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

fn image_ref(s: &str) -> ImageRef<'_> {
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

// ---- the files in deploy/ ----------------------------------------------------

#[test]
fn every_yaml_document_is_a_known_kind_without_unknown_fields() {
    let files: Vec<PathBuf> = files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| is_yaml(p))
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

// ---- invariants on what is rendered -----------------------------------------

#[test]
fn nothing_is_privileged() {
    for (owner, spec) in rendered().values().flat_map(|objs| pod_templates(objs)) {
        for c in containers(spec) {
            let sc = c.security_context.clone().unwrap_or_default();
            assert_ne!(
                sc.privileged,
                Some(true),
                "{owner}: container {} is privileged",
                c.name
            );
            assert_ne!(
                sc.allow_privilege_escalation,
                Some(true),
                "{owner}: container {} allows privilege escalation",
                c.name
            );
            // The API server's own rule: Bidirectional needs a privileged container.
            for m in c.volume_mounts.iter().flatten() {
                assert_ne!(
                    m.mount_propagation.as_deref(),
                    Some("Bidirectional"),
                    "{owner}: container {} mounts {} Bidirectional, which the API server allows only \
                     in privileged containers",
                    c.name,
                    m.mount_path
                );
            }
        }
        assert_ne!(spec.host_network, Some(true), "{owner}: hostNetwork");
        assert_ne!(spec.host_ipc, Some(true), "{owner}: hostIPC");
    }
    // Only the agent needs more than a plain pod.
    for (dir, objs) in rendered()
        .iter()
        .filter(|(d, _)| d.starts_with("deploy/examples/"))
    {
        for (owner, spec) in pod_templates(objs) {
            assert_ne!(spec.host_pid, Some(true), "{dir}: {owner} uses hostPID");
            for c in containers(spec) {
                let add = c
                    .security_context
                    .as_ref()
                    .and_then(|s| s.capabilities.as_ref()?.add.clone());
                assert!(
                    add.unwrap_or_default().is_empty(),
                    "{owner}: container {} adds capabilities",
                    c.name
                );
            }
        }
    }
}

/// The capabilities `graceful doctor` checks for, read from its source:
/// the DaemonSet must grant exactly these.
fn doctor_capabilities() -> BTreeSet<String> {
    let src = read(&root().join("graceful-daemon/src/cli/doctor.rs"));
    let start = src.find("const CAPS").expect("doctor.rs has no CAPS list");
    let list = &src[start..start + src[start..].find("];").unwrap()];
    list.split('"')
        .filter_map(|s| s.strip_prefix("CAP_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_agent_daemonset_has_what_it_needs_and_no_more() {
    let pod = agent_pod();
    let c = agent_container();
    assert_eq!(
        pod.host_pid,
        Some(true),
        "the gate reads /proc/<pid>/cgroup of host pids: hostPID"
    );

    let sc = c
        .security_context
        .as_ref()
        .expect("the agent has no securityContext");
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.run_as_user, Some(0));
    let caps = sc.capabilities.as_ref().expect("no capabilities");
    assert_eq!(
        caps.drop.as_deref(),
        Some(&["ALL".to_string()][..]),
        "capabilities must drop ALL"
    );
    let added: BTreeSet<String> = caps.add.iter().flatten().cloned().collect();
    let wanted = doctor_capabilities();
    assert!(
        wanted.contains("BPF") && wanted.len() >= 4,
        "doctor's list looks wrong: {wanted:?}"
    );
    assert_eq!(
        added, wanted,
        "the DaemonSet's capabilities and `graceful doctor`'s list differ"
    );
    assert!(
        !added.contains("SYS_RESOURCE"),
        "memlock is memcg-accounted on every kernel graceful runs on"
    );
    assert!(sc.seccomp_profile.is_some(), "say which seccomp profile, and why");

    // Mounts: host path, where, read-only.
    let gate = gate_dir();
    let wanted_mounts = [
        ("/sys/fs/bpf", "/sys/fs/bpf", false),
        ("/sys/fs/cgroup", "/sys/fs/cgroup", true),
        ("/sys/kernel/btf", "/sys/kernel/btf", true),
        (gate.as_str(), gate.as_str(), false),
    ];
    for (host, at, ro) in wanted_mounts {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == at)
            .unwrap_or_else(|| panic!("the agent mounts nothing at {at}"));
        let v = pod.volumes.iter().flatten().find(|v| v.name == m.name).unwrap();
        let hp = v
            .host_path
            .as_ref()
            .unwrap_or_else(|| panic!("{at} is not a hostPath volume"));
        assert_eq!(hp.path, host, "the volume mounted at {at}");
        assert_eq!(m.read_only.unwrap_or(false), ro, "{at} read-only");
    }

    // The API socket needs a writable directory: with a read-only root
    // filesystem the agent cannot create it, goes on without the socket, and
    // `kubectl exec ds/graceful -- /graceful drains` finds no agent.
    let daemon_args = c.args.clone().unwrap_or_default();
    let socket = daemon_args
        .iter()
        .position(|a| a == "--api-socket")
        .and_then(|i| daemon_args.get(i + 1).cloned())
        .unwrap_or_else(|| graceful::api::DEFAULT_SOCKET.to_string());
    let socket_dir = std::path::Path::new(&socket)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    if sc.read_only_root_filesystem == Some(true) {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == socket_dir)
            .unwrap_or_else(|| panic!("the root filesystem is read-only and nothing writable is mounted at {socket_dir}, the API socket's directory"));
        assert!(!m.read_only.unwrap_or(false), "{socket_dir} is mounted read-only");
        let v = pod.volumes.iter().flatten().find(|v| v.name == m.name).unwrap();
        assert!(
            v.empty_dir.is_some(),
            "the API socket's directory is the pod's own (an emptyDir), not a host path another agent could share"
        );
    }

    let env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "NODE_NAME")
        .expect("no NODE_NAME env");
    let field = env
        .value_from
        .as_ref()
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(
        field,
        Some("spec.nodeName"),
        "NODE_NAME comes from the downward API"
    );

    let res = c.resources.as_ref().expect("no resources");
    for (what, set) in [("requests", &res.requests), ("limits", &res.limits)] {
        let set = set.as_ref().unwrap_or_else(|| panic!("no {what}"));
        assert!(
            set.contains_key("cpu") && set.contains_key("memory"),
            "{what}: cpu and memory"
        );
    }
    // The probes ask the agent's local API, on the port it is told to serve.
    let args = c.args.clone().unwrap_or_default();
    let api_addr = args
        .iter()
        .position(|a| a == "--api-addr")
        .and_then(|i| args.get(i + 1))
        .expect("the DaemonSet sets --api-addr");
    let port = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a port named metrics");
    assert_eq!(api_addr, &format!("0.0.0.0:{}", port.container_port));
    for (what, probe, path) in [
        ("readiness", &c.readiness_probe, "/readyz"),
        ("liveness", &c.liveness_probe, "/healthz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.clone())
            .unwrap_or_else(|| panic!("no {what} httpGet probe"));
        assert_eq!(get.path.as_deref(), Some(path), "{what}");
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into())
        );
    }

    let tolerates_all = pod
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none());
    assert!(
        tolerates_all,
        "the agent must tolerate every taint (operator Exists, no key)"
    );
    let strategy = agent()
        .spec
        .as_ref()
        .unwrap()
        .update_strategy
        .as_ref()
        .expect("no updateStrategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-node-critical"));
    assert_eq!(
        c.image.as_deref(),
        Some(format!("graceful/agent:{}", workspace().version).as_str()),
        "the agent's image tag follows the workspace version"
    );
}

#[test]
fn the_cluster_role_grants_pods_read_and_events_create_only() {
    let roles: Vec<&Object> = all_rendered()
        .filter(|o| matches!(o.kind, Kind::ClusterRole(_)))
        .collect();
    let [role] = roles[..] else {
        panic!("expected one ClusterRole in deploy/, found {}", roles.len())
    };
    let Kind::ClusterRole(role) = &role.kind else {
        unreachable!()
    };
    assert!(
        role.aggregation_rule.is_none(),
        "an aggregated ClusterRole grants what others add"
    );
    let mut rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = Vec::new();
    for r in role.rules.iter().flatten() {
        assert!(
            r.resource_names.is_none() && r.non_resource_urls.is_none(),
            "{r:?}"
        );
        let sorted = |v: &Option<Vec<String>>| {
            let mut v = v.clone().unwrap_or_default();
            v.sort();
            v
        };
        rules.push((
            sorted(&r.api_groups),
            sorted(&r.resources),
            r.verbs
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        ));
    }
    rules.sort();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        vec![
            (s(&[""]), s(&["events"]), s(&["create"])),
            (s(&[""]), s(&["pods"]), s(&["get", "list", "watch"])),
        ]
    );

    // Bound to the agent's ServiceAccount, which the DaemonSet runs as.
    let name = role.metadata.name.clone().unwrap();
    let sa = agent_pod()
        .service_account_name
        .clone()
        .expect("the DaemonSet names no serviceAccountName");
    assert!(
        base()
            .iter()
            .any(|o| matches!(&o.kind, Kind::ServiceAccount(a) if a.metadata.name.as_deref() == Some(&sa))),
        "no ServiceAccount {sa} in deploy/base"
    );
    let bound = all_rendered().any(|o| match &o.kind {
        Kind::ClusterRoleBinding(b) => {
            b.role_ref.kind == "ClusterRole"
                && b.role_ref.name == name
                && b.subjects.iter().flatten().any(|s| {
                    s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(NAMESPACE)
                })
        }
        _ => false,
    });
    assert!(
        bound,
        "no ClusterRoleBinding binds ClusterRole {name} to ServiceAccount {NAMESPACE}/{sa}"
    );
}

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
            assert!(!hooks.is_empty(), "{owner}: no graceful-wait preStop hook");
            let grace_s = spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE);
            let grace = Duration::from_secs(u64::try_from(grace_s).unwrap());
            let annotations = template_annotations(objs, &owner);
            for h in &hooks {
                let name = &h.container.name;
                // The settings the agent will run this hook with: annotations
                // over flags, the deadline from the grace period by default.
                let req = DrainRequest::parse(h.args.request_json(0).as_bytes()).unwrap();
                let facts = PodFacts {
                    annotations: annotations.clone(),
                    container: Some(name.clone()),
                    grace_period_seconds: Some(grace_s),
                };
                let acc = settings::resolve(&req, &facts, BUDGET);
                assert!(acc.warnings.is_empty(), "{owner}: {name}: {:?}", acc.warnings);
                let max = Duration::from_millis(acc.max_ms);
                assert!(
                    grace >= max + BUDGET,
                    "{owner}: container {name} may wait {max:?} and then needs its shutdown \
                     budget of {BUDGET:?}, but terminationGracePeriodSeconds is {grace:?}"
                );
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
                let host = v.host_path.as_ref().map(|h| h.path.trim_end_matches('/'));
                assert_eq!(
                    host,
                    Some(gate.trim_end_matches('/')),
                    "{owner}: {name}: {bin_dir} must be the agent's --gate-dir"
                );
                assert_eq!(
                    h.args.socket,
                    format!("{bin_dir}/gate.sock"),
                    "{owner}: {name}: the gate socket"
                );
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
    let mesh = hooks_of("mesh-proxy");
    assert!(
        mesh.iter()
            .any(|(c, a, _)| c == "proxy" && a.after_containers.as_deref() == Some(&["app".to_string()][..])),
        "mesh-proxy: the proxy's hook uses --after-containers app"
    );
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

// ---- the Containerfile -------------------------------------------------------

/// The binaries the image takes from the builder stage: (destination, bin
/// target, package), after checking every path the Containerfile names.
fn image_binaries() -> Vec<(String, String, String)> {
    let path = root().join("Containerfile");
    let stages = containerfile::parse(&read(&path));
    let ws = workspace();
    assert!(
        stages.len() >= 2,
        "Containerfile: a builder stage and a final stage"
    );
    let last = stages.last().unwrap();
    assert_eq!(last.base, "scratch", "Containerfile: the image is FROM scratch");

    // What it copies from the repository exists, and is the whole workspace.
    let mut local = BTreeSet::new();
    for stage in &stages {
        for i in stage.all("COPY").chain(stage.all("ADD")) {
            let c = containerfile::copy(i);
            if c.from.is_some() {
                continue;
            }
            for s in &c.sources {
                assert!(
                    !s.contains(['*', '?', '[']),
                    "Containerfile line {}: {s}: globs are not checked",
                    i.line
                );
                assert!(
                    root().join(s).exists(),
                    "Containerfile line {}: COPY {s}: no such path in the repository",
                    i.line
                );
                local.insert(s.trim_end_matches('/').to_string());
            }
        }
    }
    for m in ws
        .members
        .iter()
        .map(String::as_str)
        .chain(["Cargo.toml", "Cargo.lock"])
    {
        assert!(
            local.contains(m) || local.contains("."),
            "Containerfile: {m} is not copied into the builder; cargo loads the whole workspace"
        );
    }

    // What the image takes from the builder: the workspace's own binaries.
    let mut bins = Vec::new();
    for i in last.all("COPY") {
        let c = containerfile::copy(i);
        let Some(from) = &c.from else { continue };
        let builder = stages
            .iter()
            .find(|s| s.name.as_deref() == Some(from.as_str()))
            .unwrap_or_else(|| panic!("Containerfile line {}: no stage {from}", i.line));
        let workdir = &builder
            .all("WORKDIR")
            .last()
            .expect("the builder sets no WORKDIR")
            .args;
        let prefix = format!("{}/target/{MUSL}/release/", workdir.trim_end_matches('/'));
        for s in &c.sources {
            let bin = s
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("Containerfile line {}: {s} is not under {prefix}", i.line));
            let pkg = ws.bins.get(bin).unwrap_or_else(|| {
                panic!(
                    "Containerfile line {}: {bin} is no [[bin]] of the workspace",
                    i.line
                )
            });
            let build = builder
                .all("RUN")
                .map(|r| r.args.split_whitespace().collect::<Vec<_>>().join(" "))
                .find(|r| r.contains("cargo build"))
                .expect("the builder runs no `cargo build`");
            for want in [
                "--release".to_string(),
                format!("--target {MUSL}"),
                format!("-p {pkg}"),
            ] {
                assert!(build.contains(&want), "Containerfile: `{build}` lacks {want}");
            }
            bins.push((c.dest.clone(), bin.to_string(), pkg.clone()));
        }
    }

    // The layout the agent and the DaemonSet rely on.
    let dest_of = |bin: &str| {
        bins.iter()
            .find(|(_, b, _)| b == bin)
            .map(|(d, _, _)| d.clone())
            .unwrap_or_else(|| panic!("Containerfile: the image lacks {bin}"))
    };
    let (agent, wait) = (dest_of("graceful"), dest_of("graceful-wait"));
    assert_eq!(
        Path::new(&wait).parent(),
        Path::new(&agent).parent(),
        "the agent looks for graceful-wait beside its own executable"
    );
    let entry = last.all("ENTRYPOINT").last().expect("no ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(&entry.args).expect("ENTRYPOINT in JSON form");
    assert_eq!(entry, [agent.clone(), "daemon".into()]);
    let c = agent_container();
    assert!(c.command.is_none(), "the DaemonSet keeps the image's entrypoint");
    for p in [&c.readiness_probe, &c.liveness_probe].into_iter().flatten() {
        // An exec probe must run a binary the image has (it has no shell);
        // HTTP probes ask the agent itself.
        if let Some(cmd) = p.exec.as_ref().and_then(|e| e.command.as_ref()) {
            assert_eq!(cmd[0], agent, "probes run a binary the image has");
        }
    }
    bins
}

#[test]
fn the_containerfile_names_real_paths_and_binaries() {
    let bins = image_binaries();
    assert_eq!(bins.len(), 2, "{bins:?}");
}

/// Builds what the Containerfile builds, for the same target, and reads
/// the executables' ELF headers: no loader, no shared library (a scratch
/// image has neither). The first build takes minutes (the agent embeds its
/// eBPF object); later ones are incremental.
#[test]
fn the_containerfile_binaries_link_statically() {
    let bins = image_binaries();
    let packages: BTreeSet<&str> = bins.iter().map(|(_, _, p)| p.as_str()).collect();
    let mut cmd = cargo();
    cmd.args([
        "build",
        "--release",
        "--target",
        MUSL,
        "--message-format=json-render-diagnostics",
    ]);
    for p in &packages {
        cmd.args(["-p", p]);
    }
    eprintln!("building {packages:?} for {MUSL} (release), as the Containerfile does");
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .expect("cannot run cargo build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let hint = if stderr.contains("musl-gcc") {
            "a C compiler for musl is missing (ring, under kube-rs's TLS, compiles C): \
             `apt-get install musl-tools`"
        } else if stderr.contains("bpf-linker") {
            "bpf-linker is missing: `cargo xtask setup`"
        } else if stderr.contains(MUSL) {
            "the musl target may be missing: `rustup target add x86_64-unknown-linux-musl` (or `cargo xtask setup`)"
        } else {
            "see cargo's output above"
        };
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("the musl build failed: {hint}\n{}", tail.join("\n"));
    }
    let mut executables = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] == "compiler-artifact" {
            if let (Some(name), Some(exe)) = (m["target"]["name"].as_str(), m["executable"].as_str()) {
                executables.insert(name.to_string(), PathBuf::from(exe));
            }
        }
    }
    for (dest, bin, _) in &bins {
        let exe = executables
            .get(bin)
            .unwrap_or_else(|| panic!("cargo built no executable {bin}"));
        let data = std::fs::read(exe).unwrap();
        let l = elf::linkage(&data).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
        assert!(
            l.is_static(),
            "{} (the image's {dest}) is not static: loader {:?}, needs {:?}. Is RUSTFLAGS or \
             .cargo/config.toml turning off static linking for {MUSL}?",
            exe.display(),
            l.interp,
            l.needed
        );
        eprintln!("{bin}: static ({} bytes)", data.len());
    }
}
