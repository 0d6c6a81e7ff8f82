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

use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
};

use aya::{
    maps::{Array, MapData},
    programs::{
        cgroup_skb::CgroupSkbLinkId, links::FdLink, tp_btf::BtfTracePointLinkId, BtfTracePoint,
        CgroupAttachMode, CgroupSkb, CgroupSkbAttachType, Iter, Program, ProgramError,
    },
    Ebpf, EbpfLoader,
};
use graceful_common::{clock::monotonic_ns, names, Meta};
use tracing::{info, warn};

use super::{
    bpffs,
    btf::Btf,
    error::MapError,
    layout::{self, PinState},
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
    Layout(#[from] MapError),
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
    #[error("cannot open cgroup {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
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
    /// The pins of our programs' links (see [`super::pinned`]).
    pub links: Vec<PathBuf>,
}

/// Offsets the programs read, from the running kernel's BTF.
struct Offsets {
    skc_state: u32,
    sk_protocol: u32,
    /// For `cgroup_populated`: `cgroup.kn`, `cgroup.root`, `kernfs_node.id`,
    /// `cgroup_root.hierarchy_id`. `Err` says why they could not be found;
    /// then container exits are seen through inotify only.
    cgroup: Result<[u32; 4], String>,
}

impl Offsets {
    fn from_kernel() -> Result<Self, LoadError> {
        let btf = Btf::from_sys_fs()?;
        let cgroup = (|| {
            Ok::<_, super::btf::BtfError>([
                btf.member_offset("cgroup", "kn")?,
                btf.member_offset("cgroup", "root")?,
                btf.member_offset("kernfs_node", "id")?,
                btf.member_offset("cgroup_root", "hierarchy_id")?,
            ])
        })()
        .map_err(|e| e.to_string());
        Ok(Self {
            skc_state: btf.member_offset("sock_common", "skc_state")?,
            sk_protocol: btf.member_offset("sock", "sk_protocol")?,
            cgroup,
        })
    }

    /// A loader with every offset set as a global.
    fn loader(&self) -> EbpfLoader<'_> {
        let mut loader = EbpfLoader::new();
        loader
            .override_global(names::GLOBAL_SKC_STATE_OFFSET, &self.skc_state, true)
            .override_global(names::GLOBAL_SK_PROTOCOL_OFFSET, &self.sk_protocol, true);
        if let Ok([kn, root, id, hierarchy]) = &self.cgroup {
            loader
                .override_global(names::GLOBAL_CGROUP_KN_OFFSET, kn, true)
                .override_global(names::GLOBAL_CGROUP_ROOT_OFFSET, root, true)
                .override_global(names::GLOBAL_KERNFS_NODE_ID_OFFSET, id, true)
                .override_global(names::GLOBAL_ROOT_HIERARCHY_ID_OFFSET, hierarchy, true);
        }
        loader
    }
}

/// The programs attached for as long as graceful is installed, each with
/// its tracepoint. Their links are pinned as `<program>-<fingerprint>`.
const STATE: (&str, &str) = (names::PROG_STATE, "inet_sock_set_state");
/// The state program's second copy: it handles the state changes the kernel
/// skips for the first while that one is running on the same CPU.
const STATE_TWIN: (&str, &str) = (names::PROG_STATE_TWIN, "inet_sock_set_state");
const POPULATED: (&str, &str) = (names::PROG_POPULATED, "cgroup_notify_populated");
/// The state program's backstop at a socket's end (see `destroy.rs`).
const DESTROYED: (&str, &str) = (names::PROG_DESTROYED, "tcp_destroy_sock");

fn pin_err(what: impl Into<String>, e: impl std::fmt::Display) -> LoadError {
    LoadError::Pin {
        what: what.into(),
        message: e.to_string(),
    }
}

/// The error of a program step: `what` failed.
fn program(what: impl Into<String>) -> impl FnOnce(ProgramError) -> LoadError {
    let what = what.into();
    move |e| LoadError::Program {
        what,
        source: Box::new(e),
    }
}

/// The object's program `name` as its kind; `what` names it in errors.
fn prog_mut<'a, T>(ebpf: &'a mut Ebpf, name: &str, what: &str) -> Result<&'a mut T, LoadError>
where
    &'a mut T: TryFrom<&'a mut Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| pin_err(format!("find the {what} program"), "missing from object"))?
        .try_into()
        .map_err(program(format!("open the {what} program")))
}

