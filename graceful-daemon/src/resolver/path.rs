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
use std::fmt;
use std::os::unix::ffi::OsStrExt;

use serde::{Deserialize, Serialize};

/// Longest container id accepted. Runtimes use 64 hex characters; containerd
/// allows ids up to 76 characters; 128 leaves room without accepting
/// arbitrarily long junk.
pub const MAX_CONTAINER_ID_LEN: usize = 128;

/// Kubernetes QoS class, read from the kubepods sub-hierarchy the pod sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Container runtime, read from the prefix of the container cgroup name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Runtime {
    #[serde(rename = "containerd")]
    Containerd,
    #[serde(rename = "cri-o")]
    CriO,
    #[serde(rename = "docker")]
    Docker,
    /// No prefix (cgroupfs containerd/docker use bare ids) or one we don't know.
    #[serde(rename = "unknown")]
    Unknown,
}

/// Which kubelet cgroup driver produced the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Systemd,
    Cgroupfs,
}

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

impl QosClass {
    pub const fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "guaranteed",
            QosClass::Burstable => "burstable",
            QosClass::BestEffort => "besteffort",
        }
    }
}

impl Runtime {
    pub const fn as_str(self) -> &'static str {
        match self {
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Docker => "docker",
            Runtime::Unknown => "unknown",
        }
    }
}

impl Driver {
    pub const fn as_str(self) -> &'static str {
        match self {
            Driver::Systemd => "systemd",
            Driver::Cgroupfs => "cgroupfs",
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parse a cgroup path (relative to the cgroup2 mount, normally starting with
/// `/`) into the pod it belongs to. `None` for anything that is not a pod or
/// container cgroup. Never panics, whatever the bytes.
pub fn parse(path: &[u8]) -> Option<PodCgroup> {
    // Empty components (leading, trailing or doubled `/`) carry no meaning.
    let mut components = path.split(|&b| b == b'/').filter(|c| !c.is_empty());
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
            return Some(PodCgroup {
                pod_uid: found.uid,
                qos: found.qos,
                driver: found.driver,
                container,
            });
        }
        grandparent = parent;
        parent = component;
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
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    // --- property tests ---

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
}
