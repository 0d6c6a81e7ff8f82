//! The httpGet gate in an Istio sidecar on the node, with Istio's own
//! programs where they build here: the capture rules written by the real
//! `istio-iptables` in the pod's namespace (as istio-cni writes them), the
//! rewritten preStop relayed by the real pilot-agent from 127.0.0.6.
//! Envoy cannot be built here: the stand-in plays its inbound passthrough
//! (tests/overlays/istio-sidecar). The hook asks for min=3s, so a hook the
//! gate holds shows as the app's SIGTERM 3 s after the deletion at least.
//!
//! Four pods, deleted together:
//! - as the injector leaves it by default (classic sidecar, hook rewritten
//!   to pilot-agent): warned of before the deletion (`HttpGateMeshed`),
//!   since the sidecar is stopped at the deletion and cuts what it relays;
//! - istio-proxy as a native sidecar (Istio's ENABLE_NATIVE_SIDECARS): the
//!   hook relayed by pilot-agent is held;
//! - native, the gate's port excluded and the rewrite off: the kubelet
//!   calls the gate itself: held (with the rewrite off and the port
//!   captured, Envoy would pass the hook through its inbound port, where
//!   the drain counts it as traffic: warned of, see kube::mesh);
//! - a mesh the agent cannot see (the injector's annotation and container
//!   name gone): the relayed hook is the pod itself, 403: SIGTERM at once,
//!   as before this agent knew meshes.

use std::time::Duration;

use graceful_tests::cluster::{pod::Pod, Cluster, Namespace};
use serde_json::{json, Value};

use crate::{
    examples::apply_into,
    gate::{events_by, events_of},
};

/// A variant of tests/overlays/istio-sidecar: its name, and how its
/// Deployment differs.
struct Variant {
    name: &'static str,
    edit: fn(&mut Value),
}

fn native(d: &mut Value) {
    let spec = &mut d["spec"]["template"]["spec"];
    let mut proxy = spec["containers"].as_array_mut().unwrap().remove(1);
    proxy["restartPolicy"] = json!("Always");
    spec["initContainers"] = json!([proxy]);
}

fn native_direct(d: &mut Value) {
    native(d);
    let t = &mut d["spec"]["template"];
    t["metadata"]["annotations"]["sidecar.istio.io/rewriteAppHTTPProbers"] = json!("false");
    t["metadata"]["annotations"]["traffic.sidecar.istio.io/excludeInboundPorts"] = json!("9711");
    t["spec"]["containers"][0]["lifecycle"]["preStop"] =
        json!({"httpGet": {"path": "/drain?policy=drained&min=3s&max=25s", "port": 9711}});
}

