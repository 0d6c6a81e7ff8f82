use super::*;

const UID_A: &str = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";
const UID_B: &str = "c2f29d46-4c07-453e-a371-c188cf99a10a";
const UID_C: &str = "aaba3bf8-99f2-461b-92df-bd184094ded2";
const UID_D: &str = "2ddb1aaa-fc60-4219-9c22-b3c81315ea9a";
const UID_E: &str = "b0e72a06-b899-409c-b6ef-7a2bce8b459d";
const UID_F: &str = "e40941cf-c2db-42fa-adb8-4155794240b1";
const UID_G: &str = "91a86b6b-78e6-474c-b13b-31d9a20ae312";
const STATIC_UID: &str = "09a4bfe4385c84291973cec448f37468";

const ID_1: &str = "2a6295abe4ad85304e0c663938066a1b661c4ba471be265cdce3e138ae377088";
const ID_2: &str = "a65721290917cbe85fa0f08833e32bc3ff5ad42dc002b91f1cc51c1c94fe08e4";
const ID_3: &str = "801f271439288e986a5f4dbeb172a885446b086fe15c3a44063ced2f174751ba";
const ID_4: &str = "2a279a81037da512cdd66bfab128b487e3270d3ab8bef8a05e8e7854338a2ba5";
const ID_5: &str = "e8544df9366da2bacc6dead56b5376ef81887e6878d5d4a9f3e296f96c5d3852";
const ID_6: &str = "23897f4e2d5da12d62f856e9230f73c56f19d7d653af542da70dd893aa930d12";
const ID_7: &str = "bdd6eced5edf6f304a8c88c5a88cf1cb92426ac90fe34a48582357fb05f5c057";
const ID_8: &str = "85e699867ab5d175ab950e3761bb12788bccdea029269d50deb04b340197a8b7";
const PAUSE_ID: &str = "a4194b30bfda3da5c4a8bfc90e8d71339b3ba77cb1820902dfd305e9d5fb0a94";
const NODE_ID: &str = "3dad147cdcd49659fec23cef306ce3757df7c9158d1ac771fb475bf6eb675aa4";

fn us(uid: &str) -> String {
    systemd_slice_uid(uid)
}

fn pod(uid: &str, qos: QosClass, driver: Driver) -> Option<PodCgroup> {
    Some(PodCgroup {
        pod_uid: uid.to_string(),
        qos,
        driver,
        container: None,
    })
}

fn ctr(uid: &str, qos: QosClass, driver: Driver, id: &str, runtime: Runtime) -> Option<PodCgroup> {
    Some(PodCgroup {
        pod_uid: uid.to_string(),
        qos,
        driver,
        container: Some(ContainerRef {
            id: id.to_string(),
            runtime,
        }),
    })
}

