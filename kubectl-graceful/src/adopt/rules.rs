//! The injection policy's rules (deploy/inject/inject-policy.yaml, the
//! chart's admission-inject.yaml), applied to a pod template here rather
//! than by the API server: for clusters before Kubernetes 1.36, where no
//! MutatingAdmissionPolicy runs. The cluster test
//! `adopt::*` gives the same pods to both and compares what they make, so
//! a change to one that the other lacks fails there.

use serde_json::{json, Map, Value};

/// The annotations inject writes (and adopt with it).
pub const WRITTEN: [&str; 4] = [
    "graceful.dev/injected",
    "graceful.dev/inject-skipped",
    "graceful.dev/gate",
    "graceful.dev/ignore-ports",
];

/// The hook's deadline and the agent's shutdown budget, as the policy's.
pub const MAX: &str = "25s";
const NEEDED_S: i64 = 25 + 5;
const GATE_DIR: &str = "/var/run/graceful";

/// What a template got, or why it got nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The gate given (`exec`, `http`), or `none` when every container has
    /// a preStop of its own.
    Injected(&'static str),
    /// Left as it is: the reason, as the policy's match conditions say it.
    Left(&'static str),
}

fn annotations(t: &Value) -> Map<String, Value> {
    t["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn containers(spec: &Value) -> Vec<Value> {
    spec["containers"].as_array().cloned().unwrap_or_default()
}

fn has_pre_stop(c: &Value) -> bool {
    !c["lifecycle"]["preStop"].is_null()
}

/// The policy's match conditions: a pod that opted in already, or on the
/// host network, is left alone.
fn left(t: &Value) -> Option<&'static str> {
    let a = annotations(t);
    if a.contains_key("graceful.dev/gate") || a.contains_key("graceful.dev/injected") {
        return Some("opted in already (graceful.dev/gate or graceful.dev/injected)");
    }
    let wait = |c: &Value| {
        c["lifecycle"]["preStop"]["exec"]["command"][0]
            .as_str()
            .is_some_and(|s| s.ends_with("graceful-wait"))
    };
    if containers(&t["spec"]).iter().any(wait) {
        return Some("opted in already (a graceful-wait hook)");
    }
    if t["spec"]["hostNetwork"] == true {
        return Some("on the host network: neither in-pod gate reaches it");
    }
    None
}

/// A port annotation's number, as the agent and the policy read it.
fn port(v: Option<&Value>) -> Option<u64> {
    graceful_api::gate_port(v?.as_str()?).map(u64::from)
}

/// The gate that fits: the pod's own choice, else exec where the
/// namespace enforces privileged and the pod has nothing named graceful.
fn gate(t: &Value, enforce: &str) -> &'static str {
    let spec = &t["spec"];
    let all: Vec<Value> = containers(spec)
        .into_iter()
        .chain(spec["initContainers"].as_array().cloned().unwrap_or_default())
        .collect();
    let own = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| v["name"] == "graceful")
        || all.iter().any(|c| {
            c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["name"] == "graceful" || m["mountPath"] == "/graceful")
        });
    match annotations(t)
        .get("graceful.dev/inject-gate")
        .and_then(Value::as_str)
    {
        Some("exec") if !own => "exec",
        Some("exec") | Some("http") => "http",
        _ if enforce == "privileged" && !own => "exec",
        _ => "http",
    }
}

