//! The node's processes: etcd, the API server, the controller-manager, the
//! scheduler, containerd, the kubelet, kube-proxy, and the host's door to
//! the API server ([`super::forward`]).
//!
//! Each runs detached (its own session), in the cluster's cgroup (so `down`
//! finds every one, containerd's shims included), inside the node's network
//! namespace (but the door), with its log in `target/cluster/logs` and a
//! pidfile in the run directory that names its start time too, so a pid
//! reused by another process is never taken for it.

use std::{
    ffi::OsString,
    fs::{self, File, OpenOptions},
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{bail, Context as _};

use super::{
    build::Kube, config, images, kubectl::Kubectl, node, pki, wait_for, Paths, API_PORT, CGROUP, HOST_API,
    NODE_IP, NODE_NAME, SERVICE_CIDR,
};
use crate::mounts;
use xtask::util;

/// The order they start in; `down` stops them in reverse.
pub const ORDER: &[&str] = &[
    "etcd",
    "forward",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "containerd",
    "kubelet",
    "kube-proxy",
];

/// The cluster's cgroup in the cgroup2 tree.
pub fn cgroup() -> anyhow::Result<PathBuf> {
    Ok(mounts::cgroup2()?.join(CGROUP))
}

/// A process's start time (field 22 of /proc/PID/stat), if it lives and is
/// not a zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may contain spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.first() == Some(&"Z") {
        return None;
    }
    f.get(19)?.parse().ok()
}

/// The pid of `name`, if its pidfile names a live process that started when
/// the file says.
pub fn running(paths: &Paths, name: &str) -> Option<u32> {
    let text = fs::read_to_string(paths.pidfile(name)).ok()?;
    let mut it = text.split_whitespace();
    let (pid, started): (u32, u64) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?);
    (start_time(pid) == Some(started)).then_some(pid)
}

/// How to run one of the node's processes.
struct Spec {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    /// Inside the node's network namespace (all but the door).
    in_node: bool,
}

fn args(v: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    v.iter().map(|a| a.as_ref().to_os_string()).collect()
}

fn spec(paths: &Paths, kube: &Kube, name: &'static str) -> anyhow::Result<Spec> {
    let pki = paths.pki();
    let p = |f: &str| pki.join(f).into_os_string();
    let kc = |c: &str| pki::kubeconfig_path(paths, c).into_os_string();
    let flag = |k: &str, v: OsString| {
        let mut s = OsString::from(format!("--{k}="));
        s.push(v);
        s
    };
    let s = |v: &str| OsString::from(v);
    let (program, argv, in_node) = match name {
        "etcd" => (
            kube.bin("etcd"),
            vec![
                s("--name=graceful"),
                flag("data-dir", paths.etcd_data().into_os_string()),
                s("--listen-client-urls=http://127.0.0.1:2379"),
                s("--advertise-client-urls=http://127.0.0.1:2379"),
                s("--listen-peer-urls=http://127.0.0.1:2380"),
                s("--initial-advertise-peer-urls=http://127.0.0.1:2380"),
                s("--initial-cluster=graceful=http://127.0.0.1:2380"),
            ],
            true,
        ),
        "forward" => (
            std::env::current_exe().context("the xtask binary's path")?,
            args(&[
                &"__cluster-forward",
                &"--listen",
                &HOST_API,
                &"--netns",
                &node::netns_path(),
                &"--to",
                &format!("{NODE_IP}:{API_PORT}"),
            ]),
            false,
        ),
        "kube-apiserver" => (
            kube.bin(name),
            vec![
                s("--etcd-servers=http://127.0.0.1:2379"),
                s("--bind-address=0.0.0.0"),
                s(&format!("--secure-port={API_PORT}")),
                s(&format!("--advertise-address={NODE_IP}")),
                flag("tls-cert-file", p("apiserver.crt")),
                flag("tls-private-key-file", p("apiserver.key")),
                flag("client-ca-file", p("ca.crt")),
                flag("service-account-key-file", p("sa.pub")),
                flag("service-account-signing-key-file", p("sa.key")),
                s("--service-account-issuer=https://kubernetes.default.svc"),
                s(&format!("--service-cluster-ip-range={SERVICE_CIDR}")),
                // RBAC on, so deploy/base's ClusterRole is what the agent gets.
                s("--authorization-mode=Node,RBAC"),
                // PodSecurity is on by default since 1.25; named here so that
                // the node's admission is plain to see: namespaces labelled
                // `pod-security.kubernetes.io/enforce` are enforced for real.
                s("--enable-admission-plugins=NodeRestriction,ServiceAccount,PodSecurity"),
                flag("kubelet-client-certificate", p("apiserver-kubelet-client.crt")),
                flag("kubelet-client-key", p("apiserver-kubelet-client.key")),
                // The node's name resolves nowhere: reach the kubelet at its IP.
                s("--kubelet-preferred-address-types=InternalIP"),
                s("--allow-privileged=true"),
            ],
            true,
        ),
        "kube-controller-manager" => (
            kube.bin(name),
            vec![
                flag("kubeconfig", kc("controller-manager")),
                flag("authentication-kubeconfig", kc("controller-manager")),
                flag("authorization-kubeconfig", kc("controller-manager")),
                s("--leader-elect=false"),
                s("--use-service-account-credentials"),
                flag("service-account-private-key-file", p("sa.key")),
                flag("root-ca-file", p("ca.crt")),
                flag("cluster-signing-cert-file", p("ca.crt")),
                flag("cluster-signing-key-file", p("ca.key")),
                s("--bind-address=127.0.0.1"),
            ],
            true,
        ),
        "kube-scheduler" => (
            kube.bin(name),
            vec![
                flag("kubeconfig", kc("scheduler")),
                flag("authentication-kubeconfig", kc("scheduler")),
                flag("authorization-kubeconfig", kc("scheduler")),
                s("--leader-elect=false"),
                s("--bind-address=127.0.0.1"),
            ],
            true,
        ),
        "containerd" => (
            kube.bin("containerd"),
            vec![flag("config", config::containerd(paths).into_os_string())],
            true,
        ),
        "kubelet" => (
            kube.bin(name),
            vec![
                flag("config", config::kubelet(paths).into_os_string()),
                flag("kubeconfig", kc("kubelet")),
                s(&format!("--node-ip={NODE_IP}")),
                s(&format!("--hostname-override={NODE_NAME}")),
            ],
            true,
        ),
        "kube-proxy" => (
            kube.bin(name),
            vec![
                flag("config", config::kube_proxy(paths).into_os_string()),
                s(&format!("--hostname-override={NODE_NAME}")),
            ],
            true,
        ),
        other => bail!("no such cluster process: {other}"),
    };
    Ok(Spec {
        name,
        program,
        args: argv,
        in_node,
    })
}

