//! The programs attached beside the counting design's own (the sock_ops
//! program, which `loader` attaches first), as a table: each with its
//! design, what the kernel must have for it, and what the agent does
//! without it. `loader::attach` walks it in order.

use std::path::PathBuf;

use aya::Ebpf;
use tracing::{info, warn};

use super::{error::LoadError, links, offsets::Offsets, paths::PinDir};

/// The design an agent counts with, once attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    SockOps,
    Tracepoint,
}

impl Design {
    /// As `--counting` names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Design::SockOps => "sock-ops",
            Design::Tracepoint => "tracepoint",
        }
    }
}

/// One program of the table.
pub struct Program {
    /// Its name in the object and its tracepoint.
    pub which: (&'static str, &'static str),
    /// Attached under this design only; `None`: under both.
    pub only: Option<Design>,
    /// What the kernel lacks that it needs, if anything.
    pub needs: fn(&Offsets) -> Option<String>,
    /// What the agent does without it, said when it cannot be attached;
    /// `None`: the agent cannot start without it.
    pub without: Option<&'static str>,
    /// Under the sock_ops design, it runs for the sockets that carry
    /// storage only, and goes once none is left (see `state_programs`).
    pub for_storage: bool,
}

fn nothing(_: &Offsets) -> Option<String> {
    None
}

/// In the order they are attached.
pub const PROGRAMS: [Program; 4] = [
    // The state program: every count under the tracepoint design; the
    // sockets with storage under the sock_ops one.
    Program {
        which: links::STATE,
        only: None,
        needs: nothing,
        without: None,
        for_storage: true,
    },
    // Its second copy, for the state changes the kernel skips for the
    // first while that one is attached (the tracepoint design).
    Program {
        which: links::STATE_TWIN,
        only: Some(Design::Tracepoint),
        needs: nothing,
        without: None,
        for_storage: false,
    },
    // A backstop, not a requirement: without it a count the state program
    // missed twice stays until the agent restarts and re-adopts.
    Program {
        which: links::DESTROYED,
        only: None,
        needs: nothing,
        without: Some("no backstop at socket destruction: a rarely missed close could leave a count up"),
        for_storage: true,
    },
    // Container exits: a faster path than inotify, not a requirement.
    Program {
        which: links::POPULATED,
        only: None,
        needs: Offsets::exits_missing,
        without: Some("container exits are seen through inotify only, up to 10 ms later"),
        for_storage: false,
    },
];

/// A program of the table, where its link is pinned.
pub struct Placed {
    pub program: &'static Program,
    pub link: PathBuf,
    /// Its link was pinned before: an earlier agent of this build attached it.
    pub existed: bool,
}

/// Attaches and pins the table's programs for `design` that are not
/// attached yet (`fp`: this object's fingerprint, in the pins' names).
/// One that the agent can do without is said and left out.
pub fn attach_all(
    ebpf: &mut Ebpf,
    pins: &PinDir,
    fp: &str,
    design: Design,
    offsets: &Offsets,
    btf: &links::KernelBtf,
) -> Result<Vec<Placed>, LoadError> {
    let mut placed = Vec::new();
    for program in PROGRAMS.iter().filter(|p| p.only.is_none_or(|d| d == design)) {
        let link = pins.link(program.which.0, fp);
        let existed = link.exists();
        if !existed {
            let attached = match (program.needs)(offsets) {
                Some(lacks) => Err(links::pin_err(format!("attach {}", program.which.0), lacks)),
                None => links::attach_and_pin(ebpf, program.which, &link, btf),
            };
            match (attached, program.without) {
                (Ok(()), None) => info!(link = %link.display(), "{} attached", program.which.0),
                (Ok(()), Some(_)) => {}
                (Err(e), None) => return Err(e),
                (Err(e), Some(without)) => warn!(error = %e, "{without}"),
            }
        }
        placed.push(Placed {
            program,
            link,
            existed,
        });
    }
    Ok(placed)
}
