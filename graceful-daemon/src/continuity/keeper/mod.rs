//! The keeper: a small process that owns a duplicate of every listener
//! and held hook of the agent, and outlives it. A crash of the agent
//! (`kill -9`, the OOM killer, a panic) then closes nothing: the keeper
//! starts it again, lends it what it kept, and the agent serves each held
//! hook from its original start, as after a handover.
//!
//! - [`run`]: the keeper process, which the container runs first
//!   (`graceful daemon --keeper on`) and which runs the agent as its child;
//! - [`alone`]: that process as a program of its own, `graceful-keeper`,
//!   which maps only the keeper's code;
//! - [`restarts`]: when it starts the agent again, and when it gives up;
//! - [`store`]: what it keeps, by socket;
//! - [`frames`]: what the agent tells it (deposit, withdraw, a drain's
//!   point, take, settled, given), in the handover's format;
//! - [`link`]: the agent's side, which the registry of
//!   [`crate::continuity::handover::held`] drives;
//! - [`oom`]: the container's group OOM kill turned off, so that an OOM
//!   kill of the agent spares the keeper.
//!
//! What a crash still loses: a connection accepted and not yet held (its
//! request was still being read: `graceful-wait` reconnects, a kubelet's
//! hook fails open), and everything when the keeper itself dies with its
//! container (the keeper turns the container's group OOM kill off, so an
//! OOM kill of the agent is not that: [`oom`]). A held hook's report carries on: each point its drain sees
//! is kept with the hook.

pub mod alone;
pub mod frames;
pub mod link;
pub mod oom;
pub mod restarts;
pub mod run;
pub mod store;

/// The environment variable that names the agent's end of the keeper's
/// socket.
pub const ENV: &str = "GRACEFUL_KEEPER_FD";

/// What `graceful daemon --keeper on` hands [`alone`]'s program: the
/// descriptor of the agent's executable, open across the exec;
const ENV_EXE: &str = "GRACEFUL_KEEPER_EXE_FD";
/// the keeper's scratch directory (the API socket's);
const ENV_SCRATCH: &str = "GRACEFUL_KEEPER_SCRATCH";
/// `--log-format`, as the agent was given it;
const ENV_LOG: &str = "GRACEFUL_KEEPER_LOG_FORMAT";
/// and the agent's version, which must be the keeper's.
const ENV_VERSION: &str = "GRACEFUL_KEEPER_VERSION";
/// Every variable the keeper is started with, which its agent must not
/// inherit.
const ENVS: [&str; 4] = [ENV_EXE, ENV_SCRATCH, ENV_LOG, ENV_VERSION];
