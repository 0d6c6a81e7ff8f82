//! The `preStop: httpGet` hooks a pod's spec declares: what the kubelet
//! will send to the pod's httpGet gate, and so the only requests the gate
//! takes for a drain ([`crate::serve::httpgate::peers`]). A hook that Istio's
//! injector rewrote to pilot-agent (`/app-lifecycle/<container>/prestopz`
//! on 15020, with `rewriteAppHTTPProbers`, its default) is read from where
//! the injector put the original: the `ISTIO_KUBE_APP_PROBERS` variable
//! of the `istio-proxy` container, which pilot-agent follows.

use k8s_openapi::{
    api::core::v1::{Container, HTTPGetAction, LifecycleHandler, PodSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};

/// One declared hook: whose, the port it is sent to, and its request
/// target (`/path?query`, as the kubelet writes it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SpecHook {
    pub container: String,
    pub port: u16,
    pub target: String,
}

/// Where Istio's injector hands pilot-agent the hooks it rewrote.
const ISTIO_PROBERS: &str = "ISTIO_KUBE_APP_PROBERS";
/// The rewritten hooks' paths start so (the probes', `/app-health/`).
const ISTIO_LIFECYCLE: &str = "/app-lifecycle/";

/// Every container's preStop handler (init containers first, as the spec
/// lists them).
pub fn pre_stops(spec: &PodSpec) -> impl Iterator<Item = (&Container, &LifecycleHandler)> {
    let all = spec.init_containers.iter().flatten().chain(&spec.containers);
    all.filter_map(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)))
}

/// Every `preStop: httpGet` hook of `spec`, its named ports resolved.
pub fn of(spec: &PodSpec) -> Vec<SpecHook> {
    let all = || spec.init_containers.iter().flatten().chain(&spec.containers);
    let mut out: Vec<SpecHook> = pre_stops(spec)
        .filter_map(|(c, h)| declared(c, h.http_get.as_ref()?))
        .collect();
    for c in all().filter(|c| c.name == "istio-proxy") {
        out.extend(istio_rewritten(spec, c));
    }
    out
}

fn declared(c: &Container, g: &HTTPGetAction) -> Option<SpecHook> {
    Some(SpecHook {
        container: c.name.clone(),
        port: port(c, &g.port)?,
        target: target(g.path.as_deref()),
    })
}

/// The kubelet's request target for `path`: a missing leading slash added.
fn target(path: Option<&str>) -> String {
    let p = path.unwrap_or("");
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("/{p}")
    }
}

/// A hook's port: a number, or the name of one of `c`'s ports.
fn port(c: &Container, p: &IntOrString) -> Option<u16> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    }
}

/// The hooks Istio's injector rewrote, as `ISTIO_KUBE_APP_PROBERS` keeps
/// them: `{"/app-lifecycle/<container>/prestopz": {"httpGet": {...}}}`.
fn istio_rewritten(spec: &PodSpec, proxy: &Container) -> Vec<SpecHook> {
    #[derive(serde::Deserialize)]
    struct Prober {
        #[serde(rename = "httpGet")]
        http_get: Option<HTTPGetAction>,
    }
    let Some(json) = proxy
        .env
        .iter()
        .flatten()
        .find(|e| e.name == ISTIO_PROBERS)
        .and_then(|e| e.value.as_deref())
    else {
        return Vec::new();
    };
    let Ok(probers) = serde_json::from_str::<std::collections::BTreeMap<String, Prober>>(json) else {
        return Vec::new();
    };
    let containers = || spec.init_containers.iter().flatten().chain(&spec.containers);
    probers
        .into_iter()
        .filter_map(|(key, p)| {
            let name = key.strip_prefix(ISTIO_LIFECYCLE)?.strip_suffix("/prestopz")?;
            let g = p.http_get?;
            let app = containers().find(|c| c.name == name)?;
            Some(SpecHook {
                container: name.to_string(),
                port: port(app, &g.port)?,
                target: target(g.path.as_deref()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
