//! `/init` of the guests that `cargo xtask vm-test` boots: it prepares a
//! minimal system (proc, sysfs, devtmpfs, cgroup2, bpffs, tmpfs on /run and
//! /tmp, `lo` up, the kernel modules the tests need), runs the integration
//! tests, prints one verdict line and powers the machine off.
//!
//! The verdict is the last thing it prints, on a line of its own:
//! `init: success` when the tests exited 0, `init: failure` otherwise. The
//! host reads nothing else as a result.
//!
//! What to run comes from `/init.conf`, written by the lab (`cargo xtask vm-test`), one directive a
//! line:
//! - `module PATH`: load this kernel module (in file order: dependencies first);
//! - `env KEY=VALUE`: set for the tests;
//! - `exec PATH`: the program to run;
//! - `arg ARG`: one argument for it.
//!
//! Built static (musl), std and libc only.

use std::{
    ffi::CString,
    fs::File,
    io::Write,
    os::{fd::AsRawFd, unix::process::ExitStatusExt},
    path::Path,
    process::{Command, ExitStatus},
};

const CONF: &str = "/init.conf";

fn main() {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        eprintln!("graceful-vm-init is a VM's /init (pid 1); `cargo xtask vm-test` boots it");
        std::process::exit(2);
    }
    let verdict = match std::panic::catch_unwind(run) {
        Ok(Ok(status)) => {
            say(&format!("tests exited with {status}"));
            status.success()
        }
        Ok(Err(e)) => {
            say(&format!("error: {e}"));
            false
        }
        Err(_) => {
            say("error: init panicked");
            false
        }
    };
    say(if verdict { "success" } else { "failure" });
    power_off();
}

/// One line on the console, prefixed so the host can tell it from test output.
fn say(msg: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "init: {msg}");
    let _ = out.flush();
}

fn run() -> Result<ExitStatus, String> {
    mount_all()?;
    report_kernel();
    let conf = std::fs::read_to_string(CONF).map_err(|e| format!("{CONF}: {e}"))?;
    let mut exec = None;
    let mut args = Vec::new();
    let mut envs = Vec::new();
    for line in conf
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "module" => load_module(value)?,
            "env" => {
                let (k, v) = value
                    .split_once('=')
                    .ok_or(format!("{CONF}: bad env line {line:?}"))?;
                envs.push((k.to_string(), v.to_string()));
            }
            "exec" => exec = Some(value.to_string()),
            "arg" => args.push(value.to_string()),
            _ => return Err(format!("{CONF}: unknown directive {line:?}")),
        }
    }
    link_up("lo")?;
    let exec = exec.ok_or(format!("{CONF} names no program (`exec PATH`)"))?;
    say(&format!("running {exec} {}", args.join(" ")));
    let child = Command::new(&exec)
        .args(&args)
        .envs(envs)
        .current_dir("/tmp")
        .spawn()
        .map_err(|e| format!("cannot start {exec}: {e}"))?;
    Ok(reap_until(child.id() as libc::pid_t))
}

/// As pid 1 we inherit every orphan: reap them all until the tests exit.
fn reap_until(pid: libc::pid_t) -> ExitStatus {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on any child.
        let got = unsafe { libc::waitpid(-1, &mut status, 0) };
        if got == pid {
            return ExitStatus::from_raw(status);
        }
        if got < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // No children left: cannot happen while the tests run.
            return ExitStatus::from_raw(255 << 8);
        }
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in paths")
}

fn mount(source: &str, target: &str, fstype: &str, data: &str) -> Result<(), String> {
    std::fs::create_dir_all(target).map_err(|e| format!("mkdir {target}: {e}"))?;
    let (src, tgt, fs, data) = (cstr(source), cstr(target), cstr(fstype), cstr(data));
    // SAFETY: valid NUL-terminated strings.
    let rc = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), fs.as_ptr(), 0, data.as_ptr().cast()) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // devtmpfs may already be mounted by the kernel (CONFIG_DEVTMPFS_MOUNT).
        if e.raw_os_error() != Some(libc::EBUSY) {
            return Err(format!("mount {fstype} on {target}: {e}"));
        }
    }
    Ok(())
}

fn mount_all() -> Result<(), String> {
    mount("proc", "/proc", "proc", "")?;
    mount("sysfs", "/sys", "sysfs", "")?;
    mount("devtmpfs", "/dev", "devtmpfs", "")?;
    mount("cgroup2", "/sys/fs/cgroup", "cgroup2", "")?;
    mount("bpffs", "/sys/fs/bpf", "bpf", "")?;
    mount("tmpfs", "/run", "tmpfs", "mode=755")?;
    mount("tmpfs", "/tmp", "tmpfs", "mode=1777")?;
    // `ip netns add` bind-mounts namespaces here.
    std::fs::create_dir_all("/run/netns").map_err(|e| format!("mkdir /run/netns: {e}"))?;
    Ok(())
}

/// The kernel's release and version (Debian puts its package version in
/// the latter), and whether it has BTF: the host records both.
fn report_kernel() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    say(&format!(
        "kernel {} {}",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    ));
    match std::fs::metadata("/sys/kernel/btf/vmlinux") {
        Ok(m) => say(&format!("btf /sys/kernel/btf/vmlinux {} bytes", m.len())),
        Err(e) => say(&format!("btf missing: /sys/kernel/btf/vmlinux: {e}")),
    }
}

fn load_module(path: &str) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("module {path}: {e}"))?;
    let params = cstr("");
    // SAFETY: a valid fd and an empty parameter string.
    let rc = unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), params.as_ptr(), 0) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(format!("loading module {path}: {e}"));
        }
    }
    let name = Path::new(path).file_name().unwrap_or_default().to_string_lossy();
    say(&format!("module {name} loaded"));
    Ok(())
}

/// `ip link set NAME up`, by ioctl.
fn link_up(name: &str) -> Result<(), String> {
    // SAFETY: a plain socket for interface ioctls.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data; zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let result = (|| {
        // SAFETY: valid fd and ifreq.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) } != 0 {
            return Err(format!("{name}: get flags: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: valid fd and ifreq.
        if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) } != 0 {
            return Err(format!("{name}: set up: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    })();
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
    result
}

fn power_off() -> ! {
    // Let the console drain before the machine goes away.
    // SAFETY: stdout's fd; tcdrain fails harmlessly if it is not a tty.
    unsafe {
        libc::tcdrain(1);
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // reboot() returns only on error; pid 1 must not exit (that panics the kernel).
    say(&format!("error: power off: {}", std::io::Error::last_os_error()));
    loop {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
    }
}
