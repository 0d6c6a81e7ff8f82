//! The images the cluster's pods run, built here (there is no registry) and
//! imported into containerd:
//!
//! - graceful's agent: the Containerfile's image, as `cargo xtask image`
//!   builds it (buildah), under the name `deploy/base` uses;
//! - the pause image: the static `pause` built from the Kubernetes tree;
//! - Debian's busybox-static, nginx and HAProxy, each with the libraries it
//!   links, laid out and configured like the upstream images the examples
//!   name (nginx's `conf.d`, SIGQUIT to stop; HAProxy's
//!   `/usr/local/etc/haproxy`, SIGUSR1), and nginx again as the
//!   unprivileged image runs it (port 8080, writes only to /tmp);
//! - OPA as its static image is, `/opa` alone `FROM scratch`, from the
//!   binary built here (see `build`);
//! - Istio's sidecar (proxyv2) as the tests need it: the real pilot-agent
//!   built here, with the stand-in in Envoy's place for inbound
//!   passthrough (Envoy cannot be built here);
//! - stand-ins for the programs that cannot be had here (Envoy,
//!   coraza-spoa): `graceful-stand-in` in each role, named for the role,
//!   never with the upstream names; and a test app, for the benchmarks and
//!   as the app that asks OPA about every request.
//!
//! Images are written once per content: an archive whose id matches what
//! containerd already holds is not imported again.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use super::{
    archive::{self, Image},
    build::Kube,
    rootfs::Rootfs,
    Paths,
};
use crate::debian;
use xtask::util;

pub const BUSYBOX: &str = "localhost/busybox:bookworm";
pub const NGINX: &str = "localhost/debian-nginx:bookworm";
pub const NGINX_UNPRIVILEGED: &str = "localhost/debian-nginx-unprivileged:bookworm";
pub const HAPROXY: &str = "localhost/debian-haproxy:bookworm";
pub const MESH_PROXY: &str = "localhost/stand-in/mesh-proxy:0.1.0";
pub const WAF_AGENT: &str = "localhost/stand-in/waf-agent:0.1.0";
pub const TEST_APP: &str = "localhost/graceful-test/app:0.1.0";
/// OPA, built here (`build::OPA` without its `v`).
pub const OPA: &str = "localhost/opa:1.22.4";
/// Istio's sidecar: pilot-agent built here, the stand-in as Envoy.
pub const ISTIO_PROXY: &str = "localhost/stand-in/istio-proxy:1.31-dev";

/// busybox applets an image's hooks and operators may call.
const APPLETS: &[&str] = &[
    "sh", "sleep", "cat", "ls", "grep", "wc", "head", "echo", "true", "kill", "ps", "nc", "wget",
];

/// What the images carry of the project's own: the agent's image, built
/// by `cargo xtask image` from the Containerfile, and the stand-in (static).
pub struct Binaries {
    pub agent: xtask::image::Built,
    pub stand_in: PathBuf,
}

impl Binaries {
    /// Builds them: the agent's image, then the stand-in, release and
    /// static (musl), built apart so that each is what it would be alone
    /// (one cargo build of both would unify their dependencies' features).
    pub fn build() -> anyhow::Result<Binaries> {
        const MUSL: &str = xtask::setup::MUSL;
        let agent = xtask::image::build()?;
        let mut cmd = xtask::lab::cargo_in_lab("build");
        cmd.args(["--release", "--target", MUSL, "-p", "graceful-stand-in"]);
        println!("==> {}", util::display(&cmd));
        util::run(&mut cmd).context("the static build of the stand-in failed")?;
        let dir = util::target_dir().join(MUSL).join("release");
        Ok(Binaries {
            agent,
            stand_in: dir.join("graceful-stand-in"),
        })
    }
}

fn labels(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn passwd(rootfs: &mut Rootfs, users: &[(&str, u32)]) {
    let mut passwd = String::from("root:x:0:0:root:/root:/bin/sh\n");
    let mut group = String::from("root:x:0:\n");
    for (u, id) in users {
        passwd += &format!("{u}:x:{id}:{id}:{u}:/nonexistent:/usr/sbin/nologin\n");
        group += &format!("{u}:x:{id}:\n");
    }
    passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
    group += "nogroup:x:65534:\n";
    rootfs
        .file("/etc/passwd", passwd, 0o644)
        .file("/etc/group", group, 0o644);
    rootfs.dir("/tmp", 0o1777).dir("/root", 0o700);
}

/// The pause image's name: `localhost/pause:<the tree's pause tag>`.
pub fn pause_ref(kube: &Kube) -> String {
    format!("localhost/pause:{}", kube.pause_version)
}

fn pause<'a>(kube: &Kube, name: &'a str) -> anyhow::Result<(Image<'a>, Rootfs)> {
    let mut r = Rootfs::new();
    r.copy(&kube.bin("pause"), "/pause", 0o755)?;
    Ok((
        Image {
            name,
            entrypoint: strs(&["/pause"]),
            cmd: vec![],
            stop_signal: None,
            labels: labels(&[(
                "graceful.dev/built-from",
                format!(
                    "kubernetes v{} build/pause/linux/pause.c (pause {})",
                    kube.version, kube.pause_version
                ),
            )]),
        },
        r,
    ))
}

