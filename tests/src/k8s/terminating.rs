//! A simulated pod that holds real connections, listed by the fake API to
//! an agent watching it, then deleted (a recorded MODIFIED event sets its
//! deletionTimestamp); the agent's terminating report read from its log.
//! The kernel tests of the report and its latency bench both use it.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::{
    fake_api::{FakeApi, Reply},
    fill, fixture, lines, with_api,
};
use crate::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
    pod::SimPod,
};

/// `key=value` from an agent log line (text format).
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

pub fn num(line: &str, key: &str) -> u64 {
    field(line, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// How the scene's pod comes to be reported: the agent reports on pods
/// that carry anything of graceful's, and on those its report scope
/// widens to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The pod carries a `graceful.dev/` annotation.
    OptedIn,
    /// The pod carries nothing of graceful's; the agent reports on its
    /// namespace (`--report-namespaces shop`).
    Widened,
    /// The pod carries nothing of graceful's; the agent's defaults.
    Neither,
}

/// The annotation an opted-in scene's pod carries.
pub const OPT_IN: (&str, &str) = ("graceful.dev/max", "25s");

/// An agent watching the fake API as node kind-worker, the simulated pod
/// listed, and the pod's app holding `n` inbound connections.
pub struct Scene {
    _rt: tokio::runtime::Runtime,
    pub api: FakeApi,
    pub agent: Agent,
    pub pod: SimPod,
    /// The pod's app; a test may take it to kill it.
    pub app: Option<Peer>,
    _client: Peer,
    _lb: Cgroup,
    reach: Reach,
}

/// The recorded pod (a list, or a watch event's line) with the opt-in
/// annotation, when `reach` says so.
fn as_reached(text: String, reach: Reach, at: &[&str]) -> String {
    if reach != Reach::OptedIn {
        return text;
    }
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut meta = &mut v;
    for key in at {
        meta = if let Ok(i) = key.parse::<usize>() {
            &mut meta[i]
        } else {
            &mut meta[*key]
        };
    }
    meta["metadata"]["annotations"][OPT_IN.0] = OPT_IN.1.into();
    serde_json::to_string(&v).unwrap()
}

pub fn scene(n: usize, reach: Reach) -> Scene {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pod = SimPod::create(1);
    let api = rt.block_on(FakeApi::start());
    let list = fill(&fixture("terminating/pods-list.json"), &pod, None);
    api.push_list(Reply::list(as_reached(list, reach, &["items", "0"])));
    let mut agent = Agent::new();
    if reach == Reach::Widened {
        agent
            .daemon_args
            .extend(["--report-namespaces".into(), "shop".into()]);
    }
    with_api(&mut agent, &api);
    agent.start();
    let lb = Cgroup::unique("lb");
    let mut app = Peer::spawn(pod.container(0), None);
    let port = app.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&lb, None);
    client.connect(&addr("127.0.0.1", port), n);
    crate::wait_for(10, "accepts", || (app.accepted() == n as u64).then_some(()));
    crate::wait_for(10, "the agent's pod watch", || {
        (api.open_watches() == 1).then_some(())
    });
    Scene {
        _rt: rt,
        api,
        agent,
        pod,
        app: Some(app),
        _client: client,
        _lb: lb,
        reach,
    }
}

impl Scene {
    /// Sends the recorded MODIFIED event: deletion requested now, grace 30 s.
    pub fn delete(&self, inbound: u64) {
        self.push_deletion();
        let started = crate::wait_for(10, "the agent to watch the terminating pod", || {
            self.agent
                .log_text()
                .lines()
                .find(|l| l.contains("pod terminating: watching"))
                .map(str::to_string)
        });
        assert_eq!(num(&started, "inbound"), inbound, "{started}");
        assert_eq!(field(&started, "pod"), Some("shop/checkout-84b7c9d5f6-n7x4r"));
    }

    /// Sends the recorded MODIFIED event, and returns.
    pub fn push_deletion(&self) {
        let at = Timestamp::now() + SignedDuration::from_secs(30);
        let line = fill(&lines("terminating/watch.jsonl")[0], &self.pod, Some(at));
        let line = as_reached(line, self.reach, &["object"]);
        assert_eq!(self.api.push(&line), 1, "no watch open");
    }

    pub fn report(&self) -> String {
        crate::wait_for(10, "the terminating report", || {
            self.agent
                .log_text()
                .lines()
                .find(|l| l.contains("report=") && l.contains("terminating pod:"))
                .map(str::to_string)
        })
    }
}
