//! Hand-off safety on the controller's side: a node still being released by one shard is not
//! moved again until that move has completed. Applied to [`super::assign()`]'s output before
//! anything is written. Pure: it reads the observed NodeShards and rewrites the assignments;
//! it touches nothing else.
//!
//! A node `x` is **in transit** when some NodeShard `A` lists it in `status.nodesInUse` while
//! `A`'s `spec.nodesDesired` no longer contains it: `A`'s scheduler has not yet published its
//! release (spec §7.3). The shards whose current `spec.nodesDesired` contains `x` are its
//! **destinations** (normally one, `B`). For every in-transit node with a destination:
//!
//! 1. `x` is removed from every newly computed `nodesDesired` except its destinations', so the
//!    node is neither moved on to a third shard nor handed back to `A` mid-move.
//! 2. If no destination keeps `x` in its new list (and `x` still exists), `x` is kept in the first
//!    destination (in assignment order): the move completes before it is reconsidered. This can
//!    leave that shard one node above its `maxNodes` until the next sync after the hand-off.
//!
//! An in-transit node without a destination (its releasing shard dropped it and no shard desires
//! it yet) is not being moved anywhere, so the assignment may give it to any shard: that is its
//! first move, and the receiving scheduler still waits for `A`'s release (the schedulers'
//! `available = desired − ⋃ other.nodesInUse` rule).

use super::assign::{ShardAssignment, same_set};
use std::collections::{BTreeMap, BTreeSet};

/// What the controller observed of one NodeShard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedShard {
    pub nodes_desired: Vec<String>,
    pub nodes_in_use: Vec<String>,
}

/// One in-transit node, as found by [`in_transit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InTransit {
    pub node: String,
    /// Shards still listing the node in `status.nodesInUse` without desiring it.
    pub releasing: Vec<String>,
    /// Shards whose current `spec.nodesDesired` contains it.
    pub destinations: Vec<String>,
}

/// Every in-transit node (sorted by name), with its releasing shards and destinations.
pub fn in_transit(observed: &BTreeMap<String, ObservedShard>) -> Vec<InTransit> {
    let mut out: BTreeMap<&str, InTransit> = BTreeMap::new();
    for (name, shard) in observed {
        let desired: BTreeSet<&str> = shard.nodes_desired.iter().map(String::as_str).collect();
        for node in &shard.nodes_in_use {
            if desired.contains(node.as_str()) {
                continue;
            }
            let entry = out.entry(node).or_insert_with(|| InTransit {
                node: node.clone(),
                releasing: vec![],
                destinations: observed
                    .iter()
                    .filter(|(_, s)| s.nodes_desired.iter().any(|n| n == node))
                    .map(|(n, _)| n.clone())
                    .collect(),
            });
            if !entry.releasing.contains(name) {
                entry.releasing.push(name.clone());
            }
        }
    }
    out.into_values().collect()
}

