//! Sharding scenarios on the engine API with real worker threads: the none/soft/hard modes as
//! node-set views, the NodeShard status the coordinator writes, and the hand-off rules. The
//! mode cases are ported from Volcano's
//! `pkg/agentscheduler/actions/allocate/allocate_shard_test.go` (Apache-2.0, volcano-sh/volcano):
//! nodes n1 (10 CPU), n2 (2), n3 (20), n4 (5), shard {n1, n4}; hard → n1, soft → n1.

#![allow(clippy::disallowed_methods)] // a wall-clock bound on the hold in one test

mod support;

use magma_engine::core::StatusReason;
use magma_engine::{EngineOptions, ShardingMode, ShardingOptions};
use std::time::Duration;
use support::*;

const WAIT: Duration = Duration::from_secs(10);

fn opts(mode: ShardingMode, workers: usize) -> EngineOptions {
    EngineOptions {
        workers,
        sharding: ShardingOptions {
            mode,
            shard_name: "agent".into(),
            handover_hold: Duration::ZERO,
        },
        ..Default::default()
    }
}

fn upstream_nodes(e: &magma_engine::Engine, c: &mut Cluster) {
    for (n, cpu) in [("n1", "10"), ("n2", "2"), ("n3", "20"), ("n4", "5")] {
        c.add_node(e, mk_node(n, cpu, "64Gi", 110));
    }
}

/// Start an engine with the upstream nodes and shard {n1, n4}, and wait until it uses them.
fn start(mode: ShardingMode) -> (magma_engine::Engine, Cluster) {
    let (e, mut c) = Cluster::start(opts(mode, 2));
    upstream_nodes(&e, &mut c);
    c.set_shard(&e, "agent", &["n1", "n4"]);
    assert!(
        c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n1", "n4"]),
        "the shard's status lists its nodes: {:?}",
        c.in_use("agent")
    );
    (e, c)
}

fn node_of(c: &Cluster, uid: &str) -> Option<String> {
    c.pods.get(uid).and_then(|p| p.node_name.clone())
}

#[test]
fn upstream_hard_and_soft_pick_the_shard_node() {
    for mode in [ShardingMode::Hard, ShardingMode::Soft] {
        let (e, mut c) = start(mode);
        c.add_pod(&e, mk_pod("p", "4", "1Gi"));
        assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 1));
        // n3 scores best on free capacity, but it is outside the shard; n4 is too small.
        assert_eq!(node_of(&c, "uid-p").as_deref(), Some("n1"), "{mode:?}");
        e.shutdown();
    }
}

#[test]
fn none_ignores_the_shard_and_writes_nothing() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::None, 2));
    upstream_nodes(&e, &mut c);
    c.set_shard(&e, "agent", &["n2"]);
    for i in 0..6 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 6));
    // Least-allocated scoring spreads them; none goes to the tiny shard node only.
    let on_n2 = (0..6)
        .filter(|i| node_of(&c, &format!("uid-p{i}")).as_deref() == Some("n2"))
        .count();
    assert!(on_n2 < 6);
    assert!(c.shard_writes.is_empty(), "mode none writes no status");
    e.shutdown();
}

#[test]
fn hard_leaves_pods_unschedulable_outside_a_full_shard_and_wakes_when_it_grows() {
    let (e, mut c) = start(ShardingMode::Hard);
    // 15 CPU in the shard: three 5-CPU pods fit, the fourth does not.
    for i in 0..4 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "5", "1Gi"));
    }
    assert!(c.run_until(&e, WAIT, |c| {
        c.bound_count() == 3
            && c.statuses
                .iter()
                .any(|s| s.reason == StatusReason::Unschedulable)
    }));
    let s = c
        .statuses
        .iter()
        .find(|s| s.reason == StatusReason::Unschedulable)
        .unwrap();
    assert!(
        s.message.starts_with(
            "0/4 nodes are unavailable: 2 Insufficient cpu, 2 node isn't in scheduler node shard."
        ),
        "{}",
        s.message
    );
    for p in c.pods.values().filter(|p| p.node_name.is_some()) {
        let n = p.node_name.as_deref().unwrap();
        assert!(
            n == "n1" || n == "n4",
            "{} placed outside the shard on {n}",
            p.name
        );
    }
    // The shard grows: the waiting pod is woken and placed on the new node.
    c.set_shard(&e, "agent", &["n1", "n3", "n4"]);
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 4));
    let last = c
        .pods
        .values()
        .find(|p| p.node_name.as_deref() == Some("n3"))
        .map(|p| p.name.clone());
    assert!(last.is_some(), "the fourth pod went to n3");
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    e.shutdown();
}

