//! Scenario tests on the engine API, run on the deterministic harness (`magma_engine::testing`):
//! workers are stepped by the test, time is a manual clock. The allocate cases are ported from
//! Volcano's `pkg/agentscheduler/actions/allocate/allocate_test.go` (Apache-2.0,
//! volcano-sh/volcano): 4 workers × 5 pods on 20 nodes, 10 workers × 100 pods on 50 nodes
//! (10 CPU / 20 Gi / 100 pods each), every pod placed.

use magma_engine::Profile;
use magma_engine::core::{BindResult, Input, StatusReason};
use magma_engine::queue::PodState;
use magma_engine::testing::{Sim, mk_node, mk_pod, with_labels, with_taint};
use std::sync::Arc;
use std::time::Duration;

/// Long enough for any backoff (1 s → 10 s) to pass, well short of the 5 min pool flush.
const BACKOFFS: Duration = Duration::from_secs(30);

fn place_all(workers: usize, pods: usize, nodes: usize) {
    let mut c = Sim::workers(workers);
    for i in 0..nodes {
        c.add_node(mk_node(&format!("n{i}"), "10", "20Gi", 100));
    }
    for i in 0..pods {
        c.add_pod(mk_pod(&format!("p{i}"), "100m", "128Mi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), pods);
    assert_eq!(c.duplicate_bindings(), 0);
    assert!(c.overcommitted().is_empty());
    c.h.stop();
    let core = c.h.core();
    assert!(core.audit().is_empty(), "{:?}", core.audit());
    assert!(core.queue().is_empty());
}

#[test]
fn upstream_4_workers_5_pods_20_nodes() {
    place_all(4, 5, 20);
}

#[test]
fn upstream_10_workers_100_pods_50_nodes() {
    place_all(10, 100, 50);
}

#[test]
fn full_cluster_never_overcommits_and_reports_the_rest() {
    // 10 nodes × 4 CPU; 60 pods of 1 CPU: exactly 40 fit.
    let mut c = Sim::workers(4);
    for i in 0..10 {
        c.add_node(mk_node(&format!("n{i}"), "4", "64Gi", 110));
    }
    for i in 0..60 {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 40);
    assert_eq!(c.reported().len(), 20);
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    let s = c
        .statuses
        .iter()
        .find(|s| s.reason == StatusReason::Unschedulable)
        .unwrap();
    assert_eq!(
        &*s.message,
        "0/10 nodes are unavailable: 10 Insufficient cpu. preemption: 0/10 nodes are available: 10 No preemption victims found for incoming pod."
    );
    c.h.stop();
    assert_eq!(c.h.core().queue().depths().unschedulable, 20);
}

#[test]
fn deleting_a_bound_pod_wakes_an_unschedulable_one() {
    let mut c = Sim::workers(2);
    c.add_node(mk_node("n0", "1", "4Gi", 110));
    c.add_pod(mk_pod("a", "1", "1Gi"));
    c.settle();
    assert_eq!(c.bound_count(), 1);
    c.add_pod(mk_pod("b", "1", "1Gi"));
    c.settle();
    assert!(!c.statuses.is_empty());
    assert_eq!(c.bound_count(), 1);
    let failed_at = c.h.now();
    c.delete_pod("uid-a");
    c.settle();
    // Woken by the event and bound at once: nothing else is ready, so its backoff does not hold
    // it (kube-scheduler's SchedulerPopFromBackoffQ); the clock has not moved.
    assert_eq!(c.node_of("uid-b"), Some("n0"));
    assert_eq!(c.h.now(), failed_at);
    c.h.stop();
}

#[test]
fn our_own_condition_coming_back_is_not_a_change_to_the_pod() {
    // The adapter writes PodScheduled=False; the watch brings the pod back with nothing the
    // scheduler reads changed. That must not cost another attempt or double the backoff.
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "1", "4Gi", 110));
    c.add_pod(mk_pod("a", "1", "1Gi"));
    c.settle();
    let b = mk_pod("b", "1", "1Gi");
    c.add_pod(b.clone());
    c.settle();
    assert_eq!(c.reported().len(), 1, "b is reported unschedulable");
    let attempts = c.h.stats().snapshot().attempts;
    for _ in 0..3 {
        c.add_pod(b.clone());
        c.settle();
    }
    let s = c.h.stats().snapshot();
    assert_eq!(s.attempts, attempts, "no attempt for an unchanged pod");
    assert_eq!(s.unchanged_updates, 3);
    assert_eq!(c.h.core().queue().depths().unschedulable, 1);
    c.h.stop();
}

#[test]
fn labelling_a_node_schedules_a_pod_waiting_on_its_selector() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    let mut p = mk_pod("p", "1", "1Gi");
    p.node_selector = vec![("disk".into(), "ssd".into())];
    c.add_pod(p);
    c.settle();
    assert_eq!(
        &*c.statuses[0].message,
        "0/1 nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    c.add_node(with_labels(
        mk_node("n0", "4", "4Gi", 110),
        &[("disk", "ssd")],
    ));
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 1));
    c.h.stop();
}

