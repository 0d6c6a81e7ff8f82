//! graceful's Helm chart, checked by the tools the field uses and by the
//! node's own API server:
//!
//! - `helm lint --strict`, and `helm template` of every documented variant
//!   applied with `--dry-run=server` (the monitoring objects against
//!   prometheus-operator's own CRDs);
//! - a wrong value fails `helm template` in one line, from the schema;
//! - the chart's agent is deploy/base's, field for field;
//! - every alert fires in a `promtool test rules` unit test.
//!
//! Installing, upgrading and removing it on the node: `helm_lifecycle.rs`.

use std::collections::BTreeSet;

use graceful_tests::cluster::{
    helm::{self, Crds},
    workspace, Cluster,
};
use serde_json::Value;

/// The documented variants (values.yaml), as `--set` lists.
const VARIANTS: &[(&str, &[&str])] = &[
    ("defaults", &[]),
    (
        "ServiceMonitor, alerts, dashboard",
        &[
            "metrics.serviceMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "metrics.dashboard.enabled=true",
        ],
    ),
    (
        "PodMonitor and alerts, without kube-state-metrics",
        &[
            "metrics.podMonitor.enabled=true",
            "service.enabled=false",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.kubeStateMetrics=false",
        ],
    ),
    (
        "NetworkPolicy for the metrics port",
        &[
            "networkPolicy.enabled=true",
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
        ],
    ),
    (
        "kube-prometheus-stack: its release label on every monitoring object",
        &[
            "metrics.serviceMonitor.enabled=true",
            "metrics.serviceMonitor.labels.release=kps",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.labels.release=kps",
        ],
    ),
    (
        "Kubernetes 1.29: the AppArmor annotation, no admission policy",
        &["--kube-version=1.29.0"],
    ),
    (
        "OpenShift: an SCC for the agent alone, SELinux spc_t",
        &["openshift.scc.enabled=true", "agent.seLinuxOptions.type=spc_t"],
    ),
    (
        "adoption widened: two namespaces and a selector, fewer workload series",
        &[
            "agent.reportNamespaces={shop,pay}",
            "agent.reportSelector=app in (web\\,api)",
            "agent.metricsMaxWorkloads=64",
        ],
    ),
    (
        "an image by digest, no quota",
        &[
            "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "resourceQuota.enabled=false",
        ],
    ),
    (
        "an image from a registry, tracepoint counting, no keeper",
        &[
            "image.repository=registry.example/platform/graceful-agent",
            "image.tag=0.1.0-rc1",
            "imagePullSecrets[0].name=pull",
            "agent.counting=tracepoint",
            "agent.keeper=false",
            "agent.shutdownBudget=8s",
            "rbac.create=true",
            "serviceAccount.name=graceful-agent",
        ],
    ),
];

/// `--set` before each, but for a flag of helm's own (`--kube-version=`).
fn sets(list: &[&str]) -> Vec<String> {
    list.iter()
        .flat_map(|s| match s.starts_with("--") {
            true => vec![s.to_string()],
            false => vec!["--set".to_string(), s.to_string()],
        })
        .collect()
}

#[test]
fn the_chart_lints_and_the_api_server_accepts_every_variant() {
    let (cluster, _serial) = crate::node();
    let chart = helm::chart();
    let lint = helm::helm(&cluster, &["lint", "--strict", chart.to_str().unwrap()]);
    assert!(lint.contains("1 chart(s) linted, 0 chart(s) failed"), "{lint}");
    let _crds = (Crds::monitoring(&cluster), Crds::openshift_scc(&cluster));
    for (name, set) in VARIANTS {
        let args = sets(set);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut lint_args = vec!["lint", "--strict", chart.to_str().unwrap()];
        lint_args.extend(&args);
        helm::helm(&cluster, &lint_args);
        let rendered = helm::template(&cluster, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{name}: the API server refused the chart: {said}"
        );
        let kinds: BTreeSet<&str> = rendered
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        eprintln!("{name}: {} objects accepted ({kinds:?})", said.lines().count());
    }
}

