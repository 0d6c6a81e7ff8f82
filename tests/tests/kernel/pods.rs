//! Pods resolved from real cgroup trees in every kubelet layout, with peers
//! holding real connections inside, checked through the `graceful` binary:
//! `graceful pods -o json` must give each pod's exact uid, QoS class,
//! containers (ids, cgroup ids) and counts, a pod's being the sum over its
//! pod cgroup, its containers and its overhead.
//!
//! The trees sit under roots of their own (`/graceful-test-pods-<pid>/...`,
//! and a kind-style `/graceful-test-kind-<pid>/kubelet.slice/...`), which
//! also makes every layout a nested one.

use std::collections::{BTreeMap, HashMap};

use graceful_tests::{
    agent::{graceful, Agent},
    cgroup::Cgroup,
    oracle::{self, View},
    peer::Peer,
};
use serde_json::{json, Value};

use crate::require_root;

fn uid(n: u32) -> String {
    format!("{:08x}-{n:04x}-4000-8000-{:012x}", std::process::id(), n)
}

/// Distinct in their first 12 characters, as the short ids in tables are.
fn cid(n: u32) -> String {
    format!("{n:04x}{:08x}{n:052x}", std::process::id())
}

/// Cgroups removed deepest first (the reverse of creation), peers in them,
/// and what the test expects each cgroup to hold.
#[derive(Default)]
struct World {
    cgroups: Vec<Cgroup>,
    by_path: HashMap<String, usize>,
    peers: HashMap<String, Peer>,
    want: BTreeMap<String, View>,
}

impl World {
    fn cg(&mut self, path: &str) -> &Cgroup {
        if !self.by_path.contains_key(path) {
            self.by_path.insert(path.to_string(), self.cgroups.len());
            self.cgroups.push(Cgroup::create(path));
            self.want.insert(path.to_string(), View::default());
        }
        &self.cgroups[self.by_path[path]]
    }

    fn id(&mut self, path: &str) -> u64 {
        self.cg(path).id()
    }

    fn peer(&mut self, path: &str) -> &mut Peer {
        if !self.peers.contains_key(path) {
            let p = Peer::spawn(self.cg(path), None);
            self.peers.insert(path.to_string(), p);
        }
        self.peers.get_mut(path).unwrap()
    }

    /// A listener in `path`, holding what it accepts; returns its port.
    fn listen(&mut self, path: &str) -> u16 {
        let port = self.peer(path).listen("127.0.0.1:0", "hold");
        self.want.get_mut(path).unwrap().listeners += 1;
        port
    }

    /// `n` connections from `from` to the listener of `to` on `port`.
    fn connect(&mut self, from: &str, to: &str, port: u16, n: u64) {
        self.peer(from).connect(&format!("127.0.0.1:{port}"), n as usize);
        self.want.get_mut(from).unwrap().outbound_live += n;
        self.want.get_mut(to).unwrap().inbound_live += n;
    }

    fn sum(&self, paths: &[&str]) -> View {
        paths.iter().fold(View::default(), |acc, p| acc + self.want[*p])
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.peers.clear();
        while let Some(cg) = self.cgroups.pop() {
            drop(cg);
        }
    }
}

/// One pod the test builds: where its cgroups are and what they are.
struct TestPod {
    uid: String,
    qos: &'static str,
    dir: String,
    /// (id, runtime, own cgroup, every cgroup of the container).
    containers: Vec<(String, &'static str, String, Vec<String>)>,
    /// Pod overhead (CRI-O's conmon).
    overhead: Vec<String>,
}

impl TestPod {
    fn new(uid: String, qos: &'static str, dir: String) -> Self {
        Self {
            uid,
            qos,
            dir,
            containers: Vec::new(),
            overhead: Vec::new(),
        }
    }

    /// Adds a container whose cgroup is `<dir>/<name>`; returns its path.
    fn container(&mut self, id: String, runtime: &'static str, name: &str) -> String {
        let path = format!("{}/{name}", self.dir);
        self.containers
            .push((id, runtime, path.clone(), vec![path.clone()]));
        path
    }

