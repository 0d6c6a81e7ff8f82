use super::*;

/// A host (pid 1's namespace) and a container, as mountinfo texts.
const ROOTS: &str = "1 0 254:0 / / rw - ext4 /dev/vda rw\n\
                         2 1 0:22 / /sys rw shared:2 - sysfs sysfs rw\n";

fn mounts(extra: &str) -> Vec<Mount> {
    cgroupfs::mounts(&format!("{ROOTS}{extra}")).collect()
}

fn pins() -> &'static Path {
    Path::new("/sys/fs/bpf/graceful")
}

const HOST_BPFFS: &str = "3 2 0:40 / /sys/fs/bpf rw shared:3 - bpf bpf rw\n";

#[test]
fn host_bpffs_mounted_as_slave_is_ok() {
    let host = mounts(HOST_BPFFS);
    let own = mounts("9 2 0:40 / /sys/fs/bpf rw master:3 - bpf bpf rw\n");
    let r = decide(pins(), Some(10), Some(20), &own, Some(&host));
    assert_eq!(
        r,
        Residence::Host {
            mount: "/sys/fs/bpf".into(),
            propagated: true
        }
    );
    assert!(!r.loses_pins());
}

#[test]
fn host_bpffs_mounted_private_warns() {
    let host = mounts(HOST_BPFFS);
    let own = mounts("9 2 0:40 / /sys/fs/bpf rw - bpf bpf rw\n");
    let r = decide(pins(), Some(10), Some(20), &own, Some(&host));
    assert_eq!(
        r,
        Residence::Host {
            mount: "/sys/fs/bpf".into(),
            propagated: false
        }
    );
    assert!(r.describe().contains("mountPropagation: HostToContainer"));
}

#[test]
fn containers_own_bpffs_fails() {
    // The host has a bpffs, but not this one (another superblock).
    let host = mounts(HOST_BPFFS);
    let own = mounts("9 2 0:41 / /sys/fs/bpf rw - bpf bpf rw\n");
    let r = decide(pins(), Some(10), Some(20), &own, Some(&host));
    assert_eq!(
        r,
        Residence::Own {
            mount: "/sys/fs/bpf".into()
        }
    );
    assert!(r.loses_pins());
    // The host has none at all: the container mounted its own.
    let r = decide(pins(), Some(10), Some(20), &own, Some(&mounts("")));
    assert!(matches!(r, Residence::Own { .. }));
    assert!(r.describe().contains("mount --make-shared /sys/fs/bpf"));
}

#[test]
fn no_bpffs_in_a_container_fails() {
    let r = decide(pins(), Some(10), Some(20), &mounts(""), Some(&mounts(HOST_BPFFS)));
    assert_eq!(r, Residence::Missing);
    assert!(r.loses_pins());
}

#[test]
fn outside_a_container_says_what_it_always_said() {
    let with = mounts(HOST_BPFFS);
    // Same mount namespace as pid 1.
    assert_eq!(
        decide(pins(), Some(10), Some(10), &with, Some(&with)),
        Residence::Uncontained {
            bpffs: Some("/sys/fs/bpf".into())
        }
    );
    let none = decide(pins(), Some(10), Some(10), &mounts(""), None);
    assert_eq!(none, Residence::Uncontained { bpffs: None });
    assert_eq!(
            none.describe(),
            "not mounted at /sys/fs/bpf: the daemon mounts it itself; in a pod, mount the host's /sys/fs/bpf into the container"
        );
    // Nothing of /proc/1 readable: cannot tell.
    assert_eq!(
        decide(pins(), Some(10), None, &mounts(""), None),
        Residence::Uncontained { bpffs: None }
    );
    // /proc/1/ns/mnt unreadable, but pid 1 lists this process's mounts.
    assert_eq!(
        decide(pins(), Some(10), None, &mounts(""), Some(&mounts(""))),
        Residence::Uncontained { bpffs: None }
    );
}

#[test]
fn without_the_namespace_links_the_mount_ids_tell() {
    // /proc/1/ns/mnt unreadable; pid 1 has none of this process's mount
    // ids: another mount namespace.
    let host: Vec<Mount> = cgroupfs::mounts(
        "21 0 254:0 / / rw - ext4 /dev/vda rw\n\
             43 21 0:40 / /sys/fs/bpf rw shared:2 - bpf bpf rw\n",
    )
    .collect();
    let own = mounts("119 2 0:40 / /sys/fs/bpf rw master:2 - bpf bpf rw\n");
    assert_eq!(
        decide(pins(), Some(10), None, &own, Some(&host)),
        Residence::Host {
            mount: "/sys/fs/bpf".into(),
            propagated: true
        }
    );
    assert_eq!(
        decide(pins(), None, None, &mounts(""), Some(&host)),
        Residence::Missing
    );
}

#[test]
fn finds_the_bpffs_that_holds_a_custom_pin_dir() {
    let own = mounts(
        "5 1 0:50 / /mnt/pins rw - tmpfs tmpfs rw\n\
             6 5 0:51 / /mnt/pins/bpf rw master:7 - bpf bpf rw\n",
    );
    let host = mounts("7 1 0:51 / /var/lib/bpf rw shared:7 - bpf bpf rw\n");
    assert_eq!(
        decide(Path::new("/mnt/pins/bpf/g"), Some(1), Some(2), &own, Some(&host)),
        Residence::Host {
            mount: "/mnt/pins/bpf".into(),
            propagated: true
        }
    );
    // Outside any bpffs and outside /sys/fs/bpf: the daemon refuses it.
    assert_eq!(
        decide(Path::new("/mnt/pins/g"), Some(1), Some(2), &own, Some(&host)),
        Residence::NotBpffs {
            pin_dir: "/mnt/pins/g".into()
        }
    );
}

#[test]
fn a_later_mount_on_the_same_point_covers_the_earlier() {
    // The host's bpffs, then a private one mounted over it.
    let own = mounts(
        "9 2 0:40 / /sys/fs/bpf rw master:3 - bpf bpf rw\n\
             10 9 0:41 / /sys/fs/bpf rw - bpf bpf rw\n",
    );
    let r = decide(pins(), Some(10), Some(20), &own, Some(&mounts(HOST_BPFFS)));
    assert!(matches!(r, Residence::Own { .. }));
}
