//! An image registry on the test node: the CNCF Distribution registry
//! (built by `cargo xtask cluster build` from its Go module), listening on
//! the node's loopback, where containerd pulls from it over plain HTTP as
//! it does from any `127.0.0.1` registry. Stopped, and its storage removed,
//! on drop.

use std::{
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::{Cluster, NODE_NETNS};

/// Where it listens, inside the node's namespace (the node is the test's
/// own: nothing else binds there).
pub const ADDR: &str = "127.0.0.1:15000";

pub struct Registry<'a> {
    cluster: &'a Cluster,
    child: Child,
    dir: PathBuf,
}

impl<'a> Registry<'a> {
    /// Starts it and waits until it accepts connections.
    pub fn start(cluster: &'a Cluster) -> Registry<'a> {
        let dir = std::env::temp_dir().join(format!("graceful-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("storage")).unwrap();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {ADDR}\n",
            dir.join("storage").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", Self::netns(), "registry", "serve"])
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("ip netns exec registry");
        let r = Registry { cluster, child, dir };
        let addr: SocketAddr = ADDR.parse().unwrap();
        let up = crate::cluster::poll(Duration::from_secs(30), || {
            cluster
                .on_node(move || TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok())
                .then_some(())
        });
        assert!(
            up.is_some(),
            "the registry did not listen on {ADDR} (is it built? `cargo xtask cluster build`): {}",
            r.log()
        );
        r
    }

    /// The node's namespace, as `ip netns` names it.
    pub fn netns() -> &'static str {
        NODE_NETNS.rsplit('/').next().unwrap()
    }

    /// Its log so far, for a failing assertion.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// The tags it holds for `repository` (its `/v2/<repository>/tags/list`).
    pub fn tags(&self, repository: &str) -> Vec<String> {
        let body = self
            .cluster
            .get_on_node(ADDR.parse().unwrap(), &format!("/v2/{repository}/tags/list"))
            .unwrap_or_else(|e| panic!("GET tags/list: {e}"));
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("tags/list: {e}: {body}"));
        v["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect()
    }
}

impl Drop for Registry<'_> {
    fn drop(&mut self) {
        // `ip netns exec` execs the registry: this is its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
