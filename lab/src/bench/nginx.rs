//! `cargo xtask bench nginx`: what graceful costs a real server, as the
//! machine's CPU per request. Debian's nginx serves a fixed answer on
//! loopback from a cgroup of its own (as a pod would), and Debian's wrk
//! drives it, in two ways: a new connection for every request
//! (`Connection: close`), and keep-alive.
//!
//! Rounds interleave windows with the agent (started before the window,
//! running through it) and without (stopped, `graceful uninstall` run),
//! and the order flips every round. Each window's figure is the busy CPU
//! of the whole machine (`/proc/stat`: every CPU's time but idle and
//! iowait) over the requests wrk completed: throughput on 2 cores swings by
//! ±20 %, the CPU spent per request much less.
//!
//! With perf on the machine, every window is also sampled, and graceful's
//! own kernel paths are attributed as in `churn-cost`: the cost per request
//! measured directly, beside the difference of two noisy totals.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde_json::json;

use super::{
    agent::Agent,
    cgroup::Cgroups,
    cost::{self, DataDir, Profile},
    stats::Summary,
    AgentArgs,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rounds; each has one window with the agent and one without, per way.
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// Length of each window, in seconds.
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// wrk's connections (its threads: 1, the machine's other CPU is nginx's).
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Don't sample with perf even if it is installed.
    #[arg(long)]
    pub no_perf: bool,
    /// Pin directory of the agent under test.
    #[arg(long, default_value = "/sys/fs/bpf/graceful-bench")]
    pub pin_dir: PathBuf,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// A way of driving nginx.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    NewConnection,
    KeepAlive,
}

impl Way {
    const ALL: [Way; 2] = [Way::NewConnection, Way::KeepAlive];

    fn name(self) -> &'static str {
        match self {
            Way::NewConnection => "a new connection per request",
            Way::KeepAlive => "keep-alive",
        }
    }
}

/// One window: requests and the machine's busy CPU over them.
struct Window {
    requests: u64,
    busy: Duration,
    elapsed: Duration,
    profile: Option<Profile>,
}

impl Window {
    fn us_per_request(&self) -> f64 {
        self.busy.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }
}

/// Every CPU's busy time so far (`/proc/stat`'s `cpu` line: all but idle
/// and iowait), in USER_HZ ticks.
fn busy_ticks() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("empty /proc/stat")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    anyhow::ensure!(v.len() >= 8, "unexpected /proc/stat: {line}");
    // user nice system idle iowait irq softirq steal
    Ok(v[0] + v[1] + v[2] + v[5] + v[6] + v[7])
}

/// nginx, serving a fixed 200 on 127.0.0.1:`port`, in `cgroup`.
struct Nginx {
    child: Child,
    _dir: tempdir::Dir,
    port: u16,
}

