//! Pods and nodes decoded for scheduling: only the fields [`crate::convert`] reads.
//!
//! The scheduler's pod and node watches carry every field of every object, and a pod arrives
//! at least three times (created, bound, running). Decoding full k8s-openapi objects
//! allocated each container's image, command, environment and probes, each condition and
//! container status (with its timestamps parsed), the pod's `managedFields` and every
//! annotation, only to drop them in `convert` (issue 15: about a third of the scheduler's CPU
//! per pod). These types name only what the engine consumes; serde skips the rest of the JSON
//! without allocating. Field names and `Option`s follow k8s-openapi's, so `convert` reads them
//! the same way, and an absent or `null` field means what it means to the API.
//!
//! [`Pod`] and [`Node`] are [`kube::Resource`]s of the core `v1` group, so `Api`, `watcher` and
//! `list` work on them unchanged. Their `metadata` is an [`ObjectMeta`] holding only name,
//! namespace, UID, resource version, labels, the creation and deletion timestamps, and (pods)
//! the one annotation the queue orders by.
//!
//! Owns: the decoding of those two kinds for the scheduler. Touches nothing else. The
//! shard controller and the bind path keep k8s-openapi's full types.

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, PersistentVolumeClaimVolumeSource, PodSchedulingGate,
    ResourceRequirements, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The annotation Volcano's queue orders by (urgent = 100).
pub const SCHEDULING_PRIORITY_ANNOTATION: &str = "volcano.sh/scheduling-priority";

/// `null` or absent: the type's default (the API omits empty lists and maps, but a client
/// may send `null`).
fn null_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// The metadata fields the scheduler reads. `annotations` is filled by the kind's filter.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<A> {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: A,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

impl<A: Into<Option<BTreeMap<String, String>>>> From<Meta<A>> for ObjectMeta {
    fn from(m: Meta<A>) -> ObjectMeta {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            labels: m.labels,
            annotations: m.annotations.into(),
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            ..ObjectMeta::default()
        }
    }
}

/// A pod's annotations, keeping only [`SCHEDULING_PRIORITY_ANNOTATION`]: the others (a
/// `kubectl.kubernetes.io/last-applied-configuration` can be kilobytes) are skipped unread.
#[derive(Default)]
struct PriorityAnnotation(Option<BTreeMap<String, String>>);

impl From<PriorityAnnotation> for Option<BTreeMap<String, String>> {
    fn from(a: PriorityAnnotation) -> Self {
        a.0
    }
}

impl<'de> Deserialize<'de> for PriorityAnnotation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PriorityAnnotation;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of annotations or null")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(PriorityAnnotation(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(PriorityAnnotation(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_map(self)
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Self::Value, M::Error> {
                let mut kept = None;
                while let Some(IsPriority(is)) = m.next_key()? {
                    if is {
                        let value: String = m.next_value()?;
                        kept = Some(BTreeMap::from([(
                            SCHEDULING_PRIORITY_ANNOTATION.to_string(),
                            value,
                        )]));
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(PriorityAnnotation(kept))
            }
        }
        d.deserialize_option(V)
    }
}

/// Whether an annotation key is [`SCHEDULING_PRIORITY_ANNOTATION`], compared without
/// allocating the key.
struct IsPriority(bool);

impl<'de> Deserialize<'de> for IsPriority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsPriority;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an annotation key")
            }
            fn visit_str<E>(self, k: &str) -> Result<IsPriority, E> {
                Ok(IsPriority(k == SCHEDULING_PRIORITY_ANNOTATION))
            }
        }
        d.deserialize_str(V)
    }
}

/// Annotations skipped entirely (nodes: the scheduler reads none).
#[derive(Default)]
struct NoAnnotations;

impl From<NoAnnotations> for Option<BTreeMap<String, String>> {
    fn from(_: NoAnnotations) -> Self {
        None
    }
}

impl<'de> Deserialize<'de> for NoAnnotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| NoAnnotations)
    }
}

fn meta<'de, D: Deserializer<'de>, A>(d: D) -> Result<ObjectMeta, D::Error>
where
    A: Deserialize<'de> + Default + Into<Option<BTreeMap<String, String>>>,
{
    Ok(Option::<Meta<A>>::deserialize(d)?
        .map(ObjectMeta::from)
        .unwrap_or_default())
}

fn pod_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    meta::<D, PriorityAnnotation>(d)
}

fn node_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    meta::<D, NoAnnotations>(d)
}

/// A pod, as the scheduler reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Pod {
    #[serde(default, deserialize_with = "pod_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

