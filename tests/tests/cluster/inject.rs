//! Injection by label (deploy/inject, the chart's admission.inject) through
//! the node's real API server (1.37: MutatingAdmissionPolicy GA). Pods
//! written with no hook, no annotation and no volume:
//! - in a namespace labelled graceful.dev/inject=enabled and Pod Security
//!   privileged get the exec gate, the grace period raised to the
//!   deadline plus the budget, their metrics port left out, and a
//!   container with its own preStop left alone and named; a real pod so
//!   made is held at its deletion until its last client closes, with no
//!   warning about the annotations injection wrote;
//! - a tenant's mount named graceful with no volume (which an added
//!   hostPath would have made a read-write mount of the gate directory)
//!   is refused as written; a volume of its own named graceful gets the
//!   httpGet gate;
//! - in a namespace enforcing restricted get the httpGet gate on the
//!   pod's graceful.dev/gate-port, and the API server admits them;
//! - labelled themselves, in a namespace not labelled (whose Pod Security
//!   the policy cannot know), get the httpGet gate; neither label:
//!   nothing changes.
//!
//! Most cases are server-side dry runs: the API server runs admission and
//! answers the pod as it would store it, and no pod starts.

use graceful_tests::cluster::{
    inject::{self, Injection},
    pod::Pod,
    pod_head, Cluster, Namespace, TEST_APP_IMAGE,
};
use serde_json::Value;

use crate::gate::{deleted_with_clients, events_of, held_until_the_last_close};

/// A pod of the test app: `extra` under its one container, `meta` under
/// its metadata, grace 10 s.
fn app(name: &str, meta: &str, extra: &str) -> String {
    format!(
        "{head}{meta}spec:\n  terminationGracePeriodSeconds: 10\n  containers:\n    - name: app\n      image: {TEST_APP_IMAGE}\n      ports: [{{containerPort: 8080}}, {{name: metrics, containerPort: 9090}}]\n{extra}",
        head = pod_head(name, &format!("{{app: {name}}}"))
    )
}

/// The pod as the API server would store it in `ns`.
fn as_stored(cluster: &Cluster, ns: &Namespace, yaml: &str) -> Result<Value, String> {
    inject::as_stored(cluster, &yaml.replace("NAMESPACE", &ns.name))
}

fn annotation<'a>(pod: &'a Value, key: &str) -> &'a str {
    pod["metadata"]["annotations"][key].as_str().unwrap_or("")
}

