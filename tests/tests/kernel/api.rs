//! The daemon's local API end to end: every endpoint and `/metrics`,
//! against real connections (checked with `ss`) and a real drain through
//! the gate, on both the TCP address and the unix socket.

use std::{
    io::{Read, Write},
    net::TcpStream,
    sync::{Arc, Mutex},
    time::Duration,
};

use graceful_tests::{
    agent::{graceful, Agent},
    gate::{finish, hook, pod_holding},
    oracle,
};
use serde_json::Value;

use crate::require_root;

/// One request on the TCP address; (status, content type, body).
fn http(agent: &Agent, method: &str, path: &str) -> (u16, String, String) {
    http_at(agent.api_addr(), method, path)
}

fn http_at(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    request(addr, method, path, "")
}

/// One request with `headers` (each ending in CRLF).
fn request(addr: std::net::SocketAddr, method: &str, path: &str, headers: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_string();
    (status, ctype, body.to_string())
}

fn get_json(agent: &Agent, path: &str) -> Value {
    let (status, ctype, body) = http(agent, "GET", path);
    assert_eq!(
        (status, ctype.as_str()),
        (200, "application/json"),
        "{path}: {body}"
    );
    assert!(body.ends_with('\n') && body.lines().count() == 1, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Prometheus 2's Accept header for a scrape.
const OPENMETRICS_ACCEPT: &str = "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n";

/// A scrape as Prometheus asks for it: OpenMetrics.
fn metrics(agent: &Agent) -> String {
    let (status, ctype, body) = request(agent.api_addr(), "GET", "/metrics", OPENMETRICS_ACCEPT);
    assert_eq!(status, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    body
}

/// The value of the series `name{labels}` exactly as it is printed.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn pod_of<'a>(pods: &'a Value, uid: &str) -> &'a Value {
    pods.as_array()
        .unwrap()
        .iter()
        .find(|p| p["uid"] == uid)
        .unwrap_or_else(|| panic!("pod {uid} not in {pods}"))
}

#[test]
fn every_endpoint_answers_with_real_counts_and_a_real_drain() {
    require_root!();
    let mut agent = Agent::with_gate();
    agent
        .daemon_args
        .extend(["--standalone", "--metrics-addr", ":0"].map(String::from));
    agent.start();
    let (pod, _lb, mut app, _clients) = pod_holding(4);
    let app_path = pod.container(0).path().to_string();
    assert_eq!(oracle::view(None, &app_path).inbound_live, 4);

    // Health and readiness.
    let (status, _, body) = http(&agent, "GET", "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let ready = get_json(&agent, "/readyz");
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["programs"], "attached");
    assert_eq!(ready["kube_api"], "standalone");

    // Pods, counted as ss counts them.
    let pods = get_json(&agent, "/v1/pods");
    let p = pod_of(&pods, &pod.uid);
    assert_eq!(p["inbound_live"], 4, "{p}");
    assert_eq!(p["listeners"], 1);
    assert_eq!(p["state"], "Running");
    assert_eq!(p["containers"][0]["inbound_live"], 4);
    let one = get_json(&agent, &format!("/v1/pods/{}", &pod.uid[..13]));
    assert_eq!(one["uid"], pod.uid.as_str());
    assert_eq!(one["inbound_live"], 4);

    // Metrics before the drain: the pod's gauges (labelled by uid while
    // unnamed) and the kernel's own figures.
    let m = metrics(&agent);
    let inbound = format!(
        "graceful_pod_inbound_connections{{namespace=\"\",pod=\"{}\"}}",
        pod.uid
    );
    assert_eq!(sample(&m, &inbound), Some(4.0), "{m}");
    assert!(sample(&m, "graceful_kernel_events_total").unwrap() >= 8.0, "{m}");
    assert_eq!(sample(&m, "graceful_drains_active"), Some(0.0));
    assert_eq!(sample(&m, "graceful_kube_api_connected"), Some(0.0));
    assert_eq!(
        sample(&m, "graceful_map_capacity{map=\"counters\"}"),
        Some(graceful_common::MAX_CGROUPS as f64)
    );
    assert!(
        m.contains("# TYPE graceful_drain_duration_seconds histogram"),
        "{m}"
    );
    let build = m
        .lines()
        .find(|l| l.starts_with("graceful_build_info{"))
        .unwrap_or_else(|| panic!("no graceful_build_info: {m}"));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for label in [
        format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
        format!("kernel=\"{}\"", release.trim()),
    ] {
        assert!(build.contains(&label), "{label} not in {build}");
    }
    assert!(
        build.ends_with("} 1") && !build.contains("commit=\"\""),
        "{build}"
    );
    assert!(
        build.contains("counting=\"sock-ops\"") || build.contains("counting=\"tracepoint\""),
        "{build}"
    );
    // Base units only: seconds, not milliseconds.
    assert!(sample(&m, "graceful_adoption_duration_seconds").is_some(), "{m}");
    assert!(!m.contains("milliseconds"), "{m}");

    // A scrape that does not ask for OpenMetrics gets the Prometheus text
    // format (promtool reads it: `a_plain_scrape_passes_promtool`).
    let (status, ctype, plain) = http(&agent, "GET", "/metrics");
    assert_eq!(
        (status, ctype.as_str()),
        (200, "text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(plain.contains(&format!("{inbound} 4\n")), "{plain}");
    assert!(plain.contains("# TYPE graceful_drains_total counter"), "{plain}");

    // The metrics address: metrics and probes, and nothing that names a
    // pod or a drain (pods' series only with `--metrics-pods on`: the
    // `monitoring` cluster test turns it on).
    // `:PORT`, as the DaemonSet writes it: one socket on every address,
    // IPv6 and IPv4, so the probes reach it whatever the pod's family.
    let public = agent.metrics_addr();
    assert_eq!(public.ip(), std::net::Ipv6Addr::UNSPECIFIED, "{public}");
    for lo in [
        std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::Ipv6Addr::LOCALHOST.into(),
    ] {
        let at = std::net::SocketAddr::new(lo, public.port());
        assert_eq!(http_at(at, "GET", "/healthz").0, 200, "{at}");
    }
    let (status, ctype, body) = request(public, "GET", "/metrics", OPENMETRICS_ACCEPT);
    assert_eq!(status, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.contains("graceful_build_info"), "{body}");
    assert!(!body.contains(&pod.uid), "{body}");
    assert_eq!(http_at(public, "GET", "/healthz").0, 200);
    assert_eq!(http_at(public, "GET", "/readyz").0, 200);
    for path in [
        "/v1/pods",
        "/v1/drains",
        "/v1/events",
        &format!("/v1/pods/{}", pod.uid),
    ] {
        let (status, _, body) = http_at(public, "GET", path);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            body.contains("--api-addr") && !body.contains(&pod.uid),
            "{path}: {body}"
        );
    }

    // The event stream, read on the unix socket as the CLI reads it.
    let lines = Arc::new(Mutex::new(Vec::<Value>::new()));
    let stream = {
        let lines = lines.clone();
        let sock = agent.api_sock();
        std::thread::spawn(move || {
            let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
            let mut r = graceful_api::client::get(s, "/v1/events", Some(Duration::from_secs(20))).unwrap();
            assert_eq!(r.status, 200);
            while let Ok(Some(l)) = r.next_line() {
                let v: Value = serde_json::from_str(&l).unwrap();
                let done = v["type"] == "drain_released";
                lines.lock().unwrap().push(v);
                if done {
                    return;
                }
            }
        })
    };

    // Subscribed once its first snapshot came: what happens next is seen.
    graceful_tests::wait_for(10, "the stream's first line", || {
        (!lines.lock().unwrap().is_empty()).then_some(())
    });

    // A drain: held while the connections are open.
    let child = hook(
        &agent,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "20s"],
    );
    let active = graceful_tests::wait_for(10, "the drain to show", || {
        let d = get_json(&agent, "/v1/drains");
        (d["active"].as_array().unwrap().len() == 1).then_some(d)
    });
    assert_eq!(active["active"][0]["pod"], pod.uid.as_str(), "{active}");
    assert_eq!(active["active"][0]["policy"], "drained");
    assert_eq!(
        pod_of(&get_json(&agent, "/v1/pods"), &pod.uid)["state"],
        "Draining"
    );
    assert_eq!(sample(&metrics(&agent), "graceful_drains_active"), Some(1.0));
    let cli = graceful(&agent.pin_dir, &["drains"]);
    let cli = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.starts_with("HOLDING (1)\n") && cli.contains(&pod.uid),
        "{cli}"
    );

    app.cmd("close-in 4 fin");
    let (report, out) = finish(child);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(oracle::view(None, &app_path).inbound_live, 0);

    // After: released, counted, timed.
    let d = get_json(&agent, "/v1/drains");
    assert!(d["active"].as_array().unwrap().is_empty(), "{d}");
    let released = d["released"].as_array().unwrap().last().unwrap();
    assert_eq!(released["pod"], pod.uid.as_str());
    assert_eq!(released["reason"], "drained");
    assert_eq!(released["inbound_at_start"], 4);
    assert_eq!(released["waited_ms"], report["waited_ms"]);
    let m = metrics(&agent);
    assert_eq!(
        sample(&m, "graceful_drains_total{outcome=\"drained\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "graceful_drain_duration_seconds_count{reason=\"drained\"}"),
        Some(1.0)
    );
    let secs = sample(&m, "graceful_drain_duration_seconds_sum{reason=\"drained\"}").unwrap();
    assert!((secs * 1000.0 - report["waited_ms"].as_f64().unwrap()).abs() < 1.0);
    assert_eq!(sample(&m, &inbound), Some(0.0));
    assert_eq!(sample(&m, "graceful_drains_active"), Some(0.0));
    assert_eq!(
        pod_of(&get_json(&agent, "/v1/pods"), &pod.uid)["state"],
        "Running"
    );

    // The stream saw the pod with its 4 connections, the drain start and its release.
    stream.join().unwrap();
    let lines = lines.lock().unwrap();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "pods", "{kinds:?}");
    assert_eq!(pod_of(&lines[0]["pods"], &pod.uid)["inbound_live"], 4);
    let started = kinds
        .iter()
        .position(|k| *k == "drain_started")
        .expect("drain_started");
    let released_at = kinds.iter().position(|k| *k == "drain_released").unwrap();
    assert!(started < released_at, "{kinds:?}");
    assert_eq!(lines[released_at]["reason"], "drained");
    assert_eq!(lines[released_at]["pod"], pod.uid.as_str());

    // Bad requests: one line each, and the API keeps answering.
    for (method, path, code, says) in [
        ("POST", "/v1/pods", 405, "read-only"),
        ("DELETE", "/metrics", 405, "read-only"),
        ("GET", "/v1/nope", 404, "no such endpoint /v1/nope"),
        ("GET", "/v1/pods/ffffffff-ffff", 404, "no pod with uid"),
    ] {
        let (status, _, body) = http(&agent, method, path);
        assert_eq!(status, code, "{method} {path}: {body}");
        let e: Value = serde_json::from_str(&body).unwrap();
        assert!(e["error"].as_str().unwrap().contains(says), "{body}");
        assert_eq!(body.lines().count(), 1);
    }
    let mut garbage = TcpStream::connect(agent.api_addr()).unwrap();
    garbage.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
    drop(garbage);
    assert_eq!(get_json(&agent, "/readyz")["ready"], true);
}

/// Prometheus's own linter (Debian's promtool, which setup unpacks) finds
/// nothing in a live scrape of an agent counting a pod's connections. The
/// qemu guests have no promtool: they leave this test out by name (the
/// host run has it).
#[test]
fn a_plain_scrape_passes_promtool() {
    require_root!();
    let mut agent = Agent::with_gate();
    agent.daemon_args.push("--standalone".into());
    agent.start();
    let (pod, _lb, _app, _clients) = pod_holding(2);
    let series = format!(
        "graceful_pod_inbound_connections{{namespace=\"\",pod=\"{}\"}} 2\n",
        pod.uid
    );
    let plain = graceful_tests::wait_for(10, "the pod's series", || {
        let (_, _, plain) = http(&agent, "GET", "/metrics");
        plain.contains(&series).then_some(plain)
    });
    let found = graceful_tests::promtool::check_metrics(&plain);
    assert!(found.trim().is_empty(), "promtool check metrics: {found}");
}
