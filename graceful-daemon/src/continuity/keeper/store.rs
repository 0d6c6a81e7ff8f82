//! What the keeper holds: a duplicate of each listener and held hook the
//! agent deposited, by [`Key`], until the agent withdraws it. A deposit
//! of a key already kept replaces it (the agent registers again what it
//! took). What the last agent took is "lent" until the next one says it
//! has settled: then what it did not deposit again goes.

use std::{
    collections::BTreeMap,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
};

use crate::continuity::handover::held::{key_of, Key};
use crate::continuity::handover::wire::Record;
use graceful_api::Point;

struct Kept {
    record: Record,
    fds: Vec<OwnedFd>,
    /// Offered to an agent that has not settled yet.
    lent: bool,
}

/// The keeper's store.
#[derive(Default)]
pub struct Store {
    items: BTreeMap<Key, Kept>,
}

/// What the store holds, for the keeper's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub listeners: usize,
    pub hooks: usize,
}

impl Store {
    /// Keeps `record` with its descriptors (their count checked by the
    /// frame's decoding); returns its key.
    pub fn deposit(&mut self, record: Record, fds: Vec<OwnedFd>) -> std::io::Result<Key> {
        let first = fds
            .first()
            .ok_or_else(|| std::io::Error::other("a deposit with no descriptor"))?;
        let key = key_of(first.as_fd())?;
        self.items.insert(
            key,
            Kept {
                record,
                fds,
                lent: false,
            },
        );
        Ok(key)
    }

    /// Lets `key` go; whether it was kept.
    pub fn withdraw(&mut self, key: Key) -> bool {
        self.items.remove(&key).is_some()
    }

    /// A held hook's drain saw `p`; whether it is kept.
    pub fn point(&mut self, key: Key, p: Point) -> bool {
        self.items.get_mut(&key).map(|k| k.record.carry_on(p)).is_some()
    }

    /// Everything kept, listeners first, each marked lent: what an agent
    /// that starts takes.
    pub fn lend(&mut self) -> Vec<(&Record, Vec<BorrowedFd<'_>>)> {
        for k in self.items.values_mut() {
            k.lent = true;
        }
        let (listeners, hooks): (Vec<&Kept>, Vec<&Kept>) =
            self.items.values().partition(|k| Record::is_listener(&k.record));
        listeners
            .into_iter()
            .chain(hooks)
            .map(|k| (&k.record, k.fds.iter().map(|f| f.as_fd()).collect()))
            .collect()
    }

    /// The agent settled: what it took and did not deposit again goes.
    /// Returns how many went.
    pub fn settle(&mut self) -> usize {
        let before = self.items.len();
        self.items.retain(|_, k| !k.lent);
        before - self.items.len()
    }

    /// Keeps nothing more (the node was handed over).
    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn tally(&self) -> Tally {
        let listeners = self
            .items
            .values()
            .filter(|k| Record::is_listener(&k.record))
            .count();
        Tally {
            listeners,
            hooks: self.items.len() - listeners,
        }
    }
}

#[cfg(test)]
mod tests;
