//! A memory cgroup of a test's own: the v1 memory hierarchy where memory is
//! accounted there (a hybrid host such as this one), else cgroup v2 with
//! the memory controller handed down from its root. Removed on drop.

use std::path::{Path, PathBuf};

pub struct MemCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemCgroup {
    pub fn create() -> MemCgroup {
        let (root, v2) = root();
        let dir = root.join(crate::unique("memcg"));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        MemCgroup { dir, v2 }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes charged now.
    pub fn usage(&self) -> u64 {
        self.read(if self.v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        })
    }

    /// The limit as the kernel keeps it (rounded to pages).
    pub fn limit(&self) -> u64 {
        self.read(if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        })
    }

    pub fn set_limit(&self, bytes: u64) {
        let file = self.dir.join(if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        });
        std::fs::write(&file, bytes.to_string()).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    }

    fn read(&self, file: &str) -> u64 {
        let p = self.dir.join(file);
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // Its processes are gone; the kernel may still be releasing them.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("cleanup: cannot remove {}", self.dir.display());
    }
}

/// Where to make it, and whether that is cgroup v2: where the agent looks
/// for its own.
fn root() -> (PathBuf, bool) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (mount, v2) =
        graceful::memcg::memory_hierarchy(&info).expect("no cgroup mount with a memory controller");
    if v2 {
        let controllers = std::fs::read_to_string(mount.join("cgroup.subtree_control")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "memory") {
            // A test machine's own root (the qemu guests): hand memory down.
            std::fs::write(mount.join("cgroup.subtree_control"), "+memory")
                .unwrap_or_else(|e| panic!("enable the memory controller under {}: {e}", mount.display()));
        }
    }
    (mount, v2)
}
