use std::path::Path;

use super::*;
use crate::kernel::cgroupfs::roots::{self, PodRoots};

const UID_A: &str = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";
const UID_B: &str = "c2f29d46-4c07-453e-a371-c188cf99a10a";
const PAUSE: &str = "a4194b30bfda3da5c4a8bfc90e8d71339b3ba77cb1820902dfd305e9d5fb0a94";
const APP: &str = "2a6295abe4ad85304e0c663938066a1b661c4ba471be265cdce3e138ae377088";
const SIDE: &str = "a65721290917cbe85fa0f08833e32bc3ff5ad42dc002b91f1cc51c1c94fe08e4";

fn us(uid: &str) -> String {
    uid.replace('-', "_")
}

fn pod_a() -> String {
    format!(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
        us(UID_A)
    )
}

fn ins(ix: &mut PodIndex, id: u64, rel: &str) -> Vec<Change> {
    ix.insert(id, Path::new(rel))
}

fn added(uid: &str) -> Change {
    Change::PodAdded { uid: uid.into() }
}

fn c_added(uid: &str, id: &str) -> Change {
    Change::ContainerAdded {
        uid: uid.into(),
        id: id.into(),
    }
}

fn c_removed(uid: &str, id: &str) -> Change {
    Change::ContainerRemoved {
        uid: uid.into(),
        id: id.into(),
    }
}

#[test]
fn systemd_pod_with_pause_and_app_containers() {
    let mut ix = PodIndex::default();
    let p = pod_a();
    assert!(ins(&mut ix, 1, "/").is_empty());
    assert!(ins(&mut ix, 2, "/kubepods.slice").is_empty());
    assert!(ins(&mut ix, 3, "/kubepods.slice/kubepods-burstable.slice").is_empty());
    assert_eq!(ins(&mut ix, 10, &p), vec![added(UID_A)]);
    assert_eq!(
        ins(&mut ix, 11, &format!("{p}/cri-containerd-{PAUSE}.scope")),
        vec![c_added(UID_A, PAUSE)]
    );
    assert_eq!(
        ins(&mut ix, 12, &format!("{p}/cri-containerd-{APP}.scope")),
        vec![c_added(UID_A, APP)]
    );
    let pod = ix.pod(UID_A).unwrap();
    assert_eq!((pod.qos, pod.driver), (QosClass::Burstable, Driver::Systemd));
    assert_eq!((pod.cgroup_id, pod.path.as_deref()), (Some(10), Some(p.as_str())));
    assert_eq!(pod.cgroups.iter().copied().collect::<Vec<_>>(), vec![10, 11, 12]);
    // Sorted by id: APP (2a..) before PAUSE (a4..).
    let ids: Vec<_> = pod
        .containers
        .iter()
        .map(|c| (c.id.as_str(), c.cgroup_id))
        .collect();
    assert_eq!(ids, vec![(APP, 12), (PAUSE, 11)]);
    assert_eq!(pod.containers[0].runtime, Runtime::Containerd);
    assert_eq!(pod.namespace, None);
    assert_eq!(
        ix.owner(12),
        Some(Owner::Pod {
            uid: UID_A.into(),
            container: Some(APP.into())
        })
    );
    assert_eq!(
        ix.owner(10),
        Some(Owner::Pod {
            uid: UID_A.into(),
            container: None
        })
    );
    assert_eq!(
        ix.owner(2),
        Some(Owner::Other {
            path: "/kubepods.slice".into()
        })
    );
    assert_eq!(ix.owner(99), None);
    assert_eq!((ix.pod_count(), ix.cgroup_count()), (1, 6));
}

#[test]
fn crio_conmon_is_pod_overhead_and_nested_children_are_the_containers() {
    let mut ix = PodIndex::default();
    let p = format!("/kubepods/besteffort/pod{UID_B}");
    ins(&mut ix, 20, &p);
    ins(&mut ix, 21, &format!("{p}/crio-conmon-{APP}"));
    ins(&mut ix, 22, &format!("{p}/crio-{APP}"));
    ins(&mut ix, 23, &format!("{p}/crio-{APP}/container"));
    // Deeper still: a container that made cgroups of its own.
    ins(&mut ix, 24, &format!("{p}/crio-{APP}/container/inner"));
    let pod = ix.pod(UID_B).unwrap();
    assert_eq!((pod.qos, pod.driver), (QosClass::BestEffort, Driver::Cgroupfs));
    assert_eq!(pod.cgroup_id, Some(20));
    assert_eq!(pod.cgroups.len(), 5);
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    assert_eq!((c.id.as_str(), c.runtime, c.cgroup_id), (APP, Runtime::CriO, 22));
    assert_eq!(c.cgroups.iter().copied().collect::<Vec<_>>(), vec![22, 23, 24]);
    assert_eq!(
        ix.owner(21),
        Some(Owner::Pod {
            uid: UID_B.into(),
            container: None
        })
    );
    // Removal from the leaves up, as the kernel requires.
    assert!(ix
        .remove_path(Path::new(&format!("{p}/crio-{APP}/container/inner")))
        .is_empty());
    assert!(ix.remove(23).is_empty());
    assert_eq!(ix.remove(22), vec![c_removed(UID_B, APP)]);
    assert!(ix.remove(21).is_empty());
    assert_eq!(ix.remove(20), vec![Change::PodRemoved { uid: UID_B.into() }]);
    assert_eq!((ix.pod_count(), ix.cgroup_count()), (0, 0));
}