mod tempdir {
    /// A directory of the bench's, removed when dropped.
    pub struct Dir(pub std::path::PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Nginx {
    fn start(bin: &Path, cgroup: &Path) -> anyhow::Result<Nginx> {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let dir = std::env::temp_dir().join(format!("graceful-bench-nginx-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let d = dir.display();
        let conf = format!(
            "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d};\n  proxy_temp_path {d};\n  \
             fastcgi_temp_path {d};\n  uwsgi_temp_path {d};\n  scgi_temp_path {d};\n  \
             keepalive_requests 1000000;\n  \
             server {{ listen 127.0.0.1:{port} backlog=4096; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf)?;
        let mut cmd = Command::new(bin);
        cmd.arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        graceful_test_support::cgroup::start_in(&mut cmd, cgroup)?;
        let child = cmd.spawn().context("start nginx")?;
        let nginx = Nginx {
            child,
            _dir: tempdir::Dir(dir),
            port,
        };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(10), "nginx did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGQUIT: nginx's graceful stop.
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGQUIT) };
        if graceful_test_support::process::wait_within(&mut self.child, Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `wrk`'s total requests from its summary line (`N requests in T`).
fn parse_wrk(out: &str) -> Option<u64> {
    out.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let n = w.next()?.parse().ok()?;
        (w.next()? == "requests" && w.next()? == "in").then_some(n)
    })
}

fn window(
    wrk: &Path,
    nginx: &Nginx,
    way: Way,
    args: &Args,
    perf: Option<(&Path, &Path)>,
) -> anyhow::Result<Window> {
    let mut cmd = Command::new(wrk);
    cmd.args(["-t1", &format!("-c{}", args.connections)])
        .arg(format!("-d{}s", args.seconds))
        .arg(format!("http://127.0.0.1:{}/", nginx.port));
    if way == Way::NewConnection {
        cmd.args(["-H", "Connection: close"]);
    }
    cmd.stdin(Stdio::null()).stderr(Stdio::inherit());
    let rec = match perf {
        Some((p, out)) => Some(cost::Recorder::start(p, out, 1000)?),
        None => None,
    };
    let (t0, b0) = (Instant::now(), busy_ticks()?);
    let out = cmd.output().context("run wrk")?;
    let (elapsed, busy) = (t0.elapsed(), busy_ticks()? - b0);
    if let Some(r) = rec {
        r.stop()?;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "wrk failed ({}): {text}", out.status);
    let requests = parse_wrk(&text).with_context(|| format!("no request count in wrk's output:\n{text}"))?;
    let profile = match perf {
        Some((p, out)) => Some(cost::report(p, out)?),
        None => None,
    };
    Ok(Window {
        requests,
        busy: super::tcp_load::ticks_to_duration(busy),
        elapsed,
        profile,
    })
}

fn which(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    graceful_test_support::which(name)
        .or_else(|| Some(PathBuf::from(format!("/usr/sbin/{name}"))).filter(|p| p.exists()))
        .with_context(|| format!("{name} is not installed: apt-get install {package}"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.rounds == 0 || args.seconds == 0 || args.connections == 0 {
        bail!("--rounds, --seconds and --connections must be positive");
    }
    let nginx_bin = which("nginx", "nginx-light")?;
    let wrk = which("wrk", "wrk")?;
    let perf = if args.no_perf {
        None
    } else {
        cost::find_perf().ok()
    };
    let bin = args.agent.binary()?;
    let cgroups = Cgroups::create("graceful-bench-nginx", 1)?;
    let nginx = Nginx::start(&nginx_bin, &cgroups.dirs[0])?;
    let mut agent = Agent::new(&bin, &args.pin_dir)?;
    let data = DataDir::create()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "== graceful and nginx: the machine's busy CPU per request, {} rounds × (with, without) × {} s per way",
        args.rounds, args.seconds
    );
    println!(
        "nginx {} (1 worker, in its own cgroup) on 127.0.0.1, wrk (1 thread, {} connections); {cpus} CPUs; order flips every round{}\n",
        nginx_bin.display(),
        args.connections,
        if perf.is_some() {
            "; every window sampled by perf (1000 Hz)"
        } else {
            ""
        }
    );
    // Per way: µs per request with and without, per-round ratios, the
    // attributed share, requests per second.
    let mut with_us: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut without_us: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut attributed: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); 2];
    for round in 0..args.rounds {
        super::check_interrupted()?;
        for (k, way) in Way::ALL.iter().enumerate() {
            let mut got: [Option<Window>; 2] = [None, None];
            for with in [round % 2 == 0, round % 2 != 0] {
                let out = data.path().join(format!("{k}-{with}.data"));
                if with {
                    agent.start()?;
                }
                let w = window(
                    &wrk,
                    &nginx,
                    *way,
                    &args,
                    perf.as_deref().map(|p| (p, out.as_path())),
                );
                if with {
                    agent.stop()?;
                    agent.uninstall()?;
                }
                got[usize::from(with)] = Some(w?);
            }
            let [Some(without), Some(with)] = got else {
                unreachable!("both windows ran")
            };
            let (a, b) = (with.us_per_request(), without.us_per_request());
            with_us[k].push(a);
            without_us[k].push(b);
            ratios[k].push(a / b);
            rates[k].push(with.requests as f64 / with.elapsed.as_secs_f64());
            if let (Some(pw), Some(pwo)) = (&with.profile, &without.profile) {
                let share = cost::graceful_share(pw, pwo);
                attributed[k].push(share / 100.0 * a);
            }
            println!(
                "round {:>2}, {:<28} {:>7.2} µs/request with, {:>7.2} without: ratio {:.3}",
                round + 1,
                way.name(),
                a,
                b,
                a / b
            );
        }
    }
    drop(agent);
    drop(nginx);

    println!(
        "\n{:<28} {:>16} {:>16} {:>22} {:>20} {:>10}",
        "way", "µs/req with", "µs/req without", "ratio min/med/max", "graceful µs/req", "req/s"
    );
    let mut rows = Vec::new();
    for (k, way) in Way::ALL.iter().enumerate() {
        let (w, wo, r, rate) = (
            Summary::of(&with_us[k]).expect("rounds > 0"),
            Summary::of(&without_us[k]).expect("rounds > 0"),
            Summary::of(&ratios[k]).expect("rounds > 0"),
            Summary::of(&rates[k]).expect("rounds > 0"),
        );
        let attr = Summary::of(&attributed[k]);
        println!(
            "{:<28} {:>16.2} {:>16.2} {:>6.3} {:>6.3} {:>6.3}  {:>20} {:>10.0}",
            way.name(),
            w.median,
            wo.median,
            r.min,
            r.median,
            r.max,
            attr.as_ref().map_or("-".into(), |a| format!("{:.2}", a.median)),
            rate.median
        );
        rows.push(json!({
            "way": way.name(),
            "us_per_request_with": w.json(2),
            "us_per_request_without": wo.json(2),
            "ratio": r.json(3),
            "graceful_us_per_request": attr.map(|a| a.json(2)),
            "requests_per_second_with": rate.json(0),
        }));
    }
    println!("\n(graceful µs/req: graceful's own kernel paths, from perf samples, as in churn-cost)");
    println!(
        "{}",
        json!({"bench": "nginx", "rounds": args.rounds, "seconds": args.seconds, "ways": rows})
    );
    Ok(())
}

#[cfg(test)]
mod tests;