#[test]
fn soft_falls_back_outside_when_the_shard_is_full() {
    let (e, mut c) = start(ShardingMode::Soft);
    for i in 0..4 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "5", "1Gi"));
    }
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 4));
    let outside: Vec<String> = c
        .pods
        .values()
        .filter_map(|p| p.node_name.clone())
        .filter(|n| n != "n1" && n != "n4")
        .collect();
    assert_eq!(
        outside,
        ["n3"],
        "exactly one pod overflows, onto the only node that fits"
    );
    e.shutdown();
}

#[test]
fn soft_prefers_any_fitting_shard_node_over_a_better_scored_outside_one() {
    // 300 nodes, one of them in the shard: the scan samples ~100 nodes per pod, but the shard
    // node must still win every time while it fits (exact preference, not sampled).
    let (e, mut c) = Cluster::start(opts(ShardingMode::Soft, 2));
    for i in 0..300 {
        c.add_node(&e, mk_node(&format!("m{i:03}"), "64", "256Gi", 110));
    }
    c.add_node(&e, mk_node("small", "4", "8Gi", 110));
    c.set_shard(&e, "agent", &["small"]);
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent") == ["small"]));
    for i in 0..4 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 4));
    for i in 0..4 {
        assert_eq!(node_of(&c, &format!("uid-p{i}")).as_deref(), Some("small"));
    }
    e.shutdown();
}

#[test]
fn hard_without_its_nodeshard_schedules_nothing_and_says_why() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::Hard, 1));
    upstream_nodes(&e, &mut c);
    c.add_pod(&e, mk_pod("p", "1", "1Gi"));
    assert!(c.run_until(&e, WAIT, |c| !c.statuses.is_empty()));
    let m = &c.statuses[0].message;
    assert!(
        m.contains("4 node isn't in scheduler node shard")
            && m.contains("NodeShard \"agent\" does not exist"),
        "{m}"
    );
    assert_eq!(c.bound_count(), 0);
    assert!(
        c.shard_writes.is_empty(),
        "nothing to write without the object"
    );
    assert!(e.stats().shard.missing);
    c.set_shard(&e, "agent", &["n3"]);
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 1));
    assert_eq!(node_of(&c, "uid-p").as_deref(), Some("n3"));
    assert!(!e.stats().shard.missing);
    e.shutdown();
}

#[test]
fn soft_without_its_nodeshard_keeps_scheduling() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::Soft, 1));
    upstream_nodes(&e, &mut c);
    c.add_pod(&e, mk_pod("p", "1", "1Gi"));
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 1));
    e.shutdown();
}

#[test]
fn nodes_in_use_by_another_shard_wait_for_their_release() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::Hard, 2));
    upstream_nodes(&e, &mut c);
    c.set_shard_in_use(&e, "other", &["n3"]);
    // The controller gave n3 to us, but the other scheduler has not released it yet.
    c.set_shard(&e, "agent", &["n1", "n3"]);
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n1"]
        && c.shards["agent"].nodes_to_add == ["n3"]));
    c.add_pod(&e, mk_pod("big", "15", "1Gi"));
    assert!(c.run_until(&e, WAIT, |c| !c.statuses.is_empty()));
    assert_eq!(
        c.bound_count(),
        0,
        "n3 must not be used while the other shard holds it"
    );
    c.set_shard_in_use(&e, "other", &[]);
    assert!(c.run_until(&e, WAIT, |c| c.bound_count() == 1));
    assert_eq!(node_of(&c, "uid-big").as_deref(), Some("n3"));
    assert_eq!(c.in_use("agent"), ["n1", "n3"]);
    e.shutdown();
}

