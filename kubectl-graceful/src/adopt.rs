//! `kubectl graceful adopt deploy/web` (or `--all`): the injection
//! policy's change, made to a workload's pod template from here, for
//! clusters before Kubernetes 1.36 (no MutatingAdmissionPolicy) or a team
//! that wants the gate written into its objects. The same rules
//! ([`rules`]), applied with server-side apply under a field manager of
//! its own (`kubectl-graceful`), so that the fields it adds are its own
//! and a later `kubectl apply` of the team's manifest shows the conflict
//! rather than silently undoing them. `--dry-run` asks the API server to
//! apply it without storing, and prints the template's diff.
//!
//! Needs `get` and `patch` on the workloads and `get` on the namespace
//! (its Pod Security label chooses the gate; without it, the httpGet
//! gate, which runs everywhere).

pub mod rules;

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, StatefulSet},
    core::v1::Namespace,
};
use kube::{
    api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams},
    Api, Client,
};
use std::collections::BTreeMap;

use graceful_api::views::recommend::{self, Recommendation};
use serde_json::{json, Value};

use crate::{
    args::{Adopt as Args, Cli, Output},
    events,
};

/// The field manager of the fields adopt adds.
pub const MANAGER: &str = "kubectl-graceful";

/// A workload kind adopt knows: its names on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        match s {
            "deploy" | "deployment" | "deployments" => Some(Kind::Deployment),
            "sts" | "statefulset" | "statefulsets" => Some(Kind::StatefulSet),
            "ds" | "daemonset" | "daemonsets" => Some(Kind::DaemonSet),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
        }
    }
}

/// The kind's objects in `ns`, as the API serves them (one dynamic API
/// for the three kinds: adopt reads and writes JSON).
fn api(client: &Client, ns: &str, kind: Kind) -> Api<DynamicObject> {
    let resource = match kind {
        Kind::Deployment => ApiResource::erase::<Deployment>(&()),
        Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// The object as JSON.
async fn get(client: &Client, ns: &str, kind: Kind, name: &str) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(api(client, ns, kind).get(name).await?)?)
}

/// Server-side apply of `patch`; the object as the API server made it.
async fn apply(
    client: &Client,
    ns: &str,
    kind: Kind,
    name: &str,
    patch: &Value,
    dry: bool,
    force: bool,
) -> Result<Value, kube::Error> {
    let mut pp = PatchParams::apply(MANAGER);
    pp.dry_run = dry;
    pp.force = force;
    let made = api(client, ns, kind)
        .patch(name, &pp, &Patch::Apply(patch))
        .await?;
    serde_json::to_value(made).map_err(kube::Error::SerdeError)
}

/// What server-side apply sends: only what the rules added to the
/// template, so that adopt owns those fields and no other.
fn apply_patch(kind: Kind, name: &str, ns: &str, before: &Value, after: &Value) -> Value {
    let (b, a) = (&before["spec"], &after["spec"]);
    let added = |list: &str, key: &str, item: &Value| {
        !b[list]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x[key] == item[key])
    };
    let mut annotations = serde_json::Map::new();
    for (k, v) in after["metadata"]["annotations"].as_object().into_iter().flatten() {
        if before["metadata"]["annotations"][k] != *v {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let mut containers = Vec::new();
    for (i, c) in a["containers"].as_array().into_iter().flatten().enumerate() {
        let was = &b["containers"][i];
        if c["lifecycle"]["preStop"] == was["lifecycle"]["preStop"] {
            continue;
        }
        let mut entry = json!({"name": c["name"], "lifecycle": {"preStop": c["lifecycle"]["preStop"]}});
        let mounts: Vec<&Value> = c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| {
                !was["volumeMounts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|w| w["mountPath"] == m["mountPath"])
            })
            .collect();
        if !mounts.is_empty() {
            entry["volumeMounts"] = json!(mounts);
        }
        containers.push(entry);
    }
    let mut spec = json!({"containers": containers});
    let volumes: Vec<&Value> = a["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| added("volumes", "name", v))
        .collect();
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    if a["terminationGracePeriodSeconds"] != b["terminationGracePeriodSeconds"] {
        spec["terminationGracePeriodSeconds"] = a["terminationGracePeriodSeconds"].clone();
    }
    envelope(kind, name, ns, annotations, spec)
}

/// What a workload already opted in needs sent to take new figures: the
/// tuned containers' hooks, the grace period, and every field adopt
/// writes that the template has (the gate's volume and mounts, the
/// annotations of [`rules::WRITTEN`], the `graceful.dev/max` ones tune
/// set), so that server-side apply keeps those adopt set before: a field a
/// manager owned and no longer sends is removed. Nothing else of the
/// team's, which adopt would otherwise come to own with it.
fn tuned_patch(kind: Kind, name: &str, ns: &str, after: &Value, tuned: &[String]) -> Value {
    let a = &after["spec"];
    let containers: Vec<Value> = items(&a["containers"])
        .filter(|c| tuned.iter().any(|t| c["name"] == t.as_str()))
        .map(|c| {
            let mut entry = json!({"name": c["name"], "lifecycle": {"preStop": c["lifecycle"]["preStop"]}});
            let mounts = gate_items(&c["volumeMounts"]);
            if !mounts.is_empty() {
                entry["volumeMounts"] = json!(mounts);
            }
            entry
        })
        .collect();
    let mut spec = json!({
        "containers": containers,
        "terminationGracePeriodSeconds": a["terminationGracePeriodSeconds"],
    });
    let volumes = gate_items(&a["volumes"]);
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    let annotations: serde_json::Map<String, Value> = after["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| rules::WRITTEN.contains(&k.as_str()) || rules::is_max(k, tuned))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    envelope(kind, name, ns, annotations, spec)
}

/// The items of a JSON list (none when it is absent).
fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

/// The gate's volume or mounts among a list: named `graceful`.
fn gate_items(list: &Value) -> Vec<&Value> {
    items(list).filter(|v| v["name"] == "graceful").collect()
}

/// The apply configuration of a workload's template: its annotations and
/// spec fields, and nothing else of the object.
fn envelope(
    kind: Kind,
    name: &str,
    ns: &str,
    annotations: serde_json::Map<String, Value>,
    spec: Value,
) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": kind.name(),
        "metadata": {"name": name, "namespace": ns},
        "spec": {"template": {"metadata": {"annotations": annotations}, "spec": spec}}
    })
}

