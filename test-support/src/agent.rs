//! `graceful daemon` as a child process on a pin directory of its own, so
//! it never touches a node's agent, or another run's: started (in a cgroup
//! if asked, from its first allocation), and uninstalled, which detaches
//! its programs; stopped like any child ([`crate::process::terminate`]).
//! What a caller reads of its logs and how it decides it is ready stay
//! with the caller (the tests read a log file, the benchmarks its JSON
//! lines).

use std::{
    io,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::Duration,
};

/// Where the tests' simulated pods' cgroups are (`--pod-cgroup-root`):
/// each under a directory of its own at the hierarchy's top
/// (`/graceful-test-*/kubepods.slice/...`), in either driver's layout, or
/// kind's; and the kubelet's own roots.
pub const SIM_POD_ROOTS: &str = "/*/kubepods.slice,/*/kubepods,/*/kubelet.slice/kubelet-kubepods.slice,\
                                 /kubepods.slice,/kubepods,/kubelet.slice/kubelet-kubepods.slice,/kubelet/kubepods";

/// The `graceful` binary and the pin directory it works on.
#[derive(Clone, Debug)]
pub struct Graceful {
    pub bin: PathBuf,
    pub pin_dir: PathBuf,
}

impl Graceful {
    pub fn new(bin: &Path, pin_dir: &Path) -> Graceful {
        Graceful {
            bin: bin.to_path_buf(),
            pin_dir: pin_dir.to_path_buf(),
        }
    }

    /// `graceful ARGS`, on this pin directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("GRACEFUL_PIN_DIR", &self.pin_dir)
            .env("GRACEFUL_POD_CGROUP_ROOT", SIM_POD_ROOTS)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Starts `graceful daemon ARGS` (in `cgroup` from its first
    /// instruction, if given); the caller sets its output.
    pub fn spawn_daemon(&self, mut cmd: Command, cgroup: Option<&Path>) -> io::Result<Child> {
        if let Some(cg) = cgroup {
            crate::cgroup::start_in(&mut cmd, cg)?;
        }
        cmd.spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("start {} daemon: {e}", self.bin.display())))
    }

    /// `graceful ARGS`, its output, within a minute.
    pub fn run(&self, args: &[&str]) -> io::Result<Output> {
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        crate::process::output_within(child, Duration::from_secs(60))
    }

    /// `graceful uninstall`: detaches the programs and removes the pins.
    pub fn uninstall(&self) -> io::Result<String> {
        let out = self.run(&["uninstall"])?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "graceful --pin-dir {} uninstall: {}",
                self.pin_dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// `graceful cgroups -o json -a`: every cgroup's counters, read from
    /// the pinned maps (the JSON text; the caller parses it).
    pub fn cgroups_json(&self) -> io::Result<Vec<u8>> {
        let out = self.run(&["cgroups", "-o", "json", "-a"])?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "graceful cgroups: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }
}
