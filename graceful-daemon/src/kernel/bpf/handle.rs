//! The agent's handle on the kernel side: the counters, the stats, the
//! watch map and the event ring, opened once and shared by every drain,
//! terminating pod and API request; and the loaded object, through which
//! everything attached at run time goes (the ingress program of a quiet
//! drain, the adoption iterator of a repair pass).

use std::{
    fs::File,
    io,
    path::Path,
    sync::{Arc, Mutex},
};

use aya::{programs::cgroup_skb::CgroupSkbLinkId, Ebpf};
use graceful_common::{stat, watch, Event, Filter, MAX_IGNORE_RULES};
use tokio::sync::broadcast;
use tracing::warn;

use super::{
    error::MapError,
    filters::{FilterSet, Installed},
    links,
    loader::LoadError,
    maps::{Counters, Stats, WatchSet},
    paths::PinDir,
    ring,
};
use crate::sync;

/// Everything the agent reads and writes of the kernel side. Cheap to
/// clone; the ring's reader stops with the last clone.
#[derive(Clone)]
pub struct Kernel {
    pub pins: PinDir,
    pub watch: Arc<Mutex<WatchSet>>,
    filters: Arc<Mutex<FilterSet>>,
    /// Read lock-free: every drain's look goes here.
    pub counters: Arc<Counters>,
    pub events: broadcast::Sender<Event>,
    stats: Arc<Stats>,
    /// When the programs were last seen failing to make a counters entry.
    full: Arc<Mutex<FullSeen>>,
    _reader: Arc<ring::Reader>,
    /// `None` for a handle on the maps alone (tests of the drain engine).
    object: Option<Arc<Object>>,
}

/// The programs' count of counters entries they could not make (the map
/// full), as last read, and when it was last seen to rise.
#[derive(Default)]
struct FullSeen {
    count: u64,
    rose_at: Option<std::time::SystemTime>,
}

/// The loaded object. Its lock is held only to attach, detach or open an
/// iterator, never across a walk or a drain.
struct Object {
    ebpf: Mutex<Ebpf>,
    /// The ingress program loaded: quiet drains can see inbound payload.
    ingress: bool,
}

impl Kernel {
    /// Opens the maps and starts the ring's reader. Empties the watch map
    /// (see [`WatchSet::open`]): the agent's alone. Must be called inside a
    /// tokio runtime.
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        let (events, reader) = ring::spawn(pins)?;
        Ok(Self {
            pins: pins.clone(),
            watch: Arc::new(Mutex::new(WatchSet::open(pins)?)),
            filters: Arc::new(Mutex::new(FilterSet::open(pins)?)),
            counters: Arc::new(Counters::open(pins)?),
            events,
            stats: Arc::new(Stats::open(pins)?),
            full: Arc::default(),
            _reader: Arc::new(reader),
            object: None,
        })
    }

    /// This handle, with the agent's loaded object to attach through.
    pub fn with_object(self, mut ebpf: Ebpf) -> Self {
        let ingress = match links::load_ingress(&mut ebpf) {
            Ok(()) => true,
            Err(e) => {
                warn!(error = %e, "the ingress program did not load: the quiet policy sees new connections only");
                false
            }
        };
        Self {
            object: Some(Arc::new(Object {
                ebpf: Mutex::new(ebpf),
                ingress,
            })),
            ..self
        }
    }

    /// Watches inbound payload into the cgroup directory `dir` (the
    /// ingress program attached) until the guard drops. `None` when the
    /// program is not loaded.
    pub fn watch_payload(&self, dir: &Path) -> Option<Result<Payload, LoadError>> {
        let object = self.object.as_ref().filter(|o| o.ingress)?;
        let attached = links::attach_ingress(&mut sync::lock(&object.ebpf), dir);
        Some(attached.map(|link| Payload {
            object: object.clone(),
            link: Some(link),
        }))
    }

    /// Opens an instance of the adoption iterator over the calling
    /// thread's network namespace ([`links::open_iter`]), holding the
    /// object's lock only for that: the walk needs nothing of it.
    pub fn open_iter_here(&self) -> Result<io::Result<File>, LoadError> {
        let object = self.object.as_ref().ok_or_else(|| LoadError::Pin {
            what: "open the adoption iterator".into(),
            message: "this handle has no loaded object".into(),
        })?;
        links::open_iter(&mut sync::lock(&object.ebpf))
    }

    /// The programs' own figures, summed over CPUs.
    pub fn stats(&self) -> Result<[u64; stat::COUNT as usize], MapError> {
        let s = self.stats.read()?;
        let full = s[stat::COUNTERS_FULL as usize];
        let mut f = sync::lock(&self.full);
        if full > f.count {
            // First seen at this read (at the agent's start, for counts
            // from before it): as late as it can have been.
            f.rose_at = Some(std::time::SystemTime::now());
            f.count = full;
        }
        Ok(s)
    }

    /// When the counters map was last seen full (a connection whose
    /// cgroup got no entry, and so no count); `None` if never. A cgroup made
    /// before that may miss counts.
    pub fn counters_full_at(&self) -> Option<std::time::SystemTime> {
        let _ = self.stats();
        sync::lock(&self.full).rose_at
    }

    /// Puts `cgroups` in the watch map with `flags` for as long as the
    /// returned guard lives. All or none: on an error, those already added
    /// are taken out again.
    pub fn watch(&self, cgroups: &[u64], flags: u32) -> Result<Watched<'_>, MapError> {
        let mut guard = Watched {
            kernel: self,
            cgroups: Vec::with_capacity(cgroups.len()),
        };
        let mut w = sync::lock(&self.watch);
        for c in cgroups {
            w.add(*c, flags)?;
            guard.cgroups.push(*c);
        }
        drop(w);
        Ok(guard)
    }
}

