//! `graceful daemon`: the node agent.

use std::time::Duration;

use tracing::{info, warn};

use crate::{
    adopt::pass::adopt_all,
    bpf::{
        counters,
        loader::{self, AttachOptions},
        paths::PinDir,
    },
    cgroupfs::Hierarchy,
    kernel,
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
}

pub fn run(pins: &PinDir, args: Args) -> anyhow::Result<i32> {
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
    let report = adopt_all(&mut attached.ebpf)?;
    info!(offered = report.offered, namespaces = report.namespaces, "ready");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(pins.clone(), hier, args))?;
    // The programs stay attached through their pinned links and keep
    // counting; the next agent picks the maps up where this one left them.
    info!("stopped; programs stay attached and keep counting until `graceful uninstall`");
    drop(attached);
    Ok(0)
}

async fn serve(pins: PinDir, hier: Hierarchy, args: Args) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut gc = tokio::time::interval(args.gc_interval);
    gc.tick().await;
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM"); break }
            _ = int.recv() => { info!("SIGINT"); break }
            _ = gc.tick() => {
                let (pins, hier) = (pins.clone(), hier.clone());
                match tokio::task::spawn_blocking(move || counters::collect_garbage(&pins, &hier)).await? {
                    Ok(0) => {}
                    Ok(n) => info!(removed = n, "dropped counters of removed cgroups"),
                    Err(e) => warn!(error = %e, "counter garbage collection failed"),
                }
            }
        }
    }
    Ok(())
}
