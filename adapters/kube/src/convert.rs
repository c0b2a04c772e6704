//! API objects → engine inputs. The adapter keeps no copy of the objects it watches: each
//! event is converted here (pods and nodes from their scheduling view, [`crate::slim`]) into
//! the engine's compact string model (`PodInput`, `NodeInput`, `NamespaceInput`, the storage
//! inputs) and the API object is dropped. Validation of quantities, operators, selectors,
//! spread constraints and binding modes happens in the engine's compile step, which reports
//! errors back as intents; here an object is only refused when it cannot be identified (no
//! name or UID). Nothing here panics on an odd object: absent
//! fields map to the API's defaults.
//!
//! Owns the field mapping only; touches nothing else.

use crate::slim::{Container, ContainerStatus, Node, Pod, PodSpec, PodStatus};
use k8s_openapi::api::core::v1::{
    Namespace, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim,
    PodAffinityTerm, Toleration, TopologySelectorTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use magma_engine::dra::PodClaimInput;
use magma_engine::model::PodResourcesInput;
use magma_engine::model::{
    ContainerInput, ContainerStatusInput, LabelSelectorInput, NamespaceInput, NodeAffinityInput,
    NodeInput, PodAffinityInput, PodAffinityTermInput, PodInput, PodPhase, PortInput,
    SelectorRequirementInput, SelectorTermInput, TaintInput, TolerationInput, TopologySpreadInput,
};
use magma_engine::pdb::PdbInput;
use magma_engine::volumes::{CsiNodeInput, PodVolumeInput, PvInput, PvcInput, StorageClassInput};
use std::collections::BTreeMap;

pub mod dra;
pub use crate::slim::SCHEDULING_PRIORITY_ANNOTATION;
pub use dra::{SliceRejected, claim_input as resource_claim_input, class_input, slice_input};

fn resources(map: Option<&BTreeMap<String, Quantity>>) -> Vec<(String, String)> {
    map.map(|m| m.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
        .unwrap_or_default()
}

/// [`resources`], moving the strings out of a map the caller owns.
fn resources_owned(map: Option<BTreeMap<String, Quantity>>) -> Vec<(String, String)> {
    map.map(|m| m.into_iter().map(|(k, q)| (k, q.0)).collect())
        .unwrap_or_default()
}

/// A container, with its status when in-place resize applies to it (a regular container or a
/// sidecar whose status reports `resources`: `resourcehelper.AggregateContainerRequests`).
/// Its requests, limits and ports are moved out of `c`.
fn container(c: Container, init: bool, statuses: Option<&Vec<ContainerStatus>>) -> ContainerInput {
    let restartable = init && c.restart_policy.as_deref() == Some("Always");
    let status = (!init || restartable)
        .then(|| statuses?.iter().find(|s| s.name == c.name))
        .flatten()
        .and_then(|s| {
            let actuated = s.resources.as_ref()?;
            Some(ContainerStatusInput {
                requests: resources(actuated.requests.as_ref()),
                allocated: resources(s.allocated_resources.as_ref()),
            })
        });
    let (requests, limits) = c.resources.map_or((None, None), |r| (r.requests, r.limits));
    ContainerInput {
        name: c.name,
        requests: resources_owned(requests),
        limits: resources_owned(limits),
        ports: c
            .ports
            .into_iter()
            .flatten()
            .map(|p| PortInput {
                host_port: p.host_port.unwrap_or(0),
                protocol: p.protocol.unwrap_or_default(),
                host_ip: p.host_ip.unwrap_or_default(),
            })
            .collect(),
        restartable,
        status,
    }
}

/// The `PodResizePending` condition says `Infeasible` (`resourcehelper.IsPodResizeInfeasible`).
fn resize_infeasible(status: Option<&PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// A scheduler's preemption is evicting the pod: its `DisruptionTarget` condition is `True` with
/// reason `PreemptionByScheduler` (upstream's `podTerminatingByPreemption` reads the same).
fn preempted(status: Option<&PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .is_some_and(|c| {
            c.status.as_deref() == Some("True")
                && c.reason.as_deref() == Some("PreemptionByScheduler")
        })
}

fn requirement(r: &NodeSelectorRequirement) -> SelectorRequirementInput {
    SelectorRequirementInput {
        key: r.key.clone(),
        operator: r.operator.clone(),
        values: r.values.clone().unwrap_or_default(),
    }
}

pub(crate) fn term(t: &NodeSelectorTerm) -> SelectorTermInput {
    SelectorTermInput {
        match_expressions: t
            .match_expressions
            .iter()
            .flatten()
            .map(requirement)
            .collect(),
        match_fields: t.match_fields.iter().flatten().map(requirement).collect(),
    }
}

fn api_requirement(r: &SelectorRequirementInput) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: r.key.clone(),
        operator: r.operator.clone(),
        values: (!r.values.is_empty()).then(|| r.values.clone()),
    }
}

/// The inverse of [`term`]: a term as the API writes it (empty lists left out).
pub(crate) fn api_term(t: &SelectorTermInput) -> NodeSelectorTerm {
    let reqs = |rs: &[SelectorRequirementInput]| {
        (!rs.is_empty()).then(|| rs.iter().map(api_requirement).collect())
    };
    NodeSelectorTerm {
        match_expressions: reqs(&t.match_expressions),
        match_fields: reqs(&t.match_fields),
    }
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Vec<(String, String)> {
    map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// [`pairs`], moving the strings out of a map the caller owns.
fn pairs_owned(map: Option<BTreeMap<String, String>>) -> Vec<(String, String)> {
    map.map(|m| m.into_iter().collect()).unwrap_or_default()
}

fn labels(meta: &ObjectMeta) -> Vec<(String, String)> {
    pairs(meta.labels.as_ref())
}

/// A PodDisruptionBudget as preemption reads it (`pdb`): its selector, how many disruptions
/// its status allows, and the pods already being disrupted. `None` without namespace or name.
pub fn pdb_input(p: &k8s_openapi::api::policy::v1::PodDisruptionBudget) -> Option<PdbInput> {
    let status = p.status.as_ref();
    Some(PdbInput {
        namespace: p.metadata.namespace.clone()?,
        name: p.metadata.name.clone()?,
        selector: p
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(label_selector),
        disruptions_allowed: status.map_or(0, |s| s.disruptions_allowed),
        disrupted: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

fn label_selector(s: &LabelSelector) -> LabelSelectorInput {
    LabelSelectorInput {
        match_labels: pairs(s.match_labels.as_ref()),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|r| SelectorRequirementInput {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

fn affinity_term(t: &PodAffinityTerm) -> PodAffinityTermInput {
    PodAffinityTermInput {
        label_selector: t.label_selector.as_ref().map(label_selector),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t.namespace_selector.as_ref().map(label_selector),
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    }
}

fn weighted_terms(ts: Option<&Vec<WeightedPodAffinityTerm>>) -> Vec<(i32, PodAffinityTermInput)> {
    ts.into_iter()
        .flatten()
        .map(|w| (w.weight, affinity_term(&w.pod_affinity_term)))
        .collect()
}

/// `spec.affinity.podAffinity` and `podAntiAffinity`; `None` when neither has a term.
fn pod_affinity(spec: &PodSpec) -> Option<PodAffinityInput> {
    let a = spec.affinity.as_ref()?;
    let (aff, anti) = (a.pod_affinity.as_ref(), a.pod_anti_affinity.as_ref());
    let input = PodAffinityInput {
        required: aff
            .and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .map(affinity_term)
            .collect(),
        preferred: weighted_terms(aff.and_then(|p| {
            p.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })),
        required_anti: anti
            .and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .map(affinity_term)
            .collect(),
        preferred_anti: weighted_terms(anti.and_then(|p| {
            p.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })),
    };
    (!input.is_empty()).then_some(input)
}

fn spread(c: &TopologySpreadConstraint) -> TopologySpreadInput {
    TopologySpreadInput {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable: c.when_unsatisfiable.clone(),
        label_selector: c.label_selector.as_ref().map(label_selector),
        min_domains: c.min_domains,
        node_affinity_policy: c.node_affinity_policy.clone(),
        node_taints_policy: c.node_taints_policy.clone(),
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    }
}

/// The volumes that use claims: `persistentVolumeClaim` and `ephemeral` (a volume may set
/// only one source; should an odd object set both, the claim wins, as the API's validation
/// would have refused it anyway).
fn pod_volumes(spec: &PodSpec) -> Vec<PodVolumeInput> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| {
            let claim = v
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.clone());
            let ephemeral = claim.is_none() && v.ephemeral.is_some();
            (claim.is_some() || ephemeral).then(|| PodVolumeInput {
                name: v.name.clone(),
                claim,
                ephemeral,
            })
        })
        .collect()
}

fn toleration(t: &Toleration) -> TolerationInput {
    TolerationInput {
        key: t.key.clone().unwrap_or_default(),
        operator: t.operator.clone().unwrap_or_default(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.clone().unwrap_or_default(),
    }
}

/// Convert a pod, moving its strings out of it (the watch hands over each pod it decoded).
/// Pods without a UID or name cannot be tracked and are rejected.
pub fn pod_input(pod: Pod) -> Option<PodInput> {
    let Pod {
        metadata: meta,
        spec,
        status,
    } = pod;
    let uid = meta.uid.filter(|u| !u.is_empty())?;
    let name = meta.name.filter(|n| !n.is_empty())?;
    let mut spec = spec.unwrap_or_default();
    let status = status.as_ref();
    // The cross-node constraints are rare; they are read by reference.
    let affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .map(|na| NodeAffinityInput {
            required: na
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(|sel| sel.node_selector_terms.iter().map(term).collect()),
            preferred: na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .map(|p| (p.weight, term(&p.preference)))
                .collect(),
        });
    let pod_affinity = pod_affinity(&spec);
    let topology_spread = spec
        .topology_spread_constraints
        .as_ref()
        .map(|cs| cs.iter().map(spread).collect())
        .unwrap_or_default();
    let volumes = pod_volumes(&spec);
    let resources = pod_resources(spec.resources.take(), status);
    let resource_claims = resource_claims(spec.resource_claims.take(), status);
    let statuses = status.and_then(|st| st.container_statuses.as_ref());
    let containers = std::mem::take(&mut spec.containers)
        .into_iter()
        .map(|c| container(c, false, statuses))
        .collect();
    let init_statuses = status.and_then(|st| st.init_container_statuses.as_ref());
    let init_containers = spec
        .init_containers
        .take()
        .map(|cs| {
            cs.into_iter()
                .map(|c| container(c, true, init_statuses))
                .collect()
        })
        .unwrap_or_default();
    Some(PodInput {
        uid,
        namespace: meta.namespace.unwrap_or_else(|| "default".into()),
        name,
        node_name: spec.node_name.filter(|n| !n.is_empty()),
        nominated_node_name: status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        phase: status
            .and_then(|s| s.phase.as_deref())
            .map_or(PodPhase::Pending, PodPhase::parse),
        priority: spec.priority.unwrap_or(0),
        scheduling_priority: meta
            .annotations
            .and_then(|mut a| a.remove(SCHEDULING_PRIORITY_ANNOTATION)),
        containers,
        init_containers,
        overhead: resources_owned(spec.overhead),
        node_selector: pairs_owned(spec.node_selector),
        affinity,
        tolerations: spec
            .tolerations
            .as_ref()
            .map(|ts| ts.iter().map(toleration).collect())
            .unwrap_or_default(),
        scheduling_gates: spec
            .scheduling_gates
            .map(|gs| gs.into_iter().map(|g| g.name).collect())
            .unwrap_or_default(),
        created_unix_ms: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond()),
        labels: pairs_owned(meta.labels),
        pod_affinity,
        topology_spread,
        terminating: meta.deletion_timestamp.is_some(),
        volumes,
        resize_infeasible: resize_infeasible(status),
        resources,
        resource_claims,
        preemption_never: spec.preemption_policy.as_deref() == Some("Never"),
        started_unix_ms: status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_millisecond()),
        preempted: preempted(status),
    })
}

/// `spec.resources` and the pod-level resize status; `None` when the pod has none of them.
fn pod_resources(
    spec: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    status: Option<&PodStatus>,
) -> Option<PodResourcesInput> {
    let (requests, limits) = spec.map_or((Vec::new(), Vec::new()), |s| {
        (resources_owned(s.requests), resources_owned(s.limits))
    });
    let status_requests = status
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .map(|m| resources(Some(m)));
    let allocated = status
        .and_then(|s| s.allocated_resources.as_ref())
        .map(|m| resources(Some(m)));
    if requests.is_empty() && limits.is_empty() && status_requests.is_none() && allocated.is_none()
    {
        return None;
    }
    Some(PodResourcesInput {
        requests,
        limits,
        status_requests,
        allocated,
    })
}

/// `spec.resourceClaims`, each with the claim made for its template if the pod's status names
/// one (`status.resourceClaimStatuses`).
fn resource_claims(
    claims: Option<Vec<crate::slim::PodResourceClaim>>,
    status: Option<&PodStatus>,
) -> Vec<PodClaimInput> {
    let statuses = status.and_then(|s| s.resource_claim_statuses.as_ref());
    claims
        .into_iter()
        .flatten()
        .map(|c| {
            let made = statuses
                .and_then(|ss| ss.iter().find(|s| s.name == c.name))
                .map(|s| s.resource_claim_name.clone());
            PodClaimInput {
                name: c.name,
                claim: c.resource_claim_name,
                template: c.resource_claim_template_name,
                made,
            }
        })
        .collect()
}

/// Convert a namespace (its labels, for `namespaceSelector`).
pub fn namespace_input(ns: &Namespace) -> Option<NamespaceInput> {
    Some(NamespaceInput {
        name: ns.metadata.name.clone().filter(|n| !n.is_empty())?,
        labels: labels(&ns.metadata),
    })
}

/// The beta annotation that, when present, names a claim's class instead of
/// `spec.storageClassName` (`storagehelpers.GetPersistentVolumeClaimClass`).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Set by the PV controller on a claim whose binding to its volume is complete.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";

/// Namespace and name of a claim (`None` without a name).
pub fn claim_key(pvc: &PersistentVolumeClaim) -> Option<(String, String)> {
    let name = pvc.metadata.name.clone().filter(|n| !n.is_empty())?;
    let ns = pvc
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    Some((ns, name))
}

/// Convert a PersistentVolumeClaim.
pub fn pvc_input(pvc: &PersistentVolumeClaim) -> Option<PvcInput> {
    let (namespace, name) = claim_key(pvc)?;
    let meta = &pvc.metadata;
    let spec = pvc.spec.as_ref();
    let storage_class = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .cloned()
        .or_else(|| spec.and_then(|s| s.storage_class_name.clone()));
    let volume_name = spec
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    // A claim naming a volume is bound only once the PV controller completed the bind
    // (`isPVCFullyBound`); until then it is pre-bound by its user.
    let prebound = volume_name.is_some()
        && !meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BIND_COMPLETED_ANNOTATION));
    Some(PvcInput {
        namespace,
        name,
        uid: meta.uid.clone().unwrap_or_default(),
        storage_class,
        volume_name,
        prebound,
        phase: pvc
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        access_modes: spec
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default(),
        terminating: meta.deletion_timestamp.is_some(),
        owner_uid: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone()),
        request: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone()),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()),
        selector: spec.and_then(|s| s.selector.as_ref()).map(label_selector),
    })
}

