//! The repository: its root, its files, the workspace as `cargo metadata`
//! describes it.

use super::*;

pub(super) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
}

/// `deploy/base/daemonset.yaml`, for messages.
pub(super) fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

pub(super) fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Every file under `dir`, sorted.
pub(super) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

pub(super) fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

/// Directories of deploy/ that hold a kustomization.yaml, sorted.
pub(super) fn kustomization_dirs() -> Vec<PathBuf> {
    files_under(&root().join("deploy"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect()
}

pub(super) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root()).stdin(Stdio::null());
    cmd
}

/// What `cargo metadata` says about the workspace.
pub(super) struct Workspace {
    /// The agent's version (graceful-daemon's).
    pub(super) version: String,
    /// Member directories, relative to the root.
    pub(super) members: Vec<String>,
    /// Every [[bin]] target: name → package.
    pub(super) bins: BTreeMap<String, String>,
}

pub(super) fn workspace() -> &'static Workspace {
    static W: OnceLock<Workspace> = OnceLock::new();
    W.get_or_init(|| {
        let out = cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .output()
            .expect("cannot run cargo metadata");
        assert!(
            out.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut w = Workspace {
            version: String::new(),
            members: Vec::new(),
            bins: BTreeMap::new(),
        };
        for p in meta["packages"].as_array().unwrap() {
            let name = p["name"].as_str().unwrap();
            if name == "graceful-daemon" {
                w.version = p["version"].as_str().unwrap().to_string();
            }
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            w.members.push(rel(manifest.parent().unwrap()));
            for t in p["targets"].as_array().unwrap() {
                if t["kind"].as_array().unwrap().iter().any(|k| k == "bin") {
                    w.bins
                        .insert(t["name"].as_str().unwrap().to_string(), name.to_string());
                }
            }
        }
        assert!(
            !w.version.is_empty(),
            "no graceful-daemon package in the workspace"
        );
        w
    })
}
