//! A kernel's modules for the guest: the ones the tests need and their
//! dependencies (read from each module's `.modinfo`), decompressed.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use super::{super::elf, Kernel};

impl Kernel {
    /// The named modules and everything they depend on, dependencies first,
    /// decompressed into the cache. Modules built into this kernel are left out.
    pub fn modules(&self, wanted: &[&str]) -> anyhow::Result<Vec<PathBuf>> {
        let root = &self.modules_dir;
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
