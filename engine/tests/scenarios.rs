//! Scenario tests on the engine API with real worker threads. The allocate cases are ported
//! from Volcano's `pkg/agentscheduler/actions/allocate/allocate_test.go` (Apache-2.0,
//! volcano-sh/volcano): 4 workers × 5 pods on 20 nodes, 10 workers × 100 pods on 50 nodes
//! (10 CPU / 20 Gi / 100 pods each), every pod placed.

mod support;

use magma_engine::core::{Input, StatusReason};
use magma_engine::{EngineOptions, Profile};
use std::time::Duration;
use support::*;

fn opts(workers: usize) -> EngineOptions {
    EngineOptions {
        workers,
        ..Default::default()
    }
}

fn place_all(workers: usize, pods: usize, nodes: usize) {
    let (e, mut c) = Cluster::start(opts(workers));
    for i in 0..nodes {
        c.add_node(&e, mk_node(&format!("n{i}"), "10", "20Gi", 100));
    }
    for i in 0..pods {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "100m", "128Mi"));
    }
    assert!(
        c.run_until(&e, Duration::from_secs(10), |c| c.bound_count() == pods),
        "bound {}",
        c.bound_count()
    );
    assert_eq!(c.duplicate_bindings(), 0);
    assert!(c.overcommitted().is_empty());
    let core = e.shutdown();
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
    let (e, mut c) = Cluster::start(opts(4));
    for i in 0..10 {
        c.add_node(&e, mk_node(&format!("n{i}"), "4", "64Gi", 110));
    }
    for i in 0..60 {
        c.add_pod(&e, mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    let done = c.run_until(&e, Duration::from_secs(10), |c| {
        c.bound_count() == 40
            && c.statuses
                .iter()
                .map(|s| s.uid.clone())
                .collect::<std::collections::HashSet<_>>()
                .len()
                == 20
    });
    assert!(
        done,
        "bound {} statuses {}",
        c.bound_count(),
        c.statuses.len()
    );
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    let s = c
        .statuses
        .iter()
        .find(|s| s.reason == StatusReason::Unschedulable)
        .unwrap();
    assert_eq!(
        &*s.message,
        "0/10 nodes are unavailable: 10 Insufficient cpu."
    );
    let core = e.shutdown();
    assert_eq!(core.queue().depths().unschedulable, 20);
}

#[test]
fn deleting_a_bound_pod_wakes_an_unschedulable_one() {
    let (e, mut c) = Cluster::start(opts(2));
    c.add_node(&e, mk_node("n0", "1", "4Gi", 110));
    c.add_pod(&e, mk_pod("a", "1", "1Gi"));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1));
    c.add_pod(&e, mk_pod("b", "1", "1Gi"));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| !c.statuses.is_empty()));
    assert_eq!(c.bound_count(), 1);
    c.delete_pod(&e, "uid-a");
    // Woken by the event, after its 1 s backoff: well before the 5 min flush.
    assert!(
        c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1
            && c.pods["uid-b"].node_name.is_some())
    );
    e.shutdown();
}

#[test]
fn labelling_a_node_schedules_a_pod_waiting_on_its_selector() {
    let (e, mut c) = Cluster::start(opts(1));
    c.add_node(&e, mk_node("n0", "4", "4Gi", 110));
    let mut p = mk_pod("p", "1", "1Gi");
    p.node_selector = vec![("disk".into(), "ssd".into())];
    c.add_pod(&e, p);
    assert!(c.run_until(&e, Duration::from_secs(5), |c| !c.statuses.is_empty()));
    assert_eq!(
        &*c.statuses[0].message,
        "0/1 nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector."
    );
    c.add_node(
        &e,
        with_labels(mk_node("n0", "4", "4Gi", 110), &[("disk", "ssd")]),
    );
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1));
    e.shutdown();
}

