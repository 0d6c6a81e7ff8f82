use super::*;

#[test]
fn reads_points_types_and_propagation() {
    let text = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                78 23 0:71 / /sys/fs/bpf rw,relatime shared:8 - bpf bpf rw\n\
                90 27 0:80 / /run/a\\040b rw master:3 shared:9 - tmpfs tmpfs rw\n";
    let m = parse(text);
    assert_eq!(m.len(), 3);
    assert_eq!(m[0].point, Path::new("/sys/fs/cgroup/unified"));
    assert_eq!(m[0].fstype, "cgroup2");
    assert!(!m[0].is_shared());
    assert!(m[1].is_shared());
    assert_eq!(m[2].point, Path::new("/run/a b"));
    assert_eq!(m[2].optional, vec!["master:3", "shared:9"]);
}
