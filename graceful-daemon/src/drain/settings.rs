//! The settings a drain runs with: a pod annotation, else the hook's flag,
//! else the default. Annotations win because many teams can change a pod's
//! annotations but not its image or its hook.
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     graceful.dev/policy: quiet          # every container's hook
//!     graceful.dev/max: 40s
//!     graceful.dev/max.istio-proxy: 50s   # only the container named istio-proxy
//! ```
//!
//! Keys: `policy`, `scope`, `min`, `max`, `settle`, `quiet`,
//! `after-containers` (comma-separated), `ignore-ports` and `ignore-peers`
//! (comma-separated, see [`graceful_api::exclusions`]), as the hook's flags
//! spell them. A value that does not parse, in an annotation or a flag, is
//! reported and left out.
//!
//! The deadline defaults to the pod's grace period (the deletion's own, as
//! `kubectl delete --grace-period` sets it, else terminationGracePeriodSeconds)
//! less the shutdown budget the app needs after SIGTERM. A deadline at or
//! past the grace period would let the kubelet kill the container
//! mid-drain: it is reported and clamped to that default.

use std::{collections::BTreeMap, time::Duration};

use graceful_api::{
    check_containers,
    exclusions::{parse_peers, parse_ports},
    Accepted, DrainRequest, Policy, Scope, Source, DEFAULT_MAX_MS, DEFAULT_MIN_MS, DEFAULT_QUIET_MS,
    DEFAULT_SETTLE_MS, SETTINGS as KEYS,
};

use crate::duration;

pub use crate::node::kube::adoption::PREFIX;
/// The project's annotations that are not drain settings: the httpGet
/// gate's opt-in and port (crate::serve::httpgate), and what injection by
/// label (deploy/inject) writes and reads. Known, so never "unknown".
const OTHER_KEYS: [&str; 5] = ["gate", "gate-port", "injected", "inject-skipped", "inject-gate"];

/// What the agent knows of the calling pod from the Kubernetes API.
#[derive(Clone, Debug, Default)]
pub struct PodFacts {
    pub annotations: BTreeMap<String, String>,
    /// The caller's container name, when known.
    pub container: Option<String>,
    pub grace_period_seconds: Option<i64>,
    /// When the pod's deletion was requested (Unix ms, to the API's whole
    /// second): no hook's drain begins before it.
    pub deletion_requested_unix_ms: Option<u64>,
    /// When the kubelet stops each of its containers (native sidecars
    /// last): what `after-containers` may name.
    pub stop_ranks: super::stop_order::Ranks,
    /// The ports of the pod's mesh proxy that carry no app traffic
    /// ([`crate::node::kube::mesh::own_ports`]): always left out, whatever else
    /// `ignore-ports` names (a relayed hook's own connection is on one).
    pub mesh_ports: Vec<u16>,
}

struct Resolver<'a> {
    facts: &'a PodFacts,
    sources: BTreeMap<String, Source>,
    warnings: Vec<String>,
}

impl Resolver<'_> {
    /// The annotation for `key`: this container's, else the pod-wide one.
    fn annotation(&self, key: &str) -> Option<(String, &str, Source)> {
        if let Some(c) = &self.facts.container {
            let k = format!("{PREFIX}{key}.{c}");
            if let Some(v) = self.facts.annotations.get(&k) {
                return Some((k, v.as_str(), Source::ContainerAnnotation));
            }
        }
        let k = format!("{PREFIX}{key}");
        self.facts
            .annotations
            .get(&k)
            .map(|v| (k, v.as_str(), Source::PodAnnotation))
    }

    /// Annotation, else flag, else default; an annotation that does not
    /// parse is reported and skipped.
    fn pick<T>(
        &mut self,
        key: &str,
        field: &str,
        flag: Option<T>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        if let Some((name, raw, source)) = self.annotation(key) {
            match parse(raw.trim()) {
                Ok(v) => {
                    self.sources.insert(field.into(), source);
                    return Some(v);
                }
                Err(e) => self.warnings.push(format!("annotation {name}: {e}; ignored")),
            }
        }
        let v = flag?;
        self.sources.insert(field.into(), Source::Flag);
        Some(v)
    }

    /// A hook's flag that the agent parses (the exclusions): reported and
    /// left out when it does not parse.
    fn flag<T>(
        &mut self,
        key: &str,
        raw: Option<&str>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        match parse(raw?.trim()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.warnings.push(format!("the hook's {key}: {e}; ignored"));
                None
            }
        }
    }

    fn or_default<T>(&mut self, field: &str, v: Option<T>, default: T) -> T {
        v.unwrap_or_else(|| {
            self.sources.insert(field.into(), Source::Default);
            default
        })
    }
}

fn ms(s: &str) -> Result<u64, String> {
    duration::parse(s).map(|d| d.as_millis() as u64)
}

