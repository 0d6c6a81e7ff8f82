//! Loads the kernel programs, pins their maps and links, and re-adopts the
//! pins of an earlier agent; the one module that decides what is attached
//! (`links.rs` attaches each program).
//!
//! Continuity across restarts and upgrades comes from the pins alone:
//! - the maps are pinned, so counts survive the agent;
//! - the counting programs' links are pinned, so they keep counting while
//!   no agent runs. Their pin names carry the object's fingerprint: an
//!   agent finding its own programs attached leaves them be; an upgraded
//!   agent attaches its programs *before* detaching the old ones, so no
//!   event is missed. The overlap counts nothing twice: the state programs
//!   share each socket's counted flag, and the sock_ops program leaves
//!   alone the sockets that carry their storage.
//!
//! Two designs count new connections (see graceful-ebpf): the sock_ops
//! program at the cgroup v2 root (the default), or the tracepoint design
//! (`--counting tracepoint`, and where sock_ops cannot be attached). Under
//! the first, the state program stays attached for the sockets that carry
//! storage: those adopted at the start, and those an agent of the second
//! design started to track.

use std::path::{Path, PathBuf};

use aya::{
    maps::{Array, MapData},
    Ebpf,
};
use graceful_common::{clock::monotonic_ns, control, names, Meta};
use tracing::{debug, info, warn};

pub use super::error::LoadError;
use super::{
    bpffs,
    error::MapError,
    layout::{self, PinState},
    links::{self, pin_err},
    maps::Control,
    object::{fingerprint, OBJECT},
    offsets::Offsets,
    paths::{PinDir, BPFFS},
    programs,
};

/// How the connections made from now on are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Counting {
    /// The sock_ops program at the cgroup v2 root; the tracepoint design
    /// where it cannot be attached there (another program holds the root
    /// exclusively) or the kernel lacks what it reads.
    #[default]
    Auto,
    /// The sock_ops program, or refuse to start.
    SockOps,
    /// The tracepoint design: a state program and its twin on every state
    /// change, and per-socket storage (graceful 0.1's design; about three
    /// times the cost per connection, and a rare change missed under
    /// softirq load, which the repair pass catches).
    Tracepoint,
}

pub use super::programs::Design;

/// Options for [`attach`].
#[derive(Clone, Debug, Default)]
pub struct AttachOptions {
    /// Remove pins of an incompatible layout instead of refusing to start.
    pub replace_incompatible: bool,
    pub counting: Counting,
    /// The cgroup v2 mount, where the sock_ops program is attached.
    pub cgroup_root: PathBuf,
}

