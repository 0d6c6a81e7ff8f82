//! Asks every agent at once, and shows the answers: as `graceful`'s own
//! tables (pods in one table with a NODE column; drains, cgroups and the
//! doctor node by node) or as one JSON array. An agent that cannot be
//! asked is one line on stderr, and the others are shown; the exit status
//! is then 1.

use graceful_api::views::{
    at_risk,
    cgroups::{self, Row},
    doctor::{verdict, Finding},
    drains,
    pods::{self, sort_pods, PodView},
    recommend,
    table::table,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    config::{KubeConfigOptions, Kubeconfig},
    Api, Client, Config,
};
use serde_json::Value;

use crate::{
    agents::{self, Agent},
    args::{Cli, Command, Output},
    events::{self, Where},
    forward,
};

pub async fn client(cli: &Cli) -> anyhow::Result<Client> {
    let opts = KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &opts).await?
        }
        None if cli.context.is_some() => Config::from_kubeconfig(&opts).await?,
        None => Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Each agent and its answer (or why there is none), in node order.
async fn ask(cli: &Cli) -> anyhow::Result<Vec<(Agent, Result<Value, String>)>> {
    let pods: Api<Pod> = Api::namespaced(client(cli).await?, &cli.agent_namespace);
    let agents = agents::list(&pods, &cli.agent_namespace, cli.node.as_deref()).await?;
    let Some(path) = cli.command.path() else {
        anyhow::bail!("{:?} is not asked of an agent", cli.command);
    };
    let mut tasks = tokio::task::JoinSet::new();
    let turns = std::sync::Arc::new(tokio::sync::Semaphore::new(cli.max_requests.into()));
    for (i, a) in agents.iter().enumerate() {
        if a.unavailable.is_some() {
            continue;
        }
        let to = forward::Target {
            namespace: cli.agent_namespace.clone(),
            pod: a.pod.clone(),
            port: a.api_port,
        };
        let (pods, turns) = (pods.clone(), turns.clone());
        tasks.spawn(async move {
            let _turn = turns.acquire_owned().await;
            let got = forward::get(&pods, &to, path).await.and_then(|b| {
                serde_json::from_slice::<Value>(&b)
                    .map_err(|e| format!("{}/{}: not JSON: {e}", to.namespace, to.pod))
            });
            (i, got)
        });
    }
    let mut answers: Vec<Option<Result<Value, String>>> = agents
        .iter()
        .map(|a| {
            a.unavailable
                .as_ref()
                .map(|why| Err(format!("{}/{}: {why}", cli.agent_namespace, a.pod)))
        })
        .collect();
    while let Some(done) = tasks.join_next().await {
        let (i, got) = done?;
        answers[i] = Some(got);
    }
    Ok(agents
        .into_iter()
        .zip(answers)
        .map(|(a, got)| (a, got.unwrap_or_else(|| Err("no answer".into()))))
        .collect())
}

pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Preflight(args) => return crate::preflight::run(&cli, args, client(&cli).await?).await,
        Command::Adopt(args) => return crate::adopt::run(&cli, args, client(&cli).await?).await,
        Command::History {
            namespace,
            all_namespaces,
        } => return from_events(&cli, namespace.as_deref(), *all_namespaces, View::History).await,
        Command::AtRisk {
            namespace,
            events: true,
            all_namespaces,
        } => return from_events(&cli, namespace.as_deref(), *all_namespaces, View::AtRisk).await,
        Command::Recommend {
            namespace,
            all_namespaces,
            budget,
        } => {
            let view = View::Recommend(budget.as_millis() as u64);
            return from_events(&cli, namespace.as_deref(), *all_namespaces, view).await;
        }
        _ => {}
    }
    let answers = ask(&cli).await?;
    let mut code = 0;
    for (a, got) in &answers {
        if let Err(e) = got {
            eprintln!("kubectl graceful: node {}: {e}", a.node);
            code = 1;
        }
    }
    let ok: Vec<(&Agent, &Value)> = answers
        .iter()
        .filter_map(|(a, got)| got.as_ref().ok().map(|v| (a, v)))
        .collect();
    if cli.output == Output::Json {
        let all: Vec<Value> = answers
            .iter()
            .map(|(a, got)| match got {
                Ok(v) => serde_json::json!({"node": a.node, "agent": a.pod, "answer": filtered(&cli.command, v.clone())}),
                Err(e) => serde_json::json!({"node": a.node, "agent": a.pod, "error": e}),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(code.max(doctor_failed(&cli.command, &ok)));
    }
    match &cli.command {
        Command::Pods { .. } => print!("{}", pods_table(&cli, &ok)?),
        Command::Drains => {
            for (a, v) in &ok {
                // One agent whose answer does not read (a newer agent's
                // release reason, say) is its own line; the rest print.
                match serde_json::from_value::<drains::Drains>((*v).clone()) {
                    Ok(d) => {
                        println!("NODE {} ({})", a.node, a.pod);
                        println!("{}", drains::render(&d));
                    }
                    Err(e) => {
                        eprintln!(
                            "kubectl graceful: node {}: {}/{}: {e} (`-o json` shows the answer as sent)",
                            a.node, cli.agent_namespace, a.pod
                        );
                        code = 1;
                    }
                }
            }
        }
        Command::AtRisk { namespace, .. } => {
            code = code.max(at_risk_of_agents(&cli, &ok, namespace.as_deref()))
        }
        Command::Cgroups { .. } => {
            for (a, v) in &ok {
                let rows: Vec<Row> = serde_json::from_value(filtered(&cli.command, (*v).clone()))?;
                println!("NODE {} ({})", a.node, a.pod);
                println!("{}", cgroups::render(&rows));
            }
        }
        Command::Preflight(_) | Command::History { .. } | Command::Recommend { .. } | Command::Adopt(_) => {}
        Command::Doctor => {
            for (a, v) in &ok {
                let findings: Vec<Finding> = serde_json::from_value((*v).clone())?;
                println!("NODE {} ({})", a.node, a.pod);
                for f in &findings {
                    println!("{}", f.line());
                }
                if let Some(v) = verdict(&findings) {
                    println!("{v}");
                    code = 1;
                }
                println!();
            }
        }
    }
    Ok(code)
}

/// `at-risk`: every agent's reports ranked as one; 1 if an answer does
/// not read.
fn at_risk_of_agents(cli: &Cli, ok: &[(&Agent, &Value)], namespace: Option<&str>) -> i32 {
    let mut code = 0;
    let mut reports = Vec::new();
    for (a, v) in ok {
        match serde_json::from_value::<drains::Drains>((*v).clone()) {
            Ok(d) => reports.extend(d.terminated),
            Err(e) => {
                eprintln!(
                    "kubectl graceful: node {}: {}/{}: {e}",
                    a.node, cli.agent_namespace, a.pod
                );
                code = 1;
            }
        }
    }
    reports.retain(|r| namespace.is_none_or(|ns| ns == r.namespace));
    print!(
        "{}",
        at_risk::render(&at_risk::rank(reports.iter().map(at_risk::Seen::from)))
    );
    code
}

/// What is read from the Events the agents posted.
enum View {
    History,
    AtRisk,
    /// With the app's shutdown budget, in ms.
    Recommend(u64),
}

/// `history`, `at-risk --events` and `recommend`, from the Events the
/// agents posted.
async fn from_events(cli: &Cli, namespace: Option<&str>, all: bool, view: View) -> anyhow::Result<i32> {
    let at = if all {
        Where::All
    } else {
        Where::Namespace(namespace)
    };
    let list = events::list(client(cli).await?, at).await?;
    let json = cli.output == Output::Json;
    let text = match view {
        View::History if json => serde_json::to_string_pretty(&list)? + "\n",
        View::History => events::render(&list, k8s_openapi::jiff::Timestamp::now()),
        View::AtRisk => {
            let ranked = at_risk::rank(events::terminations(&list));
            match json {
                true => serde_json::to_string_pretty(&ranked)? + "\n",
                false => at_risk::render(&ranked),
            }
        }
        View::Recommend(budget_ms) => {
            let rows = recommend::recommend(events::drains(&list), budget_ms);
            match json {
                true => serde_json::to_string_pretty(&rows)? + "\n",
                false => recommend::render(&rows),
            }
        }
    };
    print!("{text}");
    Ok(0)
}

/// An answer with the command's own filters applied (pods of a namespace,
/// cgroups under a path or with traffic).
fn filtered(command: &Command, v: Value) -> Value {
    match command {
        Command::Pods { namespace: Some(ns) } => Value::Array(
            v.as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["namespace"] == ns.as_str())
                .cloned()
                .collect(),
        ),
        Command::Cgroups { path, all } => match serde_json::from_value::<Vec<Row>>(v.clone()) {
            Ok(mut rows) => {
                rows.retain(|r| r.shown(path.as_deref(), *all));
                serde_json::to_value(rows).unwrap_or(v)
            }
            // Not rows: shown as the agent sent it.
            Err(_) => v,
        },
        _ => v,
    }
}

/// 1 if the doctor of any agent found a FAIL (or answered what is not
/// findings).
fn doctor_failed(command: &Command, ok: &[(&Agent, &Value)]) -> i32 {
    if !matches!(command, Command::Doctor) {
        return 0;
    }
    let failed = ok.iter().any(|(_, v)| {
        serde_json::from_value::<Vec<Finding>>((*v).clone()).map_or(true, |f| verdict(&f).is_some())
    });
    i32::from(failed)
}

/// Every node's pods in one table, NODE first.
fn pods_table(cli: &Cli, ok: &[(&Agent, &Value)]) -> anyhow::Result<String> {
    let wide = cli.output == Output::Wide;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut warnings = String::new();
    for (a, v) in ok {
        let mut list: Vec<PodView> = serde_json::from_value(filtered(&cli.command, (*v).clone()))?;
        sort_pods(&mut list);
        let mut node_rows = pods::pods_rows(&list, wide).into_iter();
        let head = node_rows.next().unwrap_or_default();
        if rows.is_empty() {
            rows.push(std::iter::once("NODE".to_string()).chain(head).collect());
        }
        rows.extend(node_rows.map(|r| std::iter::once(a.node.clone()).chain(r).collect()));
        warnings.push_str(&pods::warnings(&list));
    }
    let mut out = if rows.is_empty() {
        String::new()
    } else {
        table(&rows)
    };
    out.push_str(&warnings);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}
