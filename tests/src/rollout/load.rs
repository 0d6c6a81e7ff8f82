//! The load generator: HTTP/1.1 `GET /` to the service, open loop. Requests
//! are scheduled at a fixed rate whatever the answers, so a burst of fast
//! failures doesn't inflate the count and a stall doesn't hide behind fewer
//! requests; each latency runs from the request's scheduled time, so time
//! spent queued behind a slow one counts too.
//!
//! With keep-alive each worker keeps its connection to the load balancer
//! (a new one after an error or `Connection: close`); without, every request
//! is a connection of its own and says `Connection: close`.
//!
//! The target is one address (a Service, a load balancer), or a
//! [`Pool`] of the pods' own addresses taken in turn, which the test
//! changes as a load balancer outside the cluster would (see
//! `cluster::late_lb`).
//!
//! The workers run in the node namespace (setns on their own thread).

use std::{
    collections::BTreeMap,
    io::{BufReader, Write},
    net::{SocketAddr, TcpStream},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc, Arc, Mutex,
    },
    thread::JoinHandle,
    time::Duration,
};

use crate::monotonic_ns;
use anyhow::{bail, Context as _};

use crate::netns::NetNs;

const TIMEOUT: Duration = Duration::from_secs(10);

/// What the load saw.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub requests: u64,
    pub failed: u64,
    /// Latencies of the successful requests, in microseconds, sorted.
    pub latencies_us: Vec<u64>,
    /// Failed requests by what went wrong (`HTTP 503`, `connection reset`, ...).
    pub failures: BTreeMap<String, u64>,
    /// Requests scheduled before [`Load::count_from_now`]: sent, not counted
    /// above (the load's warm-up), and how those failed.
    pub warmup_requests: u64,
    pub warmup_failures: BTreeMap<String, u64>,
}

impl Outcome {
    /// The `p`-th percentile of the successful requests' latency, in ms.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let n = self.latencies_us.len();
        if n == 0 {
            return 0.0;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        self.latencies_us[rank.clamp(1, n) - 1] as f64 / 1000.0
    }

    fn merge(&mut self, o: Outcome) {
        self.requests += o.requests;
        self.failed += o.failed;
        self.latencies_us.extend(o.latencies_us);
        for (k, v) in o.failures {
            *self.failures.entry(k).or_default() += v;
        }
        self.warmup_requests += o.warmup_requests;
        for (k, v) in o.warmup_failures {
            *self.warmup_failures.entry(k).or_default() += v;
        }
    }
}

/// Where the requests go.
#[derive(Clone)]
pub enum Target {
    /// One address: a Service's, a load balancer's.
    One(SocketAddr),
    /// The pods' addresses, each new connection to the next.
    Pool(Arc<Pool>),
}

impl From<SocketAddr> for Target {
    fn from(a: SocketAddr) -> Target {
        Target::One(a)
    }
}

/// Addresses taken in turn, changed while the load runs.
#[derive(Default)]
pub struct Pool {
    addrs: Mutex<Vec<SocketAddr>>,
    next: AtomicUsize,
}

impl Pool {
    pub fn new(addrs: Vec<SocketAddr>) -> Arc<Pool> {
        Arc::new(Pool {
            addrs: Mutex::new(addrs),
            next: AtomicUsize::new(0),
        })
    }

    /// From now on, these addresses.
    pub fn set(&self, addrs: Vec<SocketAddr>) {
        *self.addrs.lock().unwrap() = addrs;
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.addrs.lock().unwrap().clone()
    }

    fn pick(&self) -> Option<SocketAddr> {
        let a = self.addrs.lock().unwrap();
        (!a.is_empty()).then(|| a[self.next.fetch_add(1, Ordering::Relaxed) % a.len()])
    }
}

impl Target {
    fn addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Target::One(a) => Ok(*a),
            Target::Pool(p) => p
                .pick()
                .ok_or_else(|| std::io::Error::other("no endpoint to send to")),
        }
    }
}

/// One worker's client: a connection to the service, kept or not.
struct Client {
    target: Target,
    keepalive: bool,
    conn: Option<BufReader<TcpStream>>,
}

fn io_failure(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".into(),
        ConnectionReset => "connection reset".into(),
        UnexpectedEof => "connection closed before the response".into(),
        TimedOut | WouldBlock => format!("no response within {} s", TIMEOUT.as_secs()),
        BrokenPipe => "broken pipe".into(),
        _ => e.to_string(),
    }
}

impl Client {
    fn connect(&self) -> std::io::Result<BufReader<TcpStream>> {
        let s = TcpStream::connect_timeout(&self.target.addr()?, TIMEOUT)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.set_write_timeout(Some(TIMEOUT))?;
        s.set_nodelay(true)?;
        Ok(BufReader::new(s))
    }

    /// One request; `Err(what went wrong)` if it failed.
    fn get(&mut self) -> Result<(), String> {
        let result = self.exchange();
        if !matches!(result, Ok((_, true))) {
            self.conn = None;
        }
        match result {
            Ok((200, _)) => Ok(()),
            Ok((status, _)) => Err(format!("HTTP {status}")),
            Err(e) => Err(io_failure(&e)),
        }
    }

