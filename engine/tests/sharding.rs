//! Sharding scenarios on the deterministic harness: the none/soft/hard modes as node-set views,
//! the NodeShard status the coordinator writes, and the hand-off rules. The mode cases are
//! ported from Volcano's `pkg/agentscheduler/actions/allocate/allocate_shard_test.go`
//! (Apache-2.0, volcano-sh/volcano): nodes n1 (10 CPU), n2 (2), n3 (20), n4 (5), shard {n1, n4};
//! hard → n1, soft → n1.

use magma_engine::core::StatusReason;
use magma_engine::testing::{HarnessOptions, Sim, bound, mk_node, mk_pod};
use magma_engine::{ShardingMode, ShardingOptions};
use std::time::Duration;

/// Long enough for any backoff to pass, well short of the 5 min pool flush.
const BACKOFFS: Duration = Duration::from_secs(30);

fn sim_with(mode: ShardingMode, workers: usize, hold: Duration) -> Sim {
    Sim::new(HarnessOptions {
        sharding: Some(ShardingOptions {
            mode,
            shard_name: "agent".into(),
            handover_hold: hold,
        }),
        ..HarnessOptions::workers(workers)
    })
}

fn sim(mode: ShardingMode, workers: usize) -> Sim {
    sim_with(mode, workers, Duration::ZERO)
}

fn upstream_nodes(c: &mut Sim) {
    for (n, cpu) in [("n1", "10"), ("n2", "2"), ("n3", "20"), ("n4", "5")] {
        c.add_node(mk_node(n, cpu, "64Gi", 110));
    }
}

/// A sim with the upstream nodes and shard {n1, n4}, settled so the scheduler uses them.
fn start(mode: ShardingMode) -> Sim {
    let mut c = sim(mode, 2);
    upstream_nodes(&mut c);
    c.set_shard("agent", &["n1", "n4"]);
    c.settle();
    assert_eq!(
        c.in_use("agent"),
        ["n1", "n4"],
        "the shard's status lists its nodes"
    );
    c
}

#[test]
fn upstream_hard_and_soft_pick_the_shard_node() {
    for mode in [ShardingMode::Hard, ShardingMode::Soft] {
        let mut c = start(mode);
        c.add_pod(mk_pod("p", "4", "1Gi"));
        c.settle();
        // n3 scores best on free capacity, but it is outside the shard; n4 is too small.
        assert_eq!(c.node_of("uid-p"), Some("n1"), "{mode:?}");
    }
}

#[test]
fn none_ignores_the_shard_and_writes_nothing() {
    let mut c = sim(ShardingMode::None, 2);
    upstream_nodes(&mut c);
    c.set_shard("agent", &["n2"]);
    for i in 0..6 {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 6);
    // Least-allocated scoring spreads them; none goes to the tiny shard node only.
    let on_n2 = (0..6)
        .filter(|i| c.node_of(&format!("uid-p{i}")) == Some("n2"))
        .count();
    assert!(on_n2 < 6);
    assert!(c.shard_writes.is_empty(), "mode none writes no status");
}

#[test]
fn hard_leaves_pods_unschedulable_outside_a_full_shard_and_wakes_when_it_grows() {
    let mut c = start(ShardingMode::Hard);
    // 15 CPU in the shard: three 5-CPU pods fit, the fourth does not.
    for i in 0..4 {
        c.add_pod(mk_pod(&format!("p{i}"), "5", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 3);
    let s = c
        .statuses
        .iter()
        .find(|s| s.reason == StatusReason::Unschedulable)
        .expect("the fourth pod is reported");
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
    c.set_shard("agent", &["n1", "n3", "n4"]);
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 4));
    assert!(
        c.pods
            .values()
            .any(|p| p.node_name.as_deref() == Some("n3")),
        "the fourth pod went to n3"
    );
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
}

