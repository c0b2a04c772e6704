//! Priority preemption (`preemption`, kube-scheduler's DefaultPreemption) on the engine's
//! deterministic harness: who is evicted, who is spared, where the preemptor goes, and that the
//! room its victims free is kept for it.

use magma_engine::PodInput;
use magma_engine::core::{Input, StatusReason};
use magma_engine::model::LabelSelectorInput;
use magma_engine::pdb::{PdbChange, PdbInput};
use magma_engine::testing::{Sim, bound, mk_node, mk_pod};

fn prio(mut p: PodInput, priority: i32) -> PodInput {
    p.priority = priority;
    p
}

fn started(mut p: PodInput, ms: i64) -> PodInput {
    p.started_unix_ms = Some(ms);
    p
}

fn victims(c: &Sim) -> Vec<String> {
    c.preemptions
        .iter()
        .flat_map(|p| p.victims.iter().map(|v| v.name.to_string()))
        .collect()
}

/// The case: a 2-CPU node holds a priority-0 pod of 1.5 CPU; a priority-1000 pod of
/// 1 CPU evicts it, is nominated there, and is bound there once it is gone.
#[test]
fn a_higher_priority_pod_evicts_a_lower_one_and_takes_its_room() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "2", "8Gi", 110));
    c.add_pod(bound(prio(mk_pod("low", "1500m", "1Gi"), 0), "n0"));
    c.add_pod(prio(mk_pod("high", "1", "1Gi"), 1000));
    c.settle();
    assert_eq!(victims(&c), ["low"]);
    let p = &c.preemptions[0];
    assert_eq!((&*p.preemptor.name, &*p.node), ("high", "n0"));
    assert_eq!(c.node_of("uid-high"), Some("n0"));
    let s = c.h.stats().snapshot();
    assert_eq!((s.preemptions, s.preemption_victims), (1, 1));
}

/// Equal priority, and a preemptor with `preemptionPolicy: Never`, evict nothing.
#[test]
fn equal_priority_and_never_evict_nothing() {
    for (name, priority, never, why) in [
        (
            "equal",
            0,
            false,
            "0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        (
            "never",
            1000,
            true,
            "not eligible due to preemptionPolicy=Never.",
        ),
    ] {
        let mut c = Sim::workers(1);
        c.add_node(mk_node("n0", "2", "8Gi", 110));
        c.add_pod(bound(prio(mk_pod("low", "1500m", "1Gi"), 0), "n0"));
        let mut p = prio(mk_pod(name, "1", "1Gi"), priority);
        p.preemption_never = never;
        c.add_pod(p);
        c.settle();
        assert!(c.preemptions.is_empty(), "{name}: {:?}", victims(&c));
        let s = c
            .statuses
            .iter()
            .find(|s| &*s.name == name)
            .unwrap_or_else(|| panic!("{name} reported"));
        assert_eq!(s.reason, StatusReason::Unschedulable);
        assert_eq!(
            &*s.message,
            format!("0/1 nodes are unavailable: 1 Insufficient cpu. preemption: {why}")
        );
    }
}

/// Only as many victims as needed, the least important ones (lowest priority, then the latest
/// started); the others are reprieved.
#[test]
fn only_the_victims_needed_the_least_important_first() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "2", "8Gi", 110));
    // 1.5 CPU in use by three pods; 0.5 free. A 1-CPU pod needs one 500m pod gone.
    c.add_pod(bound(
        started(prio(mk_pod("a", "500m", "1Gi"), 10), 1_000),
        "n0",
    ));
    c.add_pod(bound(
        started(prio(mk_pod("b", "500m", "1Gi"), 5), 1_000),
        "n0",
    ));
    c.add_pod(bound(
        started(prio(mk_pod("c", "500m", "1Gi"), 5), 2_000),
        "n0",
    ));
    c.add_pod(prio(mk_pod("high", "1", "1Gi"), 1000));
    c.settle();
    assert_eq!(victims(&c), ["c"], "priority 5 and started last");
    assert_eq!(c.node_of("uid-high"), Some("n0"));
}

/// A PodDisruptionBudget steers the choice: the node whose victim it protects is avoided.
#[test]
fn a_disruption_budget_steers_the_node() {
    let mut c = Sim::workers(1);
    for n in ["n0", "n1"] {
        c.add_node(mk_node(n, "2", "8Gi", 110));
    }
    let mut guarded = bound(prio(mk_pod("guarded", "1500m", "1Gi"), 0), "n0");
    guarded.labels = vec![("app".into(), "db".into())];
    c.add_pod(guarded);
    c.add_pod(bound(prio(mk_pod("spare", "1500m", "1Gi"), 0), "n1"));
    c.h.input(Input::Pdb(PdbChange::Apply(PdbInput {
        namespace: "default".into(),
        name: "db".into(),
        selector: Some(LabelSelectorInput {
            match_labels: vec![("app".into(), "db".into())],
            match_expressions: vec![],
        }),
        disruptions_allowed: 0,
        disrupted: vec![],
    })));
    c.add_pod(prio(mk_pod("high", "1", "1Gi"), 1000));
    c.settle();
    assert_eq!(victims(&c), ["spare"]);
    assert_eq!(c.node_of("uid-high"), Some("n1"));
}