#[test]
fn gated_pods_wait_until_their_gates_are_removed() {
    let (e, mut c) = Cluster::start(opts(1));
    c.add_node(&e, mk_node("n0", "4", "4Gi", 110));
    let mut p = mk_pod("p", "1", "1Gi");
    p.scheduling_gates = vec!["example.com/wait".into()];
    c.add_pod(&e, p.clone());
    assert!(!c.run_until(&e, Duration::from_millis(300), |c| c.bound_count() == 1));
    p.scheduling_gates.clear();
    c.add_pod(&e, p);
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1));
    e.shutdown();
}

#[test]
fn invalid_pods_are_reported_not_dropped() {
    let (e, mut c) = Cluster::start(opts(1));
    c.add_node(&e, mk_node("n0", "4", "4Gi", 110));
    c.add_pod(&e, mk_pod("bad", "-1", "1Gi"));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| !c.statuses.is_empty()));
    assert_eq!(c.statuses[0].reason, StatusReason::SchedulerError);
    assert!(
        c.statuses[0].message.contains("negative"),
        "{}",
        c.statuses[0].message
    );
    e.shutdown();
}

#[test]
fn config_reload_takes_effect_for_the_next_pod() {
    // Binpack (mostrequested) vs spread (leastrequested) decides where the second pod goes.
    let (e, mut c) = Cluster::start(opts(1));
    c.add_node(&e, mk_node("n0", "8", "8Gi", 110));
    c.add_node(&e, mk_node("n1", "8", "8Gi", 110));
    c.add_pod(&e, mk_pod("a", "2", "2Gi"));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1));
    let first = c.pods["uid-a"].node_name.clone().unwrap();
    let binpack = Profile::parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n      mostrequested.weight: 10\n",
        Default::default(),
    )
    .unwrap();
    e.handle()
        .send(Input::Profile(std::sync::Arc::new(binpack)));
    c.add_pod(&e, mk_pod("b", "1", "1Gi"));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 2));
    assert_eq!(
        c.pods["uid-b"].node_name.as_ref().unwrap(),
        &first,
        "binpack puts b beside a"
    );
    e.shutdown();
}

#[test]
fn not_leading_claims_nothing_then_resumes() {
    let (e, mut c) = Cluster::start(opts(2));
    e.set_leading(false);
    c.add_node(&e, mk_node("n0", "4", "4Gi", 110));
    c.add_pod(&e, mk_pod("p", "1", "1Gi"));
    assert!(!c.run_until(&e, Duration::from_millis(300), |c| c.bound_count() == 1));
    e.set_leading(true);
    // The driver pumps the hand-off again at its next wake-up.
    e.handle()
        .send(Input::NodeApply(mk_node("n1", "4", "4Gi", 110)));
    assert!(c.run_until(&e, Duration::from_secs(5), |c| c.bound_count() == 1));
    e.shutdown();
}

#[test]
fn zero_workers_is_rejected_with_upstreams_message() {
    let err = magma_engine::Engine::start(opts(0), RealClock::new())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "scheduler-worker-count must be greater than 0"
    );
}

#[test]
fn abandoned_binds_are_requeued_without_a_status_write() {
    use magma_engine::core::{BindResult, Intent};
    let (e, mut c) = Cluster::start(opts(1));
    c.add_node(&e, mk_node("n0", "4", "4Gi", 110));
    e.handle().send(Input::PodApply(mk_pod("p", "1", "1Gi")));
    let first = e
        .intents()
        .recv_timeout(Duration::from_secs(5))
        .expect("a bind intent");
    let Intent::Bind(b) = first else {
        panic!("expected a bind, got {first:?}")
    };
    e.handle().send(Input::BindOutcome {
        uid: b.pod.uid.to_string(),
        result: BindResult::Abandoned,
    });
    let again = e
        .intents()
        .recv_timeout(Duration::from_secs(5))
        .expect("the pod is scheduled again");
    assert!(
        matches!(again, Intent::Bind(ref b2) if b2.pod.uid == b.pod.uid),
        "{again:?}"
    );
    let core = e.shutdown();
    assert!(core.audit().is_empty());
}
