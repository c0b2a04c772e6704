//! Kind-specific server behaviour that the generic store applies on writes: pod defaulting and
//! validation (create, and the spec-immutability rules of update), namespace defaults, CRD status,
//! and the `pods/binding` rules (already bound, UID precondition, scheduling gates).

use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use serde_json::{Map, Value, json};

/// Defaults the real server applies to a new pod (the subset that matters to schedulers).
pub fn default_pod(pod: &mut Value) {
    default_pod_spec(pod);
    let qos = qos_class(&pod["spec"]);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    // `applySchedulingGatedCondition`: a pod created with gates says so in its condition.
    if !gate_names(&pod["spec"]).is_empty() {
        set_condition(
            pod,
            json!({"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                   "message": "Scheduling is blocked due to non-empty scheduling gates",
                   "lastProbeTime": null, "lastTransitionTime": meta::now()}),
        );
    }
}

/// What the real server does to the pod of an update (main resource) before validating it: the
/// same spec defaults as on create (every request body is defaulted as it is decoded), and, with
/// `priority_admission` (the Priority admission plugin on), the stored `priority` and
/// `preemptionPolicy` kept when the update leaves them out. Without this a replace with a
/// partial spec (as scheduler_perf's `updateAny` sends) is refused for fields it never meant to
/// change.
pub fn default_pod_update(old: &Value, pod: &mut Value, priority_admission: bool) {
    if priority_admission {
        for f in ["priority", "preemptionPolicy"] {
            if pod.at(&format!("/spec/{f}")).is_none_or(Value::is_null)
                && let Some(v) = old["spec"].get(f)
            {
                pod["spec"][f] = v.clone();
            }
        }
    }
    default_pod_spec(pod);
}

/// The spec defaults of [`default_pod`].
fn default_pod_spec(pod: &mut Value) {
    let spec = pod
        .as_object_mut()
        .expect("object")
        .entry("spec")
        .or_insert_with(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        // `omitempty`: an empty class name is no class name.
        if s.get("priorityClassName")
            .is_some_and(|c| c.is_null() || c == "")
        {
            s.remove("priorityClassName");
        }
        s.entry("schedulerName")
            .or_insert_with(|| json!("default-scheduler"));
        s.entry("restartPolicy").or_insert_with(|| json!("Always"));
        s.entry("dnsPolicy")
            .or_insert_with(|| json!("ClusterFirst"));
        s.entry("terminationGracePeriodSeconds")
            .or_insert_with(|| json!(30));
        s.entry("securityContext").or_insert_with(|| json!({}));
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = s.get_mut(list) {
                cs.iter_mut()
                    .for_each(crate::podres::default_container_requests);
            }
        }
    }
    // Pod-level defaults come after the containers' (`SetDefaults_Pod`).
    crate::podres::default_spec(spec);
}

/// The QoS class of a pod spec as `qos.ComputePodQOS` derives it: from the pod-level resources
/// when the pod sets them, else from the containers. Only cpu and memory count,
/// zero quantities are ignored, requests and limits are summed over the containers and init
/// containers and compared by value; Guaranteed needs cpu and memory limits in every container and
/// requests equal to limits.
pub(crate) fn qos_class(spec: &Value) -> &'static str {
    use crate::validation::quantity_of;
    if let Some(q) = crate::podres::qos(spec) {
        return q;
    }
    use std::collections::BTreeMap;
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten();
    for c in containers {
        let list = |which: &str| {
            c.at(&format!("/resources/{which}"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| {
                    let k = match k.as_str() {
                        "cpu" => "cpu",
                        "memory" => "memory",
                        _ => return None,
                    };
                    quantity_of(v).filter(|q| *q > 0).map(|q| (k, q))
                })
                .collect::<Vec<_>>()
        };
        for (k, q) in list("requests") {
            *requests.entry(k).or_default() += q;
        }
        let lims = list("limits");
        if !["cpu", "memory"]
            .iter()
            .all(|r| lims.iter().any(|(k, _)| k == r))
        {
            guaranteed = false;
        }
        for (k, q) in lims {
            *limits.entry(k).or_default() += q;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(k, q)| limits.get(k) == Some(q))
    {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Validation of a new pod (the checks a client is likely to trip over): containers with a name
/// and an image, the containers' resources (`ValidateContainerResourceRequirements`), the
/// pod-level resources (`validatePodResources`), the priority class name and the preemption
/// policy, in the real order.
pub fn validate_pod_create(pod: &Value, name: &str) -> Result<(), ApiError> {
    use crate::validation::FieldError;
    let mut errs = Vec::new();
    let containers = pod.at("/spec/containers").and_then(Value::as_array);
    match containers.filter(|c| !c.is_empty()) {
        None => errs.push(FieldError::required("spec.containers", "")),
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                for f in ["name", "image"] {
                    if c.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                        errs.push(FieldError::required(
                            format!("spec.containers[{i}].{f}"),
                            "",
                        ));
                    }
                }
            }
        }
    }
    errs.extend(crate::podres::validate_containers(&pod["spec"]));
    errs.extend(crate::podres::validate(&pod["spec"]));
    errs.extend(crate::scheduling::validate_pod_spec(&pod["spec"]));
    crate::validation::check("", "Pod", name, errs)
}

