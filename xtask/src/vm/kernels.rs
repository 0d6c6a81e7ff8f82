//! Debian kernel packages: which one to test, fetched with `apt-get
//! download` into a cache, checked against the archive's SHA256, unpacked
//! with `dpkg-deb -x`. The exact package and version are recorded.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use super::elf;
use crate::util::{self, output};

/// One kernel package, unpacked.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// What was asked for: a series (`6.1`) or a package name.
    pub spec: String,
    pub package: String,
    pub version: String,
    pub sha256: String,
    /// `uname -r` of this kernel, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `CONFIG_DEBUG_INFO_BTF=y` in the package's config.
    pub btf_config: bool,
    /// The unpacked package.
    dir: PathBuf,
}

/// What `apt-cache show --no-all-versions` says about a package.
#[derive(Debug, Clone)]
struct Candidate {
    package: String,
    version: String,
    size: u64,
    sha256: String,
}

/// The newest package for `spec`: a series such as `6.1` (the newest
/// `linux-image-6.1.*-amd64`, without the cloud and rt flavours), or an
/// exact package name.
fn choose(spec: &str) -> anyhow::Result<Candidate> {
    let names = if spec.starts_with("linux-image-") {
        vec![spec.to_string()]
    } else {
        anyhow::ensure!(
            spec.split('.').all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())),
            "--kernel {spec:?}: give a series such as 6.1 or 6.12, or a package name such as linux-image-6.1.0-57-amd64"
        );
        let pattern = format!("^linux-image-{}\\.", spec.replace('.', "\\."));
        let found = output(Command::new("apt-cache").args(["search", "--names-only", &pattern]))?;
        let names: Vec<String> = found
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| is_generic_amd64(n, spec))
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            bail!(
                "apt offers no linux-image-{spec}.*-amd64 package: check that /etc/apt/sources.list has \
                 bookworm and bookworm-security, then run `apt-get update` (or pass --apt-update)"
            );
        }
        names
    };
    let mut cmd = Command::new("apt-cache");
    cmd.args(["show", "--no-all-versions"]).args(&names);
    let text = output(&mut cmd)?;
    let mut candidates = Vec::new();
    for stanza in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        if let (Some(package), Some(version), Some(size), Some(sha256)) =
            (field("Package"), field("Version"), field("Size"), field("SHA256"))
        {
            candidates.push(Candidate {
                package,
                version,
                size: size.parse().context("apt-cache: bad Size")?,
                sha256,
            });
        }
    }
    let mut best: Option<Candidate> = None;
    for c in candidates {
        if best.as_ref().is_none_or(|b| version_gt(&c.version, &b.version)) {
            best = Some(c);
        }
    }
    best.with_context(|| format!("apt-cache show {} printed no version", names.join(" ")))
}

/// `linux-image-<series>.…-amd64`, not `-cloud-amd64`, `-rt-amd64`, `-unsigned` or `-dbg`.
fn is_generic_amd64(name: &str, series: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("linux-image-")
        .and_then(|r| r.strip_suffix("-amd64"))
    else {
        return false;
    };
    let Some(abi) = rest.strip_prefix(series).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    // 6.1: `0-57`; 6.12: `117+deb12`. Flavours add a word: `0-57-cloud`.
    abi.starts_with(|c: char| c.is_ascii_digit()) && !abi.ends_with("-cloud") && !abi.ends_with("-rt")
}

/// Debian version order, by `dpkg --compare-versions`.
fn version_gt(a: &str, b: &str) -> bool {
    Command::new("dpkg")
        .args(["--compare-versions", a, "gt", b])
        .status()
        .is_ok_and(|s| s.success())
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    let out = output(Command::new("sha256sum").arg(path))?;
    Ok(out.split_whitespace().next().unwrap_or_default().to_string())
}

