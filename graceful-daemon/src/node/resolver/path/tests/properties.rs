//! Property tests of the path parser: arbitrary and mutated input never
//! panics, and every generated layout parses back to what built it.

use super::*;
use proptest::prelude::*;

fn qos_strategy() -> impl Strategy<Value = QosClass> {
    prop_oneof![
        Just(QosClass::Guaranteed),
        Just(QosClass::Burstable),
        Just(QosClass::BestEffort),
    ]
}

fn runtime_strategy() -> impl Strategy<Value = Runtime> {
    prop_oneof![
        Just(Runtime::Containerd),
        Just(Runtime::CriO),
        Just(Runtime::Docker),
        Just(Runtime::Unknown),
    ]
}

/// (uid as written in the path, in dashed form; canonical uid)
fn uid_strategy() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        3 => (any::<[u8; 16]>(), any::<bool>()).prop_map(|(b, upper)| {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            let canonical = format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            );
            let written = if upper { canonical.to_ascii_uppercase() } else { canonical.clone() };
            (written, canonical)
        }),
        1 => "[0-9a-f]{32}".prop_map(|s| (s.clone(), s)),
    ]
}

fn id_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[0-9a-f]{64}",
        1 => "[0-9a-zA-Z]{1,128}",
    ]
}

#[derive(Debug, Clone, Copy)]
enum Layout {
    Systemd,
    Cgroupfs,
    /// `<pod slice>:<prefix>:<id>` under containerd.service.
    Colon,
}

#[derive(Debug, Clone, Copy)]
enum Below {
    Nothing,
    Container,
    Conmon,
}

fn qos_word(qos: QosClass) -> Option<&'static str> {
    match qos {
        QosClass::Guaranteed => None,
        QosClass::Burstable => Some("burstable"),
        QosClass::BestEffort => Some("besteffort"),
    }
}

fn runtime_prefix(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Containerd => "cri-containerd",
        Runtime::CriO => "crio",
        Runtime::Docker => "docker",
        Runtime::Unknown => "",
    }
}

/// The systemd pod slice name, e.g. `kubelet-kubepods-burstable-pod<uid_>.slice`,
/// after appending the ancestor slices to `path`.
fn push_systemd_pod(path: &mut String, root: &str, qos: QosClass, uid: &str) -> String {
    let mut name = String::new();
    if !root.is_empty() {
        path.push_str(&format!("/{root}.slice"));
        name.push_str(root);
        name.push('-');
    }
    name.push_str("kubepods");
    path.push_str(&format!("/{name}.slice"));
    if let Some(q) = qos_word(qos) {
        name.push_str(&format!("-{q}"));
        path.push_str(&format!("/{name}.slice"));
    }
    format!("{name}-pod{}.slice", systemd_slice_uid(uid))
}