/// Starts `spec` detached, and returns its child handle (for an early exit).
fn spawn(paths: &Paths, kube: &Kube, spec: &Spec) -> anyhow::Result<Child> {
    fs::create_dir_all(paths.logs())?;
    fs::create_dir_all(paths.run())?;
    let log_path = paths.logs().join(format!("{}.log", spec.name));
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let cg = cgroup()?;
    fs::create_dir_all(&cg).with_context(|| format!("cannot create the cgroup {}", cg.display()))?;
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .env("PATH", kube.path_env());
    graceful_test_support::cgroup::start_in(&mut cmd, &cg)?;
    let ns = if spec.in_node {
        Some(File::open(node::netns_path()).with_context(|| format!("cannot open {}", node::netns_path()))?)
    } else {
        None
    };
    // SAFETY: setsid(2) and setns(2) are async-signal-safe; the fd is open.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(ns) = &ns {
                if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {} ({})", spec.name, spec.program.display()))?;
    let started = wait_for(Duration::from_secs(2), "the process's start time", || {
        start_time(child.id())
    })?;
    fs::write(paths.pidfile(spec.name), format!("{} {started}\n", child.id()))?;
    Ok(child)
}

/// Waits until `ready` holds, failing early (with its log's tail) if the
/// process exits first.
fn await_ready(
    paths: &Paths,
    name: &str,
    child: &mut Child,
    limit: Duration,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let log = paths.logs().join(format!("{name}.log"));
    let r = wait_for(limit, what, || {
        if ready() {
            return Some(Ok(()));
        }
        match child.try_wait() {
            Ok(Some(st)) => Some(Err(anyhow::anyhow!("{name} exited ({st})"))),
            _ => None,
        }
    });
    let tail = || util::tail(&fs::read_to_string(&log).unwrap_or_default(), 15);
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) | Err(e) => bail!("{e}; the end of {}:\n{}", log.display(), tail()),
    }
}

/// Starts each process that does not run yet, in order, waiting for each
/// to be ready; then imports the images and deploys the agent.
pub fn start_all(paths: &Paths, kube: &Kube, bins: &images::Binaries) -> anyhow::Result<()> {
    let kubectl = Kubectl::new(&paths.kubeconfig());
    let mut agent_image = Vec::new();
    for &name in ORDER {
        if name == "kubelet" {
            // The pods' images must be there before the kubelet runs them.
            agent_image = images::import(paths, bins, kube)?;
        }
        if let Some(pid) = running(paths, name) {
            println!("{:<10} {name:<34} pid {pid}", "ok");
            continue;
        }
        let spec = spec(paths, kube, name)?;
        let mut child = spawn(paths, kube, &spec)?;
        let limit = Duration::from_secs(90);
        match name {
            "etcd" => await_ready(paths, name, &mut child, limit, "etcd was not healthy", || {
                node::http_ok("127.0.0.1:2379", "/health")
            })?,
            "forward" => await_ready(paths, name, &mut child, limit, "the door did not listen", || {
                std::net::TcpStream::connect(HOST_API).is_ok()
            })?,
            "kube-apiserver" => await_ready(
                paths,
                name,
                &mut child,
                limit,
                "the API server was not ready",
                || kubectl.ok(&["get", "--raw", "/readyz"]),
            )?,
            "containerd" => await_ready(
                paths,
                name,
                &mut child,
                limit,
                "containerd did not answer",
                || util::output(images::ctr(paths, kube).arg("version")).is_ok(),
            )?,
            "kubelet" => await_ready(paths, name, &mut child, limit, "the node was not Ready", || {
                kubectl.node_ready(NODE_NAME).is_ok_and(|s| s.trim() == "True")
            })?,
            "kube-proxy" => await_ready(
                paths,
                name,
                &mut child,
                limit,
                "kube-proxy was not healthy",
                || node::http_ok("127.0.0.1:10256", "/healthz"),
            )?,
            // The controller-manager and scheduler have no readiness of
            // their own to wait for: the agent's DaemonSet needs both, and
            // its rollout below waits for them.
            _ => {
                std::thread::sleep(Duration::from_millis(300));
                if let Ok(Some(st)) = child.try_wait() {
                    bail!(
                        "{name} exited at once ({st}): see {}",
                        paths.logs().join(format!("{name}.log")).display()
                    );
                }
            }
        }
        println!("{:<10} {name:<34} pid {}", "started", child.id());
    }
    super::deploy::agent(&kubectl, &agent_image)?;
    Ok(())
}

/// Every process in the cluster's cgroup.
pub fn cgroup_pids() -> Vec<u32> {
    let Ok(cg) = cgroup() else {
        return Vec::new();
    };
    graceful_test_support::cgroup::pids_in(&cg)
}