/// While its victims terminate, the preemptor waits (it does not preempt again) and its room
/// is kept: a pod of lower priority created meanwhile does not take it; once the victim is gone
/// the preemptor is bound there.
#[test]
fn the_room_is_kept_while_victims_terminate() {
    let mut c = Sim::workers(1);
    c.terminate_victims = true;
    c.add_node(mk_node("n0", "2", "8Gi", 110));
    c.add_pod(bound(prio(mk_pod("victim", "1500m", "1Gi"), 0), "n0"));
    c.add_pod(bound(prio(mk_pod("other", "500m", "1Gi"), 0), "n0"));
    c.add_pod(prio(mk_pod("high", "1", "1Gi"), 1000));
    c.settle();
    assert_eq!(victims(&c), ["victim"], "one victim is enough");
    assert_eq!(
        c.node_of("uid-high"),
        None,
        "its victim is still terminating"
    );
    // The victim leaves; in the same batch a low pod arrives that would fit in the freed room.
    c.delete_pod("uid-victim");
    c.add_pod(prio(mk_pod("sneaky", "1", "1Gi"), 0));
    c.settle();
    assert_eq!(c.node_of("uid-high"), Some("n0"));
    assert_eq!(c.node_of("uid-sneaky"), None);
    assert_eq!(c.preemptions.len(), 1, "no second preemption while waiting");
}

/// A pod of higher priority than the nominee may take the room; the nominee is then decided
/// again (and preempts on its own account if it can).
#[test]
fn a_higher_priority_pod_may_take_a_nominated_room() {
    let mut c = Sim::workers(1);
    c.terminate_victims = true;
    c.add_node(mk_node("n0", "2", "8Gi", 110));
    c.add_pod(bound(prio(mk_pod("victim", "1500m", "1Gi"), 0), "n0"));
    c.add_pod(prio(mk_pod("mid", "1", "1Gi"), 100));
    c.settle();
    assert_eq!(victims(&c), ["victim"]);
    c.delete_pod("uid-victim");
    c.add_pod(prio(mk_pod("top", "2", "1Gi"), 1000));
    c.settle();
    assert_eq!(
        c.node_of("uid-top"),
        Some("n0"),
        "above the nominee: not held back"
    );
    assert_eq!(c.node_of("uid-mid"), None);
}

/// Two high-priority pods racing for the room one low pod frees, at four workers: it is given
/// once; the other preempts nothing more (there is nothing of lower priority left) and waits.
#[test]
fn two_preemptors_racing_for_one_room_get_it_once() {
    for round in 0..10 {
        let mut c = Sim::workers(4);
        c.add_node(mk_node("n0", "2", "8Gi", 110));
        c.add_pod(bound(prio(mk_pod("low", "2", "1Gi"), 0), "n0"));
        c.add_pod(prio(mk_pod("h1", "2", "1Gi"), 1000));
        c.add_pod(prio(mk_pod("h2", "2", "1Gi"), 1000));
        c.settle();
        let placed = ["uid-h1", "uid-h2"]
            .iter()
            .filter(|u| c.node_of(u).is_some())
            .count();
        assert_eq!(placed, 1, "round {round}");
        assert_eq!(victims(&c), ["low"], "round {round}");
        c.h.check_settled();
    }
}

/// A preemptor woken by an unrelated deletion before its own victims' deletion is seen (their
/// grace period is 0: they are never seen terminating) waits for them: it does not preempt
/// again elsewhere.
#[test]
fn a_preemptor_does_not_preempt_again_before_its_victims_are_seen_gone() {
    let mut c = Sim::workers(1);
    c.hold_victims = true;
    for n in ["n0", "n1"] {
        c.add_node(mk_node(n, "2", "8Gi", 110));
    }
    c.add_node(mk_node("small", "500m", "8Gi", 110));
    c.add_pod(bound(prio(mk_pod("a", "1500m", "1Gi"), 0), "n0"));
    c.add_pod(bound(prio(mk_pod("b", "1500m", "1Gi"), 0), "n1"));
    c.add_pod(bound(prio(mk_pod("tiny", "100m", "1Gi"), 0), "small"));
    c.add_pod(prio(mk_pod("high", "1", "1Gi"), 1000));
    c.settle();
    assert_eq!(c.preemptions.len(), 1);
    let victim = c.preemptions[0].victims[0].uid.to_string();
    // Room freed elsewhere wakes the preemptor; its victim is still there.
    c.delete_pod("uid-tiny");
    c.settle();
    assert_eq!(c.preemptions.len(), 1, "{:?}", victims(&c));
    assert_eq!(c.node_of("uid-high"), None);
    c.delete_pod(&victim);
    c.settle();
    assert_eq!(
        c.node_of("uid-high"),
        Some(&*c.preemptions[0].node),
        "bound where its victim was"
    );
    assert_eq!(victims(&c).len(), 1);
}