#[test]
fn soft_falls_back_outside_when_the_shard_is_full() {
    let mut c = start(ShardingMode::Soft);
    for i in 0..4 {
        c.add_pod(mk_pod(&format!("p{i}"), "5", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 4);
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
}

#[test]
fn soft_prefers_any_fitting_shard_node_over_a_better_scored_outside_one() {
    // 300 nodes, one of them in the shard: the scan samples ~100 nodes per pod, but the shard
    // node must still win every time while it fits (exact preference, not sampled).
    let mut c = sim(ShardingMode::Soft, 2);
    for i in 0..300 {
        c.add_node(mk_node(&format!("m{i:03}"), "64", "256Gi", 110));
    }
    c.add_node(mk_node("small", "4", "8Gi", 110));
    c.set_shard("agent", &["small"]);
    c.settle();
    assert_eq!(c.in_use("agent"), ["small"]);
    for i in 0..4 {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    for i in 0..4 {
        assert_eq!(c.node_of(&format!("uid-p{i}")), Some("small"));
    }
}

#[test]
fn hard_without_its_nodeshard_schedules_nothing_and_says_why() {
    let mut c = sim(ShardingMode::Hard, 1);
    upstream_nodes(&mut c);
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.settle();
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
    assert!(c.h.stats().snapshot().shard.missing);
    c.set_shard("agent", &["n3"]);
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 1));
    assert_eq!(c.node_of("uid-p"), Some("n3"));
    assert!(!c.h.stats().snapshot().shard.missing);
}

#[test]
fn soft_without_its_nodeshard_keeps_scheduling() {
    let mut c = sim(ShardingMode::Soft, 1);
    upstream_nodes(&mut c);
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.settle();
    assert_eq!(c.bound_count(), 1);
}

#[test]
fn nodes_in_use_by_another_shard_wait_for_their_release() {
    let mut c = sim(ShardingMode::Hard, 2);
    upstream_nodes(&mut c);
    c.set_shard_in_use("other", &["n3"]);
    // The controller gave n3 to us, but the other scheduler has not released it yet.
    c.set_shard("agent", &["n1", "n3"]);
    c.settle();
    assert_eq!(c.in_use("agent"), ["n1"]);
    assert_eq!(c.shards["agent"].nodes_to_add, ["n3"]);
    c.add_pod(mk_pod("big", "15", "1Gi"));
    c.settle();
    assert!(!c.statuses.is_empty());
    assert_eq!(
        c.bound_count(),
        0,
        "n3 must not be used while the other shard holds it"
    );
    c.set_shard_in_use("other", &[]);
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 1));
    assert_eq!(c.node_of("uid-big"), Some("n3"));
    assert_eq!(c.in_use("agent"), ["n1", "n3"]);
}

#[test]
fn an_acquired_node_is_used_only_after_its_pods_were_listed_afresh() {
    let mut c = sim(ShardingMode::Hard, 2);
    upstream_nodes(&mut c);
    c.set_shard_in_use("other", &["n3"]);
    c.set_shard("agent", &["n1", "n3"]);
    c.settle();
    assert_eq!(c.in_use("agent"), ["n1"]);
    assert!(c.pod_lists.is_empty(), "nodes held at start need no list");
    // The other scheduler bound a 16-CPU pod on n3 just before releasing it; our pod watch
    // has not delivered it yet.
    c.add_unseen_bound_pod(bound(mk_pod("theirs", "16", "1Gi"), "n3"));
    c.set_shard_in_use("other", &[]);
    c.settle();
    assert_eq!(c.in_use("agent"), ["n1", "n3"]);
    assert_eq!(c.h.stats().snapshot().shard.view, 2);
    assert_eq!(c.pod_lists, [vec!["n3".to_string()]]);
    // 11 CPU: n1 has 10, n3 has 4 left once "theirs" is counted (20 if it were not).
    c.add_pod(mk_pod("mine", "11", "1Gi"));
    c.settle();
    assert!(!c.statuses.is_empty());
    assert_eq!(c.bound_count(), 1, "only theirs is bound");
    assert!(c.overcommitted().is_empty());
}

/// n3 (20 CPU) held by the other shard, then released to us with a 16-CPU pod of theirs the
/// pod watch has not delivered: the list asked for it is the only source.
fn acquiring_n3_with_theirs_on_it(c: &mut Sim) {
    c.set_shard_in_use("other", &["n3"]);
    c.set_shard("agent", &["n1", "n3"]);
    c.settle();
    c.add_unseen_bound_pod(bound(mk_pod("theirs", "16", "1Gi"), "n3"));
    c.set_shard_in_use("other", &[]);
    c.settle();
}