/// Chooses, downloads (unless cached and intact) and unpacks the kernel for `spec`.
pub fn fetch(spec: &str, cache: &Path) -> anyhow::Result<Kernel> {
    let c = choose(spec)?;
    fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    // apt-get download's file name: the epoch's colon is escaped.
    let stem = format!("{}_{}_amd64", c.package, c.version.replace(':', "%3a"));
    let deb = cache.join(format!("{stem}.deb"));
    let intact = |deb: &Path| -> anyhow::Result<bool> {
        Ok(fs::metadata(deb).is_ok_and(|m| m.len() == c.size) && sha256(deb)? == c.sha256)
    };
    if !intact(&deb)? {
        println!(
            "==> apt-get download {}={} (into {})",
            c.package,
            c.version,
            cache.display()
        );
        let _ = fs::remove_file(&deb);
        util::run(
            Command::new("apt-get")
                .args(["download", "-q", "-o", "APT::Sandbox::User=root"])
                .arg(format!("{}={}", c.package, c.version))
                .current_dir(cache),
        )?;
        if !intact(&deb)? {
            bail!(
                "{} does not match the archive's size and SHA256 for {} {}",
                deb.display(),
                c.package,
                c.version
            );
        }
    }

    let dir = cache.join(&stem);
    if !dir.join("boot").is_dir() {
        let tmp = cache.join(format!("{stem}.partial"));
        let _ = fs::remove_dir_all(&tmp);
        util::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp))?;
        fs::rename(&tmp, &dir)?;
    }
    let vmlinuz = fs::read_dir(dir.join("boot"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .with_context(|| format!("{} has no boot/vmlinuz-*", deb.display()))?;
    let release = vmlinuz.file_name().unwrap().to_string_lossy()["vmlinuz-".len()..].to_string();
    let config = fs::read_to_string(dir.join(format!("boot/config-{release}"))).unwrap_or_default();
    Ok(Kernel {
        spec: spec.to_string(),
        package: c.package,
        version: c.version,
        sha256: c.sha256,
        btf_config: config.lines().any(|l| l == "CONFIG_DEBUG_INFO_BTF=y"),
        release,
        vmlinuz,
        dir,
    })
}

impl Kernel {
    fn modules_dir(&self) -> PathBuf {
        self.dir.join("lib/modules").join(&self.release)
    }

    /// The named modules and everything they depend on, dependencies first,
    /// decompressed into the cache. Modules built into this kernel are left out.
    pub fn modules(&self, wanted: &[&str]) -> anyhow::Result<Vec<PathBuf>> {
        let root = self.modules_dir();
        let mut index = BTreeMap::new();
        index_modules(&root.join("kernel"), &mut index)?;
        let builtin = fs::read_to_string(root.join("modules.builtin")).unwrap_or_default();
        let builtin: Vec<String> = builtin
            .lines()
            .filter_map(|l| Path::new(l).file_stem())
            .map(|s| s.to_string_lossy().replace('-', "_"))
            .collect();
        let out_dir = self.dir.join("graceful-vm-modules");
        fs::create_dir_all(&out_dir)?;
        let mut order = Vec::new();
        for name in wanted {
            self.resolve(&name.replace('-', "_"), &index, &builtin, &out_dir, &mut order, 0)?;
        }
        Ok(order.into_iter().map(|(_, p)| p).collect())
    }

    fn resolve(
        &self,
        name: &str,
        index: &BTreeMap<String, PathBuf>,
        builtin: &[String],
        out_dir: &Path,
        order: &mut Vec<(String, PathBuf)>,
        depth: usize,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(depth < 32, "module dependency loop at {name}");
        if order.iter().any(|(n, _)| n == name) {
            return Ok(());
        }
        let Some(src) = index.get(name) else {
            if builtin.iter().any(|b| b == name) {
                return Ok(());
            }
            bail!(
                "{} {} has no module {name}, and it is not built in",
                self.package,
                self.version
            );
        };
        let ko = out_dir.join(format!("{name}.ko"));
        if !ko.exists() {
            let data = decompress(src)?;
            fs::write(&ko, data)?;
        }
        let deps = elf::module_depends(&fs::read(&ko)?).with_context(|| format!("{}", src.display()))?;
        for dep in deps {
            self.resolve(&dep.replace('-', "_"), index, builtin, out_dir, order, depth + 1)?;
        }
        order.push((name.to_string(), ko));
        Ok(())
    }
}

/// Module name (with `_`, as the kernel spells it) → file, under `dir`.
fn index_modules(dir: &Path, index: &mut BTreeMap<String, PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            index_modules(&path, index)?;
            continue;
        }
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        if let Some(stem) = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
            .iter()
            .find_map(|ext| file.strip_suffix(ext))
        {
            index.insert(stem.replace('-', "_"), path.clone());
        }
    }
    Ok(())
}

/// A module file's ELF bytes, decompressed with xz, zstd or gzip as its name says.
fn decompress(path: &Path) -> anyhow::Result<Vec<u8>> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    let tool = match ext {
        "ko" => return Ok(fs::read(path)?),
        "xz" => "xz",
        "zst" => "zstd",
        "gz" => "gzip",
        _ => bail!("{}: unknown module compression", path.display()),
    };
    let out = Command::new(tool)
        .args(["-d", "-c"])
        .arg(path)
        .output()
        .with_context(|| {
            format!(
                "cannot run {tool} to decompress {} (apt-get install {})",
                path.display(),
                if tool == "xz" { "xz-utils" } else { tool }
            )
        })?;
    anyhow::ensure!(out.status.success(), "{tool} -d {} failed", path.display());
    Ok(out.stdout)
}

#[cfg(test)]
mod tests;