/// The loaded object and what happened while loading it.
pub struct Attached {
    pub ebpf: Ebpf,
    pub pins: PinDir,
    /// The design that counts new connections.
    pub design: Design,
    /// The maps existed already: this agent continues an earlier one's counts.
    pub reused_maps: bool,
    /// The programs that count new connections were already attached (an
    /// agent restart).
    pub reused_link: bool,
    /// Link pins of other versions that this agent detached.
    pub replaced_links: Vec<PathBuf>,
    /// The pins of our programs' links (see [`super::pinned`]).
    pub links: Vec<PathBuf>,
    /// Under the sock_ops design, the state programs' link pins, which go
    /// once no socket carries their storage (see [`super::state_programs`]).
    pub state_links: Vec<PathBuf>,
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

/// Whether this very object's sock_ops program is attached through `pins`
/// (a running agent of the same build): attaching then only reuses what is
/// pinned, and a successor may do it before the node is handed over.
pub fn same_build_attached(pins: &PinDir) -> bool {
    pins.link(names::PROG_SOCK_OPS, &fingerprint()).exists()
}

/// Loads the programs, re-adopting or creating pins, and makes sure the
/// programs that count are attached, in order: the pins checked, the
/// design chosen, the object loaded (and the sock_ops program attached
/// first, under its design), then the table of [`programs`], then the
/// other versions' and designs' programs let go.
pub fn attach(pins: &PinDir, opts: &AttachOptions) -> Result<Attached, LoadError> {
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    prepare_pin_dir(pins)?;
    let reused_maps = pin_state(pins, opts)? == PinState::Compatible;
    let offsets = Offsets::from_kernel()?;
    let fp = fingerprint();

    let ops_link = pins.link(names::PROG_SOCK_OPS, &fp);
    let ops_attached = ops_link.exists();
    let design = choose(pins, opts, &offsets)?;
    let (mut ebpf, design) = load_counting(pins, opts, &offsets, design, reused_maps, &ops_link)?;

    let btf = links::KernelBtf::default();
    let table = programs::attach_all(&mut ebpf, pins, &fp, design, &offsets, &btf)?;
    // With the BTF parsed for the tracepoints, while it is here. Where it
    // fails, adoption tries again and says why, as it did before.
    if let Err(e) = links::load_adoption_iter(&mut ebpf, &btf) {
        debug!(error = %e, "the adoption iterator is not loaded yet");
    }
    // The programs that count new connections were attached already.
    let reused_link = match design {
        Design::SockOps => ops_attached,
        Design::Tracepoint => table
            .iter()
            .filter(|p| p.program.without.is_none())
            .all(|p| p.existed),
    };

    if design == Design::SockOps {
        let others = super::query::foreign_sock_ops(&opts.cgroup_root);
        if !others.is_empty() {
            warn!(
                programs = %others.join(", "),
                "other sock_ops programs run for every socket: one that sets a socket's callback flags without keeping graceful's (STATE_CB, RTO_CB) would make it miss changes"
            );
        }
    }
    // Only now, with our programs running, let any others go: an older
    // version's, and the other design's.
    let mut ours: Vec<&Path> = table.iter().map(|p| p.link.as_path()).collect();
    if design == Design::SockOps {
        ours.push(&ops_link);
    }
    let replaced_links = detach_others(pins, &ours)?;

    let links = ours
        .iter()
        .filter(|p| p.exists())
        .map(|p| p.to_path_buf())
        .collect();

    let state_links = match design {
        Design::SockOps => table
            .iter()
            .filter(|p| p.program.for_storage)
            .map(|p| p.link.clone())
            .collect(),
        Design::Tracepoint => Vec::new(),
    };
    Ok(Attached {
        ebpf,
        pins: pins.clone(),
        design,
        reused_maps,
        reused_link,
        replaced_links,
        links,
        state_links,
    })
}

/// The pins as found: compatible, or empty (none, or replaced: an
/// unfinished start's, or incompatible ones when told to replace them).
fn pin_state(pins: &PinDir, opts: &AttachOptions) -> Result<PinState, LoadError> {
    Ok(match layout::check(pins) {
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
    })
}

/// The design that counts new connections, from `--counting`, what the
/// kernel has, and what is pinned already.
fn choose(pins: &PinDir, opts: &AttachOptions, offsets: &Offsets) -> Result<Design, LoadError> {
    let counting_with_ops = other_links(pins, names::PROG_SOCK_OPS).next().is_some();
    Ok(match (opts.counting, offsets.sock_ops_missing()) {
        (Counting::Tracepoint, _) if counting_with_ops => {
            return Err(pin_err(
                "count with the tracepoint design",
                format!(
                    "the programs pinned in {} count with sock_ops, and the sockets they count carry no \
                     storage for the tracepoint design; run `graceful uninstall` first (live counts are \
                     adopted again, totals restart), or keep the default --counting",
                    pins.root().display()
                ),
            ))
        }
        (Counting::Tracepoint, _) => Design::Tracepoint,
        (Counting::SockOps, Some(why)) => {
            return Err(pin_err(
                "count with sock_ops",
                format!("the kernel's BTF lacks {why}"),
            ))
        }
        (Counting::Auto, Some(why)) => {
            warn!(missing = %why, "counting with the tracepoint design: the sock_ops one needs what this kernel lacks");
            Design::Tracepoint
        }
        (_, None) => Design::SockOps,
    })
}

/// The object loaded for `design`; under the sock_ops design, its program
/// attached first at the cgroup v2 root (at `ops_link`), or, under
/// `--counting auto` where it cannot be, the tracepoint design instead.
fn load_counting(
    pins: &PinDir,
    opts: &AttachOptions,
    offsets: &Offsets,
    design: Design,
    reused_maps: bool,
    ops_link: &Path,
) -> Result<(Ebpf, Design), LoadError> {
    let state_link = pins.link(names::PROG_STATE, &fingerprint());
    Ok(match design {
        Design::Tracepoint => (load(pins, offsets, true, reused_maps)?, Design::Tracepoint),
        Design::SockOps => {
            let mut ebpf = load(pins, offsets, false, reused_maps)?;
            if !reused_maps {
                // New maps: sockets an earlier install flagged may live,
                // counted in maps that are gone. Set before the sock_ops
                // program runs, so that it never uncounts one of them
                // that these maps never counted (see `control::RECOUNT`).
                Control::open(pins)?.set(control::RECOUNT, true)?;
            }
            if !state_link.exists() {
                // The state programs are about to count the sockets with
                // storage (adopted ones, an older design's): the sock_ops
                // program must take such sockets over, not count them
                // beside them (see `state_programs`).
                Control::open(pins)?.set(control::STORAGE, true)?;
            }
            // First, so that nothing new goes uncounted while the earlier
            // design's programs still run (see `sockops.rs`: it leaves
            // their sockets to them).
            match ops_link.exists() {
                true => (ebpf, Design::SockOps),
                false => match links::attach_sock_ops(&mut ebpf, &opts.cgroup_root, Some(ops_link)) {
                    Ok(()) => {
                        info!(link = %ops_link.display(), root = %opts.cgroup_root.display(), "sock_ops attached");
                        (ebpf, Design::SockOps)
                    }
                    Err(e) if opts.counting == Counting::Auto => {
                        warn!(error = %e, "counting with the tracepoint design: the sock_ops program cannot be attached at the cgroup v2 root");
                        drop(ebpf);
                        (load(pins, offsets, true, true)?, Design::Tracepoint)
                    }
                    Err(e) => return Err(e),
                },
            }
        }
    })
}

/// Detaches the link pins of `links::ALWAYS_ON`'s programs that are not
/// `ours`: another version's, or the other design's.
fn detach_others(pins: &PinDir, ours: &[&Path]) -> Result<Vec<PathBuf>, LoadError> {
    let mut replaced_links = Vec::new();
    for path in links::ALWAYS_ON.iter().flat_map(|p| other_links(pins, p)) {
        if !ours.contains(&path.as_path()) {
            std::fs::remove_file(&path).map_err(|e| pin_err(format!("remove {}", path.display()), e))?;
            info!(link = %path.display(), "detached a program of another version or design");
            replaced_links.push(path);
        }
    }

    Ok(replaced_links)
}

/// The link pins of `program` in `pins`, of any version.
fn other_links<'a>(pins: &PinDir, program: &'a str) -> impl Iterator<Item = PathBuf> + 'a {
    std::fs::read_dir(pins.links())
        .into_iter()
        .flatten()
        .flatten()
        .filter(move |e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{program}-"))
        })
        .map(|e| e.path())
}

