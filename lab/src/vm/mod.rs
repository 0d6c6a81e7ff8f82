//! `cargo xtask vm-test`: the integration tests on Debian kernels under
//! qemu (TCG), and on this machine's kernel, with the same static binaries.
//!
//! 1. Choose the newest `linux-image-<series>.*-amd64` package for each
//!    `--kernel` (default: [`DEFAULT`], CI's set; `--all`: [`ALL`]), from
//!    the machine's apt or, for `<suite>:<series>`, from a private apt for
//!    that suite (`target/vm/apt/<suite>/`); download it and, where Debian
//!    splits the image (sid's 7.x), the parts it depends on into
//!    `target/vm/kernels/` (checked against the archive's SHA256), and unpack them.
//! 2. Build the agent, the test binary, its peer and the guest's `/init`
//!    static with musl.
//! 3. Per kernel, write an initramfs (`target/vm/<package>.cpio.gz`); boot
//!    them two at a time ([`AT_ONCE`]), each under single-threaded TCG (see
//!    `--accel`) on a host core of its own. The guest's
//!    `/init` (`lab/vm-init`) runs the tests one at a
//!    time and prints `init: success` or `init: failure`: the only verdict.
//!    A kernel below graceful's floor (`floor.rs`) runs only the refusal
//!    tests: the agent must refuse it in one line naming what it lacks.
//!    A watchdog kills a guest that panics, locks up or outlives
//!    `--timeout`. Each console goes to the terminal and to
//!    `target/vm/logs/`, each line stamped with the seconds since qemu
//!    started.
//!
//! The guest is as bare as the agent's `FROM scratch` image: busybox,
//! Debian's `ip`/`ss`/`tc`/`nsenter`/`unshare`, the test fixtures, no CA bundle.
//! 4. Run the same test binary on the host kernel (unless `--no-host`).
//! 5. Print a table of kernel, package version, result and duration, also
//!    written to `target/vm/summary.txt` and `target/vm/results.json`
//!    (which also lists every package unpacked, with its SHA256).
//!
//! Exit code 0 when every kernel passed.

mod binaries;
mod console;
mod cpio;
mod elf;
mod floor;
mod host;
mod initramfs;
mod kernels;
mod qemu;

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use xtask::util;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A kernel to boot: a series (the newest `linux-image-<series>.*-amd64` the machine's apt
    /// offers) or an exact package name such as `linux-image-6.1.0-57-amd64`, either one after
    /// `<suite>:` for another Debian suite through a private apt (`sid:7.2`, `trixie:6.12`,
    /// `bullseye:5.10`). Repeat for several. Default: the CI set (see `DEFAULT`).
    #[arg(
        long = "kernel",
        value_name = "[SUITE:]SERIES|PACKAGE",
        conflicts_with = "all"
    )]
    kernels: Vec<String>,
    /// The whole matrix (see `ALL`): every kernel docs/requirements.md's table lists.
    #[arg(long)]
    all: bool,
    /// Don't run the tests on this machine's kernel.
    #[arg(long)]
    no_host: bool,
    /// Run `apt-get update` first, so that "newest" means the newest in the archive today.
    #[arg(long)]
    apt_update: bool,
    /// Fetch the kernels and build the guests' binaries, then stop: CI
    /// does this at the lowest priority beside the node's tests, which
    /// leave the CPU mostly idle, so that the run after it only boots the
    /// guests (from an empty target directory: 390 s beside the node's
    /// tests, 747 s in a rehearsal of CI, where it also ran beside the
    /// kernel tests).
    #[arg(long)]
    prepare: bool,
    /// The watchdog's time limit per guest, in seconds. It is there to stop
    /// a guest that hangs: with release binaries a full run takes 14 to 19
    /// minutes under TCG, two guests side by side; with `--debug` ones, on
    /// a slow machine, 27 to 36. The limit leaves room for both.
    #[arg(long, default_value_t = 2700, value_name = "SECS")]
    timeout: u64,
    /// libtest's `--test-threads` inside the guests (the host run uses libtest's default).
    #[arg(long, default_value_t = 1)]
    test_threads: usize,
    /// `GRACEFUL_CHURN_SCALE` inside the guests: the churn test's connection count, as a
    /// fraction of its 100,000 (for quicker runs; the full count takes about 3.5 min under TCG).
    /// The host run always uses the full count.
    #[arg(long, default_value_t = 1.0)]
    churn_scale: f64,
    /// qemu's accelerator. Single-threaded TCG by default: under multi-threaded TCG
    /// (`tcg,thread=multi`, qemu's default for -smp 2) a vCPU can run kernel code that another
    /// vCPU is live-patching (a tracepoint's static key flipping as the agent attaches or
    /// detaches), and the guest dies of `Oops: int3` in inet_sk_state_store/inet_sk_set_state.
    /// /dev/kvm is no way out here: standard guests don't run under it on this machine.
    #[arg(long, default_value = "tcg,thread=single")]
    accel: String,
    /// Guest memory (qemu `-m`).
    #[arg(long, default_value = "2G")]
    memory: String,
    /// Guest CPUs (qemu `-smp`).
    #[arg(long, default_value_t = 2)]
    smp: u32,
    /// Build the guests' binaries without optimisation (cargo's dev
    /// profile). The default is `--release`: under TCG every instruction
    /// is emulated, and the debug binaries took 2.2 times as long over the
    /// same tests (the agent's start, its BTF parse and the tests' own
    /// work are CPU-bound there); the eBPF programs are the same either way.
    #[arg(long)]
    debug: bool,
    /// Passed to the test binary, e.g. a test name filter: `cargo xtask vm-test -- churn`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    test_args: Vec<String>,
}

