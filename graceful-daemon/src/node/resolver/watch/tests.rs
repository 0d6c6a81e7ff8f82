//! The watcher against the real cgroup2 tree (root only; skipped otherwise).

use std::{os::unix::fs::MetadataExt, path::Path, time::Duration};

use tokio::sync::broadcast::Receiver;

use super::*;
use crate::node::resolver::{index::Change, path::Runtime};

fn is_root() -> bool {
    // SAFETY: no arguments, no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// Cgroups made by a test, removed deepest first on drop.
pub(super) struct Dirs {
    mount: PathBuf,
    made: Vec<PathBuf>,
}

impl Dirs {
    pub(super) fn new(hier: &Hierarchy) -> Self {
        Self {
            mount: hier.mount().to_path_buf(),
            made: Vec::new(),
        }
    }

    /// Creates `rel` and its missing parents; returns its cgroup id.
    pub(super) fn make(&mut self, rel: &str) -> u64 {
        let mut dir = self.mount.clone();
        for part in rel.trim_start_matches('/').split('/') {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                self.made.push(dir.clone());
            }
        }
        std::fs::metadata(&dir).unwrap().ino()
    }

    /// Removes `rel` (already empty of children).
    pub(super) fn remove(&mut self, rel: &str) {
        let dir = self.mount.join(rel.trim_start_matches('/'));
        std::fs::remove_dir(&dir).unwrap_or_else(|e| panic!("rmdir {}: {e}", dir.display()));
        self.made.retain(|d| d != &dir);
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        self.made
            .sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in &self.made {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The hierarchy, its pods under the tests' own roots (a directory of
/// each test's at the top, as kind nests a node's).
pub(super) fn test_hierarchy() -> Hierarchy {
    let roots =
        crate::kernel::cgroupfs::roots::PodRoots::parse(&["/*/kubepods.slice", "/*/kubepods"]).unwrap();
    Hierarchy::discover().unwrap().with_pod_roots(roots)
}

fn uid(n: u32) -> String {
    format!("{:08x}-7a7c-4000-8000-{:012x}", std::process::id(), n)
}

fn cid(n: u32) -> String {
    format!("{:056x}{:08x}", std::process::id(), n)
}

/// Waits (1 s at most) for the changes `want`, in order, skipping others
/// (other pods on the machine may come and go).
async fn expect(rx: &mut Receiver<Change>, want: &[Change]) {
    let mut want = want.iter().peekable();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Some(w) = want.peek() {
        let got = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no {w:?} within 1 s"))
            .unwrap();
        if &got == *w {
            want.next();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sees_pods_and_containers_come_and_go_within_a_second() {
    if !is_root() {
        eprintln!("SKIPPED: needs root (makes cgroups)");
        return;
    }
    let hier = test_hierarchy();
    let w = Watcher::spawn(&hier, WatchConfig::default()).unwrap();
    let mut rx = w.resolver().subscribe();
    let mut dirs = Dirs::new(&hier);
    let (u, c1, c2) = (uid(1), cid(1), cid(2));
    let root = format!("/graceful-test-watch-{}", std::process::id());
    let pod = format!(
        "{root}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
        u.replace('-', "_")
    );
    // Made in one go: children appear before their parent's watch exists.
    let ctr1 = format!("{pod}/cri-containerd-{c1}.scope");
    let id1 = dirs.make(&ctr1);
    let pod_id = hier.id_of(&pod).unwrap();
    expect(
        &mut rx,
        &[
            Change::PodAdded { uid: u.clone() },
            Change::ContainerAdded {
                uid: u.clone(),
                id: c1.clone(),
            },
        ],
    )
    .await;
    let ctr2 = format!("{pod}/crio-{c2}.scope");
    let id2 = dirs.make(&ctr2);
    expect(
        &mut rx,
        &[Change::ContainerAdded {
            uid: u.clone(),
            id: c2.clone(),
        }],
    )
    .await;
    {
        let ix = w.resolver().index();
        let p = ix.pod(&u).unwrap();
        assert_eq!(p.cgroup_id, Some(pod_id));
        let got: Vec<_> = p
            .containers
            .iter()
            .map(|c| (c.id.clone(), c.runtime, c.cgroup_id))
            .collect();
        assert_eq!(
            got,
            vec![
                (c1.clone(), Runtime::Containerd, id1),
                (c2.clone(), Runtime::CriO, id2)
            ]
        );
    }

    dirs.remove(&ctr1);
    dirs.remove(&ctr2);
    dirs.remove(&pod);
    expect(
        &mut rx,
        &[
            Change::ContainerRemoved {
                uid: u.clone(),
                id: c1.clone(),
            },
            Change::ContainerRemoved {
                uid: u.clone(),
                id: c2,
            },
            Change::PodRemoved { uid: u.clone() },
        ],
    )
    .await;
    assert!(w.resolver().index().pod(&u).is_none());
    let s = w.resolver().stats();
    assert_eq!((s.overflows, s.drift), (0, 0));
    assert!(s.watches >= 4, "{s:?}");
}

#[tokio::test]
async fn an_overflow_rescans_and_reports_what_was_missed() {
    if !is_root() {
        eprintln!("SKIPPED: needs root (makes cgroups)");
        return;
    }
    let hier = test_hierarchy();
    let resolver = Resolver::new(64, hier.pod_roots().clone());
    let mut rx = resolver.subscribe();
    // Not running: events pile up unread, as if the queue had overflowed.
    let mut tree = Tree::new(hier.mount(), resolver.clone()).unwrap();
    tree.rescan(Why::Start);
    let mut dirs = Dirs::new(&hier);
    let (u, c) = (uid(10), cid(10));
    let root = format!("/graceful-test-overflow-{}", std::process::id());
    let pod = format!("{root}/kubepods/burstable/pod{u}");
    let ctr = format!("{pod}/{c}");
    let id = dirs.make(&ctr);
    assert!(resolver.index().pod(&u).is_none());

    tree.handle(&inotify::encode(-1, libc::IN_Q_OVERFLOW, b""));
    assert_eq!(resolver.index().pod(&u).unwrap().containers[0].cgroup_id, id);
    assert_eq!(rx.try_recv().unwrap(), Change::PodAdded { uid: u.clone() });
    assert_eq!(
        rx.try_recv().unwrap(),
        Change::ContainerAdded {
            uid: u.clone(),
            id: c.clone()
        }
    );
    dirs.remove(&ctr);
    dirs.remove(&pod);
    tree.handle(&inotify::encode(-1, libc::IN_Q_OVERFLOW, b""));
    assert!(resolver.index().pod(&u).is_none());
    assert_eq!(
        rx.try_recv().unwrap(),
        Change::ContainerRemoved {
            uid: u.clone(),
            id: c
        }
    );
    assert_eq!(rx.try_recv().unwrap(), Change::PodRemoved { uid: u });
    let s = resolver.stats();
    assert_eq!((s.rescans, s.overflows), (3, 2));
    // The events that were queued meanwhile are harmless once read.
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = tree.inotify.get_ref().read(&mut buf) {
        tree.handle(&buf[..n]);
    }
    assert!(resolver.index().pod(&uid(10)).is_none());
}

/// Handles whatever is queued on the tree's inotify fd.
fn drain(tree: &mut Tree) {
    std::thread::sleep(Duration::from_millis(20));
    tree.drain_queue();
}

#[tokio::test]
async fn deleted_cgroups_lose_their_watch() {
    if !is_root() {
        eprintln!("SKIPPED: needs root (makes cgroups)");
        return;
    }
    let hier = test_hierarchy();
    let mut tree = Tree::new(hier.mount(), Resolver::new(64, hier.pod_roots().clone())).unwrap();
    tree.rescan(Why::Start);
    let mut dirs = Dirs::new(&hier);
    let root = format!("/graceful-test-unwatch-{}", std::process::id());
    let pod = format!("{root}/kubepods/pod{}", uid(20));
    let ctr = format!("{pod}/{}", cid(20));
    dirs.make(&ctr);
    drain(&mut tree);
    let wd = |t: &Tree, p: &str| t.wd_of.get(Path::new(p)).copied();
    let (wd_pod, wd_ctr) = (wd(&tree, &pod).unwrap(), wd(&tree, &ctr).unwrap());
    dirs.remove(&ctr);
    dirs.remove(&pod);
    drain(&mut tree);
    assert_eq!((wd(&tree, &pod), wd(&tree, &ctr)), (None, None));
    assert!(!tree.wds.contains_key(&wd_pod) && !tree.wds.contains_key(&wd_ctr));
    // Gone from the kernel too: removing them again is refused.
    let again = tree.inotify.get_ref().rm_watch(wd_ctr).unwrap_err();
    assert_eq!(again.raw_os_error(), Some(libc::EINVAL));

    // A rescan drops the watches of directories that vanished unseen.
    dirs.make(&ctr);
    drain(&mut tree);
    let wd_ctr = wd(&tree, &ctr).unwrap();
    // Removed, and its event left unread: as if lost in an overflow.
    dirs.remove(&ctr);
    tree.handle(&inotify::encode(-1, libc::IN_Q_OVERFLOW, b""));
    assert!(!tree.wds.contains_key(&wd_ctr));
    let again = tree.inotify.get_ref().rm_watch(wd_ctr).unwrap_err();
    assert_eq!(again.raw_os_error(), Some(libc::EINVAL));
}

#[tokio::test]
async fn a_requested_rescan_matches_a_fresh_build() {
    if !is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let hier = test_hierarchy();
    let w = Watcher::spawn(&hier, WatchConfig::default()).unwrap();
    w.resolver().request_rescan();
    let deadline = Instant::now() + Duration::from_secs(1);
    while w.resolver().stats().rescans < 2 {
        assert!(Instant::now() < deadline, "no rescan");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Other pods on this machine may come and go meanwhile: retry a little.
    let uids = |i: &PodIndex| i.pods().map(|p| p.uid.clone()).collect::<Vec<_>>();
    for attempt in 0.. {
        let fresh = PodIndex::build(&hier);
        if uids(&w.resolver().index()) == uids(&fresh) {
            break;
        }
        assert!(attempt < 20, "the index never matched a fresh build");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

mod churn;