#[test]
fn a_pod_updated_while_in_flight_is_retried_with_its_new_spec() {
    let mut c = Sim::workers(1);
    c.add_node(with_taint(
        mk_node("n0", "4", "4Gi", 110),
        "dedicated",
        "agents",
        "NoSchedule",
    ));
    let p = mk_pod("p", "1", "1Gi");
    c.add_pod(p.clone());
    c.h.flush();
    assert_eq!(c.h.handoff().len(), 1, "in flight");
    // The user adds the toleration while a worker holds the old spec.
    let mut tolerating = p;
    tolerating
        .tolerations
        .push(magma_engine::model::TolerationInput {
            key: "dedicated".into(),
            operator: "Equal".into(),
            value: "agents".into(),
            effect: "NoSchedule".into(),
        });
    c.add_pod(tolerating);
    let start = c.h.now();
    c.settle();
    // The old spec did not fit; no cluster event will come, but the update itself earns the pod
    // a new attempt, at once since nothing else is ready (not a wait for the 5 min flush).
    assert_eq!(
        c.h.stats().snapshot().unschedulable,
        1,
        "the old spec did not fit"
    );
    assert_eq!(c.bound_count(), 1);
    assert_eq!(c.h.now(), start);
    c.h.stop();
}

#[test]
fn gated_pods_wait_until_their_gates_are_removed() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    let mut p = mk_pod("p", "1", "1Gi");
    p.scheduling_gates = vec!["example.com/wait".into()];
    c.add_pod(p.clone());
    c.run_for(Duration::from_secs(600));
    assert_eq!(c.bound_count(), 0, "gated for ten minutes, never scheduled");
    assert!(c.statuses.is_empty(), "and never reported");
    p.scheduling_gates.clear();
    c.add_pod(p);
    c.settle();
    assert_eq!(c.bound_count(), 1);
    c.h.stop();
}

#[test]
fn invalid_pods_are_reported_not_dropped() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    c.add_pod(mk_pod("bad", "-1", "1Gi"));
    c.settle();
    assert_eq!(c.statuses[0].reason, StatusReason::SchedulerError);
    assert!(
        c.statuses[0].message.contains("negative"),
        "{}",
        c.statuses[0].message
    );
    c.h.stop();
}

#[test]
fn config_reload_takes_effect_for_the_next_pod() {
    // Binpack (mostrequested) vs spread (leastrequested) decides where the second pod goes.
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "8", "8Gi", 110));
    c.add_node(mk_node("n1", "8", "8Gi", 110));
    c.add_pod(mk_pod("a", "2", "2Gi"));
    c.settle();
    let first = c.node_of("uid-a").unwrap().to_owned();
    let binpack = Profile::parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n      mostrequested.weight: 10\n",
        Default::default(),
    )
    .unwrap();
    c.h.input(Input::Profile(Arc::new(binpack)));
    c.add_pod(mk_pod("b", "1", "1Gi"));
    c.settle();
    assert_eq!(c.node_of("uid-b"), Some(&*first), "binpack puts b beside a");
    c.h.stop();
}

#[test]
fn not_leading_claims_nothing_then_resumes() {
    let mut c = Sim::workers(2);
    c.h.set_leading(false);
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.run_for(Duration::from_secs(60));
    assert_eq!(c.bound_count(), 0);
    assert_eq!(
        c.h.handoff().len(),
        0,
        "nothing is handed off while not leading"
    );
    // The leadership input alone makes the driver pump again.
    c.h.set_leading(true);
    c.settle();
    assert_eq!(c.bound_count(), 1);
    c.h.stop();
}

#[test]
fn a_pod_popped_before_leadership_is_lost_goes_back_untouched() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.h.flush();
    assert_eq!(c.h.handoff().len(), 1, "handed off");
    c.h.set_leading(false);
    assert!(c.h.step(0));
    c.h.results();
    assert_eq!(c.h.binds.len(), 0, "not claimed");
    c.h.set_leading(true);
    c.settle();
    assert_eq!(c.bound_count(), 1);
}

