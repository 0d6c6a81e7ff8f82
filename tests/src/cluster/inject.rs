//! deploy/inject's injection policy on the node, for a test's time: applied
//! on creation, deleted on drop (it is cluster-scoped).

use serde_json::Value;

use super::{workspace, Cluster, Namespace, TEST_APP_IMAGE};

pub struct Injection<'a> {
    cluster: &'a Cluster,
    dir: String,
}

impl<'a> Injection<'a> {
    /// Applies the policy and waits until the API server injects with it
    /// into a pod of `ns`, labelled here graceful.dev/inject=enabled and
    /// Pod Security privileged (where the exec gate is chosen): policies
    /// take effect once the API server has read them.
    pub fn apply(cluster: &'a Cluster, ns: &Namespace) -> Injection<'a> {
        let dir = workspace().join("deploy/inject").to_string_lossy().into_owned();
        ns.kubectl(&[
            "label",
            "--overwrite",
            "namespace",
            &ns.name,
            "graceful.dev/inject=enabled",
            "pod-security.kubernetes.io/enforce=privileged",
        ]);
        cluster.kubectl(&["apply", "-k", &dir]);
        let probe = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: inject-probe, namespace: {}}}\nspec:\n  containers: [{{name: app, image: {TEST_APP_IMAGE}}}]\n",
            ns.name
        );
        crate::wait_for(30, "the injection policy to take effect", || {
            let pod = as_stored(cluster, &probe).ok()?;
            pod["metadata"]["annotations"]
                .get("graceful.dev/injected")
                .map(|_| ())
        });
        Injection { cluster, dir }
    }
}

impl Drop for Injection<'_> {
    fn drop(&mut self) {
        let _ = self
            .cluster
            .try_kubectl(&["delete", "-k", &self.dir, "--ignore-not-found"]);
    }
}

/// The object `yaml` as the API server would store it, admission and
/// all (`create --dry-run=server`), or its refusal.
pub fn as_stored(cluster: &Cluster, yaml: &str) -> Result<Value, String> {
    let out = cluster.kubectl_stdin(&["create", "--dry-run=server", "-o", "json", "-f", "-"], yaml);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}
