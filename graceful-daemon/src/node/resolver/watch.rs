//! Keeps a [`PodIndex`] current from inotify on the cgroup tree.
//!
//! Every cgroup directory is watched for child directories created and
//! deleted. A pod appears anywhere (kind and k3s nest the kubepods tree
//! under other roots, a kind node seen from the host sits below a docker
//! scope), and cgroups below a container are that container's (CRI-O runs
//! its processes in a nested `container` child), so no subtree can be left
//! out. One watch costs about a kilobyte of kernel memory; a node with 500
//! pods of 4 containers has some 3000 cgroups.
//!
//! A new directory is watched first and listed second, so a child created
//! in between is either listed or reported. A queue overflow (events were
//! lost) triggers a full rescan, and so does a timer, as a safety net only.
//!
//! The daemon reads the index through a [`Resolver`] (a snapshot behind a
//! lock, held only to copy out what is needed) and follows pods and
//! containers through [`Resolver::subscribe`].

use std::{
    collections::HashMap,
    io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, RwLock, RwLockReadGuard,
    },
    time::{Duration, Instant},
};

use tokio::{
    io::{unix::AsyncFd, Interest},
    sync::{broadcast, Notify},
    task::JoinHandle,
};
use tracing::{debug, info, warn};

use super::{
    index::{Change, PodIndex},
    inotify::{self, Inotify, DIR_MASK},
    tree,
};
use crate::{kernel::cgroupfs::Hierarchy, sync};

#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Full rescan interval: the safety net, not the mechanism.
    pub rescan_every: Duration,
    /// Changes a subscriber may fall behind by before it gets `Lagged` (and
    /// should then re-read the index).
    pub event_capacity: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            rescan_every: Duration::from_secs(300),
            event_capacity: 4096,
        }
    }
}

/// The watcher's own figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Directories watched now.
    pub watches: u64,
    /// inotify events handled.
    pub events: u64,
    /// Full rescans, the initial scan included.
    pub rescans: u64,
    pub overflows: u64,
    /// Changes that only a rescan found (should stay 0; non-zero means
    /// inotify missed something).
    pub drift: u64,
}

#[derive(Default)]
struct Stats {
    watches: AtomicU64,
    events: AtomicU64,
    rescans: AtomicU64,
    overflows: AtomicU64,
    drift: AtomicU64,
}

/// The daemon's handle on the index: cheap to clone.
#[derive(Clone)]
pub struct Resolver {
    index: Arc<RwLock<PodIndex>>,
    events: broadcast::Sender<Change>,
    rescan: Arc<Notify>,
    stats: Arc<Stats>,
}

impl Resolver {
    fn new(capacity: usize, roots: crate::kernel::cgroupfs::roots::PodRoots) -> Self {
        Self {
            index: Arc::new(std::sync::RwLock::new(PodIndex::with_roots(roots))),
            events: broadcast::channel(capacity).0,
            rescan: Arc::default(),
            stats: Arc::default(),
        }
    }

    /// The current index. A std lock, never held across an await: take
    /// what is needed and drop the guard.
    pub fn index(&self) -> RwLockReadGuard<'_, PodIndex> {
        sync::read(&self.index)
    }

    /// The lock itself, for whoever sets names on the index (the API watch).
    pub fn shared(&self) -> Arc<RwLock<PodIndex>> {
        self.index.clone()
    }

    /// Pods and containers added and removed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.events.subscribe()
    }

    /// Asks for a full rescan (what an overflow does).
    pub fn request_rescan(&self) {
        self.rescan.notify_one();
    }

    pub fn stats(&self) -> WatchStats {
        let s = &self.stats;
        WatchStats {
            watches: s.watches.load(Ordering::Relaxed),
            events: s.events.load(Ordering::Relaxed),
            rescans: s.rescans.load(Ordering::Relaxed),
            overflows: s.overflows.load(Ordering::Relaxed),
            drift: s.drift.load(Ordering::Relaxed),
        }
    }
}

/// The running watcher. Dropping it stops the watch.
pub struct Watcher {
    resolver: Resolver,
    task: JoinHandle<()>,
}

