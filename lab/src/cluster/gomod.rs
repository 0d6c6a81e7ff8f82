//! Go programs built from their published modules with this machine's Go.
//!
//! Two ways, as each project's go.mod allows:
//! - [`install`]: `go install PKG@VERSION`, for a module with no replace
//!   directives (containerd 2, cri-tools);
//! - [`Wrapper`]: a module of our own that requires the project at its
//!   version and replaces each module that the project's go.mod points into
//!   its own tree (`./staging/src/k8s.io/api`, `../api`) with the same module
//!   at its published version. `go install` refuses a module with such
//!   replaces; Kubernetes and etcd both have them.
//!
//! Go's module and build caches are Go's defaults, so a second build of the
//! same version compiles nothing and a new patch release compiles only what
//! changed. Everything is built with `CGO_ENABLED=0`: static binaries that
//! run anywhere on the node and in images built `FROM scratch`.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use xtask::util;

/// `go` with this machine's toolchain only (no toolchain download) and no cgo.
pub fn go() -> Command {
    let mut cmd = Command::new("go");
    cmd.env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .stdin(std::process::Stdio::null());
    cmd
}

/// `go install` of `packages` (each `PATH@VERSION`) into `bin`.
pub fn install(bin: &Path, packages: &[String], ldflags: &str) -> anyhow::Result<()> {
    fs::create_dir_all(bin)?;
    let mut cmd = go();
    cmd.env("GOBIN", bin)
        .args(["install", "-trimpath", "-ldflags", ldflags])
        .args(packages);
    util::output(&mut cmd).map(drop)
}

/// The go.mod of `module@version`, as the module proxy serves it (fetched
/// into Go's module cache).
pub fn go_mod(module: &str, version: &str) -> anyhow::Result<(String, PathBuf)> {
    let out = util::output(go().args(["mod", "download", "-json", &format!("{module}@{version}")]))?;
    let v: serde_json::Value =
        serde_json::from_str(&out).with_context(|| format!("go mod download {module}@{version}: {out}"))?;
    let field = |k: &str| {
        v[k].as_str()
            .map(PathBuf::from)
            .with_context(|| format!("go mod download {module}@{version} gave no {k}: {out}"))
    };
    let text = fs::read_to_string(field("GoMod")?)?;
    Ok((text, field("Dir")?))
}

/// The modules that a go.mod replaces with a directory of its own tree
/// (`X => ./staging/src/X`, `X => ../api`), in the order it names them.
pub fn local_replaces(go_mod: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in go_mod.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        let spec = if in_block {
            if line == ")" {
                in_block = false;
                continue;
            }
            line
        } else if line == "replace (" {
            in_block = true;
            continue;
        } else if let Some(rest) = line.strip_prefix("replace ") {
            rest
        } else {
            continue;
        };
        let Some((from, to)) = spec.split_once("=>") else {
            continue;
        };
        let (from, to) = (from.trim(), to.trim());
        let local = to.starts_with("./") || to.starts_with("../");
        // `X => ./FORBIDDEN_DEPENDENCY` keeps a module out; it is not one to build.
        if local && !to.contains("FORBIDDEN") {
            if let Some(m) = from.split_whitespace().next() {
                out.push(m.to_string());
            }
        }
    }
    out
}

/// A module of our own that builds a project whose go.mod has local replaces.
pub struct Wrapper {
    pub dir: PathBuf,
}

impl Wrapper {
    /// Writes the module in `dir`: it requires `module@version`, replaces
    /// each of `replaces` with `replace_version` of the same module, and
    /// imports `packages` (under a build tag, so nothing else compiles them),
    /// then tidies it (the module proxy resolves the rest).
    pub fn create(
        dir: &Path,
        module: &str,
        version: &str,
        replaces: &[String],
        replace_version: &str,
        packages: &[String],
    ) -> anyhow::Result<Wrapper> {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        fs::create_dir_all(dir)?;
        let mut go_mod = format!("module graceful.test/build\n\ngo 1.24\n\nrequire {module} {version}\n\n");
        for m in replaces {
            go_mod.push_str(&format!("replace {m} => {m} {replace_version}\n"));
        }
        fs::write(dir.join("go.mod"), go_mod)?;
        let imports: String = packages.iter().map(|p| format!("\t_ \"{p}\"\n")).collect();
        fs::write(
            dir.join("tools.go"),
            format!("//go:build tools\n\npackage build\n\nimport (\n{imports})\n"),
        )?;
        util::output(go().current_dir(dir).args(["mod", "tidy"])).map(drop)?;
        Ok(Wrapper {
            dir: dir.to_path_buf(),
        })
    }

    /// `go build` of `packages` into `bin`, one binary each, in one go
    /// command (so shared packages compile once).
    pub fn build(&self, bin: &Path, packages: &[String], ldflags: &str) -> anyhow::Result<()> {
        fs::create_dir_all(bin)?;
        let mut cmd = go();
        cmd.current_dir(&self.dir)
            .args(["build", "-trimpath", "-ldflags", ldflags, "-o"])
            .arg(format!("{}/", bin.display()))
            .args(packages);
        util::output(&mut cmd).map(drop)
    }
}

#[cfg(test)]
mod tests;
