//! The `pods/<name>/resize` subresource (in-place pod vertical scaling, on by default since
//! v1.33): what the real resize strategy keeps of a submitted pod and how `ValidatePodResize`
//! judges the result.
//!
//! Of the submitted pod only `spec.containers[*].resources` / `resizePolicy`,
//! `spec.initContainers[*].resources` / `resizePolicy` and the pod-level `spec.resources`
//! (InPlacePodLevelResourcesVerticalScaling, beta and on by default in v1.36) are taken, the
//! containers' copied into the stored pod by position; everything else (metadata, the rest of
//! the spec, status) is reset from the stored pod, so other changes are silently dropped. The
//! submitted pod is defaulted as decoding does (container requests from limits, then the
//! pod-level defaults). A submitted pod whose container lists differ in length or names is
//! refused instead (`containers may not be added or removed on resize`, `containers may not be
//! renamed or reordered on resize`). The merged pod is then validated: quantities (negative,
//! requests above limits), the pod-level resources as on create (`validatePodResources`), pods
//! that cannot be resized (static, windows), the QoS class (it may not change; computed from
//! the pod-level resources when set), the node's support (a running container that reports no
//! `resources` in its status), removed requests or limits (containers and pod level), memory
//! limit decreases or additions under the default `NotRequired` policy (containers), and that
//! only cpu and memory change (containers, sidecars and pod level; other init containers: not
//! at all).

use crate::error::ApiError;
use crate::kinds;
use crate::meta::Pointer;
use crate::validation::{self, FieldError, quantity_of, quote};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The annotation that marks a mirror (static) pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

const LISTS: [&str; 2] = ["containers", "initContainers"];

fn containers<'a>(pod: &'a Value, list: &str) -> &'a [Value] {
    pod.at(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn name_of(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// A `ResourceList` of a container (`which`: `requests` or `limits`), None when unset or null.
fn list<'a>(c: &'a Value, which: &str) -> Option<&'a Map<String, Value>> {
    c.get("resources")
        .and_then(|r| r.get(which))
        .and_then(Value::as_object)
}

/// A quantity as `resource.Quantity.String()` prints it (canonical form).
fn text(v: &Value) -> String {
    validation::canonical(v)
}

fn restartable(c: &Value) -> bool {
    c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// The stored pod after a resize request with body `submitted`, or the error the real server
/// answers (400 for a quantity that does not decode, 422 for the validation).
pub(crate) fn resize(old: &Value, mut submitted: Value, name: &str) -> Result<Value, ApiError> {
    for l in LISTS {
        for i in 0..containers(&submitted, l).len() {
            for which in ["requests", "limits"] {
                validation::decode_quantities(
                    &submitted,
                    &format!("/spec/{l}/{i}/resources/{which}"),
                )
                .map_err(|m| {
                    ApiError::bad_request(format!(
                        "Pod in version \"v1\" cannot be handled as a Pod: {m}"
                    ))
                })?;
            }
        }
    }
    for which in ["requests", "limits"] {
        validation::decode_quantities(&submitted, &format!("/spec/resources/{which}")).map_err(
            |m| {
                ApiError::bad_request(format!(
                    "Pod in version \"v1\" cannot be handled as a Pod: {m}"
                ))
            },
        )?;
    }
    // Decoding defaults the submitted pod: requests default to limits, then the pod-level
    // defaults.
    for l in LISTS {
        if let Some(Value::Array(cs)) = submitted.pointer_mut(&format!("/spec/{l}")) {
            cs.iter_mut()
                .for_each(crate::podres::default_container_requests);
        }
    }
    if let Some(spec) = submitted.get_mut("spec").filter(|s| s.is_object()) {
        crate::podres::default_spec(spec);
    }
    let mut errs = Vec::new();
    for l in LISTS {
        let (o, n) = (containers(old, l), containers(&submitted, l));
        if o.len() != n.len() {
            errs.push(FieldError::forbidden(
                format!("spec.{l}"),
                &format!("{l} may not be added or removed on resize"),
            ));
            continue;
        }
        for (i, (oc, nc)) in o.iter().zip(n).enumerate() {
            if name_of(oc) != name_of(nc) {
                errs.push(FieldError::forbidden(
                    format!("spec.{l}[{i}].name"),
                    &format!("{l} may not be renamed or reordered on resize"),
                ));
            }
        }
    }
    validation::check("", "Pod", name, errs)?;
    let mut new = old.clone();
    for l in LISTS {
        let n = containers(&submitted, l).to_vec();
        if let Some(Value::Array(cs)) = new.pointer_mut(&format!("/spec/{l}")) {
            for (c, nc) in cs.iter_mut().zip(n) {
                let c = c.as_object_mut().expect("containers are objects");
                for f in ["resources", "resizePolicy"] {
                    match nc.get(f) {
                        Some(v) if !v.is_null() => c.insert(f.into(), v.clone()),
                        _ => c.remove(f),
                    };
                }
            }
        }
    }
    // InPlacePodLevelResourcesVerticalScaling (beta, on by default in v1.36): the pod-level
    // resources are taken from the submitted pod too.
    if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        match submitted.at("/spec/resources").filter(|r| !r.is_null()) {
            Some(r) => {
                spec.insert("resources".into(), r.clone());
            }
            None => {
                spec.remove("resources");
            }
        }
    }
    validation::check("", "Pod", name, validate(old, &new))?;
    Ok(new)
}

