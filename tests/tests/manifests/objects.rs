//! YAML documents as typed Kubernetes objects, with unknown fields rejected.
//!
//! k8s-openapi's `Deserialize` skips fields it does not know (a typo such as
//! `mountPropogation`, or a field of a newer Kubernetes than v1_33), so a
//! plain typed parse would accept them silently, and so would the API
//! server unless it validates strictly. Each document is therefore read into
//! a `serde_json::Value` first, then into its type, then serialized back:
//! any field the type dropped is missing from the round trip, and the first
//! difference is reported with its path. This needs no extra crate and also
//! catches a value the type reads differently (a port given as a string).
//! `serde_ignored` would catch unknown fields too, but not the latter.

use std::any::TypeId;

use k8s_openapi::{
    api::{
        admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
        apps::v1::{DaemonSet, Deployment},
        core::v1::{ConfigMap, Namespace, ResourceQuota, Service, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ClusterResourceScope, Metadata, Resource,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

/// A kustomization, as far as deploy/ uses one: kept to the fields that
/// kustomize v4 (kubectl 1.21 and later: every release the project
/// supports) knows. A new field is an unknown one until it is added here.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// JSON 6902 patches, each on its target (the native-sidecar forms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<KustomizePatch>>,
}

/// One entry of `patches`: a JSON 6902 patch and the object it applies to.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KustomizePatch {
    pub target: PatchTarget,
    pub patch: String,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PatchTarget {
    pub kind: String,
    pub name: String,
}

pub const KUSTOMIZE_API: &str = "kustomize.config.k8s.io/v1beta1";

#[derive(Debug)]
pub enum Kind {
    Namespace(Namespace),
    ServiceAccount(ServiceAccount),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    DaemonSet(DaemonSet),
    Deployment(Deployment),
    Service(Service),
    ConfigMap(ConfigMap),
    ResourceQuota(ResourceQuota),
    ValidatingAdmissionPolicy(ValidatingAdmissionPolicy),
    ValidatingAdmissionPolicyBinding(ValidatingAdmissionPolicyBinding),
    /// A kind newer than the k8s-openapi version the workspace builds
    /// against (v1_33; its features exclude one another): the
    /// MutatingAdmissionPolicy of deploy/inject (GA in 1.36). Its metadata
    /// is read here; its fields are checked strictly by the test node's
    /// 1.37 API server, which the cluster test `inject` applies it to
    /// with kubectl's strict field validation.
    ServerChecked {
        kind: &'static str,
        metadata: ObjectMeta,
    },
    Kustomization(Kustomization),
}

/// One document, typed, with where it came from.
#[derive(Debug)]
pub struct Object {
    /// `deploy/base/daemonset.yaml #1`, or the kustomization that rendered it.
    pub origin: String,
    pub kind: Kind,
    /// Whether the kind is cluster-scoped (no metadata.namespace).
    pub cluster_scoped: bool,
}

impl Object {
    pub fn metadata(&self) -> Option<&ObjectMeta> {
        Some(match &self.kind {
            Kind::Namespace(o) => o.metadata(),
            Kind::ServiceAccount(o) => o.metadata(),
            Kind::ClusterRole(o) => o.metadata(),
            Kind::ClusterRoleBinding(o) => o.metadata(),
            Kind::DaemonSet(o) => o.metadata(),
            Kind::Deployment(o) => o.metadata(),
            Kind::Service(o) => o.metadata(),
            Kind::ConfigMap(o) => o.metadata(),
            Kind::ResourceQuota(o) => o.metadata(),
            Kind::ValidatingAdmissionPolicy(o) => o.metadata(),
            Kind::ValidatingAdmissionPolicyBinding(o) => o.metadata(),
            Kind::ServerChecked { metadata, .. } => metadata,
            Kind::Kustomization(_) => return None,
        })
    }

    /// `DaemonSet/graceful`, for messages.
    pub fn name(&self) -> String {
        let kind = match &self.kind {
            Kind::Namespace(_) => Namespace::KIND,
            Kind::ServiceAccount(_) => ServiceAccount::KIND,
            Kind::ClusterRole(_) => ClusterRole::KIND,
            Kind::ClusterRoleBinding(_) => ClusterRoleBinding::KIND,
            Kind::DaemonSet(_) => DaemonSet::KIND,
            Kind::Deployment(_) => Deployment::KIND,
            Kind::Service(_) => Service::KIND,
            Kind::ConfigMap(_) => ConfigMap::KIND,
            Kind::ResourceQuota(_) => ResourceQuota::KIND,
            Kind::ValidatingAdmissionPolicy(_) => ValidatingAdmissionPolicy::KIND,
            Kind::ValidatingAdmissionPolicyBinding(_) => ValidatingAdmissionPolicyBinding::KIND,
            Kind::ServerChecked { kind, .. } => kind,
            Kind::Kustomization(_) => "Kustomization",
        };
        let name = self.metadata().and_then(|m| m.name.clone()).unwrap_or_default();
        format!("{kind}/{name}")
    }
}

/// Every document of a YAML stream, typed. Empty documents are skipped.
pub fn parse_stream(text: &str, origin: &str) -> Vec<Object> {
    let mut out = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let origin = format!("{origin} #{}", i + 1);
        let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{origin}: not valid YAML: {e}"));
        if value.is_null() {
            continue;
        }
        out.push(typed(value, origin));
    }
    out
}

fn typed(value: Value, origin: String) -> Object {
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    macro_rules! k8s {
        ($($t:ident),*) => {
            $(
                if (api_version.as_str(), kind.as_str()) == ($t::API_VERSION, $t::KIND) {
                    return Object {
                        kind: Kind::$t(strict::<$t>(&value, &origin)),
                        cluster_scoped: TypeId::of::<<$t as Resource>::Scope>() == TypeId::of::<ClusterResourceScope>(),
                        origin,
                    };
                }
            )*
        };
    }
    k8s!(
        Namespace,
        ServiceAccount,
        ClusterRole,
        ClusterRoleBinding,
        DaemonSet,
        Deployment,
        Service,
        ConfigMap,
        ResourceQuota,
        ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicyBinding
    );
    for newer in ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"] {
        if (api_version.as_str(), kind.as_str()) == ("admissionregistration.k8s.io/v1", newer) {
            let metadata = strict_serde::<ObjectMeta>(&value["metadata"], &origin, "ObjectMeta");
            return Object {
                kind: Kind::ServerChecked {
                    kind: newer,
                    metadata,
                },
                cluster_scoped: true,
                origin,
            };
        }
    }
    if (api_version.as_str(), kind.as_str()) == (KUSTOMIZE_API, "Kustomization") {
        return Object {
            kind: Kind::Kustomization(strict_serde::<Kustomization>(&value, &origin, "Kustomization")),
            cluster_scoped: false,
            origin,
        };
    }
    panic!(
        "{origin}: apiVersion {api_version:?} kind {kind:?} is not a kind these tests know: \
         add it to `typed` in tests/tests/manifests/objects.rs"
    );
}