/// Apply the hand-off rules (module doc) to `assignments`, then recompute each assignment's
/// `write` flag against `observed` (a shard is written when it is new or its node set changes). `exists` says whether a node is still in the cluster (a
/// deleted node is never pinned). Returns the in-transit nodes that constrained the result.
pub fn pin_in_transit(
    assignments: &mut [ShardAssignment],
    observed: &BTreeMap<String, ObservedShard>,
    exists: impl Fn(&str) -> bool,
) -> Vec<InTransit> {
    let moving: Vec<InTransit> = in_transit(observed)
        .into_iter()
        .filter(|t| !t.destinations.is_empty())
        .collect();
    for t in &moving {
        let allowed = |scheduler: &str| t.destinations.iter().any(|d| d == scheduler);
        let mut kept = false;
        for a in assignments.iter_mut() {
            if allowed(&a.scheduler) {
                kept |= a.nodes_desired.contains(&t.node);
            } else {
                a.nodes_desired.retain(|n| *n != t.node);
            }
        }
        if !kept
            && exists(&t.node)
            && let Some(a) = assignments.iter_mut().find(|a| allowed(&a.scheduler))
        {
            a.nodes_desired.push(t.node.clone());
        }
    }
    for a in assignments.iter_mut() {
        a.write = observed
            .get(&a.scheduler)
            .is_none_or(|o| !same_set(&o.nodes_desired, &a.nodes_desired));
    }
    moving
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(desired: &[&str], in_use: &[&str]) -> ObservedShard {
        ObservedShard {
            nodes_desired: desired.iter().map(|s| (*s).into()).collect(),
            nodes_in_use: in_use.iter().map(|s| (*s).into()).collect(),
        }
    }

    fn a(scheduler: &str, nodes: &[&str]) -> ShardAssignment {
        ShardAssignment {
            scheduler: scheduler.into(),
            nodes_desired: nodes.iter().map(|s| (*s).into()).collect(),
            kept_current: false,
            write: true,
            min_nodes_unmet: None,
        }
    }

    fn nodes<'a>(out: &'a [ShardAssignment], s: &str) -> Vec<&'a str> {
        out.iter()
            .find(|x| x.scheduler == s)
            .expect("assignment")
            .nodes_desired
            .iter()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn finds_in_transit_nodes_with_their_destinations() {
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&["n1"], &["n1", "x", "y"])),
            ("b".to_owned(), shard(&["x"], &[])),
        ]);
        let t = in_transit(&observed);
        assert_eq!(
            t,
            [
                InTransit {
                    node: "x".into(),
                    releasing: vec!["a".into()],
                    destinations: vec!["b".into()]
                },
                InTransit {
                    node: "y".into(),
                    releasing: vec!["a".into()],
                    destinations: vec![]
                },
            ]
        );
    }

    #[test]
    fn a_node_in_transit_is_not_moved_again() {
        // x is moving a → b (a still uses it); the new computation wants it in c.
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&["n1"], &["n1", "x"])),
            ("b".to_owned(), shard(&["x", "n2"], &["n2"])),
            ("c".to_owned(), shard(&["n3"], &["n3"])),
        ]);
        let mut out = vec![a("a", &["n1"]), a("b", &["n2"]), a("c", &["n3", "x"])];
        let moving = pin_in_transit(&mut out, &observed, |_| true);
        assert_eq!(moving.len(), 1);
        assert_eq!(nodes(&out, "c"), ["n3"], "not moved on to c");
        assert_eq!(nodes(&out, "b"), ["n2", "x"], "kept in its destination");
        assert_eq!(nodes(&out, "a"), ["n1"]);
        assert!(!out[0].write, "a unchanged");
        assert!(
            !out[1].write,
            "b = its current spec (order aside, same list)"
        );
        assert!(!out[2].write, "c keeps its current spec");
    }

    #[test]
    fn a_node_in_transit_is_not_handed_back_mid_move() {
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&[], &["x"])),
            ("b".to_owned(), shard(&["x"], &[])),
        ]);
        let mut out = vec![a("a", &["x"]), a("b", &[])];
        pin_in_transit(&mut out, &observed, |_| true);
        assert_eq!(nodes(&out, "a"), Vec::<&str>::new());
        assert_eq!(nodes(&out, "b"), ["x"]);
        assert!(!out[0].write && !out[1].write, "nothing to write");
    }

    #[test]
    fn the_destination_keeping_it_is_left_alone() {
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&[], &["x"])),
            ("b".to_owned(), shard(&["x"], &[])),
        ]);
        let mut out = vec![a("a", &[]), a("b", &["y", "x"])];
        pin_in_transit(&mut out, &observed, |_| true);
        assert_eq!(nodes(&out, "b"), ["y", "x"]);
        assert!(out[1].write);
    }

    #[test]
    fn without_destination_or_once_released_the_node_is_free() {
        // y: dropped by a, desired by nobody → free. z: a released it (not in use) → free.
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&[], &["y"])),
            ("b".to_owned(), shard(&["z"], &[])),
        ]);
        let mut out = vec![a("a", &[]), a("c", &["y", "z"]), a("b", &[])];
        pin_in_transit(&mut out, &observed, |_| true);
        assert_eq!(nodes(&out, "c"), ["y", "z"]);
        assert!(out[2].write, "b loses z: a write");
    }

    #[test]
    fn a_deleted_node_is_not_pinned() {
        let observed = BTreeMap::from([
            ("a".to_owned(), shard(&[], &["x"])),
            ("b".to_owned(), shard(&["x"], &[])),
        ]);
        let mut out = vec![a("a", &[]), a("b", &[])];
        pin_in_transit(&mut out, &observed, |n| n != "x");
        assert_eq!(nodes(&out, "b"), Vec::<&str>::new());
        assert!(out[1].write);
    }

    #[test]
    fn new_shards_are_always_written() {
        let mut out = vec![a("new", &[])];
        pin_in_transit(&mut out, &BTreeMap::new(), |_| true);
        assert!(out[0].write);
    }
}