/// `spec.nodeAffinity.required.nodeSelectorTerms` of a PersistentVolume.
pub fn pv_node_affinity(pv: &PersistentVolume) -> Option<Vec<SelectorTermInput>> {
    pv.spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()
        .map(|sel| sel.node_selector_terms.iter().map(term).collect())
}

/// Convert a PersistentVolume.
pub fn pv_input(pv: &PersistentVolume) -> Option<PvInput> {
    let spec = pv.spec.as_ref();
    Some(PvInput {
        name: pv.metadata.name.clone().filter(|n| !n.is_empty())?,
        labels: labels(&pv.metadata),
        node_affinity: pv_node_affinity(pv),
        csi: spec
            .and_then(|s| s.csi.as_ref())
            .map(|c| (c.driver.clone(), c.volume_handle.clone())),
        capacity: spec
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone()),
        access_modes: spec
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default(),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()),
        // `storagehelpers.GetPersistentVolumeClass`: the beta annotation first.
        storage_class: pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
            .cloned()
            .or_else(|| spec.and_then(|s| s.storage_class_name.clone())),
        phase: pv
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        // Any `claimRef` takes the PV, even one naming no claim by name (upstream skips a PV
        // whose `claimRef` is not the claim's, `IsVolumeBoundToClaim`).
        claim_ref: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| {
            (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )
        }),
        claim_ref_uid: spec
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.clone())
            .filter(|u| !u.is_empty()),
        terminating: pv.metadata.deletion_timestamp.is_some(),
    })
}

