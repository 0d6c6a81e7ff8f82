//! A pod of the test node, seen from the node: its containers' cgroups
//! (where runc puts them: `kubepods/<qos>/pod<uid>/<container id>` in the
//! cgroup2 tree), their processes, the pod's network namespace and its
//! containers' log files.

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::Namespace;
use crate::netns::NetNs;

pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

#[derive(Debug, Clone)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub ip: String,
    /// Container name → containerd id: the regular containers, then the
    /// native sidecars.
    pub containers: Vec<(String, String)>,
    /// `kubepods/<qos>/pod<uid>`, relative to the cgroup2 mount.
    pub cgroup: String,
}

fn qos_dir(qos: &str) -> &'static str {
    match qos {
        "Guaranteed" => "",
        "Burstable" => "burstable/",
        _ => "besteffort/",
    }
}

impl Pod {
    pub fn from_json(p: &Value) -> Pod {
        let uid = p["metadata"]["uid"].as_str().unwrap().to_string();
        // The regular containers, and the native sidecars: the init
        // containers still running once the pod is.
        let sidecars = p["status"]["initContainerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["state"]["running"].is_object());
        let containers = p["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(sidecars)
            .filter_map(|c| {
                let id = c["containerID"].as_str()?.split("://").nth(1)?.to_string();
                Some((c["name"].as_str()?.to_string(), id))
            })
            .collect();
        let qos = p["status"]["qosClass"].as_str().unwrap_or("BestEffort");
        Pod {
            namespace: p["metadata"]["namespace"].as_str().unwrap().to_string(),
            name: p["metadata"]["name"].as_str().unwrap().to_string(),
            ip: p["status"]["podIP"].as_str().unwrap_or_default().to_string(),
            cgroup: format!("/kubepods/{}pod{uid}", qos_dir(qos)),
            uid,
            containers,
        }
    }

    /// The pods of `ns` matching `selector` once `n` of them are ready.
    pub fn wait_ready(ns: &Namespace, selector: &str, n: usize, secs: u64) -> Vec<Pod> {
        let mut last = Value::Null;
        let found = super::poll(Duration::from_secs(secs), || {
            last = ns.json(&["get", "pods", "-l", selector]);
            let ready: Vec<Pod> = last["items"]
                .as_array()?
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && is_ready(p))
                .map(Pod::from_json)
                .collect();
            (ready.len() == n).then_some(ready)
        });
        found.unwrap_or_else(|| {
            let describe = ns.kubectl(&["describe", "pods", "-l", selector]);
            panic!(
                "{n} ready pods {selector} in {} within {secs} s; they are:\n{describe}",
                ns.name
            )
        })
    }

    pub fn container_id(&self, container: &str) -> &str {
        &self
            .containers
            .iter()
            .find(|(n, _)| n == container)
            .unwrap_or_else(|| panic!("pod {} has no container {container}", self.name))
            .1
    }

    /// A container's cgroup, relative to the cgroup2 mount (what `ss
    /// cgroup` and the agent's paths use).
    pub fn container_cgroup(&self, container: &str) -> String {
        format!("{}/{}", self.cgroup, self.container_id(container))
    }

    /// The same, as a directory on this host.
    pub fn container_cgroup_dir(&self, container: &str) -> PathBuf {
        cgroup2().join(self.container_cgroup(container).trim_start_matches('/'))
    }

    /// The container's first process, as a host pid.
    pub fn container_pid(&self, container: &str) -> u32 {
        let procs = self.container_cgroup_dir(container).join("cgroup.procs");
        fs::read_to_string(&procs)
            .unwrap_or_else(|e| panic!("{}: {e}", procs.display()))
            .lines()
            .find_map(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("no process in {}", procs.display()))
    }

    /// The pod's network namespace, through one of its processes.
    pub fn netns(&self) -> NetNs {
        let (first, _) = &self.containers[0];
        let path = format!("/proc/{}/ns/net", self.container_pid(first));
        NetNs::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The container's log file, where the runtime writes its stdout and
    /// stderr (CRI format: `TIME STREAM TAG LINE`).
    pub fn log_file(&self, container: &str) -> PathBuf {
        PathBuf::from(format!(
            "/var/log/pods/{}_{}_{}/{container}/0.log",
            self.namespace, self.name, self.uid
        ))
    }

    /// Opens the container's log now: its lines stay readable through the
    /// open file after the kubelet removes it with the pod.
    pub fn open_log(&self, container: &str) -> Log {
        let path = self.log_file(container);
        Log {
            file: fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            text: String::new(),
        }
    }

    /// Whether the container's cgroup still holds a process.
    pub fn container_running(&self, container: &str) -> bool {
        populated(&self.container_cgroup_dir(container))
    }

    /// Waits (polling every 2 ms) until the container has no process left;
    /// the moment it saw that, or None after `limit`.
    pub fn wait_exit(&self, container: &str, limit: Duration) -> Option<Instant> {
        let dir = self.container_cgroup_dir(container);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if !populated(&dir) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    }
}

/// A cgroup with a process in it (or below it); a removed one has none.
fn populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events"))
        .map(|e| e.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

pub fn cgroup2() -> PathBuf {
    graceful::kernel::cgroupfs::mount_point().expect("a cgroup2 mount")
}

/// A container's log, read through a file opened while it ran.
pub struct Log {
    file: fs::File,
    text: String,
}

impl Log {
    /// Every line logged so far, without the CRI prefix.
    pub fn lines(&mut self) -> Vec<String> {
        let mut more = String::new();
        let _ = self.file.read_to_string(&mut more);
        self.text.push_str(&more);
        self.text
            .lines()
            .map(|l| l.splitn(4, ' ').nth(3).unwrap_or_default().to_string())
            .collect()
    }
}
