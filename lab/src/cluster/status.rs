//! `cluster status`: what runs, and whether the node and the agent are ready.

use super::{
    daemons::{self, ORDER},
    deploy::NAMESPACE,
    kubectl::Kubectl,
    node, Paths, NODE_NAME,
};

/// Prints one line per part; 0 if everything is up, 1 otherwise.
pub fn run(paths: &Paths) -> anyhow::Result<i32> {
    let line = |ok: bool, what: &str, detail: String| {
        println!("{:<10} {what:<26} {detail}", if ok { "running" } else { "down" });
        ok
    };
    let mut up = line(node::exists(), "network namespace", node::netns_path());
    for &name in ORDER {
        up &= match daemons::running(paths, name) {
            Some(pid) => line(true, name, format!("pid {pid}")),
            None => line(
                false,
                name,
                format!("no live process ({})", paths.pidfile(name).display()),
            ),
        };
    }
    if !up {
        println!("the cluster is not up: `cargo xtask cluster up` starts it");
        return Ok(1);
    }
    let k = Kubectl::new(&paths.kubeconfig());
    let ready = k.node_ready(NODE_NAME).unwrap_or_default();
    up &= line(
        ready.trim() == "True",
        "node",
        format!("{NODE_NAME} Ready={}", ready.trim()),
    );
    let ds = k
        .text(&[
            "-n",
            NAMESPACE,
            "get",
            "ds",
            "graceful",
            "-o",
            "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
        ])
        .unwrap_or_default();
    let agent_ok = ds.split_once('/').is_some_and(|(r, d)| r == d && r != "0");
    up &= line(
        agent_ok,
        "graceful DaemonSet",
        format!("{NAMESPACE}/graceful ready {ds}"),
    );
    println!("KUBECONFIG={}", paths.kubeconfig().display());
    Ok(if up { 0 } else { 1 })
}
