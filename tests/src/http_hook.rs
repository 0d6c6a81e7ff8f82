//! The httpGet gate as the kubelet meets it: a pod object annotated
//! `graceful.dev/gate: http` for the fake API, the hook's `GET /drain`
//! sent from the node's namespace to the pod's address, and the agent's
//! listener looked for with `ss` inside the pod's namespace. The kernel
//! tests of the httpGet gate and the release-latency bench both use it.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use serde_json::Value;

use crate::{
    agent::Agent,
    cgroup::Cgroup,
    k8s::{
        fake_api::{FakeApi, Reply},
        fill, fixture, with_api,
    },
    netns::{NetNs, VethPair},
    peer::{addr, Peer},
    pod::SimPod,
};

/// The agent's default port for the gate.
pub const PORT: u16 = graceful::serve::httpgate::DEFAULT_PORT;

/// The recorded running pod (container "app", port 8080), as `pod`, with
/// these annotations.
pub fn pod_object(pod: &SimPod, annotations: Value) -> Value {
    let list: Value = serde_json::from_str(&fill(&fixture("terminating/pods-list.json"), pod, None)).unwrap();
    let mut item = list["items"][0].clone();
    item["metadata"]["annotations"] = annotations;
    declare_hooks(&mut item, TEST_HOOKS);
    item
}

/// The hooks the tests send, as the pods they send them to declare them:
/// the gate drains only for a pod's own `preStop: httpGet` hooks.
pub const TEST_HOOKS: &[&str] = &[
    "/drain?policy=drained&settle=100ms&min=0s&max=20s",
    "/drain?policy=drained&settle=100ms&min=0s&max=30s",
    "/drain?policy=drained&min=0s&max=10s",
    "/drain?policy=drained&settle=0s&min=0s&max=20s",
    "/drain?policy=drained&settle=0s&min=0s&max=3s",
    "/drain?policy=quiet&quiet=500ms&min=0s&max=20s",
    "/drain?policy=quiet&quiet=500ms&min=0s&max=3s",
    "/drain?container=app&ignore-ports=0&policy=drained&settle=0s&min=0s&max=3s",
    "/drain?max=soon",
    "/drain?polcy=quiet",
    "/drain?scope=container",
    "/drain?container=nope",
];

/// Declares each of `paths` as a `preStop: httpGet` hook to the gate's
/// port, one a container (init containers of the pod object: the agent
/// reads them as the API gives them, and no test runs them).
pub fn declare_hooks(item: &mut Value, paths: &[&str]) {
    let hooks: Vec<Value> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::json!({
                "name": format!("hook-{i}"), "image": "none",
                "lifecycle": {"preStop": {"httpGet": {"path": p, "port": PORT}}},
            })
        })
        .collect();
    item["spec"]["initContainers"] = Value::Array(hooks);
}

/// A PodList of `items`, for [`crate::k8s::fake_api::Reply::list`].
pub fn list(items: &[Value]) -> String {
    serde_json::json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "60000"},
        "items": items,
    })
    .to_string()
}

/// A watch line: `ADDED`, `MODIFIED` or `DELETED` of `pod`.
pub fn watch_line(kind: &str, pod: &Value) -> String {
    serde_json::json!({"type": kind, "object": pod}).to_string()
}

/// An HTTP response as read back: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// Sends `raw` (a whole request) to `to` from inside `from` and reads the
/// answer to its end (the gate closes after it, or `connection: close`).
pub fn send(from: &NetNs, to: SocketAddr, raw: &[u8], limit: Duration) -> std::io::Result<Answer> {
    from.run(|| {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
        s.set_read_timeout(Some(limit))?;
        s.write_all(raw)?;
        let mut out = Vec::new();
        s.read_to_end(&mut out)?;
        Ok(parse(&out))
    })
}

/// The kubelet's hook: `GET path` with `connection: close`.
pub fn get(from: &NetNs, to: SocketAddr, path: &str, limit: Duration) -> std::io::Result<Answer> {
    let raw = format!(
        "GET {path} HTTP/1.1\r\nhost: {to}\r\nuser-agent: kube-lifecycle/1.20\r\nconnection: close\r\n\r\n"
    );
    send(from, to, raw.as_bytes(), limit)
}

