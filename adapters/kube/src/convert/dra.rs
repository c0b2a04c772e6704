//! `resource.k8s.io/v1` objects → the engine's DRA inputs (`magma_engine::dra`): ResourceClaims
//! ([`claim_input`]), ResourceSlices ([`slice_input`]) and DeviceClasses ([`class_input`]).
//!
//! The API server validates these objects, so what arrives is well formed; what is refused here
//! is what the engine cannot represent, each with a message naming the object and the field:
//!
//! - A slice whose node fields name no place to use its devices, or a device attribute that is
//!   not exactly one of `int`, `bool`, `string` and `version`: [`SliceRejected`]. The watch
//!   logs it and removes the slice's earlier version from the engine (devices it no longer
//!   describes must not be allocated); no other slice is affected.
//! - A claim request Magma cannot allocate as asked (an `allocationMode` other than
//!   `ExactCount`/`All`, a selector without `cel`): the claim is still converted, with its allocation and
//!   reservations (they hold devices whoever allocated them), and `ClaimInput::unsupported`
//!   says why: while the claim is unallocated the engine holds its pods back with that text
//!   (naming the claim and the request); [`claim_input`] returns the reasons for the log too.
//!
//! Devices with `bindingConditions` or `bindsToNode` (the alpha `DRADeviceBindingConditions`)
//! are left out of their slice, as kube-scheduler's allocator skips them while that feature is
//! off. The slice's other devices count.
//!
//! Owns the field mapping only; touches nothing else.

use super::term;
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceAttribute, DeviceClass, DeviceSelector, DeviceSubRequest,
    DeviceToleration, ExactDeviceRequest, ResourceClaim, ResourceSlice,
};
use magma_engine::dra::capacity::RequestPolicyInput;
use magma_engine::dra::cel::AttrValue;
use magma_engine::dra::devices::{
    ClassInput, DeviceInput, DeviceTaintInput, NodesInput, SliceInput,
};
use magma_engine::dra::{
    AllocatedInput, AllocationInput, ClaimInput, ConstraintInput, ExactInput, RequestInput, Share,
};
use magma_engine::model::{SelectorTermInput, TolerationInput};

/// A slice the engine cannot take: its name and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRejected {
    pub name: String,
    pub error: String,
}

fn node_terms(s: &NodeSelector) -> Vec<SelectorTermInput> {
    s.node_selector_terms.iter().map(term).collect()
}

fn toleration(t: &DeviceToleration) -> TolerationInput {
    TolerationInput {
        key: t.key.clone().unwrap_or_default(),
        operator: t.operator.clone().unwrap_or_default(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.clone().unwrap_or_default(),
    }
}

fn selectors(sels: Option<&Vec<DeviceSelector>>, problems: &mut Vec<String>) -> Vec<String> {
    sels.into_iter()
        .flatten()
        .filter_map(|s| match &s.cel {
            Some(c) => Some(c.expression.clone()),
            None => {
                problems.push("a selector without cel".into());
                None
            }
        })
        .collect()
}

/// The fields `exactly` and a `firstAvailable` entry share.
struct Exact<'a> {
    name: &'a str,
    class: &'a str,
    selectors: Option<&'a Vec<DeviceSelector>>,
    mode: Option<&'a str>,
    count: Option<i64>,
    admin: Option<bool>,
    capacity: Option<&'a CapacityRequirements>,
    tolerations: Option<&'a Vec<DeviceToleration>>,
}

impl<'a> From<&'a ExactDeviceRequest> for Exact<'a> {
    fn from(e: &'a ExactDeviceRequest) -> Self {
        Exact {
            name: "",
            class: &e.device_class_name,
            selectors: e.selectors.as_ref(),
            mode: e.allocation_mode.as_deref(),
            count: e.count,
            admin: e.admin_access,
            capacity: e.capacity.as_ref(),
            tolerations: e.tolerations.as_ref(),
        }
    }
}

