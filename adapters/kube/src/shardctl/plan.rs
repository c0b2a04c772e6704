//! The sync decision: from the cluster's nodes, the active configuration and the observed
//! NodeShards, the list of NodeShard writes one sync makes. Pure: it runs [`super::assign()`],
//! then [`super::handoff::pin_in_transit`], then decides creates, spec updates and the handling
//! of stale shards; executing the writes belongs to the controller.
//!
//! Rules:
//! 1. A configured scheduler without a NodeShard gets one (name = scheduler name).
//! 2. A configured scheduler's NodeShard is updated (only `spec.nodesDesired`) when its node set
//!    changes after anti-flap and hand-off pinning. Shards that only lose nodes are written
//!    first, so a reader between two writes never sees a moving node desired by both shards.
//! 3. A **stale** NodeShard (its name is not a scheduler of the current, valid configuration) is
//!    never deleted while it may still be in use, because deleting it would let every other shard
//!    take its nodes at once while its scheduler is still placing pods there. Instead its
//!    `nodesDesired` is emptied (its scheduler, if still running, then releases the nodes through
//!    the normal hand-off) and it is deleted only once its `status.nodesInUse` is empty (at once
//!    if it is empty already; the delete is conditional on the resourceVersion the decision was
//!    made from, so a status written meanwhile cancels it). A stale shard whose scheduler is
//!    gone for good keeps its status; an operator deletes it by hand.
//! 4. Nothing here ever runs without a valid configuration: the controller keeps its previous
//!    configuration when a new one is rejected, and makes no writes before it has one.

use super::assign::{ShardAssignment, ShardNode, assign};
use super::config::ShardingConfig;
use super::handoff::{InTransit, ObservedShard, pin_in_transit};
use std::collections::{BTreeMap, BTreeSet};

/// One NodeShard write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardWrite {
    /// Create the NodeShard `name` with `nodes_desired`.
    Create {
        name: String,
        nodes_desired: Vec<String>,
    },
    /// Set `spec.nodesDesired` of an existing NodeShard (conditional on its resourceVersion).
    /// Stale shards are emptied this way.
    Update {
        name: String,
        nodes_desired: Vec<String>,
        stale: bool,
    },
    /// Delete a stale NodeShard whose status lists no node in use (conditional on its
    /// resourceVersion).
    Delete { name: String },
}

impl ShardWrite {
    pub fn name(&self) -> &str {
        match self {
            ShardWrite::Create { name, .. }
            | ShardWrite::Update { name, .. }
            | ShardWrite::Delete { name } => name,
        }
    }

    /// The `verb` label of the write metric.
    pub fn verb(&self) -> &'static str {
        match self {
            ShardWrite::Create { .. } => "create",
            ShardWrite::Update { .. } => "update",
            ShardWrite::Delete { .. } => "delete",
        }
    }
}

/// What one sync decided.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncPlan {
    /// Every configured scheduler's result, in config order, after hand-off pinning.
    pub assignments: Vec<ShardAssignment>,
    /// The writes: configured schedulers first (those only losing nodes, then the others, each
    /// in config order), then stale shards (by name).
    pub writes: Vec<ShardWrite>,
    /// Stale shards that are empty in spec but still list nodes in use: kept until released.
    pub draining: Vec<String>,
    /// In-transit nodes that constrained the assignment.
    pub in_transit: Vec<InTransit>,
}