#[test]
fn zero_workers_is_rejected_with_upstreams_message() {
    struct Frozen;
    impl magma_engine::Clock for Frozen {
        fn now(&self) -> magma_engine::Nanos {
            magma_engine::Nanos(0)
        }
    }
    let opts = magma_engine::EngineOptions {
        workers: 0,
        ..Default::default()
    };
    let err = magma_engine::Engine::start(opts, Arc::new(Frozen))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "scheduler-worker-count must be greater than 0"
    );
}

#[test]
fn abandoned_binds_are_requeued_without_a_status_write() {
    let mut c = Sim::workers(1);
    c.hold_binds = true;
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.settle();
    assert_eq!(c.held.len(), 1, "a bind intent");
    let b = c.held.pop().unwrap();
    c.answer_bind_with(&b, BindResult::Abandoned);
    c.settle();
    assert_eq!(c.held.len(), 1, "the pod is scheduled again at once");
    assert_eq!(c.held[0].pod.uid, b.pod.uid);
    assert!(
        c.statuses.is_empty(),
        "no status written for an abandoned bind"
    );
    c.hold_binds = false;
    c.release_binds();
    c.settle();
    assert_eq!(c.bound_count(), 1);
    c.h.stop();
    assert!(c.h.core().audit().is_empty());
}

#[test]
fn failed_binds_back_off_and_retry() {
    let mut c = Sim::workers(1);
    c.hold_binds = true;
    c.add_node(mk_node("n0", "4", "4Gi", 110));
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.settle();
    let b = c.held.pop().unwrap();
    c.answer_bind_with(&b, BindResult::Failed("etcd timeout".into()));
    c.settle();
    assert_eq!(c.statuses.len(), 1);
    assert_eq!(c.statuses[0].reason, StatusReason::SchedulerError);
    assert_eq!(
        &*c.statuses[0].message,
        "failed to bind to node n0: etcd timeout"
    );
    assert!(c.held.is_empty(), "backing off, not retried at once");
    c.run_for(Duration::from_millis(999));
    assert!(c.held.is_empty(), "the first backoff is 1 s");
    c.run_for(Duration::from_millis(1));
    assert_eq!(c.held.len(), 1, "retried when the backoff expires");
    assert!(c.errors.is_empty(), "{:?}", c.errors);
}

#[test]
fn a_stale_pending_update_after_the_bind_answer_does_not_schedule_the_pod_again() {
    // The binding's answer can reach the engine before the pod watch delivers an older update
    // of the still-pending pod (the echo of an earlier `Unschedulable` condition, say). That
    // update must not put the pod back in the queue: a second decision would move its
    // placement to another node, leaving the node it is really bound to under-counted until
    // the watch caught up, and bind it twice.
    let mut c = Sim::workers(1);
    c.hold_binds = true;
    c.add_node(mk_node("n0", "1", "4Gi", 110));
    c.add_node(mk_node("n1", "1", "4Gi", 110));
    c.add_pod(mk_pod("p", "1", "1Gi"));
    c.settle();
    let b = c.held.pop().expect("a bind intent");
    // The server binds it; the answer arrives, the watch's echo of the binding not yet.
    let stale = c.pods["uid-p"].clone();
    c.pods.get_mut("uid-p").unwrap().node_name = Some(b.node.to_string());
    c.answer_bind_with(&b, BindResult::Bound);
    c.h.input(Input::PodApply(stale));
    // Meanwhile a pod that fits only the node p is not on.
    c.add_pod(mk_pod("q", "1", "1Gi"));
    c.settle();
    let other = if &*b.node == "n0" { "n1" } else { "n0" };
    let decided: Vec<(String, String)> = c
        .held
        .iter()
        .map(|h| (h.pod.name.to_string(), h.node.to_string()))
        .collect();
    assert_eq!(
        decided,
        [("q".to_string(), other.to_string())],
        "p is not decided again, and q goes beside it, not onto it"
    );
    // The watch delivers the binding; everything settles with one pod per node.
    let echo = c.pods["uid-p"].clone();
    c.h.input(Input::PodApply(echo));
    c.hold_binds = false;
    c.release_binds();
    c.settle();
    assert_eq!(c.bound_count(), 2);
    assert!(c.double_binds.is_empty(), "{:?}", c.double_binds);
    assert!(c.overcommitted().is_empty(), "{:?}", c.overcommitted());
}

