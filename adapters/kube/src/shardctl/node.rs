//! A node as the shard controller's pipeline sees it: its name, labels and requested/allocatable
//! totals. Plain data, read by the policies (`policy`) and the assignment (`assign`); uses
//! neither.

use std::collections::BTreeMap;

/// A node's requested and allocatable totals. `requested` is the sum of the regular containers'
/// requests of its non-terminal pods (init containers and pod overhead are ignored, like
/// upstream); `capacity` is the node's `status.capacity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeUsage {
    pub cpu_capacity_millis: i64,
    pub cpu_requested_millis: i64,
    pub memory_capacity_bytes: i64,
    pub memory_requested_bytes: i64,
}

impl NodeUsage {
    /// Add one pod's requests.
    pub fn add_pod(&mut self, cpu_millis: i64, memory_bytes: i64) {
        self.cpu_requested_millis = self.cpu_requested_millis.saturating_add(cpu_millis);
        self.memory_requested_bytes = self.memory_requested_bytes.saturating_add(memory_bytes);
    }

    /// Requested ÷ capacity in [0, 1]; `None` when the node reports no CPU capacity.
    pub fn cpu_utilization(&self) -> Option<f64> {
        ratio(self.cpu_requested_millis, self.cpu_capacity_millis)
    }

    /// Requested ÷ capacity in [0, 1]; `None` when the node reports no memory capacity.
    pub fn memory_utilization(&self) -> Option<f64> {
        ratio(self.memory_requested_bytes, self.memory_capacity_bytes)
    }
}

fn ratio(requested: i64, capacity: i64) -> Option<f64> {
    (capacity > 0).then(|| (requested as f64 / capacity as f64).clamp(0.0, 1.0))
}

/// What the pipeline knows about a node. `usage: None` means "no metrics": such a node fails
/// every `allocation-rate` filter.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShardNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub usage: Option<NodeUsage>,
}

impl ShardNode {
    pub fn new(name: impl Into<String>) -> ShardNode {
        ShardNode {
            name: name.into(),
            ..ShardNode::default()
        }
    }

    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> ShardNode {
        self.labels.insert(key.into(), value.into());
        self
    }

    pub fn with_usage(mut self, usage: NodeUsage) -> ShardNode {
        self.usage = Some(usage);
        self
    }

    /// CPU utilisation, `None` without metrics (or without CPU capacity).
    pub fn cpu_utilization(&self) -> Option<f64> {
        self.usage.and_then(|u| u.cpu_utilization())
    }
}