/// Real-world layouts and near misses, with the full expected result.
fn table() -> Vec<(String, Option<PodCgroup>)> {
    use Driver::*;
    use QosClass::*;
    use Runtime::*;
    let a = us(UID_A);
    let b = us(UID_B);
    let c = us(UID_C);
    let d = us(UID_D);
    let g = us(UID_G);
    vec![
            // --- systemd driver ---
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/cri-containerd-{ID_1}.scope"),
                ctr(UID_A, Burstable, Systemd, ID_1, Containerd),
            ),
            // The pause (sandbox) container of the same pod is a container too.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/cri-containerd-{PAUSE_ID}.scope"),
                ctr(UID_A, Burstable, Systemd, PAUSE_ID, Containerd),
            ),
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{b}.slice/crio-{ID_2}.scope"),
                ctr(UID_B, BestEffort, Systemd, ID_2, CriO),
            ),
            // CRI-O's conmon: the pod's, no container.
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{b}.slice/crio-conmon-{ID_2}.scope"),
                pod(UID_B, BestEffort, Systemd),
            ),
            // CRI-O's nested `container` child: the same container.
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{b}.slice/crio-{ID_2}.scope/container"),
                ctr(UID_B, BestEffort, Systemd, ID_2, CriO),
            ),
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{c}.slice/docker-{ID_3}.scope"),
                ctr(UID_C, Burstable, Systemd, ID_3, Docker),
            ),
            // Guaranteed pods sit directly under kubepods.slice.
            (
                format!("/kubepods.slice/kubepods-pod{d}.slice/cri-containerd-{ID_4}.scope"),
                ctr(UID_D, Guaranteed, Systemd, ID_4, Containerd),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{d}.slice/crio-{ID_4}.scope"),
                ctr(UID_D, Guaranteed, Systemd, ID_4, CriO),
            ),
            // Pod-level cgroups.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice"),
                pod(UID_A, Burstable, Systemd),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{d}.slice/"),
                pod(UID_D, Guaranteed, Systemd),
            ),
            // Static pod (kube-apiserver, etcd): 32-hex MD5 UID.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{STATIC_UID}.slice/cri-containerd-{ID_5}.scope"),
                ctr(STATIC_UID, Burstable, Systemd, ID_5, Containerd),
            ),
            // kind node (systemd driver, cgroup root /kubelet).
            (
                format!("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{c}.slice/cri-containerd-{ID_6}.scope"),
                ctr(UID_C, Burstable, Systemd, ID_6, Containerd),
            ),
            // The same kind node seen from the host's cgroup namespace.
            (
                format!("/system.slice/docker-{NODE_ID}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{g}.slice/cri-containerd-{ID_7}.scope"),
                ctr(UID_G, BestEffort, Systemd, ID_7, Containerd),
            ),
            // runc's systemd notation created literally by a cgroupfs runtime.
            (
                format!("/system.slice/containerd.service/kubepods-burstable-pod{a}.slice:cri-containerd:{ID_1}"),
                ctr(UID_A, Burstable, Systemd, ID_1, Containerd),
            ),
            (
                format!("/system.slice/containerd.service/kubepods-pod{d}.slice:cri-containerd:{ID_8}"),
                ctr(UID_D, Guaranteed, Systemd, ID_8, Containerd),
            ),
            // A kind cluster running inside a pod: the outer pod owns it all.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/cri-containerd-{ID_1}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{b}.slice/cri-containerd-{ID_2}.scope"),
                ctr(UID_A, Burstable, Systemd, ID_1, Containerd),
            ),
            // --- cgroupfs driver ---
            (
                format!("/kubepods/burstable/pod{UID_E}/{ID_5}"),
                ctr(UID_E, Burstable, Cgroupfs, ID_5, Unknown),
            ),
            (
                format!("/kubepods/besteffort/pod{UID_F}/{ID_6}"),
                ctr(UID_F, BestEffort, Cgroupfs, ID_6, Unknown),
            ),
            (
                format!("/kubepods/pod{UID_G}/{ID_7}"),
                ctr(UID_G, Guaranteed, Cgroupfs, ID_7, Unknown),
            ),
            (
                format!("/kubepods/burstable/pod{UID_E}/crio-{ID_8}"),
                ctr(UID_E, Burstable, Cgroupfs, ID_8, CriO),
            ),
            (
                format!("/kubepods/burstable/pod{UID_E}/crio-conmon-{ID_8}"),
                pod(UID_E, Burstable, Cgroupfs),
            ),
            (
                format!("/kubepods/besteffort/pod{UID_F}"),
                pod(UID_F, BestEffort, Cgroupfs),
            ),
            // kind with the cgroupfs driver.
            (
                format!("/kubelet/kubepods/burstable/pod{UID_E}/{PAUSE_ID}"),
                ctr(UID_E, Burstable, Cgroupfs, PAUSE_ID, Unknown),
            ),
            // rootless k3s (cgroupfs driver under a delegated user service).
            (
                format!("/user.slice/user-1001.slice/user@1001.service/k3s-rootless.service/kubepods/pod{UID_F}/{ID_3}"),
                ctr(UID_F, Guaranteed, Cgroupfs, ID_3, Unknown),
            ),
            // k3d node seen from the host.
            (
                format!("/system.slice/docker-{NODE_ID}.scope/kubepods/besteffort/pod{UID_G}/{ID_4}"),
                ctr(UID_G, BestEffort, Cgroupfs, ID_4, Unknown),
            ),
            // A container that made cgroups of its own (systemd inside it).
            (
                format!("/kubepods/burstable/pod{UID_E}/{ID_5}/init.scope"),
                ctr(UID_E, Burstable, Cgroupfs, ID_5, Unknown),
            ),
            // --- not pods ---
            ("/".to_string(), None),
            (String::new(), None),
            ("/system.slice/sshd.service".to_string(), None),
            ("/system.slice/containerd.service".to_string(), None),
            ("/user.slice/user-1000.slice/session-3.scope".to_string(), None),
            ("/kubepods.slice".to_string(), None),
            ("/kubepods.slice/kubepods-burstable.slice".to_string(), None),
            ("/kubepods.slice/kubepods-besteffort.slice".to_string(), None),
            ("/kubepods".to_string(), None),
            ("/kubepods/burstable".to_string(), None),
            // k3s moves its own process here; not a pod.
            ("/k3s".to_string(), None),
            ("/init".to_string(), None),
            // Not a UUID.
            (
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podnot_a_uid.slice".to_string(),
                None,
            ),
            // Wrong grouping (9-3-4-4-12).
            (
                "/kubepods/burstable/poda3ae0dbd3-8d5-48fe-808c-a4d5dada806d".to_string(),
                None,
            ),
            // Mixed separators.
            (
                "/kubepods.slice/kubepods-poda3ae0dbd_38d5-48fe_808c_a4d5dada806d.slice".to_string(),
                None,
            ),
            // Non-hex digit.
            (
                "/kubepods/burstable/podg3ae0dbd-38d5-48fe-808c-a4d5dada806d".to_string(),
                None,
            ),
            // pod<uid> outside the kubepods QoS hierarchy.
            (format!("/burstable/pod{UID_E}/{ID_5}"), None),
            (format!("/foo/pod{UID_E}"), None),
            // Slice whose parent is not kubepods.
            (format!("/notkubepods-pod{a}.slice"), None),
            // Empty container id.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/cri-containerd-.scope"),
                None,
            ),
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/crio-conmon-.scope"),
                None,
            ),
            // A systemd pod slice holds scopes, not services.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/foo.service"),
                None,
            ),
            // A cgroupfs pod directory holds bare ids, not scopes.
            (format!("/kubepods/burstable/pod{UID_E}/{ID_5}.scope"), None),
            // Id too long.
            (
                format!("/kubepods/burstable/pod{UID_E}/{}", "a".repeat(MAX_CONTAINER_ID_LEN + 1)),
                None,
            ),
        ]
}

