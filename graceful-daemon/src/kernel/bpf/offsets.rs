//! The struct offsets the programs read, from the running kernel's BTF, and
//! the loader that sets them (with the counting design) as globals: Rust
//! eBPF has no CO-RE relocations, so no offset is compiled in.

use aya::EbpfLoader;
use graceful_common::names;

use super::{btf::Btf, error::LoadError};

/// Offsets the programs read.
pub struct Offsets {
    skc_state: u32,
    sk_protocol: u32,
    /// For the exclusions: `skc_family`, `skc_num`, `skc_daddr`,
    /// `skc_v6_daddr` in `struct sock_common`.
    peer: [u32; 4],
    /// `cgroup.kn` and `kernfs_node.id`: a cgroup's v2 id, for
    /// `cgroup_populated` and for the sock_ops program's owners.
    cgroup_id: Result<[u32; 2], String>,
    /// For `cgroup_populated`: `cgroup.root`, `cgroup_root.hierarchy_id`.
    /// `Err` says why they could not be found; then container exits are
    /// seen through inotify only.
    cgroup_root: Result<[u32; 2], String>,
    /// For the sock_ops design: the cgroup pointer in `struct sock`, and
    /// `bpf_sock_ops_cb_flags` in `struct tcp_sock`. `Err` says why the
    /// design cannot run here.
    sock_ops: Result<[u32; 2], String>,
    /// 1 when that cgroup pointer is a typed field (5.15 on).
    sk_cgroup_typed: u32,
    /// `sk_bpf_storage` in `struct sock`; 0 when unknown.
    sk_storage: u32,
}

impl Offsets {
    pub fn from_kernel() -> Result<Self, LoadError> {
        let btf = Btf::from_sys_fs()?;
        let both = |a: (&str, &str), b: (&str, &str)| {
            Ok::<_, super::btf::BtfError>([btf.member_offset(a.0, a.1)?, btf.member_offset(b.0, b.1)?])
        };
        let cgroup_id = both(("cgroup", "kn"), ("kernfs_node", "id")).map_err(|e| e.to_string());
        let cgroup_root =
            both(("cgroup", "root"), ("cgroup_root", "hierarchy_id")).map_err(|e| e.to_string());
        // Since 5.15 the cgroup pointer is a field of its own; before, it
        // shares a word (`val`) with cgroup v1 tags.
        let typed = btf.member_offset("sock", "sk_cgrp_data.cgroup");
        let sk_cgroup_typed = u32::from(typed.is_ok());
        let sk_cgroup = typed.or_else(|_| btf.member_offset("sock", "sk_cgrp_data.val"));
        let sock_ops = sk_cgroup
            .and_then(|c| Ok([c, btf.member_offset("tcp_sock", "bpf_sock_ops_cb_flags")?]))
            .map_err(|e| e.to_string())
            .and_then(|o| cgroup_id.as_ref().map(|_| o).map_err(Clone::clone));
        Ok(Self {
            skc_state: btf.member_offset("sock_common", "skc_state")?,
            sk_protocol: btf.member_offset("sock", "sk_protocol")?,
            peer: [
                btf.member_offset("sock_common", "skc_family")?,
                btf.member_offset("sock_common", "skc_num")?,
                btf.member_offset("sock_common", "skc_daddr")?,
                btf.member_offset("sock_common", "skc_v6_daddr")?,
            ],
            cgroup_id,
            cgroup_root,
            sock_ops,
            sk_cgroup_typed,
            sk_storage: btf.member_offset("sock", "sk_bpf_storage").unwrap_or(0),
        })
    }

    /// Why `cgroup_populated` cannot run here, if it cannot.
    pub fn exits_missing(&self) -> Option<String> {
        match (&self.cgroup_id, &self.cgroup_root) {
            (Err(e), _) | (_, Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Why the sock_ops design cannot run here, if it cannot.
    pub fn sock_ops_missing(&self) -> Option<String> {
        self.sock_ops.as_ref().err().cloned()
    }

    /// A loader with every offset set as a global, for the tracepoint
    /// design (`track_new`: the state program counts every socket) or the
    /// sock_ops one.
    pub fn loader(&self, track_new: bool) -> EbpfLoader<'_> {
        let mut loader = EbpfLoader::new();
        let track: &'static u32 = if track_new { &1 } else { &0 };
        loader
            .override_global(names::GLOBAL_TRACK_NEW, track, true)
            .override_global(names::GLOBAL_SKC_STATE_OFFSET, &self.skc_state, true)
            .override_global(names::GLOBAL_SK_PROTOCOL_OFFSET, &self.sk_protocol, true);
        let [family, num, daddr, v6_daddr] = &self.peer;
        loader
            .override_global(names::GLOBAL_SKC_FAMILY_OFFSET, family, true)
            .override_global(names::GLOBAL_SKC_NUM_OFFSET, num, true)
            .override_global(names::GLOBAL_SKC_DADDR_OFFSET, daddr, true)
            .override_global(names::GLOBAL_SKC_V6_DADDR_OFFSET, v6_daddr, true);
        if let Ok([kn, id]) = &self.cgroup_id {
            loader
                .override_global(names::GLOBAL_CGROUP_KN_OFFSET, kn, true)
                .override_global(names::GLOBAL_KERNFS_NODE_ID_OFFSET, id, true);
        }
        if let Ok([root, hierarchy]) = &self.cgroup_root {
            loader
                .override_global(names::GLOBAL_CGROUP_ROOT_OFFSET, root, true)
                .override_global(names::GLOBAL_ROOT_HIERARCHY_ID_OFFSET, hierarchy, true);
        }
        if let Ok([sk_cgroup, cb_flags]) = &self.sock_ops {
            loader
                .override_global(names::GLOBAL_SK_CGROUP_OFFSET, sk_cgroup, true)
                .override_global(names::GLOBAL_SK_CGROUP_TYPED, &self.sk_cgroup_typed, true)
                .override_global(names::GLOBAL_TCP_CB_FLAGS_OFFSET, cb_flags, true);
        }
        loader.override_global(names::GLOBAL_SK_STORAGE_OFFSET, &self.sk_storage, true);
        loader
    }
}