/// The guests CI boots (`.ci/run`), beside the host: bookworm's 6.1 (the
/// floor) and sid's 7.2 (the newest Debian ships), two at a time on CI's
/// two cores, plus bullseye's 5.10, which runs only the refusal test (a
/// minute). Both 6.12s run with `--all`: another full guest would take CI
/// past its hour.
pub const DEFAULT: &[&str] = &["6.1", "sid:7.2", "bullseye:5.10"];
/// `--all`: every kernel docs/requirements.md's table lists.
pub const ALL: &[&str] = &["6.1", "6.12", "trixie:6.12", "sid:7.2", "bullseye:5.10"];
/// Guests booted at once: each takes a host core (single-threaded TCG).
const AT_ONCE: usize = 2;
/// The kernel tests the guests leave out, by name: each needs a userland
/// component the bare guest has not, and proves graceful's logic, not a
/// kernel's programs; the host run (`cargo xtask test`) runs them. Left out
/// by name, so the guest's count says so, instead of passing unrun:
/// - the rollout simulation: HAProxy;
/// - each mesh's path to the httpGet gate (`mesh::`): iptables, to write
///   the mesh's NAT rules;
/// - promtool's check of a live scrape: Debian's prometheus package.
const LEFT_OUT: [&str; 3] = [
    "rollout::a_rollout_fails_requests_without_a_hook_and_none_with_the_gate",
    "mesh::",
    "api::a_plain_scrape_passes_promtool",
];

/// One row of the summary.
#[derive(Debug, serde::Serialize)]
struct Row {
    kernel: String,
    package: String,
    version: String,
    sha256: String,
    /// Every package unpacked for the guest (sid's images come in parts).
    parts: Vec<kernels::Part>,
    uname: String,
    btf: String,
    result: String,
    passed: bool,
    duration_s: f64,
    boot_s: Option<f64>,
    log: String,
    notes: Vec<String>,
}

impl Row {
    fn host(h: host::Outcome, log: &Path) -> Row {
        Row {
            kernel: "host".into(),
            package: "-".into(),
            version: h.version,
            sha256: String::new(),
            parts: Vec::new(),
            uname: h.release,
            btf: if h.btf { "yes" } else { "MISSING" }.into(),
            result: h.result,
            passed: h.passed,
            duration_s: h.duration.as_secs_f64(),
            boot_s: None,
            log: log.display().to_string(),
            notes: h.notes,
        }
    }