impl<'a> From<&'a DeviceSubRequest> for Exact<'a> {
    fn from(e: &'a DeviceSubRequest) -> Self {
        Exact {
            name: &e.name,
            class: &e.device_class_name,
            selectors: e.selectors.as_ref(),
            mode: e.allocation_mode.as_deref(),
            count: e.count,
            admin: None,
            capacity: e.capacity.as_ref(),
            tolerations: e.tolerations.as_ref(),
        }
    }
}

/// One request or subrequest; the reasons it cannot be allocated as asked go to `problems`.
fn exact(e: Exact<'_>, problems: &mut Vec<String>) -> ExactInput {
    let all = match e.mode.unwrap_or("") {
        "" | "ExactCount" => false,
        "All" => true,
        other => {
            problems.push(format!("allocationMode {other:?} is not supported"));
            false
        }
    };
    ExactInput {
        name: e.name.to_owned(),
        class: e.class.to_owned(),
        selectors: selectors(e.selectors, problems),
        all,
        count: if all { 0 } else { e.count.unwrap_or(1).max(1) },
        admin_access: e.admin.unwrap_or(false),
        tolerations: e
            .tolerations
            .iter()
            .copied()
            .flatten()
            .map(toleration)
            .collect(),
        capacity: e
            .capacity
            .and_then(|c| c.requests.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, q)| (k.clone(), q.0.clone()))
            .collect(),
    }
}

/// Convert a ResourceClaim. `None` without namespace or name. The second value lists what
/// Magma cannot allocate as the claim asks (see the module doc), each naming the request.
pub fn claim_input(c: &ResourceClaim) -> Option<(ClaimInput, Vec<String>)> {
    let meta = &c.metadata;
    let namespace = meta.namespace.clone().filter(|n| !n.is_empty())?;
    let name = meta.name.clone().filter(|n| !n.is_empty())?;
    let devices = c.spec.devices.as_ref();
    let mut problems = Vec::new();
    let mut requests = Vec::new();
    for r in devices
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
    {
        let mut own = Vec::new();
        let exactly = r.exactly.as_ref().map(|e| exact(e.into(), &mut own));
        let first_available: Vec<ExactInput> = r
            .first_available
            .iter()
            .flatten()
            .map(|s| exact(s.into(), &mut own))
            .collect();
        let input = RequestInput {
            name: r.name.clone(),
            exactly,
            first_available,
        };
        if !own.is_empty() {
            problems.extend(own.into_iter().map(|p| {
                format!(
                    "resourceclaim {namespace}/{name}, request {:?}: {p}",
                    r.name
                )
            }));
        }
        requests.push(input);
    }
    let mut constraints = Vec::new();
    for k in devices
        .and_then(|d| d.constraints.as_ref())
        .into_iter()
        .flatten()
    {
        if let Some(a) = &k.distinct_attribute {
            constraints.push(ConstraintInput {
                requests: k.requests.clone().unwrap_or_default(),
                match_attribute: a.clone(),
                distinct: true,
            });
        }
        if let Some(a) = &k.match_attribute {
            constraints.push(ConstraintInput {
                requests: k.requests.clone().unwrap_or_default(),
                match_attribute: a.clone(),
                distinct: false,
            });
        }
    }
    let status = c.status.as_ref();
    let allocation = status
        .and_then(|s| s.allocation.as_ref())
        .map(|a| AllocationInput {
            devices: a
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(|r| AllocatedInput {
                    request: r.request.clone(),
                    driver: r.driver.clone(),
                    pool: r.pool.clone(),
                    device: r.device.clone(),
                    admin_access: r.admin_access.unwrap_or(false),
                    share: r.share_id.as_ref().map(|id| Share {
                        id: Some(id.clone()),
                        consumed: r
                            .consumed_capacity
                            .iter()
                            .flatten()
                            .map(|(k, q)| (k.clone(), q.0.clone()))
                            .collect(),
                    }),
                })
                .collect(),
            nodes: a.node_selector.as_ref().map(node_terms),
        });
    let input = ClaimInput {
        uid: meta.uid.clone().unwrap_or_default(),
        owner_uid: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone()),
        deleting: meta.deletion_timestamp.is_some(),
        requests,
        constraints,
        allocation,
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.uid.clone())
            .collect(),
        // What Magma cannot allocate as asked holds the claim's pods back with this text.
        unsupported: (!problems.is_empty()).then(|| problems.join("; ")),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        extended: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(magma_engine::dra::extended::EXTENDED_CLAIM_ANNOTATION))
            .is_some_and(|v| v == "true"),
        namespace,
        name,
    };
    Some((input, problems))
}