#[test]
fn table_paths_parse_to_expected_identity() {
    let table = table();
    assert!(table.len() >= 20);
    for (path, expected) in &table {
        assert_eq!(&parse(path.as_bytes()), expected, "path: {path}");
    }
}

#[test]
fn non_utf8_bytes() {
    // Below a container: still that container.
    let mut path = format!("/kubepods/burstable/pod{UID_E}/{ID_5}/").into_bytes();
    path.extend_from_slice(b"\xff\xfe\x80sub");
    assert_eq!(
        parse(&path),
        ctr(
            UID_E,
            QosClass::Burstable,
            Driver::Cgroupfs,
            ID_5,
            Runtime::Unknown
        )
    );
    // In the container id: rejected.
    let mut path = format!("/kubepods/burstable/pod{UID_E}/").into_bytes();
    path.extend_from_slice(b"abc\xff");
    assert_eq!(parse(&path), None);
    // In an unrelated ancestor: irrelevant.
    let mut path = b"/\xc3\x28weird/".to_vec();
    path.extend_from_slice(format!("kubepods/pod{UID_G}").as_bytes());
    assert_eq!(parse(&path), pod(UID_G, QosClass::Guaranteed, Driver::Cgroupfs));
}

#[test]
fn os_str_entry_point_matches_bytes() {
    use std::os::unix::ffi::OsStrExt;
    for (path, expected) in table() {
        assert_eq!(parse_os_str(OsStr::from_bytes(path.as_bytes())), expected);
    }
}

#[test]
fn uppercase_uid_is_canonicalised() {
    let upper = UID_A.to_ascii_uppercase().replace('-', "_");
    let path = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{upper}.slice");
    assert_eq!(
        parse(path.as_bytes()),
        pod(UID_A, QosClass::Burstable, Driver::Systemd)
    );
}