    fn guest(k: &kernels::Kernel, out: qemu::Outcome, log: &Path) -> Row {
        let mut notes = out.notes;
        let refusal_only = floor::below(&k.release);
        if refusal_only {
            notes.push(format!(
                "below graceful's floor: the guest ran only the refusal test ({})",
                floor::REFUSAL_TESTS
            ));
        }
        if let qemu::Verdict::Panic(l) | qemu::Verdict::SoftLockup(l) | qemu::Verdict::Silent(l) =
            &out.verdict
        {
            notes.push(l.clone());
        }
        // The guest must run the kernel we meant: Debian puts the package version in `uname -v`.
        let uname = out.uname.unwrap_or_default();
        if !uname.is_empty() && !uname.contains(&k.version) {
            notes.push(format!("the guest reports `{uname}`, not version {}", k.version));
        }
        Row {
            kernel: k.spec.clone(),
            package: k.package.clone(),
            version: k.version.clone(),
            sha256: k.sha256.clone(),
            parts: k.parts.clone(),
            uname: uname.split_whitespace().next().unwrap_or("?").to_string(),
            btf: match &out.btf {
                Some(b) if !b.starts_with("missing") => "yes".into(),
                Some(_) => "MISSING".into(),
                None => "?".into(),
            },
            result: if refusal_only {
                format!("{} (refusal test)", out.verdict.describe())
            } else {
                out.verdict.describe()
            },
            passed: out.verdict.passed(),
            duration_s: out.duration.as_secs_f64(),
            boot_s: out.boot.map(|b| b.as_secs_f64()),
            log: log.display().to_string(),
            notes,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    util::require_root("cargo xtask vm-test")?;
    let started = Instant::now();
    let vm_dir = util::target_dir().join("vm");
    let logs = vm_dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;

    if args.apt_update {
        util::run(Command::new("apt-get").args(["update", "-q"]))?;
    }
    let specs: Vec<String> = match (&args.kernels[..], args.all) {
        ([], true) => ALL.iter().map(|s| s.to_string()).collect(),
        ([], false) => DEFAULT.iter().map(|s| s.to_string()).collect(),
        (given, _) => given.to_vec(),
    };
    let mut kernels = Vec::new();
    for spec in &specs {
        let k = kernels::fetch(
            spec,
            &vm_dir.join("kernels"),
            &vm_dir.join("apt"),
            args.apt_update,
        )?;
        println!(
            "==> kernel {spec}: {} {} (uname -r {}, BTF in config: {})",
            k.package,
            k.version,
            k.release,
            if k.btf_config { "yes" } else { "NO" }
        );
        for p in k.parts.iter().skip(1) {
            println!("    with {} {}", p.package, p.version);
        }
        kernels.push(k);
    }

    let bins = binaries::build(!args.debug)?;
    if args.prepare {
        println!(
            "==> prepared in {:.0?}: {} kernel(s) and the guests' binaries; nothing booted",
            started.elapsed(),
            kernels.len()
        );
        return Ok(0);
    }
    let userland = initramfs::userland(&bins)?;
    let mut rows = Vec::new();

    if !args.no_host {
        let timeout = Duration::from_secs(args.timeout);
        let log = logs.join("host.log");
        let h = host::run(&bins, &args.test_args, timeout, &log)?;
        rows.push(Row::host(h, &log));
    }

    let guest_run = initramfs::Run {
        env: vec![
            ("GRACEFUL_BIN".into(), initramfs::GRACEFUL.into()),
            ("GRACEFUL_PEER_BIN".into(), initramfs::PEER.into()),
            ("GRACEFUL_FIXTURES".into(), initramfs::FIXTURES.into()),
            ("GRACEFUL_CHURN_SCALE".into(), args.churn_scale.to_string()),
            ("RUST_BACKTRACE".into(), "1".into()),
            // Tests that need a userland component the bare guest lacks
            // (HAProxy) skip there, loudly; on a host they fail instead.
            ("GRACEFUL_VM".into(), "1".into()),
        ],
        args: [
            format!("--test-threads={}", args.test_threads),
            "--nocapture".into(),
        ]
        .into_iter()
        .chain(
            LEFT_OUT
                .iter()
                .flat_map(|t| ["--skip".to_string(), t.to_string()]),
        )
        .chain(args.test_args.iter().cloned())
        .collect(),
    };
    // Below the floor the agent refuses to start: the guest checks that it
    // does, in one line naming the missing feature, and runs nothing else.
    let refusal_run = initramfs::Run {
        env: guest_run.env.clone(),
        args: [
            "--test-threads=1".to_string(),
            "--nocapture".into(),
            floor::REFUSAL_TESTS.into(),
        ]
        .into(),
    };
    let mut prepared = Vec::new();
    // The quick refusal guests first, so that they share a core with a long run.
    kernels.sort_by_key(|k| !floor::below(&k.release));
    for k in &kernels {
        let initrd = vm_dir.join(format!("{}.cpio.gz", k.package));
        let t = Instant::now();
        let run = if floor::below(&k.release) {
            &refusal_run
        } else {
            &guest_run
        };
        let size = initramfs::finish(userland.clone(), k, run, &initrd)?;
        println!(
            "==> {}: {} MB uncompressed, {} MB gzip, written in {:.1?}",
            initrd.display(),
            size >> 20,
            std::fs::metadata(&initrd)?.len() >> 20,
            t.elapsed()
        );
        let log = logs.join(format!("{}_{}.log", k.package, k.version));
        let label = format!("[{}]", k.spec);
        prepared.push((k, initrd, log, label));
    }
    // AT_ONCE guests at a time: each runs single-threaded TCG, one host
    // core apiece, and their console lines carry their kernel's label.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..AT_ONCE.min(prepared.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((k, initrd, log, label)) = prepared.get(i) else {
                    return;
                };
                let out = qemu::run(&qemu::Guest {
                    accel: &args.accel,
                    kernel: &k.vmlinuz,
                    initrd,
                    memory: &args.memory,
                    smp: args.smp,
                    timeout: Duration::from_secs(args.timeout),
                    log,
                    label,
                });
                outcomes.lock().unwrap_or_else(|e| e.into_inner()).push((i, out));
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|(i, _)| *i);
    for ((k, _, log, _), (_, out)) in prepared.iter().zip(outcomes) {
        rows.push(Row::guest(k, out?, log));
    }

