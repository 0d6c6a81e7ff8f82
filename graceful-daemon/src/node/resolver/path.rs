//! Parse a cgroup v2 path into the identity of the Kubernetes pod (and
//! container) that owns it.
//!
//! The input is the path of a cgroup relative to the cgroup2 mount, e.g.
//! `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`.
//! It is taken as raw bytes because cgroup names are arbitrary bytes chosen by
//! whoever created them; nothing guarantees UTF-8.
//!
//! # Layouts understood
//!
//! systemd cgroup driver (the kubelet asks systemd for slices, so every name
//! spells out its whole ancestry with `-` separators and the pod UID has its
//! dashes escaped as `_`):
//! - burstable / besteffort:
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/<prefix>-<id>.scope`
//! - guaranteed (directly under the root slice):
//!   `/kubepods.slice/kubepods-pod<uid_>.slice/<prefix>-<id>.scope`
//! - `<prefix>` is `cri-containerd`, `crio` or `docker`; CRI-O also creates
//!   `crio-conmon-<id>.scope` and, with some versions, a nested
//!   `crio-<id>.scope/container` child.
//! - a non-default cgroup root, as kind uses (`--cgroup-root=/kubelet`):
//!   `/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod<uid_>.slice/...`
//!
//! cgroupfs driver (plain directories, UID keeps its dashes):
//! - `/kubepods/burstable/pod<uid>/<id>`, `/kubepods/besteffort/pod<uid>/<id>`,
//!   guaranteed `/kubepods/pod<uid>/<id>`; containerd and docker name the
//!   container directory by its bare id, CRI-O uses `crio-<id>` and
//!   `crio-conmon-<id>`.
//! - nested roots: kind with cgroupfs (`/kubelet/kubepods/...`), k3s
//!   (`/kubepods/...`, its own process sits in `/k3s`, which is not a pod),
//!   rootless k3s
//!   (`/user.slice/user-1001.slice/user@1001.service/k3s-rootless.service/kubepods/...`),
//!   k3d / kind nodes seen from the host
//!   (`/system.slice/docker-<node>.scope/kubepods/...`).
//!
//! containerd/runc "systemd cgroup path" notation taken literally: when the
//! kubelet uses the systemd driver but the runtime is configured for
//! cgroupfs, runc treats `kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>`
//! as a relative directory name and creates it under its own cgroup, giving
//! `/system.slice/containerd.service/kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>`.
//! That single component carries both the pod and the container.
//!
//! # Why the pod component is searched for anywhere in the path
//!
//! Where the kubepods hierarchy starts depends on the kubelet's cgroup root,
//! on the distribution (kind, k3s, rootless setups) and on the cgroup
//! namespace the agent happens to see the mount through (a kind node seen from
//! the host has `/system.slice/docker-<node>.scope` in front of everything).
//! Enumerating roots would miss the next one, so instead each component is
//! tested for the shape of a pod cgroup, which is distinctive enough on its
//! own: a validated UID plus the kubepods / QoS naming around it.
//!
//! The *outermost* pod component wins. When pods run inside a pod (kind or
//! docker-in-docker in a pod), the outer pod is the one that belongs to the
//! kubelet whose hierarchy this mount shows, and an agent inside the inner
//! node sees a mount rooted below the outer pod anyway.
//!
//! # What comes after the pod component
//!
//! - nothing: the pod-level cgroup, `container: None`;
//! - a container cgroup (pause/sandbox containers included; they are
//!   containers of the pod like any other): `container: Some(..)`;
//! - CRI-O's conmon cgroup (`crio-conmon-<id>`): `container: None`. conmon is
//!   the runtime's per-container monitor, not part of the container; its
//!   cgroup is pod overhead, so it is reported as belonging to the pod and to
//!   no container. A caller cannot tell it apart from the pod-level cgroup by
//!   the parsed value alone.
//! - anything deeper below a container (CRI-O's nested `container` child, or
//!   cgroups a container with a writable cgroupfs made for itself, such as
//!   systemd or a nested kubelet running inside it): the same container, since
//!   the processes there are still that container's processes;
//! - any other child of the pod cgroup: `None`, the layout is not one we know.
//!
//! # UIDs
//!
//! API-server pods have RFC 4122 UIDs (8-4-4-4-12 hex). They are accepted with
//! either `-` or `_` as separator (used consistently) and returned canonical:
//! lowercase with dashes. Static pods (manifests read by the kubelet itself,
//! e.g. kube-apiserver or etcd) get an MD5 hex digest of 32 characters without
//! separators as their UID, and their cgroups carry it verbatim; those are
//! accepted too and returned lowercase, unchanged, because that is the value
//! of the mirror pod's `kubernetes.io/config.hash` annotation. Anything else
//! is rejected.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

pub use graceful_api::views::pods::{Driver, QosClass, Runtime};
use serde::Serialize;

/// Longest container id accepted. Runtimes use 64 hex characters; containerd
/// allows ids up to 76 characters; 128 leaves room without accepting
/// arbitrarily long junk.
pub const MAX_CONTAINER_ID_LEN: usize = 128;

/// The pod (and possibly container) a cgroup belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct PodCgroup {
    /// Canonical UID: lowercase with dashes (32 lowercase hex for static pods).
    pub pod_uid: String,
    pub qos: QosClass,
    pub driver: Driver,
    /// `None` for the pod-level cgroup itself (and for CRI-O's conmon cgroup).
    pub container: Option<ContainerRef>,
}

/// A container cgroup inside a pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ContainerRef {
    /// The id as the runtime wrote it (64 hex for all the common runtimes).
    pub id: String,
    pub runtime: Runtime,
}

/// Parse a cgroup path (relative to the cgroup2 mount, normally starting with
/// `/`) into the pod it belongs to. `None` for anything that is not a pod or
/// container cgroup. Never panics, whatever the bytes.
pub fn parse(path: &[u8]) -> Option<PodCgroup> {
    parse_at(path).map(|(pc, _)| pc)
}

/// [`parse`], for a pod whose pod component sits under one of `roots`
/// (see [`super::roots`]): what the kubelet made, not a name that looks it.
pub fn parse_rooted(path: &[u8], roots: &crate::kernel::cgroupfs::roots::PodRoots) -> Option<PodCgroup> {
    let (pc, depth) = parse_at(path)?;
    let before: Vec<&[u8]> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .take(depth)
        .collect();
    roots.admits(&before).then_some(pc)
}

/// [`parse`], with how many components come before the pod's.
fn parse_at(path: &[u8]) -> Option<(PodCgroup, usize)> {
    // Empty components (leading, trailing or doubled `/`) carry no meaning.
    let mut components = path.split(|&b| b == b'/').filter(|c| !c.is_empty());
    let mut depth = 0;
    // The two components above the current one: the cgroupfs layout is only
    // recognisable from its parents (`kubepods/burstable/pod<uid>`).
    let mut grandparent: &[u8] = b"";
    let mut parent: &[u8] = b"";

    while let Some(component) = components.next() {
        if let Some(found) = match_pod_component(component, parent, grandparent) {
            let child = match found.inline_child {
                // The colon form already named the container; whatever is
                // below it is the container's own business.
                Some(child) => Some(child),
                None => match components.next() {
                    None => None,
                    // Commit to the outermost pod: an unrecognised child makes
                    // the whole path unrecognised rather than letting a deeper
                    // pod component be picked up.
                    Some(c) => Some(parse_container_component(c, found.driver)?),
                },
            };
            let container = match child {
                Some(Child::Container(c)) => Some(c),
                Some(Child::Conmon) | None => None,
            };
            return Some((
                PodCgroup {
                    pod_uid: found.uid,
                    qos: found.qos,
                    driver: found.driver,
                    container,
                },
                depth,
            ));
        }
        grandparent = parent;
        parent = component;
        depth += 1;
    }
    None
}

/// [`parse`] for an `OsStr`, e.g. a path read from the filesystem or from
/// `/proc/<pid>/cgroup`.
pub fn parse_os_str(path: &OsStr) -> Option<PodCgroup> {
    parse(path.as_bytes())
}

/// Canonical form of a pod UID as it appears in a cgroup name or in the API:
/// an 8-4-4-4-12 hex UUID with `-` or `_` separators becomes lowercase with
/// dashes; a static pod's 32-hex UID becomes lowercase. `None` otherwise.
pub fn canonical_uid(uid: &str) -> Option<String> {
    canonical_uid_bytes(uid.as_bytes())
}

/// The UID as the systemd driver writes it in slice names (`-` escaped to
/// `_`, since `-` separates hierarchy levels in systemd unit names).
pub fn systemd_slice_uid(uid: &str) -> String {
    uid.replace('-', "_")
}

/// What a pod-shaped component told us.
struct PodMatch {
    uid: String,
    qos: QosClass,
    driver: Driver,
    /// Set only for the `slice:prefix:name` form, which names the container
    /// in the same component.
    inline_child: Option<Child>,
}

/// What sits below a pod cgroup.
enum Child {
    Container(ContainerRef),
    /// CRI-O's conmon: belongs to the pod, not to a container.
    Conmon,
}

fn match_pod_component(component: &[u8], parent: &[u8], grandparent: &[u8]) -> Option<PodMatch> {
    if let Some((uid, qos)) = parse_pod_slice(component) {
        return Some(PodMatch {
            uid,
            qos,
            driver: Driver::Systemd,
            inline_child: None,
        });
    }
    if let Some((uid, qos)) = parse_cgroupfs_pod_dir(component, parent, grandparent) {
        return Some(PodMatch {
            uid,
            qos,
            driver: Driver::Cgroupfs,
            inline_child: None,
        });
    }
    parse_colon_form(component)
}

/// `<parent>-pod<uid>.slice`, where the parent slice name ends in `kubepods`,
/// `kubepods-burstable` or `kubepods-besteffort`. A systemd slice name spells
/// out its whole ancestry, so the name alone identifies a pod slice and its
/// QoS class; the parent directories need not be looked at.
fn parse_pod_slice(component: &[u8]) -> Option<(String, QosClass)> {
    let name = component.strip_suffix(b".slice")?;
    // The UID has a fixed length (36 as a UUID, 32 for static pods), so it is
    // cut from the end rather than split on `-`, which would also work for
    // the `_`-escaped form but not for a dashed one.
    for uid_len in [36, 32] {
        let Some(split) = name.len().checked_sub(uid_len) else {
            continue;
        };
        let (head, raw_uid) = name.split_at(split);
        let Some(parent_slice) = head.strip_suffix(b"-pod") else {
            continue;
        };
        let Some(uid) = canonical_uid_bytes(raw_uid) else {
            continue;
        };
        if let Some(qos) = qos_from_parent_slice(parent_slice) {
            return Some((uid, qos));
        }
    }
    None
}

fn qos_from_parent_slice(parent: &[u8]) -> Option<QosClass> {
    let (kubepods, qos) = if let Some(rest) = parent.strip_suffix(b"-burstable") {
        (rest, QosClass::Burstable)
    } else if let Some(rest) = parent.strip_suffix(b"-besteffort") {
        (rest, QosClass::BestEffort)
    } else {
        (parent, QosClass::Guaranteed)
    };
    let root = kubepods.strip_suffix(b"kubepods")?;
    // `kubepods` itself, or `<root>-kubepods` for a non-default cgroup root
    // (kind's `kubelet-kubepods`); not `notkubepods`.
    (root.is_empty() || root.ends_with(b"-")).then_some(qos)
}

/// `pod<uid>` under `kubepods` (guaranteed) or under `kubepods/burstable` /
/// `kubepods/besteffort`. Unlike systemd names, a bare `pod<uid>` directory
/// says nothing about QoS, so the parents must be checked.
fn parse_cgroupfs_pod_dir(component: &[u8], parent: &[u8], grandparent: &[u8]) -> Option<(String, QosClass)> {
    let uid = canonical_uid_bytes(component.strip_prefix(b"pod")?)?;
    let qos = match parent {
        b"kubepods" => QosClass::Guaranteed,
        b"burstable" if grandparent == b"kubepods" => QosClass::Burstable,
        b"besteffort" if grandparent == b"kubepods" => QosClass::BestEffort,
        _ => return None,
    };
    Some((uid, qos))
}

/// `<pod slice>:<prefix>:<id>`: runc's systemd cgroup notation created as a
/// literal directory by a cgroupfs-configured runtime. Reported with the
/// systemd driver, since that is how the kubelet named it.
fn parse_colon_form(component: &[u8]) -> Option<PodMatch> {
    let mut parts = component.splitn(3, |&b| b == b':');
    let slice = parts.next()?;
    let prefix = parts.next()?;
    let id = parts.next()?;
    let (uid, qos) = parse_pod_slice(slice)?;
    let prefix = (!prefix.is_empty()).then_some(prefix);
    Some(PodMatch {
        uid,
        qos,
        driver: Driver::Systemd,
        inline_child: Some(child_from_parts(prefix, id)?),
    })
}

/// The cgroup directly below a pod cgroup: `<prefix>-<id>.scope` with the
/// systemd driver, `<id>` or `<prefix>-<id>` with cgroupfs.
fn parse_container_component(component: &[u8], driver: Driver) -> Option<Child> {
    let name = match driver {
        Driver::Systemd => component.strip_suffix(b".scope")?,
        Driver::Cgroupfs => component,
    };
    // Ids never contain `-`, so the last `-` separates prefix and id.
    let (prefix, id) = match name.iter().rposition(|&b| b == b'-') {
        Some(i) => (Some(&name[..i]), &name[i + 1..]),
        None => (None, name),
    };
    child_from_parts(prefix, id)
}

fn child_from_parts(prefix: Option<&[u8]>, id: &[u8]) -> Option<Child> {
    let id = container_id(id)?;
    let runtime = match prefix {
        None => Runtime::Unknown,
        Some(b"crio-conmon") => return Some(Child::Conmon),
        Some(b"cri-containerd") => Runtime::Containerd,
        Some(b"crio") => Runtime::CriO,
        Some(b"docker") => Runtime::Docker,
        // Some other runtime's prefix (e.g. podman's `libpod`): still a
        // container of the pod, runtime unknown. Insist on a plain word so
        // that garbage is not taken for a container.
        Some(p) if is_prefix_word(p) => Runtime::Unknown,
        Some(_) => return None,
    };
    Some(Child::Container(ContainerRef { id, runtime }))
}

fn is_prefix_word(prefix: &[u8]) -> bool {
    !prefix.is_empty()
        && !prefix.starts_with(b"-")
        && prefix
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn container_id(id: &[u8]) -> Option<String> {
    let valid =
        !id.is_empty() && id.len() <= MAX_CONTAINER_ID_LEN && id.iter().all(u8::is_ascii_alphanumeric);
    // All ASCII, so the conversion cannot fail.
    valid.then(|| String::from_utf8_lossy(id).into_owned())
}

fn canonical_uid_bytes(raw: &[u8]) -> Option<String> {
    match raw.len() {
        36 => {
            let sep = raw[8];
            if sep != b'-' && sep != b'_' {
                return None;
            }
            let mut out = String::with_capacity(36);
            for (i, &b) in raw.iter().enumerate() {
                if matches!(i, 8 | 13 | 18 | 23) {
                    // One separator style throughout: mixed ones are not
                    // something either driver writes.
                    if b != sep {
                        return None;
                    }
                    out.push('-');
                } else if b.is_ascii_hexdigit() {
                    out.push(char::from(b.to_ascii_lowercase()));
                } else {
                    return None;
                }
            }
            Some(out)
        }
        // Static pod: hex MD5 digest of the manifest.
        32 if raw.iter().all(u8::is_ascii_hexdigit) => {
            Some(raw.iter().map(|&b| char::from(b.to_ascii_lowercase())).collect())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