/// `spec` of a [`Pod`]: placement, requests and the cross-node constraints.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub node_name: Option<String>,
    pub scheduler_name: Option<String>,
    pub priority: Option<i32>,
    #[serde(default, deserialize_with = "null_default")]
    pub containers: Vec<Container>,
    pub init_containers: Option<Vec<Container>>,
    pub overhead: Option<BTreeMap<String, Quantity>>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub affinity: Option<Affinity>,
    pub tolerations: Option<Vec<Toleration>>,
    pub scheduling_gates: Option<Vec<PodSchedulingGate>>,
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    pub volumes: Option<Vec<Volume>>,
    /// Pod-level requests and limits (`PodLevelResources`).
    pub resources: Option<ResourceRequirements>,
    /// The ResourceClaims (DRA) the pod uses.
    pub resource_claims: Option<Vec<PodResourceClaim>>,
    /// `Never`: it does not preempt others (`PreemptLowerPriority` otherwise).
    pub preemption_policy: Option<String>,
}

/// `spec.resourceClaims[]`: a claim by name, or one made for the pod from a template.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    #[serde(default)]
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
}

/// `status.resourceClaimStatuses[]`: the claim the resource-claim controller made for a
/// template (`None`: no claim is needed).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaimStatus {
    #[serde(default)]
    pub name: String,
    pub resource_claim_name: Option<String>,
}

/// A container's name (to find its status), requests, limits, host ports and (init
/// containers) restart policy.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    pub resources: Option<ResourceRequirements>,
    pub ports: Option<Vec<ContainerPort>>,
    pub restart_policy: Option<String>,
}

/// A volume: its name, and whether it uses a claim (`persistentVolumeClaim` or `ephemeral`;
/// the ephemeral template itself is not read).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub name: String,
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    #[serde(default, deserialize_with = "present")]
    pub ephemeral: Option<()>,
}

/// `Some(())` when the field is present and not `null`; its content is skipped.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<()>, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.map(|_| ()))
}

/// `status` of a [`Pod`]: its phase, the nominated node, what in-place resize reads (the
/// containers' and the pod's actuated and allocated resources, the `PodResizePending` reason),
/// the claims made for its templates, and when it started. Of the conditions only type, status
/// and reason are read;
/// container states, images and probes are skipped.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    pub phase: Option<String>,
    pub nominated_node_name: Option<String>,
    pub conditions: Option<Vec<PodCondition>>,
    pub container_statuses: Option<Vec<ContainerStatus>>,
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    /// Pod-level in-place resize: what is actuated (`requests` only is read) and what the
    /// kubelet admitted (`InPlacePodLevelResourcesVerticalScaling`).
    pub resources: Option<StatusResources>,
    pub allocated_resources: Option<BTreeMap<String, Quantity>>,
    pub resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
    /// When the kubelet started it (preemption spares the pods that started first).
    pub start_time: Option<Time>,
}

/// One pod condition: type, status and reason.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct PodCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    pub status: Option<String>,
    pub reason: Option<String>,
}

/// A container's status as in-place resize reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub name: String,
    /// What is actuated (`requests` only is read).
    pub resources: Option<StatusResources>,
    /// What the kubelet admitted.
    pub allocated_resources: Option<BTreeMap<String, Quantity>>,
}

/// `status.containerStatuses[].resources`: its requests.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StatusResources {
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// A node, as the scheduler reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Node {
    #[serde(default, deserialize_with = "node_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<NodeSpec>,
    pub status: Option<NodeStatus>,
}

/// `spec` of a [`Node`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    pub taints: Option<Vec<Taint>>,
    pub unschedulable: Option<bool>,
}

/// `status` of a [`Node`]: its resources and conditions (type and status only; a node's
/// `images` list, addresses and heartbeat timestamps are skipped).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    pub capacity: Option<BTreeMap<String, Quantity>>,
    pub conditions: Option<Vec<NodeCondition>>,
}

/// One node condition.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct NodeCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

