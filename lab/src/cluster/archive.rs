//! An image as a docker-archive tarball (`docker save`'s format, which
//! `ctr images import` reads): `manifest.json`, the image config, and one
//! layer. Written without a container engine or a registry.

use std::{collections::BTreeMap, path::Path};

use anyhow::Context as _;
use sha2::{Digest as _, Sha256};

use super::rootfs::Rootfs;

/// What the image's config says about running it.
pub struct Image<'a> {
    /// `docker.io/graceful/agent:0.1.0`, `localhost/pause:3.4`.
    pub name: &'a str,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// The runtime sends it on stop (nginx: SIGQUIT, HAProxy: SIGUSR1).
    pub stop_signal: Option<&'a str>,
    pub labels: BTreeMap<String, String>,
}

fn sha256(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// Writes `image` with `rootfs` to `out`; returns the image id (the
/// config's digest), which changes exactly when the image does.
pub fn write(image: &Image, rootfs: &Rootfs, out: &Path) -> anyhow::Result<String> {
    let layer = rootfs.tar()?;
    let diff_id = sha256(&layer);
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": image.entrypoint,
            "Cmd": image.cmd,
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "WorkingDir": "/",
            "StopSignal": image.stop_signal,
            "Labels": image.labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
        "history": [{"created_by": "cargo xtask cluster (graceful)"}],
    });
    let config = serde_json::to_vec(&config)?;
    let id = sha256(&config);
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": format!("{id}.json"),
        "RepoTags": [image.name],
        "Layers": [format!("{diff_id}/layer.tar")],
    }]))?;

    let mut b = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8]| -> anyhow::Result<()> {
        let mut h = tar::Header::new_ustar();
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, path, data)?;
        Ok(())
    };
    add(&format!("{diff_id}/layer.tar"), &layer)?;
    add(&format!("{id}.json"), &config)?;
    add("manifest.json", &manifest)?;
    let bytes = b.into_inner()?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, bytes).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(id)
}