fn gate_names(spec: &Value) -> Vec<String> {
    spec.get("schedulingGates")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(|x| x.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The pod spec with the fields an update may change blanked out.
fn mutable_masked(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for f in [
            "activeDeadlineSeconds",
            "tolerations",
            "schedulingGates",
            "terminationGracePeriodSeconds",
        ] {
            m.remove(f);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = m.get_mut(list) {
                for c in cs {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
    }
    s
}

/// Pod spec immutability on update (main resource).
pub fn validate_pod_update(old: &Value, new: &Value, name: &str) -> Result<(), ApiError> {
    let (os, ns) = (&old["spec"], &new["spec"]);
    if mutable_masked(os) != mutable_masked(ns) {
        return Err(ApiError::invalid(
            "",
            "Pod",
            name,
            "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
    let old_gates = gate_names(os);
    if let Some(g) = gate_names(ns).into_iter().find(|g| !old_gates.contains(g)) {
        return Err(ApiError::invalid(
            "",
            "Pod",
            name,
            &format!(
                "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate '{g}'"
            ),
        ));
    }
    Ok(())
}

/// Defaults of a new namespace.
pub fn default_namespace(ns: &mut Value) {
    let name = meta::meta_str(ns, "name").to_string();
    let labels = meta::metadata_mut(ns)
        .entry("labels")
        .or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    ns["spec"] = json!({"finalizers": ["kubernetes"]});
    ns["status"] = json!({"phase": "Active"});
}

/// Status of an accepted CRD.
pub fn crd_status(crd: &mut Value) {
    let now = meta::now();
    let names = crd.at("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let stored: Vec<Value> = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored,
    });
}

/// Applies a binding to a pod: checks preconditions and sets `spec.nodeName` and `PodScheduled`.
pub fn apply_binding(pod: &mut Value, binding: &Value, pod_name: &str) -> Result<String, ApiError> {
    let target = binding
        .at("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if target.is_empty() {
        return Err(ApiError::invalid(
            "",
            "Binding",
            pod_name,
            "target.name: Required value",
        ));
    }
    let kind = binding
        .at("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        return Err(ApiError::invalid(
            "",
            "Binding",
            pod_name,
            &format!("target.kind: Invalid value: {kind:?}: must be empty or 'Node'"),
        ));
    }
    let want_uid = binding
        .at("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let uid = meta::meta_str(pod, "uid");
    if !want_uid.is_empty() && want_uid != uid {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            pod_name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {uid}"
            ),
        ));
    }
    if !meta::meta_str(pod, "deletionTimestamp").is_empty() {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            pod_name,
            &format!("pod {pod_name} is being deleted, cannot be assigned to a host"),
        ));
    }
    let current = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !current.is_empty() {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            pod_name,
            &format!("pod {pod_name} is already assigned to node {current:?}"),
        ));
    }
    if pod
        .at("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            pod_name,
            &format!("pod {pod_name} has non-empty .spec.schedulingGates"),
        ));
    }
    pod["spec"]["nodeName"] = json!(target);
    if let Some(st) = pod.get_mut("status").and_then(Value::as_object_mut) {
        st.remove("nominatedNodeName");
    }
    if let Some(ann) = binding
        .at("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let m = meta::metadata_mut(pod)
            .entry("annotations")
            .or_insert_with(|| json!({}));
        if let Some(m) = m.as_object_mut() {
            m.extend(ann.clone());
        }
    }
    set_condition(
        pod,
        json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now()}),
    );
    Ok(target.to_string())
}