/// Loads the object with its maps at their pins (`track_new`: for the
/// tracepoint design), and writes the layout record into new maps.
fn load(pins: &PinDir, offsets: &Offsets, track_new: bool, reused_maps: bool) -> Result<Ebpf, LoadError> {
    let map_paths: Vec<(&str, PathBuf)> = PinDir::map_names().iter().map(|n| (*n, pins.map(n))).collect();
    let mut loader = offsets.loader(track_new);
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
    Ok(ebpf)
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
/// why the container-exit program cannot run, if it cannot (not fatal), and
/// why the sock_ops design cannot (the tracepoint one counts instead).
pub fn trial(cgroup_root: &Path) -> Result<Trial, LoadError> {
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject);
    }
    let offsets = Offsets::from_kernel()?;
    let mut ebpf = offsets
        .loader(true)
        .load(OBJECT)
        .map_err(|e| LoadError::Load { source: Box::new(e) })?;
    let btf = links::KernelBtf::default();
    links::attach_tp(&mut ebpf, links::STATE, &btf)?;
    links::attach_tp(&mut ebpf, links::STATE_TWIN, &btf)?;
    links::load_adoption_iter(&mut ebpf, &btf)?;
    links::load_ingress(&mut ebpf)?;
    let exits = match offsets.exits_missing() {
        Some(e) => Some(e),
        None => links::attach_tp(&mut ebpf, links::POPULATED, &btf)
            .err()
            .map(|e| e.to_string()),
    };
    let sock_ops = match offsets.sock_ops_missing() {
        Some(why) => Some(format!("the kernel's BTF lacks {why}")),
        None => links::attach_sock_ops(&mut ebpf, cgroup_root, None)
            .err()
            .map(|e| e.to_string()),
    };
    Ok(Trial { exits, sock_ops })
}

/// What [`trial`] found that does not stop the agent.
pub struct Trial {
    /// Why container exits are seen through inotify only.
    pub exits: Option<String>,
    /// Why the agent would count with the tracepoint design.
    pub sock_ops: Option<String>,
}