fn parse(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    Answer {
        status,
        body: if chunked { dechunk(body) } else { body.to_string() },
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Whether something listens on TCP `port` in `ns`, as `ss` sees it.
pub fn listening(ns: &NetNs, port: u16) -> bool {
    !ns.exec("ss", &["-Htln", &format!("sport = :{port}")])
        .trim()
        .is_empty()
}

/// Waits until the agent's listener is up in `ns`; how long it took.
pub fn wait_listening(ns: &NetNs, port: u16, secs: u64) -> Duration {
    let t = std::time::Instant::now();
    crate::wait_for(secs, "the httpGet gate's listener in the pod's namespace", || {
        listening(ns, port).then_some(())
    });
    t.elapsed()
}

/// A pod opted in, its app serving in its own namespace (`net.b`), the
/// node on the other side of a veth (`net.a`), and an agent that knows the
/// pod from the fake API and takes `net.a` as the node's namespace.
pub struct Scene {
    _rt: tokio::runtime::Runtime,
    pub api: FakeApi,
    pub agent: Agent,
    pub pod: SimPod,
    pub net: VethPair,
    pub app: Peer,
    pub app_port: u16,
}

impl Scene {
    pub fn new(annotations: Value) -> Scene {
        Scene::with_node(annotations, None)
    }

    /// [`Scene::new`], with `node` (a namespace path) as the node's
    /// namespace for the agent instead of `net.a`.
    pub fn with_node(annotations: Value, node: Option<&str>) -> Scene {
        Scene::build(annotations, node, false, false)
    }

    /// [`Scene::new`], with the agent's gate directory too (a handover
    /// needs it).
    pub fn with_gate_dir(annotations: Value) -> Scene {
        Scene::build(annotations, None, true, false)
    }

    /// [`Scene::with_gate_dir`], with the agent under a keeper.
    pub fn build_kept(annotations: Value) -> Scene {
        Scene::build(annotations, None, true, true)
    }

    fn build(annotations: Value, node: Option<&str>, gate_dir: bool, kept: bool) -> Scene {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let pod = SimPod::create(1);
        let net = VethPair::create();
        let mut app = Peer::spawn(pod.container(0), Some(&net.b));
        // Its connections close when their clients' do.
        let app_port = app.listen("0.0.0.0:0", "echo-close");
        let api = rt.block_on(FakeApi::start());
        api.push_list(Reply::list(list(&[pod_object(&pod, annotations)])));
        let mut agent = if gate_dir {
            Agent::with_gate()
        } else {
            Agent::new()
        };
        if kept {
            agent = agent.kept();
        }
        with_api(&mut agent, &api);
        let node = node.unwrap_or(net.a.path()).to_string();
        agent.daemon_args.extend(["--node-netns".into(), node]);
        agent.start();
        wait_watching(&api);
        Scene {
            _rt: rt,
            api,
            agent,
            pod,
            net,
            app,
            app_port,
        }
    }

    /// The pod as the API tells the agent now: `annotations` (the gate's
    /// among them) and, if `terminating`, its deletion, pushed as a
    /// MODIFIED watch event, and given the agent's store a moment.
    pub fn update(&self, annotations: Value, terminating: bool) {
        let mut obj = pod_object(&self.pod, annotations);
        if terminating {
            let now = k8s_openapi::jiff::Timestamp::now();
            obj["metadata"]["deletionTimestamp"] =
                serde_json::json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            obj["metadata"]["deletionGracePeriodSeconds"] = serde_json::json!(30);
        }
        self.api.push(&watch_line("MODIFIED", &obj));
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    /// The gate's address: the pod's own, as the kubelet's hook has it.
    pub fn gate(&self) -> SocketAddr {
        format!("{}:{PORT}", self.net.b_v4).parse().unwrap()
    }

    /// `n` clients from the node's side, held, once the app has them all.
    pub fn clients(&mut self, n: usize) -> (Cgroup, Peer) {
        let lb = Cgroup::unique("lb");
        let mut c = Peer::spawn(&lb, Some(&self.net.a));
        c.connect(&addr(&self.net.b_v4, self.app_port), n);
        crate::wait_for(10, "accepts", || (self.app.accepted() == n as u64).then_some(()));
        (lb, c)
    }
}

/// Waits until the agent holds its pod watch open: what the fake API
/// pushes before that is lost (under qemu the watch opens well after the
/// agent is ready).
pub fn wait_watching(api: &FakeApi) {
    crate::wait_for(30, "the agent's pod watch", || {
        (api.open_watches() >= 1).then_some(())
    });
}