/// `ValidateContainerResourceRequirements`, the quantity checks.
fn requirements(c: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let limits = list(c, "limits");
    let sorted = |m: Option<&Map<String, Value>>| -> BTreeMap<String, Value> {
        m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    let negative = |which: &str, k: &str, v: &Value| {
        (quantity_of(v).unwrap_or(0) < 0).then(|| {
            FieldError::invalid(
                format!("{path}.{which}[{k}]"),
                quote(&text(v)),
                "must be greater than or equal to 0",
            )
        })
    };
    for (k, v) in sorted(limits) {
        errs.extend(negative("limits", &k, &v));
    }
    for (k, v) in sorted(list(c, "requests")) {
        errs.extend(negative("requests", &k, &v));
        if let Some(l) = limits.and_then(|m| m.get(&k))
            && quantity_of(&v).unwrap_or(0) > quantity_of(l).unwrap_or(0)
        {
            errs.push(FieldError::invalid(
                format!("{path}.requests"),
                quote(&text(&v)),
                &format!("must be less than or equal to {k} limit of {}", text(l)),
            ));
        }
    }
    errs
}

/// `validateContainerResize`: no removed requests or limits, and memory limits only grow under
/// the `NotRequired` policy (the default).
fn container_resize(new: &Value, old: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let removed = |which: &str| {
        let n = list(new, which);
        list(old, which).is_some_and(|o| o.keys().any(|k| n.is_none_or(|n| !n.contains_key(k))))
    };
    if removed("requests") {
        errs.push(FieldError::forbidden(
            format!("{path}.requests"),
            "resource requests cannot be removed",
        ));
    }
    if removed("limits") {
        errs.push(FieldError::forbidden(
            format!("{path}.limits"),
            "resource limits cannot be removed",
        ));
    }
    let policy = new
        .get("resizePolicy")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("resourceName").and_then(Value::as_str) == Some("memory"))
        .and_then(|p| p.get("restartPolicy").and_then(Value::as_str))
        .unwrap_or("");
    if matches!(policy, "" | "NotRequired") {
        let field = format!("{path}.limits[memory]");
        match (memory_limit(new), memory_limit(old)) {
            (Some(n), Some(o)) if quantity_of(n).unwrap_or(0) < quantity_of(o).unwrap_or(0) => {
                errs.push(FieldError::forbidden(
                    field,
                    "memory limits cannot be decreased unless resizePolicy is RestartContainer",
                ));
            }
            (Some(_), None) => errs.push(FieldError::forbidden(
                field,
                "memory limits cannot be added unless resizePolicy is RestartContainer",
            )),
            _ => {}
        }
    }
    errs
}

fn memory_limit(c: &Value) -> Option<&Value> {
    list(c, "limits").and_then(|m| m.get("memory"))
}

/// `dropCPUMemoryResourcesFromContainer`: the container with its cpu and memory requests and
/// limits put back to the stored values (a list the stored container lacks stays unset).
fn without_cpu_memory(new: &Value, old: &Value) -> Value {
    let munge = |which: &str| -> Option<Value> {
        let o = list(old, which)?;
        let mut m = list(new, which).cloned().unwrap_or_default();
        for r in ["cpu", "memory"] {
            m.remove(r);
            if let Some(v) = o.get(r) {
                m.insert(r.into(), v.clone());
            }
        }
        Some(Value::Object(m))
    };
    let mut c = new.clone();
    let mut res = Map::new();
    for which in ["limits", "requests"] {
        if let Some(m) = munge(which) {
            res.insert(which.into(), m);
        }
    }
    c["resources"] = Value::Object(res);
    c
}

