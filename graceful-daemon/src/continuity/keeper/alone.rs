//! The keeper as a program of its own, `graceful-keeper`, installed beside
//! `graceful`. `graceful daemon --keeper on` execs it in its own process
//! (the container's first process stays that one), and it runs the agent
//! from the very executable that exec'd it: a descriptor of it is handed
//! over, so a file replaced on disk since is never what restarts.
//!
//! Why a program of its own: the keeper stays up beside the agent on
//! every node, and a process maps whatever code it touches, 64 KiB around
//! each page it faults in. In the agent's 21 MB executable the keeper was
//! 7.6 MiB VmRSS (6.9 MiB of it the agent's code); as this 3.7 MB one,
//! 2.1 MiB (`cargo xtask bench memory`, its keeper phase).
//!
//! Where `graceful-keeper` is not beside `graceful` (a hand-copied binary),
//! the keeper runs in the agent's executable as before, and says so.

use std::{
    ffi::OsString,
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    path::{Path, PathBuf},
};

use crate::logging::LogFormat;

use super::{ENV_EXE, ENV_LOG, ENV_SCRATCH, ENV_VERSION};

/// The program's name, beside `graceful`.
pub const PROGRAM: &str = "graceful-keeper";

/// `graceful-keeper` beside this executable, if it is there.
pub fn beside_this() -> Option<PathBuf> {
    let keeper = std::env::current_exe().ok()?.with_file_name(PROGRAM);
    keeper.is_file().then_some(keeper)
}

/// Becomes `keeper` (returns only if the exec failed, and then closes
/// what it opened): `args` is this process's command line, which the
/// keeper runs as its agent.
pub fn exec(keeper: &Path, args: &[OsString], scratch: &Path, format: LogFormat) -> anyhow::Error {
    // Open without O_CLOEXEC: the keeper inherits it.
    let exe = match rustix::fs::open(
        "/proc/self/exe",
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) => return anyhow::anyhow!("keeper: cannot open this executable for {PROGRAM}: {e}"),
    };
    let format = match format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    let mut cmd = std::process::Command::new(keeper);
    if let Some(a0) = args.first() {
        cmd.arg0(a0);
    }
    let e = cmd
        .args(args.iter().skip(1))
        .env(ENV_EXE, exe.as_raw_fd().to_string())
        .env(ENV_SCRATCH, scratch)
        .env(ENV_LOG, format)
        .env(ENV_VERSION, crate::VERSION)
        .exec();
    anyhow::anyhow!("keeper: cannot exec {}: {e}", keeper.display())
}

/// `graceful-keeper`'s main: the exit code.
pub fn main() -> i32 {
    let format = match std::env::var(ENV_LOG).as_deref() {
        Ok("json") => LogFormat::Json,
        _ => LogFormat::Text,
    };
    crate::logging::init(format);
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{PROGRAM}: {e:#}");
            1
        }
    }
}

// What a person who runs `graceful-keeper` by hand gets: `--help` and
// `--version` (parsed only then: the keeper's own command line is its
// agent's).
#[derive(clap::Parser)]
#[command(name = PROGRAM, version = crate::VERSION)]
/// The keeper of graceful's agent, which `graceful daemon --keeper on` execs:
/// it runs that command as its child, keeps a duplicate of every listener
/// and held hook the agent deposits, and starts it again after a crash.
/// Not run by hand.
struct ByHand {}

fn run() -> anyhow::Result<i32> {
    let (Some(fd), Some(scratch)) = (std::env::var_os(ENV_EXE), std::env::var_os(ENV_SCRATCH)) else {
        <ByHand as clap::Parser>::parse();
        anyhow::bail!(
            "started by `graceful daemon --keeper on`, not by hand: it runs that command as its agent"
        );
    };
    let fd: i32 = fd
        .to_str()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{ENV_EXE} is no descriptor: {fd:?}"))?;
    // SAFETY: the descriptor was opened for this process by the exec'ing
    // `graceful` and nothing else here owns it.
    let exe = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // Kept open for the keeper's life, closed in its agents: exec opens
    // /proc/self/fd/N before it closes the descriptors marked so.
    rustix::io::fcntl_setfd(&exe, rustix::io::FdFlags::CLOEXEC)?;
    // Built apart, the two could differ; a keeper of another wire format
    // would refuse each deposit, and the next crash would cut every held
    // hook. Said now, when nothing is held yet.
    let theirs = std::env::var(ENV_VERSION).unwrap_or_default();
    if theirs != crate::VERSION {
        anyhow::bail!(
            "this is graceful-keeper {} and the graceful beside it is {theirs:?}: install the two from one build",
            crate::VERSION
        );
    }
    let agent = PathBuf::from(format!("/proc/self/fd/{fd}"));
    super::run::run(std::env::args_os().collect(), Path::new(&scratch), &agent)
}
