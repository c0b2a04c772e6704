//! Pod-level resources (`spec.resources`, KEP-2837, on by default since v1.34): the defaults of
//! `SetDefaults_Pod` (`defaultHugePagePodLimits`, `defaultPodRequests`, `defaultPodLimits`, after
//! container requests default to limits), the validation of `validatePodResources` (supported
//! names, quantities, requests against limits, non-overcommitable resources, hugepages,
//! windows pods) and `validatePodResourceConsistency` (pod requests cover the containers'
//! aggregate requests, pod hugepage limits their aggregate hugepage limits, no container limit
//! above the pod's), and the aggregation of `k8s.io/component-helpers/resource`
//! (`AggregateContainerRequests` / `AggregateContainerLimits`: regular containers and sidecars
//! summed, each init container on top of the sidecars started before it, the maximum of both).
//! The containers' own resources are validated here too (`ValidateContainerResourceRequirements`:
//! container resource names, extended resources whole and requested as limited).
//! Quantities in messages are rendered canonically, as `resource.Quantity.String()` does.

use crate::meta::Pointer;
use crate::validation::{self, FieldError, QuantityFormat, canonical_nanos, quote};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The prefix of hugepage resource names.
pub(crate) const HUGEPAGES_PREFIX: &str = "hugepages-";

/// `IsSupportedPodLevelResource`: cpu, memory and hugepages.
pub(crate) fn supported(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with(HUGEPAGES_PREFIX)
}

fn is_hugepage(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

/// `IsNativeResource`: no domain, or a `kubernetes.io/` one.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsOvercommitAllowed`: native resources other than hugepages.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_hugepage(name)
}

/// `IsStandardResourceName` (container, quota and hugepage names).
fn is_standard(name: &str) -> bool {
    const STANDARD: &[&str] = &[
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    ];
    STANDARD.contains(&name) || is_hugepage(name) || name.starts_with("requests.hugepages-")
}

/// `IsExtendedResourceName`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && validation::qualified_name(&format!("requests.{name}")).is_empty()
}

/// `IsIntegerResourceName`.
fn is_integer(name: &str) -> bool {
    matches!(
        name,
        "pods"
            | "resourcequotas"
            | "services"
            | "replicationcontrollers"
            | "secrets"
            | "configmaps"
            | "persistentvolumeclaims"
            | "services.nodeports"
            | "services.loadbalancers"
    ) || is_extended(name)
}

/// A quantity with the format `String()` prints it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Q {
    nanos: i128,
    format: QuantityFormat,
}

impl Q {
    fn of(v: &Value) -> Option<Self> {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        let nanos = validation::parse_quantity(&text).ok()?;
        let format = validation::quantity_format(&text);
        Some(Self { nanos, format })
    }

    fn text(self) -> String {
        canonical_nanos(self.nanos, self.format)
    }
}

type List = BTreeMap<String, Q>;

fn list_at(obj: &Value, ptr: &str) -> List {
    obj.at(ptr)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Q::of(v).map(|q| (k.clone(), q)))
        .collect()
}

fn add(to: &mut List, from: &List) {
    for (k, q) in from {
        to.entry(k.clone())
            .and_modify(|t| t.nanos += q.nanos)
            .or_insert(*q);
    }
}

fn max_into(to: &mut List, from: &List) {
    for (k, q) in from {
        match to.get(k) {
            Some(t) if t.nanos >= q.nanos => {}
            _ => {
                to.insert(k.clone(), *q);
            }
        }
    }
}

