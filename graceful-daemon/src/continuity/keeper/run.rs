//! The keeper process: `graceful daemon --keeper on` becomes it, and runs
//! the agent as its child (the same command, with [`super::ENV`] naming
//! its end of a socket pair). It keeps what the agent deposits, passes
//! SIGTERM and SIGINT on, reaps every child (it may be a container's
//! pid 1), and when the agent crashes starts it again
//! ([`super::restarts`]) and lends it everything kept.
//!
//! It holds no lock, map or pin, and serves nothing: each listener's
//! queue and each held hook's connection simply stay open while no agent
//! runs. The agent dies with it (PR_SET_PDEATHSIG), so no agent outlives
//! its container's first process.

use std::{
    ffi::OsString,
    os::{
        fd::{AsRawFd as _, BorrowedFd},
        unix::process::CommandExt as _,
    },
    time::{Duration, Instant},
};

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::{
    io::{unix::AsyncFd, Interest},
    signal::unix::{signal, SignalKind},
};
use tracing::{error, info, warn};

use super::{
    frames::{self, Op},
    restarts::{death, Death, Next, Restarts},
    store::Store,
};
use crate::continuity::handover::{
    fds::{self, Channel, Received},
    wire::{self, Done, Offer, RecordFrame, VERSION},
};

/// Runs the agent `args` (`graceful daemon`'s command line) under a
/// keeper until it ends; the agent's exit code. `scratch`: a writable
/// directory of the keeper's (the API socket's); `exe`: the agent's
/// executable, as a path the keeper's children can exec.
pub fn run(args: Vec<OsString>, scratch: &std::path::Path, exe: &std::path::Path) -> anyhow::Result<i32> {
    crate::kernel::nofile::raise();
    match super::oom::spare_the_keeper(scratch) {
        Ok(super::oom::Spared::Set(cg)) => info!(
            cgroup = %cg,
            "keeper: the container's memory.oom.group set to 0: an OOM kill of the agent spares the keeper, and cuts no held hook"
        ),
        Ok(super::oom::Spared::AlreadyOff) => {}
        Ok(super::oom::Spared::NoGroupKill) => {}
        Err(e) => warn!(
            error = %e,
            "keeper: cannot turn the container's group OOM kill off: an OOM kill of the agent would take the keeper too, and cut every held hook"
        ),
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(keep(args, exe))
}

/// What one agent's run left.
struct Run {
    code: Option<i32>,
    signal: Option<i32>,
    /// It was told to stop (a signal passed on) or handed the node over.
    told: bool,
}

async fn keep(args: Vec<OsString>, exe: &std::path::Path) -> anyhow::Result<i32> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut chld = signal(SignalKind::child())?;
    let mut store = Store::default();
    let mut restarts = Restarts::default();
    // When the last agent died (CLOCK_MONOTONIC ns): the gates' pause.
    let mut died_ns = 0u64;
    info!(
        pid = std::process::id(),
        "keeper: holds the agent's listeners and held hooks, so that a crash of the agent cuts none"
    );
    loop {
        let (mine, theirs) = fds::pair()?;
        let pid = spawn(exe, &args, theirs.as_fd())?;
        drop(theirs);
        let started = Instant::now();
        let t = store.tally();
        info!(
            agent = pid,
            hooks = t.hooks,
            listeners = t.listeners,
            "keeper: agent started"
        );
        let run = watch(pid, &mine, &mut store, died_ns, &mut term, &mut int, &mut chld).await?;
        let how = death(run.code, run.signal, run.told);
        let how = match how {
            Death::Ended(code) => {
                info!(agent = pid, code, "keeper: the agent ended; so does the keeper");
                return Ok(code);
            }
            Death::Crashed(how) => how,
        };
        died_ns = graceful_common::clock::monotonic_ns();
        let t = store.tally();
        match restarts.after(started.elapsed()) {
            Next::GiveUp => {
                error!(
                    agent = pid,
                    crashes = restarts.count(),
                    hooks = t.hooks,
                    "keeper: the agent {how}, its {}th crash within {} s of its start in a row; the keeper exits so that the kubelet restarts the container (the held hooks fail open)",
                    restarts.count(),
                    super::restarts::STABLE.as_secs()
                );
                return Ok(1);
            }
            Next::Now => warn!(
                agent = pid,
                hooks = t.hooks,
                listeners = t.listeners,
                "keeper: the agent {how}; starting it again now with every held hook and listener kept"
            ),
            Next::After(d) => {
                warn!(
                    agent = pid,
                    crashes = restarts.count(),
                    hooks = t.hooks,
                    after_s = d.as_secs(),
                    "keeper: the agent {how} again soon after its start; starting it again after a pause"
                );
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = term.recv() => return Ok(0),
                    _ = int.recv() => return Ok(0),
                }
            }
        }
    }
}