fn attribute(a: &DeviceAttribute) -> Result<AttrValue, &'static str> {
    match (a.int, a.bool, a.string.as_ref(), a.version.as_ref()) {
        (Some(i), None, None, None) => Ok(AttrValue::Int(i)),
        (None, Some(b), None, None) => Ok(AttrValue::Bool(b)),
        (None, None, Some(s), None) => Ok(AttrValue::String(s.clone())),
        (None, None, None, Some(v)) => Ok(AttrValue::Version(v.clone())),
        (None, None, None, None) => Err("has no value"),
        _ => Err("has more than one value"),
    }
}

/// `nodeName` / `nodeSelector` / `allNodes` (and, for a slice, `perDeviceNodeSelection`):
/// exactly one must be set.
fn nodes(
    node: Option<&String>,
    selector: Option<&NodeSelector>,
    all: Option<bool>,
    per_device: Option<bool>,
) -> Result<NodesInput, String> {
    let mut set = Vec::new();
    if let Some(n) = node.filter(|n| !n.is_empty()) {
        set.push(NodesInput::Node(n.clone()));
    }
    if let Some(s) = selector {
        set.push(NodesInput::Selector(node_terms(s)));
    }
    if all == Some(true) {
        set.push(NodesInput::All);
    }
    if per_device == Some(true) {
        set.push(NodesInput::PerDevice);
    }
    match set.len() {
        1 => Ok(set.pop().expect("one")),
        0 => Err("none of nodeName, nodeSelector, allNodes is set".into()),
        _ => Err("more than one of nodeName, nodeSelector, allNodes is set".into()),
    }
}

/// Convert a ResourceSlice. `None` without a name; `Err` when the engine cannot take it (see
/// the module doc).
pub fn slice_input(s: &ResourceSlice) -> Option<Result<SliceInput, SliceRejected>> {
    let name = s.metadata.name.clone().filter(|n| !n.is_empty())?;
    let reject = |error: String| {
        Some(Err(SliceRejected {
            name: name.clone(),
            error: format!("resourceslice {name:?}: {error}"),
        }))
    };
    let spec = &s.spec;
    let slice_nodes = match nodes(
        spec.node_name.as_ref(),
        spec.node_selector.as_ref(),
        spec.all_nodes,
        spec.per_device_node_selection,
    ) {
        Ok(n) => n,
        Err(e) => return reject(format!("spec: {e}")),
    };
    let per_device = slice_nodes == NodesInput::PerDevice;
    let mut devices = Vec::new();
    for d in spec.devices.iter().flatten() {
        let binding = d.binds_to_node == Some(true)
            || d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty())
            || d.binding_failure_conditions
                .as_ref()
                .is_some_and(|c| !c.is_empty());
        if binding {
            continue;
        }
        let mut attributes = Vec::new();
        for (k, a) in d.attributes.iter().flatten() {
            match attribute(a) {
                Ok(v) => attributes.push((k.clone(), v)),
                Err(e) => return reject(format!("device {:?}: attribute {k:?} {e}", d.name)),
            }
        }
        let device_nodes = if per_device {
            match nodes(
                d.node_name.as_ref(),
                d.node_selector.as_ref(),
                d.all_nodes,
                None,
            ) {
                Ok(n) => Some(n),
                Err(e) => return reject(format!("device {:?}: {e}", d.name)),
            }
        } else {
            None
        };
        devices.push(DeviceInput {
            name: d.name.clone(),
            attributes,
            capacity: d
                .capacity
                .iter()
                .flatten()
                .map(|(k, c)| (k.clone(), c.value.0.clone()))
                .collect(),
            // `None` (informational, DeviceTaintRules' observability) repels nothing.
            taints: d
                .taints
                .iter()
                .flatten()
                .filter(|t| t.effect != "None")
                .map(|t| DeviceTaintInput {
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect: t.effect.clone(),
                })
                .collect(),
            nodes: device_nodes,
            consumes_counters: d
                .consumes_counters
                .iter()
                .flatten()
                .map(|c| {
                    (
                        c.counter_set.clone(),
                        c.counters
                            .iter()
                            .map(|(k, v)| (k.clone(), v.value.0.clone()))
                            .collect(),
                    )
                })
                .collect(),
            allow_multiple_allocations: d.allow_multiple_allocations == Some(true),
            request_policies: d
                .capacity
                .iter()
                .flatten()
                .filter_map(|(k, c)| {
                    let p = c.request_policy.as_ref()?;
                    let q = |q: &Option<
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity,
                    >| { q.as_ref().map(|q| q.0.clone()) };
                    Some((
                        k.clone(),
                        RequestPolicyInput {
                            default: q(&p.default),
                            valid_values: p
                                .valid_values
                                .iter()
                                .flatten()
                                .map(|v| v.0.clone())
                                .collect(),
                            valid_range: p
                                .valid_range
                                .as_ref()
                                .map(|r| (Some(r.min.0.clone()), q(&r.max), q(&r.step))),
                        },
                    ))
                })
                .collect(),
        });
    }
    Some(Ok(SliceInput {
        driver: spec.driver.clone(),
        pool: spec.pool.name.clone(),
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count,
        nodes: slice_nodes,
        devices,
        shared_counters: spec
            .shared_counters
            .iter()
            .flatten()
            .map(|set| {
                (
                    set.name.clone(),
                    set.counters
                        .iter()
                        .map(|(k, v)| (k.clone(), v.value.0.clone()))
                        .collect(),
                )
            })
            .collect(),
        name,
    }))
}

