//! What an agent tells its keeper: frames in the handover's format
//! ([`crate::continuity::handover::wire`]: a length, JSON with the format's version,
//! descriptors beside it), one operation each. The keeper answers only a
//! [`Op::Take`], with the handover's own frames (an offer, one record per
//! thing kept, done), so the agent reads a keeper as it reads a giver.

use graceful_api::Point;
use serde::{Deserialize, Serialize};

use crate::continuity::handover::wire::{self, Record, Versioned, WireError, VERSION};

/// One operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Keep this (its descriptors travel with the frame) until withdrawn.
    Deposit { record: Record },
    /// Let this go: the agent answered or closed it.
    Withdraw { dev: u64, ino: u64 },
    /// A held hook's drain saw this point: its record's progress carries
    /// it on (see [`Record::carry_on`]).
    Point { dev: u64, ino: u64, point: Point },
    /// The agent starts: send it everything kept.
    Take,
    /// The agent has deposited again all it took: what it took and did
    /// not deposit again, it let go.
    Settled,
    /// The agent handed the node to a successor and retires: keep nothing.
    Given,
}

/// A frame to the keeper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToKeeper {
    pub version: u32,
    #[serde(flatten)]
    pub op: Op,
}

impl Versioned for ToKeeper {
    fn version(&self) -> u32 {
        self.version
    }
}

/// A frame's bytes.
pub fn encode(op: Op) -> Vec<u8> {
    wire::encode(&ToKeeper { version: VERSION, op })
}

/// A frame and its descriptors' count, checked to match.
pub fn decode(bytes: &[u8], fds: usize) -> Result<Op, WireError> {
    let f: ToKeeper = wire::decode(bytes)?;
    let want = match &f.op {
        Op::Deposit { record } => record.fds(),
        _ => 0,
    };
    if fds != want {
        return Err(WireError::Fds {
            what: match &f.op {
                Op::Deposit { record } => record.what(),
                _ => "keeper operation",
            },
            got: fds,
            want,
        });
    }
    Ok(f.op)
}

#[cfg(test)]
mod tests;