impl Kernel {
    /// Sets `filter` on `cgroups` for as long as the returned guard lives:
    /// from then on the programs leave out the inbound connections it
    /// matches as they open (a pass over the pod's sockets must then match
    /// those already live: `adopt::repair`). All or none. The guard says
    /// whether another drain of one of the cgroups had set other
    /// exclusions first, which then stay.
    pub fn exclude(&self, cgroups: &[u64], filter: &Filter) -> Result<Excluded<'_>, MapError> {
        let mut guard = Excluded {
            kernel: self,
            cgroups: Vec::with_capacity(cgroups.len()),
            others: false,
            _watched: None,
        };
        let mut f = sync::lock(&self.filters);
        for c in cgroups {
            guard.others |= f.add(*c, filter)? == Installed::Other;
            guard.cgroups.push(*c);
        }
        drop(f);
        guard._watched = Some(self.watch(cgroups, watch::FILTER)?);
        Ok(guard)
    }

    /// Connections each exclusion rule left out so far, summed over `cgroups`.
    pub fn tallies(&self, cgroups: &[u64]) -> [u64; MAX_IGNORE_RULES] {
        sync::lock(&self.filters).tallies(cgroups)
    }
}

/// Keeps exclusions on cgroups until dropped.
pub struct Excluded<'a> {
    kernel: &'a Kernel,
    cgroups: Vec<u64>,
    /// Another drain's exclusions were there first on some cgroup.
    pub others: bool,
    _watched: Option<Watched<'a>>,
}

impl Drop for Excluded<'_> {
    fn drop(&mut self) {
        // The flag goes first, so no program looks for a filter removed.
        self._watched = None;
        let mut f = sync::lock(&self.kernel.filters);
        for c in &self.cgroups {
            f.remove(*c);
        }
    }
}

/// Keeps cgroups in the watch map, with the flags they were added with,
/// until dropped.
pub struct Watched<'a> {
    kernel: &'a Kernel,
    cgroups: Vec<u64>,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        let mut w = sync::lock(&self.kernel.watch);
        for c in &self.cgroups {
            w.remove(*c);
        }
    }
}

/// The ingress program on one cgroup, detached on drop.
pub struct Payload {
    object: Arc<Object>,
    link: Option<CgroupSkbLinkId>,
}

impl Drop for Payload {
    fn drop(&mut self) {
        let Some(link) = self.link.take() else { return };
        if links::detach_ingress(&mut sync::lock(&self.object.ebpf), link).is_err() {
            warn!("could not detach the ingress program from a drained cgroup");
        }
    }
}