/// The ports named metrics or http-metrics, and prometheus.io/port, in
/// the order found, each once.
fn metrics_ports(t: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in containers(&t["spec"]) {
        for p in c["ports"].as_array().into_iter().flatten() {
            if matches!(p["name"].as_str(), Some("metrics" | "http-metrics")) {
                if let Some(n) = p["containerPort"].as_u64() {
                    out.push(n.to_string());
                }
            }
        }
    }
    if let Some(p) = port(annotations(t).get("prometheus.io/port")) {
        out.push(p.to_string());
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Applies the policy to `template` (a pod template: `metadata` and
/// `spec`) in a namespace that enforces `enforce` (its Pod Security
/// label, empty if none).
pub fn inject(template: &mut Value, enforce: &str) -> Outcome {
    if let Some(why) = left(template) {
        return Outcome::Left(why);
    }
    let gate = gate(template, enforce);
    let a = annotations(template);
    let gate_port =
        port(a.get(graceful_api::GATE_PORT_ANNOTATION)).unwrap_or(graceful_api::DEFAULT_GATE_PORT.into());
    let all = containers(&template["spec"]);
    let targets: Vec<usize> = (0..all.len()).filter(|i| !has_pre_stop(&all[*i])).collect();
    let skipped: Vec<&str> = all
        .iter()
        .filter(|c| has_pre_stop(c))
        .filter_map(|c| c["name"].as_str())
        .collect();
    let metrics = metrics_ports(template);
    let mut notes = a;
    notes.insert(
        "graceful.dev/injected".into(),
        (if targets.is_empty() { "none" } else { gate }).into(),
    );
    if !skipped.is_empty() {
        notes.insert(
            "graceful.dev/inject-skipped".into(),
            format!("{}: a preStop hook of its own, left as it is", skipped.join(", ")).into(),
        );
    }
    if targets.is_empty() {
        template["metadata"]["annotations"] = Value::Object(notes);
        return Outcome::Injected("none");
    }
    let hook = match gate {
        "http" => json!({"httpGet": {"path": format!("/drain?policy=drained&max={MAX}"), "port": gate_port}}),
        _ => json!({"exec": {"command": ["/graceful/graceful-wait", "--policy", "drained", "--max", MAX]}}),
    };
    let spec = &mut template["spec"];
    for i in targets {
        let c = &mut spec["containers"][i];
        c["lifecycle"]["preStop"] = hook.clone();
        if gate == "exec" {
            let mount = json!({"name": "graceful", "mountPath": "/graceful", "readOnly": true});
            push(&mut c["volumeMounts"], mount);
        }
    }
    if gate == "http" {
        notes.insert("graceful.dev/gate".into(), "http".into());
    } else {
        let volume = json!({"name": "graceful", "hostPath": {"path": GATE_DIR, "type": "DirectoryOrCreate"}});
        push(&mut spec["volumes"], volume);
    }
    if spec["terminationGracePeriodSeconds"].as_i64().unwrap_or(30) < NEEDED_S {
        spec["terminationGracePeriodSeconds"] = NEEDED_S.into();
    }
    if (1..=8).contains(&metrics.len()) && !notes.contains_key("graceful.dev/ignore-ports") {
        notes.insert("graceful.dev/ignore-ports".into(), metrics.join(",").into());
    }
    template["metadata"]["annotations"] = Value::Object(notes);
    Outcome::Injected(gate)
}

/// Appends to a list, making it if absent.
fn push(list: &mut Value, item: Value) {
    match list.as_array_mut() {
        Some(l) => l.push(item),
        None => *list = Value::Array(vec![item]),
    }
}

/// Sets the `max` of every graceful hook of `template`'s containers (the
/// exec and socket gates' `graceful-wait --max`, the httpGet gate's
/// `max=`, and the `graceful.dev/max` annotations, which win over them)
/// to `max_s` seconds, and the grace period to `grace_s`: a
/// recommendation applied. The names of the containers changed; none when
/// no container has graceful's hook.
pub fn tune(template: &mut Value, max_s: u64, grace_s: u64) -> Vec<String> {
    let max = format!("{max_s}s");
    let mut tuned = Vec::new();
    let spec = &mut template["spec"];
    for c in spec
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        // Read through pointers: indexing a Value mutably adds what is absent.
        let ours = if let Some(cmd) = c
            .pointer_mut("/lifecycle/preStop/exec/command")
            .and_then(Value::as_array_mut)
        {
            let wait = cmd
                .first()
                .and_then(Value::as_str)
                .is_some_and(|s| s.rsplit('/').next() == Some("graceful-wait"));
            wait && set_flag(cmd, &max)
        } else if let Some(path) = c.pointer_mut("/lifecycle/preStop/httpGet/path") {
            match path.as_str().and_then(|p| drain_path(p, &max)) {
                Some(p) => {
                    *path = p.into();
                    true
                }
                None => false,
            }
        } else {
            false
        };
        if ours {
            tuned.push(c["name"].as_str().unwrap_or_default().to_string());
        }
    }
    if !tuned.is_empty() {
        spec["terminationGracePeriodSeconds"] = grace_s.into();
        // graceful.dev/max (and max.<container>) wins over the hook's own.
        if let Some(a) = template
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            for (k, v) in a.iter_mut() {
                if is_max(k, &tuned) {
                    *v = max.clone().into();
                }
            }
        }
    }
    tuned
}

/// `--max D` (or `--max=D`) of a graceful-wait command set to `max`,
/// added where absent; true (it is graceful's hook either way).
fn set_flag(cmd: &mut Vec<Value>, max: &str) -> bool {
    let at = cmd.iter().position(|a| a == "--max");
    match at {
        Some(i) if i + 1 < cmd.len() => cmd[i + 1] = max.into(),
        _ => match cmd
            .iter()
            .position(|a| a.as_str().is_some_and(|s| s.starts_with("--max=")))
        {
            Some(i) => cmd[i] = format!("--max={max}").into(),
            None => {
                if at.is_some() {
                    cmd.pop();
                }
                cmd.push("--max".into());
                cmd.push(max.into());
            }
        },
    }
    true
}

/// The httpGet gate's path (`/drain?...`) with its `max` set; None for a
/// path that is not the gate's.
fn drain_path(path: &str, max: &str) -> Option<String> {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    if route != "/drain" {
        return None;
    }
    let mut params: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("max="))
        .map(str::to_string)
        .collect();
    params.push(format!("max={max}"));
    Some(format!("{route}?{}", params.join("&")))
}

/// `graceful.dev/max`, or `graceful.dev/max.<c>` for one of `containers`.
pub fn is_max(key: &str, containers: &[String]) -> bool {
    key.strip_prefix("graceful.dev/max")
        .is_some_and(|c| c.is_empty() || containers.iter().any(|t| c.strip_prefix('.') == Some(t.as_str())))
}