/// Starts the agent: `exe` with `args`, with `theirs` left open across
/// the exec and named in [`super::ENV`].
fn spawn(exe: &std::path::Path, args: &[OsString], theirs: BorrowedFd<'_>) -> anyhow::Result<u32> {
    let raw = theirs.as_raw_fd();
    let keeper = rustix::process::getpid();
    let mut cmd = std::process::Command::new(exe);
    if let Some(a0) = args.first() {
        cmd.arg0(a0);
    }
    cmd.args(args.iter().skip(1)).env(super::ENV, raw.to_string());
    for env in super::ENVS {
        cmd.env_remove(env);
    }
    // SAFETY: between fork and exec the closure makes only
    // async-signal-safe system calls (fcntl, prctl, setpgid, getppid) on
    // the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            let fd = BorrowedFd::borrow_raw(raw);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // A group of its own: a terminal's Ctrl-C reaches the keeper
            // alone, which passes it on once (a second signal would stop
            // the agent at once, without its httpGet drains).
            rustix::process::setpgid(None, None)?;
            // The keeper died between the fork and the prctl: no agent
            // without its keeper.
            if rustix::process::getppid() != Some(keeper) {
                return Err(std::io::Error::other("the keeper is gone"));
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("keeper: cannot start the agent: {e}"))?;
    // Reaped by `reap`, with every other child: never waited through std.
    Ok(child.id())
}

/// Serves one agent until it dies.
#[allow(clippy::too_many_arguments)]
async fn watch(
    pid: u32,
    chan: &Channel,
    store: &mut Store,
    died_ns: u64,
    term: &mut tokio::signal::unix::Signal,
    int: &mut tokio::signal::unix::Signal,
    chld: &mut tokio::signal::unix::Signal,
) -> anyhow::Result<Run> {
    // SAFETY: `chan` outlives `afd` (both live to this function's end),
    // so the descriptor stays open and the same for the registration.
    let afd = unsafe { AsyncFd::register_with_interest(chan.as_fd().as_raw_fd(), Interest::READABLE) }
        .map_err(|e| anyhow::anyhow!("keeper: cannot watch the agent's socket: {e}"))?;
    let mut told = false;
    let mut open = true;
    let status = loop {
        // A death may have come before the first wait.
        if let Some(st) = reap(pid) {
            break st;
        }
        tokio::select! {
            _ = term.recv() => { told = true; pass(pid, Signal::TERM) }
            _ = int.recv() => { told = true; pass(pid, Signal::INT) }
            _ = chld.recv() => {}
            r = afd.readable(), if open => {
                let mut g = r?;
                let (given, eof) = drain(chan, store, died_ns);
                told |= given;
                open = !eof;
                g.clear_ready();
            }
        }
    };
    // What the agent sent before it died is applied, in order.
    let (given, _) = drain(chan, store, died_ns);
    Ok(Run {
        code: status.exit_status(),
        signal: status.terminating_signal(),
        told: told || given,
    })
}

/// Reaps every child that has ended; the agent's status, if it has.
fn reap(agent: u32) -> Option<rustix::process::WaitStatus> {
    let mut mine = None;
    // wait(2), not waitpid(None): that one waits for the keeper's own
    // process group only, and the agent has a group of its own.
    while let Ok(Some((p, st))) = rustix::process::wait(WaitOptions::NOHANG) {
        if p.as_raw_nonzero().get() as u32 == agent {
            mine = Some(st);
        }
    }
    mine
}

fn pass(pid: u32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// Applies every frame queued; whether the agent handed over, and
/// whether its end is closed.
fn drain(chan: &Channel, store: &mut Store, died_ns: u64) -> (bool, bool) {
    let mut given = false;
    loop {
        match chan.try_recv() {
            Ok(Some(f)) => given |= apply(chan, store, f, died_ns),
            Ok(None) => return (given, true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return (given, false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                warn!(error = %e, "keeper: a frame from the agent could not be read");
                return (given, false);
            }
        }
    }
}

/// One frame; whether it said the node was handed over.
fn apply(chan: &Channel, store: &mut Store, f: Received, died_ns: u64) -> bool {
    let op = match frames::decode(&f.bytes, f.fds.len()) {
        Ok(op) => op,
        Err(e) => {
            warn!("keeper: a frame from the agent is refused: {e}");
            return false;
        }
    };
    match op {
        Op::Deposit { record } => {
            if let Err(e) = store.deposit(record, f.fds) {
                warn!(error = %e, "keeper: cannot keep what the agent deposited");
            }
        }
        Op::Withdraw { dev, ino } => {
            store.withdraw((dev, ino));
        }
        Op::Point { dev, ino, point } => {
            store.point((dev, ino), point);
        }
        Op::Take => {
            if let Err(e) = lend(chan, store, died_ns) {
                warn!(error = %e, "keeper: cannot lend the agent what is kept; it starts with nothing");
            }
        }
        Op::Settled => {
            let gone = store.settle();
            if gone > 0 {
                info!(gone, "keeper: let go of what the agent took and did not keep");
            }
        }
        Op::Given => {
            store.clear();
            info!("keeper: the agent handed the node over; keeping nothing");
            return true;
        }
    }
    false
}

/// Sends everything kept, as a giver would.
fn lend(chan: &Channel, store: &mut Store, died_ns: u64) -> std::io::Result<()> {
    chan.set_timeout(Duration::from_secs(5))?;
    let items = store.lend();
    let offer = Offer {
        version: VERSION,
        pid: std::process::id(),
        agent: env!("CARGO_PKG_VERSION").into(),
        paused_ns: if died_ns == 0 {
            graceful_common::clock::monotonic_ns()
        } else {
            died_ns
        },
        records: items.len() as u32,
    };
    chan.send(&wire::encode(&offer), &[])?;
    for (record, fds) in &items {
        let frame = RecordFrame {
            version: VERSION,
            record: (*record).clone(),
        };
        chan.send(&wire::encode(&frame), fds)?;
    }
    chan.send(
        &wire::encode(&Done {
            version: VERSION,
            records: items.len() as u32,
        }),
        &[],
    )
}
