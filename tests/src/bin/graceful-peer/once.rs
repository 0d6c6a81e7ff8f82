//! The peer's one-shot commands: `graceful-peer COMMAND ARGS...` does one
//! thing a tenant's process would, prints what it saw, and exits. The
//! qemu guests are as bare as the agent's image (no python, no curl), so
//! what a test does as a tenant is done here.
//!
//! - `squat PATH`: binds a unix socket at PATH (replacing what is there),
//!   opens it to all, drops to uid 65534 and only then listens (the kernel
//!   records who called listen), prints `listening`, and sleeps 120 s
//!   accepting nothing.
//! - `get ADDR PATH`: one `GET PATH` over TCP to ADDR with
//!   `connection: close`; prints the whole answer.
//! - `padded-hook SOCKET SIZE`: a valid drain request to the gate's unix
//!   SOCKET, its JSON body padded with spaces to SIZE bytes (JSON takes any
//!   amount of whitespace); prints each line of the answer as it comes.
//! - `hog EVENTS KILLS BYTES HEAVY LIGHT TOTAL`: keeps its own
//!   `oom_score_adj` such that the OOM killer weighs it halfway between
//!   the processes HEAVY and LIGHT as they weigh now (TOTAL: the pages the
//!   OOM's limit holds, which scale the adjustment), while it touches
//!   anonymous memory a page at a time until the `oom_kill` count in the
//!   cgroup's `memory.events` file EVENTS passes KILLS (looking, and aiming
//!   again, every 16 pages), or fails at BYTES; prints `done <bytes
//!   touched> <adj>` and waits for its stdin to close.
//! - `rollout-app ADDR LATENCY_MS`: the rollout simulation's pod app
//!   (`graceful_tests::rollout::app`), listening on ADDR, each request
//!   taking LATENCY_MS; it runs until its SIGTERM.

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::fs::PermissionsExt,
};

/// Runs `args` (the command and its arguments); the process's exit code.
pub fn run(args: &[String]) -> i32 {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = match words.as_slice() {
        ["squat", path] => squat(path),
        ["get", addr, path] => get(addr, path),
        ["padded-hook", socket, size] => size
            .parse()
            .map_err(|e| format!("size {size}: {e}"))
            .and_then(|n| padded_hook(socket, n)),
        ["hog", events, kills, bytes, heavy, light, total] => {
            match (kills.parse(), bytes.parse(), total.parse()) {
                (Ok(k), Ok(n), Ok(t)) => hog(events, k, n, [heavy, light], t),
                _ => Err(format!("hog {kills} {bytes} {total}: numbers wanted")),
            }
        }
        ["rollout-app", addr, latency_ms] => match (addr.parse(), latency_ms.parse()) {
            (Ok(a), Ok(ms)) => graceful_tests::rollout::app::serve(a, std::time::Duration::from_millis(ms))
                .map_err(|e| format!("rollout-app: {e:#}")),
            _ => Err(format!(
                "rollout-app {addr} {latency_ms}: an address and a number wanted"
            )),
        },
        _ => Err(format!("unknown one-shot command {words:?}")),
    };
    match done {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("graceful-peer: {e}");
            1
        }
    }
}

