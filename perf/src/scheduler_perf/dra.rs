//! scheduler_perf's DRA opcodes, ported from `test/integration/scheduler_perf/dra.go` of
//! kubernetes/kubernetes (Apache-2.0; the `resource.k8s.io/v1` version of 1.35/1.36):
//!
//! - `createResourceDriver` ([`create_resource_driver`]): for every node whose name matches the
//!   op's `nodes` glob (Go's `filepath.Match`, [`glob_match`]), in list order, one
//!   ResourceSlice named after the node, for that node only (`nodeName`), its own pool (the
//!   node's name, one slice), with `maxClaimsPerNode` devices `instance-<i>` carrying upstream's
//!   attributes (`model: A100`, `family: GPU`, `driverVersion: 1.2.3`, `dra.example.com/numa:
//!   <i>`) and capacity (`memory: 1Gi`) ([`resource_slice`]). Upstream then waits until the
//!   scheduler's own informer holds every slice; this harness cannot look into Magma's cache
//!   and returns once every slice is created.
//! - `allocResourceClaims` ([`alloc_resource_claims`]): every claim of the namespace (all
//!   namespaces when none is given) that has no allocation gets one, written to
//!   `status.allocation` as a previous scheduler would have: one claim at a time, nodes in
//!   random order, the first node the structured allocator finds devices on wins, against the
//!   devices every claim of the cluster already holds (including the ones allocated just
//!   before). Upstream runs kube-scheduler's allocator (`structured.NewAllocator`); this runs
//!   Magma's (`magma_engine::dra`: CEL selectors, `firstAvailable`, `matchAttribute`
//!   constraints, shared counters, device taints), fed by the objects as listed. The
//!   allocation's `nodeSelector` is upstream's `createNodeSelector`: the node itself
//!   (`matchFields metadata.name`) when a device is local to it, else the requirements of the
//!   devices' slice node selectors, else none (usable everywhere).

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use magma_engine::dra::allocator::{self, Allocation};
use magma_engine::dra::devices::{ClassInput, SliceInput};
use magma_engine::dra::{ClaimInput, ClaimSource, Dra, DraInput, PodClaim};
use magma_engine::model::{
    Interner, NodeInput, NodeMeta, ResourceRegistry, SelectorRequirementInput, SelectorTermInput,
    compile_node, parse_scaled,
};
use magma_kube::convert::dra as convert;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// `resource.k8s.io/v1`, the only DRA version kube-sim serves (and the one upstream writes).
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// `resource.k8s.io/v1beta2`: the same schema as `v1` (upstream's templates still use it).
pub const V1BETA2: &str = "resource.k8s.io/v1beta2";

/// The API of a `resource.k8s.io/v1` kind by its plural.
pub fn api(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("resource.k8s.io", "v1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Go's `path/filepath.Match` (Unix, separator `/`): `*` any run of non-separators, `?` one
/// non-separator, `[...]` a class (`^` negates, `a-z` ranges, `\` escapes), `\c` the character
/// `c`. A malformed pattern is an error (`syntax error in pattern`).
pub fn glob_match(pattern: &str, name: &str) -> Result<bool, String> {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    validate(&p)?;
    Ok(matches_from(&p, &s))
}

const BAD_PATTERN: &str = "syntax error in pattern";

fn validate(p: &[char]) -> Result<(), String> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(BAD_PATTERN.into());
                }
                i += 2;
            }
            '[' => i += class(p, i).ok_or(BAD_PATTERN)?.2,
            _ => i += 1,
        }
    }
    Ok(())
}

/// The class starting at `p[i] == '['`: (negated, ranges, length including the brackets).
#[allow(clippy::type_complexity)]
fn class(p: &[char], i: usize) -> Option<(bool, Vec<(char, char)>, usize)> {
    let mut j = i + 1;
    let negated = p.get(j) == Some(&'^');
    if negated {
        j += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *p.get(j)?;
        if c == ']' && !first {
            return Some((negated, ranges, j + 1 - i));
        }
        first = false;
        let lo = char_at(p, &mut j)?;
        let hi = if p.get(j) == Some(&'-') {
            j += 1;
            char_at(p, &mut j)?
        } else {
            lo
        };
        ranges.push((lo, hi));
    }
}