#[test]
fn a_wrong_value_fails_in_one_line_that_names_it() {
    let (cluster, _serial) = crate::node();
    for (set, says) in [
        ("agent.counting=bogus", "/agent/counting"),
        ("agent.shutdownBudget=5x", "/agent/shutdownBudget"),
        ("nosuch=1", "additional properties 'nosuch' not allowed"),
        (
            "terminationGracePeriodSeconds=5",
            "/terminationGracePeriodSeconds",
        ),
        ("ports.metrics=70000", "/ports/metrics"),
        ("image.digest=latest", "/image/digest"),
        ("resourceQuota.pods=lots", "/resourceQuota/pods"),
        ("resourceQuota.pods=0", "/resourceQuota/pods"),
        (
            "agent.seccompProfile.localhostProfile=x",
            "agent.seccompProfile.localhostProfile is for type: Localhost only",
        ),
        (
            "metrics.serviceMonitor.interval=often",
            "/metrics/serviceMonitor/interval",
        ),
        ("networkPolicy.enabled=true", "networkPolicy.metricsFrom"),
        (
            "metrics.serviceMonitor.enabled=true,service.enabled=false",
            "needs service.enabled",
        ),
    ] {
        let err = helm::template(&cluster, &["--set", set]).expect_err(set);
        assert!(err.contains(says), "{set}: {err}");
        let message: Vec<&str> = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains("--debug"))
            .collect();
        assert!(message.len() <= 4, "{set}: not a short message: {err}");
    }
}

/// One object of a rendered stream, by kind.
fn object<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

