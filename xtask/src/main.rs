//! `cargo xtask`: the project's tasks.
//!
//! xtask's own: make the machine ready, build, test, check the tree.
//! - `setup`: make this machine ready (Rust bits, bpf-linker, apt packages, Go).
//! - `test`:  build the agent and run the whole test suite.
//! - `layout`: check the tree's structure (import circles, file sizes, inline tests).
//! - `docs`: regenerate docs/cli.md from the CLI's definitions.
//! - `plugin`: kubectl-graceful's release archives and their krew manifest.
//! - `fuzz`: the fuzz targets under libFuzzer and the sanitizer.
//!
//! The lab's, handed as they are to the lab's program (`lab/`, a workspace
//! of its own that the agent's build never loads): `cluster`, `vm-test`,
//! `bench`, `soak`, `demo`, `rollout`.

use clap::{Parser, Subcommand};

use xtask::{lab, setup};

mod docs;
mod fuzz;
mod layout;
mod test;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "graceful's project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Arguments handed to the lab as they are (`--help` included).
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
struct LabArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make this machine ready: rust-src, the musl target, bpf-linker, apt packages and Go. Idempotent.
    Setup,
    /// Run setup, build the agent, then `cargo test --workspace` (as root) and the lab's own tests.
    /// Extra args go to cargo test. Then brings the test node up (`cluster up`), runs the
    /// end-to-end tests on it, and takes it down again if it was not up before.
    Test {
        /// Skip the end-to-end tests on the test node (they are then reported as skipped).
        #[arg(long)]
        no_cluster: bool,
        /// Passed to `cargo test`: `cargo xtask test -- restart` (a name filter), `-- -- --nocapture`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check the tree's structure: no import circle between modules or rooms, no file over 600
    /// lines, no test module inside a product file. Exit status 1 on any finding.
    Layout(layout::Args),
    /// Build the agent's image from the Containerfile, offline (static binaries, buildah, FROM
    /// scratch), tagged `graceful/agent:<version>` and `<version>-<commit>`; write it as an OCI
    /// archive under target/image, and push it with `--push`.
    Image {
        /// Push both tags to this repository (`registry.example.com/graceful/agent`), with the
        /// credentials of `buildah login`. `GRACEFUL_IMAGE_TLS_VERIFY=false` for a plain-HTTP
        /// registry.
        #[arg(long, value_name = "REPOSITORY")]
        push: Option<String>,
    },
    /// Build kubectl-graceful for every platform krew offers it on (Linux amd64 and arm64,
    /// static), pack each into a release archive with the LICENSE, and write the krew manifest
    /// that names them, all under target/plugin.
    Plugin {
        /// Where the release's archives are published: each `uri` in the manifest is this URL
        /// and the archive's name.
        #[arg(long, value_name = "URL")]
        base_url: String,
    },
    /// Regenerate docs/cli.md (the command reference) from the CLI's own definitions.
    Docs,
    /// Run the fuzz targets under libFuzzer with the address sanitizer (cargo fuzz, nightly;
    /// installed on first use), each from its seeds in fuzz/seeds. `cargo test` replays those
    /// seeds and a fixed run of their mutations without the sanitizer (what CI runs).
    Fuzz {
        /// How long each target runs.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Only these targets (drain_request, wait_response, hook_query, api_request,
        /// handover_frame).
        targets: Vec<String>,
    },
    /// (lab) Show the agent counting a simulated pod's connections while it drains; `--cluster`
    /// on the test node. `cargo xtask demo --help` lists its flags.
    Demo(LabArgs),
    /// (lab) Roll pods behind a load balancer six ways (none, sleep, the sleep action, the exec
    /// and httpGet gates, the gate injected by label) and print the table. `cargo xtask rollout --help` lists its flags.
    Rollout(LabArgs),
    /// (lab) Benchmarks: `cargo xtask bench --help` lists them.
    Bench(LabArgs),
    /// (lab) A long run of connection churn with an agent restart; counts against `ss`.
    Soak(LabArgs),
    /// (lab) The integration tests in qemu on Debian kernels (6.1, 7.2, the refusal on 5.10).
    VmTest(LabArgs),
    /// (lab) A real Kubernetes node on this machine: `cargo xtask cluster up | down | status |
    /// build | env` (as root).
    Cluster(LabArgs),
}

fn image(push: Option<&str>) -> anyhow::Result<()> {
    let built = xtask::image::build()?;
    println!(
        "built      {} ({:.1} MiB as an OCI archive: {})",
        built.tags.join(", "),
        xtask::image::size_mib(&built.archive),
        built.archive.display()
    );
    println!("index      sha256:{}", built.index);
    for (arch, id) in &built.images {
        println!("{:<10} sha256:{id} (image id)", arch.oci);
    }
    if let Some(repo) = push {
        for dest in built.push(repo)? {
            println!("pushed     {dest}");
        }
    }
    Ok(())
}

fn plugin(base_url: &str) -> anyhow::Result<()> {
    let built = xtask::plugin::build(base_url)?;
    for (p, archive, sum) in &built.archives {
        println!(
            "{:<10} {} ({:.1} MiB, sha256 {sum})",
            format!("{}/{}", xtask::plugin::OS, p.oci),
            archive.display(),
            xtask::image::size_mib(archive)
        );
    }
    println!("manifest   {}", built.manifest.display());
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup => setup::run().map(|_| 0),
        Command::Test { no_cluster, args } => test::run(no_cluster, &args),
        Command::Layout(args) => layout::run(args),
        Command::Image { push } => image(push.as_deref()).map(|_| 0),
        Command::Plugin { base_url } => plugin(&base_url).map(|_| 0),
        Command::Docs => docs::run_docs().map(|_| 0),
        Command::Fuzz { seconds, targets } => fuzz::run(seconds, &targets),
        Command::Demo(a) => lab::run("demo", &a.args),
        Command::Rollout(a) => lab::run("rollout", &a.args),
        Command::Bench(a) => lab::run("bench", &a.args),
        Command::Soak(a) => lab::run("soak", &a.args),
        Command::VmTest(a) => lab::run("vm-test", &a.args),
        Command::Cluster(a) => lab::run("cluster", &a.args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