    let table = summary(&rows, &args, started.elapsed());
    println!("\n{table}");
    std::fs::write(vm_dir.join("summary.txt"), &table)?;
    std::fs::write(
        vm_dir.join("results.json"),
        serde_json::to_string_pretty(&rows)? + "\n",
    )?;
    Ok(if rows.iter().all(|r| r.passed) { 0 } else { 1 })
}

fn summary(rows: &[Row], args: &Args, total: Duration) -> String {
    let mut s = String::from("vm-test summary\n");
    let header = [
        "kernel", "package", "version", "uname -r", "BTF", "result", "duration",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let version = if r.kernel == "host" {
                "-".to_string()
            } else {
                r.version.clone()
            };
            let duration = match r.boot_s {
                Some(b) => format!("{} (boot {:.0}s)", minutes(r.duration_s), b),
                None => minutes(r.duration_s),
            };
            [
                r.kernel.clone(),
                r.package.clone(),
                version,
                r.uname.clone(),
                r.btf.clone(),
                r.result.clone(),
                duration,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: Vec<&str>| {
        let mut l = cols
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        l.truncate(l.trim_end().len());
        l + "\n"
    };
    s.push_str(&line(header.to_vec()));
    for c in &cells {
        s.push_str(&line(c.iter().map(String::as_str).collect()));
    }
    s.push_str(&format!(
        "guests: qemu -accel {} -smp {} -m {}, {} binaries, --test-threads={}, GRACEFUL_CHURN_SCALE={}; total {}\n",
        args.accel,
        args.smp,
        args.memory,
        if args.debug { "debug" } else { "release" },
        args.test_threads,
        args.churn_scale,
        minutes(total.as_secs_f64())
    ));
    for r in rows {
        if !r.notes.is_empty() {
            s.push_str(&format!("{} ({}):\n", r.kernel, r.log));
            for n in &r.notes {
                s.push_str(&format!("  {n}\n"));
            }
        }
    }
    s
}

fn minutes(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
