use super::*;

// This machine's hybrid layout: memory on v1, cgroup2 at .../unified.
const HYBRID_MOUNTINFO: &str = "\
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
40 25 0:35 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
41 25 0:36 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
";
const HYBRID_CGROUP: &str = "8:pids:/\n4:memory:/process_api/cc2e\n0::/\n";

const V2_MOUNTINFO: &str = "\
30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
const V2_CGROUP: &str = "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope\n";

#[test]
fn finds_the_v1_memory_cgroup_on_a_hybrid_host() {
    assert_eq!(
        own_dir(HYBRID_MOUNTINFO, HYBRID_CGROUP),
        Some(Own {
            mount: PathBuf::from("/sys/fs/cgroup/memory"),
            dir: PathBuf::from("/sys/fs/cgroup/memory/process_api/cc2e"),
            v2: false
        })
    );
}

#[test]
fn finds_the_v2_cgroup_on_a_unified_host() {
    assert_eq!(
        own_dir(V2_MOUNTINFO, V2_CGROUP),
        Some(Own {
            mount: PathBuf::from("/sys/fs/cgroup"),
            dir: PathBuf::from(
                "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope"
            ),
            v2: true
        })
    );
}

#[test]
fn no_memory_cgroup_without_a_mount() {
    assert_eq!(own_dir("", V2_CGROUP), None);
}

#[test]
fn the_tightest_limit_binds_from_any_ancestor_but_not_above_the_mount() {
    let root = std::env::temp_dir().join(format!("graceful-memcg-test-{}", std::process::id()));
    let mount = root.join("cg");
    let leaf = mount.join("pod/ctr");
    std::fs::create_dir_all(&leaf).unwrap();
    std::fs::write(root.join("memory.max"), "1\n").unwrap();
    std::fs::write(mount.join("pod/memory.max"), "268435456\n").unwrap();
    std::fs::write(leaf.join("memory.max"), "max\n").unwrap();
    assert_eq!(tightest(&mount, &leaf, "memory.max"), Some(268435456));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn finds_the_cgroup_that_lists_a_pid_when_the_path_does_not_lead_there() {
    let mount = std::env::temp_dir().join(format!("graceful-memcg-find-{}", std::process::id()));
    let pod = mount.join("kubepods.slice/pod-a/ctr-1");
    let other = mount.join("kubepods.slice/pod-b/ctr-2");
    std::fs::create_dir_all(&pod).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(mount.join("cgroup.procs"), "1\n2\n").unwrap();
    std::fs::write(other.join("cgroup.procs"), "4242\n").unwrap();
    std::fs::write(pod.join("cgroup.procs"), "77\n4243\n").unwrap();
    assert!(!lists(&mount, 4243));
    assert_eq!(find_by_pid(&mount, 4243), Some(pod));
    assert_eq!(find_by_pid(&mount, 5), None);
    std::fs::remove_dir_all(&mount).unwrap();
}

#[test]
fn limits_of_max_or_v1_unlimited_are_none() {
    assert_eq!(parse_limit("max\n"), None);
    assert_eq!(parse_limit("9223372036854771712\n"), None);
    assert_eq!(parse_limit("134217728\n"), Some(134217728));
    assert_eq!(parse_limit("garbage"), None);
}

#[test]
fn reads_the_node_wide_tcp_allocation() {
    let s = "sockets: used 1234\nTCP: inuse 5 orphan 0 tw 2 alloc 200507 mem 1\nUDP: inuse 3 mem 0\n";
    assert_eq!(tcp_allocated(s), Some(200507));
    assert_eq!(tcp_allocated("UDP: inuse 3 mem 0\n"), None);
}

#[test]
fn short_over_85_percent_with_room_counted_in_sockets() {
    let b = Budget {
        usage: 100 << 20,
        limit: Some(128 << 20),
        tcp_sockets: Some(200_000),
    };
    assert!(!b.is_short());
    assert_eq!(b.sockets_left(), Some((28 << 20) / BYTES_PER_SOCKET));
    let short = Budget {
        usage: 110 << 20,
        ..b
    };
    assert!(short.is_short());
    let unlimited = Budget { limit: None, ..b };
    assert!(!unlimited.is_short());
    assert_eq!(unlimited.sockets_left(), None);
    assert!(unlimited.describe().contains("no limit"));
    assert!(b.describe().contains("room for about"));
}
