//! A rolling update of graceful's DaemonSet (surge, `deploy/base` as
//! shipped) in the middle of two drains, one through each gate: the new
//! agent takes both held hooks over from the old one, which retires; each
//! pod's SIGTERM still comes just after its own last client closes, and the
//! kubelet records no `FailedPreStopHook`. Rolled back, it hands over again.

use graceful_tests::cluster::{
    clients::Clients,
    pod::{Log, Pod},
    Cluster, Namespace, AGENT_IMAGE, AGENT_NAMESPACE,
};

use crate::{
    gate::{deleted_with_clients, events_by, held_until_the_last_close, sigterm_ns},
    http_gate::{http_pod, wait_gate},
};

/// Two pods held by three clients each, one through each gate (`drained`,
/// settle 200 ms, max 120 s), and deleted: what a test does to the agent
/// comes in between [`TwoDrains::start`] and [`TwoDrains::finish`].
pub struct TwoDrains {
    held: Vec<(Pod, Clients, Log, &'static str)>,
}

impl TwoDrains {
    pub fn start(cluster: &Cluster, ns: &Namespace) -> TwoDrains {
        let hook = [
            "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", "120s",
        ];
        ns.apply(&crate::app_pod("exec", Some(&hook), 150));
        ns.apply(&http_pod(
            "http",
            "policy=drained&settle=200ms&min=0s&max=120s",
            150,
        ));
        let exec = Pod::wait_ready(ns, "app=exec", 1, 60).remove(0);
        let http = Pod::wait_ready(ns, "app=http", 1, 60).remove(0);
        wait_gate(cluster, &http);
        let held = [(exec, "exec"), (http, "http")]
            .into_iter()
            .map(|(pod, name)| {
                let (clients, log) = deleted_with_clients(cluster, ns, &pod, name);
                (pod, clients, log, name)
            })
            .collect();
        TwoDrains { held }
    }

    /// Neither app has had its SIGTERM (`during`: what happened).
    pub fn no_sigterm_yet(&mut self, during: &str) {
        for (_, _, log, what) in &mut self.held {
            assert_eq!(sigterm_ns(log), None, "{what}: SIGTERM came during {during}");
        }
    }

    /// Each pod's clients close; its SIGTERM comes just after, and the
    /// kubelet recorded no `FailedPreStopHook` (`during`: for the output).
    pub fn finish(self, ns: &Namespace, during: &str) {
        for (pod, clients, mut log, name) in self.held {
            let what = format!("{name} hook across {during}: ");
            held_until_the_last_close(ns, &pod, clients, &mut log, name, &what);
            let kubelet = events_by(ns, &pod.uid, "kubelet");
            assert!(
                !kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
                "{}: {kubelet:?}",
                pod.name
            );
        }
    }
}

#[test]
fn a_rolling_update_of_the_agent_mid_drain_cuts_no_hook() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "handover");
    let mut drains = TwoDrains::start(&cluster, &ns);

    // The upgrade: a new tag of the agent's image, rolled with surge.
    let next = format!("{AGENT_IMAGE}-next");
    cluster.images(&["tag", "--force", AGENT_IMAGE, &next]);
    let old = cluster.agent_pod(10);
    let new = cluster.roll_agent_to(&next);
    assert_ne!(new, old);
    let log = cluster.kubectl(&["-n", AGENT_NAMESPACE, "logs", &new]);
    assert!(
        log.contains("serving the hooks the previous agent held")
            && log.contains("exec_hooks=1 http_hooks=1"),
        "the new agent did not take both hooks over: {log}"
    );
    eprintln!(
        "{}",
        log.lines()
            .find(|l| l.contains("serving the hooks the previous agent held"))
            .unwrap_or_default()
    );
    drains.no_sigterm_yet("the agent's rollout");
    drains.finish(&ns, "a rollout");

    // Back to the image as shipped: another handover, with nothing held.
    let back = cluster.roll_agent_to(AGENT_IMAGE);
    assert_ne!(back, new);
    cluster.images(&["rm", &next]);
}
