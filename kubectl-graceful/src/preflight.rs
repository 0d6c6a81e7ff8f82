//! `kubectl graceful preflight`: before an install, what would stop the
//! agent, in one line per node. First the cluster's part, by dry runs
//! against the API server: the namespace, whether admission takes the
//! agent's pod there (Pod Security, a quota that GKE needs for its
//! priority class, any policy), whether the API server keeps an image
//! volume (the socket gate's). Then on every node at once (bounded by
//! `--max-requests`) a pod like the agent's ([`pod`]) runs `graceful
//! doctor --json` and is deleted: the kernel and BTF, the bpffs and its
//! propagation, the LSMs and seccomp as the runtime applies them, cgroup
//! v2, the pod's address families, a trial load of the programs.
//!
//! The pods carry a run's label; an interrupted run deletes them as it
//! goes. Needs `create`, `get`, `delete` on pods and `get` on pods/log in
//! the namespace, `list` nodes and `get` namespaces.

mod nodes;
mod pod;
mod wait;

use graceful_api::views::doctor::{worst, Finding, Level};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    api::{DeleteParams, ListParams, PostParams},
    Api, Client,
};

use crate::{
    agents::said,
    args::{Cli, Output, Preflight as Args},
};

/// One node's answer.
struct NodeResult {
    node: String,
    findings: Vec<Finding>,
}

fn finding(level: Level, check: &str, message: impl Into<String>) -> Finding {
    Finding {
        level,
        check: check.to_string(),
        message: message.into(),
    }
}

pub async fn run(cli: &Cli, args: &Args, client: Client) -> anyhow::Result<i32> {
    let ns = cli.agent_namespace.as_str();
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000)
            .unwrap_or(0)
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut cluster = vec![namespace(&client, ns).await?];
    if cluster[0].level == Level::Fail {
        return Ok(report(cli, &cluster, &[]));
    }
    let Some(class) = admission(&pods, ns, &run, args, &mut cluster).await else {
        return Ok(report(cli, &cluster, &[]));
    };
    image_volumes(&pods, ns, &run, &args.image, &mut cluster).await;
    let targets = nodes::list(&client, cli.node.as_deref()).await?;
    let results = check_nodes(cli, args, &pods, &run, &class, targets).await?;
    Ok(report(cli, &cluster, &results))
}

/// The namespace's line: there, and its Pod Security level.
async fn namespace(client: &Client, ns: &str) -> anyhow::Result<Finding> {
    match Api::<Namespace>::all(client.clone()).get_opt(ns).await {
        Ok(Some(n)) => {
            let enforce = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-security.kubernetes.io/enforce"))
                .map_or("unset", String::as_str)
                .to_string();
            Ok(finding(
                Level::Ok,
                "namespace",
                format!("{ns} exists (Pod Security enforce: {enforce})"),
            ))
        }
        Ok(None) => Ok(finding(
            Level::Fail,
            "namespace",
            format!(
                "{ns} does not exist: create it (helm install --create-namespace, or deploy/base's \
                 namespace.yaml) and run the preflight again, or name another with --agent-namespace"
            ),
        )),
        Err(e) => anyhow::bail!(
            "cannot read namespace {ns}: {} (needs `get` on namespaces)",
            said(&e)
        ),
    }
}

/// Every node's pod, at most `--max-requests` at once; on Ctrl-C, this
/// run's pods are deleted and the run ends.
async fn check_nodes(
    cli: &Cli,
    args: &Args,
    pods: &Api<Pod>,
    run: &str,
    class: &str,
    targets: Vec<nodes::Target>,
) -> anyhow::Result<Vec<NodeResult>> {
    let mut tasks = tokio::task::JoinSet::new();
    let turns = std::sync::Arc::new(tokio::sync::Semaphore::new(cli.max_requests.into()));
    let timeout = std::time::Duration::from_secs(args.timeout);
    for (i, target) in targets.iter().enumerate() {
        if target.skip.is_some() {
            continue;
        }
        let (pods, turns) = (pods.clone(), turns.clone());
        let p = pod::pod(&pod::Spec {
            namespace: &cli.agent_namespace,
            run,
            image: &args.image,
            priority_class: class,
            node: Some(&target.name),
        });
        tasks.spawn(async move {
            let _turn = turns.acquire_owned().await;
            (i, wait::doctor(&pods, p, timeout).await)
        });
    }
    let mut answers: Vec<Option<Result<Vec<Finding>, String>>> =
        targets.iter().map(|t| t.skip.clone().map(Err)).collect();
    let interrupted = tokio::select! {
        () = async {
            while let Some(Ok((i, got))) = tasks.join_next().await {
                answers[i] = Some(got);
            }
        } => false,
        _ = tokio::signal::ctrl_c() => true,
    };
    if interrupted {
        tasks.abort_all();
        let lp = ListParams::default().labels(&format!("{}={run}", pod::RUN_LABEL));
        let _ = pods.delete_collection(&DeleteParams::default(), &lp).await;
        anyhow::bail!(
            "interrupted: this run's pods (labelled {}={run}) deleted",
            pod::RUN_LABEL
        );
    }
    Ok(targets
        .into_iter()
        .zip(answers)
        .map(|(t, got)| {
            let mut findings = match got.unwrap_or_else(|| Err("no answer".into())) {
                Ok(f) => f,
                Err(e) => vec![finding(Level::Fail, "pod", e)],
            };
            findings.extend(t.findings);
            NodeResult {
                node: t.name,
                findings,
            }
        })
        .collect())
}