/// Each workload's recommendation (`kind/name` → it), from the drains
/// the namespace's Events tell.
async fn recommendations(
    client: &Client,
    ns: &str,
    args: &Args,
) -> anyhow::Result<BTreeMap<String, Recommendation>> {
    let list = events::list(client.clone(), events::Where::Namespace(Some(ns))).await?;
    let budget_ms = u64::try_from(args.budget.as_millis()).unwrap_or(u64::MAX);
    Ok(recommend::recommend(events::drains(&list), budget_ms)
        .into_iter()
        .map(|r| (r.workload.clone(), r))
        .collect())
}

/// The namespace's Pod Security enforce level, or empty (with a line on
/// stderr) where it cannot be read.
async fn enforce(client: &Client, ns: &str) -> String {
    match Api::<Namespace>::all(client.clone()).get(ns).await {
        Ok(n) => n
            .metadata
            .labels
            .unwrap_or_default()
            .get("pod-security.kubernetes.io/enforce")
            .cloned()
            .unwrap_or_default(),
        Err(e) => {
            eprintln!("kubectl graceful: cannot read namespace {ns} ({e}): its Pod Security level is taken as not privileged (the httpGet gate)");
            String::new()
        }
    }
}

/// The workloads named, or every one of the namespace with `--all`.
async fn targets(client: &Client, ns: &str, args: &Args) -> anyhow::Result<Vec<(Kind, String)>> {
    if args.all {
        let mut out = Vec::new();
        for kind in [Kind::Deployment, Kind::StatefulSet, Kind::DaemonSet] {
            for o in api(client, ns, kind).list(&ListParams::default()).await? {
                out.push((kind, o.metadata.name.unwrap_or_default()));
            }
        }
        return Ok(out);
    }
    args.workloads
        .iter()
        .map(|w| {
            let (k, n) = w.split_once('/').ok_or_else(|| {
                anyhow::anyhow!("{w}: name a workload as KIND/NAME (deploy/web, sts/db, ds/agent)")
            })?;
            let kind = Kind::parse(k).ok_or_else(|| {
                anyhow::anyhow!("{w}: adopt knows Deployments, StatefulSets and DaemonSets")
            })?;
            Ok((kind, n.to_string()))
        })
        .collect()
}