#[test]
fn a_list_answered_after_the_pod_finished_does_not_bring_it_back() {
    let mut c = sim(ShardingMode::Hard, 2);
    upstream_nodes(&mut c);
    c.hold_lists = true;
    acquiring_n3_with_theirs_on_it(&mut c);
    assert_eq!(c.pod_lists, [vec!["n3".to_string()]]);
    assert_eq!(c.held_lists.len(), 1, "read while theirs ran");
    // Theirs finishes and the watch says so before the list's answer arrives.
    c.delete_pod("uid-theirs");
    c.release_lists();
    c.settle();
    // 11 CPU fits only n3, which is empty now (10 on n1).
    c.add_pod(mk_pod("mine", "11", "1Gi"));
    c.settle();
    assert_eq!(
        c.node_of("uid-mine"),
        Some("n3"),
        "the answer must not count a pod that finished before it arrived"
    );
}

#[test]
fn a_relist_older_than_a_nodes_list_makes_the_node_listed_again() {
    let mut c = sim(ShardingMode::Hard, 2);
    upstream_nodes(&mut c);
    // The pod watch relists: its list is read now, before theirs is bound...
    let relist = c.pod_relist();
    acquiring_n3_with_theirs_on_it(&mut c);
    assert_eq!(c.pod_lists, [vec!["n3".to_string()]]);
    // ...and fed in after n3's list: the relist does not show theirs, so it drops it.
    c.deliver_pod_relist(relist);
    c.settle();
    assert_eq!(
        c.pod_lists.len(),
        2,
        "n3 is listed again after the relist: {:?}",
        c.pod_lists
    );
    // 11 CPU: n1 has 10, n3 has 4 left once theirs counts again.
    c.add_pod(mk_pod("mine", "11", "1Gi"));
    c.settle();
    assert_eq!(c.node_of("uid-mine"), None);
    assert!(c.overcommitted().is_empty(), "{:?}", c.overcommitted());
}

#[test]
fn a_list_in_flight_at_a_relist_is_dropped_and_asked_again() {
    let mut c = sim(ShardingMode::Hard, 2);
    upstream_nodes(&mut c);
    c.hold_lists = true;
    acquiring_n3_with_theirs_on_it(&mut c);
    assert_eq!(c.held_lists.len(), 1, "read while theirs ran");
    // The pod watch breaks; theirs finishes meanwhile (no event reaches the engine), and the
    // relist that follows does not show it. n3's answer, read before, arrives after.
    c.pods.remove("uid-theirs");
    let relist = c.pod_relist();
    c.deliver_pod_relist(relist);
    c.release_lists();
    c.settle();
    assert_eq!(c.pod_lists.len(), 2, "asked again: {:?}", c.pod_lists);
    assert_eq!(
        c.h.stats().snapshot().shard.view,
        1,
        "n3 waits for the second answer"
    );
    c.release_lists();
    c.settle();
    assert_eq!(c.h.stats().snapshot().shard.view, 2);
    // 11 CPU fits only an empty n3: the first answer's theirs must not have been counted.
    c.add_pod(mk_pod("mine", "11", "1Gi"));
    c.settle();
    assert_eq!(c.node_of("uid-mine"), Some("n3"));
}

#[test]
fn a_node_moved_away_is_released_only_after_its_binds_finish() {
    let mut c = start(ShardingMode::Hard);
    c.hold_binds = true;
    c.add_pod(mk_pod("p", "8", "1Gi"));
    c.settle();
    assert_eq!(c.held.len(), 1);
    assert_eq!(&*c.held[0].node, "n1");
    // The controller moves n1 to another shard while the bind is in flight.
    c.set_shard("agent", &["n4"]);
    c.settle();
    assert_eq!(c.shards["agent"].nodes_to_remove, ["n1"]);
    assert_eq!(c.in_use("agent"), ["n1", "n4"], "n1 still carries our bind");
    assert_eq!(c.h.stats().snapshot().shard.draining, 1);
    c.hold_binds = false;
    c.release_binds();
    c.settle();
    assert_eq!(c.in_use("agent"), ["n4"], "released once the bind is done");
    assert!(c.shards["agent"].nodes_to_remove.is_empty());
}

