//! Loads the kernel programs, pins their maps and links, and re-adopts the
//! pins of an earlier agent. The one module that attaches anything.
//!
//! Continuity across restarts and upgrades comes from the pins alone:
//! - the maps are pinned, so counts survive the agent;
//! - the tracepoint link is pinned, so the program keeps counting while no
//!   agent runs. Its pin name carries the object's fingerprint: an agent
//!   finding its own program attached leaves it be; an upgraded agent
//!   attaches its program *before* detaching the old one, so no event is
//!   missed, and the counted flag per socket keeps the overlap from counting
//!   anything twice.

use std::path::{Path, PathBuf};

use aya::{
    maps::{Array, MapData},
    programs::{links::FdLink, tp_btf::BtfTracePointLinkId, BtfTracePoint, CgroupSkb, Iter},
    Ebpf, EbpfLoader,
};
use graceful_common::{names, Meta};
use tracing::{info, warn};

use super::{
    bpffs,
    btf::Btf,
    layout::{self, LayoutError, PinState},
    object::{fingerprint, OBJECT},
    paths::{PinDir, BPFFS},
};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("this graceful binary was built without its eBPF object (AYA_BUILD_SKIP): rebuild it with `cargo build` after `cargo xtask setup`")]
    NoObject,
    #[error("bpffs is not mounted at {BPFFS} and mounting it failed ({0}): run as root, or mount it with `mount -t bpf bpf {BPFFS}`")]
    Bpffs(#[source] std::io::Error),
    #[error("pin directory {0} is not on a bpffs: choose a directory under {BPFFS}")]
    NotBpffs(PathBuf),
    #[error("cannot create pin directory {path}: {source}; run as root")]
    PinDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("{0}")]
    Btf(#[from] super::btf::BtfError),
    #[error(
        "cannot read the kernel's BTF ({0}): graceful needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
    )]
    KernelBtf(#[source] aya::BtfError),
    #[error("the kernel refused the eBPF object ({source}); run `graceful doctor` to see which kernel feature is missing")]
    Load {
        #[source]
        source: Box<aya::EbpfError>,
    },
    #[error("cannot {what}: {source}; run `graceful doctor`")]
    Program {
        what: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("cannot {what}: {message}")]
    Pin { what: String, message: String },
}

/// Options for [`attach`].
#[derive(Clone, Debug, Default)]
pub struct AttachOptions {
    /// Remove pins of an incompatible layout instead of refusing to start.
    pub replace_incompatible: bool,
}

/// The loaded object and what happened while loading it.
pub struct Attached {
    pub ebpf: Ebpf,
    pub pins: PinDir,
    /// The maps existed already: this agent continues an earlier one's counts.
    pub reused_maps: bool,
    /// Our program was already attached (an agent restart).
    pub reused_link: bool,
    /// Link pins of other versions that this agent detached.
    pub replaced_links: Vec<PathBuf>,
}

/// Offsets the programs read, from the running kernel's BTF.
fn kernel_offsets() -> Result<(u32, u32), LoadError> {
    let btf = Btf::from_sys_fs()?;
    let skc_state = btf.member_offset("sock_common", "skc_state")?;
    let sk_protocol = btf.member_offset("sock", "sk_protocol")?;
    Ok((skc_state, sk_protocol))
}

fn pin_err(what: impl Into<String>, e: impl std::fmt::Display) -> LoadError {
    LoadError::Pin {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Prepares the bpffs and the pin directory.
pub fn prepare_pin_dir(pins: &PinDir) -> Result<(), LoadError> {
    if pins.root().starts_with(BPFFS) {
        bpffs::ensure_mounted(Path::new(BPFFS)).map_err(LoadError::Bpffs)?;
    }
    // Check before creating anything, so a wrong directory is left as it was.
    let parent = pins.root().parent().unwrap_or(Path::new("/"));
    if !bpffs::is_bpffs(parent).unwrap_or(false) && !bpffs::is_bpffs(pins.root()).unwrap_or(false) {
        return Err(LoadError::NotBpffs(pins.root().to_path_buf()));
    }
    for dir in [pins.maps(), pins.links()] {
        std::fs::create_dir_all(&dir).map_err(|source| LoadError::PinDir {
            path: dir.clone(),
            source,
        })?;
    }
    match bpffs::is_bpffs(pins.root()) {
        Ok(true) => Ok(()),
        _ => Err(LoadError::NotBpffs(pins.root().to_path_buf())),
    }
}

/// Loads the programs, re-adopting or creating pins, and makes sure the
/// state-change program is attached.
pub fn attach(pins: &PinDir, opts: &AttachOptions) -> Result<Attached, LoadError> {
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    prepare_pin_dir(pins)?;
    let state = match layout::check(pins) {
        Ok(s) => s,
        Err(e) if opts.replace_incompatible => {
            warn!(error = %e, "replacing incompatible pins; live counts will be re-adopted, totals restart");
            uninstall(pins).map_err(|e| pin_err("remove incompatible pins", e))?;
            prepare_pin_dir(pins)?;
            PinState::Empty
        }
        Err(e) => return Err(e.into()),
    };
    let reused_maps = state == PinState::Compatible;

    let (skc_state, sk_protocol) = kernel_offsets()?;
    let map_paths: Vec<(&str, PathBuf)> = PinDir::map_names().iter().map(|n| (*n, pins.map(n))).collect();
    let mut loader = EbpfLoader::new();
    for (name, path) in &map_paths {
        loader.map_pin_path(name, path.as_path());
    }
    loader
        .override_global(names::GLOBAL_SKC_STATE_OFFSET, &skc_state, true)
        .override_global(names::GLOBAL_SK_PROTOCOL_OFFSET, &sk_protocol, true);
    let mut ebpf = loader
        .load(OBJECT)
        .map_err(|e| LoadError::Load { source: Box::new(e) })?;

    if !reused_maps {
        let meta = ebpf
            .map_mut(names::META)
            .ok_or_else(|| pin_err("find the meta map", "missing from object"))?;
        let mut meta: Array<&mut MapData, Meta> =
            Array::try_from(meta).map_err(|e| pin_err("open the meta map", e))?;
        meta.set(0, layout::current_meta(monotonic_ns()), 0)
            .map_err(|e| pin_err("write the meta map", e))?;
    }

    let fp = fingerprint();
    let link_path = pins.link(names::PROG_STATE, &fp);
    let reused_link = link_path.exists();
    if !reused_link {
        let (prog, id) = attach_state_program(&mut ebpf)?;
        let link: FdLink = prog
            .take_link(id)
            .map_err(|e| LoadError::Program {
                what: "take the state link".into(),
                source: Box::new(e),
            })?
            .into();
        link.pin(&link_path)
            .map_err(|e| pin_err(format!("pin {}", link_path.display()), e))?;
        info!(link = %link_path.display(), "state program attached");
    }

    // Only now, with our program counting, let any older one go.
    let mut replaced_links = Vec::new();
    if let Ok(dir) = std::fs::read_dir(pins.links()) {
        for entry in dir.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&format!("{}-", names::PROG_STATE)) && path != link_path {
                std::fs::remove_file(&path).map_err(|e| pin_err(format!("remove {}", path.display()), e))?;
                info!(link = %path.display(), "detached the previous version's program");
                replaced_links.push(path);
            }
        }
    }

    Ok(Attached {
        ebpf,
        pins: pins.clone(),
        reused_maps,
        reused_link,
        replaced_links,
    })
}