fn containers<'a>(spec: &'a Value, list: &str) -> &'a [Value] {
    spec.get(list)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn restartable(c: &Value) -> bool {
    c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// `aggregateContainerResourcesByFn` over the spec's `requests` or `limits`: regular containers
/// and sidecars add up; an init container needs itself plus the sidecars started before it;
/// the pod needs the larger of the two.
fn aggregate(spec: &Value, which: &str) -> List {
    let ptr = format!("/resources/{which}");
    let mut result = List::new();
    for c in containers(spec, "containers") {
        add(&mut result, &list_at(c, &ptr));
    }
    let mut sidecars = List::new();
    let mut init = List::new();
    for c in containers(spec, "initContainers") {
        let own = list_at(c, &ptr);
        let need = if restartable(c) {
            add(&mut result, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut combined = own;
            add(&mut combined, &sidecars);
            combined
        };
        max_into(&mut init, &need);
    }
    max_into(&mut result, &init);
    result
}

/// `AggregateContainerRequests` (spec only) as a name → canonical text map, for callers outside
/// this module (the simulated kubelet).
pub(crate) fn aggregate_requests(spec: &Value) -> BTreeMap<String, i128> {
    aggregate(spec, "requests")
        .into_iter()
        .map(|(k, q)| (k, q.nanos))
        .collect()
}

fn all_containers_have_limit(spec: &Value, name: &str) -> bool {
    ["initContainers", "containers"].iter().all(|l| {
        containers(spec, l).iter().all(|c| {
            c.at("/resources/limits")
                .and_then(Value::as_object)
                .is_some_and(|m| m.contains_key(name))
        })
    })
}

fn non_empty(spec: &Value, which: &str) -> bool {
    spec.at(&format!("/resources/{which}"))
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty())
}

/// `IsPodLevelResourcesSet` / `IsPodLevelRequestsSet` / `IsPodLevelLimitsSet`: a supported name
/// in the given lists.
fn level_set(spec: &Value, which: &[&str]) -> bool {
    which.iter().any(|w| {
        spec.at(&format!("/resources/{w}"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.keys().any(|k| supported(k)))
    })
}

/// Whether the pod spec sets pod-level resources (`IsPodLevelResourcesSet`).
pub(crate) fn is_set(spec: &Value) -> bool {
    level_set(spec, &["requests", "limits"])
}

fn resources_map<'a>(spec: &'a mut Value, which: &str) -> &'a mut Map<String, Value> {
    let r = spec
        .as_object_mut()
        .expect("spec object")
        .entry("resources")
        .or_insert_with(|| json!({}));
    if !r.is_object() {
        *r = json!({});
    }
    let m = r
        .as_object_mut()
        .expect("resources object")
        .entry(which)
        .or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut().expect("list object")
}

/// The pod-level defaults of `SetDefaults_Pod` on a pod spec whose container requests were
/// already defaulted from their limits.
pub(crate) fn default_spec(spec: &mut Value) {
    if !spec.get("resources").is_some_and(Value::is_object) {
        return;
    }
    default_hugepage_limits(spec);
    default_requests(spec);
    default_limits(spec);
}

/// `defaultHugePagePodLimits`.
fn default_hugepage_limits(spec: &mut Value) {
    if !non_empty(spec, "limits") && !non_empty(spec, "requests") {
        return;
    }
    let aggr = aggregate(spec, "limits");
    let requests = list_at(spec, "/resources/requests");
    let limits = list_at(spec, "/resources/limits");
    let add: Vec<(String, Q)> = aggr
        .into_iter()
        .filter(|(k, _)| is_hugepage(k) && !requests.contains_key(k) && !limits.contains_key(k))
        .collect();
    if !add.is_empty() {
        let m = resources_map(spec, "limits");
        for (k, q) in add {
            m.insert(k, json!(q.text()));
        }
    }
}

