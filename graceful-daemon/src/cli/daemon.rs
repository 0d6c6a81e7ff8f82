//! `graceful daemon`: the node agent.

use std::{path::PathBuf, sync::Arc, time::Duration};

use tracing::{error, info, warn};

use crate::{
    adopt::{
        pass::{adopt_all, Report as AdoptReport},
        repair::Repairer,
    },
    api::{self, node::Node, routes::Api},
    bpf::{
        loader::{self, AttachOptions},
        maps,
        paths::PinDir,
        Kernel,
    },
    cgroupfs::Hierarchy,
    drain::{drainer::Drainer, pod_api::PodApi},
    gate::server,
    kernel,
    kube::{Outcome, TerminationReport},
    memcg::{self, Budget},
    metrics::Recorder,
    resolver::watch::{WatchConfig, Watcher},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Replace pinned maps of an incompatible layout (an older or newer
    /// graceful) instead of refusing to start. Live counts are re-adopted from
    /// the kernel; totals restart at zero.
    #[arg(long, env = "GRACEFUL_REPLACE_INCOMPATIBLE_PINS")]
    pub replace_incompatible_pins: bool,
    /// How often to drop counters of cgroups that no longer exist and hold nothing.
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
    pub gc_interval: Duration,
    /// How often to check every tracked socket's count against its state,
    /// repairing any whose state change the kernel skipped for both copies
    /// of the state program (rare; the start-up pass does it too). `0s`: never.
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
    pub repair_interval: Duration,
    /// Host directory for the drain gate: the agent puts `graceful-wait` and
    /// `gate.sock` there; pods mount it (by convention at /graceful) and
    /// run `/graceful/graceful-wait` as their preStop hook.
    #[arg(long, env = "GRACEFUL_GATE_DIR")]
    pub gate_dir: Option<PathBuf>,
    /// The time an app needs after SIGTERM to finish: a drain's default
    /// deadline is the pod's grace period less this.
    #[arg(long, env = "GRACEFUL_SHUTDOWN_BUDGET", default_value = "5s", value_parser = crate::duration::parse)]
    pub shutdown_budget: Duration,
    /// The `graceful-wait` binary to place in the gate directory (default:
    /// beside this executable).
    #[arg(long)]
    pub wait_bin: Option<PathBuf>,
    /// TCP address of the local API (/v1/pods, /metrics, ...): loopback by
    /// default; the DaemonSet serves it on the pod's own address for
    /// Prometheus and the probes. `off` serves none.
    #[arg(long, env = "GRACEFUL_API_ADDR", default_value = crate::api::DEFAULT_ADDR)]
    pub api_addr: String,
    /// Pods with their own series in the per-pod metrics; the rest are
    /// summed into one `pod="_other"` series, so a node's cardinality stays bounded.
    #[arg(long, default_value_t = 256)]
    pub metrics_max_pods: usize,
    #[command(flatten)]
    pub kube: crate::kube::KubeArgs,
}

pub fn run(pins: &PinDir, api_socket: &std::path::Path, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful daemon")?;
    let release = kernel::check_floor().map_err(anyhow::Error::msg)?;
    let hier = Hierarchy::discover()?;
    let opts = AttachOptions {
        replace_incompatible: args.replace_incompatible_pins,
    };
    let mut attached = loader::attach(pins, &opts)?;
    info!(
        kernel = %release,
        cgroup2 = %hier.mount().display(),
        pins = %pins.root().display(),
        reused_maps = attached.reused_maps,
        reused_link = attached.reused_link,
        "programs attached"
    );
    let adoption = adopt_all(&mut attached.ebpf)?;
    info!(
        offered = adoption.offered,
        namespaces = adoption.namespaces,
        "adoption done"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(
        pins.clone(),
        hier,
        attached.ebpf,
        adoption,
        api_socket,
        args,
    ))?;
    // The programs stay attached through their pinned links and keep
    // counting; the next agent picks the maps up where this one left them.
    info!("stopped; programs stay attached and keep counting until `graceful uninstall`");
    Ok(0)
}

/// Puts `graceful-wait` and the gate socket in `dir`.
fn open_gate_dir(
    dir: &std::path::Path,
    wait_bin: Option<PathBuf>,
) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create gate directory {}: {e}", dir.display()))?;
    let src = match wait_bin {
        Some(p) => Some(p),
        None => std::env::current_exe()?.parent().map(|d| d.join("graceful-wait")),
    };
    match src.filter(|p| p.exists()) {
        Some(src) => {
            // Copy then rename: a pod starting its hook never sees half a binary.
            let tmp = dir.join(".graceful-wait.tmp");
            std::fs::copy(&src, &tmp)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
            std::fs::rename(&tmp, dir.join("graceful-wait"))?;
        }
        None => {
            warn!(dir = %dir.display(), "graceful-wait not found beside the agent (use --wait-bin): pods cannot run the hook from the gate directory")
        }
    }
    let sock = dir.join("gate.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = tokio::net::UnixListener::bind(&sock)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", sock.display()))?;
    // Any pod's process may connect; who it is comes from SO_PEERCRED.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