    /// What `graceful pods -o json` must say about this pod.
    fn expected(&self, w: &mut World) -> Value {
        let mut all = vec![self.dir.clone()];
        all.extend(self.overhead.iter().cloned());
        let mut ctrs = self.containers.clone();
        ctrs.sort_by(|a, b| a.0.cmp(&b.0));
        let containers: Vec<Value> = ctrs
            .iter()
            .map(|(id, runtime, own, cgroups)| {
                all.extend(cgroups.iter().cloned());
                let v = w.sum(&cgroups.iter().map(String::as_str).collect::<Vec<_>>());
                json!({
                    "id": id, "name": null, "runtime": runtime, "cgroup_id": w.id(own), "path": own,
                    "inbound_live": v.inbound_live, "outbound_live": v.outbound_live, "listeners": v.listeners,
                })
            })
            .collect();
        let v = w.sum(&all.iter().map(String::as_str).collect::<Vec<_>>());
        json!({
            "uid": self.uid, "namespace": null, "name": null, "qos": self.qos, "state": "Running",
            "cgroup_id": w.id(&self.dir), "path": self.dir,
            "inbound_live": v.inbound_live, "outbound_live": v.outbound_live, "listeners": v.listeners,
            "containers": containers,
        })
    }
}

/// The fields of the contract (and the cgroup ids and paths), nothing else.
fn project(p: &Value) -> Value {
    let pick = |v: &Value, keys: &[&str]| -> Value {
        keys.iter()
            .map(|k| (k.to_string(), v[*k].clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let mut out = pick(
        p,
        &[
            "uid",
            "namespace",
            "name",
            "qos",
            "state",
            "cgroup_id",
            "path",
            "inbound_live",
            "outbound_live",
            "listeners",
        ],
    );
    out["containers"] = p["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            pick(
                c,
                &[
                    "id",
                    "name",
                    "runtime",
                    "cgroup_id",
                    "path",
                    "inbound_live",
                    "outbound_live",
                    "listeners",
                ],
            )
        })
        .collect();
    out
}

fn pods_json(agent: &Agent, args: &[&str]) -> Vec<Value> {
    let out = graceful(&agent.pin_dir, args);
    assert!(
        out.status.success(),
        "graceful {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(a) => a,
        v => vec![v],
    }
}

fn stdout(agent: &Agent, args: &[&str]) -> String {
    let out = graceful(&agent.pin_dir, args);
    assert!(
        out.status.success(),
        "graceful {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds one pod in every layout: systemd and cgroupfs drivers, the three
/// QoS classes, containerd, CRI-O (conmon, nested `container` child) and
/// docker scopes, a process directly in a pod cgroup, a kind-style root.
fn build(w: &mut World) -> Vec<TestPod> {
    let pid = std::process::id();
    let root = format!("/graceful-test-pods-{pid}");
    let kind = format!("/graceful-test-kind-{pid}/kubelet.slice/kubelet-kubepods.slice");
    let us = |u: &str| u.replace('-', "_");
    let (u1, u2, u3, u4, u5, u6, u7) = (uid(1), uid(2), uid(3), uid(4), uid(5), uid(6), uid(7));
    let mut p1 = TestPod::new(
        u1.clone(),
        "guaranteed",
        format!("{root}/kubepods.slice/kubepods-pod{}.slice", us(&u1)),
    );
    let mut p2 = TestPod::new(
        u2.clone(),
        "burstable",
        format!(
            "{root}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            us(&u2)
        ),
    );
    let mut p3 = TestPod::new(
        u3.clone(),
        "besteffort",
        format!(
            "{root}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
            us(&u3)
        ),
    );
    let mut p4 = TestPod::new(u4.clone(), "guaranteed", format!("{root}/kubepods/pod{u4}"));
    let mut p5 = TestPod::new(
        u5.clone(),
        "burstable",
        format!("{root}/kubepods/burstable/pod{u5}"),
    );
    let mut p6 = TestPod::new(
        u6.clone(),
        "besteffort",
        format!("{root}/kubepods/besteffort/pod{u6}"),
    );
    let mut p7 = TestPod::new(
        u7.clone(),
        "burstable",
        format!(
            "{kind}/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{}.slice",
            us(&u7)
        ),
    );

    // The cgroups, parents first.
    for p in [&p1, &p2, &p3, &p4, &p5, &p6, &p7] {
        w.cg(&p.dir);
    }
    let p1_pause = p1.container(
        cid(10),
        "containerd",
        &format!("cri-containerd-{}.scope", cid(10)),
    );
    let p1_app = p1.container(
        cid(11),
        "containerd",
        &format!("cri-containerd-{}.scope", cid(11)),
    );
    // CRI-O: conmon beside the container, the processes in a nested child.
    let conmon = format!("{}/crio-conmon-{}.scope", p2.dir, cid(20));
    p2.overhead.push(conmon.clone());
    let p2_scope = p2.container(cid(20), "cri-o", &format!("crio-{}.scope", cid(20)));
    let p2_inner = format!("{p2_scope}/container");
    p2.containers[0].3.push(p2_inner.clone());
    let p3_app = p3.container(cid(30), "docker", &format!("docker-{}.scope", cid(30)));
    // cgroupfs: containerd and docker name the directory by the bare id.
    let p4_app = p4.container(cid(40), "unknown", &cid(40));
    let p5_app = p5.container(cid(50), "cri-o", &format!("crio-{}", cid(50)));
    let p6_app = p6.container(cid(60), "unknown", &cid(60));
    let p7_pause = p7.container(
        cid(70),
        "containerd",
        &format!("cri-containerd-{}.scope", cid(70)),
    );
    let p7_app = p7.container(
        cid(71),
        "containerd",
        &format!("cri-containerd-{}.scope", cid(71)),
    );
    for path in [
        &p1_pause, &p1_app, &conmon, &p2_scope, &p2_inner, &p3_app, &p4_app, &p5_app, &p6_app, &p7_pause,
        &p7_app,
    ] {
        w.cg(path);
    }
    // A pause process in each pause container; they hold nothing.
    w.peer(&p1_pause);
    w.peer(&p7_pause);

    // Servers: one directly in P1's pod cgroup, one in P1's app, one in
    // CRI-O's nested child, and an idle listener in P4.
    let s0 = w.listen(&p1.dir.clone());
    let s1 = w.listen(&p1_app);
    let s2 = w.listen(&p2_inner);
    w.listen(&p4_app);
    // Clients, from other pods' containers and P2's conmon.
    let (d0, d1) = (p1.dir.clone(), p1_app.clone());
    w.connect(&conmon, &d1, s1, 1);
    w.connect(&p3_app, &d1, s1, 3);
    w.connect(&p3_app, &p2_inner, s2, 2);
    w.connect(&p4_app, &d1, s1, 4);
    w.connect(&p5_app, &p2_inner, s2, 5);
    w.connect(&p5_app, &d0, s0, 1);
    w.connect(&p6_app, &d1, s1, 2);
    w.connect(&p7_app, &p2_inner, s2, 1);
    w.connect(&p7_app, &d0, s0, 2);
    vec![p1, p2, p3, p4, p5, p6, p7]
}

#[test]
fn every_layout_resolves_to_its_pod_with_exact_counts() {
    require_root!();
    let mut agent = Agent::started();
    let mut w = World::default();
    let pods = build(&mut w);

    // The test's expectations are what the kernel sees.
    let paths: Vec<String> = w.want.keys().cloned().collect();
    for p in &paths {
        let want = w.want[p];
        graceful_tests::wait_for(10, &format!("ss to show {want:?} in {p}"), || {
            (oracle::view(None, p) == want).then_some(())
        });
    }
    let expected: Vec<Value> = pods.iter().map(|p| p.expected(&mut w)).collect();
    // Totals as designed: P1 serves 13 (3 on its pod cgroup, 10 in its app).
    assert_eq!(
        (
            expected[0]["inbound_live"].as_u64(),
            expected[0]["listeners"].as_u64()
        ),
        (Some(13), Some(2))
    );
    assert_eq!(
        expected[1]["outbound_live"], 1,
        "conmon's connection is the pod's"
    );
    assert_eq!(
        expected[1]["containers"][0]["inbound_live"], 8,
        "counted in the nested child"
    );

    let ours = |all: Vec<Value>| -> Vec<Value> {
        let mut v: Vec<Value> = all
            .iter()
            .filter(|p| pods.iter().any(|t| p["uid"] == t.uid.as_str()))
            .map(project)
            .collect();
        v.sort_by_key(|p| p["uid"].as_str().unwrap().to_string());
        v
    };
    let mut got = Vec::new();
    for _ in 0..500 {
        got = ours(pods_json(&agent, &["pods", "-o", "json"]));
        if got == expected {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        got,
        expected,
        "graceful pods -o json\ngot:  {}\nwant: {}\nagent log:\n{}",
        serde_json::to_string_pretty(&got).unwrap(),
        serde_json::to_string_pretty(&expected).unwrap(),
        agent.log_text()
    );

    // `graceful pod` by uid prefix, as JSON and as a table.
    let one = pods_json(&agent, &["pod", &pods[1].uid[..13], "-o", "json"]);
    assert_eq!(project(&one[0]), expected[1]);
    let table = stdout(&agent, &["pod", &pods[0].uid]);
    let row = |first: &str| -> Vec<String> {
        let l = table
            .lines()
            .find(|l| l.starts_with(first))
            .unwrap_or_else(|| panic!("{first}: {table}"));
        l.split_whitespace().map(String::from).collect()
    };
    // The pod row is what no container holds: the listener in the pod cgroup.
    assert_eq!(
        row("(pod)")[3..7],
        [w.id(&pods[0].dir).to_string(), "3".into(), "0".into(), "1".into()]
    );
    assert_eq!(
        row(&cid(11)[..12])[2..7],
        [
            "containerd",
            &w.id(&pods[0].containers[1].2).to_string(),
            "10",
            "0",
            "1"
        ]
    );
    assert!(
        table.contains("Connections: 13 inbound, 0 outbound, 2 listening"),
        "{table}"
    );

    // The table: the uid stands in for the name; -n matches nothing while
    // names are unknown; wide adds the QoS class and the pod cgroup.
    let t = stdout(&agent, &["pods"]);
    assert!(t.starts_with("NAMESPACE"), "{t}");
    let line: Vec<&str> = t
        .lines()
        .find(|l| l.contains(&pods[0].uid))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(line, ["-", pods[0].uid.as_str(), "2", "13", "0", "2", "Running"]);
    assert!(pods_json(&agent, &["pods", "-o", "json", "-n", "default"]).is_empty());
    let wide = stdout(&agent, &["pods", "-o", "wide", "-A"]);
    let line = wide.lines().find(|l| l.contains(&pods[6].uid)).unwrap();
    assert!(
        line.contains("burstable") && line.contains(&pods[6].dir),
        "{line}"
    );

    // The daemon answered all of the above; with it stopped, the CLI falls
    // back to the pins and the tree, says so, and shows the same counts.
    let answered = graceful(&agent.pin_dir, &["pods", "-o", "json"]);
    assert!(
        answered.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    agent.stop();
    let fallback = graceful(&agent.pin_dir, &["pods", "-o", "json"]);
    let note = String::from_utf8_lossy(&fallback.stderr);
    assert!(
        note.contains("no graceful daemon answers on") && note.lines().count() == 1,
        "{note}"
    );
    assert_eq!(ours(serde_json::from_slice(&fallback.stdout).unwrap()), expected);

    // Everything closed: every pod back to zero.
    w.peers.clear();
    graceful_tests::wait_for(10, "pods to drop to zero", || {
        ours(pods_json(&agent, &["pods", "-o", "json"]))
            .iter()
            .all(|p| p["inbound_live"] == 0 && p["outbound_live"] == 0 && p["listeners"] == 0)
            .then_some(())
    });
}

#[test]
fn unknown_pods_and_names_fail_with_one_line() {
    require_root!();
    let agent = Agent::started();
    for (arg, says) in [
        ("ffffffff-ffff-4fff-8fff-ffffffffffff", "no pod with uid"),
        ("shop/web-0", "names need the Kubernetes API"),
    ] {
        let out = graceful(&agent.pin_dir, &["pod", arg]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
        assert!(out.stdout.is_empty());
    }
}