/// `defaultPodRequests`: with pod-level limits, overcommitable supported resources the
/// containers request default to the containers' aggregate, and every supported resource with
/// a pod-level limit but no request to that limit.
fn default_requests(spec: &mut Value) {
    if !non_empty(spec, "limits") {
        return;
    }
    let requests = list_at(spec, "/resources/requests");
    let mut raw_requests: Map<String, Value> = spec
        .at("/resources/requests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let before = raw_requests.len();
    for (k, q) in aggregate(spec, "requests") {
        if !requests.contains_key(&k) && supported(&k) && overcommit_allowed(&k) {
            raw_requests.insert(k, json!(q.text()));
        }
    }
    let limits: Map<String, Value> = spec
        .at("/resources/limits")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in limits {
        if !raw_requests.contains_key(&k) && supported(&k) {
            raw_requests.insert(k, v);
        }
    }
    if raw_requests.len() != before {
        *resources_map(spec, "requests") = raw_requests;
    }
}

/// `defaultPodLimits`: with pod-level requests and no pod-level limits, cpu and memory limits
/// default to the containers' aggregate limits when every container sets one.
fn default_limits(spec: &mut Value) {
    if level_set(spec, &["limits"]) || !level_set(spec, &["requests"]) {
        return;
    }
    let existing = list_at(spec, "/resources/limits");
    let add: Vec<(String, Q)> = aggregate(spec, "limits")
        .into_iter()
        .filter(|(k, _)| {
            !existing.contains_key(k)
                && supported(k)
                && overcommit_allowed(k)
                && all_containers_have_limit(spec, k)
        })
        .collect();
    if !add.is_empty() {
        let m = resources_map(spec, "limits");
        for (k, q) in add {
            m.insert(k, json!(q.text()));
        }
    }
}

fn sorted(m: Option<&Map<String, Value>>) -> Vec<(&String, &Value)> {
    let mut v: Vec<(&String, &Value)> = m.into_iter().flatten().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// A resource name as `field.Error` renders a bad `core.ResourceName`: as JSON (a quoted
/// string), `ErrorBody` rendering values of named types with `json.Marshal`.
fn invalid_name(path: &str, name: &str, detail: &str) -> FieldError {
    FieldError::invalid_str(path, name, detail)
}

/// `validateResourceName`: a qualified name, and a standard one when it has no domain.
fn common_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let errs: Vec<FieldError> = validation::qualified_name(name)
        .iter()
        .map(|m| invalid_name(path, name, m))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    if !name.contains('/') && !is_standard(name) {
        return vec![invalid_name(
            path,
            name,
            "must be a standard resource type or fully qualified",
        )];
    }
    Vec::new()
}

/// `validatePodResourceName`: a qualified, standard name that is supported at pod level.
fn resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let errs = common_resource_name(name, path);
    if !errs.is_empty() {
        return errs;
    }
    if !supported(name) {
        return vec![FieldError::not_supported(
            path,
            quote(name),
            &["cpu", "hugepages-", "memory"],
        )];
    }
    Vec::new()
}

/// `IsStandardContainerResourceName`.
fn is_standard_container(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_hugepage(name)
}