/// A dry run of the agent's pod: admitted, or one line with the API
/// server's reason. When it is the priority class that admission refuses
/// (a quota that admits it is missing, as on GKE), the nodes are still
/// checked without it. The class the nodes' pods carry, or `None` when no
/// pod like the agent's is admitted at all.
async fn admission(
    pods: &Api<Pod>,
    ns: &str,
    run: &str,
    args: &Args,
    cluster: &mut Vec<Finding>,
) -> Option<String> {
    let dry = PostParams {
        dry_run: true,
        field_manager: Some("kubectl-graceful".into()),
    };
    let with = |class: &str| {
        pod::pod(&pod::Spec {
            namespace: ns,
            run,
            image: &args.image,
            priority_class: class,
            node: None,
        })
    };
    let refused = match pods.create(&dry, &with(&args.priority_class)).await {
        Ok(_) => {
            cluster.push(finding(
                Level::Ok,
                "admission",
                format!(
                    "the API server admits the agent's pod in {ns} (a dry run: priority class {}, hostPID, \
                     host mounts, five capabilities)",
                    args.priority_class
                ),
            ));
            return Some(args.priority_class.clone());
        }
        Err(e) => said(&e),
    };
    let hint = if refused.contains("quota") {
        format!(
            ": a ResourceQuota in {ns} must admit priority class {} (GKE admits it nowhere else): the \
             chart makes one (resourceQuota.enabled, the default), deploy/base has resourcequota.yaml; \
             the nodes are checked without the class",
            args.priority_class
        )
    } else if refused.contains("PodSecurity") {
        format!(": label {ns} pod-security.kubernetes.io/enforce=privileged (the agent's pod needs hostPID and host mounts)")
    } else {
        String::new()
    };
    cluster.push(finding(
        Level::Fail,
        "admission",
        format!("the API server refuses the agent's pod in {ns}: {refused}{hint}"),
    ));
    if args.priority_class.is_empty() || pods.create(&dry, &with("")).await.is_err() {
        return None;
    }
    Some(String::new())
}

/// Whether the API server keeps an image volume (dropped where its
/// ImageVolume gate is off), by a dry run.
async fn image_volumes(pods: &Api<Pod>, ns: &str, run: &str, image: &str, cluster: &mut Vec<Finding>) {
    let dry = PostParams {
        dry_run: true,
        field_manager: Some("kubectl-graceful".into()),
    };
    let got = pods.create(&dry, &pod::image_volume_pod(ns, run, image)).await;
    let kept = got.as_ref().ok().is_some_and(|p| {
        p.spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.image.is_some()))
    });
    cluster.push(match (got, kept) {
        (_, true) => finding(
            Level::Ok,
            "image-volume",
            "the API server keeps an image volume (the socket gate's /graceful)",
        ),
        (Ok(_), false) => finding(
            Level::Warn,
            "image-volume",
            "the API server drops image volumes (its ImageVolume gate is off): the socket gate cannot \
             mount graceful-wait; the exec gate (a hostPath) and the httpGet gate work",
        ),
        (Err(e), _) => finding(
            Level::Warn,
            "image-volume",
            format!(
                "a pod with an image volume is refused ({}): the socket gate cannot mount graceful-wait",
                said(&e)
            ),
        ),
    });
}

/// One node's line: what stops the agent (every FAIL), else what to
/// look at (every warning), else the kernel it found.
fn node_line(r: &NodeResult) -> [String; 3] {
    let of = |level: Level| -> Vec<String> {
        r.findings
            .iter()
            .filter(|f| f.level == level)
            .map(|f| format!("{}: {}", f.check, f.message))
            .collect()
    };
    let (verdict, detail) = match worst(&r.findings) {
        Level::Fail => ("FAIL", of(Level::Fail).join("; ")),
        Level::Warn => ("ready, with warnings", of(Level::Warn).join("; ")),
        Level::Ok => (
            "ready",
            r.findings
                .iter()
                .find(|f| f.check == "kernel")
                .map(|f| format!("kernel {}", f.message))
                .unwrap_or_default(),
        ),
    };
    [r.node.clone(), verdict.to_string(), detail]
}

/// Prints the cluster's lines and a line per node (or one JSON object);
/// the exit status: 1 if anything fails.
fn report(cli: &Cli, cluster: &[Finding], nodes: &[NodeResult]) -> i32 {
    let failed = worst(cluster) == Level::Fail || nodes.iter().any(|n| worst(&n.findings) == Level::Fail);
    if cli.output == Output::Json {
        let nodes: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| serde_json::json!({"node": n.node, "ready": worst(&n.findings) != Level::Fail, "findings": n.findings}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"cluster": cluster, "nodes": nodes}))
                .unwrap_or_default()
        );
        return i32::from(failed);
    }
    for f in cluster {
        println!("{}", f.line());
    }
    if !nodes.is_empty() {
        let mut rows = vec![["NODE".to_string(), "VERDICT".to_string(), "DETAIL".to_string()]];
        rows.extend(nodes.iter().map(node_line));
        let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
        println!();
        print!("{}", graceful_api::views::table::table(&rows));
    }
    i32::from(failed)
}

#[cfg(test)]
mod tests;
