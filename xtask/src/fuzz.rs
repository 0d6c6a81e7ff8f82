//! `cargo xtask fuzz`: each fuzz target under libFuzzer with the address
//! sanitizer (cargo fuzz, nightly), for a bounded time each. Its corpus
//! starts from the target's seeds (`fuzz/seeds/<target>`, read only) and
//! grows in `target/fuzz-corpus/<target>`; a crash leaves its input under
//! `fuzz/artifacts/`, and the exit status is the first failing target's.
//!
//! CI does not run it: `cargo test` replays every seed and a fixed run of
//! mutations of them (`fuzz/checks`), the same assertions without the
//! sanitizer build: `cargo xtask fuzz --seconds 10` took 7 minutes here,
//! the nightly sanitizer build of the five targets about 6 of them.

use xtask::{
    setup,
    util::{self, display},
};

/// The targets, in the order they run (`fuzz/Cargo.toml`'s binaries).
const TARGETS: [&str; 5] = [
    "drain_request",
    "wait_response",
    "hook_query",
    "api_request",
    "handover_frame",
];

pub fn run(seconds: u64, only: &[String]) -> anyhow::Result<i32> {
    for t in only {
        anyhow::ensure!(
            TARGETS.contains(&t.as_str()),
            "no fuzz target {t}: the targets are {}",
            TARGETS.join(", ")
        );
    }
    setup::run()?;
    let cargo_fuzz = setup::cargo_fuzz()?;
    let root = util::workspace_root();
    let tools_bin = cargo_fuzz.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(tools_bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    for t in TARGETS
        .iter()
        .filter(|t| only.is_empty() || only.iter().any(|o| o == *t))
    {
        let corpus = util::target_dir().join("fuzz-corpus").join(t);
        std::fs::create_dir_all(&corpus)?;
        let mut cmd = util::rustup_cargo(setup::NIGHTLY);
        cmd.current_dir(root.join("fuzz"))
            .env("PATH", &path)
            .args(["fuzz", "run", t])
            .arg(&corpus)
            .arg(root.join("fuzz/seeds").join(t))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"));
        println!("==> {}", display(&cmd));
        let code = util::exit_code(util::status(&mut cmd)?);
        if code != 0 {
            println!("==> fuzz target {t} failed: its input is under fuzz/artifacts/{t}/");
            return Ok(code);
        }
    }
    Ok(0)
}