#[allow(clippy::too_many_arguments)]
fn build_path(
    layout: Layout,
    outer: &str,
    root: &str,
    qos: QosClass,
    uid: &str,
    below: Below,
    runtime: Runtime,
    id: &str,
    nested: Option<&[u8]>,
) -> Vec<u8> {
    let mut path = outer.to_string();
    match layout {
        Layout::Systemd => {
            let pod = push_systemd_pod(&mut path, root, qos, uid);
            path.push_str(&format!("/{pod}"));
            match below {
                Below::Nothing => {}
                Below::Container => {
                    let p = runtime_prefix(runtime);
                    let sep = if p.is_empty() { "" } else { "-" };
                    path.push_str(&format!("/{p}{sep}{id}.scope"));
                }
                Below::Conmon => path.push_str(&format!("/crio-conmon-{id}.scope")),
            }
        }
        Layout::Cgroupfs => {
            if !root.is_empty() {
                path.push_str(&format!("/{root}"));
            }
            path.push_str("/kubepods");
            if let Some(q) = qos_word(qos) {
                path.push_str(&format!("/{q}"));
            }
            path.push_str(&format!("/pod{uid}"));
            match below {
                Below::Nothing => {}
                Below::Container => {
                    let p = runtime_prefix(runtime);
                    let sep = if p.is_empty() { "" } else { "-" };
                    path.push_str(&format!("/{p}{sep}{id}"));
                }
                Below::Conmon => path.push_str(&format!("/crio-conmon-{id}")),
            }
        }
        Layout::Colon => {
            // Ancestor slices are not created in this form; only the name.
            let pod = push_systemd_pod(&mut String::new(), root, qos, uid);
            let prefix = match below {
                Below::Conmon => "crio-conmon",
                _ => runtime_prefix(runtime),
            };
            path.push_str(&format!("/system.slice/containerd.service/{pod}:{prefix}:{id}"));
        }
    }
    let mut path = path.into_bytes();
    if let (Some(nested), false) = (nested, matches!(below, Below::Nothing)) {
        path.push(b'/');
        path.extend_from_slice(nested);
    }
    path
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse(&bytes);
    }

    /// Bytes drawn mostly from the characters that matter to the parser,
    /// so that near-miss shapes are actually explored.
    #[test]
    fn near_miss_alphabet_never_panics(
        bytes in prop::collection::vec(
            prop::sample::select(b"/-_.:podkubeslicscopabrtf0123456789\xff".to_vec()),
            0..512,
        )
    ) {
        let _ = parse(&bytes);
    }

    #[test]
    fn mutated_table_paths_never_panic(
        index in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let table = table();
        let mut path = table[index.index(table.len())].0.clone().into_bytes();
        for (at, byte) in edits {
            if path.is_empty() {
                path.push(byte);
            } else {
                let i = at.index(path.len());
                path[i] = byte;
            }
        }
        let _ = parse(&path);
    }

    /// A table path cut anywhere, with arbitrary bytes (often not UTF-8)
    /// glued on where it was cut.
    #[test]
    fn truncated_table_paths_with_junk_never_panic(
        index in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let table = table();
        let full = table[index.index(table.len())].0.as_bytes();
        let mut path = full[..cut.index(full.len() + 1)].to_vec();
        path.extend_from_slice(&junk);
        let _ = parse(&path);
    }

    #[test]
    fn roundtrip(
        layout in prop_oneof![Just(Layout::Systemd), Just(Layout::Cgroupfs), Just(Layout::Colon)],
        outer in prop::sample::select(vec![
            "",
            "/system.slice/docker-3dad147cdcd49659fec23cef306ce3757df7c9158d1ac771fb475bf6eb675aa4.scope",
            "/user.slice/user-1001.slice/user@1001.service/k3s-rootless.service",
        ]),
        root in prop::sample::select(vec!["", "kubelet", "custom"]),
        qos in qos_strategy(),
        (written_uid, canonical) in uid_strategy(),
        below in prop_oneof![Just(Below::Nothing), Just(Below::Container), Just(Below::Conmon)],
        runtime in runtime_strategy(),
        id in id_strategy(),
        nested in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    ) {
        // The colon form always names a container.
        let below = match (layout, below) {
            (Layout::Colon, Below::Nothing) => Below::Container,
            (_, b) => b,
        };
        let path = build_path(
            layout, outer, root, qos, &written_uid, below, runtime, &id, nested.as_deref(),
        );
        let driver = match layout {
            Layout::Cgroupfs => Driver::Cgroupfs,
            Layout::Systemd | Layout::Colon => Driver::Systemd,
        };
        let container = match below {
            Below::Container => Some(ContainerRef { id: id.clone(), runtime }),
            Below::Nothing | Below::Conmon => None,
        };
        let expected = PodCgroup { pod_uid: canonical, qos, driver, container };
        prop_assert_eq!(parse(&path), Some(expected), "path {:?}", String::from_utf8_lossy(&path));
    }
}

proptest! {
    // 100 KiB inputs: fewer cases keep the debug-build run short.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn very_long_arbitrary_paths_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 100 * 1024..=100 * 1024 + 16)
    ) {
        let _ = parse(&bytes);
    }

    #[test]
    fn very_long_component_soup_never_panics(
        parts in prop::collection::vec(
            prop::sample::select(vec![
                "/", "kubepods", ".slice", "-burstable", "-besteffort", "-pod", "pod",
                "burstable", "besteffort", ".scope", "cri-containerd-", "crio-",
                "crio-conmon-", ":", "a3ae0dbd_38d5_48fe_808c_a4d5dada806d",
                "a3ae0dbd-38d5-48fe-808c-a4d5dada806d", ID_1, "\u{fffd}",
            ]),
            1..400,
        )
    ) {
        // Repeat the soup up to 100 KiB so that long runs of pod-ish
        // components are exercised.
        let soup = parts.concat();
        let path = soup.repeat(100 * 1024 / soup.len() + 1);
        prop_assert!(path.len() >= 100 * 1024);
        let _ = parse(path.as_bytes());
    }
}