fn topology_term(t: &TopologySelectorTerm) -> SelectorTermInput {
    SelectorTermInput {
        match_expressions: t
            .match_label_expressions
            .iter()
            .flatten()
            .map(|r| SelectorRequirementInput {
                key: r.key.clone(),
                operator: "In".into(),
                values: r.values.clone(),
            })
            .collect(),
        match_fields: Vec::new(),
    }
}

/// Convert a StorageClass (`storage.k8s.io/v1`).
pub fn storage_class_input(c: &StorageClass) -> Option<StorageClassInput> {
    Some(StorageClassInput {
        name: c.metadata.name.clone().filter(|n| !n.is_empty())?,
        provisioner: c.provisioner.clone(),
        binding_mode: c.volume_binding_mode.clone().unwrap_or_default(),
        allowed_topologies: c
            .allowed_topologies
            .iter()
            .flatten()
            .map(topology_term)
            .collect(),
    })
}

/// Convert a CSINode (`storage.k8s.io/v1`): per driver, `allocatable.count`.
pub fn csi_node_input(n: &CSINode) -> Option<CsiNodeInput> {
    Some(CsiNodeInput {
        node: n.metadata.name.clone().filter(|n| !n.is_empty())?,
        drivers: n
            .spec
            .drivers
            .iter()
            .map(|d| {
                let count = d.allocatable.as_ref().and_then(|a| a.count).map(i64::from);
                (d.name.clone(), count)
            })
            .collect(),
    })
}

