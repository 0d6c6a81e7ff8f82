//! A simulated pod: cgroups in the kubelet's systemd layout (nested under a
//! test root, as kind nests them), one per container.

use crate::cgroup::Cgroup;

pub struct SimPod {
    pub uid: String,
    /// The pod-level cgroup (its slice), relative to the cgroup2 mount.
    pub path: String,
    pub containers: Vec<(String, Cgroup)>,
}

impl SimPod {
    /// A burstable pod with `n` containers (ids are 64 hex digits).
    pub fn create(n: usize) -> SimPod {
        let tag = crate::unique("pod");
        let seed = format!("{:08x}", std::process::id())
            + &format!("{:012x}", tag.len() as u64 * 7919 + rand_u32() as u64);
        let uid = format!(
            "{}-{}-{}-{}-{}",
            &seed[0..8],
            &seed[8..12],
            "4000",
            "8000",
            &seed[8..20]
        );
        let slice_uid = uid.replace('-', "_");
        let path =
            format!("/{tag}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice_uid}.slice");
        let mut containers = Vec::new();
        for i in 0..n {
            let id = format!("{:0>64}", format!("{:x}{:08x}", i + 1, rand_u32()));
            let cg = Cgroup::create(&format!("{path}/cri-containerd-{id}.scope"));
            containers.push((id, cg));
        }
        SimPod {
            uid,
            path,
            containers,
        }
    }

    pub fn container(&self, i: usize) -> &Cgroup {
        &self.containers[i].1
    }
}

impl Drop for SimPod {
    fn drop(&mut self) {
        // The first container's guard created the parents: drop it last.
        while let Some(c) = self.containers.pop() {
            drop(c);
        }
    }
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    u32::from_ne_bytes(b)
}