/// Convert a DeviceClass (its selectors, `extendedResourceName` and creation time; `None`
/// without a name). A selector without `cel`
/// (which the API server refuses) is left out.
pub fn class_input(c: &DeviceClass) -> Option<ClassInput> {
    Some(ClassInput {
        name: c.metadata.name.clone().filter(|n| !n.is_empty())?,
        selectors: selectors(c.spec.selectors.as_ref(), &mut Vec::new()),
        extended_resource_name: c.spec.extended_resource_name.clone(),
        created: c
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(v: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(v).unwrap()
    }

    fn slice(v: serde_json::Value) -> ResourceSlice {
        serde_json::from_value(v).unwrap()
    }

    fn name_in(node: &str) -> SelectorTermInput {
        SelectorTermInput {
            match_expressions: vec![],
            match_fields: vec![magma_engine::model::SelectorRequirementInput {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: vec![node.into()],
            }],
        }
    }

    #[test]
    fn converts_every_claim_field_the_allocator_reads() {
        let c = claim(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1",
                         "deletionTimestamp": "2024-01-01T00:00:00Z",
                         "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                         "ownerReferences": [
                            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other"},
                            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]},
            "spec": {"devices": {
                "requests": [
                    {"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"a100\""}}],
                        "allocationMode": "ExactCount", "count": 2, "adminAccess": true,
                        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}},
                    {"name": "all", "exactly": {"deviceClassName": "nic", "allocationMode": "All",
                        "capacity": {"requests": {"bandwidth": "10G"}}}},
                    {"name": "any", "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.example.com", "count": 1},
                        {"name": "small", "deviceClassName": "small", "allocationMode": "ExactCount",
                         "selectors": [{"cel": {"expression": "true"}}],
                         "tolerations": [{"key": "k", "value": "v", "operator": "Equal"}]}]}],
                "constraints": [
                    {"matchAttribute": "gpu.example.com/numa"},
                    {"requests": ["gpu", "any"], "matchAttribute": "dra.example.com/pci"},
                    {"distinctAttribute": "nic.example.com/port"}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0", "adminAccess": true},
                        {"request": "any/big", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"},
                        {"request": "all", "driver": "nic.example.com", "pool": "n1", "device": "nic-0",
                         "shareID": "4f1c2b1e-0d2a-4a8e-9c56-2f0d9b7c1a11",
                         "consumedCapacity": {"bandwidth": "10G"}}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]}
        }));
        let (i, problems) = claim_input(&c).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            i,
            ClaimInput {
                namespace: "ns".into(),
                name: "c".into(),
                uid: "u1".into(),
                owner_uid: Some("pod-uid".into()),
                deleting: true,
                requests: vec![
                    RequestInput {
                        name: "gpu".into(),
                        exactly: Some(ExactInput {
                            name: String::new(),
                            class: "gpu.example.com".into(),
                            selectors: vec![
                                "device.attributes[\"gpu.example.com\"].model == \"a100\"".into()
                            ],
                            all: false,
                            count: 2,
                            admin_access: true,
                            capacity: vec![],
                            tolerations: vec![TolerationInput {
                                key: "k".into(),
                                operator: "Exists".into(),
                                value: String::new(),
                                effect: "NoSchedule".into(),
                            }],
                        }),
                        first_available: vec![],
                    },
                    RequestInput {
                        name: "all".into(),
                        exactly: Some(ExactInput {
                            class: "nic".into(),
                            all: true,
                            capacity: vec![("bandwidth".into(), "10G".into())],
                            ..Default::default()
                        }),
                        first_available: vec![],
                    },
                    RequestInput {
                        name: "any".into(),
                        exactly: None,
                        first_available: vec![
                            ExactInput {
                                name: "big".into(),
                                class: "gpu.example.com".into(),
                                count: 1,
                                ..Default::default()
                            },
                            ExactInput {
                                name: "small".into(),
                                class: "small".into(),
                                selectors: vec!["true".into()],
                                count: 1,
                                tolerations: vec![TolerationInput {
                                    key: "k".into(),
                                    operator: "Equal".into(),
                                    value: "v".into(),
                                    effect: String::new(),
                                }],
                                ..Default::default()
                            },
                        ],
                    },
                ],
                constraints: vec![
                    ConstraintInput {
                        requests: vec![],
                        match_attribute: "gpu.example.com/numa".into(),
                        distinct: false,
                    },
                    ConstraintInput {
                        requests: vec!["gpu".into(), "any".into()],
                        match_attribute: "dra.example.com/pci".into(),
                        distinct: false,
                    },
                    ConstraintInput {
                        requests: vec![],
                        match_attribute: "nic.example.com/port".into(),
                        distinct: true,
                    },
                ],
                allocation: Some(AllocationInput {
                    devices: vec![
                        AllocatedInput {
                            request: "gpu".into(),
                            driver: "gpu.example.com".into(),
                            pool: "n1".into(),
                            device: "gpu-0".into(),
                            admin_access: true,
                            share: None,
                        },
                        AllocatedInput {
                            request: "any/big".into(),
                            driver: "gpu.example.com".into(),
                            pool: "n1".into(),
                            device: "gpu-1".into(),
                            admin_access: false,
                            share: None,
                        },
                        AllocatedInput {
                            request: "all".into(),
                            driver: "nic.example.com".into(),
                            pool: "n1".into(),
                            device: "nic-0".into(),
                            admin_access: false,
                            share: Some(Share {
                                id: Some("4f1c2b1e-0d2a-4a8e-9c56-2f0d9b7c1a11".into()),
                                consumed: vec![("bandwidth".into(), "10G".into())],
                            }),
                        },
                    ],
                    nodes: Some(vec![name_in("n1")]),
                }),
                reserved_for: vec!["pod-uid".into()],
                unsupported: None,
                resource_version: String::new(),
                extended: true,
            }
        );
        // A new claim: no status, no allocation; an allocation anywhere: no node selector.
        let (i, _) = claim_input(&claim(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {},
            "status": {"allocation": {"devices": {"results": []}}}
        })))
        .unwrap();
        assert!(i.requests.is_empty() && i.reserved_for.is_empty() && !i.deleting);
        assert_eq!(i.allocation.unwrap().nodes, None);
        assert!(claim_input(&claim(json!({"metadata": {"name": "c"}, "spec": {}}))).is_none());
    }

    #[test]
    fn a_request_magma_cannot_allocate_holds_its_pods_back_and_says_why() {
        let c = claim(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "spec": {"devices": {"requests": [
                {"name": "ok", "exactly": {"deviceClassName": "gpu"}},
                {"name": "future", "exactly": {"deviceClassName": "gpu",
                    "allocationMode": "Fraction"}}]}}
        }));
        let (i, problems) = claim_input(&c).unwrap();
        assert_eq!(
            problems,
            [
                "resourceclaim ns/c, request \"future\": allocationMode \"Fraction\" is not supported"
            ]
        );
        assert_eq!(i.unsupported.as_deref(), Some(problems[0].as_str()));
        // The engine holds the claim's pods back with that text.
        let mut dra = magma_engine::dra::Dra::default();
        let mut interner = magma_engine::model::Interner::default();
        dra.apply(
            magma_engine::dra::DraInput::Class(ClassInput {
                name: "gpu".into(),
                ..Default::default()
            }),
            &mut interner,
        );
        dra.apply(magma_engine::dra::DraInput::Claim(i), &mut interner);
        let pod = magma_engine::dra::compile_claims(&[magma_engine::dra::PodClaimInput {
            name: "gpu".into(),
            claim: Some("c".into()),
            ..Default::default()
        }])
        .unwrap();
        let r = dra.resolve("ns", "p-uid", &pod, true, &mut interner);
        let names = r.names(magma_engine::model::PodNames {
            namespace: "ns",
            name: "p",
            resource_claims: &pod,
            ..Default::default()
        });
        let m = r.blocked.unwrap().message(&names);
        assert_eq!(m, problems[0]);
    }

    #[test]
    fn converts_slices_with_node_fields_attributes_capacity_taints_and_counters() {
        let s = slice(json!({
            "metadata": {"name": "n1-gpus"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 2},
                "nodeName": "n1",
                "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}],
                "devices": [
                    {"name": "gpu-0",
                     "attributes": {"model": {"string": "a100"}, "cores": {"int": 8},
                                    "mig": {"bool": true}, "driverVersion": {"version": "1.2.3"},
                                    "dra.example.com/pci": {"string": "0000:01"}},
                     "capacity": {"memory": {"value": "40Gi"}},
                     "taints": [{"key": "broken", "value": "yes", "effect": "NoSchedule"},
                                {"key": "drain", "effect": "NoExecute"},
                                {"key": "note", "effect": "None"}],
                     "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "40Gi"}}}]},
                    {"name": "gpu-1", "allowMultipleAllocations": true},
                    {"name": "later", "bindsToNode": true},
                    {"name": "attaching", "bindingConditions": ["attached"]}]}
        }));
        let i = slice_input(&s).unwrap().unwrap();
        assert_eq!(
            (i.name.as_str(), i.driver.as_str(), i.pool.as_str()),
            ("n1-gpus", "gpu.example.com", "n1")
        );
        assert_eq!((i.generation, i.slice_count), (3, 2));
        assert_eq!(i.nodes, NodesInput::Node("n1".into()));
        assert_eq!(
            i.shared_counters,
            [(
                "mem".to_string(),
                vec![("memory".to_string(), "80Gi".to_string())]
            )]
        );
        assert_eq!(
            i.devices.len(),
            2,
            "devices with binding conditions are left out"
        );
        let d = &i.devices[0];
        assert_eq!(
            d.attributes,
            [
                ("cores".to_string(), AttrValue::Int(8)),
                (
                    "dra.example.com/pci".to_string(),
                    AttrValue::String("0000:01".into())
                ),
                (
                    "driverVersion".to_string(),
                    AttrValue::Version("1.2.3".into())
                ),
                ("mig".to_string(), AttrValue::Bool(true)),
                ("model".to_string(), AttrValue::String("a100".into())),
            ]
        );
        assert_eq!(d.capacity, [("memory".to_string(), "40Gi".to_string())]);
        assert_eq!(
            d.taints,
            [
                DeviceTaintInput {
                    key: "broken".into(),
                    value: "yes".into(),
                    effect: "NoSchedule".into()
                },
                DeviceTaintInput {
                    key: "drain".into(),
                    value: String::new(),
                    effect: "NoExecute".into()
                },
            ]
        );
        assert_eq!(
            d.consumes_counters,
            [(
                "mem".to_string(),
                vec![("memory".to_string(), "40Gi".to_string())]
            )]
        );
        assert_eq!(d.nodes, None);
        assert!(!d.allow_multiple_allocations && i.devices[1].allow_multiple_allocations);

        // The other node fields, per slice and per device.
        let sel = json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]});
        let i = slice_input(&slice(json!({"metadata": {"name": "s"}, "spec": {
            "driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": sel}})))
        .unwrap()
        .unwrap();
        assert!(
            matches!(&i.nodes, NodesInput::Selector(t) if t[0].match_expressions[0].key == "zone")
        );
        let i = slice_input(&slice(json!({"metadata": {"name": "s"}, "spec": {
            "driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "allNodes": true}})))
        .unwrap()
        .unwrap();
        assert_eq!(i.nodes, NodesInput::All);
        let i = slice_input(&slice(json!({"metadata": {"name": "s"}, "spec": {
            "driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "perDeviceNodeSelection": true,
            "devices": [{"name": "a", "nodeName": "n1"}, {"name": "b", "allNodes": true},
                        {"name": "c", "nodeSelector": sel}]}})))
        .unwrap()
        .unwrap();
        assert_eq!(i.nodes, NodesInput::PerDevice);
        assert_eq!(i.devices[0].nodes, Some(NodesInput::Node("n1".into())));
        assert_eq!(i.devices[1].nodes, Some(NodesInput::All));
        assert!(matches!(&i.devices[2].nodes, Some(NodesInput::Selector(_))));
    }

    #[test]
    fn a_slice_the_engine_cannot_take_is_rejected_with_its_name() {
        let base = |spec: serde_json::Value| {
            let mut s = json!({"metadata": {"name": "bad"}, "spec": {
                "driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}});
            for (k, v) in spec.as_object().unwrap() {
                s["spec"][k] = v.clone();
            }
            slice_input(&slice(s)).unwrap()
        };
        let e = base(json!({})).unwrap_err();
        assert_eq!(e.name, "bad");
        assert_eq!(
            e.error,
            "resourceslice \"bad\": spec: none of nodeName, nodeSelector, allNodes is set"
        );
        let e = base(json!({"nodeName": "n1", "allNodes": true})).unwrap_err();
        assert!(e.error.contains("more than one"), "{}", e.error);
        let e = base(json!({"nodeName": "n1", "devices": [
            {"name": "g", "attributes": {"x": {"int": 1, "string": "a"}}}]}))
        .unwrap_err();
        assert_eq!(
            e.error,
            "resourceslice \"bad\": device \"g\": attribute \"x\" has more than one value"
        );
        let e =
            base(json!({"nodeName": "n1", "devices": [{"name": "g", "attributes": {"x": {}}}]}))
                .unwrap_err();
        assert!(
            e.error.ends_with("attribute \"x\" has no value"),
            "{}",
            e.error
        );
        let e =
            base(json!({"perDeviceNodeSelection": true, "devices": [{"name": "g"}]})).unwrap_err();
        assert!(e.error.contains("device \"g\": none of"), "{}", e.error);
        let nameless: ResourceSlice = slice(json!({"metadata": {}, "spec": {
            "driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}}));
        assert!(slice_input(&nameless).is_none());
    }

    #[test]
    fn converts_classes() {
        let c: DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": "gpu.example.com", "creationTimestamp": "2026-12-06T10:00:00Z"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                     "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
                     "extendedResourceName": "example.com/gpu"}
        }))
        .unwrap();
        assert_eq!(
            class_input(&c).unwrap(),
            ClassInput {
                name: "gpu.example.com".into(),
                selectors: vec!["device.driver == \"gpu.example.com\"".into()],
                extended_resource_name: Some("example.com/gpu".into()),
                created: "2026-12-06T10:00:00Z".into(),
            }
        );
        let c: DeviceClass =
            serde_json::from_value(json!({"metadata": {"name": "any"}, "spec": {}})).unwrap();
        assert!(class_input(&c).unwrap().selectors.is_empty());
    }
}