#[test]
fn an_acquired_node_is_used_only_after_its_pods_were_listed_afresh() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::Hard, 2));
    upstream_nodes(&e, &mut c);
    c.set_shard_in_use(&e, "other", &["n3"]);
    c.set_shard(&e, "agent", &["n1", "n3"]);
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n1"]));
    assert!(c.pod_lists.is_empty(), "nodes held at start need no list");
    // The other scheduler bound a 16-CPU pod on n3 just before releasing it; our pod watch
    // has not delivered it yet.
    c.add_unseen_bound_pod(bound(mk_pod("theirs", "16", "1Gi"), "n3"));
    c.set_shard_in_use(&e, "other", &[]);
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n1", "n3"]
        && e.stats().shard.view == 2));
    assert_eq!(c.pod_lists, [vec!["n3".to_string()]]);
    // 11 CPU: n1 has 10, n3 has 4 left once "theirs" is counted (20 if it were not).
    c.add_pod(&e, mk_pod("mine", "11", "1Gi"));
    assert!(c.run_until(&e, WAIT, |c| !c.statuses.is_empty()));
    assert_eq!(c.bound_count(), 1, "only theirs is bound");
    assert!(c.overcommitted().is_empty());
    e.shutdown();
}

#[test]
fn a_node_moved_away_is_released_only_after_its_binds_finish() {
    let (e, mut c) = start(ShardingMode::Hard);
    c.hold_binds = true;
    c.add_pod(&e, mk_pod("p", "8", "1Gi"));
    assert!(c.run_until(&e, WAIT, |c| c.held.len() == 1));
    assert_eq!(&*c.held[0].node, "n1");
    // The controller moves n1 to another shard while the bind is in flight.
    c.set_shard(&e, "agent", &["n4"]);
    assert!(c.run_until(&e, WAIT, |c| c.shards["agent"].nodes_to_remove == ["n1"]));
    assert_eq!(c.in_use("agent"), ["n1", "n4"], "n1 still carries our bind");
    assert_eq!(e.stats().shard.draining, 1);
    c.hold_binds = false;
    c.release_binds(&e);
    assert!(
        c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n4"]),
        "released once the bind is done: {:?}",
        c.in_use("agent")
    );
    assert!(c.shards["agent"].nodes_to_remove.is_empty());
    e.shutdown();
}

#[test]
fn a_new_term_holds_inherited_nodes() {
    let (e, mut c) = Cluster::start(EngineOptions {
        sharding: ShardingOptions {
            handover_hold: Duration::from_millis(600),
            ..opts(ShardingMode::Hard, 1).sharding
        },
        ..opts(ShardingMode::Hard, 1)
    });
    upstream_nodes(&e, &mut c);
    // A predecessor left n2 in use although the shard no longer desires it.
    c.set_shard_in_use(&e, "agent", &["n1", "n2"]);
    c.set_shard(&e, "agent", &["n1"]);
    let t0 = std::time::Instant::now();
    assert!(c.run_until(&e, WAIT, |c| c.shards["agent"].nodes_to_remove == ["n2"]));
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent") == ["n1"]));
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "released after the hold, not before ({:?})",
        t0.elapsed()
    );
    e.shutdown();
}

#[test]
fn burst_in_hard_mode_stays_in_the_shard_without_overcommit() {
    let (e, mut c) = Cluster::start(opts(ShardingMode::Hard, 4));
    for i in 0..40 {
        c.add_node(&e, mk_node(&format!("n{i:02}"), "4", "16Gi", 110));
    }
    let shard: Vec<String> = (0..40).step_by(2).map(|i| format!("n{i:02}")).collect();
    let refs: Vec<&str> = shard.iter().map(String::as_str).collect();
    c.set_shard(&e, "agent", &refs);
    assert!(c.run_until(&e, WAIT, |c| c.in_use("agent").len() == 20));
    // 20 nodes × 4 CPU = 80 pods of 1 CPU fit; 100 are offered.
    for i in 0..100 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    assert!(c.run_until(&e, WAIT, |c| {
        c.bound_count() == 80
            && c.statuses
                .iter()
                .filter(|s| s.reason == StatusReason::Unschedulable)
                .count()
                >= 20
    }));
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    for p in c.pods.values() {
        if let Some(n) = &p.node_name {
            assert!(shard.contains(n), "{n} is outside the shard");
        }
    }
    let core = e.shutdown();
    assert!(core.audit().is_empty(), "{:?}", core.audit());
}
