//! The pod watch against recorded Kubernetes API payloads
//! (tests/fixtures/k8s/), served over HTTP by the test itself: a list, a
//! watch with ADDED/MODIFIED/DELETED/BOOKMARK, a 410 Gone that forces a
//! relist, an API that is away at start, goes and comes back. They need
//! no root: they run the library in-process. The terminating-pod report
//! on the same payloads is in `kube_terminating`; the server and the
//! payloads are `graceful_tests::k8s`.

use std::{
    path::Path,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use graceful::{
    node::kube::{ApiState, ContainerKind, PodEvent, PodStore, PodWatch, Source, WatchOptions},
    node::resolver::index::PodIndex,
};
use graceful_tests::k8s::{
    fake_api::{FakeApi, Reply, Seen},
    fixture, lines, NODE,
};

const WEB: &str = "0b6a1c52-3f0e-4b8e-9a47-6f1d2c9e8a10";
const REDIS: &str = "7d3f9e21-64b8-4c1a-8e55-2b7c4d9f0e31";
const DNS: &str = "c41f0a77-2e9d-4b36-a1c8-5f6e7d8c9b0a";
const WORKER: &str = "3e8b1d04-9c2a-4f57-b6e3-8a0d1c2b3f4e";
const API: &str = "9f2c4e6a-1b3d-4a5c-8e7f-0a1b2c3d4e5f";

/// The fixtures' fixed container ids: a two-hex-digit pattern repeated.
fn hex(pat: &str) -> String {
    pat.repeat(32)
}

/// An index holding cgroups for `pods` (uid, container ids) in the systemd
/// layout, plus a sandbox (pause) container the API never names.
fn index_with(pods: &[(&str, &[&str])]) -> Arc<RwLock<PodIndex>> {
    let mut index = PodIndex::default();
    let mut id = 1000;
    for (uid, containers) in pods {
        let slice = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
            uid.replace('-', "_")
        );
        id += 1;
        index.insert(id, Path::new(&slice));
        let pause = format!("{:0>64}", format!("{id:x}"));
        for c in containers.iter().copied().chain([pause.as_str()]) {
            id += 1;
            index.insert(id, Path::new(&format!("{slice}/cri-containerd-{c}.scope")));
        }
    }
    Arc::new(RwLock::new(index))
}

fn names(index: &RwLock<PodIndex>, uid: &str) -> (Option<String>, Vec<(String, Option<String>)>) {
    let index = index.read().unwrap();
    let pod = index
        .pod(uid)
        .unwrap_or_else(|| panic!("pod {uid} not in the index"));
    let name = pod
        .namespace
        .as_ref()
        .zip(pod.name.as_ref())
        .map(|(n, p)| format!("{n}/{p}"));
    let containers = pod
        .containers
        .iter()
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    (name, containers)
}

fn options(kubeconfig: &Path) -> WatchOptions {
    let mut o = WatchOptions::new(Source::Kubeconfig(kubeconfig.to_path_buf()), NODE.into());
    o.backoff_min = Duration::from_millis(50);
    o.backoff_max = Duration::from_millis(200);
    o
}

/// Starts the watch on the current runtime; returns its store and a
/// receiver subscribed before it ran.
fn start(
    opts: WatchOptions,
    index: Arc<RwLock<PodIndex>>,
) -> (
    Arc<PodStore>,
    tokio::sync::broadcast::Receiver<PodEvent>,
    tokio::task::JoinHandle<()>,
) {
    let (w, store, _events) = PodWatch::new(opts, index);
    let rx = store.subscribe();
    let task = tokio::spawn(w.run());
    (store, rx, task)
}

async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The events received so far, as `applied|deleted ns/name`.
fn drain(rx: &mut tokio::sync::broadcast::Receiver<PodEvent>, out: &mut Vec<String>) {
    while let Ok(ev) = rx.try_recv() {
        out.push(match ev {
            PodEvent::Applied(p) => format!("applied {}", p.key()),
            PodEvent::Deleted(p) => format!("deleted {}", p.key()),
        });
    }
}