fn strict<T: Resource + DeserializeOwned + Serialize>(value: &Value, origin: &str) -> T {
    strict_serde(
        value,
        origin,
        &format!("{} (k8s-openapi, Kubernetes 1.33)", T::KIND),
    )
}

/// Parses `value` as `T` and fails on anything the type does not carry back.
fn strict_serde<T: DeserializeOwned + Serialize>(value: &Value, origin: &str, what: &str) -> T {
    let typed: T =
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{origin}: not a valid {what}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    if let Some(d) = first_difference(value, &back, "") {
        panic!("{origin}: {d}; the field is not part of {what}: a typo, or a field of a newer API");
    }
    typed
}

/// Where `back` (the typed round trip) first differs from `orig`.
pub fn first_difference(orig: &Value, back: &Value, path: &str) -> Option<String> {
    match (orig, back) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    None => return Some(format!("{p} is unknown (the typed parse dropped it)")),
                    Some(vb) => {
                        if let Some(d) = first_difference(va, vb, &p) {
                            return Some(d);
                        }
                    }
                }
            }
            b.keys()
                .find(|k| !a.contains_key(*k))
                .map(|k| format!("{path}.{k} appeared in the typed round trip"))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (va, vb))| first_difference(va, vb, &format!("{path}[{i}]"))),
        _ if orig == back => None,
        _ => Some(format!("{path}: {orig} reads back as {back}")),
    }
}

#[test]
fn unknown_fields_are_rejected() {
    let ok = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n";
    assert_eq!(parse_stream(ok, "ok").len(), 1);
    let typo = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  lables: {a: b}\n";
    let err = std::panic::catch_unwind(|| parse_stream(typo, "typo")).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains(".metadata.lables is unknown"), "{msg}");
    let kustomize = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresourcs: [a.yaml]\n";
    assert!(std::panic::catch_unwind(|| parse_stream(kustomize, "k")).is_err());
}
