//! The controller's in-memory view of the cluster: for each node its labels, annotations and
//! `status.capacity` (CPU, memory), and the summed requests of the non-terminal pods bound to it;
//! plus the per-node usage the last sync saw, to judge whether an event is significant. Fed by
//! the watches through `apply_*` / `delete_*` / `reset_*` (a relist), it never sees HTTP. Each
//! event costs O(1) (a pod moves its requests between two per-node sums); building the
//! assignment input ([`ClusterIndex::shard_nodes`]) is O(nodes) and happens once per sync.
//!
//! What counts, like upstream's `node_utilization.go`: the regular containers' `requests` of
//! pods with a `spec.nodeName` that are not `Succeeded`/`Failed` and are not mirror pods. Init
//! containers and pod overhead are ignored. Pods on nodes not (yet) known are summed anyway, so a
//! node that appears later starts with the right usage.

use super::assign::{NodeUsage, ShardNode, significant_usage_change};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::{BTreeMap, HashMap};

/// Annotation of the API server's copy of a static pod (excluded, as upstream does).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NodeEntry {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    cpu_capacity_millis: i64,
    memory_capacity_bytes: i64,
}

/// What one pod contributes to its node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodEntry {
    node: String,
    cpu_millis: i64,
    memory_bytes: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Requested {
    cpu_millis: i64,
    memory_bytes: i64,
}

/// A node relist being collected: objects are reduced to what the index keeps as they arrive,
/// so a relist never holds the full API objects.
#[derive(Debug, Default)]
pub struct NodeRelist(HashMap<String, NodeEntry>);

impl NodeRelist {
    pub fn apply(&mut self, node: &Node) {
        if let Some(name) = node.metadata.name.clone() {
            self.0.insert(name, node_entry(node));
        }
    }
}

/// A pod relist being collected (see [`NodeRelist`]).
#[derive(Debug, Default)]
pub struct PodRelist(HashMap<(String, String), PodEntry>);

impl PodRelist {
    pub fn apply(&mut self, pod: &Pod) {
        if let (Some(key), Some(entry)) = (pod_key(pod), pod_entry(pod)) {
            self.0.insert(key, entry);
        }
    }
}

/// Why a node event matters (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    Added,
    Deleted,
    /// Labels or annotations changed.
    Metadata,
    /// Capacity changed enough to move utilisation past the threshold.
    Capacity,
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    nodes: HashMap<String, NodeEntry>,
    pods: HashMap<(String, String), PodEntry>,
    requested: HashMap<String, Requested>,
    /// Usage per node as of the last [`ClusterIndex::mark_synced`].
    baseline: HashMap<String, NodeUsage>,
}

impl ClusterIndex {
    pub fn new() -> ClusterIndex {
        ClusterIndex::default()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A node was added or changed. Returns why it matters for the shards, if it does;
    /// `threshold` is the configuration's utilisation-change threshold.
    pub fn apply_node(&mut self, node: &Node, threshold: f64) -> Option<NodeChange> {
        let name = node.metadata.name.clone()?;
        let entry = node_entry(node);
        let old = self.nodes.insert(name.clone(), entry.clone());
        match old {
            None => Some(NodeChange::Added),
            Some(old) if old.labels != entry.labels || old.annotations != entry.annotations => {
                Some(NodeChange::Metadata)
            }
            Some(old)
                if (old.cpu_capacity_millis != entry.cpu_capacity_millis
                    || old.memory_capacity_bytes != entry.memory_capacity_bytes)
                    && self.usage_significant(&name, threshold) =>
            {
                Some(NodeChange::Capacity)
            }
            Some(_) => None,
        }
    }

    /// A node was deleted. `true` when it was known.
    pub fn delete_node(&mut self, name: &str) -> bool {
        self.baseline.remove(name);
        self.nodes.remove(name).is_some()
    }

    /// A relist of the nodes. Returns whether the set or any node's metadata or capacity
    /// changed.
    #[cfg(test)]
    pub fn reset_nodes(&mut self, nodes: &[Node]) -> bool {
        let mut r = NodeRelist::default();
        nodes.iter().for_each(|n| r.apply(n));
        self.finish_node_relist(r)
    }

    /// Install a relist collected with [`NodeRelist::apply`] (the watch delivers it as `Init … InitDone`).
    pub fn finish_node_relist(&mut self, relist: NodeRelist) -> bool {
        let new = relist.0;
        let changed = new != self.nodes;
        self.baseline.retain(|k, _| new.contains_key(k));
        self.nodes = new;
        changed
    }

    /// A pod was added or changed. Returns the nodes whose usage changed (at most two: the
    /// pod's old and new node).
    pub fn apply_pod(&mut self, pod: &Pod) -> Vec<String> {
        let Some(key) = pod_key(pod) else {
            return vec![];
        };
        let new = pod_entry(pod);
        let old = match &new {
            Some(e) => self.pods.insert(key, e.clone()),
            None => self.pods.remove(&key),
        };
        if old == new {
            return vec![];
        }
        let mut touched = Vec::with_capacity(2);
        if let Some(o) = old {
            self.add(&o, -1);
            touched.push(o.node);
        }
        if let Some(n) = new {
            self.add(&n, 1);
            if !touched.contains(&n.node) {
                touched.push(n.node);
            }
        }
        touched
    }

    /// A pod was deleted. Returns the node whose usage changed, if any.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Option<String> {
        let old = self.pods.remove(&(namespace.to_owned(), name.to_owned()))?;
        self.add(&old, -1);
        Some(old.node)
    }