    /// Sends the request and reads the response: its status, and whether
    /// the connection may carry another request.
    fn exchange(&mut self) -> std::io::Result<(u16, bool)> {
        let conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect()?,
        };
        let conn = self.conn.insert(conn);
        let close = if self.keepalive {
            ""
        } else {
            "Connection: close\r\n"
        };
        write!(conn.get_mut(), "GET / HTTP/1.1\r\nHost: service\r\n{close}\r\n")?;
        let r = graceful_test_support::http_response::read(conn)?;
        Ok((r.status, self.keepalive && r.reusable))
    }
}

/// The running load; [`Load::finish`] stops it and returns what it saw.
pub struct Load {
    running: Arc<AtomicBool>,
    /// Requests scheduled before this CLOCK_MONOTONIC time are warm-up.
    counting_from: Arc<AtomicU64>,
    scheduler: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<Outcome>>,
}

impl Load {
    /// Starts `rate` requests a second to `target`, from `ns`, with `workers`
    /// threads (enough to keep the schedule: rate × latency, with room).
    pub fn start(
        ns: &NetNs,
        target: impl Into<Target>,
        rate: u32,
        keepalive: bool,
        workers: usize,
    ) -> anyhow::Result<Load> {
        if rate == 0 {
            bail!("the request rate must be at least 1 a second");
        }
        let (tx, rx) = mpsc::channel::<u64>();
        let rx = Arc::new(Mutex::new(rx));
        let (ready_tx, ready_rx) = mpsc::channel::<std::io::Result<()>>();
        let ns_fd = ns.fd();
        let target = target.into();
        let mut load = Load {
            running: Arc::new(AtomicBool::new(true)),
            counting_from: Arc::new(AtomicU64::new(0)),
            scheduler: None,
            workers: Vec::new(),
        };
        for _ in 0..workers {
            let (rx, ready) = (rx.clone(), ready_tx.clone());
            let counting_from = load.counting_from.clone();
            let target = target.clone();
            load.workers.push(std::thread::spawn(move || {
                // SAFETY: setns(2) on this thread only; the fd is open
                // until `ready` is answered.
                if unsafe { libc::setns(ns_fd, libc::CLONE_NEWNET) } != 0 {
                    let _ = ready.send(Err(std::io::Error::last_os_error()));
                    return Outcome::default();
                }
                let _ = ready.send(Ok(()));
                let mut client = Client {
                    target,
                    keepalive,
                    conn: None,
                };
                let mut seen = Outcome::default();
                loop {
                    let next = rx.lock().unwrap().recv();
                    let Ok(scheduled_ns) = next else { return seen };
                    let result = client.get();
                    let took_us = monotonic_ns().saturating_sub(scheduled_ns) / 1000;
                    if scheduled_ns < counting_from.load(Ordering::SeqCst) {
                        seen.warmup_requests += 1;
                        if let Err(why) = result {
                            *seen.warmup_failures.entry(why).or_default() += 1;
                        }
                        continue;
                    }
                    seen.requests += 1;
                    match result {
                        Ok(()) => seen.latencies_us.push(took_us),
                        Err(why) => {
                            seen.failed += 1;
                            *seen.failures.entry(why).or_default() += 1;
                        }
                    }
                }
            }));
        }
        drop(ready_tx);
        for ready in ready_rx.iter().take(workers) {
            ready.context("load generator: cannot enter the node's network namespace")?;
        }
        let running = load.running.clone();
        let period_ns = 1_000_000_000 / rate as u64;
        load.scheduler = Some(std::thread::spawn(move || {
            let start = monotonic_ns();
            for k in 0u64.. {
                let at = start + k * period_ns;
                let now = monotonic_ns();
                if at > now {
                    std::thread::sleep(Duration::from_nanos(at - now));
                }
                if !running.load(Ordering::SeqCst) || tx.send(at).is_err() {
                    return;
                }
            }
        }));
        Ok(load)
    }

    /// Counts only the requests scheduled from now on: those before were the
    /// warm-up (reported apart, in [`Outcome::warmup_failures`]).
    pub fn count_from_now(&self) {
        self.counting_from.store(monotonic_ns(), Ordering::SeqCst);
    }

    /// Stops scheduling, lets the requests already scheduled finish, and
    /// returns the outcome with the latencies sorted.
    pub fn finish(mut self) -> Outcome {
        self.running.store(false, Ordering::SeqCst);
        if let Some(s) = self.scheduler.take() {
            let _ = s.join();
        }
        let mut all = Outcome::default();
        for w in self.workers.drain(..) {
            if let Ok(o) = w.join() {
                all.merge(o);
            }
        }
        all.latencies_us.sort_unstable();
        all
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
    }
}

/// Workers for `rate` requests a second of `latency` each: four times what
/// the schedule needs in flight, within 8 and 256.
pub fn workers_for(rate: u32, latency: Duration) -> usize {
    let in_flight = rate as f64 * (latency.as_secs_f64() + 0.01);
    ((in_flight * 4.0).ceil() as usize).clamp(8, 256)
}