/// Decide one sync (module doc).
pub fn plan_sync(
    nodes: &[ShardNode],
    config: &ShardingConfig,
    observed: &BTreeMap<String, ObservedShard>,
) -> SyncPlan {
    let current: BTreeMap<String, Vec<String>> = observed
        .iter()
        .map(|(k, v)| (k.clone(), v.nodes_desired.clone()))
        .collect();
    let mut assignments = assign(nodes, config, &current);
    let existing: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let in_transit = pin_in_transit(&mut assignments, observed, |n| existing.contains(n));

    let mut writes = Vec::new();
    // Shards that only lose nodes are written before those that gain any, so a node moving
    // from one shard to another is never seen in both `nodesDesired` lists between the writes.
    let (shrinking, growing): (Vec<&ShardAssignment>, Vec<&ShardAssignment>) =
        assignments.iter().filter(|a| a.write).partition(|a| {
            observed
                .get(&a.scheduler)
                .is_some_and(|o| a.nodes_desired.iter().all(|n| o.nodes_desired.contains(n)))
        });
    for a in shrinking.into_iter().chain(growing) {
        writes.push(if observed.contains_key(&a.scheduler) {
            ShardWrite::Update {
                name: a.scheduler.clone(),
                nodes_desired: a.nodes_desired.clone(),
                stale: false,
            }
        } else {
            ShardWrite::Create {
                name: a.scheduler.clone(),
                nodes_desired: a.nodes_desired.clone(),
            }
        });
    }
    let configured: BTreeSet<&str> = config.schedulers.iter().map(|s| s.name.as_str()).collect();
    let mut draining = Vec::new();
    for (name, shard) in observed {
        if configured.contains(name.as_str()) {
            continue;
        }
        if shard.nodes_in_use.is_empty() {
            writes.push(ShardWrite::Delete { name: name.clone() });
        } else if !shard.nodes_desired.is_empty() {
            writes.push(ShardWrite::Update {
                name: name.clone(),
                nodes_desired: vec![],
                stale: true,
            });
        } else {
            draining.push(name.clone());
        }
    }
    SyncPlan {
        assignments,
        writes,
        draining,
        in_transit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shardctl::NodeUsage;

    fn node(name: &str, cpu_millis: i64) -> ShardNode {
        ShardNode::new(name).with_usage(NodeUsage {
            cpu_capacity_millis: 1000,
            cpu_requested_millis: cpu_millis,
            memory_capacity_bytes: 1000,
            memory_requested_bytes: 0,
        })
    }

    fn config() -> ShardingConfig {
        ShardingConfig::parse(
            "schedulerConfigs:\n\
             - name: hot\n  cpuUtilizationMin: 0.5\n  cpuUtilizationMax: 1\n\
             - name: cold\n  cpuUtilizationMin: 0\n  cpuUtilizationMax: 0.49\n",
        )
        .expect("config")
    }

    fn shard(desired: &[&str], in_use: &[&str]) -> ObservedShard {
        ObservedShard {
            nodes_desired: desired.iter().map(|s| (*s).into()).collect(),
            nodes_in_use: in_use.iter().map(|s| (*s).into()).collect(),
        }
    }

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| (*s).into()).collect()
    }

    #[test]
    fn creates_missing_shards_and_nothing_when_in_sync() {
        let nodes = [node("a", 900), node("b", 100)];
        let p = plan_sync(&nodes, &config(), &BTreeMap::new());
        assert_eq!(
            p.writes,
            [
                ShardWrite::Create {
                    name: "hot".into(),
                    nodes_desired: v(&["a"])
                },
                ShardWrite::Create {
                    name: "cold".into(),
                    nodes_desired: v(&["b"])
                },
            ]
        );
        let observed = BTreeMap::from([
            ("hot".to_owned(), shard(&["a"], &["a"])),
            ("cold".to_owned(), shard(&["b"], &[])),
        ]);
        let p = plan_sync(&nodes, &config(), &observed);
        assert!(p.writes.is_empty(), "{:?}", p.writes);
    }

    #[test]
    fn changed_shards_are_updated_in_spec_only() {
        let nodes = [node("a", 900), node("b", 900)];
        let observed = BTreeMap::from([
            ("hot".to_owned(), shard(&["a"], &[])),
            ("cold".to_owned(), shard(&["b"], &[])),
        ]);
        let p = plan_sync(&nodes, &config(), &observed);
        // b moves cold → hot: cold loses it first, so b is never desired by both.
        assert_eq!(
            p.writes,
            [
                ShardWrite::Update {
                    name: "cold".into(),
                    nodes_desired: v(&[]),
                    stale: false
                },
                ShardWrite::Update {
                    name: "hot".into(),
                    nodes_desired: v(&["a", "b"]),
                    stale: false
                },
            ]
        );
    }

    #[test]
    fn stale_shards_are_emptied_then_deleted_only_once_released() {
        let nodes = [node("a", 900), node("x", 100)];
        let mut observed = BTreeMap::from([
            ("hot".to_owned(), shard(&["a"], &[])),
            ("cold".to_owned(), shard(&[], &[])),
            ("old".to_owned(), shard(&["x"], &["x"])),
        ]);
        // 1. Still desiring x: emptied, not deleted. cold may take x (its first move); cold's
        //    scheduler waits for old's release before using it.
        let p = plan_sync(&nodes, &config(), &observed);
        assert_eq!(
            p.writes,
            [
                ShardWrite::Update {
                    name: "cold".into(),
                    nodes_desired: v(&["x"]),
                    stale: false
                },
                ShardWrite::Update {
                    name: "old".into(),
                    nodes_desired: v(&[]),
                    stale: true
                },
            ]
        );
        // 2. Emptied but its scheduler still uses x: kept, and x (in transit to cold) stays
        //    with cold.
        observed.insert("old".into(), shard(&[], &["x"]));
        observed.insert("cold".into(), shard(&["x"], &[]));
        let p = plan_sync(&nodes, &config(), &observed);
        assert!(p.writes.is_empty(), "{:?}", p.writes);
        assert_eq!(p.draining, ["old"]);
        // 3. Released: deleted.
        observed.insert("old".into(), shard(&[], &[]));
        let p = plan_sync(&nodes, &config(), &observed);
        assert_eq!(p.writes, [ShardWrite::Delete { name: "old".into() }]);
        assert!(p.draining.is_empty());
    }

    #[test]
    fn a_stale_shard_nobody_uses_is_deleted_at_once() {
        let observed = BTreeMap::from([("old".to_owned(), shard(&["x"], &[]))]);
        let p = plan_sync(&[node("x", 0)], &config(), &observed);
        assert!(
            p.writes
                .contains(&ShardWrite::Delete { name: "old".into() })
        );
    }

    #[test]
    fn an_in_transit_node_is_not_moved_by_a_utilisation_change() {
        // x moved hot → cold (hot still uses it); x then becomes busy, which would send it
        // back to hot. It stays with cold until hot has released it.
        let nodes = [node("a", 900), node("x", 900)];
        let observed = BTreeMap::from([
            ("hot".to_owned(), shard(&["a"], &["a", "x"])),
            ("cold".to_owned(), shard(&["x"], &[])),
        ]);
        let p = plan_sync(&nodes, &config(), &observed);
        assert!(p.writes.is_empty(), "{:?}", p.writes);
        assert_eq!(p.in_transit.len(), 1);
        // Once released, the move back happens.
        let observed = BTreeMap::from([
            ("hot".to_owned(), shard(&["a"], &["a"])),
            ("cold".to_owned(), shard(&["x"], &["x"])),
        ]);
        let p = plan_sync(&nodes, &config(), &observed);
        assert_eq!(p.writes.len(), 2, "{:?}", p.writes);
    }
}
