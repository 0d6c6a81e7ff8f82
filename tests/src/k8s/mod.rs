//! The Kubernetes API as the tests and benches serve it to the real agent:
//! recorded payloads (tests/fixtures/k8s/) and what fills them in for a
//! simulated pod (here), the HTTP server that serves them
//! ([`fake_api`]), and a terminating pod on it, its report awaited
//! ([`terminating`]).

pub mod fake_api;
pub mod terminating;

use std::path::Path;

use k8s_openapi::jiff::Timestamp;

use crate::{agent::Agent, pod::SimPod};
use fake_api::FakeApi;

/// The node the recorded pods are on.
pub const NODE: &str = "kind-worker";

/// A recorded payload from tests/fixtures/k8s (or `$GRACEFUL_FIXTURES/k8s`,
/// where the qemu guests put them).
pub fn fixture(name: &str) -> String {
    let root = std::env::var_os("GRACEFUL_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"));
    let p = root.join("k8s").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub fn lines(name: &str) -> Vec<String> {
    fixture(name).lines().map(str::to_string).collect()
}

/// Points `agent` at the fake API, as the node the recorded pods are on.
pub fn with_api(agent: &mut Agent, api: &FakeApi) {
    let kc = api.kubeconfig(&std::env::temp_dir());
    agent.daemon_args.extend([
        "--kubeconfig".into(),
        kc.display().to_string(),
        "--node-name".into(),
        NODE.into(),
    ]);
}

/// Fills the terminating fixtures' placeholders with the simulated pod's.
pub fn fill(text: &str, pod: &SimPod, deletion: Option<Timestamp>) -> String {
    let mut t = text
        .replace("{{POD_UID}}", &pod.uid)
        .replace("{{CONTAINER_ID}}", &pod.containers[0].0);
    if let Some(d) = deletion {
        t = t.replace(
            "{{DELETION_TIMESTAMP}}",
            &d.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        );
    }
    t
}