#[test]
fn a_labelled_namespace_gets_the_gate_that_fits_and_the_hook_holds() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "inject");
    let _injection = Injection::apply(&cluster, &ns);
    let pod = as_stored(&cluster, &ns, &app("plain", "", "")).unwrap();
    assert_eq!(annotation(&pod, "graceful.dev/injected"), "exec", "{pod}");
    let spec = &pod["spec"];
    let c = &spec["containers"][0];
    assert_eq!(
        c["lifecycle"]["preStop"]["exec"]["command"],
        serde_json::json!(["/graceful/graceful-wait", "--policy", "drained", "--max", "25s"]),
        "{pod}"
    );
    assert!(
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "graceful" && m["mountPath"] == "/graceful" && m["readOnly"] == true),
        "{c}"
    );
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "graceful")
        .unwrap_or_else(|| panic!("no graceful volume: {spec}"));
    assert_eq!(volume["hostPath"]["path"], "/var/run/graceful");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30, "25 s + the 5 s budget");
    assert_eq!(annotation(&pod, "graceful.dev/ignore-ports"), "9090");

    // A second container with a preStop of its own: left alone, named.
    let mixed = app(
        "mixed",
        "",
        "    - name: proxy\n      image: TEST_APP\n      lifecycle: {preStop: {exec: {command: [/bin/true]}}}\n"
            .replace("TEST_APP", TEST_APP_IMAGE)
            .as_str(),
    );
    let pod = as_stored(&cluster, &ns, &mixed).unwrap();
    assert_eq!(
        pod["spec"]["containers"][1]["lifecycle"]["preStop"]["exec"]["command"],
        serde_json::json!(["/bin/true"])
    );
    assert!(pod["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"].is_object());
    assert_eq!(
        annotation(&pod, "graceful.dev/inject-skipped"),
        "proxy: a preStop hook of its own, left as it is"
    );

    // A tenant's 200,000-byte prometheus.io/port: taken as no port, and
    // answered as fast as any pod.
    let long = format!(
        "  annotations: {{prometheus.io/port: \"{}\"}}\n",
        "9,".repeat(100_000)
    );
    let start = std::time::Instant::now();
    let pod = as_stored(&cluster, &ns, &app("long", &long, "")).unwrap();
    let took = start.elapsed();
    assert_eq!(annotation(&pod, "graceful.dev/injected"), "exec");
    assert_eq!(
        annotation(&pod, "graceful.dev/ignore-ports"),
        "9090",
        "the named port alone"
    );
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    eprintln!(
        "a 200,000-byte prometheus.io/port: injected and answered in {} ms",
        took.as_millis()
    );

    // A real pod, injected so, is held at its deletion until its clients
    // close (the settle and min as annotations, which win over the hook).
    ns.apply(&app(
        "held",
        "  annotations: {graceful.dev/settle: 200ms, graceful.dev/min: 0s}\n",
        "",
    ));
    let held = Pod::wait_ready(&ns, "app=held", 1, 60).remove(0);
    let (clients, mut log) = deleted_with_clients(&cluster, &ns, &held, "held");
    held_until_the_last_close(&ns, &held, clients, &mut log, "held", "an injected exec gate: ");
    let events = events_of(&ns, &held.uid);
    assert!(
        !events.iter().any(|(reason, _)| reason == "DrainMisconfigured"),
        "the annotations injection wrote were warned about: {events:?}"
    );

    // A tenant's mount named graceful, with no volume: an added hostPath
    // would make it a read-write mount of the gate directory. It gets
    // the httpGet gate, so no volume is added, and the pod is refused as
    // written. A volume of its own named graceful: the httpGet gate.
    let attack = app(
        "attack",
        "",
        "      volumeMounts: [{name: graceful, mountPath: /w}]\n",
    );
    let refused = as_stored(&cluster, &ns, &attack).expect_err("a mount of no volume was admitted");
    assert!(
        refused.contains("graceful") && refused.to_lowercase().contains("not found"),
        "{refused}"
    );
    let own = app(
        "own-volume",
        "",
        "      volumeMounts: [{name: graceful, mountPath: /data}]\n",
    ) + "  volumes: [{name: graceful, emptyDir: {}}]\n";
    let pod = as_stored(&cluster, &ns, &own).unwrap();
    assert_eq!(annotation(&pod, "graceful.dev/injected"), "http", "{pod}");
    eprintln!(
        "a tenant's mount of the gate's volume name: refused ({})",
        refused.trim()
    );

    // Pod Security restricted: the httpGet gate on the pod's own gate
    // port, admitted; a prometheus.io/port of 0 is no port.
    let restricted = Namespace::create(&cluster, "inject-restricted");
    restricted.kubectl(&[
        "label",
        "namespace",
        &restricted.name,
        "graceful.dev/inject=enabled",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    let secure = "      securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 65534, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}\n";
    let port = "  annotations: {graceful.dev/gate-port: \" 09800\", prometheus.io/port: \"0\"}\n";
    let pod = as_stored(&cluster, &restricted, &app("web", port, secure))
        .unwrap_or_else(|e| panic!("refused: {e}"));
    assert_eq!(
        annotation(&pod, "graceful.dev/ignore-ports"),
        "9090",
        "port 0 is no port"
    );
    assert_eq!(annotation(&pod, "graceful.dev/injected"), "http", "{pod}");
    assert_eq!(annotation(&pod, "graceful.dev/gate"), "http");
    let get = &pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"];
    assert_eq!(get["path"], "/drain?policy=drained&max=25s", "{pod}");
    assert_eq!(get["port"], 9800, "the pod's gate port");
    assert!(
        !pod["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["hostPath"].is_object()),
        "{pod}"
    );

    // The pod's own label, in a namespace not labelled; and neither.
    let other = Namespace::create(&cluster, "inject-none");
    let labelled = app("own", "", "").replace(
        "labels: {app: own}",
        "labels: {app: own, graceful.dev/inject: enabled}",
    );
    let pod = as_stored(&cluster, &other, &labelled).unwrap();
    assert_eq!(annotation(&pod, "graceful.dev/injected"), "http", "{pod}");
    let pod = as_stored(&cluster, &other, &app("mine", "", "")).unwrap();
    assert!(
        pod["metadata"]["annotations"]
            .get("graceful.dev/injected")
            .is_none(),
        "{pod}"
    );
    assert!(pod["spec"]["containers"][0].get("lifecycle").is_none(), "{pod}");
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 10);

    // `kubectl graceful adopt`, for clusters without the policy, makes
    // the same change to a workload's template as the policy to a pod.
    let restricted_port = app("web", port, secure);
    let cases: [(&Namespace, &str); 4] = [
        (&ns, &app("plain", "", "")),
        (&ns, &mixed),
        (&ns, &own),
        (&restricted, &restricted_port),
    ];
    for (at, pod_yaml) in cases {
        adopt_agrees(&cluster, at, pod_yaml);
    }
}

/// What the gate is made of, in a pod or a template: graceful's
/// annotations, each container's preStop and gate mount, the gate's
/// volume, the grace period.
fn gate_fields(t: &Value) -> Value {
    let ours = |v: &Value| -> Value {
        let m = v.as_object().into_iter().flatten();
        Value::Object(
            m.filter(|(k, _)| k.starts_with("graceful.dev/"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    };
    let graceful = |list: &Value| -> Vec<Value> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["name"] == "graceful")
            .cloned()
            .collect()
    };
    let containers: Vec<Value> = t["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| serde_json::json!({"name": c["name"], "preStop": c["lifecycle"]["preStop"], "mounts": graceful(&c["volumeMounts"])}))
        .collect();
    serde_json::json!({
        "annotations": ours(&t["metadata"]["annotations"]),
        "containers": containers,
        "volumes": graceful(&t["spec"]["volumes"]),
        "grace": t["spec"]["terminationGracePeriodSeconds"],
    })
}

/// A Deployment (no replica) of `pod_yaml`'s template in `ns`, adopted
/// with `--dry-run`: its template's gate is the pod's as the policy made it.
fn adopt_agrees(cluster: &Cluster, ns: &Namespace, pod_yaml: &str) {
    let policy = as_stored(cluster, ns, pod_yaml).unwrap();
    let name = policy["metadata"]["name"].as_str().unwrap().to_string();
    // The pod's metadata (less its name and namespace) and spec, as the template.
    let template: String = pod_yaml
        .lines()
        .skip_while(|l| !l.starts_with("metadata:"))
        .filter(|l| !l.starts_with("  name:") && !l.starts_with("  namespace:"))
        .map(|l| format!("    {l}\n"))
        .collect();
    ns.apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: NAMESPACE}}\nspec:\n  replicas: 0\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n{template}"
    ));
    let workload = format!("deploy/{name}");
    let adopt = |force: &[&str]| {
        let args = [
            &["adopt", &workload, "-n", &ns.name, "--dry-run", "-o", "json"],
            force,
        ]
        .concat();
        crate::kubectl_plugin::kubectl_graceful(cluster, None, &args)
    };
    // The manifest set the grace period (10 s, kubectl apply's field):
    // raising it is refused, in one line, until the team says so.
    let (code, _, err) = adopt(&[]);
    assert_eq!((code, err.trim().lines().count()), (1, 1), "{err}");
    assert!(
        err.contains("terminationGracePeriodSeconds") && err.contains("--force-conflicts"),
        "{err}"
    );
    let (code, out, err) = adopt(&["--force-conflicts"]);
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let adopted = &answer[0]["template"];
    assert_eq!(
        gate_fields(adopted),
        gate_fields(&policy),
        "{name}: adopt and the policy differ"
    );
    // A dry run: the stored template is as written.
    let stored = ns.json(&["get", "deployment", &name]);
    assert!(
        gate_fields(&stored["spec"]["template"])["containers"][0]["preStop"].is_null(),
        "{stored}"
    );
    eprintln!("adopt {name}: {}", answer[0]["result"]);
}
