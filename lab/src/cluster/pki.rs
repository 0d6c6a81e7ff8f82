//! The cluster's CA, each component's certificate and its kubeconfig,
//! made with openssl once and kept in `target/cluster/pki`.
//!
//! The API server runs with RBAC and the Node authorizer, so every client
//! is a user the authorizers know: the kubelet as `system:node:<node>` in
//! `system:nodes`, the controller-manager, scheduler and kube-proxy as their
//! `system:` users (the default ClusterRoleBindings name them), and the
//! host's kubectl as a `system:masters` admin. graceful's agent gets no
//! certificate: it uses its ServiceAccount token and the ClusterRole in
//! `deploy/base`, as it would anywhere.

use std::{fs, path::Path, process::Command};

use anyhow::Context as _;

use super::{Paths, API_PORT, HOST_API, KUBERNETES_SERVICE_IP, NODE_IP, NODE_NAME};
use xtask::util;

/// A client or server certificate: file stem, CN, O, subjectAltNames.
struct Cert {
    name: &'static str,
    cn: String,
    org: Option<&'static str>,
    sans: Vec<String>,
}

fn certs() -> Vec<Cert> {
    let c = |name, cn: &str, org| Cert {
        name,
        cn: cn.to_string(),
        org,
        sans: Vec::new(),
    };
    vec![
        Cert {
            sans: [
                "IP:127.0.0.1".to_string(),
                format!("IP:{NODE_IP}"),
                format!("IP:{KUBERNETES_SERVICE_IP}"),
                "DNS:localhost".into(),
                "DNS:kubernetes".into(),
                "DNS:kubernetes.default".into(),
                "DNS:kubernetes.default.svc".into(),
                "DNS:kubernetes.default.svc.cluster.local".into(),
            ]
            .to_vec(),
            ..c("apiserver", "kube-apiserver", None)
        },
        // The API server's client certificate towards kubelets (logs, exec).
        c(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            Some("system:masters"),
        ),
        Cert {
            sans: vec![format!("DNS:{NODE_NAME}"), format!("IP:{NODE_IP}")],
            ..c(
                "kubelet",
                &format!("system:node:{NODE_NAME}"),
                Some("system:nodes"),
            )
        },
        c("controller-manager", "system:kube-controller-manager", None),
        c("scheduler", "system:kube-scheduler", None),
        c("kube-proxy", "system:kube-proxy", None),
        c("admin", "graceful-cluster-admin", Some("system:masters")),
    ]
}

/// The kubeconfigs the node's components use (inside the namespace).
pub const COMPONENTS: &[&str] = &["kubelet", "controller-manager", "scheduler", "kube-proxy"];

pub fn ensure(paths: &Paths) -> anyhow::Result<()> {
    let dir = paths.pki();
    fs::create_dir_all(&dir)?;
    let ssl = |args: &[&str]| util::output(Command::new("openssl").current_dir(&dir).args(args)).map(drop);
    if !dir.join("ca.crt").exists() {
        ssl(&["genrsa", "-out", "ca.key", "2048"])?;
        ssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-subj",
            "/CN=graceful-cluster-ca",
            "-days",
            "3650",
            "-out",
            "ca.crt",
        ])?;
    }
    if !dir.join("sa.key").exists() {
        ssl(&["genrsa", "-out", "sa.key", "2048"])?;
        ssl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
    }
    for cert in certs() {
        if dir.join(format!("{}.crt", cert.name)).exists() {
            continue;
        }
        let key = format!("{}.key", cert.name);
        let csr = format!("{}.csr", cert.name);
        let ext = format!("{}.ext", cert.name);
        let subj = match cert.org {
            Some(o) => format!("/O={o}/CN={}", cert.cn),
            None => format!("/CN={}", cert.cn),
        };
        let mut text = String::from(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
        );
        if !cert.sans.is_empty() {
            text += &format!("subjectAltName={}\n", cert.sans.join(","));
        }
        fs::write(dir.join(&ext), text)?;
        ssl(&["genrsa", "-out", &key, "2048"])?;
        ssl(&["req", "-new", "-key", &key, "-subj", &subj, "-out", &csr])?;
        ssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            &ext,
            "-out",
            &format!("{}.crt", cert.name),
        ])
        .with_context(|| format!("signing the {} certificate", cert.name))?;
        fs::remove_file(dir.join(&csr))?;
        fs::remove_file(dir.join(&ext))?;
    }
    let inside = format!("https://{NODE_IP}:{API_PORT}");
    for c in COMPONENTS {
        super::write_if_changed(&kubeconfig_path(paths, c), &kubeconfig(&dir, c, &inside))?;
    }
    super::write_if_changed(
        &paths.kubeconfig(),
        &kubeconfig(&dir, "admin", &format!("https://{HOST_API}")),
    )?;
    Ok(())
}

pub fn kubeconfig_path(paths: &Paths, component: &str) -> std::path::PathBuf {
    paths.pki().join(format!("{component}.kubeconfig"))
}

fn kubeconfig(dir: &Path, user: &str, server: &str) -> String {
    let d = dir.display();
    format!(
        "apiVersion: v1
kind: Config
clusters:
  - name: graceful
    cluster:
      certificate-authority: {d}/ca.crt
      server: {server}
users:
  - name: {user}
    user:
      client-certificate: {d}/{user}.crt
      client-key: {d}/{user}.key
contexts:
  - name: graceful
    context: {{cluster: graceful, user: {user}}}
current-context: graceful
"
    )
}