/// Prepares the bpffs and the pin directory.
pub fn prepare_pin_dir(pins: &PinDir) -> Result<(), LoadError> {
    if pins.root().starts_with(BPFFS) && bpffs::ensure_mounted(Path::new(BPFFS)).map_err(LoadError::Bpffs)? {
        // Counting works on it; only a restart loses what it counted.
        let residence = bpffs::residence(pins.root());
        if residence.loses_pins() {
            warn!("{}", residence.describe());
        } else {
            info!(bpffs = BPFFS, "mounted the bpffs");
        }
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
        // Maps are pinned before the record is written and programs are
        // attached after it: an earlier agent died in between, and its
        // maps never counted anything.
        Err(e @ MapError::Unwritten { .. }) => {
            warn!(error = %e, "an earlier agent died while starting; replacing its pins");
            clear(pins).map_err(|e| pin_err("remove the pins of an unfinished start", e))?;
            prepare_pin_dir(pins)?;
            PinState::Empty
        }
        Err(e) if opts.replace_incompatible => {
            warn!(error = %e, "replacing incompatible pins; live counts will be re-adopted, totals restart");
            clear(pins).map_err(|e| pin_err("remove incompatible pins", e))?;
            prepare_pin_dir(pins)?;
            PinState::Empty
        }
        Err(e) => return Err(e.into()),
    };
    let reused_maps = state == PinState::Compatible;

    let offsets = Offsets::from_kernel()?;
    let map_paths: Vec<(&str, PathBuf)> = PinDir::map_names().iter().map(|n| (*n, pins.map(n))).collect();
    let mut loader = offsets.loader();
    for (name, path) in &map_paths {
        loader.map_pin_path(name, path.as_path());
    }
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
    let twin_path = pins.link(names::PROG_STATE_TWIN, &fp);
    let reused_link = link_path.exists() && twin_path.exists();
    for (which, path) in [(STATE, &link_path), (STATE_TWIN, &twin_path)] {
        if !path.exists() {
            attach_and_pin(&mut ebpf, which, path)?;
            info!(link = %path.display(), "{} attached", which.0);
        }
    }
    // A backstop, not a requirement: without it a count the state program
    // missed twice stays until the agent restarts and re-adopts.
    let destroy_link = pins.link(names::PROG_DESTROYED, &fp);
    if !destroy_link.exists() {
        if let Err(e) = attach_and_pin(&mut ebpf, DESTROYED, &destroy_link) {
            warn!(error = %e, "no backstop at socket destruction: a rarely missed close could leave a count up");
        }
    }
    // Container exits: a faster path than inotify, not a requirement.
    let exits_link = pins.link(names::PROG_POPULATED, &fp);
    let exits = match &offsets.cgroup {
        Err(e) => Err(e.clone()),
        Ok(_) if exits_link.exists() => Ok(()),
        Ok(_) => attach_and_pin(&mut ebpf, POPULATED, &exits_link).map_err(|e| e.to_string()),
    };
    if let Err(e) = exits {
        warn!(error = %e, "container exits are seen through inotify only, up to 10 ms later");
    }

    // Only now, with our programs running, let any older ones go.
    let mut replaced_links = Vec::new();
    let ours = [
        link_path.as_path(),
        twin_path.as_path(),
        destroy_link.as_path(),
        exits_link.as_path(),
    ];
    if let Ok(dir) = std::fs::read_dir(pins.links()) {
        for entry in dir.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let known = [
                names::PROG_STATE,
                names::PROG_STATE_TWIN,
                names::PROG_DESTROYED,
                names::PROG_POPULATED,
            ]
            .iter()
            .any(|p| name.starts_with(&format!("{p}-")));
            if known && !ours.contains(&path.as_path()) {
                std::fs::remove_file(&path).map_err(|e| pin_err(format!("remove {}", path.display()), e))?;
                info!(link = %path.display(), "detached the previous version's program");
                replaced_links.push(path);
            }
        }
    }

    let links = ours
        .iter()
        .filter(|p| p.exists())
        .map(|p| p.to_path_buf())
        .collect();

    Ok(Attached {
        ebpf,
        pins: pins.clone(),
        reused_maps,
        reused_link,
        replaced_links,
        links,
    })
}

/// Attaches one of the always-on programs and pins its link at `path`.
fn attach_and_pin(ebpf: &mut Ebpf, which: (&str, &str), path: &Path) -> Result<(), LoadError> {
    let (prog, id) = attach_tp(ebpf, which)?;
    let link: FdLink = prog
        .take_link(id)
        .map_err(program(format!("take the {} link", which.0)))?
        .into();
    link.pin(path)
        .map_err(|e| pin_err(format!("pin {}", path.display()), e))?;
    Ok(())
}