async fn serve(
    pins: PinDir,
    hier: Hierarchy,
    ebpf: aya::Ebpf,
    adoption: AdoptReport,
    api_socket: &std::path::Path,
    args: Args,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    // Before anything else, and long before "ready": a SIGTERM that came
    // in between would meet the default action, or nothing at all where
    // the parent left it ignored (seen under a VM's init).
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let kernel = Kernel::open(&pins)?.with_object(ebpf);
    let watcher = Watcher::spawn(&hier, WatchConfig::default())?;
    let recorder = Arc::new(Recorder::new(&Outcome::ALL.map(Outcome::as_str)));
    recorder.repair(None, adoption.repaired);
    let repairer = Repairer::new(kernel.clone(), recorder.clone());
    // Names, deletions and Events from the API; never blocks or fails the start.
    let kube = crate::kube::Kube::start(
        &args.kube,
        watcher.resolver().shared(),
        Some((
            kernel.clone(),
            watcher.resolver().subscribe(),
            hier.mount().to_path_buf(),
        )),
    )
    .await;
    if let Some(t) = kube.as_ref().and_then(|k| k.terminations.as_ref()) {
        tokio::spawn(count_terminations(t.subscribe(), recorder.clone()));
    }
    let pod_api = kube.as_ref().map(|k| PodApi {
        store: k.store.clone(),
        events: k.events.clone(),
    });
    let mut drainer = Drainer::new(
        kernel.clone(),
        watcher.resolver().shared(),
        hier.clone(),
        recorder.clone(),
        pod_api,
        args.shutdown_budget,
    );
    drainer.repairer = Some(repairer.clone());
    let drainer = Arc::new(drainer);
    if let Some(dir) = &args.gate_dir {
        let listener = open_gate_dir(dir, args.wait_bin.clone())?;
        info!(gate = %dir.join("gate.sock").display(), "drain gate listening");
        tokio::spawn(server::serve(listener, drainer.clone()));
    }
    let node = Arc::new(Node {
        pins: pins.clone(),
        index: watcher.resolver().shared(),
        kernel,
        drains: drainer.drains.clone(),
        metrics: recorder.clone(),
        kube,
        adoption,
        metrics_max_pods: args.metrics_max_pods,
    });
    let api = Arc::new(Api {
        registry: recorder.registry(Arc::<Node>::downgrade(&node)),
        node,
        resolver: watcher.resolver().clone(),
    });
    start_api(&args.api_addr, api_socket, api).await;
    info!("ready");
    let mut short = None;
    check_budget(&mut short);
    let mut gc = tokio::time::interval(args.gc_interval);
    gc.tick().await;
    // A task of its own: a pass over a large node takes a while, and
    // nothing here should wait for it. `0s` turns it off (tokio's interval
    // can't be zero).
    if !args.repair_interval.is_zero() {
        let mut every = tokio::time::interval(args.repair_interval);
        every.tick().await;
        tokio::spawn(async move {
            loop {
                every.tick().await;
                repairer.all().await;
            }
        });
    }
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM"); break }
            _ = int.recv() => { info!("SIGINT"); break }
            _ = gc.tick() => {
                check_budget(&mut short);
                let (pins, hier) = (pins.clone(), hier.clone());
                match tokio::task::spawn_blocking(move || maps::collect_garbage(&pins, &hier)).await? {
                    Ok(0) => {}
                    Ok(n) => info!(removed = n, "dropped counters of removed cgroups"),
                    Err(e) => warn!(error = %e, "counter garbage collection failed"),
                }
            }
        }
    }
    // The API's socket goes with it; the gate's stays for pods that
    // mount its directory (the next agent binds it again).
    let _ = std::fs::remove_file(api_socket);
    Ok(())
}

/// Logs the agent's memory budget on the first call, then warns once when
/// its memory cgroup gets short (see `memcg`): the kernel charges it for
/// every socket on the node, and past its limit the agent is OOM-killed.
/// Says so again when it is no longer short. `was_short`: None before the
/// first call.
fn check_budget(was_short: &mut Option<bool>) {
    let Some(b) = Budget::own() else { return };
    let short = b.is_short();
    let (usage_bytes, limit_bytes, tcp_sockets) = (b.usage, b.limit, b.tcp_sockets);
    match (*was_short, short) {
        (None | Some(false), true) => warn!(
            usage_bytes,
            limit_bytes,
            tcp_sockets,
            "{}: raise the agent's memory limit (deploy/base/daemonset.yaml), or the kernel will OOM-kill it as the node's sockets grow",
            b.describe()
        ),
        (None, false) => info!(usage_bytes, limit_bytes, tcp_sockets, "{}", b.describe()),
        (Some(true), false) => info!(
            usage_bytes,
            limit_bytes,
            "memory cgroup back under {} % of its limit",
            memcg::SHORT_PCT
        ),
        (Some(_), _) => {}
    }
    *was_short = Some(short);
}

/// Binds the local API's listeners. An address or socket that cannot be
/// bound is one error line and the agent goes on without it: counting and
/// drains matter more than the API (the readiness probe, which asks the
/// API, then says so), and the CLI falls back to the pins.
async fn start_api(addr: &str, socket: &std::path::Path, api: Arc<Api>) {
    if addr != "off" {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                let bound = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
                info!(addr = %bound, "local API listening");
                tokio::spawn(api::server::serve(listener, api.clone()));
            }
            Err(e) => error!(
                "cannot serve the local API on {addr}: {e}; going on without it (set --api-addr, or `off`)"
            ),
        }
    }
    match api::server::bind_unix(socket) {
        Ok(listener) => {
            info!(socket = %socket.display(), "local API listening");
            tokio::spawn(api::server::serve(listener, api));
        }
        Err(e) => error!("{e:#}; going on without the API socket (the CLI reads the pins instead)"),
    }
}

/// Counts each terminating pod's report in the metrics.
async fn count_terminations(
    mut rx: tokio::sync::broadcast::Receiver<TerminationReport>,
    recorder: Arc<Recorder>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(r) => recorder.termination(r.outcome.as_str()),
            Err(RecvError::Lagged(n)) => {
                warn!(
                    missed = n,
                    "termination reports came faster than they were counted"
                );
                recorder.error("metrics_lagged");
            }
            Err(RecvError::Closed) => return,
        }
    }
}