/// `validateContainerResourceName`: without a domain a container resource (cpu, memory,
/// ephemeral-storage, hugepages); with one, a native name (`kubernetes.io/` in it, e.g.
/// DRAExtendedResource's implicit `deviceclass.resource.kubernetes.io/<class>`) or an extended
/// resource name (`example.com/gpu`).
fn container_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = common_resource_name(name, path);
    if !name.contains('/') {
        if !is_standard_container(name) {
            errs.push(invalid_name(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(invalid_name(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

/// `ValidateResourceQuantityValue`.
fn quantity_value(name: &str, v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(q) = Q::of(v) else {
        return errs;
    };
    if q.nanos < 0 {
        errs.push(FieldError::invalid(
            path,
            quote(&q.text()),
            "must be greater than or equal to 0",
        ));
    }
    // The quantity is rendered by its `MarshalJSON` (`ErrorBody`): quoted, canonical.
    if is_integer(name) && q.nanos % 1_000_000_000 != 0 {
        errs.push(FieldError::invalid(
            path,
            quote(&q.text()),
            "must be an integer",
        ));
    }
    errs
}

/// `IsHugePageResourceValueDivisible`.
fn hugepage_divisible(name: &str, q: Q) -> bool {
    let Ok(page) = validation::parse_quantity(&name[HUGEPAGES_PREFIX.len()..]) else {
        return false;
    };
    if page <= 0 || page % 1_000_000_000 != 0 {
        return false;
    }
    let nanos = 1_000_000_000;
    let value = (q.nanos + nanos - 1).div_euclid(nanos);
    value % (page / nanos) == 0
}

/// `validateResourceRequirements` of `res` at `path`, names checked by `name_fn`
/// (`validatePodResourceName` at `spec.resources`, `validateContainerResourceName` for a
/// container's resources).
fn requirements(
    res: &Value,
    path: &str,
    name_fn: fn(&str, &str) -> Vec<FieldError>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let limits = res.get("limits").and_then(Value::as_object);
    let requests = res.get("requests").and_then(Value::as_object);
    let (mut lim_cm, mut req_cm, mut lim_huge, mut req_huge) = (false, false, false, false);
    let huge_err = |name: &str, v: &Value, p: &str| {
        let q = Q::of(v)?;
        (!hugepage_divisible(name, q)).then(|| {
            FieldError::invalid(
                p,
                quote(&q.text()),
                &format!("{} is not positive integer multiple of {name}", q.text()),
            )
        })
    };
    for (name, v) in sorted(limits) {
        let p = format!("{path}.limits[{name}]");
        errs.extend(name_fn(name, &p));
        errs.extend(quantity_value(name, v, &p));
        if is_hugepage(name) {
            lim_huge = true;
            errs.extend(huge_err(name, v, &p));
        }
        lim_cm |= matches!(name.as_str(), "cpu" | "memory");
    }
    for (name, v) in sorted(requests) {
        let p = format!("{path}.requests[{name}]");
        errs.extend(name_fn(name, &p));
        errs.extend(quantity_value(name, v, &p));
        match limits.and_then(|l| l.get(name)) {
            Some(l) => {
                if let (Some(q), Some(lq)) = (Q::of(v), Q::of(l)) {
                    if q.nanos != lq.nanos && !overcommit_allowed(name) {
                        errs.push(FieldError::invalid(
                            format!("{path}.requests"),
                            quote(&q.text()),
                            &format!("must be equal to {name} limit of {}", lq.text()),
                        ));
                    } else if q.nanos > lq.nanos {
                        errs.push(FieldError::invalid(
                            format!("{path}.requests"),
                            quote(&q.text()),
                            &format!(
                                "must be less than or equal to {name} limit of {}",
                                lq.text()
                            ),
                        ));
                    }
                }
            }
            None if !overcommit_allowed(name) => errs.push(FieldError::required(
                format!("{path}.limits"),
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
        if is_hugepage(name) {
            req_huge = true;
            errs.extend(huge_err(name, v, &p));
        }
        req_cm |= matches!(name.as_str(), "cpu" | "memory");
    }
    if !lim_cm && !req_cm && (req_huge || lim_huge) {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
    errs
}

/// `validatePodResourceConsistency`.
fn consistency(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let requests = list_at(spec, "/resources/requests");
    let limits = list_at(spec, "/resources/limits");
    for (name, ctr) in aggregate(spec, "requests") {
        if !supported(&name) {
            continue;
        }
        let Some(pod) = requests.get(&name) else {
            continue;
        };
        if ctr.nanos > pod.nanos {
            errs.push(FieldError::invalid(
                format!("{path}.requests[{name}]"),
                quote(&pod.text()),
                &format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    ctr.text()
                ),
            ));
        }
    }
    for (name, ctr) in aggregate(spec, "limits") {
        if !is_hugepage(&name) {
            continue;
        }
        let Some(pod) = limits.get(&name) else {
            continue;
        };
        if ctr.nanos > pod.nanos {
            errs.push(FieldError::invalid(
                format!("{path}.limits[{name}]"),
                quote(&pod.text()),
                &format!(
                    "must be greater than or equal to aggregate container limits of {}",
                    ctr.text()
                ),
            ));
        }
    }
    for (i, c) in containers(spec, "containers").iter().enumerate() {
        for (name, q) in list_at(c, "/resources/limits") {
            let Some(pod) = limits.get(&name) else {
                continue;
            };
            if q.nanos > pod.nanos {
                errs.push(FieldError::invalid(
                    format!("{path}.containers[{i}][{name}].limits"),
                    quote(&q.text()),
                    &format!("must be less than or equal to pod limits of {}", pod.text()),
                ));
            }
        }
    }
    errs
}

/// `validatePodResources` of a (defaulted) pod spec at `spec.resources`.
pub(crate) fn validate(spec: &Value) -> Vec<FieldError> {
    let Some(res) = spec.get("resources").filter(|r| !r.is_null()) else {
        return Vec::new();
    };
    let path = "spec.resources";
    if spec.at("/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden(
            path,
            "may not be set for a windows pod",
        )];
    }
    let mut errs = Vec::new();
    if res.get("claims").is_some_and(|c| !c.is_null()) {
        errs.push(FieldError::forbidden(
            format!("{path}.claims"),
            "claims cannot be set for Resources at pod-level",
        ));
    }
    errs.extend(requirements(res, path, resource_name));
    errs.extend(consistency(spec, path));
    errs
}

/// `ValidateContainerResourceRequirements` of each container, then each init container
/// (`validateContainers`, `validateInitContainers`) of a (defaulted) pod spec: container
/// resource names, non-negative quantities, whole numbers for extended resources, requests at
/// most the limits and, for resources that cannot be overcommitted (extended resources,
/// hugepages), equal to them and never without a limit.
pub(crate) fn validate_containers(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in containers(spec, list).iter().enumerate() {
            if let Some(res) = c.get("resources").filter(|r| r.is_object()) {
                let path = format!("spec.{list}[{i}].resources");
                errs.extend(requirements(res, &path, container_resource_name));
            }
        }
    }
    errs
}

/// The pod-level part of `ComputePodQOS`: None when the pod sets no pod-level resources (the
/// containers decide), else the class from the pod-level requests and limits (cpu and memory,
/// zero quantities ignored).
pub(crate) fn qos(spec: &Value) -> Option<&'static str> {
    if !is_set(spec) {
        return None;
    }
    let pick = |which: &str| -> BTreeMap<String, i128> {
        list_at(spec, &format!("/resources/{which}"))
            .into_iter()
            .filter(|(k, q)| matches!(k.as_str(), "cpu" | "memory") && q.nanos > 0)
            .map(|(k, q)| (k, q.nanos))
            .collect()
    };
    let (requests, limits) = (pick("requests"), pick("limits"));
    let mut guaranteed = true;
    if non_empty(spec, "limits") && !(limits.contains_key("cpu") && limits.contains_key("memory")) {
        guaranteed = false;
    }
    if requests.is_empty() && limits.is_empty() {
        return Some("BestEffort");
    }
    if guaranteed && requests.iter().any(|(k, q)| limits.get(k) != Some(q)) {
        guaranteed = false;
    }
    Some(if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    })
}

/// Requests default to limits when only limits are given (a container's resources).
pub(crate) fn default_container_requests(c: &mut Value) {
    let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let req = res.entry("requests").or_insert_with(|| json!({}));
    if let Some(req) = req.as_object_mut() {
        for (k, v) in limits {
            req.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec as the server defaults it: container requests from limits, then pod level.
    fn spec(v: Value) -> Value {
        let mut s = v;
        for l in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = s.get_mut(l) {
                cs.iter_mut().for_each(default_container_requests);
            }
        }
        default_spec(&mut s);
        s
    }

    #[test]
    fn aggregation_counts_sidecars_and_init_containers() {
        let s = json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]});
        let a = aggregate(&s, "requests");
        // Regular 500m + sidecar 1 = 1500m; the init container needs 2 + sidecar 1 = 3.
        assert_eq!(a["cpu"].text(), "3");
        assert_eq!(a["memory"].text(), "1Gi");
    }

    #[test]
    fn defaults() {
        // Limits only: requests default from the containers' requests, else the limits.
        let s = spec(
            json!({"resources": {"limits": {"cpu": "2", "memory": "2Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "250m"}}}]}),
        );
        assert_eq!(
            s["resources"]["requests"],
            json!({"cpu": "750m", "memory": "2Gi"})
        );
        // Requests only, every container with a cpu limit: the cpu limit is their sum.
        let s = spec(json!({"resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                           {"name": "b", "resources": {"limits": {"cpu": "2"}}}]}));
        assert_eq!(s["resources"]["limits"], json!({"cpu": "3"}));
        // Hugepage limits of the containers move up to the pod.
        let s = spec(json!({"resources": {"requests": {"memory": "1Gi"}},
            "containers": [{"name": "a", "resources": {"limits": {"hugepages-2Mi": "4Mi"}}},
                           {"name": "b", "resources": {"limits": {"hugepages-2Mi": "2Mi"}}}]}));
        assert_eq!(s["resources"]["limits"]["hugepages-2Mi"], "6Mi");
        assert_eq!(s["resources"]["requests"]["hugepages-2Mi"], "6Mi");
    }

    #[test]
    fn validation_messages() {
        let msgs = |v: Value| -> Vec<String> {
            validate(&spec(v)).iter().map(FieldError::message).collect()
        };
        assert_eq!(
            msgs(
                json!({"resources": {"requests": {"ephemeral-storage": "1Gi", "cpu": "1"}},
                "containers": [{"name": "c"}]})
            ),
            vec![
                "spec.resources.requests[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\""
            ]
        );
        assert_eq!(
            msgs(json!({"resources": {"requests": {"foo": "1"}}, "containers": []})),
            vec![
                "spec.resources.requests[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified"
            ]
        );
        assert_eq!(
            msgs(json!({"resources": {"limits": {"hugepages-2Mi": "3Mi"}}, "containers": []})),
            vec![
                "spec.resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": 3Mi is not positive integer multiple of hugepages-2Mi",
                "spec.resources.requests[hugepages-2Mi]: Invalid value: \"3Mi\": 3Mi is not positive integer multiple of hugepages-2Mi",
                "spec.resources: Forbidden: HugePages require cpu or memory",
            ]
        );
        assert_eq!(
            msgs(
                json!({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "containers": [{"name": "c", "resources": {"limits": {"memory": "2Gi"}}}]})
            ),
            vec![
                "spec.resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
                "spec.resources.containers[0][memory].limits: Invalid value: \"2Gi\": must be less than or equal to pod limits of 1Gi",
            ]
        );
        assert_eq!(
            msgs(json!({"resources": {"requests": {"cpu": "1"}},
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1500m"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "0.5"}}}]})),
            vec![
                "spec.resources.requests[cpu]: Invalid value: \"1\": must be greater than or equal to aggregate container requests of 2"
            ]
        );
        assert_eq!(
            msgs(
                json!({"os": {"name": "windows"}, "resources": {"requests": {"cpu": "1"}}, "containers": []})
            ),
            vec!["spec.resources: Forbidden: may not be set for a windows pod"]
        );
        assert!(msgs(json!({"resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi", "nvidia.com/gpu": "1"},
                                                      "limits": {"nvidia.com/gpu": "1"}}}]}))
        .is_empty());
    }

    #[test]
    fn pod_level_qos() {
        let q = |v: Value| qos(&v);
        assert_eq!(q(json!({"containers": []})), None);
        assert_eq!(
            q(
                json!({"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}})
            ),
            Some("Guaranteed")
        );
        assert_eq!(
            q(json!({"resources": {"requests": {"cpu": "1"}}})),
            Some("Burstable")
        );
    }

    /// `ValidateContainerResourceRequirements` around DRA: the implicit
    /// `deviceclass.resource.kubernetes.io/<class>` name is native (fractions, requests below
    /// limits allowed); an extended name (`example.com/gpu`) needs whole numbers, a limit and
    /// requests equal to it; names without a domain must be container resources.
    #[test]
    fn container_resource_names_and_extended_resources() {
        let msgs = |res: Value| -> Vec<String> {
            let s = spec(json!({"containers": [{"name": "c", "resources": res}]}));
            validate_containers(&s)
                .iter()
                .map(FieldError::message)
                .collect()
        };
        let none: Vec<String> = Vec::new();
        assert_eq!(
            msgs(json!({"limits": {"deviceclass.resource.kubernetes.io/gpu.example.com": "2"}})),
            none
        );
        assert_eq!(
            msgs(
                json!({"requests": {"deviceclass.resource.kubernetes.io/gpu.example.com": "500m"}})
            ),
            none
        );
        assert_eq!(msgs(json!({"limits": {"example.com/gpu": "2"}})), none);
        assert_eq!(
            msgs(json!({"requests": {"example.com/gpu": "1"}})),
            vec![
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
            ]
        );
        assert_eq!(
            msgs(json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}})),
            vec![
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"
            ]
        );
        assert_eq!(
            msgs(json!({"limits": {"example.com/gpu": "1.5"}})),
            vec![
                "spec.containers[0].resources.limits[example.com/gpu]: Invalid value: \"1500m\": must be an integer",
                "spec.containers[0].resources.requests[example.com/gpu]: Invalid value: \"1500m\": must be an integer",
            ]
        );
        assert_eq!(
            msgs(json!({"requests": {"gpu": "1", "pods": "1"}})),
            vec![
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                "spec.containers[0].resources.requests[pods]: Invalid value: \"pods\": must be a standard resource for containers",
            ]
        );
        assert_eq!(
            msgs(json!({"limits": {"requests.example.com/gpu": "1"}})),
            vec![
                "spec.containers[0].resources.limits[requests.example.com/gpu]: Invalid value: \"requests.example.com/gpu\": doesn't follow extended resource name standard",
                "spec.containers[0].resources.requests[requests.example.com/gpu]: Invalid value: \"requests.example.com/gpu\": doesn't follow extended resource name standard",
            ]
        );
        // Init containers are checked after the containers.
        let s = spec(
            json!({"initContainers": [{"name": "i", "resources": {"requests": {"example.com/gpu": "1"}}}],
            "containers": [{"name": "c", "resources": {"requests": {"example.com/fpga": "1"}}}]}),
        );
        assert_eq!(
            validate_containers(&s)
                .iter()
                .map(|e| e.field.clone())
                .collect::<Vec<_>>(),
            [
                "spec.containers[0].resources.limits",
                "spec.initContainers[0].resources.limits"
            ]
        );
    }
}