/// A deletion wakes only the pods its freed room can take, in queue order, and as many as it
/// fits: twenty pods wait for one full node, each deletion frees one pod's room, and each
/// deletion costs one attempt (kube-scheduler's queueing hints; issue 30's goal: at most two
/// attempts per pod bound, the failed one and the bound one).
#[test]
fn a_deletion_wakes_only_the_pods_its_room_can_take() {
    const WAITING: usize = 20;
    let mut c = Sim::workers(2);
    c.add_node(mk_node("n0", "4", "64Gi", 110));
    for i in 0..4 {
        c.add_pod(mk_pod(&format!("blocker-{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 4);
    for i in 0..WAITING {
        c.add_pod(mk_pod(&format!("w-{i:02}"), "1", "1Gi"));
    }
    c.settle();
    let before = c.h.stats().snapshot().attempts;
    assert!(c.statuses.len() >= WAITING, "every waiting pod reported");
    for i in 0..4 {
        c.delete_pod(&format!("uid-blocker-{i}"));
        c.settle();
        let attempts = c.h.stats().snapshot().attempts - before;
        assert_eq!(
            attempts as usize,
            i + 1,
            "deletion {i}: one pod woken, one attempt"
        );
        assert_eq!(c.bound_count(), 4);
    }
    // The oldest waiting pods got the room, in order.
    for i in 0..4 {
        assert_eq!(c.node_of(&format!("uid-w-{i:02}")), Some("n0"));
    }
    c.h.stop();
}

/// A pod woken for a node's room that does not take it (deleted before its attempt) leaves the
/// room to the next waiting pod: no pod is left waiting behind room nobody took.
#[test]
fn room_a_woken_pod_did_not_take_goes_to_the_next() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "1", "64Gi", 110));
    c.add_pod(mk_pod("blocker", "1", "1Gi"));
    c.settle();
    c.add_pod(mk_pod("first", "1", "1Gi"));
    c.add_pod(mk_pod("second", "1", "1Gi"));
    c.settle();
    assert_eq!(c.bound_count(), 1);
    // The deletion wakes `first` only (handed off at the flush); `first` is deleted before its
    // result is applied.
    let waited_since = c.h.now();
    c.delete_pod("uid-blocker");
    c.h.flush();
    let pooled = |c: &Sim, uid: &str| {
        c.h.core()
            .queue()
            .get(uid)
            .is_some_and(|e| matches!(e.state(), PodState::Unschedulable { .. }))
    };
    assert!(pooled(&c, "uid-second") && !pooled(&c, "uid-first"));
    c.delete_pod("uid-first");
    c.settle();
    assert_eq!(c.node_of("uid-second"), Some("n0"));
    assert!(
        c.h.now().saturating_since(waited_since) < Duration::from_secs(60),
        "bound at once, not by the pool's periodic flush"
    );
    c.h.stop();
}

/// The freed room is judged with the waiting pod's other filters on that node: a pod whose
/// selector the freed node does not match stays in the pool.
#[test]
fn a_pod_the_freed_node_cannot_take_stays_put() {
    let mut c = Sim::workers(1);
    c.add_node(with_labels(
        mk_node("n0", "1", "64Gi", 110),
        &[("gpu", "no")],
    ));
    c.add_node(with_labels(
        mk_node("n1", "1", "64Gi", 110),
        &[("gpu", "yes")],
    ));
    let mut b0 = mk_pod("b0", "1", "1Gi");
    b0.node_selector = vec![("gpu".into(), "no".into())];
    c.add_pod(b0);
    let mut b1 = mk_pod("b1", "1", "1Gi");
    b1.node_selector = vec![("gpu".into(), "yes".into())];
    c.add_pod(b1);
    c.settle();
    assert_eq!(c.bound_count(), 2);
    let mut picky = mk_pod("picky", "1", "1Gi");
    picky.node_selector = vec![("gpu".into(), "yes".into())];
    c.add_pod(picky);
    c.settle();
    let before = c.h.stats().snapshot().attempts;
    c.delete_pod("uid-b0");
    c.settle();
    assert_eq!(
        c.h.stats().snapshot().attempts,
        before,
        "room on n0 does nothing for a pod that needs gpu=yes"
    );
    c.delete_pod("uid-b1");
    c.settle();
    assert_eq!(c.node_of("uid-picky"), Some("n1"));
    c.h.stop();
}