impl Watcher {
    /// Scans the tree (synchronously: the index is complete when this
    /// returns) and keeps watching on a task of the current tokio runtime.
    pub fn spawn(hier: &Hierarchy, cfg: WatchConfig) -> io::Result<Watcher> {
        let resolver = Resolver::new(cfg.event_capacity, hier.pod_roots().clone());
        let mut tree = Tree::new(hier.mount(), resolver.clone())?;
        tree.rescan(Why::Start);
        let task = tokio::spawn(tree.run(cfg.rescan_every));
        Ok(Watcher { resolver, task })
    }

    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Start,
    Overflow,
    Periodic,
    Requested,
}

/// The watches and the index they keep.
struct Tree {
    mount: PathBuf,
    /// Registered with the runtime, which needs the fd to stay open as long
    /// as it is registered: the `AsyncFd` owns it.
    inotify: AsyncFd<Inotify>,
    /// Watch descriptor → the directory's path relative to the mount:
    /// events name the child, relative to the watched directory.
    wds: HashMap<i32, PathBuf>,
    /// And back, to drop the watch of a deleted directory.
    wd_of: HashMap<PathBuf, i32>,
    resolver: Resolver,
    /// Set once we ran out of watches, so the warning is given once.
    out_of_watches: bool,
}

impl Tree {
    /// Must run inside a tokio runtime (the fd is registered with it).
    fn new(mount: &Path, resolver: Resolver) -> io::Result<Self> {
        // SAFETY: `Inotify` owns its fd and always returns that same fd; it
        // is closed only when the `AsyncFd`, which owns it, is dropped.
        let inotify = unsafe { AsyncFd::register_with_interest(Inotify::new()?, Interest::READABLE)? };
        Ok(Self {
            mount: mount.to_path_buf(),
            inotify,
            wds: HashMap::new(),
            wd_of: HashMap::new(),
            resolver,
            out_of_watches: false,
        })
    }