    /// A relist of the pods: rebuilds the sums.
    #[cfg(test)]
    pub fn reset_pods(&mut self, pods: &[Pod]) {
        let mut r = PodRelist::default();
        pods.iter().for_each(|p| r.apply(p));
        self.finish_pod_relist(r);
    }

    /// Install a relist collected with [`PodRelist::apply`] (the watch delivers it as `Init … InitDone`).
    pub fn finish_pod_relist(&mut self, relist: PodRelist) {
        self.pods = relist.0;
        self.requested.clear();
        let entries: Vec<PodEntry> = self.pods.values().cloned().collect();
        for e in &entries {
            self.add(e, 1);
        }
    }

    fn add(&mut self, e: &PodEntry, sign: i64) {
        let r = self.requested.entry(e.node.clone()).or_default();
        r.cpu_millis = r.cpu_millis.saturating_add(sign * e.cpu_millis);
        r.memory_bytes = r.memory_bytes.saturating_add(sign * e.memory_bytes);
        if *r == Requested::default() {
            self.requested.remove(&e.node);
        }
    }

    /// The node's current usage; `None` for an unknown node.
    pub fn usage(&self, node: &str) -> Option<NodeUsage> {
        let n = self.nodes.get(node)?;
        let r = self.requested.get(node).copied().unwrap_or_default();
        Some(NodeUsage {
            cpu_capacity_millis: n.cpu_capacity_millis,
            cpu_requested_millis: r.cpu_millis,
            memory_capacity_bytes: n.memory_capacity_bytes,
            memory_requested_bytes: r.memory_bytes,
        })
    }

    /// Whether the node's usage moved by more than `threshold` since the last sync (a node the
    /// last sync did not see always counts).
    pub fn usage_significant(&self, node: &str, threshold: f64) -> bool {
        let now = self.usage(node);
        now.is_some() && significant_usage_change(self.baseline.get(node), now.as_ref(), threshold)
    }

