//! Builds the kernel programs (graceful-ebpf) with aya-build and leaves the
//! object in OUT_DIR, where `src/bpf/object.rs` embeds it; and names the
//! commit the binary is built from (`GRACEFUL_COMMIT`, for
//! `graceful_build_info` and `graceful version`).

use std::{env, path::PathBuf};

use anyhow::{bail, Context as _};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let object = out.join("graceful-ebpf");
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    println!("cargo:rerun-if-env-changed=GRACEFUL_TOOLS");
    commit()?;

    // bpf-linker lives where `cargo xtask setup` put it, unless already on PATH.
    let tools = env::var_os("GRACEFUL_TOOLS")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/graceful/tools")));
    if let Some(bin) = tools.map(|t| t.join("bin")) {
        if bin.join("bpf-linker").exists() {
            let path = env::var_os("PATH").unwrap_or_default();
            let mut paths = vec![bin];
            paths.extend(env::split_paths(&path));
            // SAFETY: build scripts are single-threaded here.
            env::set_var("PATH", env::join_paths(paths)?);
        }
    }

    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if !skip && which_bpf_linker().is_none() {
        bail!("bpf-linker not found: run `cargo xtask setup` first (it builds bpf-linker against the nightly toolchain's LLVM)");
    }

    let manifest = env::var("CARGO_MANIFEST_DIR")?;
    let ebpf_dir = PathBuf::from(manifest).join("../graceful-ebpf");
    let ebpf_dir = ebpf_dir.to_str().context("non-UTF-8 path")?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "graceful-ebpf",
            root_dir: ebpf_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )?;
    // With AYA_BUILD_SKIP (clippy, quick unit tests) there is no object:
    // embed an empty one, which the loader reports as such at run time.
    if !object.exists() {
        std::fs::write(&object, [])?;
    }
    Ok(())
}

fn which_bpf_linker() -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join("bpf-linker"))
        .find(|p| p.exists())
}

/// `GRACEFUL_COMMIT` for the crate: as given (an image built from an
/// archive has no repository), else the repository's HEAD, else `unknown`.
/// Read again only when HEAD moves, so a commit does not rebuild the kernel
/// programs.
fn commit() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=GRACEFUL_COMMIT");
    let given = env::var("GRACEFUL_COMMIT").ok().filter(|c| !c.is_empty());
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("..");
    let commit = given.or_else(|| {
        // A worktree's .git is a file naming its own git directory, which
        // holds its HEAD; the branches are the common directory's.
        let (git, common) = match std::fs::read_to_string(root.join(".git")) {
            Ok(file) => {
                let git = PathBuf::from(file.trim().strip_prefix("gitdir: ")?);
                let common = std::fs::read_to_string(git.join("commondir"))
                    .map_or_else(|_| git.clone(), |c| git.join(c.trim()));
                (git, common)
            }
            Err(_) => (root.join(".git"), root.join(".git")),
        };
        let head = std::fs::read_to_string(git.join("HEAD")).ok()?;
        println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            // Only what exists: cargo runs this again on every build while a
            // watched file is missing (a repository may have no packed-refs,
            // and a branch only there has no loose file until it moves: then
            // its directory is watched, to see the file appear).
            let loose = common.join(r);
            let watched = match loose.exists() {
                true => loose,
                false => loose.parent()?.to_path_buf(),
            };
            for f in [watched, common.join("packed-refs")] {
                if f.exists() {
                    println!("cargo:rerun-if-changed={}", f.display());
                }
            }
        }
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()?;
        let c = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !c.is_empty()).then_some(c)
    });
    println!(
        "cargo:rustc-env=GRACEFUL_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    Ok(())
}
