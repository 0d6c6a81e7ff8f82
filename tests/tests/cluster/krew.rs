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

/// The manifest with every `uri:`'s directory swapped for `base`.
fn rehosted(manifest: &str, base: &str) -> String {
    manifest
        .lines()
        .map(|l| match l.split_once("uri: ") {
            Some((indent, uri)) => format!("{indent}uri: {base}/{}\n", uri.rsplit('/').next().unwrap()),
            None => format!("{l}\n"),
        })
        .collect()
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
    let uris: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("uri: "))
        .collect();
    let platforms: Vec<(String, String)> = {
        let mut labels = manifest.lines().map(str::trim);
        let mut v = Vec::new();
        while let Some(l) = labels.next() {
            if let Some(os) = l.strip_prefix("os: ") {
                let arch = labels.next().and_then(|a| a.strip_prefix("arch: ")).unwrap();
                v.push((os.to_string(), arch.to_string()));
            }
        }
        v
    };
    assert_eq!(
        platforms,
        [("linux".into(), "amd64".into()), ("linux".into(), "arm64".into())],
        "the manifest's platforms: {manifest}"
    );
    assert_eq!(uris.len(), platforms.len(), "{manifest}");

    let scratch = Scratch(std::env::temp_dir().join(format!("graceful-krew-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).unwrap();

    // Each archive: the binary and the LICENSE, the binary static, for its
    // platform's machine, and it runs.
    let version = env!("CARGO_PKG_VERSION");
    let mut said = Vec::new();
    for ((_, arch), uri) in platforms.iter().zip(&uris) {
        let archive = dir.join(uri.rsplit('/').next().unwrap());
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
    std::fs::write(&good, rehosted(&manifest, &base)).unwrap();
    let (ok, out) = validate(&good);
    assert!(ok, "krew's validator refused the manifest:\n{out}");
    assert!(
        out.contains(&format!("all {} spec.platforms installed fine", platforms.len())),
        "{out}"
    );
    let fetched = files.served.load(Ordering::SeqCst);
    assert_eq!(fetched, platforms.len(), "one download per platform:\n{out}");

    // An archive that is not the one the manifest names is refused.
    let tampered_dir = scratch.0.join("tampered");
    std::fs::create_dir_all(&tampered_dir).unwrap();
    // The first platform named with the second's sum: an archive swapped.
    let sums: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("sha256: "))
        .collect();
    let wrong = sums[1];
    let mut first = true;
    let tampered: String = rehosted(&manifest, &base)
        .lines()
        .map(|l| match l.split_once("sha256: ") {
            Some((indent, _)) if std::mem::take(&mut first) => format!("{indent}sha256: {wrong}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let tampered_path = tampered_dir.join("graceful.yaml");
    std::fs::write(&tampered_path, &tampered).unwrap();
    let (ok, refused) = validate(&tampered_path);
    assert!(!ok, "a wrong sha256 was installed:\n{refused}");
    assert!(
        refused.contains(&format!(
            "checksum does not match, want: {wrong}, got {}",
            sums[0]
        )),
        "the refusal names both sums:\n{refused}"
    );
    drop(files);

    eprintln!(
        "krew: {} platforms installed by validate-krew-manifest ({fetched} archives fetched); plugins say {said:?}; a wrong sha256 refused",
        platforms.len()
    );
}