/// One (possibly escaped) character of a class; `]` and `-` unescaped are malformed there
/// (Go's `getEsc`).
fn char_at(p: &[char], j: &mut usize) -> Option<char> {
    let c = *p.get(*j)?;
    match c {
        '-' | ']' => None,
        '\\' => {
            let e = *p.get(*j + 1)?;
            *j += 2;
            Some(e)
        }
        _ => {
            *j += 1;
            Some(c)
        }
    }
}

fn matches_from(p: &[char], s: &[char]) -> bool {
    let Some(&c) = p.first() else {
        return s.is_empty();
    };
    match c {
        '*' => {
            let rest = &p[p.iter().take_while(|&&c| c == '*').count()..];
            for i in 0..=s.len() {
                if matches_from(rest, &s[i..]) {
                    return true;
                }
                if s.get(i) == Some(&'/') {
                    return false;
                }
            }
            false
        }
        '?' => s.first().is_some_and(|&x| x != '/') && matches_from(&p[1..], &s[1..]),
        '[' => {
            let Some((negated, ranges, len)) = class(p, 0) else {
                return false;
            };
            let Some(&x) = s.first().filter(|&&x| x != '/') else {
                return false;
            };
            let hit = ranges.iter().any(|&(lo, hi)| lo <= x && x <= hi);
            hit != negated && matches_from(&p[len..], &s[1..])
        }
        '\\' => s.first() == p.get(1) && matches_from(&p[2..], &s[1..]),
        c => s.first() == Some(&c) && matches_from(&p[1..], &s[1..]),
    }
}

/// Upstream's `resourceSlice(driverName, nodeName, capacity)`.
pub fn resource_slice(driver: &str, node: &str, capacity: usize) -> Value {
    let devices: Vec<Value> = (0..capacity)
        .map(|i| {
            json!({
                "name": format!("instance-{i}"),
                "attributes": {
                    "model": {"string": "A100"},
                    "family": {"string": "GPU"},
                    "driverVersion": {"version": "1.2.3"},
                    "dra.example.com/numa": {"int": i},
                },
                "capacity": {"memory": {"value": "1Gi"}},
            })
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1},
            "devices": devices,
        }
    })
}

/// `createResourceDriver`: the slices made (their names).
pub async fn create_resource_driver(
    client: &kube::Client,
    driver: &str,
    nodes_glob: &str,
    max_claims_per_node: usize,
) -> anyhow::Result<Vec<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut driver_nodes = Vec::new();
    for n in nodes
        .list(&ListParams::default())
        .await
        .context("list nodes")?
    {
        let name = n.metadata.name.unwrap_or_default();
        let hit = glob_match(nodes_glob, &name).map_err(|e| {
            anyhow::anyhow!("matching glob pattern {nodes_glob:?} against node name {name:?}: {e}")
        })?;
        if hit {
            driver_nodes.push(name);
        }
    }
    let slices = api(client, "ResourceSlice", "resourceslices", None);
    let mut made = Vec::with_capacity(driver_nodes.len());
    for node in driver_nodes {
        let d: DynamicObject =
            serde_json::from_value(resource_slice(driver, &node, max_claims_per_node))?;
        slices
            .create(&PostParams::default(), &d)
            .await
            .with_context(|| format!("create node resource slice {node}"))?;
        made.push(node);
    }
    Ok(made)
}

// ---------------------------------------------------------------------------------------------
// Objects as Magma's engine takes them.