    async fn run(mut self, every: Duration) {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let rescan = self.resolver.rescan.clone();
        // Room for a few hundred events per read.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            tokio::select! {
                ready = self.inotify.readable() => {
                    let read = match ready {
                        Ok(mut guard) => guard.try_io(|fd| fd.get_ref().read(&mut buf)),
                        Err(_) => {
                            // Not expected (the fd stays registered while we
                            // run); the periodic rescan still keeps the index.
                            warn!("cannot poll the cgroup inotify fd; pods are found by the periodic rescan only");
                            return self.rescan_only(tick).await;
                        }
                    };
                    match read {
                        Ok(Ok(n)) => self.handle(&buf[..n]),
                        Ok(Err(e)) => warn!(error = %e, "reading cgroup inotify events failed"),
                        Err(_would_block) => {}
                    }
                }
                _ = tick.tick() => self.rescan(Why::Periodic),
                _ = rescan.notified() => self.rescan(Why::Requested),
            }
        }
    }

    async fn rescan_only(mut self, mut tick: tokio::time::Interval) {
        loop {
            tick.tick().await;
            self.rescan(Why::Periodic);
        }
    }

    /// Applies one read's worth of events.
    fn handle(&mut self, buf: &[u8]) {
        let mut changes = Vec::new();
        let mut overflow = false;
        let mut n = 0;
        let index = self.resolver.index.clone();
        {
            let mut index = sync::write(&index);
            for ev in inotify::events(buf) {
                n += 1;
                if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                    overflow = true;
                } else if ev.mask & libc::IN_IGNORED != 0 {
                    // The kernel dropped the watch (unmounted, say).
                    if let Some(p) = self.wds.remove(&ev.wd) {
                        self.wd_of.remove(&p);
                    }
                } else if ev.mask & libc::IN_ISDIR != 0 {
                    let Some(parent) = self.wds.get(&ev.wd) else {
                        continue;
                    };
                    let rel = parent.join(ev.name);
                    if ev.mask & libc::IN_CREATE != 0 {
                        self.scan(&rel, &mut index, &mut changes);
                    } else if ev.mask & libc::IN_DELETE != 0 {
                        // The kernel removes a cgroup only once its children
                        // are gone, and their events came first.
                        changes.extend(index.remove_path(&rel));
                        self.unwatch(&rel);
                    }
                }
            }
        }
        let s = &self.resolver.stats;
        s.events.fetch_add(n, Ordering::Relaxed);
        s.watches.store(self.wds.len() as u64, Ordering::Relaxed);
        self.publish(changes);
        if overflow {
            self.rescan(Why::Overflow);
        }
    }

    /// Watches and files `start` and everything below it.
    fn scan(&mut self, start: &Path, index: &mut PodIndex, changes: &mut Vec<Change>) {
        let inotify = self.inotify.get_ref();
        let (wds, wd_of, full) = (&mut self.wds, &mut self.wd_of, &mut self.out_of_watches);
        tree::walk(&self.mount, start, |dir, rel, id| {
            match inotify.add_watch(dir, DIR_MASK) {
                Ok(wd) => {
                    wds.insert(wd, rel.to_path_buf());
                    wd_of.insert(rel.to_path_buf(), wd);
                }
                // Gone already: its deletion is (or will be) reported.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return false,
                Err(e) => {
                    // Out of watches (fs.inotify.max_user_watches): still
                    // file it; what appears below it is found by the rescan.
                    if !std::mem::replace(full, true) {
                        warn!(error = %e, cgroup = %rel.display(), "cannot watch a cgroup directory (raise fs.inotify.max_user_watches?); new cgroups below it are found by the periodic rescan only");
                    }
                }
            }
            changes.extend(index.insert(id, rel));
            true
        });
        self.resolver
            .stats
            .watches
            .store(self.wds.len() as u64, Ordering::Relaxed);
    }

    /// Rebuilds the index and the watches from a full walk, and reports
    /// what changed as if it had been seen. Done under the write lock: a few
    /// milliseconds for thousands of cgroups, and nothing (names set by the
    /// API, say) can slip in between the walk and the swap.
    fn rescan(&mut self, why: Why) {
        if matches!(why, Why::Periodic | Why::Requested) {
            // Apply what is queued first, so that what the rescan finds
            // (drift) is what inotify missed, not what it has yet to say.
            self.drain_queue();
        }
        let started = Instant::now();
        let index = self.resolver.index.clone();
        let changes = {
            let mut index = sync::write(&index);
            let mut fresh = index.fresh();
            // Watches of directories that still exist come back with the
            // same descriptors; those of removed ones are dropped.
            let old = std::mem::take(&mut self.wds);
            self.wd_of.clear();
            self.out_of_watches = false;
            self.scan(Path::new("/"), &mut fresh, &mut Vec::new());
            for wd in old.keys().filter(|wd| !self.wds.contains_key(wd)) {
                let _ = self.inotify.get_ref().rm_watch(*wd);
            }
            let changes = PodIndex::diff(&index, &fresh);
            *index = fresh;
            changes
        };
        let s = &self.resolver.stats;
        s.rescans.fetch_add(1, Ordering::Relaxed);
        let took_ms = started.elapsed().as_secs_f64() * 1e3;
        let (watches, found) = (self.wds.len(), changes.len());
        match why {
            Why::Start => info!(watches, took_ms, "watching the cgroup tree"),
            Why::Overflow => {
                s.overflows.fetch_add(1, Ordering::Relaxed);
                warn!(
                    watches,
                    found, took_ms, "cgroup inotify queue overflowed: rescanned the tree"
                );
            }
            _ if found > 0 => {
                s.drift.fetch_add(found as u64, Ordering::Relaxed);
                warn!(
                    ?why,
                    found, took_ms, "a rescan found pod changes inotify did not report"
                );
            }
            _ => debug!(?why, watches, took_ms, "rescanned the cgroup tree"),
        }
        if why != Why::Start {
            self.publish(changes);
        }
    }

    /// Drops the watch of the deleted directory `rel`.
    fn unwatch(&mut self, rel: &Path) {
        if let Some(wd) = self.wd_of.remove(rel) {
            self.wds.remove(&wd);
            // EINVAL if the kernel dropped it already: nothing to do.
            let _ = self.inotify.get_ref().rm_watch(wd);
        }
    }

    /// Handles every event queued now, without waiting for more.
    fn drain_queue(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = self.inotify.get_ref().read(&mut buf) {
            if n == 0 {
                break;
            }
            self.handle(&buf[..n]);
        }
    }

    fn publish(&self, changes: Vec<Change>) {
        for c in changes {
            // No subscriber is not an error.
            let _ = self.resolver.events.send(c);
        }
    }
}

#[cfg(test)]
mod tests;