#[test]
fn nested_kind_root_and_the_colon_form() {
    // A kind node seen from its host: its root named.
    let roots = PodRoots::parse(&[
        "/kind-node/kubelet.slice/kubelet-kubepods.slice",
        roots::DEFAULT[4],
    ])
    .unwrap();
    let mut ix = PodIndex::with_roots(roots);
    let kind = format!(
        "/kind-node/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{}.slice",
        us(UID_A)
    );
    ins(&mut ix, 30, &kind);
    ins(&mut ix, 31, &format!("{kind}/docker-{APP}.scope"));
    let pod = ix.pod(UID_A).unwrap();
    assert_eq!((pod.qos, pod.cgroup_id), (QosClass::Guaranteed, Some(30)));
    assert_eq!(pod.containers[0].runtime, Runtime::Docker);

    // runc's systemd notation as a literal directory: no pod cgroup.
    let colon = format!(
        "/system.slice/containerd.service/kubepods-besteffort-pod{}.slice:cri-containerd:{SIDE}",
        us(UID_B)
    );
    assert_eq!(ins(&mut ix, 40, &colon), vec![added(UID_B), c_added(UID_B, SIDE)]);
    let pod = ix.pod(UID_B).unwrap();
    assert_eq!((pod.cgroup_id, pod.containers[0].cgroup_id), (None, 40));
    assert_eq!(
        ix.remove(40),
        vec![c_removed(UID_B, SIDE), Change::PodRemoved { uid: UID_B.into() }]
    );
}

#[test]
fn inserts_are_idempotent_and_a_reused_path_replaces_the_old_id() {
    let mut ix = PodIndex::default();
    let c = format!("{}/cri-containerd-{APP}.scope", pod_a());
    ins(&mut ix, 10, &pod_a());
    ins(&mut ix, 11, &c);
    assert!(ins(&mut ix, 11, &c).is_empty());
    // Removed and created again before we looked: new inode, same path.
    assert_eq!(
        ins(&mut ix, 12, &c),
        vec![c_removed(UID_A, APP), c_added(UID_A, APP)]
    );
    assert_eq!(ix.pod(UID_A).unwrap().containers[0].cgroup_id, 12);
    assert_eq!(ix.owner(11), None);
    assert_eq!(ix.id_of(Path::new(&c)), Some(12));
}

#[test]
fn names_apply_whenever_they_arrive_and_survive_a_rescan() {
    let mut ix = PodIndex::default();
    let meta = PodMeta {
        namespace: "shop".into(),
        name: "web-0".into(),
        containers: [(APP.to_string(), "nginx".to_string())].into(),
    };
    ins(&mut ix, 10, &pod_a());
    ix.set_meta(UID_A, Some(meta));
    ins(&mut ix, 11, &format!("{}/cri-containerd-{APP}.scope", pod_a()));
    let pod = ix.pod(UID_A).unwrap();
    assert_eq!(
        (pod.namespace.as_deref(), pod.name.as_deref()),
        (Some("shop"), Some("web-0"))
    );
    assert_eq!(pod.containers[0].name.as_deref(), Some("nginx"));
    let mut again = ix.fresh();
    again.insert(10, Path::new(&pod_a()));
    assert_eq!(again.pod(UID_A).unwrap().name.as_deref(), Some("web-0"));
    ix.set_meta(UID_A, None);
    assert_eq!(ix.pod(UID_A).unwrap().containers[0].name, None);
}

#[test]
fn diff_reports_what_a_rescan_found() {
    let mut old = PodIndex::default();
    ins(&mut old, 10, &pod_a());
    ins(&mut old, 11, &format!("{}/cri-containerd-{APP}.scope", pod_a()));
    let pb = format!("/kubepods/pod{UID_B}");
    ins(&mut old, 20, &pb);
    let mut new = old.fresh();
    ins(&mut new, 10, &pod_a());
    ins(&mut new, 12, &format!("{}/cri-containerd-{SIDE}.scope", pod_a()));
    let uid_c = "0123456789abcdef0123456789abcdef"; // a static pod
    ins(&mut new, 30, &format!("/kubepods/burstable/pod{uid_c}"));
    assert_eq!(
        PodIndex::diff(&old, &new),
        vec![
            c_removed(UID_A, APP),
            Change::PodRemoved { uid: UID_B.into() },
            // In uid order: the static pod's sorts first.
            added(uid_c),
            c_added(UID_A, SIDE),
        ]
    );
}

#[test]
fn owners_of_processes() {
    // This test runs in some cgroup that is not a pod's.
    let roots = PodRoots::default();
    match for_pid(std::process::id(), &roots).unwrap() {
        Owner::Other { path } => assert!(path.starts_with('/'), "{path}"),
        o => panic!("{o:?}"),
    }
    let p = format!("/kubepods.slice/kubepods-pod{}.slice/crio-{APP}.scope", us(UID_A));
    assert_eq!(
        owner_of_path(p.as_bytes(), &roots),
        Owner::Pod {
            uid: UID_A.into(),
            container: Some(APP.into())
        }
    );
    // Seen from a private cgroup namespace, other pods are above our root:
    // where they sit cannot be told, so they are no pods (the agent enters
    // the node's cgroup namespace to read paths from the top).
    let relative = format!("/../..{p}");
    assert!(matches!(
        owner_of_path(relative.as_bytes(), &roots),
        Owner::Other { .. }
    ));
    assert!(for_pid(u32::MAX, &roots).is_err());
}