macro_rules! core_v1 {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("")
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("v1")
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

core_v1!(Pod, "Pod", "pods", NamespaceResourceScope);
core_v1!(Node, "Node", "nodes", ClusterResourceScope);

#[cfg(test)]
mod tests {
    use super::*;
    use kube::{Resource, ResourceExt};
    use serde_json::json;

    /// A pod as a real API server returns it, with the fields the scheduler does not read.
    fn full_pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                "generateName": "p-", "creationTimestamp": "2026-12-02T06:00:00Z",
                "labels": {"app": "a"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"a\": [1, 2]}",
                    "volcano.sh/scheduling-priority": "100",
                    "other": "x"
                },
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "o1"}],
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                                   "fieldsV1": {"f:spec": {"f:containers": {}}}}]
            },
            "spec": {
                "schedulerName": "agent-scheduler", "priority": 5,
                "containers": [{
                    "name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 1"],
                    "env": [{"name": "A", "value": "B"}],
                    "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "livenessProbe": {"httpGet": {"path": "/", "port": 80}}
                }],
                "initContainers": [{"name": "i", "image": "x", "restartPolicy": "Always"}],
                "nodeSelector": null,
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
                ],
                "dnsPolicy": "ClusterFirst", "securityContext": {}
            },
            "status": {
                "phase": "Pending", "nominatedNodeName": "n2", "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "False",
                                "lastTransitionTime": "2026-12-02T06:00:01Z"}]
            }
        })
    }

    #[test]
    fn a_full_pod_decodes_to_the_fields_the_scheduler_reads() {
        let p: Pod = serde_json::from_value(full_pod()).unwrap();
        let m = &p.metadata;
        assert_eq!(m.name.as_deref(), Some("p"));
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        assert_eq!(m.uid.as_deref(), Some("u1"));
        assert_eq!(p.resource_version().as_deref(), Some("42"));
        assert!(m.creation_timestamp.is_some());
        assert_eq!(
            m.annotations,
            Some(BTreeMap::from([(
                SCHEDULING_PRIORITY_ANNOTATION.to_string(),
                "100".to_string()
            )]))
        );
        assert!(m.managed_fields.is_none() && m.owner_references.is_none());
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.priority, Some(5));
        assert_eq!(spec.node_selector, None);
        let c = &spec.containers[0];
        let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(req["cpu"].0, "100m");
        assert_eq!(c.ports.as_ref().unwrap()[0].host_port, Some(8080));
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.restart_policy.as_deref(), Some("Always"));
        let v = spec.volumes.as_ref().unwrap();
        assert_eq!(
            v[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "c1"
        );
        assert_eq!((v[1].ephemeral, v[2].ephemeral), (Some(()), None));
        let status = p.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.nominated_node_name.as_deref(), Some("n2"));
    }

    #[test]
    fn annotations_without_the_priority_key_and_nulls_decode_to_none() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": {"a": "b"}, "labels": null},
            "spec": {"containers": null, "volumes": [{"name": "v", "ephemeral": null}]},
            "status": null
        }))
        .unwrap();
        assert_eq!(p.metadata.annotations, None);
        assert_eq!(p.metadata.labels, None);
        let spec = p.spec.unwrap();
        assert!(spec.containers.is_empty());
        assert_eq!(spec.volumes.unwrap()[0].ephemeral, None);
        assert!(p.status.is_none());
        let p: Pod = serde_json::from_value(json!({"metadata": {"annotations": null}})).unwrap();
        assert_eq!(p.metadata.annotations, None);
        let p: Pod = serde_json::from_value(json!({"metadata": null})).unwrap();
        assert_eq!(p.metadata, ObjectMeta::default());
    }

    #[test]
    fn a_field_of_the_wrong_type_is_an_error_not_a_default() {
        let e = serde_json::from_value::<Pod>(json!({"spec": {"priority": "high"}})).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
    }

    #[test]
    fn a_node_keeps_resources_taints_and_conditions_and_drops_the_rest() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "7", "labels": {"zone": "a"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24",
                     "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "4", "pods": "110"},
                "capacity": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True",
                                "lastHeartbeatTime": "2026-12-02T06:00:00Z", "reason": "KubeletReady"}],
                "images": [{"names": ["registry/image:tag"], "sizeBytes": 1}],
                "nodeInfo": {"kubeletVersion": "v1.36.0"}
            }
        }))
        .unwrap();
        assert_eq!(n.metadata.name.as_deref(), Some("n1"));
        assert_eq!(n.metadata.annotations, None);
        assert_eq!(
            n.spec.as_ref().unwrap().taints.as_ref().unwrap()[0].key,
            "k"
        );
        let s = n.status.unwrap();
        assert_eq!(s.allocatable.unwrap()["cpu"].0, "4");
        let c = &s.conditions.unwrap()[0];
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "True"));
    }

    #[test]
    fn the_resources_are_core_v1_pods_and_nodes() {
        assert_eq!(Pod::url_path(&(), Some("ns")), "/api/v1/namespaces/ns/pods");
        assert_eq!(Node::url_path(&(), None), "/api/v1/nodes");
        assert_eq!(Pod::api_version(&()), "v1");
    }
}