fn policy(s: &str) -> Result<Policy, String> {
    match s {
        "drained" => Ok(Policy::Drained),
        "quiet" => Ok(Policy::Quiet),
        _ => Err(format!("policy must be drained or quiet, not {s:?}")),
    }
}

fn scope(s: &str) -> Result<Scope, String> {
    match s {
        "pod" => Ok(Scope::Pod),
        "container" => Ok(Scope::Container),
        _ => Err(format!("scope must be pod or container, not {s:?}")),
    }
}

fn containers(s: &str) -> Result<Vec<String>, String> {
    let v: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect();
    check_containers(&v)?;
    Ok(v)
}

fn secs(ms: u64) -> String {
    duration::format(Duration::from_millis(ms))
}

/// The settings in effect for `req` from the pod described by `facts`.
pub fn resolve(req: &DrainRequest, facts: &PodFacts, budget: Duration) -> Accepted {
    let mut r = Resolver {
        facts,
        sources: BTreeMap::new(),
        warnings: Vec::new(),
    };
    for k in facts.annotations.keys() {
        let Some(key) = k.strip_prefix(PREFIX) else {
            continue;
        };
        let base = key.split_once('.').map_or(key, |(b, _)| b);
        if !KEYS.contains(&base) && !OTHER_KEYS.contains(&key) {
            r.warnings.push(format!(
                "unknown annotation {k}: ignored (known keys: {})",
                KEYS.join(", ")
            ));
        }
    }
    let policy = r.pick("policy", "policy", req.policy, policy);
    let policy = r.or_default("policy", policy, Policy::Drained);
    let scope = r.pick("scope", "scope", req.scope, scope);
    let scope = r.or_default("scope", scope, Scope::Pod);
    let settle = r.pick("settle", "settle_ms", req.settle_ms, ms);
    let settle_ms = r.or_default("settle_ms", settle, DEFAULT_SETTLE_MS);
    let quiet = r.pick("quiet", "quiet_ms", req.quiet_ms, ms);
    let quiet_ms = r.or_default("quiet_ms", quiet, DEFAULT_QUIET_MS);
    let after = r.pick(
        "after-containers",
        "after_containers",
        req.after_containers.clone(),
        containers,
    );
    let after_containers = r.or_default("after_containers", after, Vec::new());
    let (after_containers, impossible) =
        super::stop_order::check(after_containers, facts.container.as_deref(), &facts.stop_ranks);
    r.warnings.extend(impossible);
    let flag = r.flag("ignore-ports", req.ignore_ports.as_deref(), parse_ports);
    let ports = r.pick("ignore-ports", "ignore_ports", flag, parse_ports);
    let mut ignore_ports = r.or_default("ignore_ports", ports, Vec::new());
    for p in &facts.mesh_ports {
        if !ignore_ports.contains(p) {
            ignore_ports.push(*p);
        }
    }
    let flag = r.flag("ignore-peers", req.ignore_peers.as_deref(), parse_peers);
    let peers = r.pick("ignore-peers", "ignore_peers", flag, parse_peers);
    let ignore_peers = r.or_default("ignore_peers", peers, Vec::new());

    let grace_ms = facts
        .grace_period_seconds
        .filter(|g| *g >= 0)
        .map(|g| g as u64 * 1000);
    // What the pod can afford: its grace period less the app's budget,
    // and never less than half the grace period.
    let affordable = grace_ms.map(|g| g.saturating_sub(budget.as_millis() as u64).max(g / 2));
    let max = r.pick("max", "max_ms", req.max_ms, |s| {
        ms(s).and_then(|m| {
            if m == 0 {
                Err("max must be above zero".into())
            } else {
                Ok(m)
            }
        })
    });
    let mut max_ms = match (max, affordable) {
        (Some(m), _) => m,
        (None, Some(a)) => {
            r.sources.insert("max_ms".into(), Source::GracePeriod);
            a
        }
        (None, None) => r.or_default("max_ms", None, DEFAULT_MAX_MS),
    };
    if let (Some(g), Some(a)) = (grace_ms, affordable) {
        if max_ms >= g {
            r.warnings.push(format!(
                "misconfiguration: max {} is at or past the pod's grace period {} (the kubelet would kill \
                 the container mid-drain): clamped to {} (grace period less the {} shutdown budget); \
                 raise terminationGracePeriodSeconds or lower max",
                secs(max_ms),
                secs(g),
                secs(a),
                secs(budget.as_millis() as u64)
            ));
            max_ms = a;
            r.sources.insert("max_ms".into(), Source::GracePeriod);
        }
    }
    let min = r.pick("min", "min_ms", req.min_ms, ms);
    let min_ms = r.or_default("min_ms", min, DEFAULT_MIN_MS).min(max_ms);
    Accepted {
        policy,
        scope,
        min_ms,
        max_ms,
        settle_ms,
        quiet_ms,
        after_containers,
        ignore_ports,
        ignore_peers,
        grace_period_ms: grace_ms,
        sources: r.sources,
        warnings: r.warnings,
    }
}

#[cfg(test)]
mod tests;
