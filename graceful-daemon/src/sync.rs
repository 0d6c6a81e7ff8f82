//! Locks whose holder panicked. A panic in one task must not take the
//! agent's shared state down with it: the data a panicking holder left is
//! still the best the agent has (a table, an index, a map handle), so every
//! lock is taken through here, which goes on with it and says so once.

use std::{
    panic::Location,
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
};

static WARNED: AtomicBool = AtomicBool::new(false);

/// One warning for the agent's run: a panic that poisons one lock usually
/// poisons it for every later taker.
#[track_caller]
fn recover<G>(e: PoisonError<G>) -> G {
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            at = %Location::caller(),
            "a task panicked holding a lock; going on with what it left (logged once)"
        );
    }
    e.into_inner()
}

/// Locks `m`, whether or not its last holder panicked.
#[track_caller]
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(recover)
}

/// Reads `l`, whether or not its last writer panicked.
#[track_caller]
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(recover)
}

/// Writes `l`, whether or not its last writer panicked.
#[track_caller]
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(recover)
}

#[cfg(test)]
mod tests;