fn pods_requests(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.path == "/api/v1/pods")
        .map(|s| {
            assert_eq!(
                s.query.get("fieldSelector").map(String::as_str),
                Some("spec.nodeName=kind-worker"),
                "{s:?}"
            );
            if s.is_watch() {
                assert_eq!(
                    s.query.get("allowWatchBookmarks").map(String::as_str),
                    Some("true"),
                    "{s:?}"
                );
                format!(
                    "watch {}",
                    s.query.get("resourceVersion").cloned().unwrap_or_default()
                )
            } else {
                "list".to_string()
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_list_names_pods_containers_sidecars_and_ids() {
    let api = FakeApi::start().await;
    api.push_list(Reply::list(fixture("pods-list.json")));
    let kc = api.kubeconfig(&std::env::temp_dir());
    let index = index_with(&[
        (WEB, &[&hex("a1"), &hex("b2"), &hex("c3")]),
        (REDIS, &[&hex("d4"), &hex("e5")]),
        (DNS, &[&hex("f6"), &hex("a7")]),
    ]);
    let (store, _rx, task) = start(options(&kc), index.clone());
    eventually("the list", || {
        (store.len() == 3 && api.open_watches() == 1).then_some(())
    })
    .await;
    assert_eq!(store.state(), ApiState::Connected);
    assert_eq!(pods_requests(&api.seen()), ["list", "watch 48213"]);

    let web = store.get(WEB).unwrap();
    assert_eq!(web.key(), "shop/web-6d4cf56db6-7xq2b");
    assert_eq!(web.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        web.annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );
    assert_eq!(web.termination_grace_period_seconds, Some(30));
    assert!(web.deletion_timestamp.is_none() && !web.terminating());
    let kinds: Vec<(&str, ContainerKind, Option<&str>, Option<&str>)> = web
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.kind, c.id.as_deref(), c.runtime.as_deref()))
        .collect();
    let (a1, b2, c3) = (hex("a1"), hex("b2"), hex("c3"));
    assert_eq!(
        kinds,
        [
            (
                "migrate",
                ContainerKind::Init,
                Some(b2.as_str()),
                Some("containerd")
            ),
            (
                "envoy",
                ContainerKind::Sidecar,
                Some(c3.as_str()),
                Some("containerd")
            ),
            ("app", ContainerKind::App, Some(a1.as_str()), Some("containerd")),
        ]
    );

    let redis = store.get(REDIS).unwrap();
    assert_eq!(redis.termination_grace_period_seconds, Some(60));
    assert_eq!(redis.containers[0].previous_ids, [hex("e5")]);
    let dns = store.get(DNS).unwrap();
    assert_eq!(dns.containers[1].kind, ContainerKind::Ephemeral);
    assert_eq!(dns.containers[1].name, "debugger-7kq2x");

    // The cgroup index has the names: every container the API knows, the
    // previous instance of a restarted one too; the sandbox stays unnamed.
    let (name, containers) = names(&index, WEB);
    assert_eq!(name.as_deref(), Some("shop/web-6d4cf56db6-7xq2b"));
    let named = |cs: &[(String, Option<String>)], id: &str| cs.iter().find(|c| c.0 == id).unwrap().1.clone();
    assert_eq!(named(&containers, &a1).as_deref(), Some("app"));
    assert_eq!(named(&containers, &b2).as_deref(), Some("migrate"));
    assert_eq!(named(&containers, &c3).as_deref(), Some("envoy"));
    assert_eq!(
        containers.iter().filter(|c| c.1.is_none()).count(),
        1,
        "{containers:?}"
    );
    let (_, containers) = names(&index, REDIS);
    assert_eq!(named(&containers, &hex("d4")).as_deref(), Some("redis"));
    assert_eq!(named(&containers, &hex("e5")).as_deref(), Some("redis"));
    let (_, containers) = names(&index, DNS);
    assert_eq!(named(&containers, &hex("a7")).as_deref(), Some("debugger-7kq2x"));
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_applies_events_follows_bookmarks_and_relists_after_410() {
    let api = FakeApi::start().await;
    api.push_list(Reply::list(fixture("pods-list.json")));
    api.push_list(Reply::list(fixture("pods-relist.json")));
    // The first stream ends after its bookmark (the server's timeout); the
    // second ends in 410 Gone; the third, after the relist, stays open.
    api.push_watch(Reply::lines(lines("watch-1.jsonl")));
    api.push_watch(Reply::lines(lines("watch-2.jsonl")));
    let kc = api.kubeconfig(&std::env::temp_dir());
    let index = index_with(&[
        (WORKER, &[&hex("0c")]),
        (REDIS, &[&hex("d4")]),
        (DNS, &[&hex("f6")]),
        (API, &[&hex("1d")]),
    ]);
    let (store, mut rx, task) = start(options(&kc), index.clone());
    eventually("the relist", || {
        (store.stats().lists == 2 && api.open_watches() == 1).then_some(())
    })
    .await;

    // The bookmark moved the resourceVersion on: the second watch starts
    // there; the 410 relisted; the last watch starts at the relist's.
    assert_eq!(
        pods_requests(&api.seen()),
        ["list", "watch 48213", "watch 48290", "list", "watch 48650"]
    );
    let stats = store.stats();
    assert_eq!(stats.bookmarks, 1);
    assert_eq!(stats.relists_gone, 1);
    assert_eq!(stats.events, 4, "ADDED, MODIFIED, MODIFIED, DELETED");
    assert_eq!(stats.resource_version.as_deref(), Some("48650"));

    let mut events = Vec::new();
    drain(&mut rx, &mut events);
    let after_list = &events[3..];
    assert_eq!(
        after_list,
        [
            "applied shop/worker-5f7d9c8b7-k2m4n",          // ADDED, Pending
            "applied shop/worker-5f7d9c8b7-k2m4n",          // MODIFIED, running
            "applied shop/redis-0",                         // MODIFIED, deletionTimestamp
            "deleted shop/redis-0",                         // DELETED
            "deleted kube-system/coredns-668d6bf9bc-4lqzs", // gone from the relist
            "applied shop/api-7b9f4c6d5-q8wzt",             // new in the relist
        ],
        "{events:?}"
    );

    // The final state: what the relist says.
    let mut keys: Vec<String> = store.all().iter().map(|p| p.key()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "shop/api-7b9f4c6d5-q8wzt",
            "shop/web-6d4cf56db6-7xq2b",
            "shop/worker-5f7d9c8b7-k2m4n"
        ]
    );
    let worker = store.get(WORKER).unwrap();
    assert_eq!(worker.containers[0].id.as_deref(), Some(hex("0c").as_str()));
    assert_eq!(worker.termination_grace_period_seconds, Some(45));
    // Names: the worker's container got its name from the MODIFIED event,
    // the deleted pods lost theirs, the new one has its own.
    let (_, containers) = names(&index, WORKER);
    let worker_c = containers.iter().find(|c| c.0 == hex("0c")).unwrap();
    assert_eq!(worker_c.1.as_deref(), Some("worker"), "{containers:?}");
    assert_eq!(names(&index, REDIS).0, None);
    assert_eq!(names(&index, DNS).0, None);
    assert_eq!(names(&index, API).0.as_deref(), Some("shop/api-7b9f4c6d5-q8wzt"));
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_away_at_start_then_lost_then_back_names_return() {
    // A port nobody serves yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let kc_dir = std::env::temp_dir().join(graceful_tests::unique("kube"));
    std::fs::create_dir_all(&kc_dir).unwrap();
    let kc = {
        // Written for `addr` before anything listens there.
        let path = kc_dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n"),
        )
        .unwrap();
        path
    };
    let index = index_with(&[(WEB, &[&hex("a1")]), (DNS, &[&hex("f6")]), (API, &[&hex("1d")])]);
    let (store, _rx, task) = start(options(&kc), index.clone());
    let mut state = store.watch_state();

    // Away: the agent runs on uids.
    eventually("the API to be reported unreachable", || {
        (store.state() == ApiState::Lost).then_some(())
    })
    .await;
    assert_eq!(names(&index, WEB).0, None);

    // It answers: names appear.
    let mut api = FakeApi::start_on(addr).await;
    api.push_list(Reply::list(fixture("pods-list.json")));
    api.push_list(Reply::list(fixture("pods-relist.json")));
    eventually("names", || names(&index, WEB).0).await;
    eventually("connected", || {
        (store.state() == ApiState::Connected).then_some(())
    })
    .await;
    assert_eq!(
        names(&index, DNS).0.as_deref(),
        Some("kube-system/coredns-668d6bf9bc-4lqzs")
    );
    eventually("the watch", || (api.open_watches() == 1).then_some(())).await;

    // It goes: the watch is cut; the names last seen stay.
    state.mark_unchanged();
    api.stop();
    eventually("the API to be reported lost", || {
        (store.state() == ApiState::Lost).then_some(())
    })
    .await;
    assert!(state.has_changed().unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(names(&index, WEB).0.as_deref(), Some("shop/web-6d4cf56db6-7xq2b"));

    // It comes back having moved on: the re-watch from the old
    // resourceVersion gets 410, the relist brings the new pod and drops
    // the one that went meanwhile.
    api.push_watch(Reply::lines(lines("watch-2.jsonl")[2..].to_vec()));
    api.resume().await;
    eventually("the new pod's name", || names(&index, API).0).await;
    assert_eq!(names(&index, DNS).0, None);
    assert_eq!(store.state(), ApiState::Connected);
    assert_eq!(store.stats().relists_gone, 1);
    let reqs = pods_requests(&api.seen());
    assert_eq!(reqs.first().map(String::as_str), Some("list"));
    assert!(reqs.iter().any(|r| r == "watch 48213"), "{reqs:?}");
    task.abort();
    let _ = std::fs::remove_dir_all(&kc_dir);
}
