//! The node's configuration files, in `target/cluster/etc`.

use std::path::PathBuf;

use super::{build::Kube, images, pki, Paths, NODE_IP, POD_CIDR};

pub fn containerd(paths: &Paths) -> PathBuf {
    paths.etc().join("containerd.toml")
}
pub fn cni_dir(paths: &Paths) -> PathBuf {
    paths.etc().join("cni")
}
pub fn kubelet(paths: &Paths) -> PathBuf {
    paths.etc().join("kubelet.yaml")
}
pub fn kube_proxy(paths: &Paths) -> PathBuf {
    paths.etc().join("kube-proxy.yaml")
}

pub fn write(paths: &Paths, kube: &Kube) -> anyhow::Result<()> {
    let w = super::write_if_changed;
    w(
        &containerd(paths),
        &format!(
            r#"# containerd 2 for the graceful test node (`cargo xtask cluster`), in the
# config version that 2.4 speaks (an older version is migrated at every start,
# with a warning).
version = 4
root = "{root}"
state = "{run}/containerd"
# Version 4 keeps the servers' addresses in their plugins' tables; the
# defaults under /run/containerd would serve the host's containerd's socket.
[plugins."io.containerd.server.v1.grpc"]
  address = "{sock}"
[plugins."io.containerd.server.v1.ttrpc"]
  address = "{sock}.ttrpc"
# Its default, /opt/containerd, would outlive the node: `down` removes the root.
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
# NRI's socket defaults to /run/nri/nri.sock, outside the node's run
# directory: `down` would find it left behind. The node runs no NRI plugin.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
  socket_path = "{run}/nri/nri.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{pause}"
[plugins."io.containerd.cri.v1.runtime"]
  # Root here lacks CAP_SYS_RESOURCE: without this, runc fails to raise
  # /proc/self/oom_score_adj and no pod sandbox starts.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{cni}"
"#,
            root = paths.containerd_root().display(),
            run = paths.run().display(),
            sock = paths.containerd_sock().display(),
            pause = images::pause_ref(kube),
            cni = cni_dir(paths).display(),
        ),
    )?;
    // A bridge in the node's namespace, the pods' gateway; masquerade for
    // traffic leaving the pod range; hairpin so a pod reaches itself
    // through a Service.
    w(
        &cni_dir(paths).join("10-graceful.conflist"),
        &format!(
            r#"{{
  "cniVersion": "0.4.0",
  "name": "graceful",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{"subnet": "{POD_CIDR}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#
        ),
    )?;
    let pki = paths.pki();
    w(
        &kubelet(paths),
        &format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd here: the cgroupfs driver. The kubelet refuses cgroup v1 since
# 1.35, and this hybrid host (v1 controllers, the v2 tree at
# /sys/fs/cgroup/unified) counts as v1; the pods' cgroups keep the layout
# that graceful reads.
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://{sock}
address: {NODE_IP}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {pki}/ca.crt}}
authorization:
  mode: Webhook
tlsCertFile: {pki}/kubelet.crt
tlsPrivateKeyFile: {pki}/kubelet.key
failSwapOn: false
# A test node on a shared disk: never evict for disk, never collect images
# (they cannot be pulled again: there is no registry).
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
{verification}"#,
            pki = pki.display(),
            sock = paths.containerd_sock().display(),
            verification = pull_verification(kube),
        ),
    )?;
    w(
        &kube_proxy(paths),
        &format!(
            r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
mode: iptables
clusterCIDR: {POD_CIDR}
bindAddress: {NODE_IP}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# conntrack's table sizes are the host's (they are not per namespace):
# leave them as they are.
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"#,
            kubeconfig = pki::kubeconfig_path(paths, "kube-proxy").display()
        ),
    )?;
    Ok(())
}

/// The kubelet's re-verification of images present on the node
/// (KubeletEnsureSecretPulledImages, beta and on by default from 1.35;
/// the field is refused while the gate is off, as on 1.33 and 1.34).
///
/// Its default, NeverVerifyPreloadedImages, trusts an image the kubelet
/// did not pull, until the kubelet pulls the same image id under any
/// other name: from then on a pod naming the preloaded name makes the
/// kubelet pull it again to verify. Every image of this node is preloaded
/// (there is no registry), and the suite pulls the agent's image from a
/// registry on the node (`cargo xtask image --push`): measured on 1.37.2,
/// the next agent pod named `graceful/agent:0.1.0` went to
/// ImagePullBackOff, trying docker.io. So this node never re-verifies.
fn pull_verification(kube: &Kube) -> &'static str {
    let minor = kube
        .version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if minor >= 35 {
        "# Never pull a present image again to verify it (see config.rs).\nimagePullCredentialsVerificationPolicy: NeverVerify\n"
    } else {
        ""
    }
}
