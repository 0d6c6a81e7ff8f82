//! A newc cpio archive (what the kernel unpacks as an initramfs), written
//! in-process so device nodes and root ownership need no privileges, then
//! compressed by `gzip`.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::Context as _;

#[derive(Debug, Clone)]
enum Node {
    Dir,
    /// Contents read from this host file when the archive is written.
    File {
        src: PathBuf,
        mode: u32,
    },
    Bytes {
        data: Vec<u8>,
        mode: u32,
    },
    Symlink(String),
    CharDev {
        major: u32,
        minor: u32,
    },
}

/// Paths inside the image (absolute, `/`-separated) → what is there.
/// Parents are added as directories; sorted order puts them first.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    nodes: BTreeMap<String, Node>,
}

impl Archive {
    fn insert(&mut self, path: &str, node: Node) {
        let path = path.trim_start_matches('/').to_string();
        let mut parent = Path::new(&path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.nodes
                .entry(p.to_string_lossy().into_owned())
                .or_insert(Node::Dir);
            parent = p.parent();
        }
        self.nodes.insert(path, node);
    }

    pub fn dir(&mut self, path: &str) {
        self.insert(path, Node::Dir);
    }

    /// A copy of host file `src` (symlinks followed), with `src`'s permissions.
    pub fn file(&mut self, path: &str, src: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(src).with_context(|| format!("{} for the image", src.display()))?;
        self.insert(
            path,
            Node::File {
                src: src.to_path_buf(),
                mode: meta.permissions().mode() & 0o7777,
            },
        );
        Ok(())
    }

    pub fn bytes(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        self.insert(
            path,
            Node::Bytes {
                data: data.into(),
                mode,
            },
        );
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.insert(path, Node::Symlink(target.to_string()));
    }

    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32) {
        self.insert(path, Node::CharDev { major, minor });
    }

    pub fn contains(&self, path: &str) -> bool {
        self.nodes.contains_key(path.trim_start_matches('/'))
    }

    /// Writes the archive to `out`, gzip-compressed. Returns the uncompressed size.
    pub fn write_gzip(&self, out: &Path) -> anyhow::Result<u64> {
        let file = File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
        // -1: the image is mostly debug info; the fastest level is within a
        // few percent of the best here, and the guest inflates it under TCG.
        let mut gzip = Command::new("gzip")
            .args(["-1", "-n", "-c"])
            .stdin(Stdio::piped())
            .stdout(file)
            .spawn()
            .context("cannot run gzip")?;
        let mut w = Writer {
            out: BufWriter::with_capacity(1 << 20, gzip.stdin.take().unwrap()),
            ino: 1,
            written: 0,
        };
        for (path, node) in &self.nodes {
            w.entry(path, node)?;
        }
        w.raw("TRAILER!!!", 0, 0, 0, &[])?;
        w.out.flush()?;
        let written = w.written;
        drop(w);
        let status = gzip.wait()?;
        anyhow::ensure!(status.success(), "gzip failed ({status})");
        Ok(written)
    }
}

struct Writer<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Writer<W> {
    fn entry(&mut self, path: &str, node: &Node) -> anyhow::Result<()> {
        const S_IFDIR: u32 = 0o040000;
        const S_IFREG: u32 = 0o100000;
        const S_IFLNK: u32 = 0o120000;
        const S_IFCHR: u32 = 0o020000;
        match node {
            Node::Dir => self.raw(path, S_IFDIR | 0o755, 0, 0, &[]),
            Node::File { src, mode } => {
                let data = std::fs::read(src).with_context(|| format!("cannot read {}", src.display()))?;
                self.raw(path, S_IFREG | mode, 0, 0, &data)
            }
            Node::Bytes { data, mode } => self.raw(path, S_IFREG | mode, 0, 0, data),
            Node::Symlink(target) => self.raw(path, S_IFLNK | 0o777, 0, 0, target.as_bytes()),
            Node::CharDev { major, minor } => self.raw(path, S_IFCHR | 0o600, *major, *minor, &[]),
        }
    }

    /// One newc header, the name, the data, each padded to 4 bytes.
    fn raw(&mut self, name: &str, mode: u32, rmajor: u32, rminor: u32, data: &[u8]) -> anyhow::Result<()> {
        let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: reproducible images
            u32::try_from(data.len()).context("file too large for cpio")?,
            0, // dev major
            0, // dev minor
            rmajor,
            rminor,
            name.len() as u32 + 1,
            0, // check
        ];
        self.ino += 1;
        let mut header = String::from("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> anyhow::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0; 3][..n])
    }
}

#[cfg(test)]
mod tests;
