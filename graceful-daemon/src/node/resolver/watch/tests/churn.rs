//! What the watcher costs at scale: 500 pods × 4 containers on real cgroups
//! while 20 pods per second come and go. Run once, by hand, as root:
//! `cargo test -p graceful-daemon --release --lib churn -- --ignored --nocapture`
//! (GRACEFUL_CHURN_SECS sets the duration, 30 s by default).

use std::{
    collections::{HashMap, VecDeque},
    sync::{mpsc, Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use super::test_hierarchy;
use super::{cid, is_root, uid, Dirs};
use crate::{
    kernel::cgroupfs::Hierarchy,
    node::resolver::{
        index::{Change, PodIndex},
        watch::{Resolver, WatchConfig, Watcher},
    },
};

const PODS: u32 = 500;
const CONTAINERS: u32 = 4;
const PER_SEC: u32 = 20;

fn thread_cpu_ms(tid: i64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|x| x.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[0] + f[1]) as f64 * 1000.0 / hz
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Unreclaimable kernel slab memory (KiB): where inotify marks live (their
/// own slab cache is merged into a generic one on this kernel).
fn sunreclaim_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    let l = s.lines().find(|l| l.starts_with("SUnreclaim:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Heap bytes in use in this thread's (the main) malloc arena.
fn heap_bytes() -> usize {
    // SAFETY: reads allocator statistics.
    unsafe { libc::mallinfo2() }.uordblks
}

/// Kernel memory per watch: unreclaimable slab before and after 8 more
/// inotify instances each watch every cgroup under `root` (the inodes are
/// pinned by the watcher's own watches already, so this is the marks alone).
fn kernel_bytes_per_watch(hier: &Hierarchy, root: &str) -> f64 {
    let mut dirs = Vec::new();
    crate::node::resolver::tree::walk(hier.mount(), std::path::Path::new(root), |d, _, _| {
        dirs.push(d.to_path_buf());
        true
    });
    let before = sunreclaim_kib();
    let instances: Vec<_> = (0..8)
        .map(|_| {
            let ino = crate::node::resolver::inotify::Inotify::new().unwrap();
            for d in &dirs {
                ino.add_watch(d, crate::node::resolver::inotify::DIR_MASK)
                    .unwrap();
            }
            ino
        })
        .collect();
    let after = sunreclaim_kib();
    drop(instances);
    after.saturating_sub(before) as f64 * 1024.0 / (8 * dirs.len()) as f64
}

struct Bench {
    dirs: Dirs,
    root: String,
    live: VecDeque<(String, Vec<String>)>,
    next: u32,
    created_at: HashMap<String, Instant>,
}

impl Bench {
    fn add_pod(&mut self) {
        let n = self.next;
        self.next += 1;
        let u = uid(1000 + n);
        let pod = format!(
            "{}/kubepods-burstable-pod{}.slice",
            self.root,
            u.replace('-', "_")
        );
        self.created_at.insert(u.clone(), Instant::now());
        self.dirs.make(&pod);
        let ctrs = (0..CONTAINERS)
            .map(|i| {
                let c = format!("{pod}/cri-containerd-{}.scope", cid(n * CONTAINERS + i));
                self.dirs.make(&c);
                c
            })
            .collect::<Vec<_>>();
        self.live.push_back((pod, ctrs));
    }

    fn remove_oldest(&mut self) {
        let (pod, ctrs) = self.live.pop_front().unwrap();
        for c in &ctrs {
            self.dirs.remove(c);
        }
        self.dirs.remove(&pod);
    }
}

fn ours(ix: &PodIndex, root: &str) -> usize {
    ix.pods()
        .filter(|p| p.path.as_deref().is_some_and(|x| x.starts_with(root)) && p.containers.len() == 4)
        .count()
}

#[test]
#[ignore = "a measurement: run by hand, as root, in release"]
fn churn_500_pods_of_4_containers_at_20_pods_per_second() {
    if !is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let secs: u64 = std::env::var("GRACEFUL_CHURN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let hier = test_hierarchy();
    let root = format!(
        "/graceful-bench-{}/kubepods.slice/kubepods-burstable.slice",
        std::process::id()
    );
    let rss0 = rss_kib();

    // The watcher alone on a thread of its own, so its CPU time is its own.
    let (tx, rx) = mpsc::channel::<(Resolver, i64)>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let h = hier.clone();
    let watcher_thread = thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let w = Watcher::spawn(&h, WatchConfig::default()).unwrap();
            // SAFETY: plain syscall.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            tx.send((w.resolver().clone(), tid)).unwrap();
            let _ = stop_rx.await;
        });
    });
    let (resolver, tid) = rx.recv().unwrap();

    // When each pod was seen, by a subscriber on its own thread.
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let mut sub = resolver.subscribe();
    let seen2 = seen.clone();
    let lagged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let lagged2 = lagged.clone();
    thread::spawn(move || loop {
        match sub.blocking_recv() {
            Ok(Change::PodAdded { uid }) => {
                seen2.lock().unwrap().insert(uid, Instant::now());
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                lagged2.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
            Err(_) => return,
        }
    });

    let mut b = Bench {
        dirs: Dirs::new(&hier),
        root: root.clone(),
        live: VecDeque::new(),
        next: 0,
        created_at: HashMap::new(),
    };
    let t = Instant::now();
    for _ in 0..PODS {
        b.add_pod();
    }
    let made = t.elapsed();
    while ours(&resolver.index(), &root) < PODS as usize {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the watcher never caught up"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let caught_up = t.elapsed();
    let cpu_fill = thread_cpu_ms(tid);
    let rss_fill = rss_kib();
    let t_build = Instant::now();
    let heap0 = heap_bytes();
    let fresh = PodIndex::build(&hier);
    let index_heap = heap_bytes().saturating_sub(heap0);
    let build_ms = t_build.elapsed().as_secs_f64() * 1e3;
    let per_watch = kernel_bytes_per_watch(&hier, &root);
    let cgroups = fresh.cgroup_count();
    drop(fresh);
    let watches_fill = resolver.stats().watches;

    // Churn: one pod out and one in every 1/20 s.
    let cpu0 = thread_cpu_ms(tid);
    let t = Instant::now();
    let tick = Duration::from_secs(1) / PER_SEC;
    let mut next = t;
    let mut worst_count = PODS as usize;
    let mut ops = 0;
    while t.elapsed() < Duration::from_secs(secs) {
        b.remove_oldest();
        b.add_pod();
        ops += 1;
        worst_count = worst_count.min(ours(&resolver.index(), &root));
        next += tick;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            thread::sleep(d);
        }
    }
    let churn_secs = t.elapsed().as_secs_f64();
    let cpu_churn = thread_cpu_ms(tid) - cpu0;
    thread::sleep(Duration::from_millis(200));
    let ix_count = ours(&resolver.index(), &root);

    // The index equals a fresh walk, pod for pod and cgroup for cgroup.
    let fresh = PodIndex::build(&hier);
    {
        let ix = resolver.index();
        let a: Vec<_> = ix.pods().collect();
        let f: Vec<_> = fresh.pods().collect();
        assert_eq!(a.len(), f.len());
        for (x, y) in a.iter().zip(&f) {
            assert_eq!(x, y);
        }
    }
    let mut lat: Vec<f64> = {
        let seen = seen.lock().unwrap();
        b.created_at
            .iter()
            .filter_map(|(u, c)| seen.get(u).map(|s| s.duration_since(*c).as_secs_f64() * 1e3))
            .collect()
    };
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    let stats = resolver.stats();

    println!("--- resolver churn: {PODS} pods x {CONTAINERS} containers, {PER_SEC} pods/s for {churn_secs:.1} s ---");
    println!(
        "cgroups on the mount: {} after the churn; watches: {}",
        fresh.cgroup_count(),
        stats.watches
    );
    println!(
        "initial: made {PODS} pods in {:.0} ms, watcher caught up at {:.0} ms, {cpu_fill:.0} ms CPU (scan of the mount + events)",
        made.as_secs_f64() * 1e3,
        caught_up.as_secs_f64() * 1e3
    );
    println!("full walk (PodIndex::build, what a rescan costs): {build_ms:.1} ms");
    println!(
        "churn: {ops} pods replaced ({} cgroup mkdir+rmdir), watcher CPU {cpu_churn:.0} ms = {:.2} % of one core",
        ops * 2 * (CONTAINERS as usize + 1),
        cpu_churn / churn_secs / 10.0
    );
    println!(
        "pod added → PodAdded event: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} pods)",
        pct(0.5),
        pct(0.99),
        pct(1.0),
        lat.len()
    );
    println!(
        "lowest pod count seen mid-churn: {worst_count} (one pod is replaced at a time); after: {ix_count}"
    );
    println!(
        "memory: index of all {cgroups} cgroups {} KiB heap; process RSS +{} KiB (index, runtime, this test's own state); kernel ~{per_watch:.0} B per inotify mark",
        index_heap / 1024,
        rss_fill.saturating_sub(rss0),
    );
    println!(
        "stats: {} events, {} rescans, {} overflows, drift {}, lagged {}",
        stats.events,
        stats.rescans,
        stats.overflows,
        stats.drift,
        lagged.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert_eq!(ix_count, PODS as usize);
    // One watch per cgroup: those of removed cgroups are dropped.
    assert_eq!(watches_fill, cgroups as u64);
    assert_eq!((stats.overflows, stats.drift), (0, 0));
    assert!(pct(1.0) < 1000.0);

    drop(b);
    let _ = stop_tx.send(());
    watcher_thread.join().unwrap();
}