fn s(v: &Value, ptr: &str) -> String {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// An object as listed, typed (`resource.k8s.io/v1`).
fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> anyhow::Result<T> {
    serde_json::from_value(v.clone()).with_context(|| {
        format!(
            "{} {}",
            v["kind"].as_str().unwrap_or("object"),
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        )
    })
}

/// A ResourceSlice, converted as the scheduler's adapter converts it.
pub fn slice_input(v: &Value) -> anyhow::Result<SliceInput> {
    match convert::slice_input(&typed(v)?) {
        Some(Ok(s)) => Ok(s),
        Some(Err(r)) => anyhow::bail!("resourceslice {}: {}", r.name, r.error),
        None => anyhow::bail!("a resourceslice without a name"),
    }
}

/// A DeviceClass, converted as the scheduler's adapter converts it.
pub fn class_input(v: &Value) -> anyhow::Result<ClassInput> {
    convert::class_input(&typed(v)?).context("a deviceclass without a name")
}

/// A ResourceClaim, converted as the scheduler's adapter converts it (what Magma cannot
/// allocate as asked is in `ClaimInput::unsupported`).
pub fn claim_input(v: &Value) -> anyhow::Result<ClaimInput> {
    convert::claim_input(&typed(v)?)
        .map(|(c, _)| c)
        .context("a resourceclaim without a namespace or name")
}

/// What the allocator reads of a node: its name and labels.
fn node_meta(
    n: &Node,
    interner: &mut Interner,
    registry: &mut ResourceRegistry,
) -> anyhow::Result<Arc<NodeMeta>> {
    let input = NodeInput {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ready: true,
        ..NodeInput::default()
    };
    Ok(compile_node(&input, interner, registry)
        .map_err(|e| anyhow::anyhow!("node {}: {e}", input.name))?
        .meta)
}

fn term_json(t: &SelectorTermInput) -> Value {
    let reqs = |rs: &[SelectorRequirementInput]| -> Vec<Value> {
        rs.iter()
            .map(|r| {
                let mut o = json!({"key": r.key, "operator": r.operator});
                if !r.values.is_empty() {
                    o["values"] = json!(r.values);
                }
                o
            })
            .collect()
    };
    let mut o = serde_json::Map::new();
    if !t.match_expressions.is_empty() {
        o.insert("matchExpressions".into(), json!(reqs(&t.match_expressions)));
    }
    if !t.match_fields.is_empty() {
        o.insert("matchFields".into(), json!(reqs(&t.match_fields)));
    }
    Value::Object(o)
}

/// `allocResourceClaims`: how many claims it allocated.
pub async fn alloc_resource_claims(
    client: &kube::Client,
    namespace: Option<&str>,
) -> anyhow::Result<usize> {
    use rand::seq::SliceRandom;
    let lp = ListParams::default();
    let listed = |list: kube::core::ObjectList<DynamicObject>| -> anyhow::Result<Vec<Value>> {
        list.items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(anyhow::Error::from))
            .collect()
    };
    let todo = listed(
        api(client, "ResourceClaim", "resourceclaims", namespace)
            .list(&lp)
            .await
            .context("list claims")?,
    )?;
    // The cluster's state, as the informers of upstream's DRA manager see it.
    let all_claims = listed(
        api(client, "ResourceClaim", "resourceclaims", None)
            .list(&lp)
            .await?,
    )?;
    let slices = listed(
        api(client, "ResourceSlice", "resourceslices", None)
            .list(&lp)
            .await?,
    )?;
    let classes = listed(
        api(client, "DeviceClass", "deviceclasses", None)
            .list(&lp)
            .await?,
    )?;
    let node_list = Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .context("list nodes")?;

    let mut interner = Interner::default();
    let mut registry = ResourceRegistry::default();
    let mut dra = Dra::default();
    let slice_inputs: Vec<SliceInput> = slices
        .iter()
        .map(slice_input)
        .collect::<anyhow::Result<_>>()?;
    let mut errors = Vec::new();
    errors.extend(
        dra.apply(DraInput::SliceReset(slice_inputs), &mut interner)
            .errors,
    );
    errors.extend(
        dra.apply(
            DraInput::ClassReset(
                classes
                    .iter()
                    .map(class_input)
                    .collect::<anyhow::Result<_>>()?,
            ),
            &mut interner,
        )
        .errors,
    );
    errors.extend(
        dra.apply(
            DraInput::ClaimReset(
                all_claims
                    .iter()
                    .map(claim_input)
                    .collect::<anyhow::Result<_>>()?,
            ),
            &mut interner,
        )
        .errors,
    );
    if let Some(e) = errors.first() {
        anyhow::bail!("the allocator cannot take the cluster's DRA objects: {e}");
    }
    let mut nodes: Vec<Arc<NodeMeta>> = node_list
        .items
        .iter()
        .map(|n| node_meta(n, &mut interner, &mut registry))
        .collect::<anyhow::Result<_>>()?;

    let total = todo.len();
    let mut allocated = 0;
    let mut rng = rand::rng();
    'claims: for (i, claim) in todo.into_iter().enumerate() {
        if claim
            .pointer("/status/allocation")
            .is_some_and(|a| a.is_object())
        {
            continue;
        }
        let ns = s(&claim, "/metadata/namespace");
        let name = s(&claim, "/metadata/name");
        let consumer = format!("allocResourceClaims/{ns}/{name}");
        let pod_claims = [PodClaim {
            name: Arc::from("claim"),
            source: ClaimSource::Named(Arc::from(name.as_str())),
        }];
        let resolved = dra.resolve(&ns, &consumer, &pod_claims, true, &mut interner);
        if let Some(b) = resolved.blocked {
            let consumer = resolved.names(magma_engine::model::PodNames {
                namespace: &ns,
                name: &consumer,
                resource_claims: &pod_claims,
                ..Default::default()
            });
            anyhow::bail!("allocate claim {ns}/{name}: {}", b.message(&consumer));
        }
        let snapshot = dra.snapshot();
        nodes.shuffle(&mut rng);
        for node in &nodes {
            let Ok(given): Result<Allocation, _> =
                allocator::allocate(&snapshot.devices, &snapshot.in_use, &resolved.claims, node)
            else {
                continue;
            };
            // The engine's allocation: the devices and upstream's node selector for them.
            let Some(written) = dra
                .assume(
                    &Arc::from(consumer.as_str()),
                    &resolved.claims,
                    &given,
                    node,
                    &mut interner,
                )
                .into_iter()
                .find(|w| w.devices.is_some())
            else {
                continue;
            };
            let devices = written.devices.unwrap_or_default();
            let results: Vec<Value> = devices
                .iter()
                .map(|d| {
                    let mut r = json!({"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device});
                    if d.admin_access {
                        r["adminAccess"] = json!(true);
                    }
                    // A share of a device that allows multiple allocations: a new shareID.
                    if let Some(share) = &d.share {
                        r["shareID"] = json!(uuid::Uuid::new_v4().to_string());
                        r["consumedCapacity"] =
                            share.consumed.iter().map(|(k, q)| (k.clone(), json!(q))).collect();
                    }
                    r
                })
                .collect();
            let mut allocation = json!({"devices": {"results": results}});
            if let Some(t) = &written.node_selector {
                allocation["nodeSelector"] = json!({"nodeSelectorTerms": [term_json(t)]});
            }
            let mut obj = claim;
            obj["status"]["allocation"] = allocation;
            let d: DynamicObject = serde_json::from_value(obj)?;
            api(client, "ResourceClaim", "resourceclaims", Some(&ns))
                .replace_status(&name, &PostParams::default(), &d)
                .await
                .with_context(|| format!("update claim status with allocation ({ns}/{name})"))?;
            allocated += 1;
            continue 'claims;
        }
        anyhow::bail!("Could not allocate claim {i} out of {total} ({ns}/{name})");
    }
    Ok(allocated)
}

/// What the workload left in the cluster's ResourceClaims (checked after its last op): every
/// device given to at most one claim, and every bound pod's claims allocated on its node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraSummary {
    pub slices: usize,
    pub devices: usize,
    /// Per namespace: (claims, allocated claims).
    pub claims: BTreeMap<String, (usize, usize)>,
    /// Devices allocated to claims (admin access excepted).
    pub devices_allocated: usize,
    /// `driver/pool/device` allocated to more than one claim (shares of a device that allows
    /// multiple allocations excepted: those are checked against its capacity).
    pub shared_devices: Vec<String>,
    /// `driver/pool/device capacity`: shares consuming more than the device has.
    pub overcommitted_shares: Vec<String>,
    /// Bound pods using claims.
    pub bound_pods_with_claims: usize,
    /// `<namespace>/<pod> on <node>: <why>`: bound with a claim not made, not allocated, or
    /// allocated for another node.
    pub bound_pods_off_their_claims: Vec<String>,
}

