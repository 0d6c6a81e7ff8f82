//! The Containerfile: the paths it copies exist, its binaries are the
//! workspace's own [[bin]] targets, built for each architecture's musl
//! target, and they link statically for musl (this machine's; the image
//! test of the node reads the arm64 image's).

use super::*;

/// The image's architectures (the OCI name) and the musl target each is
/// built for, as xtask's image task builds them.
const ARCHES: [(&str, &str); 2] = [("amd64", MUSL), ("arm64", "aarch64-unknown-linux-musl")];
/// Where the builder stage leaves the binaries, whatever the architecture.
const BUILDER_OUT: &str = "/out/";

/// The binaries the image takes from the builder stage: (destination, bin
/// target, package), after checking every path the Containerfile names.
fn image_binaries() -> Vec<(String, String, String)> {
    let path = root().join("Containerfile");
    let stages = containerfile::parse(&read(&path));
    let ws = workspace();
    assert!(
        stages.len() >= 2,
        "Containerfile: a builder stage and a final stage"
    );
    let last = stages.last().unwrap();
    assert_eq!(last.base, "scratch", "Containerfile: the image is FROM scratch");

    // What it copies from the repository exists, and is the whole workspace.
    let mut local = BTreeSet::new();
    for stage in &stages {
        for i in stage.all("COPY").chain(stage.all("ADD")) {
            let c = containerfile::copy(i);
            if c.from.is_some() {
                continue;
            }
            for s in &c.sources {
                assert!(
                    !s.contains(['*', '?', '[']),
                    "Containerfile line {}: {s}: globs are not checked",
                    i.line
                );
                assert!(
                    root().join(s).exists(),
                    "Containerfile line {}: COPY {s}: no such path in the repository",
                    i.line
                );
                local.insert(s.trim_end_matches('/').to_string());
            }
        }
    }
    for m in ws
        .members
        .iter()
        .map(String::as_str)
        .chain(["Cargo.toml", "Cargo.lock"])
    {
        assert!(
            local.contains(m) || local.contains("."),
            "Containerfile: {m} is not copied into the builder; cargo loads the whole workspace"
        );
    }

    // What the image takes from the builder: the workspace's own binaries,
    // built for the architecture the image is built for (TARGETARCH), on
    // the build machine's own (BUILDPLATFORM: a cross build, no emulator).
    let mut bins = Vec::new();
    for i in last.all("COPY") {
        let c = containerfile::copy(i);
        let Some(from) = &c.from else { continue };
        let builder = stages
            .iter()
            .find(|s| s.name.as_deref() == Some(from.as_str()))
            .unwrap_or_else(|| panic!("Containerfile line {}: no stage {from}", i.line));
        assert_eq!(
            builder.platform.as_deref(),
            Some("$BUILDPLATFORM"),
            "Containerfile: the builder runs on the build machine's platform (FROM --platform=$BUILDPLATFORM)"
        );
        assert!(
            builder.all("ARG").any(|a| a.args.trim() == "TARGETARCH"),
            "Containerfile: the builder reads TARGETARCH"
        );
        let build = builder
            .all("RUN")
            .map(|r| r.args.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|r| r.contains("cargo build"))
            .expect("the builder runs no `cargo build`");
        for (arch, target) in ARCHES {
            let case = format!("{arch}) target={target} ;;");
            assert!(
                build.contains(&case),
                "Containerfile: `{build}` does not build {target} for {arch} (`{case}`)"
            );
        }
        for s in &c.sources {
            let bin = s
                .strip_prefix(BUILDER_OUT)
                .unwrap_or_else(|| panic!("Containerfile line {}: {s} is not under {BUILDER_OUT}", i.line));
            let pkg = ws.bins.get(bin).unwrap_or_else(|| {
                panic!(
                    "Containerfile line {}: {bin} is no [[bin]] of the workspace",
                    i.line
                )
            });
            for want in [
                "--release".to_string(),
                r#"--target "$target""#.to_string(),
                format!("-p {pkg}"),
                format!(r#""target/$target/release/{bin}""#),
            ] {
                assert!(build.contains(&want), "Containerfile: `{build}` lacks {want}");
            }
            bins.push((c.dest.clone(), bin.to_string(), pkg.clone()));
        }
    }

    // The layout the agent and the DaemonSet rely on.
    let dest_of = |bin: &str| {
        bins.iter()
            .find(|(_, b, _)| b == bin)
            .map(|(d, _, _)| d.clone())
            .unwrap_or_else(|| panic!("Containerfile: the image lacks {bin}"))
    };
    let (agent, wait, keeper) = (
        dest_of("graceful"),
        dest_of("graceful-wait"),
        dest_of("graceful-keeper"),
    );
    for (bin, why) in [
        (
            &wait,
            "the agent looks for graceful-wait beside its own executable",
        ),
        (
            &keeper,
            "`graceful daemon --keeper on` looks for graceful-keeper beside its own executable",
        ),
    ] {
        assert_eq!(Path::new(bin).parent(), Path::new(&agent).parent(), "{why}");
    }
    let entry = last.all("ENTRYPOINT").last().expect("no ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(&entry.args).expect("ENTRYPOINT in JSON form");
    assert_eq!(entry, [agent.clone(), "daemon".into()]);
    let c = agent_container();
    assert!(c.command.is_none(), "the DaemonSet keeps the image's entrypoint");
    for p in [&c.readiness_probe, &c.liveness_probe].into_iter().flatten() {
        // An exec probe must run a binary the image has (it has no shell);
        // HTTP probes ask the agent itself.
        if let Some(cmd) = p.exec.as_ref().and_then(|e| e.command.as_ref()) {
            assert_eq!(cmd[0], agent, "probes run a binary the image has");
        }
    }
    bins
}

#[test]
fn the_containerfile_names_real_paths_and_binaries() {
    let bins = image_binaries();
    assert_eq!(bins.len(), 3, "{bins:?}");
}

/// Builds what the Containerfile builds, for the same target, and reads
/// the executables' ELF headers: no loader, no shared library (a scratch
/// image has neither). The first build takes minutes (the agent embeds its
/// eBPF object); later ones are incremental.
#[test]
fn the_containerfile_binaries_link_statically() {
    let bins = image_binaries();
    let packages: BTreeSet<&str> = bins.iter().map(|(_, _, p)| p.as_str()).collect();
    let mut cmd = cargo();
    cmd.args([
        "build",
        "--release",
        "--target",
        MUSL,
        "--message-format=json-render-diagnostics",
    ]);
    for p in &packages {
        cmd.args(["-p", p]);
    }
    eprintln!("building {packages:?} for {MUSL} (release), as the Containerfile does");
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .expect("cannot run cargo build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let hint = if stderr.contains("musl-gcc") {
            "a C compiler for musl is missing (ring, under kube-rs's TLS, compiles C): \
             `apt-get install musl-tools`"
        } else if stderr.contains("bpf-linker") {
            "bpf-linker is missing: `cargo xtask setup`"
        } else if stderr.contains(MUSL) {
            "the musl target may be missing: `rustup target add x86_64-unknown-linux-musl` (or `cargo xtask setup`)"
        } else {
            "see cargo's output above"
        };
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("the musl build failed: {hint}\n{}", tail.join("\n"));
    }
    let mut executables = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] == "compiler-artifact" {
            if let (Some(name), Some(exe)) = (m["target"]["name"].as_str(), m["executable"].as_str()) {
                executables.insert(name.to_string(), PathBuf::from(exe));
            }
        }
    }
    for (dest, bin, _) in &bins {
        let exe = executables
            .get(bin)
            .unwrap_or_else(|| panic!("cargo built no executable {bin}"));
        let data = std::fs::read(exe).unwrap();
        let l = elf::linkage(&data).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
        assert!(
            l.is_static(),
            "{} (the image's {dest}) is not static: loader {:?}, needs {:?}. Is RUSTFLAGS or \
             .cargo/config.toml turning off static linking for {MUSL}?",
            exe.display(),
            l.interp,
            l.needed
        );
        assert_eq!(
            l.machine,
            elf::EM_X86_64,
            "{} is not built for x86-64",
            exe.display()
        );
        eprintln!("{bin}: static ({} bytes)", data.len());
    }
}

/// The parser against a binary known to be dynamic: this test executable
/// (glibc, built for the host) has a loader and needs libc.
#[test]
fn the_elf_reader_sees_a_dynamic_executable() {
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let l = elf::linkage(&me).unwrap();
    assert!(!l.is_static(), "{l:?}");
    assert!(l.interp.as_deref().is_some_and(|i| i.contains("ld-")), "{l:?}");
    assert!(l.needed.iter().any(|n| n.starts_with("libc.so")), "{l:?}");
    let native = match std::env::consts::ARCH {
        "x86_64" => elf::EM_X86_64,
        "aarch64" => elf::EM_AARCH64,
        other => panic!("no e_machine known for {other}"),
    };
    assert_eq!(l.machine, native, "{l:?}");
    assert!(elf::linkage(b"#!/bin/sh\n").is_err());
}
