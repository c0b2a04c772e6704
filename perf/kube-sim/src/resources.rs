//! The resource registry: which group/version/plural the server serves, their kind, scope, verbs
//! and subresources (built-in ones plus those registered by CustomResourceDefinitions), and the
//! discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`) built from it.

use crate::meta::Pointer;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// One served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: String,
    /// Served version.
    pub version: String,
    /// Plural (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource: main writes keep status, status writes change only status.
    pub status: bool,
    /// Create resets `.status` (pods, custom resources with a status subresource).
    pub drop_status_on_create: bool,
    /// `metadata.generation` is maintained (custom resources, CRDs).
    pub generation: bool,
    /// Short names for discovery.
    pub short_names: Vec<String>,
    /// Storage key shared by all versions: `group/plural`.
    pub key: Arc<str>,
    /// Defined by a CRD (deleted with it).
    pub custom: bool,
    /// The `specReplicasPath` of a CRD version with a `scale` subresource (`.spec.replicas`):
    /// the disruption controller reads an owner's scale from it.
    pub scale_replicas_path: Option<String>,
}

impl ResourceDef {
    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        short: &[&str],
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.into(),
            namespaced,
            status: false,
            drop_status_on_create: false,
            generation: false,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            key: format!("{group}/{plural}").into(),
            custom: false,
            scale_replicas_path: None,
        }
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Parses the resources a CRD object defines (one per served version).
    pub fn from_crd(crd: &Value) -> Result<Vec<Self>, String> {
        let spec = crd.get("spec").ok_or("spec: Required value")?;
        let group = spec
            .get("group")
            .and_then(Value::as_str)
            .ok_or("spec.group: Required value")?;
        let names = spec.get("names").ok_or("spec.names: Required value")?;
        let plural = names
            .get("plural")
            .and_then(Value::as_str)
            .ok_or("spec.names.plural: Required value")?;
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .ok_or("spec.names.kind: Required value")?;
        let expected = format!("{plural}.{group}");
        let name = crate::meta::meta_str(crd, "name");
        if name != expected {
            return Err(format!(
                "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
            ));
        }
        let singular = names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let short_names: Vec<String> = names
            .get("shortNames")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or("spec.versions: Required value")?;
        let mut out = Vec::new();
        for v in versions {
            if v.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            let version = v
                .get("name")
                .and_then(Value::as_str)
                .ok_or("spec.versions[].name: Required value")?;
            let status = v.at("/subresources/status").is_some();
            let scale_replicas_path = v
                .at("/subresources/scale/specReplicasPath")
                .and_then(Value::as_str)
                .map(str::to_string);
            out.push(Self {
                group: group.into(),
                version: version.into(),
                plural: plural.into(),
                singular: singular.clone(),
                kind: kind.into(),
                namespaced,
                status,
                drop_status_on_create: status,
                generation: true,
                short_names: short_names.clone(),
                key: format!("{group}/{plural}").into(),
                custom: true,
                scale_replicas_path,
            });
        }
        Ok(out)
    }
}

/// All served resources.
#[derive(Debug, Clone)]
pub struct Registry {
    defs: Vec<Arc<ResourceDef>>,
    by_path: HashMap<(String, String, String), Arc<ResourceDef>>,
}

impl Default for Registry {
    fn default() -> Self {
        let mut r = Self {
            defs: Vec::new(),
            by_path: HashMap::new(),
        };
        let mut pods = ResourceDef::builtin("", "v1", "pods", "Pod", true, &["po"]);
        pods.status = true;
        pods.drop_status_on_create = true;
        // Since v1.33 the real server tracks pod generations (create: 1; spec changes, resizes
        // included, bump it).
        pods.generation = true;
        let mut nodes = ResourceDef::builtin("", "v1", "nodes", "Node", false, &["no"]);
        nodes.status = true;
        let mut namespaces =
            ResourceDef::builtin("", "v1", "namespaces", "Namespace", false, &["ns"]);
        namespaces.status = true;
        let mut crds = ResourceDef::builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
        );
        crds.status = true;
        crds.generation = true;
        let mut pvcs = ResourceDef::builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
        );
        pvcs.status = true;
        pvcs.drop_status_on_create = true;
        let mut pvs = ResourceDef::builtin(
            "",
            "v1",
            "persistentvolumes",
            "PersistentVolume",
            false,
            &["pv"],
        );
        pvs.status = true;
        pvs.drop_status_on_create = true;
        // resource.k8s.io/v1 (DRA): classes and slices track generations; claims have a status.
        let mut classes = ResourceDef::builtin(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            "DeviceClass",
            false,
            &[],
        );
        classes.generation = true;
        let mut claims = ResourceDef::builtin(
            "resource.k8s.io",
            "v1",
            "resourceclaims",
            "ResourceClaim",
            true,
            &[],
        );
        claims.status = true;
        claims.drop_status_on_create = true;
        let mut slices = ResourceDef::builtin(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            "ResourceSlice",
            false,
            &[],
        );
        slices.generation = true;
        // policy/v1: budgets have a status and track generations (`PrepareForCreate` sets 1,
        // spec changes bump it).
        let mut pdbs = ResourceDef::builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
        );
        pdbs.status = true;
        pdbs.drop_status_on_create = true;
        pdbs.generation = true;
        for d in [
            pods,
            nodes,
            namespaces,
            ResourceDef::builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"]),
            ResourceDef::builtin("", "v1", "events", "Event", true, &["ev"]),
            ResourceDef::builtin("coordination.k8s.io", "v1", "leases", "Lease", true, &[]),
            ResourceDef::builtin("events.k8s.io", "v1", "events", "Event", true, &["ev"]),
            crds,
            pvcs,
            pvs,
            ResourceDef::builtin(
                "storage.k8s.io",
                "v1",
                "storageclasses",
                "StorageClass",
                false,
                &["sc"],
            ),
            ResourceDef::builtin("storage.k8s.io", "v1", "csinodes", "CSINode", false, &[]),
            classes,
            claims,
            ResourceDef::builtin(
                "resource.k8s.io",
                "v1",
                "resourceclaimtemplates",
                "ResourceClaimTemplate",
                true,
                &[],
            ),
            slices,
            pdbs,
            // scheduling.k8s.io/v1: `PrepareForCreate` sets `generation: 1` and nothing bumps it,
            // so the store does not track it (see `scheduling.rs`).
            ResourceDef::builtin(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                "PriorityClass",
                false,
                &["pc"],
            ),
        ] {
            r.add(d);
        }
        r
    }
}

