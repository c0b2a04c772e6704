//! The shard assignment pipeline: from the cluster's nodes, a validated [`ShardingConfig`] and
//! the NodeShards' current `spec.nodesDesired`, compute each scheduler's new `nodesDesired`.
//! Also owns the two change-significance rules (anti-flap [`should_update`] and the
//! event-resync test [`significant_change`]). Pure: it reads its arguments and touches nothing.
//!
//! Pipeline ([`assign`]):
//! 1. Nodes are sorted by name (duplicates dropped), so the result does not depend on lister
//!    order.
//! 2. Schedulers are processed in config order, greedily and exclusively: a scheduler's
//!    candidates are all nodes minus those already given to an earlier scheduler in this pass.
//! 3. Filter: a node survives only if every filtering policy accepts it (AND). A scheduler
//!    without filters keeps every candidate.
//! 4. Score: `Σ weight · score` over the scoring policies, stable-sorted descending (ties keep
//!    name order).
//! 5. Select: the `node-limit` selectors in order; an empty result stops the chain.
//! 6. Anti-flap: if the scheduler's current list is still entirely available (every node exists
//!    and no earlier scheduler took it) and [`should_update`] says the new list is not
//!    significantly different, the current list is kept. The kept list, not the computed one,
//!    is what later schedulers are excluded from, so exclusivity holds either way.
//!
//! Unlike upstream, all nodes are processed at once: upstream splits clusters above 50 nodes
//! into batches and runs the pipeline per batch, so `maxNodes` and the score order only held
//! per batch (spec §11 item 17).

use super::config::{SchedulerSpec, ShardingConfig};
use super::policy::Policy;
use std::collections::{BTreeMap, BTreeSet};

pub use super::node::{NodeUsage, ShardNode};

/// One scheduler's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardAssignment {
    /// Scheduler name = NodeShard name.
    pub scheduler: String,
    /// The new `spec.nodesDesired`, disjoint from every other scheduler's.
    pub nodes_desired: Vec<String>,
    /// True when anti-flap kept the current list instead of the computed one.
    pub kept_current: bool,
    /// True when `nodes_desired` differs from the current spec (or there is none): the NodeShard
    /// must be created or updated.
    pub write: bool,
    /// Set when a `node-limit`'s `minNodes` is not met (reported only; upstream only logs it).
    pub min_nodes_unmet: Option<MinNodesUnmet>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinNodesUnmet {
    pub min_nodes: usize,
    pub selected: usize,
}

/// Compute every scheduler's `nodesDesired`, in config order. `current` maps NodeShard names to
/// their current `spec.nodesDesired`; pass an empty map for a fresh computation.
pub fn assign(
    nodes: &[ShardNode],
    config: &ShardingConfig,
    current: &BTreeMap<String, Vec<String>>,
) -> Vec<ShardAssignment> {
    let mut sorted: Vec<&ShardNode> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted.dedup_by(|a, b| a.name == b.name);

    let mut assigned: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::with_capacity(config.schedulers.len());
    for spec in &config.schedulers {
        let candidates: Vec<&ShardNode> = sorted
            .iter()
            .copied()
            .filter(|n| !assigned.contains(n.name.as_str()))
            .collect();
        let available: BTreeSet<&str> = candidates.iter().map(|n| n.name.as_str()).collect();
        let desired: Vec<String> = select_nodes(spec, candidates)
            .into_iter()
            .map(|n| n.name.clone())
            .collect();

        let cur = current.get(&spec.name);
        let keep = cur.is_some_and(|c| {
            c.iter().all(|n| available.contains(n.as_str())) && !should_update(c, &desired)
        });
        let nodes_desired = match cur {
            Some(c) if keep => c.clone(),
            _ => desired,
        };
        for n in &nodes_desired {
            if let Some(name) = available.get(n.as_str()) {
                assigned.insert(name);
            }
        }
        out.push(ShardAssignment {
            scheduler: spec.name.clone(),
            write: cur.is_none_or(|c| !same_set(c, &nodes_desired)),
            kept_current: keep,
            min_nodes_unmet: min_nodes_unmet(spec, nodes_desired.len()),
            nodes_desired,
        });
    }
    out
}

/// Filter, score and select for one scheduler over `candidates` (already ordered).
pub fn select_nodes<'a>(
    spec: &SchedulerSpec,
    mut candidates: Vec<&'a ShardNode>,
) -> Vec<&'a ShardNode> {
    candidates.retain(|n| {
        spec.policies
            .iter()
            .all(|p| p.policy.filter(n) != Some(false))
    });

    let has_scorer = spec
        .policies
        .iter()
        .any(|p| p.policy.score(&ShardNode::default()).is_some());
    if has_scorer && candidates.len() > 1 {
        let mut scored: Vec<(f64, &ShardNode)> = candidates
            .into_iter()
            .map(|n| {
                let total = spec
                    .policies
                    .iter()
                    .filter_map(|p| p.policy.score(n).map(|s| f64::from(p.weight) * s))
                    .sum();
                (total, n)
            })
            .collect();
        // `sort_by` is stable: equal scores keep name order.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        candidates = scored.into_iter().map(|(_, n)| n).collect();
    }

    for selector in spec.policies.iter().filter_map(|p| p.policy.as_selector()) {
        if candidates.is_empty() {
            break;
        }
        candidates = selector.select(candidates);
    }
    candidates
}

fn min_nodes_unmet(spec: &SchedulerSpec, selected: usize) -> Option<MinNodesUnmet> {
    spec.policies
        .iter()
        .filter_map(|p| match &p.policy {
            Policy::NodeLimit(l) => usize::try_from(l.min_nodes).ok(),
            _ => None,
        })
        .max()
        .filter(|&min| selected < min)
        .map(|min_nodes| MinNodesUnmet {
            min_nodes,
            selected,
        })
}

