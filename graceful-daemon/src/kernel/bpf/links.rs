//! Attaching one program of a loaded object: the always-on ones, pinned
//! (tracepoints, and the sock_ops program at the cgroup v2 root), the
//! adoption iterator, and the ingress program on a draining cgroup.

use std::{fs::File, io, path::Path};

use aya::{
    programs::{
        cgroup_skb::CgroupSkbLinkId, links::FdLink, tp_btf::BtfTracePointLinkId, BtfTracePoint,
        CgroupAttachMode, CgroupSkb, CgroupSkbAttachType, Iter, Program, ProgramError, SockOps,
    },
    Ebpf,
};
use graceful_common::names;

use super::error::LoadError;

/// The always-on programs, each with where it attaches. Their links are
/// pinned as `<program>-<fingerprint>`.
pub const STATE: (&str, &str) = (names::PROG_STATE, "inet_sock_set_state");
/// The state program's second copy, for the tracepoint design: it handles
/// the state changes the kernel skips for the first while that one is
/// running on the same CPU.
pub const STATE_TWIN: (&str, &str) = (names::PROG_STATE_TWIN, "inet_sock_set_state");
pub const POPULATED: (&str, &str) = (names::PROG_POPULATED, "cgroup_notify_populated");
/// The state program's backstop at a socket's end (see `destroy.rs`).
pub const DESTROYED: (&str, &str) = (names::PROG_DESTROYED, "tcp_destroy_sock");
/// Every always-on program's name: a link pin of one of them that is not
/// this object's belongs to another version.
pub const ALWAYS_ON: [&str; 5] = [
    names::PROG_STATE,
    names::PROG_STATE_TWIN,
    names::PROG_DESTROYED,
    names::PROG_POPULATED,
    names::PROG_SOCK_OPS,
];

pub fn pin_err(what: impl Into<String>, e: impl std::fmt::Display) -> LoadError {
    LoadError::Pin {
        what: what.into(),
        message: e.to_string(),
    }
}

/// The error of a program step: `what` failed.
pub fn program(what: impl Into<String>) -> impl FnOnce(ProgramError) -> LoadError {
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

/// The kernel's BTF as aya reads it, for the programs whose load names a
/// kernel type (`tp_btf`, `iter`): parsed at the first that needs it and
/// kept for the others of one start. A parse of this machine's 5.5 MB
/// vmlinux BTF takes 20 to 25 ms, and a first start under the sock_ops
/// design loads four such programs.
#[derive(Default)]
pub struct KernelBtf(std::cell::OnceCell<aya::Btf>);

impl KernelBtf {
    pub fn get(&self) -> Result<&aya::Btf, LoadError> {
        if let Some(btf) = self.0.get() {
            return Ok(btf);
        }
        let btf = aya::Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
        Ok(self.0.get_or_init(|| btf))
    }
}

/// Attaches one of the always-on tracepoint programs and pins its link at `path`.
pub fn attach_and_pin(
    ebpf: &mut Ebpf,
    which: (&str, &str),
    path: &Path,
    btf: &KernelBtf,
) -> Result<(), LoadError> {
    let (prog, id) = attach_tp(ebpf, which, btf)?;
    let link: FdLink = prog
        .take_link(id)
        .map_err(program(format!("take the {} link", which.0)))?
        .into();
    pin(link, path)
}

fn pin(link: FdLink, path: &Path) -> Result<(), LoadError> {
    link.pin(path)
        .map_err(|e| pin_err(format!("pin {}", path.display()), e))?;
    Ok(())
}

/// Loads a `tp_btf` program and attaches it to its tracepoint; the link
/// stays owned by the program until the caller takes (and pins) it.
pub fn attach_tp<'a>(
    ebpf: &'a mut Ebpf,
    (name, tracepoint): (&str, &str),
    btf: &KernelBtf,
) -> Result<(&'a mut BtfTracePoint, BtfTracePointLinkId), LoadError> {
    let prog: &mut BtfTracePoint = prog_mut(ebpf, name, name)?;
    prog.load(tracepoint, btf.get()?)
        .map_err(program(format!("load tp_btf/{tracepoint}")))?;
    let id = prog
        .attach()
        .map_err(program(format!("attach tp_btf/{tracepoint}")))?;
    Ok((prog, id))
}

/// Loads the sock_ops program and attaches it to the cgroup v2 root
/// `root`, where it runs for every TCP socket of the node. With `pin`, its
/// link is pinned there; without, it lives as long as the object (doctor's
/// trial).
pub fn attach_sock_ops(ebpf: &mut Ebpf, root: &Path, pin_at: Option<&Path>) -> Result<(), LoadError> {
    let file = open_cgroup(root)?;
    let prog: &mut SockOps = prog_mut(ebpf, names::PROG_SOCK_OPS, "sock_ops")?;
    prog.load().map_err(program("load sockops"))?;
    // A BPF link on a cgroup always runs beside other programs: Single is
    // the mode that passes no flags.
    let id = prog
        .attach(&file, CgroupAttachMode::Single)
        .map_err(program(format!(
            "attach sockops to the cgroup v2 root {}",
            root.display()
        )))?;
    if let Some(path) = pin_at {
        let link: FdLink = prog
            .take_link(id)
            .map_err(program("take the sock_ops link"))?
            .try_into()
            .map_err(|e| pin_err("keep the sock_ops link", e))?;
        pin(link, path)?;
    }
    Ok(())
}

/// Loads the adoption iterator, unless loaded: the attach does, with the
/// BTF its tracepoints parsed. (Only the load needs the kernel's BTF,
/// whose parse costs tens of MiB and milliseconds: not once per namespace.)
pub fn load_adoption_iter(ebpf: &mut Ebpf, btf: &KernelBtf) -> Result<(), LoadError> {
    let prog: &mut Iter = prog_mut(ebpf, names::PROG_ADOPT, "adoption")?;
    if prog.fd().is_err() {
        prog.load("tcp", btf.get()?).map_err(program("load iter/tcp"))?;
    }
    Ok(())
}

/// The adoption iterator of an object, loaded (with a BTF of its own if
/// the attach did not load it).
pub fn adoption_iter(ebpf: &mut Ebpf) -> Result<&mut Iter, LoadError> {
    load_adoption_iter(ebpf, &KernelBtf::default())?;
    prog_mut(ebpf, names::PROG_ADOPT, "adoption")
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
    let file = open_cgroup(dir)?;
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

/// A cgroup directory, to attach a program to.
fn open_cgroup(dir: &Path) -> Result<File, LoadError> {
    File::open(dir).map_err(|source| LoadError::Cgroup {
        path: dir.into(),
        source,
    })
}