    /// Every node as the assignment sees it (sorted by name).
    pub fn shard_nodes(&self) -> Vec<ShardNode> {
        let mut out: Vec<ShardNode> = self
            .nodes
            .iter()
            .map(|(name, n)| ShardNode {
                name: name.clone(),
                labels: n.labels.clone(),
                usage: self.usage(name),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Record the usage the sync just used as the baseline for significance.
    pub fn mark_synced(&mut self) {
        self.baseline = self
            .nodes
            .keys()
            .filter_map(|k| Some((k.clone(), self.usage(k)?)))
            .collect();
    }
}

fn node_entry(node: &Node) -> NodeEntry {
    let cap = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let q = |k: &str, scale: i64| {
        cap.and_then(|c| c.get(k))
            .map_or(0, |v| quantity(k, v, scale))
    };
    NodeEntry {
        labels: node.metadata.labels.clone().unwrap_or_default(),
        annotations: node.metadata.annotations.clone().unwrap_or_default(),
        cpu_capacity_millis: q("cpu", 1000),
        memory_capacity_bytes: q("memory", 1),
    }
}

fn pod_key(pod: &Pod) -> Option<(String, String)> {
    Some((
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone()?,
    ))
}

/// `None` when the pod does not count (unbound, terminal, mirror).
fn pod_entry(pod: &Pod) -> Option<PodEntry> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
    {
        return None;
    }
    let (mut cpu_millis, mut memory_bytes) = (0i64, 0i64);
    for c in &spec.containers {
        let Some(req) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) else {
            continue;
        };
        if let Some(v) = req.get("cpu") {
            cpu_millis = cpu_millis.saturating_add(quantity("cpu", v, 1000));
        }
        if let Some(v) = req.get("memory") {
            memory_bytes = memory_bytes.saturating_add(quantity("memory", v, 1));
        }
    }
    Some(PodEntry {
        node,
        cpu_millis,
        memory_bytes,
    })
}

/// A quantity in `scale` units; an unparsable one counts as 0 (logged): the API server validates
/// quantities, so this only guards against a malformed object from a simulator or a bug.
fn quantity(resource: &str, q: &Quantity, scale: i64) -> i64 {
    magma_engine::model::parse_scaled(resource, &q.0, scale).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring an unparsable quantity");
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_node(name: &str, cpu: &str, labels: &[(&str, &str)]) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels.iter().cloned().collect::<BTreeMap<_, _>>()},
            "status": {"capacity": {"cpu": cpu, "memory": "100Gi"}}
        }))
        .expect("node")
    }

    fn mk_pod(name: &str, node: Option<&str>, cpu: &str, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "9"}}}
                ],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}]
            },
            "status": {"phase": phase}
        }))
        .expect("pod")
    }

    #[test]
    fn sums_requests_of_bound_non_terminal_pods() {
        let mut ix = ClusterIndex::new();
        assert_eq!(
            ix.apply_node(&mk_node("n", "4", &[]), 0.1),
            Some(NodeChange::Added)
        );
        assert!(ix.apply_pod(&mk_pod("p1", None, "1", "Pending")).is_empty());
        assert_eq!(
            ix.apply_pod(&mk_pod("p2", Some("n"), "1", "Running")),
            ["n"]
        );
        assert_eq!(
            ix.apply_pod(&mk_pod("p3", Some("n"), "500m", "Pending")),
            ["n"]
        );
        let u = ix.usage("n").expect("usage");
        assert_eq!(
            u.cpu_requested_millis, 1500,
            "init containers, limits ignored"
        );
        assert_eq!(u.memory_requested_bytes, 512 << 20);
        assert_eq!(u.cpu_capacity_millis, 4000);
        // Terminal: no longer counted. Unchanged: no touch.
        assert_eq!(
            ix.apply_pod(&mk_pod("p2", Some("n"), "1", "Succeeded")),
            ["n"]
        );
        assert!(
            ix.apply_pod(&mk_pod("p2", Some("n"), "1", "Succeeded"))
                .is_empty()
        );
        assert_eq!(ix.delete_pod("ns", "p3").as_deref(), Some("n"));
        assert_eq!(ix.usage("n").expect("usage").cpu_requested_millis, 0);
        // Mirror pods are excluded.
        let mut mirror = mk_pod("m", Some("n"), "1", "Running");
        mirror.metadata.annotations =
            Some(BTreeMap::from([(MIRROR_POD_ANNOTATION.into(), "x".into())]));
        assert!(ix.apply_pod(&mirror).is_empty());
    }

    #[test]
    fn pods_before_their_node_and_relists() {
        let mut ix = ClusterIndex::new();
        ix.apply_pod(&mk_pod("p", Some("late"), "2", "Running"));
        ix.apply_node(&mk_node("late", "4", &[]), 0.1);
        assert_eq!(
            ix.usage("late").expect("usage").cpu_utilization(),
            Some(0.5)
        );
        ix.reset_pods(&[mk_pod("q", Some("late"), "1", "Running")]);
        assert_eq!(ix.usage("late").expect("usage").cpu_requested_millis, 1000);
        assert!(!ix.reset_nodes(&[mk_node("late", "4", &[])]));
        assert!(ix.reset_nodes(&[]));
        assert_eq!(ix.node_count(), 0);
    }

    #[test]
    fn significance_is_measured_against_the_last_sync() {
        let mut ix = ClusterIndex::new();
        ix.apply_node(&mk_node("n", "10", &[]), 0.1);
        assert!(ix.usage_significant("n", 0.1), "never synced");
        ix.mark_synced();
        assert!(!ix.usage_significant("n", 0.1));
        // Many small pods add up: each is below the threshold, their sum is not.
        for i in 0..3 {
            ix.apply_pod(&mk_pod(&format!("p{i}"), Some("n"), "500m", "Running"));
            assert!(!ix.usage_significant("n", 0.2), "after {i}");
        }
        ix.apply_pod(&mk_pod("p3", Some("n"), "600m", "Running"));
        assert!(ix.usage_significant("n", 0.2));
        ix.mark_synced();
        assert!(!ix.usage_significant("n", 0.2));
        assert!(!ix.usage_significant("unknown", 0.2));
    }

    #[test]
    fn node_changes_that_matter() {
        let mut ix = ClusterIndex::new();
        ix.apply_node(&mk_node("n", "10", &[]), 0.1);
        ix.apply_pod(&mk_pod("p", Some("n"), "5", "Running"));
        ix.mark_synced();
        assert_eq!(ix.apply_node(&mk_node("n", "10", &[]), 0.1), None);
        assert_eq!(
            ix.apply_node(&mk_node("n", "10", &[("warm", "true")]), 0.1),
            Some(NodeChange::Metadata)
        );
        // 10 → 11 CPUs: 0.5 → 0.45 utilisation, below the threshold.
        assert_eq!(
            ix.apply_node(&mk_node("n", "11", &[("warm", "true")]), 0.1),
            None
        );
        // 11 → 20 CPUs: 0.25, significant.
        assert_eq!(
            ix.apply_node(&mk_node("n", "20", &[("warm", "true")]), 0.1),
            Some(NodeChange::Capacity)
        );
        assert!(ix.delete_node("n"));
        assert!(!ix.delete_node("n"));
        let nodes = ix.shard_nodes();
        assert!(nodes.is_empty());
    }
}