/// Sets a pod condition, replacing one of the same type.
pub fn set_condition(pod: &mut Value, cond: Value) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = Value::Object(Map::new());
    }
    let status = pod["status"].as_object_mut().expect("status object");
    let conds = status.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("array");
    match list.iter_mut().find(|c| c.get("type") == cond.get("type")) {
        Some(c) => *c = cond,
        None => list.push(cond),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    }

    #[test]
    fn defaults_and_qos() {
        let mut p = pod();
        default_pod(&mut p);
        assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1"
        );
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        validate_pod_create(&p, "p").unwrap();
        assert_eq!(
            validate_pod_create(&json!({"spec": {}}), "p")
                .unwrap_err()
                .code,
            422
        );
    }

    #[test]
    fn binding_rules() {
        let mut p = pod();
        assert_eq!(
            apply_binding(&mut p, &json!({"target": {"name": ""}}), "p")
                .unwrap_err()
                .code,
            422
        );
        let e = apply_binding(
            &mut p,
            &json!({"metadata": {"uid": "other"}, "target": {"name": "n"}}),
            "p",
        )
        .unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            apply_binding(
                &mut p,
                &json!({"target": {"kind": "Node", "name": "n1"}}),
                "p"
            )
            .unwrap(),
            "n1"
        );
        assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
        let e = apply_binding(&mut p, &json!({"target": {"name": "n2"}}), "p").unwrap_err();
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
        );
        let mut gated = pod();
        gated["spec"]["schedulingGates"] = json!([{"name": "g"}]);
        let e = apply_binding(&mut gated, &json!({"target": {"name": "n"}}), "p").unwrap_err();
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on pods/binding \"p\": pod p has non-empty .spec.schedulingGates"
        );
    }

    #[test]
    fn a_gated_pod_is_created_with_the_scheduling_gated_condition() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {
            "schedulingGates": [{"name": "g"}], "containers": [{"name": "c", "image": "i"}]}});
        default_pod(&mut p);
        let c = &p["status"]["conditions"][0];
        assert_eq!(
            (&c["type"], &c["status"], &c["reason"]),
            (
                &json!("PodScheduled"),
                &json!("False"),
                &json!("SchedulingGated")
            )
        );
        let mut ungated = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
        default_pod(&mut ungated);
        assert!(ungated["status"].get("conditions").is_none());
    }

    #[test]
    fn pod_update_immutability() {
        let old = pod();
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("j");
        validate_pod_update(&old, &new, "p").unwrap();
        new["spec"]["nodeName"] = json!("n");
        assert_eq!(validate_pod_update(&old, &new, "p").unwrap_err().code, 422);
    }

    /// A replace whose spec leaves out what the server defaulted (scheduler_perf's `updateAny`
    /// templates): defaulted again, priority kept by admission, so adding a toleration is valid;
    /// a different scheduler name still is not.
    #[test]
    fn a_partial_replace_is_defaulted_before_validation() {
        let mut old = json!({"metadata": {"name": "p"}, "spec": {
            "schedulerName": "s", "containers": [{"name": "c", "image": "i"}]}});
        default_pod(&mut old);
        old["spec"]["priority"] = json!(0);
        let mut new = json!({"metadata": {"name": "p"}, "spec": {
            "schedulerName": "s", "containers": [{"name": "c", "image": "i"}],
            "tolerations": [{"key": "k", "operator": "Exists"}]}});
        default_pod_update(&old, &mut new, true);
        validate_pod_update(&old, &new, "p").unwrap();
        assert_eq!(new["spec"]["priority"], 0);
        let mut other = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "i"}]}});
        default_pod_update(&old, &mut other, true);
        assert_eq!(other["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            validate_pod_update(&old, &other, "p").unwrap_err().code,
            422
        );
    }
}
