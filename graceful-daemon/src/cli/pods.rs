//! `graceful pods` and `graceful pod`: live connections per pod and per
//! container.
//!
//! The daemon does not serve an API yet, so these always take the fallback
//! the CLI contract describes for a daemon that is not running: counts from
//! the pinned maps, pods from one walk of the cgroup tree. Pods are shown
//! by uid then, since names come from the Kubernetes API; a one-line note on
//! stderr says so. `--watch` reprints every second for now; it will follow
//! the daemon's event stream once there is one.

use std::{io::IsTerminal, time::Duration};

use crate::{
    bpf::{counters, paths::PinDir},
    cgroupfs::Hierarchy,
    resolver::{
        counts::{views, Live, PodView},
        index::PodIndex,
        path::canonical_uid,
    },
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// NAMESPACE, POD, CONTAINERS, INBOUND, OUTBOUND, LISTEN, STATE.
    #[default]
    Table,
    /// The table with the uid, QoS class and pod cgroup.
    Wide,
    /// A stable contract for scripts.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Only pods of this namespace (needs the names from the Kubernetes API).
    #[arg(short, long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Pods of every namespace. This is the default: the agent shows the
    /// whole node; the flag is accepted as kubectl users type it.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Print again every second (JSON: one array per line) until interrupted.
    #[arg(short, long)]
    pub watch: bool,
}

#[derive(Debug, clap::Args)]
pub struct PodArgs {
    /// The pod: its uid (a unique prefix will do; `_` for `-` as in cgroup
    /// names is fine), or namespace/name once names are known.
    pub pod: String,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

const NOTE: &str = "graceful: pod names are unavailable (they need the daemon's Kubernetes API watch): showing pod uids, with counts from the pinned maps and the cgroup tree";

/// Every pod on the node with its counts, in namespace, name, uid order.
fn snapshot(pins: &PinDir, hier: &Hierarchy) -> anyhow::Result<Vec<PodView>> {
    let counters = counters::read_all(pins)?;
    let index = PodIndex::build(hier);
    let mut pods = views(&index, &counters);
    // Unnamed pods last, by uid.
    pods.sort_by(|a, b| {
        (a.namespace.is_none(), &a.namespace, &a.name, &a.uid).cmp(&(
            b.namespace.is_none(),
            &b.namespace,
            &b.name,
            &b.uid,
        ))
    });
    Ok(pods)
}

pub fn run_pods(pins: &PinDir, args: PodsArgs) -> anyhow::Result<i32> {
    super::require_root("graceful pods")?;
    let hier = Hierarchy::discover()?;
    let mut noted = false;
    loop {
        let mut pods = snapshot(pins, &hier)?;
        if !std::mem::replace(&mut noted, true) {
            eprintln!("{NOTE}");
        }
        if let Some(ns) = &args.namespace {
            pods.retain(|p| p.namespace.as_deref() == Some(ns.as_str()));
        }
        let text = match args.output {
            Output::Json if args.watch => serde_json::to_string(&pods)?,
            Output::Json => serde_json::to_string_pretty(&pods)?,
            Output::Table | Output::Wide => pods_table(&pods, args.output == Output::Wide),
        };
        if !args.watch {
            println!("{text}");
            return Ok(0);
        }
        if args.output == Output::Json {
            println!("{text}");
        } else if std::io::stdout().is_terminal() {
            // Home and clear: a refreshing screen, as `watch` gives.
            println!("\x1b[H\x1b[2J{text}");
        } else {
            println!("{text}\n");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

pub fn run_pod(pins: &PinDir, args: PodArgs) -> anyhow::Result<i32> {
    super::require_root("graceful pod")?;
    let hier = Hierarchy::discover()?;
    let pods = snapshot(pins, &hier)?;
    eprintln!("{NOTE}");
    let pod = find(&pods, &args.pod)?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(pod)?),
        Output::Table | Output::Wide => print!("{}", pod_detail(pod)),
    }
    Ok(0)
}

/// The pod `want` names: a uid, a unique uid prefix, or namespace/name.
fn find<'a>(pods: &'a [PodView], want: &str) -> anyhow::Result<&'a PodView> {
    if let Some((ns, name)) = want.split_once('/') {
        return pods
            .iter()
            .find(|p| p.namespace.as_deref() == Some(ns) && p.name.as_deref() == Some(name))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no pod {want} on this node (names need the Kubernetes API: give the pod's uid instead)"
                )
            });
    }
    let want = canonical_uid(want).unwrap_or_else(|| want.to_ascii_lowercase().replace('_', "-"));
    let matches: Vec<_> = pods.iter().filter(|p| p.uid.starts_with(&want)).collect();
    match matches[..] {
        [one] => Ok(one),
        [] => anyhow::bail!(
            "no pod with uid {want} on this node ({} pods: see `graceful pods`)",
            pods.len()
        ),
        _ if want.is_empty() => anyhow::bail!("give a pod uid or namespace/name"),
        _ => anyhow::bail!(
            "{} pods have a uid starting with {want}: give more of it",
            matches.len()
        ),
    }
}

