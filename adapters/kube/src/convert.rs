//! API objects → engine inputs. The adapter keeps no copy of the objects it watches: each
//! event is converted here into the engine's compact string model (`PodInput`, `NodeInput`)
//! and the API object is dropped. Validation of quantities, operators and effects happens in
//! the engine's compile step, which reports errors back as intents.
//!
//! Owns the field mapping only; touches nothing else.

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use magma_engine::model::{
    ContainerInput, NodeAffinityInput, NodeInput, PodInput, PodPhase, PortInput,
    SelectorRequirementInput, SelectorTermInput, TaintInput, TolerationInput,
};
use std::collections::BTreeMap;

/// The annotation Volcano's queue orders by (urgent = 100).
pub const SCHEDULING_PRIORITY_ANNOTATION: &str = "volcano.sh/scheduling-priority";

fn resources(map: Option<&BTreeMap<String, Quantity>>) -> Vec<(String, String)> {
    map.map(|m| m.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
        .unwrap_or_default()
}

fn container(c: &Container, init: bool) -> ContainerInput {
    let r = c.resources.as_ref();
    ContainerInput {
        requests: resources(r.and_then(|r| r.requests.as_ref())),
        limits: resources(r.and_then(|r| r.limits.as_ref())),
        ports: c
            .ports
            .iter()
            .flatten()
            .map(|p| PortInput {
                host_port: p.host_port.unwrap_or(0),
                protocol: p.protocol.clone().unwrap_or_default(),
                host_ip: p.host_ip.clone().unwrap_or_default(),
            })
            .collect(),
        restartable: init && c.restart_policy.as_deref() == Some("Always"),
    }
}

fn requirement(r: &NodeSelectorRequirement) -> SelectorRequirementInput {
    SelectorRequirementInput {
        key: r.key.clone(),
        operator: r.operator.clone(),
        values: r.values.clone().unwrap_or_default(),
    }
}

fn term(t: &NodeSelectorTerm) -> SelectorTermInput {
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

fn toleration(t: &Toleration) -> TolerationInput {
    TolerationInput {
        key: t.key.clone().unwrap_or_default(),
        operator: t.operator.clone().unwrap_or_default(),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.clone().unwrap_or_default(),
    }
}

/// Convert a pod. Pods without a UID or name cannot be tracked and are rejected.
pub fn pod_input(pod: &Pod) -> Option<PodInput> {
    let meta = &pod.metadata;
    let uid = meta.uid.clone().filter(|u| !u.is_empty())?;
    let name = meta.name.clone().filter(|n| !n.is_empty())?;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let affinity = spec
        .and_then(|s| s.affinity.as_ref())
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
    Some(PodInput {
        uid,
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name,
        node_name: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        nominated_node_name: status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        phase: status
            .and_then(|s| s.phase.as_deref())
            .map_or(PodPhase::Pending, PodPhase::parse),
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
        scheduling_priority: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULING_PRIORITY_ANNOTATION))
            .cloned(),
        containers: spec
            .map(|s| s.containers.iter().map(|c| container(c, false)).collect())
            .unwrap_or_default(),
        init_containers: spec
            .and_then(|s| s.init_containers.as_ref())
            .map(|cs| cs.iter().map(|c| container(c, true)).collect())
            .unwrap_or_default(),
        overhead: resources(spec.and_then(|s| s.overhead.as_ref())),
        node_selector: spec
            .and_then(|s| s.node_selector.as_ref())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        affinity,
        tolerations: spec
            .and_then(|s| s.tolerations.as_ref())
            .map(|ts| ts.iter().map(toleration).collect())
            .unwrap_or_default(),
        scheduling_gates: spec
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|gs| gs.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default(),
        created_unix_ms: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond()),
        ..PodInput::default()
    })
}

/// Convert a node.
pub fn node_input(node: &Node) -> Option<NodeInput> {
    let name = node.metadata.name.clone().filter(|n| !n.is_empty())?;
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    Some(NodeInput {
        name,
        labels: node
            .metadata
            .labels
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
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
        let i = pod_input(&p).unwrap();
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
        assert!(pod_input(&pod(json!({"metadata": {"name": "p"}}))).is_none());
    }
}