fn squat(path: &str) -> Result<(), String> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let _ = std::fs::remove_file(path);
    let s = Socket::new(Domain::UNIX, Type::STREAM, None).map_err(|e| e.to_string())?;
    let addr = SockAddr::unix(path).map_err(|e| e.to_string())?;
    s.bind(&addr).map_err(|e| format!("bind {path}: {e}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| format!("chmod {path}: {e}"))?;
    // SAFETY: plain syscall wrapper; libc applies it to every thread.
    if unsafe { libc::setresuid(65534, 65534, 65534) } != 0 {
        return Err(format!("setresuid: {}", std::io::Error::last_os_error()));
    }
    s.listen(64).map_err(|e| format!("listen: {e}"))?;
    println!("listening");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    std::thread::sleep(std::time::Duration::from_secs(120));
    drop(s);
    Ok(())
}

fn get(addr: &str, path: &str) -> Result<(), String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    write!(s, "GET {path} HTTP/1.1\r\nhost: g\r\nconnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    std::io::stdout().write_all(&answer).map_err(|e| e.to_string())
}

fn padded_hook(socket: &str, size: usize) -> Result<(), String> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as u64;
    // The request graceful-wait sends, from the contract's own type; the
    // spaces go before its closing brace.
    let request = graceful_api::DrainRequest {
        policy: Some(graceful_api::Policy::Drained),
        min_ms: Some(0),
        settle_ms: Some(100),
        max_ms: Some(60_000),
        started_unix_ms: now_ms,
        ..Default::default()
    };
    let mut body = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
    let close = body
        .pop()
        .filter(|b| *b == b'}')
        .ok_or("a request is a JSON object")?;
    let pad = size
        .checked_sub(body.len() + 1)
        .ok_or_else(|| format!("size {size} is below the request's own {}", body.len() + 1))?;
    body.resize(body.len() + pad, b' ');
    body.push(close);
    let mut s =
        std::os::unix::net::UnixStream::connect(socket).map_err(|e| format!("connect {socket}: {e}"))?;
    let head = format!(
        "POST /v1/drain HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(&body))
        .map_err(|e| e.to_string())?;
    let mut out = std::io::stdout();
    let mut r = BufReader::new(s);
    let mut line = Vec::new();
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                out.write_all(String::from_utf8_lossy(&line).as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn oom_kills(events: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(events).map_err(|e| format!("{events}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill ").and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| format!("{events}: no oom_kill line"))
}

fn hog(events: &str, before: u64, most: usize, between: [&str; 2], total: i64) -> Result<(), String> {
    // The kernel adds `oom_score_adj * (TOTAL / 1000)` pages to what it
    // weighs. Aimed again as it grows, and at the two processes as they
    // weigh now: the charges past the limit reclaim the cgroup's page
    // cache first, the pages of the binary the two map among them, and
    // both grow lighter by the same pages while the hog grows heavier (in
    // a 6.1 guest the hog once touched 3.2 MiB before the kill, and an
    // adjustment set once at the start made it the heaviest).
    let unit = (total / 1000).max(1);
    let mut adj = i64::MIN;
    let mut aim = || -> Result<(), String> {
        let weigh = |pid: &str| graceful_tests::memcg::oom_weight(pid).map(|w| w as i64);
        let (Ok(heavy), Ok(light)) = (weigh(between[0]), weigh(between[1])) else {
            // One of them is gone (killed): keep the last aim.
            return Ok(());
        };
        if heavy <= light {
            // The heavy one dying (its memory going as it exits): the
            // last aim stands.
            return Ok(());
        }
        let own = weigh("self").map_err(|e| e.to_string())?;
        let next = (((heavy + light) / 2 - own) / unit).clamp(-999, 1000);
        if next != adj {
            std::fs::write("/proc/self/oom_score_adj", next.to_string())
                .map_err(|e| format!("oom_score_adj {next}: {e}"))?;
            adj = next;
        }
        Ok(())
    };
    aim()?;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut touched = 0;
    // Stops within 64 KiB of the kill, so that what it still asks for
    // is far less than its victim's death gives back: a hog that went on
    // to a fixed size could need a second victim.
    loop {
        if touched >= most {
            return Err(format!("no OOM kill in {events} after {touched} bytes"));
        }
        if held.len().is_multiple_of(16) {
            if oom_kills(events)? > before {
                break;
            }
            aim()?;
        }
        // A page at a time, each written, so that each is charged.
        held.push(vec![1u8; 4096]);
        touched += 4096;
    }
    println!("done {touched} {adj}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(held);
    Ok(())
}