/// Loads a `tp_btf` program and attaches it to its tracepoint; the link
/// stays owned by the program until the caller takes (and pins) it.
fn attach_tp<'a>(
    ebpf: &'a mut Ebpf,
    (name, tracepoint): (&str, &str),
) -> Result<(&'a mut BtfTracePoint, BtfTracePointLinkId), LoadError> {
    let btf = aya::Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
    let prog: &mut BtfTracePoint = prog_mut(ebpf, name, name)?;
    prog.load(tracepoint, &btf)
        .map_err(program(format!("load tp_btf/{tracepoint}")))?;
    let id = prog
        .attach()
        .map_err(program(format!("attach tp_btf/{tracepoint}")))?;
    Ok((prog, id))
}

/// Loads the adoption iterator from an attached object, the first time;
/// later calls return it as loaded. (Only the load needs the kernel's BTF,
/// whose parse costs tens of MiB and milliseconds: not once per namespace.)
fn adoption_iter(ebpf: &mut Ebpf) -> Result<&mut Iter, LoadError> {
    let prog: &mut Iter = prog_mut(ebpf, names::PROG_ADOPT, "adoption")?;
    if prog.fd().is_err() {
        let btf = aya::Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
        prog.load("tcp", &btf).map_err(program("load iter/tcp"))?;
    }
    Ok(prog)
}

/// Opens an instance of the adoption iterator (loading it the first
/// time). It walks the sockets of the calling thread's network namespace,
/// taken now: reading it later, from anywhere, walks that namespace. The
/// outer error is the program's; the inner one the namespace's.
pub fn open_iter(ebpf: &mut Ebpf) -> Result<io::Result<File>, LoadError> {
    let prog = adoption_iter(ebpf)?;
    let open = |prog: &mut Iter| {
        let id = prog.attach().map_err(io::Error::other)?;
        let link = prog.take_link(id).map_err(io::Error::other)?;
        link.into_file().map_err(io::Error::other)
    };
    Ok(open(prog))
}

/// Loads the inbound-payload program (`cgroup_skb/ingress`), attached to a
/// draining scope's cgroup for the length of a quiet drain only.
pub fn load_ingress(ebpf: &mut Ebpf) -> Result<(), LoadError> {
    let prog: &mut CgroupSkb = prog_mut(ebpf, names::PROG_INGRESS, "ingress")?;
    prog.load().map_err(program("load cgroup_skb/ingress"))
}

/// Attaches the loaded ingress program to the cgroup directory `dir`.
pub fn attach_ingress(ebpf: &mut Ebpf, dir: &Path) -> Result<CgroupSkbLinkId, LoadError> {
    let file = File::open(dir).map_err(|source| LoadError::Cgroup {
        path: dir.into(),
        source,
    })?;
    let prog: &mut CgroupSkb = prog_mut(ebpf, names::PROG_INGRESS, "ingress")?;
    // A BPF link takes no attach flags, and links on a cgroup always run
    // beside other programs: Single is the mode that passes no flags.
    prog.attach(&file, CgroupSkbAttachType::Ingress, CgroupAttachMode::Single)
        .map_err(program("attach cgroup_skb/ingress"))
}

/// Detaches the ingress program from the cgroup `link` attached it to.
pub fn detach_ingress(ebpf: &mut Ebpf, link: CgroupSkbLinkId) -> Result<(), LoadError> {
    let prog: &mut CgroupSkb = prog_mut(ebpf, names::PROG_INGRESS, "ingress")?;
    prog.detach(link).map_err(program("detach cgroup_skb/ingress"))
}

/// Detaches everything and removes every pin under `pins`, and the
/// directory itself. Returns the paths removed. Idempotent.
pub fn uninstall(pins: &PinDir) -> std::io::Result<Vec<PathBuf>> {
    let removed = clear(pins)?;
    if pins.root().exists() {
        std::fs::remove_dir(pins.root())?;
    }
    Ok(removed)
}

/// Removes every pin under `pins` but keeps the directory: the running
/// agent's lock is on it (see `agent::claim`).
fn clear(pins: &PinDir) -> std::io::Result<Vec<PathBuf>> {
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
    Ok(removed)
}

/// Loads and attaches the programs without pinning anything, then lets them
/// go: `graceful doctor`'s proof that this kernel takes them. `Ok` carries
/// why the container-exit program cannot run, if it cannot (not fatal).
pub fn trial() -> Result<Option<String>, LoadError> {
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    let offsets = Offsets::from_kernel()?;
    let mut ebpf = offsets
        .loader()
        .load(OBJECT)
        .map_err(|e| LoadError::Load { source: Box::new(e) })?;
    attach_tp(&mut ebpf, STATE)?;
    attach_tp(&mut ebpf, STATE_TWIN)?;
    adoption_iter(&mut ebpf)?;
    load_ingress(&mut ebpf)?;
    let exits = match offsets.cgroup {
        Err(e) => Some(e),
        Ok(_) => attach_tp(&mut ebpf, POPULATED).err().map(|e| e.to_string()),
    };
    Ok(exits)
}