/// OPA's static image: the binary alone, `opa` its entrypoint.
fn opa(kube: &Kube) -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.copy(&kube.bin("opa"), "/opa", 0o755)?;
    passwd(&mut r, &[]);
    Ok((
        Image {
            name: OPA,
            entrypoint: strs(&["/opa"]),
            cmd: strs(&["run"]),
            stop_signal: None,
            labels: labels(&[(
                "graceful.dev/built-from",
                format!("github.com/open-policy-agent/opa {}", super::build::OPA),
            )]),
        },
        r,
    ))
}

/// Istio's sidecar as a test pod runs it: `pilot-agent proxy sidecar` (its
/// status server relays a rewritten preStop hook) with Envoy disabled, and
/// the stand-in on 15006 as Envoy's inbound passthrough (from 127.0.0.6),
/// started by busybox's sh.
fn istio_proxy(kube: &Kube, bins: &Binaries) -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.busybox(APPLETS)?
        .copy(&bins.stand_in, "/stand-in", 0o755)?
        .copy(&kube.bin("pilot-agent"), "/usr/local/bin/pilot-agent", 0o755)?;
    passwd(&mut r, &[]);
    Ok((
        Image {
            name: ISTIO_PROXY,
            entrypoint: strs(&[
                "sh",
                "-c",
                "/stand-in mesh-proxy --passthrough 0.0.0.0:15006=127.0.0.6 & exec /usr/local/bin/pilot-agent proxy sidecar",
            ]),
            cmd: vec![],
            stop_signal: None,
            labels: labels(&[(
                "graceful.dev/built-from",
                format!("istio.io/istio/pilot/cmd/pilot-agent {}", super::build::ISTIO),
            )]),
        },
        r,
    ))
}

fn busybox() -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.busybox(APPLETS)?;
    passwd(&mut r, &[]);
    Ok((
        Image {
            name: BUSYBOX,
            entrypoint: vec![],
            cmd: strs(&["sh"]),
            stop_signal: None,
            labels: labels(&[("graceful.dev/debian-package", debian_label("busybox-static")?)]),
        },
        r,
    ))
}

fn debian_label(pkg: &str) -> anyhow::Result<String> {
    Ok(format!("{pkg} {}", debian::installed_version(pkg)?))
}

/// nginx as the upstream image lays it out: `nginx -g 'daemon off;'`,
/// `/etc/nginx/conf.d/*.conf`, logs to stdout and stderr, SIGQUIT to stop
/// gracefully (finish open requests, then exit).
fn nginx() -> anyhow::Result<(Image<'static>, Rootfs)> {
    nginx_as(NGINX, &nginx_conf(false), &NGINX_DEFAULT.replace("{port}", "80"))
}

/// nginx as the unprivileged upstream image lays it out, for pods held to
/// Pod Security restricted: any non-root uid (101 by convention), port
/// 8080, its pid file and temporary files in /tmp, so that a read-only
/// root file system and an emptyDir at /tmp are all it needs.
fn nginx_unprivileged() -> anyhow::Result<(Image<'static>, Rootfs)> {
    nginx_as(
        NGINX_UNPRIVILEGED,
        &nginx_conf(true),
        &NGINX_DEFAULT.replace("{port}", "8080"),
    )
}

fn nginx_as(name: &'static str, conf: &str, default: &str) -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.program(Path::new("/usr/sbin/nginx"))?.busybox(APPLETS)?;
    passwd(&mut r, &[("nginx", 101)]);
    r.copy(Path::new("/etc/nginx/mime.types"), "/etc/nginx/mime.types", 0o644)?
        .file("/etc/nginx/nginx.conf", conf, 0o644)
        .file("/etc/nginx/conf.d/default.conf", default, 0o644)
        .file(
            "/usr/share/nginx/html/index.html",
            "<!DOCTYPE html>\n<title>nginx</title>\n<p>nginx on a graceful test node.</p>\n",
            0o644,
        )
        .symlink("/var/log/nginx/access.log", "/dev/stdout")
        .symlink("/var/log/nginx/error.log", "/dev/stderr")
        // Debian's build keeps its temp paths under /var/lib/nginx.
        .dir("/var/lib/nginx", 0o755)
        .dir("/run", 0o755)
        .symlink("/var/run", "/run");
    Ok((
        Image {
            name,
            entrypoint: vec![],
            cmd: strs(&["nginx", "-g", "daemon off;"]),
            stop_signal: Some("SIGQUIT"),
            labels: labels(&[("graceful.dev/debian-package", debian_label("nginx-light")?)]),
        },
        r,
    ))
}