#[test]
fn canonical_uid_helper() {
    assert_eq!(canonical_uid(&us(UID_A)).as_deref(), Some(UID_A));
    assert_eq!(canonical_uid(UID_A).as_deref(), Some(UID_A));
    assert_eq!(
        canonical_uid("09A4BFE4385C84291973CEC448F37468").as_deref(),
        Some(STATIC_UID)
    );
    assert_eq!(canonical_uid(""), None);
    assert_eq!(canonical_uid("a3ae0dbd-38d5-48fe-808c-a4d5dada806"), None);
    assert_eq!(canonical_uid("a3ae0dbd-38d5-48fe-808c_a4d5dada806d"), None);
    assert_eq!(canonical_uid("a3ae0dbd+38d5+48fe+808c+a4d5dada806d"), None);
}

#[test]
fn display_and_serialize_are_lowercase() {
    let cases: [(String, String); 9] = [
        (QosClass::Guaranteed.to_string(), "guaranteed".into()),
        (QosClass::Burstable.to_string(), "burstable".into()),
        (QosClass::BestEffort.to_string(), "besteffort".into()),
        (Runtime::Containerd.to_string(), "containerd".into()),
        (Runtime::CriO.to_string(), "cri-o".into()),
        (Runtime::Docker.to_string(), "docker".into()),
        (Runtime::Unknown.to_string(), "unknown".into()),
        (Driver::Systemd.to_string(), "systemd".into()),
        (Driver::Cgroupfs.to_string(), "cgroupfs".into()),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
    for q in [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort] {
        assert_eq!(serde_json::to_value(q).unwrap(), q.to_string());
    }
    for r in [
        Runtime::Containerd,
        Runtime::CriO,
        Runtime::Docker,
        Runtime::Unknown,
    ] {
        assert_eq!(serde_json::to_value(r).unwrap(), r.to_string());
    }
    for d in [Driver::Systemd, Driver::Cgroupfs] {
        assert_eq!(serde_json::to_value(d).unwrap(), d.to_string());
    }
    let parsed = ctr(UID_B, QosClass::BestEffort, Driver::Systemd, ID_2, Runtime::CriO);
    assert_eq!(
        serde_json::to_value(parsed).unwrap(),
        serde_json::json!({
            "pod_uid": UID_B,
            "qos": "besteffort",
            "driver": "systemd",
            "container": {"id": ID_2, "runtime": "cri-o"},
        })
    );
}

/// Every prefix of every table path (exhaustively, not sampled): no
/// panic, and a prefix of a pod path that still parses names the same pod
/// (truncation cannot invent a UID). Prefixes of negative rows may parse:
/// e.g. cutting off an invalid container component leaves a pod cgroup.
#[test]
fn every_truncation_of_table_paths() {
    for (path, full) in table() {
        let bytes = path.as_bytes();
        for end in 0..=bytes.len() {
            let got = parse(&bytes[..end]);
            if let (Some(got), Some(full)) = (got, &full) {
                let shown = String::from_utf8_lossy(&bytes[..end]);
                assert_eq!(got.pod_uid, full.pod_uid, "prefix {shown:?}");
                assert_eq!(got.qos, full.qos, "prefix {shown:?}");
                assert_eq!(got.driver, full.driver, "prefix {shown:?}");
            }
        }
    }
}

#[test]
fn long_paths() {
    // 100 KiB of unrelated hierarchy in front of a pod is still found.
    let mut path = "/x.slice".repeat(100 * 1024 / 8);
    path.push_str(&format!("/kubepods/pod{UID_G}/{ID_7}"));
    assert_eq!(
        parse(path.as_bytes()),
        ctr(
            UID_G,
            QosClass::Guaranteed,
            Driver::Cgroupfs,
            ID_7,
            Runtime::Unknown
        )
    );
    // One 100 KiB component, and 100 KiB of slashes.
    assert_eq!(parse(&vec![b'a'; 100 * 1024]), None);
    assert_eq!(parse(&vec![b'/'; 100 * 1024]), None);
    // A 100 KiB "container id" is rejected, not allocated into a String.
    let mut path = format!("/kubepods/pod{UID_G}/").into_bytes();
    path.extend(std::iter::repeat_n(b'f', 100 * 1024));
    assert_eq!(parse(&path), None);
}

mod properties;
