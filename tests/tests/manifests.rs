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
//!   period longer than each hook's `--max` (or httpGet `max=`) plus a
//!   shutdown budget.
//! - The httpGet gate's hooks as the agent reads them (`http_gate`), and
//!   the restricted example against Pod Security restricted
//!   (`pod_security`), each rule shown to fail on a broken copy.
//! - The Containerfile copies paths that exist, takes the workspace's own
//!   [[bin]] targets from its builder, and those build static for musl.
//!
//! kubectl comes from Debian's kubernetes-client (`kubectl kustomize` works
//! offline); `KUBECTL=/path/to/kubectl` runs another one.

#[path = "manifests/containerfile.rs"]
mod containerfile;
#[path = "manifests/objects.rs"]
mod objects;
#[path = "manifests/rules.rs"]
mod rules;

#[path = "manifests/agent.rs"]
mod agent;
#[path = "manifests/deploy_files.rs"]
mod deploy_files;
#[path = "manifests/http_gate.rs"]
mod http_gate;
#[path = "manifests/image.rs"]
mod image;
#[path = "manifests/pod_security.rs"]
mod pod_security;
#[path = "manifests/rendering.rs"]
mod rendering;
#[path = "manifests/repo.rs"]
mod repo;
#[path = "manifests/workloads.rs"]
mod workloads;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
    time::Duration,
};

use graceful::drain::settings::{self, PodFacts};
use graceful_api::{hook_query, Accepted, DrainRequest};
use graceful_tests::elf;
use graceful_wait::args as wait_args;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, HTTPGetAction, PodSpec},
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use objects::{Kind, Object};
use rendering::*;
use repo::*;
use rules::{report, Finding, Findings, Rule};

const MUSL: &str = "x86_64-unknown-linux-musl";
/// What an app gets for its own shutdown after its hook returns, at least.
const BUDGET: Duration = Duration::from_secs(5);
/// Kubernetes' terminationGracePeriodSeconds when a pod sets none.
const DEFAULT_GRACE: i64 = 30;
/// The agent's namespace.
const NAMESPACE: &str = "graceful-system";
/// The examples, one for each case graceful exists for.
const EXAMPLES: &[&str] = &[
    "haproxy-waf",
    "mesh-proxy",
    "mesh-proxy-native",
    "policy-sidecar",
    "policy-sidecar-native",
    "restricted",
    "restricted-socket",
    "web",
];
/// The httpGet gate's names, as the agent reads them.
use graceful::serve::httpgate::{
    ANNOTATION as GATE_ANNOTATION, DEFAULT_PORT, PORT_ANNOTATION as GATE_PORT_ANNOTATION,
};
/// The gate's port when the pod names none, as the pod spec types ports.
const DEFAULT_GATE_PORT: i32 = DEFAULT_PORT as i32;