/// The node a claim's allocation is pinned to (`matchFields metadata.name In [node]`), if any.
fn pinned_node(alloc: &Value) -> Option<String> {
    let terms = arr(alloc, "/nodeSelector/nodeSelectorTerms");
    let [t] = terms else { return None };
    arr(t, "/matchFields")
        .iter()
        .find(|f| s(f, "/key") == "metadata.name" && s(f, "/operator") == "In")
        .and_then(|f| arr(f, "/values").first()?.as_str().map(str::to_owned))
}

/// The [`DraSummary`] of the cluster now; `None` when it has no slices and no claims.
pub async fn summary(client: &kube::Client) -> anyhow::Result<Option<DraSummary>> {
    use k8s_openapi::api::core::v1::Pod;
    let lp = ListParams::default();
    let to_values = |list: kube::core::ObjectList<DynamicObject>| -> Vec<Value> {
        list.items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect()
    };
    // Pods before claims: the scheduler is still running, and a pod listed bound keeps its
    // claims allocated (only its deletion, over by now, releases them), while a claim listed
    // first could be allocated for a pod bound just before the pods are listed.
    let pods = Api::<Pod>::all(client.clone()).list(&lp).await?;
    let slices = to_values(
        api(client, "ResourceSlice", "resourceslices", None)
            .list(&lp)
            .await?,
    );
    let claims = to_values(
        api(client, "ResourceClaim", "resourceclaims", None)
            .list(&lp)
            .await?,
    );
    if slices.is_empty() && claims.is_empty() {
        return Ok(None);
    }
    let mut out = DraSummary {
        slices: slices.len(),
        devices: slices.iter().map(|x| arr(x, "/spec/devices").len()).sum(),
        ..DraSummary::default()
    };
    let mut owners: HashMap<String, usize> = HashMap::new();
    // (device, capacity) → milli-units the shares of it consume.
    let mut consumed: HashMap<(String, String), i128> = HashMap::new();
    // (namespace, name) → the node its allocation is pinned to (`Some(None)`: anywhere).
    let mut allocated: HashMap<(String, String), Option<String>> = HashMap::new();
    for c in &claims {
        let ns = s(c, "/metadata/namespace");
        let e = out.claims.entry(ns.clone()).or_default();
        e.0 += 1;
        let Some(alloc) = c.pointer("/status/allocation").filter(|a| a.is_object()) else {
            continue;
        };
        e.1 += 1;
        allocated.insert((ns, s(c, "/metadata/name")), pinned_node(alloc));
        for r in arr(alloc, "/devices/results") {
            if r.get("adminAccess").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            out.devices_allocated += 1;
            let id = format!("{}/{}/{}", s(r, "/driver"), s(r, "/pool"), s(r, "/device"));
            if r.get("shareID").is_some_and(Value::is_string) {
                for (name, q) in r
                    .get("consumedCapacity")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let m = q
                        .as_str()
                        .map_or(Ok(0), |q| parse_scaled("capacity", q, 1000));
                    *consumed.entry((id.clone(), name.clone())).or_default() +=
                        i128::from(m.unwrap_or(i64::MAX));
                }
                continue;
            }
            *owners.entry(id).or_default() += 1;
        }
    }
    // What the shares consume against what the devices publish.
    for sl in &slices {
        let (driver, pool) = (s(sl, "/spec/driver"), s(sl, "/spec/pool/name"));
        for d in arr(sl, "/spec/devices") {
            let id = format!("{driver}/{pool}/{}", s(d, "/name"));
            for (name, c) in d
                .get("capacity")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let have = c
                    .get("value")
                    .and_then(Value::as_str)
                    .and_then(|q| parse_scaled("capacity", q, 1000).ok())
                    .map_or(0, i128::from);
                if consumed
                    .get(&(id.clone(), name.clone()))
                    .is_some_and(|&u| u > have)
                {
                    out.overcommitted_shares.push(format!("{id} {name}"));
                }
            }
        }
    }
    out.overcommitted_shares.sort();
    out.shared_devices = owners
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id)
        .collect();
    out.shared_devices.sort();
    for p in pods {
        let Some(spec) = &p.spec else { continue };
        let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let Some(pod_claims) = spec.resource_claims.as_ref().filter(|c| !c.is_empty()) else {
            continue;
        };
        out.bound_pods_with_claims += 1;
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let statuses = p
            .status
            .as_ref()
            .and_then(|st| st.resource_claim_statuses.as_ref());
        let pod = p.metadata.name.as_deref().unwrap_or("");
        for pc in pod_claims {
            let name = pc.resource_claim_name.clone().or_else(|| {
                statuses?
                    .iter()
                    .find(|st| st.name == pc.name)?
                    .resource_claim_name
                    .clone()
            });
            let why = match name {
                None => format!("no claim made for {}", pc.name),
                Some(name) => match allocated.get(&(ns.clone(), name.clone())) {
                    None => format!("claim {name} not allocated"),
                    Some(Some(pinned)) if pinned != node => {
                        format!("claim {name} allocated for {pinned}")
                    }
                    Some(_) => continue,
                },
            };
            out.bound_pods_off_their_claims
                .push(format!("{ns}/{pod} on {node}: {why}"));
        }
    }
    out.bound_pods_off_their_claims.sort();
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_go_filepath_match() {
        let m = |p: &str, s: &str| glob_match(p, s).unwrap();
        assert!(m("scheduler-perf-dra-*", "scheduler-perf-dra-x7k2q"));
        assert!(!m("scheduler-perf-dra-*", "node-0-abcde"));
        assert!(m("*", "anything"));
        assert!(!m("*", "a/b"));
        assert!(m("a?c", "abc") && !m("a?c", "a/c"));
        assert!(m("n[0-9]", "n5") && !m("n[^0-9]", "n5") && m("n[^0-9]", "nx"));
        assert!(m("a\\*", "a*") && !m("a\\*", "ab"));
        assert!(m("*-dra-*", "x-dra-y"));
        assert!(glob_match("n[", "n").is_err());
        assert!(glob_match("n\\", "n").is_err());
        assert!(glob_match("[]", "x").is_err());
    }

    #[test]
    fn the_driver_slice_is_upstreams() {
        let v = resource_slice("test-driver.cdi.k8s.io", "n1", 2);
        assert_eq!(v["metadata"]["name"], "n1");
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert_eq!(
            v["spec"]["pool"],
            json!({"name": "n1", "resourceSliceCount": 1})
        );
        assert_eq!(v["spec"]["devices"][1]["name"], "instance-1");
        assert_eq!(
            v["spec"]["devices"][1]["attributes"]["dra.example.com/numa"]["int"],
            1
        );
        let si = slice_input(&v).unwrap();
        assert_eq!(
            si.nodes,
            magma_engine::dra::devices::NodesInput::Node("n1".into())
        );
        assert_eq!(si.devices.len(), 2);
        assert!(si.devices[0].attributes.contains(&(
            "driverVersion".into(),
            magma_engine::dra::cel::AttrValue::Version("1.2.3".into())
        )));
        assert_eq!(
            si.devices[0].capacity,
            [("memory".to_string(), "1Gi".to_string())]
        );
    }

    #[test]
    fn claims_convert_with_requests_constraints_and_allocation() {
        let c = claim_input(&json!({
            "metadata": {"namespace": "ns", "name": "c", "uid": "u",
                "ownerReferences": [{"uid": "p", "controller": true}]},
            "spec": {"devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "k", "count": 2,
                        "selectors": [{"cel": {"expression": "true"}}],
                        "tolerations": [{"key": "t", "operator": "Exists"}]}},
                    {"name": "b", "firstAvailable": [{"name": "s0", "deviceClassName": "x"}]}
                ],
                "constraints": [{"requests": ["a"], "matchAttribute": "d/x"}]
            }},
            "status": {"allocation": {"devices": {"results": [
                {"request": "a", "driver": "d", "pool": "p", "device": "i"}]}}}
        }))
        .unwrap();
        assert_eq!(c.owner_uid.as_deref(), Some("p"));
        let a = c.requests[0].exactly.as_ref().unwrap();
        assert_eq!((a.class.as_str(), a.count, a.selectors.len()), ("k", 2, 1));
        assert_eq!(a.tolerations[0].operator, "Exists");
        assert_eq!(c.requests[1].first_available[0].name, "s0");
        assert_eq!(c.constraints[0].match_attribute, "d/x");
        assert_eq!(c.allocation.unwrap().devices[0].device, "i");
    }
}