fn unseen(d: &mut Value) {
    let t = &mut d["spec"]["template"];
    t["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("sidecar.istio.io/status");
    t["spec"]["containers"][1]["name"] = json!("proxy");
}

const VARIANTS: [Variant; 4] = [
    Variant {
        name: "classic",
        edit: |_| {},
    },
    Variant {
        name: "native",
        edit: native,
    },
    Variant {
        name: "native-direct",
        edit: native_direct,
    },
    Variant {
        name: "unseen",
        edit: unseen,
    },
];

/// Istio's capture, by the real istio-iptables, run in the pod's network
/// namespace (inside it: its `--network-namespace` flag is for istio-cni's
/// mode, and without it the rules land in the caller's namespace).
fn capture(pod: &Pod, exclude: &str) {
    pod.netns().exec(
        "pilot-agent",
        &[
            "istio-iptables",
            "-p",
            "15001",
            "-z",
            "15006",
            "-u",
            "1337",
            "-m",
            "REDIRECT",
            "-i",
            "*",
            "-x",
            "",
            "-b",
            "*",
            "-d",
            exclude,
        ],
    );
    let rules = pod.netns().exec("iptables-nft-save", &["-t", "nat"]);
    assert!(
        rules.contains("-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006"),
        "{rules}"
    );
}

/// pilot-agent's certificates (it reads them from files: no istiod).
fn certs(cluster: &Cluster, ns: &Namespace) {
    let dir = std::env::temp_dir().join(graceful_tests::unique("istio-certs"));
    std::fs::create_dir_all(&dir).unwrap();
    let ok = std::process::Command::new("openssl")
        .current_dir(&dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert-chain.pem",
            "-days",
            "2",
            "-subj",
            "/O=graceful-test",
        ])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    std::fs::copy(dir.join("cert-chain.pem"), dir.join("root-cert.pem")).unwrap();
    let from = |f: &str| format!("--from-file={f}={}", dir.join(f).display());
    cluster.kubectl(&[
        "-n",
        &ns.name,
        "create",
        "secret",
        "generic",
        "istio-certs",
        &from("cert-chain.pem"),
        &from("key.pem"),
        &from("root-cert.pem"),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deletes each pod (one in each namespace) at once; seconds from then to
/// each app's exit, watched at once, since they stop in any order. The
/// kubelet's Events follow within the second waited after.
fn delete_together(spaces: &[Namespace], pods: &[Pod]) -> Vec<f64> {
    let deleted = std::time::Instant::now();
    for (ns, p) in spaces.iter().zip(pods) {
        ns.kubectl(&["delete", "pod", &p.name, "--wait=false"]);
    }
    let exits = std::thread::scope(|t| {
        let watchers: Vec<_> = pods
            .iter()
            .map(|p| {
                t.spawn(move || {
                    p.wait_exit("web", Duration::from_secs(60))
                        .expect("the app exited")
                })
            })
            .collect();
        watchers
            .into_iter()
            .map(|w| w.join().unwrap().duration_since(deleted).as_secs_f64())
            .collect()
    });
    std::thread::sleep(Duration::from_secs(1));
    exits
}

struct Outcome {
    name: &'static str,
    exit_s: f64,
    kubelet: Vec<(String, String)>,
    graceful: Vec<(String, String)>,
}

impl Outcome {
    fn has(&self, reason: &str) -> bool {
        self.kubelet
            .iter()
            .chain(&self.graceful)
            .any(|(r, _)| r == reason)
    }
}

#[test]
fn istio_sidecar_with_its_own_iptables_and_pilot_agent_each_form_of_the_hook() {
    let (cluster, _serial) = crate::node();
    let spaces: Vec<Namespace> = VARIANTS
        .iter()
        .map(|v| Namespace::create(&cluster, v.name))
        .collect();
    for (v, ns) in VARIANTS.iter().zip(&spaces) {
        certs(&cluster, ns);
        apply_into(&cluster, ns, "istio-sidecar", |o| {
            if o["kind"] == "Deployment" {
                (v.edit)(o)
            }
        });
    }
    let pods: Vec<Pod> = spaces
        .iter()
        .map(|ns| Pod::wait_ready(ns, "app.kubernetes.io/name=web", 1, 120).remove(0))
        .collect();
    for (v, p) in VARIANTS.iter().zip(&pods) {
        // The injector's annotation joins the exclusions, as istio-cni reads it.
        let exclude = if v.name == "native-direct" {
            "15090,15021,15020,9711"
        } else {
            "15090,15021,15020"
        };
        capture(p, exclude);
    }
    // Before any deletion: the classic sidecar is said to relay the hook.
    let warned = graceful_tests::wait_for(20, "the HttpGateMeshed Event", || {
        events_of(&spaces[0], &pods[0].uid)
            .into_iter()
            .find(|(r, _)| r == "HttpGateMeshed")
    });
    assert!(
        warned
            .1
            .contains("traffic.sidecar.istio.io/excludeInboundPorts: \"9711\""),
        "{warned:?}"
    );
    for (ns, p) in spaces.iter().zip(&pods).skip(1) {
        assert!(
            !events_of(ns, &p.uid).iter().any(|(r, _)| r == "HttpGateMeshed"),
            "{}: warned",
            ns.name
        );
    }

    let exits = delete_together(&spaces, &pods);
    let outcomes: Vec<Outcome> = VARIANTS
        .iter()
        .zip(spaces.iter().zip(&pods))
        .zip(exits)
        .map(|((v, (ns, p)), exit_s)| Outcome {
            name: v.name,
            exit_s,
            kubelet: events_by(ns, &p.uid, "kubelet"),
            graceful: events_of(ns, &p.uid),
        })
        .collect();
    eprintln!("    {:<14} {:>9}  EVENTS", "ISTIO SIDECAR", "APP TERM");
    for o in &outcomes {
        let reasons: Vec<&str> = o
            .kubelet
            .iter()
            .chain(&o.graceful)
            .map(|(r, _)| r.as_str())
            .filter(|r| {
                ![
                    "Scheduled",
                    "Pulled",
                    "Created",
                    "Started",
                    "Killing",
                    "MissingClusterDNS",
                ]
                .contains(r)
            })
            .collect();
        eprintln!("    {:<14} {:>7.2} s  {}", o.name, o.exit_s, reasons.join(", "));
    }
    let by = |n: &str| outcomes.iter().find(|o| o.name == n).unwrap();
    for held in ["native", "native-direct"] {
        let o = by(held);
        assert!(
            o.has("DrainReleased") && !o.has("FailedPreStopHook"),
            "{held}: {:?}",
            o.graceful
        );
        assert!(
            o.exit_s >= 3.0,
            "{held}: SIGTERM {:.2} s after the deletion",
            o.exit_s
        );
    }
    let unseen = by("unseen");
    assert!(!unseen.has("DrainReleased"), "{:?}", unseen.graceful);
    assert!(unseen.exit_s < 3.0, "unseen: {:.2} s", unseen.exit_s);
    // The classic sidecar stopped at the deletion and cut the hook it
    // relayed: the kubelet's hook failed and the app got SIGTERM at once,
    // as the warning said.
    let classic = by("classic");
    assert!(classic.has("FailedPreStopHook"), "{:?}", classic.kubelet);
    assert!(classic.exit_s < 3.0, "classic: {:.2} s", classic.exit_s);
}

/// istio-cni's rule for ambient pods, in the node's namespace: the node's
/// connections to `pod_ip` leave from 169.254.7.127. Removed on drop.
struct AmbientSnat {
    rule: Vec<String>,
}

impl AmbientSnat {
    fn add(pod_ip: &str) -> AmbientSnat {
        let rule = graceful_tests::mesh::ambient_snat_rule(pod_ip);
        node_iptables("-I", &rule);
        AmbientSnat { rule }
    }
}

impl Drop for AmbientSnat {
    fn drop(&mut self) {
        node_iptables("-D", &self.rule);
    }
}

fn node_iptables(op: &str, rule: &[String]) {
    let net = format!("--net={}", graceful_tests::cluster::NODE_NETNS);
    let mut args = vec![net.as_str(), "iptables", "-w", "-t", "nat", op];
    args.extend(rule.iter().map(String::as_str));
    let out = std::process::Command::new("nsenter")
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "iptables {op}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Istio ambient mode, as the kubelet meets it: its hook to the gate SNATed
/// to 169.254.7.127 by istio-cni's rule in the node's namespace. A pod
/// enrolled (`ambient.istio.io/redirection: enabled`, as istio-cni marks
/// it) is held; one that is not is refused, `403`, and gets its SIGTERM at
/// once, as every ambient pod did before the gate knew the address.
#[test]
fn istio_ambient_the_kubelets_hook_from_169_254_7_127_is_held_for_an_enrolled_pod() {
    let (cluster, _serial) = crate::node();
    let ways = [("enrolled", true), ("unenrolled", false)];
    let spaces: Vec<Namespace> = ways.iter().map(|(n, _)| Namespace::create(&cluster, n)).collect();
    for ((_, enrolled), ns) in ways.iter().zip(&spaces) {
        apply_into(&cluster, ns, "web-http-gate", |o| {
            if o["kind"] == "Deployment" {
                o["spec"]["replicas"] = json!(1);
                let t = &mut o["spec"]["template"];
                if *enrolled {
                    t["metadata"]["annotations"]["ambient.istio.io/redirection"] = json!("enabled");
                }
                t["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"] =
                    json!("/drain?policy=drained&min=3s&max=25s");
            }
        });
    }
    let pods: Vec<Pod> = spaces
        .iter()
        .map(|ns| Pod::wait_ready(ns, "app.kubernetes.io/name=web", 1, 120).remove(0))
        .collect();
    let _snat: Vec<AmbientSnat> = spaces
        .iter()
        .zip(&pods)
        .map(|(ns, p)| {
            let ip = ns.json(&["get", "pod", &p.name])["status"]["podIP"]
                .as_str()
                .expect("the pod's IP")
                .to_string();
            AmbientSnat::add(&ip)
        })
        .collect();
    let exits = delete_together(&spaces, &pods);
    for (((name, _), exit_s), (ns, p)) in ways.iter().zip(&exits).zip(spaces.iter().zip(&pods)) {
        let ev: Vec<String> = events_of(ns, &p.uid).into_iter().map(|(r, _)| r).collect();
        eprintln!(
            "    ambient, {name:<10} the app's SIGTERM {exit_s:.2} s after the deletion; {}",
            ev.join(", ")
        );
    }
    let released = |i: usize| {
        events_of(&spaces[i], &pods[i].uid)
            .iter()
            .any(|(r, _)| r == "DrainReleased")
    };
    assert!(released(0) && exits[0] >= 3.0, "enrolled: {:.2} s", exits[0]);
    assert!(!released(1) && exits[1] < 3.0, "unenrolled: {:.2} s", exits[1]);
}

/// Linkerd, on the node: proxy-init's rules (written as it writes them: it
/// cannot be had here) in each pod's namespace, and the stand-in as
/// linkerd-proxy, connecting to the original destination without binding,
/// from the pod's own address. The hook asks for min 3 s, max 6 s. Three
/// pods deleted together:
/// - classic proxy: it stops at the deletion and cuts the relayed hook;
/// - native proxy: the relayed hook comes through its inbound port 4143,
///   where the drain counts it with the app's traffic: to the deadline;
/// - `skip-inbound-ports` the gate's port: the kubelet calls the gate
///   directly, held and released.
///
/// The first two are warned of before the deletion (`HttpGateMeshed`).
#[test]
fn linkerd_each_form_of_the_proxy_and_the_port_skipped() {
    let (cluster, _serial) = crate::node();
    let ways = ["classic", "native", "skipped"];
    let spaces: Vec<Namespace> = ways.iter().map(|n| Namespace::create(&cluster, n)).collect();
    for (way, ns) in ways.iter().zip(&spaces) {
        apply_into(&cluster, ns, "web-http-gate", |o| {
            if o["kind"] != "Deployment" {
                return;
            }
            o["spec"]["replicas"] = json!(1);
            let t = &mut o["spec"]["template"];
            let a = &mut t["metadata"]["annotations"];
            a["linkerd.io/proxy-version"] = json!("stand-in");
            if *way == "skipped" {
                a["config.linkerd.io/skip-inbound-ports"] = json!("9711");
            }
            t["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"] =
                json!("/drain?policy=drained&min=3s&max=6s");
            let mut proxy = json!({
                "name": "linkerd-proxy",
                "image": "localhost/stand-in/mesh-proxy:0.1.0",
                "args": ["--passthrough", "0.0.0.0:4143=-"],
                "securityContext": {"runAsUser": 2102},
            });
            if *way == "native" {
                proxy["restartPolicy"] = json!("Always");
                t["spec"]["initContainers"] = json!([proxy]);
            } else {
                t["spec"]["containers"].as_array_mut().unwrap().push(proxy);
            }
        });
    }
    let pods: Vec<Pod> = spaces
        .iter()
        .map(|ns| Pod::wait_ready(ns, "app.kubernetes.io/name=web", 1, 120).remove(0))
        .collect();
    for (way, p) in ways.iter().zip(&pods) {
        graceful_tests::mesh::linkerd_capture(&p.netns(), if *way == "skipped" { "9711" } else { "" });
    }
    let warned = |i: usize| {
        events_of(&spaces[i], &pods[i].uid)
            .iter()
            .any(|(r, _)| r == "HttpGateMeshed")
    };
    graceful_tests::wait_for(20, "the HttpGateMeshed Events", || {
        (warned(0) && warned(1)).then_some(())
    });
    assert!(!warned(2), "the skipped port was warned of");

    let exits = delete_together(&spaces, &pods);
    let reasons = |i: usize| -> Vec<String> {
        events_by(&spaces[i], &pods[i].uid, "kubelet")
            .into_iter()
            .chain(events_of(&spaces[i], &pods[i].uid))
            .map(|(r, _)| r)
            .filter(|r| {
                [
                    "FailedPreStopHook",
                    "DrainReleased",
                    "DrainDeadline",
                    "HttpGateMeshed",
                ]
                .contains(&r.as_str())
            })
            .collect()
    };
    for (i, way) in ways.iter().enumerate() {
        eprintln!(
            "    linkerd, {way:<8} the app's SIGTERM {:.2} s after the deletion; {}",
            exits[i],
            reasons(i).join(", ")
        );
    }
    assert!(
        reasons(0).contains(&"FailedPreStopHook".to_string()) && exits[0] < 3.0,
        "classic"
    );
    assert!(
        reasons(1).contains(&"DrainDeadline".to_string()) && exits[1] >= 6.0,
        "native"
    );
    assert!(
        reasons(2).contains(&"DrainReleased".to_string()) && exits[2] >= 3.0,
        "skipped"
    );
}