/// Convert a node.
pub fn node_input(node: &Node) -> Option<NodeInput> {
    let name = node.metadata.name.clone().filter(|n| !n.is_empty())?;
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    Some(NodeInput {
        name,
        labels: labels(&node.metadata),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| TaintInput {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        allocatable: resources(status.and_then(|s| s.allocatable.as_ref())),
        capacity: resources(status.and_then(|s| s.capacity.as_ref())),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True"),
    })
}

/// `--node-selector` semantics (upstream): a node is cached if ANY of its labels matches ANY
/// `key:value` entry. No entries: every node.
pub fn node_selected(node: &Node, selector: &[(String, String)]) -> bool {
    if selector.is_empty() {
        return true;
    }
    let Some(labels) = node.metadata.labels.as_ref() else {
        return false;
    };
    selector
        .iter()
        .any(|(k, v)| labels.get(k).is_some_and(|l| l == v))
}

/// Pending and ours: `spec.schedulerName == name` and no `spec.nodeName`.
pub fn is_pending_for(pod: &Pod, scheduler_name: &str) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.scheduler_name.as_deref()) == Some(scheduler_name)
        && spec
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn converts_every_field_the_engine_uses() {
        let p = pod(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "annotations": {"volcano.sh/scheduling-priority": "100"}},
            "spec": {
                "schedulerName": "agent-scheduler",
                "priority": 7,
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}},
                                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}],
                "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
                "overhead": {"cpu": "10m"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "schedulingGates": [{"name": "g"}],
                "affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                         "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]}}
            },
            "status": {"phase": "Pending", "nominatedNodeName": "n1"}
        }));
        let i = pod_input(p.clone()).unwrap();
        assert_eq!(
            (i.uid.as_str(), i.namespace.as_str(), i.name.as_str()),
            ("u1", "ns", "p")
        );
        assert_eq!(i.priority, 7);
        assert_eq!(i.scheduling_priority.as_deref(), Some("100"));
        assert_eq!(
            i.containers[0].requests,
            [("cpu".to_string(), "250m".to_string())]
        );
        assert_eq!(
            i.containers[0].limits,
            [("memory".to_string(), "1Gi".to_string())]
        );
        assert_eq!(i.containers[0].ports[0].host_port, 8080);
        assert!(i.init_containers[0].restartable);
        assert_eq!(i.overhead, [("cpu".to_string(), "10m".to_string())]);
        assert_eq!(i.tolerations[0].operator, "Exists");
        assert_eq!(i.scheduling_gates, ["g"]);
        let a = i.affinity.unwrap();
        assert_eq!(a.required.unwrap()[0].match_fields[0].key, "metadata.name");
        assert_eq!(a.preferred[0].0, 5);
        assert_eq!(i.nominated_node_name.as_deref(), Some("n1"));
        assert!(is_pending_for(&p, "agent-scheduler"));
        assert!(!is_pending_for(&p, "volcano"));
    }

    /// In-place resize: a container's status counts when it reports `resources` (regular
    /// containers and sidecars, matched by name; never a plain init container), and the
    /// `PodResizePending` reason `Infeasible` is read; the compiled pod then counts
    /// max(spec, actuated, allocated), or what it holds when infeasible.
    #[test]
    fn converts_in_place_resize_status() {
        let resized = |reason: Option<&str>| {
            let mut conditions = vec![json!({"type": "PodScheduled", "status": "True"})];
            if let Some(r) = reason {
                conditions.push(json!({"type": "PodResizePending", "status": "True", "reason": r}));
            }
            pod(json!({
                "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [
                        {"name": "a", "resources": {"requests": {"cpu": "200m"}}},
                        {"name": "b", "resources": {"requests": {"cpu": "100m"}}}],
                    "initContainers": [
                        {"name": "init", "resources": {"requests": {"cpu": "50m"}}},
                        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}]
                },
                "status": {
                    "phase": "Running",
                    "conditions": conditions,
                    "containerStatuses": [
                        {"name": "b", "image": "x", "ready": true, "restartCount": 0,
                         "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                        {"name": "a", "image": "x", "ready": true, "restartCount": 0,
                         "allocatedResources": {"cpu": "1"},
                         "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}],
                    "initContainerStatuses": [
                        {"name": "init", "image": "x", "ready": false, "restartCount": 0,
                         "resources": {"requests": {"cpu": "5"}}},
                        {"name": "side", "image": "x", "ready": true, "restartCount": 0,
                         "resources": {"requests": {"cpu": "300m"}}}]
                }
            }))
        };
        let i = pod_input(resized(None)).unwrap();
        let st = i.containers[0].status.as_ref().unwrap();
        assert_eq!(st.requests, [("cpu".to_string(), "1".to_string())]);
        assert_eq!(st.allocated, [("cpu".to_string(), "1".to_string())]);
        assert_eq!(i.containers[1].status, None, "b reports no resources");
        assert_eq!(i.init_containers[0].status, None, "not a sidecar");
        assert!(i.init_containers[1].status.is_some());
        assert!(!i.resize_infeasible);
        let cpu = |i: &PodInput| {
            let mut reg = magma_engine::model::ResourceRegistry::default();
            let mut int = magma_engine::model::Interner::default();
            magma_engine::model::compile_pod(i, &mut int, &mut reg)
                .unwrap()
                .request(magma_engine::model::CPU)
        };
        // a: max(200m, 1, 1) = 1; b: 100m; side: max(100m, 300m); the init step 50m + 300m.
        assert_eq!(cpu(&i), 1400);
        let i = pod_input(resized(Some("Infeasible"))).unwrap();
        assert!(i.resize_infeasible);
        assert_eq!(cpu(&i), 1400, "what it holds, as the spec asks less here");
        let i = pod_input(resized(Some("Deferred"))).unwrap();
        assert!(!i.resize_infeasible);
    }

    /// Pod-level resources (spec and the pod-level resize status) and resource claims (named,
    /// templated with and without the claim the controller made) reach the engine.
    #[test]
    fn converts_pod_level_resources_and_resource_claims() {
        let i = pod_input(pod(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {
                "containers": [{"name": "c", "resources": {}}],
                "resources": {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}},
                "resourceClaims": [
                    {"name": "gpu", "resourceClaimName": "shared-gpu"},
                    {"name": "nic", "resourceClaimTemplateName": "nic-tpl"},
                    {"name": "scratch", "resourceClaimTemplateName": "t2"}]
            },
            "status": {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
                "allocatedResources": {"cpu": "2"},
                "resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "p-nic-x7"}]
            }
        })))
        .unwrap();
        let r = i.resources.as_ref().unwrap();
        assert_eq!(r.requests, [("cpu".to_string(), "1500m".to_string())]);
        assert_eq!(r.limits, [("cpu".to_string(), "2".to_string())]);
        assert_eq!(
            r.status_requests.as_deref(),
            Some(&[("cpu".to_string(), "2".to_string())][..])
        );
        assert_eq!(
            r.allocated.as_deref(),
            Some(&[("cpu".to_string(), "2".to_string())][..])
        );
        let c = &i.resource_claims;
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].claim.as_deref(), Some("shared-gpu"));
        assert_eq!(c[1].template.as_deref(), Some("nic-tpl"));
        assert_eq!(c[1].made, Some(Some("p-nic-x7".to_string())));
        assert_eq!(c[2].made, None, "no claim made for it yet");
        // No pod-level resources: `None`, whatever the pod's containers ask.
        let i = pod_input(pod(json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": [], "resources": {}}
        })))
        .unwrap();
        assert!(i.resources.is_none() && i.resource_claims.is_empty());
    }

    #[test]
    fn converts_nodes_and_applies_the_or_selector() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"type": "kwok", "zone": "a"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}, "capacity": {"cpu": "32"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let i = node_input(&n).unwrap();
        assert!(i.unschedulable && i.ready);
        assert_eq!(i.taints[0].effect, "NoSchedule");
        assert_eq!(i.allocatable.len(), 3);
        assert!(node_selected(&n, &[]));
        assert!(node_selected(
            &n,
            &[("zone".into(), "b".into()), ("type".into(), "kwok".into())]
        ));
        assert!(!node_selected(&n, &[("zone".into(), "b".into())]));
    }

    #[test]
    fn pods_without_identity_are_rejected() {
        assert!(pod_input(pod(json!({"metadata": {"name": "p"}}))).is_none());
    }

    fn sel(key: &str, op: &str, values: &[&str]) -> SelectorRequirementInput {
        SelectorRequirementInput {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    /// A pod using every cross-node feature (pending, or bound to `node`).
    fn constrained_pod(node: Option<&str>) -> Pod {
        pod(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "labels": {"app": "web", "tier": "front"},
                         "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {
                "schedulerName": "agent-scheduler",
                "nodeName": node,
                "containers": [{"name": "c"}],
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": "db"},
                                              "matchExpressions": [{"key": "v", "operator": "In", "values": ["1", "2"]}]},
                            "namespaces": ["a", "b"],
                            "topologyKey": "topology.kubernetes.io/zone",
                            "matchLabelKeys": ["tier"]}],
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 40,
                            "podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "x"}},
                                                "topologyKey": "kubernetes.io/hostname"}}]},
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname",
                            "mismatchLabelKeys": ["tier"]}],
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 7,
                            "podAffinityTerm": {"topologyKey": "rack"}}]}},
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                    "matchLabelKeys": ["pod-template-hash"]}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "claim-a"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                    {"name": "tmp", "emptyDir": {}},
                    {"name": "cfg", "configMap": {"name": "x"}}]
            }
        }))
    }

    #[test]
    fn converts_pod_affinity_spread_labels_volumes_and_deletion() {
        for node in [None, Some("n1")] {
            let i = pod_input(constrained_pod(node)).unwrap();
            assert_eq!(i.node_name.as_deref(), node);
            assert_eq!(i.labels, [kv("app", "web"), kv("tier", "front")]);
            assert!(i.terminating);
            let a = i.pod_affinity.unwrap();
            assert_eq!(
                a.required,
                [PodAffinityTermInput {
                    label_selector: Some(LabelSelectorInput {
                        match_labels: vec![kv("app", "db")],
                        match_expressions: vec![sel("v", "In", &["1", "2"])],
                    }),
                    namespaces: vec!["a".into(), "b".into()],
                    namespace_selector: None,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    match_label_keys: vec!["tier".into()],
                    mismatch_label_keys: vec![],
                }]
            );
            assert_eq!(a.preferred.len(), 1);
            assert_eq!(a.preferred[0].0, 40);
            let t = &a.preferred[0].1;
            assert_eq!(t.label_selector, Some(LabelSelectorInput::default()));
            assert_eq!(
                t.namespace_selector.as_ref().unwrap().match_labels,
                [kv("team", "x")]
            );
            assert_eq!(a.required_anti[0].mismatch_label_keys, ["tier"]);
            assert_eq!(a.required_anti[0].topology_key, "kubernetes.io/hostname");
            assert_eq!(a.preferred_anti[0].0, 7);
            // An absent selector stays absent (it selects nothing), unlike an empty one.
            assert_eq!(a.preferred_anti[0].1.label_selector, None);
            assert_eq!(
                i.topology_spread,
                [TopologySpreadInput {
                    max_skew: 1,
                    topology_key: "topology.kubernetes.io/zone".into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    label_selector: Some(LabelSelectorInput {
                        match_labels: vec![kv("app", "web")],
                        match_expressions: vec![],
                    }),
                    min_domains: Some(3),
                    node_affinity_policy: Some("Ignore".into()),
                    node_taints_policy: Some("Honor".into()),
                    match_label_keys: vec!["pod-template-hash".into()],
                }]
            );
            assert_eq!(
                i.volumes,
                [
                    PodVolumeInput {
                        name: "data".into(),
                        claim: Some("claim-a".into()),
                        ephemeral: false
                    },
                    PodVolumeInput {
                        name: "scratch".into(),
                        claim: None,
                        ephemeral: true
                    },
                ]
            );
        }
    }

    #[test]
    fn converted_constraints_compile_in_the_engine() {
        use magma_engine::model::{Interner, ResourceRegistry, compile_pod};
        let i = pod_input(constrained_pod(None)).unwrap();
        let c = compile_pod(
            &i,
            &mut Interner::default(),
            &mut ResourceRegistry::default(),
        )
        .expect("the engine accepts what the adapter converts");
        assert!(
            c.lane,
            "a zone-keyed required term and DoNotSchedule spread use the lane"
        );
        assert_eq!(c.spread.len(), 1);
        assert!(c.info.terminating);
        let claims: Vec<(&str, bool)> = c.claims.iter().map(|(n, e)| (&**n, *e)).collect();
        assert_eq!(claims, [("claim-a", false), ("p-scratch", true)]);
    }

    #[test]
    fn pods_without_constraints_carry_none() {
        let i = pod_input(pod(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [], "affinity": {"podAffinity": {}, "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": []}}}
        })))
        .unwrap();
        assert_eq!(i.namespace, "default");
        assert!(i.pod_affinity.is_none(), "empty affinity is no affinity");
        assert!(i.topology_spread.is_empty() && i.volumes.is_empty() && i.labels.is_empty());
        assert!(!i.terminating);
        // No spec at all: still converted, nothing to schedule by.
        let i = pod_input(pod(json!({"metadata": {"name": "p", "uid": "u"}}))).unwrap();
        assert!(i.pod_affinity.is_none() && i.volumes.is_empty());
    }

    #[test]
    fn converts_claims() {
        let c: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns", "uid": "c1",
                         "annotations": {"volume.beta.kubernetes.io/storage-class": "beta",
                                         "pv.kubernetes.io/bind-completed": "yes"},
                         "deletionTimestamp": "2024-01-01T00:00:00Z",
                         "ownerReferences": [
                            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other"},
                            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]},
            "spec": {"storageClassName": "fast", "volumeName": "pv-1",
                     "accessModes": ["ReadWriteOncePod"], "volumeMode": "Block",
                     "resources": {"requests": {"storage": "5Gi"}},
                     "selector": {"matchLabels": {"tier": "fast"}}},
            "status": {"phase": "Bound"}
        }))
        .unwrap();
        assert_eq!(
            pvc_input(&c).unwrap(),
            PvcInput {
                namespace: "ns".into(),
                name: "data".into(),
                uid: "c1".into(),
                storage_class: Some("beta".into()),
                volume_name: Some("pv-1".into()),
                prebound: false,
                phase: "Bound".into(),
                access_modes: vec!["ReadWriteOncePod".into()],
                terminating: true,
                owner_uid: Some("pod-uid".into()),
                request: Some("5Gi".into()),
                volume_mode: Some("Block".into()),
                selector: Some(LabelSelectorInput {
                    match_labels: vec![("tier".into(), "fast".into())],
                    match_expressions: vec![],
                }),
            }
        );
        // Naming a volume without `bind-completed` (any value counts): pre-bound, not bound.
        let named: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "d1", "namespace": "ns", "uid": "c1",
                         "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let i = pvc_input(&named).unwrap();
        assert_eq!(i.volume_name.as_deref(), Some("pv-1"));
        assert!(i.prebound, "named without bind-completed: pre-bound");
        let mut completed = named.clone();
        completed
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(BIND_COMPLETED_ANNOTATION.into(), String::new());
        assert!(!pvc_input(&completed).unwrap().prebound, "bind completed");
        let c: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "d2", "namespace": "ns", "uid": "c2"},
            "spec": {"storageClassName": "fast", "volumeName": ""}
        }))
        .unwrap();
        let i = pvc_input(&c).unwrap();
        assert_eq!(i.storage_class.as_deref(), Some("fast"));
        assert_eq!(i.volume_name, None, "an empty volumeName is unbound");
        assert!(!i.prebound, "nothing named: nothing pre-bound");
        assert_eq!((i.phase.as_str(), i.owner_uid), ("", None));
        assert!(!i.terminating);
        let nameless: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"namespace": "ns"}})).unwrap();
        assert!(pvc_input(&nameless).is_none());
    }

    #[test]
    fn converts_volumes_classes_csinodes_and_namespaces() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                     "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "volumeMode": "Filesystem", "storageClassName": "local",
                     "claimRef": {"namespace": "ns", "name": "data", "uid": "c1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}},
            "status": {"phase": "Bound"}
        }))
        .unwrap();
        let i = pv_input(&pv).unwrap();
        assert_eq!(i.name, "pv-1");
        assert_eq!(i.labels, [kv("topology.kubernetes.io/zone", "a")]);
        assert_eq!(
            i.csi,
            Some(("ebs.csi.aws.com".to_string(), "vol-1".to_string()))
        );
        assert_eq!(
            (
                i.capacity.as_deref(),
                i.storage_class.as_deref(),
                i.phase.as_str()
            ),
            (Some("10Gi"), Some("local"), "Bound")
        );
        assert_eq!(i.access_modes, ["ReadWriteOnce"]);
        assert_eq!(i.claim_ref, Some(("ns".to_string(), "data".to_string())));
        assert_eq!(i.claim_ref_uid.as_deref(), Some("c1"));
        assert_eq!(
            i.node_affinity.unwrap()[0].match_expressions,
            [sel("topology.kubernetes.io/zone", "In", &["a"])]
        );
        let bare: PersistentVolume = serde_json::from_value(
            json!({"metadata": {"name": "pv-2"}, "spec": {"nodeAffinity": {}}}),
        )
        .unwrap();
        let i = pv_input(&bare).unwrap();
        assert!(i.node_affinity.is_none() && i.csi.is_none());
        assert!(i.claim_ref.is_none() && i.claim_ref_uid.is_none());
        // A claimRef naming no claim by name still takes the PV.
        let by_uid: PersistentVolume = serde_json::from_value(
            json!({"metadata": {"name": "pv-3"}, "spec": {"claimRef": {"uid": "c9"}}}),
        )
        .unwrap();
        let i = pv_input(&by_uid).unwrap();
        assert_eq!(i.claim_ref, Some((String::new(), String::new())));
        assert_eq!(i.claim_ref_uid.as_deref(), Some("c9"));

        let sc: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "wffc"}, "provisioner": "kube-sim.magma.io/provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["a", "b"]}]}]
        }))
        .unwrap();
        let i = storage_class_input(&sc).unwrap();
        assert_eq!(
            (
                i.name.as_str(),
                i.provisioner.as_str(),
                i.binding_mode.as_str()
            ),
            (
                "wffc",
                "kube-sim.magma.io/provisioner",
                "WaitForFirstConsumer"
            )
        );
        assert_eq!(
            i.allowed_topologies,
            [SelectorTermInput {
                match_expressions: vec![sel("topology.kubernetes.io/zone", "In", &["a", "b"])],
                match_fields: vec![],
            }]
        );
        let sc: StorageClass =
            serde_json::from_value(json!({"metadata": {"name": "plain"}, "provisioner": "p"}))
                .unwrap();
        let i = storage_class_input(&sc).unwrap();
        assert_eq!(i.binding_mode, "", "the engine defaults it to Immediate");
        assert!(i.allowed_topologies.is_empty());

        let cn: CSINode = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [
                {"name": "a", "nodeID": "n1", "allocatable": {"count": 25}},
                {"name": "b", "nodeID": "n1"}]}
        }))
        .unwrap();
        assert_eq!(
            csi_node_input(&cn).unwrap(),
            CsiNodeInput {
                node: "n1".into(),
                drivers: vec![("a".into(), Some(25)), ("b".into(), None)],
            }
        );

        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}),
        )
        .unwrap();
        assert_eq!(
            namespace_input(&ns).unwrap(),
            NamespaceInput {
                name: "team-a".into(),
                labels: vec![kv("team", "a")],
            }
        );
        let nameless: Namespace = serde_json::from_value(json!({"metadata": {}})).unwrap();
        assert!(namespace_input(&nameless).is_none());
    }
}