impl Registry {
    /// Adds (or replaces) a resource.
    pub fn add(&mut self, def: ResourceDef) {
        let k = (def.group.clone(), def.version.clone(), def.plural.clone());
        let def = Arc::new(def);
        self.defs
            .retain(|d| (&d.group, &d.version, &d.plural) != (&k.0, &k.1, &k.2));
        self.defs.push(def.clone());
        self.by_path.insert(k, def);
    }

    /// Removes every version of `group/plural`.
    pub fn remove(&mut self, group: &str, plural: &str) {
        self.defs
            .retain(|d| !(d.group == group && d.plural == plural));
        self.by_path
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    /// Looks a resource up by its URL parts.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_path
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Whether any resource is served under `group/version`.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.defs
            .iter()
            .any(|d| d.group == group && d.version == version)
    }

    /// All definitions.
    pub fn defs(&self) -> &[Arc<ResourceDef>] {
        &self.defs
    }
}

/// The verbs of a resource: all of them, but no `deletecollection` for namespaces (their
/// storage has none).
fn verbs(d: &ResourceDef) -> Value {
    const ALL: [&str; 8] = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let namespaces = d.key.as_ref() == "/namespaces";
    ALL.iter()
        .filter(|v| !(namespaces && **v == "deletecollection"))
        .map(|v| json!(v))
        .collect()
}

/// `/api`.
pub fn api_versions(server: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}]})
}

fn group_entry(reg: &Registry, group: &str) -> Value {
    let mut versions: Vec<String> = Vec::new();
    for d in reg.defs.iter().filter(|d| d.group == group) {
        if !versions.contains(&d.version) {
            versions.push(d.version.clone());
        }
    }
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn api_group_list(reg: &Registry) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for d in &reg.defs {
        if !d.group.is_empty() && !groups.contains(&d.group.as_str()) {
            groups.push(&d.group);
        }
    }
    let gs: Vec<Value> = groups.iter().map(|g| group_entry(reg, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/<group>`, or None when no version of it is served.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    reg.defs.iter().any(|d| d.group == group).then(|| {
        let mut g = group_entry(reg, group);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.serves(group, version) {
        return None;
    }
    let mut res = Vec::new();
    for d in reg
        .defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        res.push(
            json!({"name": d.plural, "singularName": d.singular, "namespaced": d.namespaced,
                        "kind": d.kind, "verbs": verbs(d), "shortNames": d.short_names}),
        );
        if d.status {
            res.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
                            "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
        if d.key.as_ref() == "/pods" {
            res.push(
                json!({"name": "pods/binding", "singularName": "", "namespaced": true,
                            "kind": "Binding", "verbs": ["create"]}),
            );
            res.push(
                json!({"name": "pods/resize", "singularName": "", "namespaced": true,
                            "kind": "Pod", "verbs": ["get", "patch", "update"]}),
            );
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}),
    )
}

/// `/openapi/v3`: one entry per served group-version.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for d in &reg.defs {
        let p = if d.group.is_empty() {
            format!("api/{}", d.version)
        } else {
            format!("apis/{}/{}", d.group, d.version)
        };
        let url = format!("/openapi/v3/{p}");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>`: no schemas, only the PATCH operations with
/// their `x-kubernetes-group-version-kind` and the `fieldValidation` parameter. That is what
/// kubectl checks before choosing server-side validation, so plain `kubectl apply` works.
pub fn openapi_v3_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.serves(group, version) {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    for d in reg
        .defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let params = json!([{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}]);
        let op = |action: &str| {
            json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk, "parameters": params,
                   "responses": {"200": {"description": "OK"}}})
        };
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        paths.insert(base.clone(), json!({"post": op("post")}));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"put": op("put"), "patch": op("patch")}),
        );
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (kube-sim)", "version": "v1.34.0"},
                "paths": paths, "components": {"schemas": {}}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_builtins_and_crds() {
        let mut reg = Registry::default();
        let core = api_resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods/binding")
                && names.contains(&"pods/status")
                && names.contains(&"nodes")
        );
        assert!(api_resource_list(&reg, "shard.volcano.sh", "v1alpha1").is_none());
        let crd = json!({"metadata": {"name": "nodeshards.shard.volcano.sh"}, "spec": {"group": "shard.volcano.sh",
            "names": {"plural": "nodeshards", "kind": "NodeShard"}, "scope": "Cluster",
            "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}}}]}});
        for d in ResourceDef::from_crd(&crd).unwrap() {
            reg.add(d);
        }
        let d = reg
            .get("shard.volcano.sh", "v1alpha1", "nodeshards")
            .unwrap();
        assert!(d.status && !d.namespaced && d.generation);
        let groups = api_group_list(&reg);
        assert!(groups.to_string().contains("shard.volcano.sh/v1alpha1"));
        reg.remove("shard.volcano.sh", "nodeshards");
        assert!(api_group(&reg, "shard.volcano.sh").is_none());
    }
}