/// Every document of a YAML stream, as JSON values.
fn documents(yaml: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("not YAML: {e}: {yaml}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// A list of strings, as rendered.
fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The agent's container of a rendered stream.
fn agent_container(docs: &[Value]) -> &Value {
    &object(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn each_platforms_profile_renders_what_that_platform_needs() {
    let (cluster, _serial) = crate::node();
    let render = |args: &[&str]| {
        let args = sets(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        documents(&helm::template(&cluster, &args).unwrap())
    };
    let kinds = |docs: &[Value]| -> BTreeSet<String> {
        docs.iter()
            .filter_map(|d| d["kind"].as_str().map(String::from))
            .collect()
    };

    // The defaults: IPv4, IPv6 and dual-stack alike (the metrics port on
    // every address, the probes on its name), GKE's quota for the
    // priority class, the agent's last words kept where `kubectl
    // describe` shows them, AppArmor as a field (1.30 and later).
    let defaults = render(&[]);
    let c = agent_container(&defaults);
    let args = strings(&c["args"]);
    let at = args.iter().position(|a| *a == "--metrics-addr").unwrap();
    assert_eq!(args[at + 1], ":9464", "{args:?}");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(c["securityContext"]["appArmorProfile"]["type"], "Unconfined");
    let quota = object(&defaults, "ResourceQuota");
    assert_eq!(quota["metadata"]["namespace"], "graceful-system");
    assert_eq!(
        quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"],
        serde_json::json!(["system-node-critical"]),
        "{quota}"
    );
    let pod = &object(&defaults, "DaemonSet")["spec"]["template"];
    assert!(pod["metadata"]["annotations"].is_null(), "{pod}");

    // Kubernetes 1.25 to 1.29: the annotation instead of the field (which
    // those API servers drop), and no ValidatingAdmissionPolicy (GA in 1.30).
    let old = render(&["--kube-version=1.29.0"]);
    let pod = &object(&old, "DaemonSet")["spec"]["template"];
    assert_eq!(
        pod["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/agent"],
        "unconfined"
    );
    assert!(agent_container(&old)["securityContext"]["appArmorProfile"].is_null());
    assert!(
        !kinds(&old).contains("ValidatingAdmissionPolicy"),
        "{:?}",
        kinds(&old)
    );
    assert!(kinds(&defaults).contains("ValidatingAdmissionPolicy"));

    // An image by digest: the node pulls those bytes.
    let digest = format!("sha256:{}", "ab".repeat(32));
    let pinned = render(&[&format!("image.digest={digest}")]);
    let image = agent_container(&pinned)["image"].as_str().unwrap().to_string();
    assert!(
        image.starts_with("graceful/agent:") && image.ends_with(&format!("@{digest}")),
        "{image}"
    );

    // No quota when turned off, or without a priority class to match.
    for off in ["resourceQuota.enabled=false", "priorityClassName="] {
        assert!(!kinds(&render(&[off])).contains("ResourceQuota"), "{off}");
    }

    // OpenShift: an SCC that allows the agent's pod as rendered, and its
    // `use` granted to the agent's service account alone.
    assert!(!kinds(&defaults).contains("SecurityContextConstraints"));
    let os = render(&["openshift.scc.enabled=true", "agent.seLinuxOptions.type=spc_t"]);
    let (scc, c) = (object(&os, "SecurityContextConstraints"), agent_container(&os));
    let pod = &object(&os, "DaemonSet")["spec"]["template"]["spec"];
    assert_eq!(
        scc["allowedCapabilities"],
        c["securityContext"]["capabilities"]["add"]
    );
    assert_eq!(scc["allowHostPID"], pod["hostPID"]);
    assert_eq!(scc["allowPrivilegedContainer"], false);
    assert_eq!(
        scc["allowPrivilegeEscalation"],
        c["securityContext"]["allowPrivilegeEscalation"]
    );
    assert_eq!(
        scc["readOnlyRootFilesystem"],
        c["securityContext"]["readOnlyRootFilesystem"]
    );
    assert_eq!(
        (&scc["runAsUser"]["type"], &scc["runAsUser"]["uid"]),
        (&Value::from("MustRunAs"), &c["securityContext"]["runAsUser"])
    );
    assert_eq!(scc["seccompProfiles"], serde_json::json!(["runtime/default"]));
    // The pod sets its own SELinux type; the SCC does not pin a label
    // (with MustRunAs it would add the namespace's MCS level, and refuse
    // a pod whose options carry none).
    assert_eq!(c["securityContext"]["seLinuxOptions"]["type"], "spc_t");
    assert_eq!(scc["seLinuxContext"]["type"], "RunAsAny");
    let allowed: BTreeSet<&str> = strings(&scc["volumes"]).into_iter().collect();
    for v in pod["volumes"].as_array().unwrap() {
        let kind = v.as_object().unwrap().keys().find(|k| *k != "name").unwrap();
        assert!(
            allowed.contains(kind.as_str()),
            "volume {v} is not allowed by {allowed:?}"
        );
    }
    let binding = object(&os, "RoleBinding");
    assert_eq!(binding["subjects"][0]["name"], pod["serviceAccountName"]);
    assert_eq!(binding["subjects"].as_array().unwrap().len(), 1);
    let role = os
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["rules"][0]["verbs"] == serde_json::json!(["use"]))
        .expect("the ClusterRole that grants the SCC's use");
    assert_eq!(role["rules"][0]["resourceNames"][0], scc["metadata"]["name"]);

    // kube-prometheus-stack reads only objects with its release's label.
    let kps = render(&[
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=kps",
        "metrics.prometheusRule.enabled=true",
        "metrics.prometheusRule.labels.release=kps",
    ]);
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert_eq!(
            object(&kps, kind)["metadata"]["labels"]["release"],
            "kps",
            "{kind}"
        );
    }

    // Adoption: by default only pods that opted in are reported (no flag);
    // widened, the flags the agent parses.
    assert!(!args.iter().any(|a| a.starts_with("--report")), "{args:?}");
    let wide = render(&[
        "agent.reportNamespaces={shop,pay}",
        "agent.reportSelector=app in (web\\,api)",
        "agent.metricsMaxWorkloads=64",
    ]);
    let wide_args = strings(&agent_container(&wide)["args"]);
    for pair in [
        ["--report-namespaces", "shop,pay"],
        ["--report-selector", "app in (web,api)"],
        ["--metrics-max-workloads", "64"],
    ] {
        assert!(
            wide_args.windows(2).any(|w| w == pair),
            "{pair:?} not in {wide_args:?}"
        );
    }
}

#[test]
fn the_charts_agent_is_deploy_bases_field_for_field() {
    let (cluster, _serial) = crate::node();
    let chart = documents(&helm::template(&cluster, &[]).unwrap());
    let base_dir = workspace().join("deploy/base");
    let base = documents(&cluster.kubectl(&["kustomize", base_dir.to_str().unwrap()]));
    let (c, b) = (object(&chart, "DaemonSet"), object(&base, "DaemonSet"));
    assert_eq!(c["metadata"]["name"], b["metadata"]["name"]);
    assert_eq!(c["metadata"]["namespace"], b["metadata"]["namespace"]);
    // A release can adopt a DaemonSet applied from deploy/base: the
    // selector, which cannot change, is the same.
    assert_eq!(c["spec"]["selector"], b["spec"]["selector"]);
    assert_eq!(c["spec"]["updateStrategy"], b["spec"]["updateStrategy"]);
    let (cp, bp) = (&c["spec"]["template"]["spec"], &b["spec"]["template"]["spec"]);
    for field in [
        "hostPID",
        "priorityClassName",
        "terminationGracePeriodSeconds",
        "enableServiceLinks",
        "tolerations",
        "volumes",
        "serviceAccountName",
    ] {
        assert_eq!(cp[field], bp[field], "pod spec {field}");
    }
    let (cc, bc) = (&cp["containers"][0], &bp["containers"][0]);
    assert_eq!(cc["image"], bc["image"], "the image");
    for field in [
        "args",
        "ports",
        "env",
        "securityContext",
        "resources",
        "readinessProbe",
        "livenessProbe",
        "volumeMounts",
        "imagePullPolicy",
        "terminationMessagePolicy",
    ] {
        assert_eq!(cc[field], bc[field], "container {field}");
    }
    assert_eq!(
        object(&chart, "ClusterRole")["rules"],
        object(&base, "ClusterRole")["rules"],
        "the agent's RBAC"
    );
    assert_eq!(
        object(&chart, "ResourceQuota")["spec"],
        object(&base, "ResourceQuota")["spec"],
        "the quota for the priority class"
    );
    // deploy/admission's and deploy/inject's policies are the chart's, rule for rule, with the
    // default values (the release's name and namespace are graceful's).
    let mut admission = Vec::new();
    for dir in ["deploy/admission", "deploy/inject"] {
        let dir = workspace().join(dir);
        admission.extend(documents(&cluster.kubectl(&["kustomize", dir.to_str().unwrap()])));
    }
    // Kustomize writes a folded CEL expression back with blank lines
    // between its lines: what counts is the text up to whitespace.
    fn words(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
            Value::Array(a) => Value::Array(a.iter().map(words).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), words(v))).collect()),
            other => other.clone(),
        }
    }
    let policies = |docs: &[Value]| -> Vec<(String, Value)> {
        let mut v: Vec<(String, Value)> = docs
            .iter()
            .filter(|d| {
                d["kind"].as_str().is_some_and(|k| {
                    k.starts_with("ValidatingAdmissionPolicy") || k.starts_with("MutatingAdmissionPolicy")
                })
            })
            .map(|d| {
                (
                    format!("{} {}", d["kind"], d["metadata"]["name"]),
                    words(&d["spec"]),
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let (from_chart, from_kustomize) = (policies(&chart), policies(&admission));
    assert_eq!(from_chart.len(), 7, "{from_chart:?}");
    assert_eq!(
        from_chart, from_kustomize,
        "deploy/admission is the chart's admission"
    );
}

/// The chart's PrometheusRule, rendered with `sets` (`--set`'s syntax)
/// besides enabling it, as the groups of a Prometheus rules file.
pub fn rule_groups(cluster: &Cluster, sets: &str) -> Value {
    let set = format!("metrics.prometheusRule.enabled=true{sets}");
    let rendered = helm::template(
        cluster,
        &["--set", &set, "--show-only", "templates/prometheusrule.yaml"],
    )
    .unwrap();
    documents(&rendered)[0]["spec"]["groups"].clone()
}

#[test]
fn every_alert_fires_in_its_promtool_unit_test() {
    let (cluster, _serial) = crate::node();
    let groups = &rule_groups(&cluster, "");
    let alerts: BTreeSet<String> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    assert!(alerts.len() >= 9, "{alerts:?}");

    // promtool reads a rules file: the PrometheusRule's spec, as JSON
    // (which is YAML), beside the committed unit tests.
    let dir = tempfile_dir();
    let tests = workspace().join("tests/fixtures/alerts/graceful.test.yaml");
    std::fs::write(
        dir.join("rules.yaml"),
        serde_json::json!({ "groups": groups }).to_string(),
    )
    .unwrap();
    std::fs::copy(&tests, dir.join("graceful.test.yaml")).unwrap();
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "graceful.test.yaml"],
    ] {
        let out = graceful_tests::promtool::command()
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {args:?}:\n{text}");
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        eprintln!("promtool {}: {}", args.join(" "), last.trim());
    }

    // Every alert is seen firing in some test (an expected alert listed).
    let fixture = std::fs::read_to_string(&tests).unwrap();
    let mut firing = BTreeSet::new();
    let mut current = None;
    for line in fixture.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("alertname: ") {
            current = Some(name.to_string());
        } else if t == "exp_alerts:" {
            firing.extend(current.take());
        } else if t.starts_with("exp_alerts: []") {
            current = None;
        }
    }
    assert_eq!(firing, alerts, "every alert needs a unit test in which it fires");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("graceful-alerts-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
