//! Running commands with errors that say what failed and what to do.

use std::{
    ffi::OsStr,
    io::ErrorKind,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
};

use anyhow::{bail, Context as _};

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` or `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// The `cargo` that runs us (the toolchain's own binary), for build and test.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    // `cargo run` gave us xtask's package variables (CARGO_MANIFEST_DIR,
    // CARGO_PKG_NAME, ...); build scripts that declare them with
    // rerun-if-env-changed (ring's does) would rebuild whenever a plain
    // `cargo build` and a `cargo xtask ...` alternate.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || matches!(
                k.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
        {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd
}

/// `cargo` through rustup's proxy, for `cargo +nightly ...`.
pub fn rustup_cargo(toolchain: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(format!("+{toolchain}"));
    // Under `cargo run` this process inherits cargo's variables; a nested
    // cargo of another toolchain must not see them.
    for var in ["CARGO", "RUSTUP_TOOLCHAIN", "RUSTC", "RUSTDOC", "LD_LIBRARY_PATH"] {
        cmd.env_remove(var);
    }
    cmd
}

/// The command as a user would type it, for messages.
pub fn display(cmd: &Command) -> String {
    let quote = |s: &OsStr| {
        let s = s.to_string_lossy();
        if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            format!("'{}'", s.replace('\'', r"'\''"))
        } else {
            s.into_owned()
        }
    };
    let prog = Path::new(cmd.get_program());
    let prog = if prog.is_absolute() && prog.file_name() == Some(OsStr::new("cargo")) {
        // The toolchain's cargo: show it as the user knows it.
        "cargo".to_string()
    } else {
        quote(prog.as_os_str())
    };
    std::iter::once(prog)
        .chain(cmd.get_args().map(quote))
        .collect::<Vec<_>>()
        .join(" ")
}

fn spawn_error(cmd: &Command, e: std::io::Error) -> anyhow::Error {
    if e.kind() == ErrorKind::NotFound {
        anyhow::anyhow!(
            "cannot run `{}`: {} is not installed or not on PATH (`cargo xtask setup` installs what the project needs)",
            display(cmd),
            cmd.get_program().to_string_lossy()
        )
    } else {
        anyhow::anyhow!("cannot run `{}`: {e}", display(cmd))
    }
}

/// Runs `cmd` with inherited stdio and returns its status, whatever it is.
pub fn status(cmd: &mut Command) -> anyhow::Result<ExitStatus> {
    cmd.status().map_err(|e| spawn_error(cmd, e))
}

/// A command's exit code, or 128 + the signal that killed it, as a shell says.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0))
}

/// Runs `cmd` with inherited stdio; fails unless it exits 0.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let st = status(cmd)?;
    if !st.success() {
        bail!("`{}` failed ({st})", display(cmd));
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout; fails, showing its stderr, unless it exits 0.
pub fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(cmd, e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let shown = if stderr.trim().is_empty() { stdout } else { stderr };
        bail!(
            "`{}` failed ({}):\n{}",
            display(cmd),
            out.status,
            tail(shown.trim_end(), 40)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8 output", display(cmd)))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Where `name` is on PATH, if anywhere.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn require_root(what: &str) -> anyhow::Result<()> {
    if !is_root() {
        bail!("{what} needs root (it loads eBPF programs, creates cgroups and installs packages): run `sudo -E cargo xtask ...` or as root");
    }
    Ok(())
}

/// `$HOME`, which rustup and cargo also use.
pub fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .context("HOME is not set: it locates ~/.local/share/graceful")
}
