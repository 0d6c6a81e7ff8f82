//! An image's file tree, assembled in memory from the host's files and
//! written as one deterministic tar layer (sorted, root-owned, mtime 0):
//! the same inputs give the same layer digest.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use xtask::util;

enum Entry {
    Dir(u32),
    File { data: Vec<u8>, mode: u32 },
    Symlink(String),
}

#[derive(Default)]
pub struct Rootfs {
    /// Paths relative to `/`, without a leading slash.
    entries: BTreeMap<String, Entry>,
}

fn rel(p: &str) -> String {
    p.trim_start_matches('/').trim_end_matches('/').to_string()
}

impl Rootfs {
    pub fn new() -> Rootfs {
        Rootfs::default()
    }

    /// A directory and its missing parents.
    pub fn dir(&mut self, path: &str, mode: u32) -> &mut Self {
        let p = rel(path);
        let mut acc = String::new();
        for part in p.split('/').filter(|s| !s.is_empty()) {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            let m = if acc == p { mode } else { 0o755 };
            self.entries.entry(acc.clone()).or_insert(Entry::Dir(m));
        }
        self
    }

    fn parent(&mut self, p: &str) {
        if let Some((dir, _)) = p.rsplit_once('/') {
            self.dir(dir, 0o755);
        }
    }

    pub fn file(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) -> &mut Self {
        let p = rel(path);
        self.parent(&p);
        self.entries.insert(
            p,
            Entry::File {
                data: data.into(),
                mode,
            },
        );
        self
    }

    /// A host file, at `path` in the image.
    pub fn copy(&mut self, host: &Path, path: &str, mode: u32) -> anyhow::Result<&mut Self> {
        let data = fs::read(host).with_context(|| format!("cannot read {}", host.display()))?;
        Ok(self.file(path, data, mode))
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> &mut Self {
        let p = rel(path);
        self.parent(&p);
        self.entries.insert(p, Entry::Symlink(target.to_string()));
        self
    }

    /// Debian's merged /usr: `/lib` → `usr/lib` and the like, as on the
    /// host, so that the paths the dynamic loader and `ldd` use resolve.
    pub fn merged_usr(&mut self) -> &mut Self {
        for top in ["bin", "sbin", "lib", "lib64"] {
            if let Ok(t) = fs::read_link(Path::new("/").join(top)) {
                let t = t.to_string_lossy().into_owned();
                self.dir(&format!("/usr/{top}"), 0o755);
                self.symlink(top, &t);
            }
        }
        self
    }

    /// A host path as the image holds it: the file at its real (canonical)
    /// path, and a link at each other name it was reached by.
    fn host_file(&mut self, host: &Path) -> anyhow::Result<()> {
        let real = fs::canonicalize(host).with_context(|| format!("cannot resolve {}", host.display()))?;
        let real_s = real.to_string_lossy().into_owned();
        if !self.entries.contains_key(&rel(&real_s)) {
            self.copy(&real, &real_s, 0o755)?;
        }
        // The name asked for, with its directory resolved (/lib → /usr/lib).
        let dir = host
            .parent()
            .map(fs::canonicalize)
            .transpose()?
            .unwrap_or_else(|| PathBuf::from("/"));
        let named = dir.join(host.file_name().context("a file without a name")?);
        if named != real {
            self.symlink(&named.to_string_lossy(), &real_s);
        }
        Ok(())
    }

    /// A dynamically linked host program at `path` (its real location), with
    /// every shared library `ldd` resolves for it and the loader.
    pub fn program(&mut self, host: &Path) -> anyhow::Result<&mut Self> {
        self.merged_usr();
        self.host_file(host)?;
        for lib in shared_libraries(host)? {
            self.host_file(&lib)?;
        }
        Ok(self)
    }

    /// busybox-static at /bin/busybox and the named applets beside it.
    pub fn busybox(&mut self, applets: &[&str]) -> anyhow::Result<&mut Self> {
        self.merged_usr();
        self.copy(Path::new("/bin/busybox"), "/usr/bin/busybox", 0o755)?;
        for a in applets {
            self.symlink(&format!("/usr/bin/{a}"), "busybox");
        }
        Ok(self)
    }

    /// The layer: a tar of every entry, in path order.
    pub fn tar(&self) -> anyhow::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, entry) in &self.entries {
            let mut h = tar::Header::new_ustar();
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            match entry {
                Entry::Dir(mode) => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(*mode);
                    h.set_size(0);
                    b.append_data(&mut h, format!("{path}/"), std::io::empty())?;
                }
                Entry::File { data, mode } => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(*mode);
                    h.set_size(data.len() as u64);
                    b.append_data(&mut h, path, data.as_slice())?;
                }
                Entry::Symlink(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, path, target)?;
                }
            }
        }
        Ok(b.into_inner()?)
    }
}

/// The libraries `ldd` resolves for `bin`, the loader included.
fn shared_libraries(bin: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = util::output(Command::new("ldd").arg(bin))?;
    let mut libs = Vec::new();
    for l in out.lines() {
        let l = l.trim();
        if l.contains("not found") {
            bail!("{}: {l}", bin.display());
        }
        let path = match l.split_once("=>") {
            Some((_, r)) => r.split_whitespace().next(),
            None => l.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}
