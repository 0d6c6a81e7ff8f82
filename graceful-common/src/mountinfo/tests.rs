use std::path::PathBuf;

use super::*;

#[test]
fn finds_unified_mount_on_hybrid_hosts() {
    let text = "30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
                    31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n\
                    32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n";
    assert_eq!(cgroup2(text), Some(PathBuf::from("/sys/fs/cgroup/unified")));
}

#[test]
fn prefers_the_root_mount_and_unescapes() {
    let text = "40 1 0:30 /kubepods /tmp/sub rw - cgroup2 cgroup2 rw\n\
                    41 1 0:30 / /sys/fs/cgroup\\040x rw - cgroup2 cgroup2 rw\n";
    assert_eq!(cgroup2(text), Some(PathBuf::from("/sys/fs/cgroup x")));
}

#[test]
fn mounts_reads_dev_and_propagation() {
    let text = "50 27 0:40 / /sys/fs/bpf rw,relatime master:12 propagate_from:3 - bpf bpf rw\n\
                    51 27 0:41 / /mnt/b\\040pf rw - bpf none rw\n\
                    no separator here\n";
    let m: Vec<Mount> = mounts(text).collect();
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].id, m[0].dev.as_str()), (50, "0:40"));
    assert_eq!(m[0].optional, ["master:12", "propagate_from:3"]);
    assert_eq!(m[0].fstype, "bpf");
    assert_eq!(m[1].mount_point, PathBuf::from("/mnt/b pf"));
    assert!(m[1].optional.is_empty());
}

#[test]
fn v1_only_has_no_mount() {
    let text = "32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    assert_eq!(cgroup2(text), None);
}

#[test]
fn shared_only_with_a_shared_peer_group() {
    let text = "78 23 0:71 / /sys/fs/bpf rw,relatime shared:8 - bpf bpf rw\n\
                90 27 0:80 / /run/a rw master:3 shared:9 - tmpfs tmpfs rw\n\
                91 27 0:81 / /run/b rw master:3 - tmpfs tmpfs rw\n\
                92 27 0:82 / /run/c rw - tmpfs tmpfs rw\n";
    let shared: Vec<bool> = mounts(text).map(|m| m.is_shared()).collect();
    assert_eq!(shared, [true, true, false, false]);
}