/// Upstream's anti-flap rule for replacing a NodeShard's `spec.nodesDesired`: update when the
/// length differs, or when at least `max(1, len/10)` of the desired nodes are not in the current
/// list. Only additions are counted (with equal lengths, additions equal removals); order does
/// not matter. A NodeShard that does not exist yet is always created, which is not this
/// function's business.
///
/// | current | desired | update |
/// |---|---|---|
/// | `[a,b]` | `[a,b,c]` | yes (length) |
/// | `[a,b]` | `[b,a]` | no |
/// | `[a,b]` | `[a,c]` | yes (1 ≥ max(1, 0)) |
/// | 20 nodes | 1 swapped | no (1 < 2) |
/// | 20 nodes | 2 swapped | yes |
pub fn should_update(current: &[String], desired: &[String]) -> bool {
    if current.len() != desired.len() {
        return true;
    }
    let current: BTreeSet<&str> = current.iter().map(String::as_str).collect();
    let added = desired
        .iter()
        .filter(|n| !current.contains(n.as_str()))
        .count();
    added >= (desired.len() / 10).max(1)
}

/// Whether a utilisation change is large enough to resync the shards after a node or pod
/// event: `|new − old| > threshold` (NaN counts as significant). Upstream uses 0.5; the
/// default here is [`super::config::DEFAULT_UTIL_CHANGE_THRESHOLD`].
pub fn significant_change(old_util: f64, new_util: f64, threshold: f64) -> bool {
    let delta = (new_util - old_util).abs();
    delta.is_nan() || threshold.is_nan() || delta > threshold
}

/// [`significant_change`] applied to CPU and memory of two usage samples. Metrics appearing or
/// disappearing (or a capacity becoming unknown) is always significant.
pub fn significant_usage_change(
    old: Option<&NodeUsage>,
    new: Option<&NodeUsage>,
    threshold: f64,
) -> bool {
    let utils = |u: Option<&NodeUsage>| u.map(|u| (u.cpu_utilization(), u.memory_utilization()));
    match (utils(old), utils(new)) {
        (None, None) => false,
        (Some((oc, om)), Some((nc, nm))) => {
            [(oc, nc), (om, nm)].into_iter().any(|pair| match pair {
                (Some(o), Some(n)) => significant_change(o, n, threshold),
                (None, None) => false,
                _ => true,
            })
        }
        _ => true,
    }
}

/// Whether two node lists hold the same nodes (order and duplicates ignored): rewriting a
/// NodeShard with its own nodes in another order is a pointless write.
pub fn same_set(a: &[String], b: &[String]) -> bool {
    fn set(v: &[String]) -> BTreeSet<&str> {
        v.iter().map(String::as_str).collect()
    }
    set(a) == set(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn anti_flap_rule_table() {
        let twenty: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        let mut one_swapped = twenty.clone();
        one_swapped[0] = "x".into();
        let mut two_swapped = one_swapped.clone();
        two_swapped[1] = "y".into();
        let mut reversed = twenty.clone();
        reversed.reverse();
        let cases: [(&[String], &[String], bool); 9] = [
            (&[], &[], false),
            (&[], &names(&["a"]), true),
            (&names(&["a"]), &[], true),
            (&names(&["a", "b"]), &names(&["a", "b", "c"]), true),
            (&names(&["a", "b"]), &names(&["b", "a"]), false),
            (&names(&["a", "b"]), &names(&["a", "c"]), true),
            (&twenty, &one_swapped, false),
            (&twenty, &two_swapped, true),
            (&twenty, &reversed, false),
        ];
        for (i, (cur, des, want)) in cases.iter().enumerate() {
            assert_eq!(
                should_update(cur, des),
                *want,
                "case {i}: {cur:?} -> {des:?}"
            );
        }
    }

    #[test]
    fn significance() {
        assert!(
            !significant_change(0.2, 0.3, 0.1),
            "exactly the threshold is not significant"
        );
        assert!(significant_change(0.2, 0.31, 0.1));
        assert!(significant_change(0.9, 0.7, 0.1));
        assert!(
            !significant_change(0.2, 0.6, 0.5),
            "upstream's 0.5 misses this"
        );
        assert!(significant_change(f64::NAN, 0.5, 0.1));
        let u = |c, m| NodeUsage {
            cpu_capacity_millis: 1000,
            cpu_requested_millis: c,
            memory_capacity_bytes: 1000,
            memory_requested_bytes: m,
        };
        assert!(!significant_usage_change(
            Some(&u(100, 100)),
            Some(&u(150, 150)),
            0.1
        ));
        assert!(significant_usage_change(
            Some(&u(100, 100)),
            Some(&u(100, 300)),
            0.1
        ));
        assert!(significant_usage_change(None, Some(&u(0, 0)), 0.1));
        assert!(significant_usage_change(Some(&u(0, 0)), None, 0.1));
        assert!(!significant_usage_change(None, None, 0.1));
    }

    #[test]
    fn usage_ratios() {
        let mut u = NodeUsage {
            cpu_capacity_millis: 4000,
            memory_capacity_bytes: 0,
            ..NodeUsage::default()
        };
        u.add_pod(1000, 5);
        u.add_pod(2000, 5);
        assert_eq!(u.cpu_utilization(), Some(0.75));
        assert_eq!(u.memory_utilization(), None);
        u.add_pod(9000, 0);
        assert_eq!(u.cpu_utilization(), Some(1.0));
    }
}
