//! The host's kubectl, pointed at the cluster.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use xtask::util;

pub struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(kubeconfig: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.to_path_buf(),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        // Its cache beside the kubeconfig (see `Paths::kube_cache`).
        if let Some(dir) = self.kubeconfig.parent() {
            cmd.env("KUBECACHEDIR", dir.join("kube-cache"));
        }
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--request-timeout", "10s"])
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Its stdout; an error with its stderr if it fails.
    pub fn text(&self, args: &[&str]) -> anyhow::Result<String> {
        util::output(&mut self.cmd(args))
    }

    /// The Ready condition's status of `node` as the API has it (`True`
    /// when ready), untrimmed.
    pub fn node_ready(&self, node: &str) -> anyhow::Result<String> {
        self.text(&[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ])
    }

    /// Whether it succeeds (its output is dropped).
    pub fn ok(&self, args: &[&str]) -> bool {
        self.cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}