#[test]
fn a_node_given_back_before_its_release_landed_is_claimed_again_before_use() {
    // The answer to our release comes before the watch shows the controller's earlier change
    // that gave the node back (a watch cache lagging behind the answers to writes). That older
    // object still lists the node in our status; using the node on its strength would bind onto
    // a node our stored status no longer lists, which another scheduler may be claiming.
    let mut c = start(ShardingMode::Hard);
    c.add_pod(mk_pod("fill", "10", "1Gi"));
    c.settle();
    assert_eq!(c.node_of("uid-fill"), Some("n1"));
    // The controller takes n4 away: the release is asked for, not yet sent.
    c.set_shard("agent", &["n1"]);
    c.h.flush();
    // It gives n4 back; the watch lags from here on.
    c.hold_shard_watch = true;
    c.set_shard("agent", &["n1", "n4"]);
    c.answer();
    assert_eq!(c.in_use("agent"), ["n1"], "the release is stored");
    // The watch shows the give-back (older than the release) before the release's echo.
    c.release_shard_events(1);
    // 5 CPU fits only n4 in the shard.
    c.add_pod(mk_pod("p", "5", "1Gi"));
    c.settle();
    assert_eq!(
        c.node_of("uid-p"),
        None,
        "n4 is not used before it is claimed again"
    );
    assert!(c.shard_violations.is_empty(), "{:?}", c.shard_violations);
    c.hold_shard_watch = false;
    c.release_shard_events(usize::MAX);
    assert!(c.run_until(BACKOFFS, |c| c.node_of("uid-p") == Some("n4")));
    assert_eq!(c.in_use("agent"), ["n1", "n4"]);
    assert!(c.shard_violations.is_empty(), "{:?}", c.shard_violations);
}

#[test]
fn a_new_term_holds_inherited_nodes() {
    let hold = Duration::from_millis(600);
    let mut c = sim_with(ShardingMode::Hard, 1, hold);
    upstream_nodes(&mut c);
    // A predecessor left n2 in use although the shard no longer desires it.
    c.set_shard_in_use("agent", &["n1", "n2"]);
    c.set_shard("agent", &["n1"]);
    let t0 = c.h.now();
    c.settle();
    assert_eq!(c.shards["agent"].nodes_to_remove, ["n2"]);
    c.run_for(hold - Duration::from_millis(1));
    assert_eq!(c.in_use("agent"), ["n1", "n2"], "held until the hold ends");
    assert!(c.run_until(BACKOFFS, |c| c.in_use("agent") == ["n1"]));
    assert_eq!(
        c.h.now().saturating_since(t0),
        hold,
        "released when the hold ends"
    );
}

#[test]
fn losing_and_regaining_the_lease_starts_a_new_term() {
    // The term's hold is taken at its start; a true → false → true flip between two flushes
    // must still start a new term (leadership reaches the driver as ordered inputs).
    let hold = Duration::from_millis(600);
    let mut c = sim_with(ShardingMode::Hard, 1, hold);
    upstream_nodes(&mut c);
    c.set_shard("agent", &["n1", "n2"]);
    c.settle();
    assert!(c.run_until(BACKOFFS, |c| c.in_use("agent") == ["n1", "n2"]));
    c.run_for(hold);
    // The controller takes n2 away; in the same instant the lease is lost and won back.
    c.set_shard("agent", &["n1"]);
    c.h.set_leading(false);
    c.h.set_leading(true);
    let t0 = c.h.now();
    c.settle();
    assert_eq!(c.in_use("agent"), ["n1", "n2"], "the new term holds n2");
    assert!(c.run_until(BACKOFFS, |c| c.in_use("agent") == ["n1"]));
    assert_eq!(c.h.now().saturating_since(t0), hold);
}

#[test]
fn burst_in_hard_mode_stays_in_the_shard_without_overcommit() {
    let mut c = sim(ShardingMode::Hard, 4);
    for i in 0..40 {
        c.add_node(mk_node(&format!("n{i:02}"), "4", "16Gi", 110));
    }
    let shard: Vec<String> = (0..40).step_by(2).map(|i| format!("n{i:02}")).collect();
    let refs: Vec<&str> = shard.iter().map(String::as_str).collect();
    c.set_shard("agent", &refs);
    c.settle();
    assert_eq!(c.in_use("agent").len(), 20);
    // 20 nodes × 4 CPU = 80 pods of 1 CPU fit; 100 are offered.
    for i in 0..100 {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 80);
    assert_eq!(
        c.statuses
            .iter()
            .filter(|s| s.reason == StatusReason::Unschedulable)
            .count(),
        20
    );
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    for p in c.pods.values() {
        if let Some(n) = &p.node_name {
            assert!(shard.contains(n), "{n} is outside the shard");
        }
    }
    c.h.stop();
    assert!(c.h.core().audit().is_empty(), "{:?}", c.h.core().audit());
}
