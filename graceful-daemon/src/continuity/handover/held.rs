//! What a handover carries, registered as it comes and goes: the gate's
//! listener, each pod's httpGet listener, and each held hook, each with a
//! duplicate of its descriptors. The servers answer a held hook only
//! through [`Hold::release`], which a handover's freeze stops: every hook
//! is answered exactly once, by this agent before the freeze or by the
//! taker after it.
//!
//! Given a [`Mirror`] (the agent's keeper, see `crate::continuity::keeper`), the
//! registry mirrors itself there: each entry is deposited as it comes and
//! withdrawn as it goes, so a crash of this agent leaves the mirror
//! holding exactly what it held.
//!
//! A freeze first stops the accept loops ([`Registry::accepting`]) and
//! waits for the connections already accepted to become held hooks or to
//! end ([`Admission`]): no hook is between the two agents.

use std::{
    collections::BTreeMap,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::watch;

use graceful_api::Point;

use super::wire::{Endpoint, Record};
use crate::sync;

/// A socket's identity in every process that holds it: its first
/// descriptor's device and inode.
pub type Key = (u64, u64);

/// The key of the socket (or any file) `fd` opens.
pub fn key_of(fd: BorrowedFd<'_>) -> std::io::Result<Key> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// Where the registry mirrors itself: each call is made under the
/// registry's lock, in the registry's order.
pub trait Mirror: Send + Sync {
    /// Keep a duplicate of `fds` (what `record` names); its key, if kept.
    fn deposit(&self, record: &Record, fds: &[BorrowedFd<'_>]) -> Option<Key>;
    /// Let `key` go: answered or closed here.
    fn withdraw(&self, key: Key);
    /// `key`'s drain saw `point` (see [`Record::carry_on`]).
    fn point(&self, key: Key, point: Point);
    /// Everything taken at the start is registered again.
    fn settled(&self);
    /// The node is handed over: keep nothing.
    fn given(&self);
}

/// What the servers register, and what a handover snapshots.
pub struct Registry {
    inner: Mutex<Inner>,
    /// Whether the accept loops accept (false while a handover runs).
    accepting: watch::Sender<bool>,
    /// Whether held hooks may be answered here (see [`Freeze`]).
    answering: watch::Sender<Freeze>,
    /// Where the entries are mirrored (this agent's keeper).
    keeper: Option<Arc<dyn Mirror>>,
}

/// Whether this agent answers its held hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freeze {
    /// It does.
    Open,
    /// A handover runs: a hook that releases now waits for its outcome.
    Frozen,
    /// Handed over: the taker answers every hook this one held.
    Given,
}

#[derive(Default)]
struct Inner {
    next: u64,
    listeners: BTreeMap<String, Entry>,
    hooks: BTreeMap<u64, Entry>,
    /// Connections accepted that are neither held nor ended.
    admitting: usize,
}

struct Entry {
    record: Record,
    fds: Vec<OwnedFd>,
    /// Its key in the keeper, once deposited there.
    kept: Option<Key>,
}

/// One thing to hand over, with duplicates of its descriptors.
pub struct Item {
    pub record: Record,
    pub fds: Vec<OwnedFd>,
}

impl Item {
    pub fn borrowed(&self) -> Vec<BorrowedFd<'_>> {
        self.fds.iter().map(|f| f.as_fd()).collect()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            inner: Mutex::default(),
            accepting: watch::Sender::new(true),
            answering: watch::Sender::new(Freeze::Open),
            keeper: None,
        }
    }
}

/// The key of a pod's own gate (one per pod: httpGet or socket).
fn pod_key(uid: &str) -> String {
    format!("http/{uid}")
}

const GATE_KEY: &str = "gate";

fn dup(fds: &[BorrowedFd<'_>]) -> std::io::Result<Vec<OwnedFd>> {
    fds.iter().map(|f| f.try_clone_to_owned()).collect()
}

impl Registry {
    pub fn new() -> Arc<Registry> {
        Arc::new(Registry::default())
    }

    /// A registry that mirrors itself in `keeper`.
    pub fn kept_by(keeper: Option<Arc<dyn Mirror>>) -> Arc<Registry> {
        Arc::new(Registry {
            keeper,
            ..Registry::default()
        })
    }

    /// Deposits `record` in the keeper (called under the lock, so that the
    /// keeper sees deposits and withdrawals in the registry's order).
    fn deposit(&self, record: &Record, fds: &[OwnedFd]) -> Option<Key> {
        let k = self.keeper.as_ref()?;
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        k.deposit(record, &borrowed)
    }

    fn withdraw(&self, entry: Option<Entry>) {
        if let (Some(k), Some(key)) = (&self.keeper, entry.and_then(|e| e.kept)) {
            k.withdraw(key);
        }
    }

    /// Everything taken at the start is registered again: the keeper lets
    /// go of what was not.
    pub fn settled(&self) {
        if let Some(k) = &self.keeper {
            k.settled();
        }
    }

    /// The accept loops' switch: they accept only while it reads true.
    pub fn accepting(&self) -> watch::Receiver<bool> {
        self.accepting.subscribe()
    }

    /// The gate's listener, at `path`.
    pub fn gate_listener(&self, path: &str, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let record = Record::GateListener { path: path.into() };
        self.put_listener(GATE_KEY.into(), record, &[fd])
    }

    /// Pod `uid`'s own gate at `at` (its httpGet listener, or its socket
    /// gate), in namespace `netns`.
    pub fn pod_listener(
        &self,
        uid: &str,
        pod: &str,
        at: Endpoint,
        listener: BorrowedFd<'_>,
        netns: BorrowedFd<'_>,
    ) -> std::io::Result<()> {
        let key = pod_key(uid);
        let (uid, pod) = (uid.to_string(), pod.to_string());
        let record = match at {
            Endpoint::Port(port) => Record::HttpListener { uid, pod, port },
            Endpoint::Socket => Record::PodSocket { uid, pod },
        };
        self.put_listener(key, record, &[listener, netns])
    }

    /// Pod `uid`'s own gate closed.
    pub fn pod_listener_closed(&self, uid: &str) {
        let mut g = sync::lock(&self.inner);
        let gone = g.listeners.remove(&pod_key(uid));
        self.withdraw(gone);
    }

    fn put_listener(&self, key: String, record: Record, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        let fds = dup(fds)?;
        let mut g = sync::lock(&self.inner);
        let kept = self.deposit(&record, &fds);
        let old = g.listeners.insert(key, Entry { record, fds, kept });
        // Another socket under the same name: the old one goes.
        if old.as_ref().and_then(|o| o.kept) != kept {
            self.withdraw(old);
        }
        Ok(())
    }

    /// A connection accepted: counted until it is held or ends.
    pub fn admit(self: &Arc<Self>) -> Arc<Admission> {
        sync::lock(&self.inner).admitting += 1;
        Arc::new(Admission {
            registry: self.clone(),
            settled: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// A hook that waits for its drain, with its connection: from now on
    /// it is answered through [`Hold::release`]. Settles `admission`.
    pub fn hold(
        self: &Arc<Self>,
        record: Record,
        conn: BorrowedFd<'_>,
        admission: &Admission,
    ) -> std::io::Result<Hold> {
        let fds = dup(&[conn])?;
        let id = {
            let mut g = sync::lock(&self.inner);
            g.next += 1;
            let id = g.next;
            let kept = self.deposit(&record, &fds);
            g.hooks.insert(id, Entry { record, fds, kept });
            id
        };
        admission.settle();
        Ok(Hold {
            registry: self.clone(),
            id: Some(id),
        })
    }

    /// A hook held already by the agent before this one (handed over or
    /// kept), with its connection: admitted and held at once.
    pub fn resume(self: &Arc<Self>, record: Record, conn: BorrowedFd<'_>) -> Option<Hold> {
        let admission = self.admit();
        self.hold(record, conn, &admission).ok()
    }

    /// Whether this agent writes to its held hooks now (no handover runs).
    pub fn answering(&self) -> bool {
        *self.answering.borrow() == Freeze::Open
    }

    /// How many hooks are held now.
    pub fn held(&self) -> usize {
        sync::lock(&self.inner).hooks.len()
    }

    /// Stops accepting, waits (at most `settle`) for accepted connections
    /// to be held or to end, freezes the answers, and returns everything
    /// to hand over: listeners first, then hooks. The second value is how
    /// many connections were still being admitted at the bound (they are
    /// not handed over, and end with this agent).
    pub async fn freeze(&self, settle: Duration) -> std::io::Result<(Vec<Item>, usize)> {
        self.accepting.send_replace(false);
        let deadline = tokio::time::Instant::now() + settle;
        while sync::lock(&self.inner).admitting > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let g = sync::lock(&self.inner);
        self.answering.send_replace(Freeze::Frozen);
        let mut items = Vec::with_capacity(g.listeners.len() + g.hooks.len());
        for e in g.listeners.values().chain(g.hooks.values()) {
            items.push(Item {
                record: e.record.clone(),
                fds: e.fds.iter().map(|f| f.try_clone()).collect::<Result<_, _>>()?,
            });
        }
        Ok((items, g.admitting))
    }

    /// The handover failed or was refused: answer and accept again.
    pub fn thaw(&self) {
        self.answering.send_replace(Freeze::Open);
        self.accepting.send_replace(true);
    }

    /// The handover is done: nothing is answered or accepted here again,
    /// and the keeper keeps nothing (the taker's keeper does).
    pub fn give(&self) {
        self.answering.send_replace(Freeze::Given);
        if let Some(k) = &self.keeper {
            k.given();
        }
    }
}

/// A connection being admitted (see [`Registry::admit`]).
pub struct Admission {
    registry: Arc<Registry>,
    settled: std::sync::atomic::AtomicBool,
}

impl Admission {
    /// Held, or answered without a drain: no longer admitting.
    pub fn settle(&self) {
        if !self.settled.swap(true, std::sync::atomic::Ordering::AcqRel) {
            sync::lock(&self.registry.inner).admitting -= 1;
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.settle();
    }
}

/// A held hook's place in the registry; leaves it when dropped (the hook
/// went away) or released.
pub struct Hold {
    registry: Arc<Registry>,
    id: Option<u64>,
}

impl Hold {
    /// Where this hook's drain reports its points, so that what its
    /// report has so far goes with it to a successor or a keeper.
    pub fn progress(&self) -> Progress {
        Progress {
            registry: self.registry.clone(),
            id: self.id,
        }
    }

    /// Waits until this agent may answer the hook, and takes it out of
    /// the registry: at once unless a handover runs; after a refused one,
    /// once it is thawed; never once handed over (the taker answers).
    pub async fn release(mut self) {
        let mut rx = self.registry.answering.subscribe();
        loop {
            {
                let mut g = sync::lock(&self.registry.inner);
                if *rx.borrow_and_update() == Freeze::Open {
                    if let Some(id) = self.id.take() {
                        let gone = g.hooks.remove(&id);
                        self.registry.withdraw(gone);
                    }
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

/// A held hook's drain's points, carried on in its record (see
/// [`Hold::progress`]); cheap to clone.
#[derive(Clone)]
pub struct Progress {
    registry: Arc<Registry>,
    id: Option<u64>,
}

impl Progress {
    /// The drain saw `p`. Under the registry's lock, as every change the
    /// keeper mirrors.
    pub fn point(&self, p: &Point) {
        let Some(id) = self.id else { return };
        let mut g = sync::lock(&self.registry.inner);
        let Some(e) = g.hooks.get_mut(&id) else { return };
        if e.record.carry_on(*p) {
            if let (Some(k), Some(key)) = (&self.registry.keeper, e.kept) {
                k.point(key, *p);
            }
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let given = *self.registry.answering.borrow() == Freeze::Given;
            // Handed over: the entry is the taker's now, and this agent is
            // about to go; leave the registry as it is.
            if !given {
                let mut g = sync::lock(&self.registry.inner);
                let gone = g.hooks.remove(&id);
                self.registry.withdraw(gone);
            }
        }
    }
}