/// Loads `tp_btf/inet_sock_set_state` and attaches it; the link stays
/// owned by the program until the caller takes (and pins) it.
fn attach_state_program(ebpf: &mut Ebpf) -> Result<(&mut BtfTracePoint, BtfTracePointLinkId), LoadError> {
    let btf = aya::Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(names::PROG_STATE)
        .ok_or_else(|| pin_err("find the state program", "missing from object"))?
        .try_into()
        .map_err(|e| LoadError::Program {
            what: "open the state program".into(),
            source: Box::new(e),
        })?;
    prog.load("inet_sock_set_state", &btf)
        .map_err(|e| LoadError::Program {
            what: "load tp_btf/inet_sock_set_state".into(),
            source: Box::new(e),
        })?;
    let id = prog.attach().map_err(|e| LoadError::Program {
        what: "attach tp_btf/inet_sock_set_state".into(),
        source: Box::new(e),
    })?;
    Ok((prog, id))
}

/// Loads the adoption iterator from an attached object.
pub fn adoption_iter(ebpf: &mut Ebpf) -> Result<&mut Iter, LoadError> {
    let btf = aya::Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
    let prog: &mut Iter = ebpf
        .program_mut(names::PROG_ADOPT)
        .ok_or_else(|| pin_err("find the adoption program", "missing from object"))?
        .try_into()
        .map_err(|e| LoadError::Program {
            what: "open the adoption program".into(),
            source: Box::new(e),
        })?;
    if prog.fd().is_err() {
        prog.load("tcp", &btf).map_err(|e| LoadError::Program {
            what: "load iter/tcp".into(),
            source: Box::new(e),
        })?;
    }
    Ok(prog)
}

/// Detaches everything and removes every pin under `pins`. Returns the
/// paths removed. Idempotent.
pub fn uninstall(pins: &PinDir) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for dir in [pins.links(), pins.maps()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            std::fs::remove_file(&path)?;
            removed.push(path);
        }
        std::fs::remove_dir(&dir)?;
    }
    if pins.root().exists() {
        std::fs::remove_dir(pins.root())?;
    }
    Ok(removed)
}

/// CLOCK_MONOTONIC now, in the programs' unit.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Loads and attaches the programs without pinning anything, then lets them
/// go: `graceful doctor`'s proof that this kernel takes them.
pub fn trial() -> Result<(), LoadError> {
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    let (skc_state, sk_protocol) = kernel_offsets()?;
    let mut ebpf = EbpfLoader::new()
        .override_global(names::GLOBAL_SKC_STATE_OFFSET, &skc_state, true)
        .override_global(names::GLOBAL_SK_PROTOCOL_OFFSET, &sk_protocol, true)
        .load(OBJECT)
        .map_err(|e| LoadError::Load { source: Box::new(e) })?;
    attach_state_program(&mut ebpf)?;
    adoption_iter(&mut ebpf)?;
    let ingress: &mut CgroupSkb = ebpf
        .program_mut(names::PROG_INGRESS)
        .ok_or_else(|| pin_err("find the ingress program", "missing from object"))?
        .try_into()
        .map_err(|e| LoadError::Program {
            what: "open the ingress program".into(),
            source: Box::new(e),
        })?;
    ingress.load().map_err(|e| LoadError::Program {
        what: "load cgroup_skb/ingress".into(),
        source: Box::new(e),
    })?;
    Ok(())
}