/// Counts as signed: a sum read from several map entries at slightly
/// different times can be transiently low, and -1 reads better than 2^64-1.
fn n(v: u64) -> String {
    (v as i64).to_string()
}

fn dash(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".into())
}

/// Left-aligned columns, three spaces apart, as kubectl prints them.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 < cols {
                line.push_str(&format!("{cell:<w$}   ", w = width[c]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.pop();
    out
}

fn pods_table(pods: &[PodView], wide: bool) -> String {
    let mut head = vec!["NAMESPACE", "POD"];
    if wide {
        head.extend(["UID", "QOS"]);
    }
    head.extend(["CONTAINERS", "INBOUND", "OUTBOUND", "LISTEN", "STATE"]);
    if wide {
        head.extend(["CGROUP", "PATH"]);
    }
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for p in pods {
        let mut r = vec![
            dash(&p.namespace),
            p.name.clone().unwrap_or_else(|| p.uid.clone()),
        ];
        if wide {
            r.extend([p.uid.clone(), p.qos.to_string()]);
        }
        r.extend([
            p.containers.len().to_string(),
            n(p.live.inbound_live),
            n(p.live.outbound_live),
            n(p.live.listeners),
            p.state.as_str().to_string(),
        ]);
        if wide {
            r.extend([p.cgroup_id.map_or("-".into(), |c| c.to_string()), dash(&p.path)]);
        }
        rows.push(r);
    }
    table(&rows)
}

/// `graceful pod`: the pod, then container by container. The `(pod)` row
/// is what no container holds: the pod cgroup itself (a pause process or
/// anything placed directly in it) and pod overhead such as CRI-O's conmon.
fn pod_detail(p: &PodView) -> String {
    let mut out = String::new();
    let l = p.live;
    for (k, v) in [
        ("UID", p.uid.clone()),
        ("Namespace", dash(&p.namespace)),
        ("Name", dash(&p.name)),
        ("QoS", p.qos.to_string()),
        ("State", p.state.as_str().into()),
        (
            "Cgroup",
            format!(
                "{} {}",
                p.cgroup_id.map_or("-".into(), |c| c.to_string()),
                dash(&p.path)
            ),
        ),
        (
            "Connections",
            format!(
                "{} inbound, {} outbound, {} listening",
                n(l.inbound_live),
                n(l.outbound_live),
                n(l.listeners)
            ),
        ),
    ] {
        out.push_str(&format!("{:<13}{v}\n", format!("{k}:")));
    }
    out.push('\n');
    let head = [
        "CONTAINER",
        "NAME",
        "RUNTIME",
        "CGROUP",
        "INBOUND",
        "OUTBOUND",
        "LISTEN",
        "PATH",
    ];
    let mut rows = vec![head.map(String::from).to_vec()];
    let row = |id: String, name: String, rt: String, cg: String, l: Live, path: String| {
        vec![
            id,
            name,
            rt,
            cg,
            n(l.inbound_live),
            n(l.outbound_live),
            n(l.listeners),
            path,
        ]
    };
    if p.cgroup_id.is_some() || p.outside_containers() != Live::default() {
        rows.push(row(
            "(pod)".into(),
            "-".into(),
            "-".into(),
            p.cgroup_id.map_or("-".into(), |c| c.to_string()),
            p.outside_containers(),
            dash(&p.path),
        ));
    }
    for c in &p.containers {
        rows.push(row(
            c.id.chars().take(12).collect(),
            dash(&c.name),
            c.runtime.to_string(),
            c.cgroup_id.to_string(),
            c.live,
            c.path.clone(),
        ));
    }
    out.push_str(&table(&rows));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{
        counts::{ContainerView, PodState},
        path::{Driver, QosClass, Runtime},
    };

    fn pod(uid: &str) -> PodView {
        PodView {
            uid: uid.into(),
            namespace: None,
            name: None,
            qos: QosClass::Burstable,
            state: PodState::Running,
            live: Live {
                inbound_live: 5,
                outbound_live: 0,
                listeners: 2,
            },
            containers: vec![ContainerView {
                id: "a".repeat(64),
                name: None,
                runtime: Runtime::Containerd,
                cgroup_id: 11,
                path: "/k/p/c".into(),
                live: Live {
                    inbound_live: 3,
                    outbound_live: 0,
                    listeners: 1,
                },
            }],
            driver: Driver::Systemd,
            cgroup_id: Some(10),
            path: Some("/k/p".into()),
        }
    }

    #[test]
    fn tables_show_uids_while_names_are_unknown() {
        let u = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";
        let t = pods_table(&[pod(u)], false);
        let lines: Vec<_> = t.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "NAMESPACE   POD{}   CONTAINERS   INBOUND   OUTBOUND   LISTEN   STATE",
                " ".repeat(33)
            )
        );
        assert_eq!(
            lines[1],
            format!("-           {u}   1            5         0          2        Running")
        );
        assert!(pods_table(&[pod(u)], true)
            .lines()
            .next()
            .unwrap()
            .ends_with("STATE     CGROUP   PATH"));
        let d = pod_detail(&pod(u));
        assert!(
            d.contains("Connections: 5 inbound, 0 outbound, 2 listening"),
            "{d}"
        );
        // The pod row is what the containers do not hold.
        let words = |first: &str| -> Vec<String> {
            let line = d.lines().find(|l| l.starts_with(first)).unwrap();
            line.split_whitespace().map(String::from).collect()
        };
        assert_eq!(words("(pod)"), ["(pod)", "-", "-", "10", "2", "0", "1", "/k/p"]);
        assert_eq!(
            words("aaaa"),
            ["aaaaaaaaaaaa", "-", "containerd", "11", "3", "0", "1", "/k/p/c"]
        );
    }

    #[test]
    fn pods_are_found_by_uid_prefix_or_cgroup_spelling() {
        let pods = [
            pod("a3ae0dbd-38d5-48fe-808c-a4d5dada806d"),
            pod("a3af0dbd-38d5-48fe-808c-a4d5dada806d"),
        ];
        assert_eq!(find(&pods, "a3ae").unwrap().uid, pods[0].uid);
        assert_eq!(
            find(&pods, "A3AE0DBD_38d5_48fe_808c_a4d5dada806d").unwrap().uid,
            pods[0].uid
        );
        assert!(find(&pods, "a3a").unwrap_err().to_string().contains("2 pods"));
        assert!(find(&pods, "ffff").is_err());
        assert!(find(&pods, "").is_err());
        assert!(find(&pods, "shop/web-0").unwrap_err().to_string().contains("uid"));
    }
}