/// nginx.conf as the upstream image has it; `{head}` and `{temp}` are
/// what differs between the two images (see [`nginx_conf`]).
const NGINX_CONF: &str = r#"{head}worker_processes  auto;
error_log  /var/log/nginx/error.log notice;
pid        {pid};

events {
    worker_connections  1024;
}

http {
{temp}    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';
    access_log  /var/log/nginx/access.log  main;
    sendfile        on;
    keepalive_timeout  65;
    include /etc/nginx/conf.d/*.conf;
}
"#;

/// The config of the image that starts as root (drops to `nginx`, pid
/// under /var/run), or of the unprivileged one (no `user`, every path it
/// writes under /tmp).
fn nginx_conf(unprivileged: bool) -> String {
    let (head, pid, temp) = if unprivileged {
        (
            "",
            "/tmp/nginx.pid",
            "    client_body_temp_path /tmp/client_temp;
    proxy_temp_path       /tmp/proxy_temp_path;
    fastcgi_temp_path     /tmp/fastcgi_temp;
    uwsgi_temp_path       /tmp/uwsgi_temp;
    scgi_temp_path        /tmp/scgi_temp;
",
        )
    } else {
        ("user  nginx;\n", "/var/run/nginx.pid", "")
    };
    NGINX_CONF
        .replace("{head}", head)
        .replace("{pid}", pid)
        .replace("{temp}", temp)
}

const NGINX_DEFAULT: &str = r#"server {
    listen       {port};
    server_name  localhost;
    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }
}
"#;

/// HAProxy as the upstream image runs it: master-worker, in the
/// foreground, `/usr/local/etc/haproxy/haproxy.cfg`, SIGUSR1 to stop softly.
fn haproxy() -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.program(Path::new("/usr/sbin/haproxy"))?.busybox(APPLETS)?;
    passwd(&mut r, &[("haproxy", 99)]);
    r.dir("/usr/local/etc/haproxy", 0o755)
        .dir("/var/lib/haproxy", 0o755)
        .dir("/run", 0o755);
    Ok((
        Image {
            name: HAPROXY,
            entrypoint: vec![],
            cmd: strs(&["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]),
            stop_signal: Some("SIGUSR1"),
            labels: labels(&[("graceful.dev/debian-package", debian_label("haproxy")?)]),
        },
        r,
    ))
}

/// `graceful-stand-in ROLE` as an image of that role; busybox beside it
/// for hooks that need a shell.
fn stand_in(
    bins: &Binaries,
    name: &'static str,
    role: &str,
    plays: &str,
) -> anyhow::Result<(Image<'static>, Rootfs)> {
    let mut r = Rootfs::new();
    r.busybox(APPLETS)?.copy(&bins.stand_in, "/stand-in", 0o755)?;
    passwd(&mut r, &[]);
    Ok((
        Image {
            name,
            entrypoint: strs(&["/stand-in", role]),
            cmd: vec![],
            stop_signal: None,
            labels: labels(&[("graceful.dev/plays", plays.to_string())]),
        },
        r,
    ))
}

/// Every image, written to `target/cluster/images` and imported unless
/// containerd holds it already. Returns the digests the kubelet may report
/// for the agent's image: its config's, its manifest's.
pub fn import(paths: &Paths, bins: &Binaries, kube: &Kube) -> anyhow::Result<Vec<String>> {
    let pause_name = pause_ref(kube);
    let images = [
        pause(kube, &pause_name)?,
        busybox()?,
        nginx()?,
        nginx_unprivileged()?,
        haproxy()?,
        opa(kube)?,
        istio_proxy(kube, bins)?,
        stand_in(
            bins,
            MESH_PROXY,
            "mesh-proxy",
            "a mesh proxy such as Envoy: exits at once on SIGTERM",
        )?,
        stand_in(
            bins,
            WAF_AGENT,
            "waf-agent",
            "a WAF agent (SPOA) such as coraza-spoa beside HAProxy",
        )?,
        stand_in(
            bins,
            TEST_APP,
            "app",
            "an HTTP app that records when SIGTERM arrives, and asks OPA first with --authz",
        )?,
    ];
    let held = held(paths, kube)?;
    agent(paths, kube, &bins.agent, &held)?;
    for (image, rootfs) in &images {
        let file = paths
            .images()
            .join(format!("{}.tar", image.name.replace(['/', ':'], "_")));
        let id = archive::write(image, rootfs, &file)?;
        if held.get(image.name) == Some(&id) {
            println!(
                "{:<10} {:<34} {}",
                "ok",
                format!("image {}", image.name),
                &id[..12]
            );
            fs::remove_file(&file)?;
            continue;
        }
        util::output(ctr(paths, kube).args(["images", "import"]).arg(&file))
            .with_context(|| format!("importing {}", image.name))?;
        fs::remove_file(&file)?;
        println!(
            "{:<10} {:<34} {}",
            "imported",
            format!("image {}", image.name),
            &id[..12]
        );
    }
    Ok(vec![bins.agent.id().to_string(), bins.agent.index.clone()])
}

/// The agent's image, from `cargo xtask image`'s OCI archive, under the
/// name deploy/base runs (the archive's first tag).
fn agent(
    paths: &Paths,
    kube: &Kube,
    image: &xtask::image::Built,
    held: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let (name, short) = (&image.tags[0], &image.id()[..12]);
    if held.get(name).map(String::as_str) == Some(image.id()) {
        println!("{:<10} {:<34} {short}", "ok", format!("image {name}"));
        return Ok(());
    }
    util::output(ctr(paths, kube).args(["images", "import"]).arg(&image.archive))
        .with_context(|| format!("importing {}", image.archive.display()))?;
    let id = config_digest(paths, kube, name).with_context(|| {
        format!(
            "{} holds no {name} after its import: the image is tagged {}",
            image.archive.display(),
            image.tags.join(", ")
        )
    })?;
    anyhow::ensure!(
        id == image.id(),
        "containerd holds {name} as {id}, not as the image just built ({})",
        image.id()
    );
    println!("{:<10} {:<34} {short}", "imported", format!("image {name}"));
    Ok(())
}

/// containerd's own client (built with it), on the node's socket, in the
/// namespace the kubelet's runtime uses.
pub fn ctr(paths: &Paths, kube: &Kube) -> Command {
    let mut c = Command::new(kube.bin("ctr"));
    c.arg("--address")
        .arg(paths.containerd_sock())
        .args(["--namespace", "k8s.io"]);
    c
}

/// Image name → config digest (the image id), of what containerd holds.
fn held(paths: &Paths, kube: &Kube) -> anyhow::Result<BTreeMap<String, String>> {
    let out = util::output(ctr(paths, kube).args(["images", "ls"]))?;
    let mut map = BTreeMap::new();
    for line in out.lines().skip(1) {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if name.starts_with("sha256:") {
            continue;
        }
        if let Ok(id) = config_digest(paths, kube, name) {
            map.insert(name.to_string(), id);
        }
    }
    Ok(map)
}

/// The config digest of image `name`, as the CRI reports image ids.
fn config_digest(paths: &Paths, kube: &Kube, name: &str) -> anyhow::Result<String> {
    let out = util::output(
        ctr(paths, kube)
            .args(["images", "ls", &format!("name=={name}")])
            .arg("-q"),
    )?;
    anyhow::ensure!(out.lines().any(|l| l.trim() == name), "{name} is not held");
    // `ctr images ls` names the manifest digest, or an index's (the
    // agent's: amd64 and arm64), whose entry for this machine's
    // architecture is the manifest; the id is the config's, which the CRI
    // lists as the image's id.
    let get = |digest: &str| -> anyhow::Result<serde_json::Value> {
        let text = util::output(ctr(paths, kube).args(["content", "get", digest]))?;
        Ok(serde_json::from_str(&text)?)
    };
    let mut v = get(&image_digest(paths, kube, name)?)?;
    if let Some(entries) = v["manifests"].as_array() {
        let arch = xtask::image::host_arch()
            .context("the agent's image has no image for this machine's architecture")?
            .oci;
        let digest = entries
            .iter()
            .find(|m| m["platform"]["architecture"] == arch)
            .and_then(|m| m["digest"].as_str())
            .with_context(|| format!("{name}'s index has no {arch} image"))?
            .to_string();
        v = get(&digest)?;
    }
    v["config"]["digest"]
        .as_str()
        .and_then(|d| d.strip_prefix("sha256:"))
        .map(str::to_string)
        .context("a manifest without a config digest")
}

fn image_digest(paths: &Paths, kube: &Kube, name: &str) -> anyhow::Result<String> {
    let out = util::output(ctr(paths, kube).args(["images", "ls", &format!("name=={name}")]))?;
    out.lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&name)).then(|| f.get(2).map(|s| s.to_string()))?
        })
        .context("ctr images ls shows no digest")
}