/// Semantic equality of two containers: quantities compare by value, absent and empty alike.
fn same_container(a: &Value, b: &Value) -> bool {
    let canon = |c: &Value| {
        let mut c = c.clone();
        for which in ["limits", "requests"] {
            if let Some(Value::Object(m)) = c.pointer_mut(&format!("/resources/{which}")) {
                for v in m.values_mut() {
                    if let Some(q) = quantity_of(v) {
                        *v = json!(q.to_string());
                    }
                }
            }
        }
        c
    };
    validation::same(Some(&canon(a)), Some(&canon(b)))
}

/// The pod-level part of a resize: set requests and limits may not be removed, and only cpu and
/// memory may change (`dropCPUMemoryResourcesFromPodLevelResources` compared with the stored
/// resources).
fn pod_level_resize(old: Option<&Value>, new: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = json!({});
    let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let wrap = |r: &Value| json!({"resources": r});
    let (ow, nw) = (wrap(o), wrap(n));
    let removed = |which: &str| {
        let nl = list(&nw, which);
        list(&ow, which)
            .is_some_and(|ol| ol.keys().any(|k| nl.is_none_or(|nl| !nl.contains_key(k))))
    };
    if removed("requests") {
        errs.push(FieldError::forbidden(
            "spec.resources.requests",
            "resource requests cannot be removed",
        ));
    }
    if removed("limits") {
        errs.push(FieldError::forbidden(
            "spec.resources.limits",
            "resource limits cannot be removed",
        ));
    }
    if !same_container(&without_cpu_memory(&nw, &ow), &ow) {
        errs.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    errs
}

/// `ValidatePodResize` of the merged pod `new` against the stored `old`.
fn validate(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for l in LISTS {
        for (i, c) in containers(new, l).iter().enumerate() {
            errs.extend(requirements(c, &format!("spec.{l}[{i}].resources")));
        }
    }
    errs.extend(crate::podres::validate(&new["spec"]));
    if old
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return vec![FieldError::forbidden("", "static pods cannot be resized")];
    }
    if old.at("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden("", "windows pods cannot be resized")];
    }
    let status_qos = old
        .at("/status/qosClass")
        .and_then(Value::as_str)
        .unwrap_or("");
    let old_qos = if status_qos.is_empty() {
        kinds::qos_class(&old["spec"])
    } else {
        status_qos
    };
    if old_qos != kinds::qos_class(&new["spec"]) {
        errs.push(FieldError::invalid(
            "spec",
            quote(status_qos),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    // Version skew: a running container whose status reports no resources is on a node without
    // in-place resize (only the first running container is looked at).
    let running = old
        .at("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| s.at("/state/running").is_some_and(|r| !r.is_null()));
    if running.is_some_and(|s| s.get("resources").is_none_or(Value::is_null)) {
        errs.push(FieldError::forbidden(
            "spec",
            "Pod running on node without support for resize",
        ));
    }
    let (old_init, new_init) = (
        containers(old, "initContainers"),
        containers(new, "initContainers"),
    );
    for (i, (o, n)) in old_init.iter().zip(new_init).enumerate() {
        if restartable(o) {
            errs.extend(container_resize(
                n,
                o,
                &format!("spec.initContainers[{i}].resources"),
            ));
        }
    }
    let (old_cs, new_cs) = (containers(old, "containers"), containers(new, "containers"));
    for (i, (o, n)) in old_cs.iter().zip(new_cs).enumerate() {
        errs.extend(container_resize(
            n,
            o,
            &format!("spec.containers[{i}].resources"),
        ));
    }
    for (o, n) in old_cs.iter().zip(new_cs) {
        if !same_container(&without_cpu_memory(n, o), o) {
            errs.push(FieldError::forbidden(
                "spec",
                "only cpu and memory resources are mutable",
            ));
        }
    }
    errs.extend(pod_level_resize(
        old.at("/spec/resources"),
        new.at("/spec/resources"),
    ));
    for (o, n) in old_init.iter().zip(new_init) {
        if restartable(n) {
            if !same_container(&without_cpu_memory(n, o), o) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "only cpu and memory resources for sidecar containers are mutable",
                ));
            }
        } else if !same_container(n, o) {
            errs.push(FieldError::forbidden(
                "spec",
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: Value) -> Value {
        let mut p = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}});
        kinds::default_pod(&mut p);
        p
    }

    fn message(r: Result<Value, ApiError>) -> String {
        r.unwrap_err().message
    }

    #[test]
    fn keeps_only_resources() {
        let old = pod(json!({"requests": {"cpu": "100m", "memory": "128Mi"}}));
        let mut sub = old.clone();
        sub["metadata"]["labels"]["a"] = json!("2");
        sub["spec"]["containers"][0]["image"] = json!("j");
        sub["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
        sub["status"]["phase"] = json!("Running");
        let new = resize(&old, sub, "p").unwrap();
        let mut want = old.clone();
        want["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
        assert_eq!(new, want);
    }

    #[test]
    fn refusals() {
        let old = pod(json!({"requests": {"cpu": "1", "memory": "1Gi"}}));
        let with = |r: Value| {
            let mut s = old.clone();
            s["spec"]["containers"][0]["resources"] = r;
            resize(&old, s, "p")
        };
        assert_eq!(
            message(with(
                json!({"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}})
            )),
            "Pod \"p\" is invalid: spec: Forbidden: only cpu and memory resources are mutable"
        );
        assert_eq!(
            message(with(json!({"requests": {"cpu": "1"}}))),
            "Pod \"p\" is invalid: spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed"
        );
        assert_eq!(
            message(with(
                json!({"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "1"}})
            )),
            "Pod \"p\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        );
        // "1000m" is the stored "1": semantically no change.
        assert!(with(json!({"requests": {"cpu": "1000m", "memory": "1Gi"}})).is_ok());
        let e = with(json!({"requests": {"cpu": "x", "memory": "1Gi"}})).unwrap_err();
        assert_eq!(e.code, 400);
        let mut renamed = old.clone();
        renamed["spec"]["containers"][0]["name"] = json!("d");
        assert_eq!(
            message(resize(&old, renamed, "p")),
            "Pod \"p\" is invalid: spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
        );
    }

    #[test]
    fn pods_that_cannot_resize() {
        let mut old = pod(json!({"requests": {"cpu": "1"}}));
        let mut s = old.clone();
        s["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2");
        // An old kubelet: a running container without reported resources.
        old["status"]["containerStatuses"] = json!([{"name": "c", "state": {"running": {}}}]);
        assert_eq!(
            message(resize(&old, s.clone(), "p")),
            "Pod \"p\" is invalid: spec: Forbidden: Pod running on node without support for resize"
        );
        old["status"]["containerStatuses"][0]["resources"] = json!({});
        assert!(resize(&old, s.clone(), "p").is_ok());
        old["metadata"]["annotations"] = json!({MIRROR_ANNOTATION: "x"});
        assert_eq!(
            message(resize(&old, s.clone(), "p")),
            "Pod \"p\" is invalid: : Forbidden: static pods cannot be resized"
        );
        old["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        old["spec"]["resources"] = json!({"requests": {"cpu": "1"}});
        let mut s = old.clone();
        s["spec"]["resources"]["requests"]["ephemeral-storage"] = json!("1Gi");
        assert_eq!(
            message(resize(&old, s, "p")),
            "Pod \"p\" is invalid: [spec.resources.requests[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\", spec: Forbidden: only cpu and memory resources are mutable]"
        );
        let mut s = old.clone();
        s["spec"]["resources"]["requests"]["cpu"] = json!("2");
        let new = resize(&old, s, "p").unwrap();
        assert_eq!(new["spec"]["resources"], json!({"requests": {"cpu": "2"}}));
        let mut s = old.clone();
        s["spec"]["resources"] = json!({"requests": {"memory": "1Gi"}});
        assert_eq!(
            message(resize(&old, s, "p")),
            "Pod \"p\" is invalid: spec.resources.requests: Forbidden: resource requests cannot be removed"
        );
    }

    #[test]
    fn qos_and_init_containers() {
        let mut old = pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}));
        assert_eq!(old["status"]["qosClass"], "Guaranteed");
        let r = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        old["spec"]["initContainers"] = json!([
            {"name": "once", "image": "i", "resources": r},
            {"name": "side", "image": "i", "restartPolicy": "Always", "resources": r}]);
        let cpu2 = |s: &mut Value, i: usize| {
            for w in ["requests", "limits"] {
                s["spec"]["initContainers"][i]["resources"][w]["cpu"] = json!("2");
            }
        };
        let mut s = old.clone();
        s["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("500m");
        assert_eq!(
            message(resize(&old, s, "p")),
            "Pod \"p\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
        );
        let mut s = old.clone();
        cpu2(&mut s, 0);
        assert_eq!(
            message(resize(&old, s, "p")),
            "Pod \"p\" is invalid: spec: Forbidden: resources for non-sidecar init containers are immutable"
        );
        let mut s = old.clone();
        cpu2(&mut s, 1);
        assert!(resize(&old, s, "p").is_ok());
    }
}
