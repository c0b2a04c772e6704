//! Adapter tests: the real scheduler (`app::spawn`, in process) against the API simulator over
//! HTTP. Upstream's e2e cases (single pod, many pods, too much CPU → Unschedulable with the
//! condition, unmatched nodeSelector → Unschedulable then labelling a node gets it scheduled,
//! coexistence with another scheduler's pods), bind failures, relists during a burst, a pod
//! deleted while its bind is in flight, and config reload.

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sim::{ErrorRule, Faults, Sim};

use crate::common;
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_and_many_pods_are_bound_exactly_once() {
    let sim = Sim::start(sim_cfg(20)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    for i in 0..200 {
        sim.create_pod(
            "default",
            &format!("p{i}"),
            "agent-scheduler",
            "100m",
            "128Mi",
        )
        .unwrap();
    }
    eventually("200 pods bound", Duration::from_secs(20), || {
        sim.bindings().len() >= 200
    })
    .await;
    let summary = s.stop().await;
    let b = sim.bindings();
    let mut names: Vec<_> = b.iter().map(|r| r.name.clone()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 200, "every pod bound exactly once");
    assert_eq!(
        summary.binds_sent, 200,
        "exactly one binding call per scheduled pod"
    );
    let binding_writes = sim
        .writes()
        .iter()
        .filter(|w| w.resource.contains("binding"))
        .count();
    assert_eq!(binding_writes, 200);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_much_cpu_is_unschedulable_with_condition_and_event() {
    let sim = Sim::start(sim_cfg(3)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    sim.create_pod("default", "huge", "agent-scheduler", "64", "1Gi")
        .unwrap();
    eventually("condition", Duration::from_secs(10), || {
        condition(&sim, "huge").is_some()
    })
    .await;
    let (status, reason, message) = condition(&sim, "huge").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable")
    );
    assert_eq!(
        message,
        "0/3 nodes are unavailable: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    let client = kube::Client::try_from(client_config(&sim).await).unwrap();
    let events: Api<Event> = Api::namespaced(client, "default");
    let list = events.list(&Default::default()).await.unwrap();
    assert!(
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling")
                && e.type_.as_deref() == Some("Warning"))
    );
    assert!(node_of(&sim, "huge").is_none());
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_selector_waits_until_a_node_is_labelled() {
    let sim = Sim::start(sim_cfg(2)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    let client = kube::Client::try_from(client_config(&sim).await).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("picky", "agent-scheduler", "100m");
    p.spec.as_mut().unwrap().node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    eventually("unschedulable", Duration::from_secs(10), || {
        condition(&sim, "picky").is_some()
    })
    .await;
    assert_eq!(
        condition(&sim, "picky").unwrap().2,
        "0/2 nodes are unavailable: 2 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    let nodes: Api<Node> = Api::all(client);
    let name = kube_sim::node_name(1);
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await
        .unwrap();
    eventually("scheduled after labelling", Duration::from_secs(10), || {
        node_of(&sim, "picky").is_some()
    })
    .await;
    assert_eq!(node_of(&sim, "picky").unwrap(), name);
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_schedulers_pods_are_untouched() {
    let sim = Sim::start(sim_cfg(3)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    // Theirs first: by the time the scheduler has finished with ours (bound, and its
    // `Scheduled` event written, the last thing it does for a pod), it has had every chance to
    // act on theirs.
    sim.create_pod("default", "theirs", "volcano", "100m", "128Mi")
        .unwrap();
    sim.create_pod("default", "ours", "agent-scheduler", "100m", "128Mi")
        .unwrap();
    eventually("ours bound", Duration::from_secs(10), || {
        node_of(&sim, "ours").is_some()
    })
    .await;
    let event_of = |pod: &str| {
        sim.writes().into_iter().any(|w| {
            w.resource == "events" && w.code == 201 && w.name.starts_with(&format!("{pod}."))
        })
    };
    wait_for(
        "the Scheduled event of ours",
        Duration::from_secs(10),
        || event_of("ours").then_some(()),
        || format!("{:?}", sim.writes()),
    )
    .await;
    let touched: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|w| w.name == "theirs" || w.name.starts_with("theirs."))
        .collect();
    assert!(
        touched.is_empty(),
        "the scheduler wrote to another scheduler's pod: {touched:?}"
    );
    assert!(node_of(&sim, "theirs").is_none());
    let p = sim.get("v1", "pods", "default", "theirs").unwrap();
    assert_eq!(p["spec"]["schedulerName"], "volcano");
    assert!(condition(&sim, "theirs").is_none());
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_errors_back_off_with_scheduler_error_then_succeed() {
    bind_error_class("create:pods/binding=1.0:500").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_binds_back_off_with_scheduler_error_then_succeed() {
    bind_error_class("create:pods/binding=1.0:429").await;
}

async fn bind_error_class(rule: &str) {
    let sim = Sim::start(sim_cfg(2)).await.unwrap();
    sim.faults().set(Faults {
        errors: vec![ErrorRule::parse(rule).unwrap()],
        ..Faults::default()
    });
    let s = Sched::start(&sim, |st| st.client_config.default_retry = false).await;
    sim.create_pod("default", "p", "agent-scheduler", "100m", "128Mi")
        .unwrap();
    eventually("SchedulerError", Duration::from_secs(10), || {
        condition(&sim, "p").is_some_and(|c| c.1 == "SchedulerError")
    })
    .await;
    assert!(
        condition(&sim, "p")
            .unwrap()
            .2
            .starts_with("failed to bind to node ")
    );
    sim.faults().clear();
    eventually("bound after backoff", Duration::from_secs(15), || {
        node_of(&sim, "p").is_some()
    })
    .await;
    assert_eq!(sim.bindings().len(), 1);
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relists_during_a_burst_lose_and_duplicate_nothing() {
    let sim = Sim::start(sim_cfg(50)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    for i in 0..600 {
        sim.create_pod(
            "default",
            &format!("p{i}"),
            "agent-scheduler",
            "100m",
            "128Mi",
        )
        .unwrap();
        if i % 150 == 0 {
            sim.faults().expire_next_watches(3);
            sim.faults().drop_all_watches();
        }
    }
    eventually("all bound", Duration::from_secs(30), || {
        sim.bindings().len() >= 600
    })
    .await;
    // Stopped first, so no binding request is still in flight when the attempts are counted.
    s.stop().await;
    // Every `pods/binding` POST, whatever its answer: the simulator refuses a second binding of a
    // pod with 409, so counting successes alone could never see a double send.
    let mut attempts: std::collections::BTreeMap<String, Vec<u16>> = Default::default();
    for r in sim.requests() {
        if r.resource == "pods" && r.subresource == "binding" {
            assert_eq!((r.verb, r.write), ("create", true), "{r:?}");
            attempts.entry(r.name.clone()).or_default().push(r.code);
        }
    }
    assert_eq!(attempts.len(), 600, "a binding attempt for every pod");
    let twice: Vec<_> = attempts
        .iter()
        .filter(|(_, codes)| codes.len() > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "no pod bound twice: {} pods got more than one binding request (codes): {twice:?}",
        twice.len()
    );
    assert!(
        attempts.values().all(|codes| codes == &[201]),
        "one successful binding per pod"
    );
    assert_eq!(sim.bindings().len(), 600);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_while_its_bind_is_in_flight_is_forgotten() {
    let sim = Sim::start(sim_cfg(1)).await.unwrap();
    let s = Sched::start(&sim, |_| {}).await;
    // Slow API: kube-sim holds every request this long before serving it, so once the engine
    // has emitted the bind (the observer's count), the binding request cannot have been served
    // for LATENCY_MS; the answer below proves the delete landed in that window.
    const LATENCY_MS: u64 = 1500;
    sim.faults().set(Faults {
        latency_ms: LATENCY_MS,
        ..Faults::default()
    });
    assert_eq!(s.running.engine_stats().bind_intents, 0);
    sim.create_pod("default", "doomed", "agent-scheduler", "1", "128Mi")
        .unwrap();
    wait_for(
        "the bind of doomed",
        Duration::from_secs(10),
        || (s.running.engine_stats().bind_intents > 0).then_some(()),
        || format!("{:?}", s.running.engine_stats()),
    )
    .await;
    // The delete goes through the simulator's handle: no HTTP, no latency.
    sim.delete("v1", "pods", "default", "doomed").unwrap();
    let binding_writes = || -> Vec<_> {
        sim.writes()
            .into_iter()
            .filter(|w| w.resource == "pods/binding" && w.name == "doomed")
            .collect()
    };
    let first = wait_for(
        "the answer to doomed's binding",
        Duration::from_secs(10),
        || binding_writes().first().cloned(),
        || format!("{:?}", sim.writes()),
    )
    .await;
    assert_eq!(
        first.code, 404,
        "the delete did not land while the bind was in flight (the binding was answered \
         {} before it; raise LATENCY_MS if the machine is that slow)",
        first.code
    );
    sim.faults().clear();
    assert!(
        sim.bindings().iter().all(|b| b.name != "doomed"),
        "{:?}",
        sim.bindings()
    );
    // Its CPU must come back: a pod needing the whole node fits afterwards.
    sim.create_pod("default", "next", "agent-scheduler", "32", "128Mi")
        .unwrap();
    eventually("next bound", Duration::from_secs(10), || {
        node_of(&sim, "next").is_some()
    })
    .await;
    assert!(
        binding_writes().iter().all(|w| w.code == 404),
        "doomed was never bound: {:?}",
        binding_writes()
    );
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reload_valid_applies_invalid_is_rejected() {
    let dir = std::env::temp_dir().join(format!("magma-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agent-scheduler.conf");
    std::fs::write(&path, magma_engine::conf::DEFAULT_SCHEDULER_CONF).unwrap();
    let sim = Sim::start(sim_cfg(2)).await.unwrap();
    let p2 = path.clone();
    let port = free_port();
    let s = Sched::start(&sim, move |st| {
        st.config_path = Some(p2);
        st.metrics_addr = Some(([127, 0, 0, 1], port).into());
    })
    .await;
    const OK: &str = "magma_config_reload_total{result=\"ok\"}";
    const REJECTED: &str = "magma_config_reload_total{result=\"rejected\"}";
    let wait = Duration::from_secs(10);
    assert_eq!(metric_reaches(port, OK, 0, wait).await, 0);
    assert_eq!(metric_reaches(port, REJECTED, 0, wait).await, 0);
    // Load one node a little so binpack vs spread differ.
    sim.create_pod("default", "a", "agent-scheduler", "2", "128Mi")
        .unwrap();
    eventually("a bound", Duration::from_secs(10), || {
        node_of(&sim, "a").is_some()
    })
    .await;
    let first = node_of(&sim, "a").unwrap();
    // Invalid: rejected, the old config stays (spread).
    std::fs::write(&path, "actions: \"enqueue, allocate\"\n").unwrap();
    metric_reaches(port, REJECTED, 1, wait).await;
    sim.create_pod("default", "b", "agent-scheduler", "1", "128Mi")
        .unwrap();
    eventually("b bound", Duration::from_secs(10), || {
        node_of(&sim, "b").is_some()
    })
    .await;
    assert_ne!(node_of(&sim, "b").unwrap(), first, "still spreading");
    // Valid binpack config: the next pod goes beside the others.
    std::fs::write(
        &path,
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n      mostrequested.weight: 10\n",
    )
    .unwrap();
    metric_reaches(port, OK, 1, wait).await;
    sim.create_pod("default", "c", "agent-scheduler", "1", "128Mi")
        .unwrap();
    eventually("c bound", Duration::from_secs(10), || {
        node_of(&sim, "c").is_some()
    })
    .await;
    assert_eq!(node_of(&sim, "c").unwrap(), first, "binpack after reload");
    assert_eq!(
        metric(port, OK).await,
        Some(1),
        "the valid config was applied once"
    );
    assert!(
        *s.running.leading.borrow(),
        "no leader election: always leading"
    );
    s.stop().await;
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