pub async fn run(cli: &Cli, args: &Args, client: Client) -> anyhow::Result<i32> {
    if args.workloads.is_empty() != args.all {
        anyhow::bail!("name the workloads (deploy/web ...) or pass --all, one of the two");
    }
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let at = Namespaced {
        client: &client,
        ns: &ns,
        level: enforce(&client, &ns).await,
        recs: match args.recommended {
            true => Some(recommendations(&client, &ns, args).await?),
            false => None,
        },
        args,
    };
    let mut results = Vec::new();
    // One workload that cannot be adopted is its own line; the others go
    // on (with --all, those before it are adopted already), and the exit
    // status says one failed.
    let mut failed = 0;
    for (kind, name) in targets(&client, &ns, args).await? {
        match at.adopt(kind, &name).await {
            Some(r) => results.push(r),
            None => failed += 1,
        }
    }
    if cli.output == Output::Json {
        let all: Vec<Value> = results
            .iter()
            .map(|(who, said, _, t)| json!({"workload": who, "result": said, "template": t}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(i32::from(failed > 0));
    }
    for (_, said, before, stored) in &results {
        println!("{said}");
        if args.dry_run && before != stored {
            print!("{}", diff(before, stored));
        }
    }
    Ok(i32::from(failed > 0))
}

/// What adopting a workload of one namespace needs.
struct Namespaced<'a> {
    client: &'a Client,
    ns: &'a str,
    /// Its Pod Security enforce level.
    level: String,
    /// With `--recommended`: each workload's.
    recs: Option<BTreeMap<String, Recommendation>>,
    args: &'a Args,
}

impl Namespaced<'_> {
    /// One workload: (`kind/name`, the line said, its template before,
    /// the template stored or, on a dry run, as it would be); None when
    /// it failed, said on stderr.
    async fn adopt(&self, kind: Kind, name: &str) -> Option<(String, String, Value, Value)> {
        let (ns, args) = (self.ns, self.args);
        let who = format!("{}/{name}", kind.name().to_lowercase());
        let obj = get(self.client, ns, kind, name)
            .await
            .inspect_err(|e| eprintln!("kubectl graceful: {who}: {e}"))
            .ok()?;
        let before = obj["spec"]["template"].clone();
        let mut after = before.clone();
        let outcome = rules::inject(&mut after, &self.level);
        let rec = self.recs.as_ref().and_then(|r| r.get(&who));
        if let Some(r) = rec.filter(|r| r.max_s.saturating_mul(1000) > args.up_to.as_millis() as u64) {
            eprintln!(
                "kubectl graceful: {who}: its drains' Events call for max {}s, past --up-to {}s: left as it is (Events are what anyone allowed to create them in the namespace writes; `kubectl graceful history` shows them, --up-to takes a longer max)",
                r.max_s,
                args.up_to.as_secs()
            );
            return None;
        }
        let tuned = rec.map_or_else(Vec::new, |r| rules::tune(&mut after, r.max_s, r.grace_period_s));
        let figures = rec.filter(|_| !tuned.is_empty()).map(figures);
        let unmeasured = match args.recommended && rec.is_none() {
            true => " (no drain of it measured yet: the default max)",
            false => "",
        };
        let patch = match (outcome, &figures) {
            (rules::Outcome::Left(why), None) => {
                let said = format!("{who}: left as it is: {why}{unmeasured}");
                return Some((who, said, before.clone(), before));
            }
            (rules::Outcome::Injected(_), _) => apply_patch(kind, name, ns, &before, &after),
            (rules::Outcome::Left(_), Some(_)) => tuned_patch(kind, name, ns, &after, &tuned),
        };
        let made = apply(self.client, ns, kind, name, &patch, args.dry_run, args.force_conflicts)
            .await
            .inspect_err(|e| match e {
                kube::Error::Api(s) if s.code == 409 => eprintln!(
                    "kubectl graceful: {who}: another field manager owns a field adopt sets ({}); --force-conflicts takes it",
                    s.message
                ),
                e => eprintln!("kubectl graceful: {who}: {e}"),
            })
            .ok()?;
        let verb = if args.dry_run { "would get" } else { "got" };
        let said = match (outcome, figures) {
            (rules::Outcome::Injected(gate), None) => format!("{who}: {verb} the {gate} gate{unmeasured}"),
            (rules::Outcome::Injected(gate), Some(f)) => format!("{who}: {verb} the {gate} gate, {f}"),
            (rules::Outcome::Left(_), f) => format!("{who}: its hook {verb} {}", f.unwrap_or_default()),
        };
        Some((who, said, before, made["spec"]["template"].clone()))
    }
}

/// A recommendation, as adopt's line says it.
fn figures(r: &Recommendation) -> String {
    format!(
        "max {}s and a grace period of {}s, from {} drain(s) (p99 {:.1}s: {})",
        r.max_s,
        r.grace_period_s,
        r.drains,
        r.p99_ms as f64 / 1000.0,
        r.rule
    )
}

/// The template before and after, as a unified diff of their JSON.
fn diff(before: &Value, after: &Value) -> String {
    let (b, a) = (
        serde_json::to_string_pretty(before).unwrap_or_default() + "\n",
        serde_json::to_string_pretty(after).unwrap_or_default() + "\n",
    );
    similar::TextDiff::from_lines(&b, &a)
        .unified_diff()
        .context_radius(2)
        .header("template (stored)", "template (adopted)")
        .to_string()
}

#[cfg(test)]
mod tests;
