//! The plugin's release as krew installs it: `cargo xtask plugin`'s archives
//! (which `cargo xtask test` builds before these tests) and its manifest,
//! checked by krew's own validator (sigs.k8s.io/krew's
//! validate-krew-manifest, built by `cargo xtask cluster build`), which
//! installs every platform's archive with `kubectl krew install` into a
//! krew root of its own. The archives are served on loopback, at the
//! manifest's URIs with the host swapped; a manifest whose sha256 is not the
//! archive's is refused. Each archive holds the binary and the LICENSE; the
//! binaries are static, for their platform's machine, and run (arm64's
//! under qemu-aarch64). The node is not used.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::Command,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
};

use graceful_tests::{cluster::workspace, elf};
use serde_norway::Value;

/// The archives' files over HTTP on 127.0.0.1, one request per connection;
/// stopped on drop.
struct Files {
    addr: std::net::SocketAddr,
    served: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Files {
    fn serve(dir: PathBuf) -> Files {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (served, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (s, st) = (served.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let mut line = String::new();
                let _ = BufReader::new(&conn).read_line(&mut line);
                let name = line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .trim_start_matches('/');
                let file = (!name.contains('/') && !name.is_empty())
                    .then(|| std::fs::read(dir.join(name)).ok())
                    .flatten();
                let _ = match file {
                    Some(body) => {
                        s.fetch_add(1, Ordering::SeqCst);
                        write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .and_then(|_| conn.write_all(&body))
                    }
                    None => conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            }
        });
        Files {
            addr,
            served,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A directory of the test's, taken away with it.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// validate-krew-manifest on `manifest`: (success, its output).
fn validate(manifest: &Path) -> (bool, String) {
    let out = Command::new("validate-krew-manifest")
        .arg("-manifest")
        .arg(manifest)
        .output()
        .expect(
            "validate-krew-manifest on PATH (`cargo xtask cluster build` builds it; `cluster env` names it)",
        );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// One platform of the manifest: its labels, its archive's file name (the
/// `uri`'s last segment) and its sha256.
struct Platform {
    os: String,
    arch: String,
    file: String,
    sha256: String,
}

fn platforms(manifest: &Value) -> Vec<Platform> {
    let text = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("not a string: {v:?}"))
            .to_string()
    };
    manifest["spec"]["platforms"]
        .as_sequence()
        .expect("spec.platforms")
        .iter()
        .map(|p| Platform {
            os: text(&p["selector"]["matchLabels"]["os"]),
            arch: text(&p["selector"]["matchLabels"]["arch"]),
            file: text(&p["uri"]).rsplit('/').next().unwrap().to_string(),
            sha256: text(&p["sha256"]),
        })
        .collect()
}

/// The manifest with every `uri` at `base`, and `edit` applied, written
/// to `path`.
fn write_rehosted(manifest: &Value, base: &str, path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut m = manifest.clone();
    let files: Vec<String> = platforms(manifest).into_iter().map(|p| p.file).collect();
    for (i, file) in files.iter().enumerate() {
        m["spec"]["platforms"][i]["uri"] = Value::String(format!("{base}/{file}"));
    }
    edit(&mut m);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_norway::to_string(&m).unwrap()).unwrap();
}

#[test]
fn krew_installs_each_platforms_archive_from_the_manifest() {
    let dir = workspace().join("target/plugin");
    let manifest_path = dir.join("graceful.yaml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (`cargo xtask test` runs `cargo xtask plugin` before the node's tests)",
            manifest_path.display()
        )
    });
    let manifest: Value = serde_norway::from_str(&manifest).unwrap();
    let platforms = platforms(&manifest);
    let labels: Vec<(&str, &str)> = platforms.iter().map(|p| (&*p.os, &*p.arch)).collect();
    assert_eq!(
        labels,
        [("linux", "amd64"), ("linux", "arm64")],
        "the manifest's platforms"
    );

    let scratch = Scratch(std::env::temp_dir().join(format!("graceful-krew-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).unwrap();

    // Each archive: the binary and the LICENSE, the binary static, for its
    // platform's machine, and it runs.
    let version = env!("CARGO_PKG_VERSION");
    let mut said = Vec::new();
    for Platform { arch, file, .. } in &platforms {
        let archive = dir.join(file);
        assert_eq!(
            archive.file_name().unwrap().to_string_lossy(),
            format!("kubectl-graceful_v{version}_linux_{arch}.tar.gz")
        );
        let listed = Command::new("tar").arg("-tzf").arg(&archive).output().unwrap();
        let names = String::from_utf8_lossy(&listed.stdout).to_string();
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            ["LICENSE", "kubectl-graceful"],
            "{arch}"
        );
        let unpacked = scratch.0.join(arch);
        std::fs::create_dir_all(&unpacked).unwrap();
        let x = Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .unwrap();
        assert!(x.success());
        let bin = unpacked.join("kubectl-graceful");
        let l = elf::linkage(&std::fs::read(&bin).unwrap()).unwrap();
        assert!(l.is_static(), "{arch}'s plugin is not static: {l:?}");
        let (machine, mut run) = match arch.as_str() {
            "amd64" => (elf::EM_X86_64, Command::new(&bin)),
            _ => (elf::EM_AARCH64, {
                let mut c = Command::new("qemu-aarch64");
                c.arg(&bin);
                c
            }),
        };
        assert_eq!(l.machine, machine, "{arch}'s plugin is built for another machine");
        let out = run.arg("--version").output().unwrap();
        said.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
        assert_eq!(
            said.last().unwrap(),
            &format!("kubectl-graceful {version}"),
            "{arch}"
        );
    }

    // krew's validator installs each platform from the served archives.
    let files = Files::serve(dir.clone());
    let base = format!("http://{}", files.addr);
    let good = scratch.0.join("graceful.yaml");
    write_rehosted(&manifest, &base, &good, |_| {});
    let (ok, out) = validate(&good);
    assert!(ok, "krew's validator refused the manifest:\n{out}");
    assert!(
        out.contains(&format!("all {} spec.platforms installed fine", platforms.len())),
        "{out}"
    );
    let fetched = files.served.load(Ordering::SeqCst);
    assert_eq!(fetched, platforms.len(), "one download per platform:\n{out}");

    // An archive that is not the one the manifest names is refused.
    // The first platform named with the second's sum: an archive swapped.
    let (wrong, right) = (&platforms[1].sha256, &platforms[0].sha256);
    let tampered_path = scratch.0.join("tampered/graceful.yaml");
    write_rehosted(&manifest, &base, &tampered_path, |m| {
        m["spec"]["platforms"][0]["sha256"] = Value::String(wrong.clone());
    });
    let (ok, refused) = validate(&tampered_path);
    assert!(!ok, "a wrong sha256 was installed:\n{refused}");
    assert!(
        refused.contains(&format!("checksum does not match, want: {wrong}, got {right}")),
        "the refusal names both sums:\n{refused}"
    );
    drop(files);

    eprintln!(
        "krew: {} platforms installed by validate-krew-manifest ({fetched} archives fetched); plugins say {said:?}; a wrong sha256 refused",
        platforms.len()
    );
}
