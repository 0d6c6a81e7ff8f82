//! The guest's root filesystem: our static `/init`, the agent and
//! `graceful-wait`, the tests, their peer and fixtures, busybox for the
//! shell tools, Debian's `ip`, `ss`, `tc`, `nsenter` and `unshare` with their
//! shared libraries, and the kernel modules the tests need.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use super::{binaries::Binaries, cpio::Archive, elf, kernels::Kernel};
use xtask::util::{self, output};

/// Modules the tests need that Debian builds as modules (each is left out
/// where a kernel has it built in).
pub const MODULES: &[&str] = &[
    "veth",     // the tests' veth pairs between namespaces
    "bridge",   // the rollout's node bridge (pulls in stp, llc)
    "tcp_diag", // sock_diag for TCP (pulls in inet_diag): `ss` and the agent's adoption
    "sch_tbf",  // the softirq test's shaped loopback (`nested.rs`)
];

/// Debian's tools the tests run that busybox lacks or implements too
/// thinly (`ip netns`, `ss`'s cgroup filter, `unshare --propagation`,
/// `tc qdisc add ... tbf`).
const DEBIAN_TOOLS: &[&str] = &["ip", "ss", "nsenter", "unshare", "tc"];

pub const GRACEFUL: &str = "/usr/local/bin/graceful";
const WAIT: &str = "/usr/local/bin/graceful-wait";
const KEEPER: &str = "/usr/local/bin/graceful-keeper";
pub const PEER: &str = "/usr/local/bin/graceful-peer";
pub const TESTS: &str = "/usr/local/bin/graceful-kernel-tests";
/// Where the guest finds `tests/fixtures` (its `GRACEFUL_FIXTURES`).
pub const FIXTURES: &str = "/usr/share/graceful-tests/fixtures";
const PATH: &str = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the guest's `/init` runs.
#[derive(Debug, Clone)]
pub struct Run {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// The part of the image every kernel shares.
pub fn userland(bins: &Binaries) -> anyhow::Result<Archive> {
    let mut a = Archive::default();
    for d in ["proc", "sys", "dev", "run", "tmp", "root", "etc", "sbin"] {
        a.dir(d);
    }
    // The kernel opens /dev/console for init's stdio before anything is mounted.
    a.char_dev("/dev/console", 5, 1);
    a.char_dev("/dev/null", 1, 3);
    a.bytes(
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        0o644,
    );
    a.bytes("/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0o644);
    a.bytes("/etc/hosts", "127.0.0.1 localhost\n::1 localhost\n", 0o644);
    // Deliberately no CA bundle (/etc/ssl/certs): like the agent's `FROM scratch` image.

    a.file("/init", &bins.init)?;
    a.file(GRACEFUL, &bins.graceful)?;
    a.file(WAIT, &bins.wait)?;
    a.file(KEEPER, &bins.keeper)?;
    a.file(PEER, &bins.peer)?;
    a.file(TESTS, &bins.tests)?;

    // Tests read fixtures at run time, from $GRACEFUL_FIXTURES when set
    // (the guest sets it to FIXTURES): not from the checkout's path, which
    // may lie under /tmp, where the guest mounts a fresh tmpfs.
    let fixtures = util::workspace_root().join("tests/fixtures");
    if fixtures.is_dir() {
        add_tree(&mut a, &fixtures, Path::new(FIXTURES))?;
    }

    let busybox = which("busybox")?;
    if !elf::is_static(&std::fs::read(&busybox)?)? {
        bail!(
            "{} is not static: install busybox-static (`cargo xtask setup` does)",
            busybox.display()
        );
    }
    a.file("/bin/busybox", &busybox)?;
    let applets = output(Command::new(&busybox).arg("--list"))?;
    for applet in applets.lines().map(str::trim) {
        if !applet.is_empty() && applet != "busybox" && !DEBIAN_TOOLS.contains(&applet) {
            a.symlink(&format!("/bin/{applet}"), "busybox");
        }
    }

    for tool in DEBIAN_TOOLS {
        let path = which(tool)?;
        a.file(&format!("/usr/bin/{tool}"), &path)?;
        for lib in shared_libs(&path)? {
            let inside = lib.to_string_lossy().into_owned();
            if !a.contains(&inside) {
                a.file(&inside, &lib)?;
            }
        }
    }
    Ok(a)
}

/// Adds one kernel's modules and the run configuration, and writes the
/// image to `out`. Returns the uncompressed size.
pub fn finish(mut a: Archive, kernel: &Kernel, run: &Run, out: &Path) -> anyhow::Result<u64> {
    let mut conf = String::from("# /init.conf, written by `cargo xtask vm-test`\n");
    conf.push_str(&format!("# kernel: {} {}\n", kernel.package, kernel.version));
    for ko in kernel.modules(MODULES)? {
        let name = ko.file_name().unwrap().to_string_lossy().into_owned();
        let inside = format!("/lib/modules/{}/{name}", kernel.release);
        a.file(&inside, &ko)?;
        conf.push_str(&format!("module {inside}\n"));
    }
    conf.push_str(&format!("env PATH={PATH}\n"));
    for (k, v) in &run.env {
        conf.push_str(&format!("env {k}={v}\n"));
    }
    conf.push_str(&format!("exec {TESTS}\n"));
    for arg in &run.args {
        conf.push_str(&format!("arg {arg}\n"));
    }
    a.bytes("/init.conf", conf, 0o644);
    a.write_gzip(out)
}

/// Every file below `dir`, at the same absolute path inside the image.
/// Adds the files under `dir` at the same places under `inside`.
fn add_tree(a: &mut Archive, dir: &Path, inside: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        let there = inside.join(path.file_name().expect("a directory entry has a name"));
        if path.is_dir() {
            add_tree(a, &path, &there)?;
        } else {
            a.file(&there.to_string_lossy(), &path)?;
        }
    }
    Ok(())
}

/// A program on this machine's PATH (plus the sbin directories).
fn which(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} is not installed here (`cargo xtask setup` installs it)"))
}

/// The shared libraries and loader `ldd` lists for `bin`, as absolute paths.
fn shared_libs(bin: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let text = output(Command::new("ldd").arg(bin))?;
    let mut libs = Vec::new();
    for line in text.lines() {
        if line.contains("not found") {
            bail!("ldd {}: {}", bin.display(), line.trim());
        }
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`.
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}
