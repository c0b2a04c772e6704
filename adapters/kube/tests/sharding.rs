//! Sharding through the adapter: the real scheduler (`app::spawn`, in process) in soft and hard
//! mode against the API simulator with Volcano's NodeShard CRD. The scheduler watches the
//! NodeShards, schedules inside its shard, writes its own shard's status through `/status`
//! (with `lastUpdateTime`), re-reads and retries on `409`, and says why when its NodeShard is
//! missing. Upstream's sharding e2e cases are here at the adapter level; the process-level
//! versions with the real binaries are in `sharding_e2e.rs`.

use kube::api::{Api, PostParams};
use kube_sim::{ErrorRule, Faults, Sim, SimConfig, SimHandle};
use magma_engine::{ShardingMode, ShardingOptions};
use magma_kube::nodeshard::NodeShard;
use serde_json::{Value, json};
use std::time::Duration;

use crate::common;
use common::*;

const WAIT: Duration = Duration::from_secs(15);

fn cfg(nodes: usize) -> SimConfig {
    SimConfig {
        install_nodeshard_crd: true,
        ..sim_cfg(nodes)
    }
}

fn node(i: usize) -> String {
    kube_sim::node_name(i)
}

fn create_shard(sim: &SimHandle, name: &str, desired: &[String]) {
    sim.create(
        "shard.volcano.sh/v1alpha1",
        "nodeshards",
        json!({"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
               "metadata": {"name": name}, "spec": {"nodesDesired": desired}}),
    )
    .expect("NodeShard created");
}

fn shard(sim: &SimHandle, name: &str) -> Option<Value> {
    sim.get("shard.volcano.sh/v1alpha1", "nodeshards", "", name)
        .ok()
}

fn list(v: &Value, field: &str) -> Vec<String> {
    let mut out: Vec<String> = v["status"][field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn in_use(sim: &SimHandle, name: &str) -> Vec<String> {
    shard(sim, name).map_or_else(Vec::new, |v| list(&v, "nodesInUse"))
}

/// Replace a NodeShard's `spec.nodesDesired` as the shard controller does (conditional update,
/// re-read on 409: the scheduler may be writing the status meanwhile).
async fn set_desired(api: &Api<NodeShard>, name: &str, nodes: &[String]) {
    for _ in 0..20 {
        let mut ns = api.get(name).await.expect("NodeShard exists");
        ns.spec.nodes_desired = nodes.to_vec();
        match api.replace(name, &PostParams::default(), &ns).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("updating {name}: {e}"),
        }
    }
    panic!("updating {name}: conflicts did not stop");
}

async fn start(sim: &SimHandle, mode: ShardingMode) -> Sched {
    Sched::start(sim, |s| {
        s.sharding = ShardingOptions {
            mode,
            shard_name: "agent-scheduler".into(),
            handover_hold: Duration::ZERO,
        }
    })
    .await
}

/// Waits until our NodeShard's status lists exactly `nodes` and the scheduler schedules with
/// them. It uses a node only once its own status, as its NodeShard watch shows it, lists it
/// (write before use), so the API server can hold the status a moment before the scheduler's
/// view does; a pod created in that moment would see no shard node yet.
async fn claimed(sim: &SimHandle, s: &Sched, nodes: &[String]) {
    eventually("claimed and in the scheduling view", WAIT, || {
        in_use(sim, "agent-scheduler") == nodes
            && s.running.stats.snapshot().shard.view == nodes.len()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_mode_schedules_only_on_shard_nodes_and_publishes_status() {
    let sim = Sim::start(cfg(4)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(0), node(1)]);
    create_shard(&sim, "volcano", &[node(2), node(3)]);
    let s = start(&sim, ShardingMode::Hard).await;
    claimed(&sim, &s, &[node(0), node(1)]).await;
    let st = shard(&sim, "agent-scheduler").unwrap();
    assert!(
        st["status"]["lastUpdateTime"].as_str().is_some(),
        "lastUpdateTime set: {st}"
    );
    assert!(list(&st, "nodesToAdd").is_empty() && list(&st, "nodesToRemove").is_empty());
    assert!(
        in_use(&sim, "volcano").is_empty(),
        "another scheduler's status is not ours to write"
    );
    for i in 0..12 {
        sim.create_pod("default", &format!("p{i}"), "agent-scheduler", "1", "1Gi")
            .unwrap();
    }
    eventually("all bound", WAIT, || {
        (0..12).all(|i| node_of(&sim, &format!("p{i}")).is_some())
    })
    .await;
    for i in 0..12 {
        let n = node_of(&sim, &format!("p{i}")).unwrap();
        assert!(
            n == node(0) || n == node(1),
            "p{i} on {n}, outside the shard"
        );
    }
    // Only the status subresource of our own NodeShard is written.
    for w in sim.writes() {
        if w.resource.starts_with("nodeshards") {
            assert_eq!(
                (w.resource.as_str(), w.name.as_str()),
                ("nodeshards/status", "agent-scheduler")
            );
        }
    }
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_mode_full_shard_leaves_the_pod_unschedulable_with_the_reason() {
    let sim = Sim::start(cfg(3)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(0)]);
    let s = start(&sim, ShardingMode::Hard).await;
    claimed(&sim, &s, &[node(0)]).await;
    sim.create_pod("default", "fill", "agent-scheduler", "30", "1Gi")
        .unwrap();
    eventually("fill bound", WAIT, || node_of(&sim, "fill").is_some()).await;
    sim.create_pod("default", "more", "agent-scheduler", "8", "1Gi")
        .unwrap();
    eventually("condition", WAIT, || condition(&sim, "more").is_some()).await;
    let (status, reason, message) = condition(&sim, "more").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable")
    );
    assert_eq!(
        message,
        "0/3 nodes are unavailable: 1 Insufficient cpu, 2 node isn't in scheduler node shard. \
         preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    assert!(node_of(&sim, "more").is_none());
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_mode_prefers_the_shard_and_falls_back_when_it_is_full() {
    let sim = Sim::start(cfg(3)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(1)]);
    let s = start(&sim, ShardingMode::Soft).await;
    claimed(&sim, &s, &[node(1)]).await;
    sim.create_pod("default", "first", "agent-scheduler", "20", "1Gi")
        .unwrap();
    eventually("first bound", WAIT, || node_of(&sim, "first").is_some()).await;
    assert_eq!(node_of(&sim, "first").unwrap(), node(1), "shard preferred");
    sim.create_pod("default", "second", "agent-scheduler", "20", "1Gi")
        .unwrap();
    eventually("second bound", WAIT, || node_of(&sim, "second").is_some()).await;
    assert_ne!(
        node_of(&sim, "second").unwrap(),
        node(1),
        "fell back outside"
    );
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_mode_without_its_nodeshard_says_why_then_recovers() {
    let sim = Sim::start(cfg(2)).await.unwrap();
    let s = start(&sim, ShardingMode::Hard).await;
    sim.create_pod("default", "waiting", "agent-scheduler", "1", "1Gi")
        .unwrap();
    eventually("condition", WAIT, || condition(&sim, "waiting").is_some()).await;
    let message = condition(&sim, "waiting").unwrap().2;
    assert!(
        message.starts_with("0/2 nodes are unavailable: 2 node isn't in scheduler node shard.")
            && message.contains("NodeShard \"agent-scheduler\" does not exist"),
        "{message}"
    );
    assert!(s.running.stats.snapshot().shard.missing);
    create_shard(&sim, "agent-scheduler", &[node(1)]);
    eventually("scheduled once the shard exists", WAIT, || {
        node_of(&sim, "waiting").is_some()
    })
    .await;
    assert_eq!(node_of(&sim, "waiting").unwrap(), node(1));
    assert!(!s.running.stats.snapshot().shard.missing);
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_conflicts_are_re_read_and_retried() {
    let sim = Sim::start(cfg(2)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(0), node(1)]);
    sim.faults().set(Faults {
        errors: vec![ErrorRule {
            verb: "update".into(),
            resource: Some("nodeshards/status".into()),
            rate: 1.0,
            code: 409,
            retry_after_secs: 0,
        }],
        ..Faults::default()
    });
    let s = start(&sim, ShardingMode::Hard).await;
    eventually("several conflicting attempts", WAIT, || {
        sim.writes()
            .iter()
            .filter(|w| w.resource == "nodeshards/status" && w.code == 409)
            .count()
            >= 2 * magma_kube::shard::CONFLICT_ATTEMPTS as usize
    })
    .await;
    assert!(in_use(&sim, "agent-scheduler").is_empty());
    sim.faults().set(Faults::default());
    eventually("written once the conflicts stop", WAIT, || {
        in_use(&sim, "agent-scheduler") == [node(0), node(1)]
    })
    .await;
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_handed_over_only_after_its_holder_released_it() {
    // Two schedulers in hard mode on shards a and b; the controller's move of node 1 from a to
    // b is played by the test.
    let sim = Sim::start(cfg(3)).await.unwrap();
    create_shard(&sim, "a", &[node(0), node(1)]);
    create_shard(&sim, "b", &[node(2)]);
    let start_named = |name: &'static str| {
        Sched::start(&sim, move |s| {
            s.scheduler_name = name.into();
            s.sharding = ShardingOptions {
                mode: ShardingMode::Hard,
                shard_name: name.into(),
                handover_hold: Duration::ZERO,
            };
        })
    };
    let a = start_named("a").await;
    let b = start_named("b").await;
    eventually("both claimed", WAIT, || {
        in_use(&sim, "a") == [node(0), node(1)] && in_use(&sim, "b") == [node(2)]
    })
    .await;
    // Move node 1 to b: b must wait for a's release, then take it.
    let client = kube::Client::try_from(client_config(&sim).await).unwrap();
    let api: Api<NodeShard> = Api::all(client);
    set_desired(&api, "b", &[node(1), node(2)]).await;
    set_desired(&api, "a", &[node(0)]).await;
    eventually("b uses node 1 after a released it", WAIT, || {
        in_use(&sim, "a") == [node(0)] && in_use(&sim, "b") == [node(1), node(2)]
    })
    .await;
    // From the write history: b never claimed node 1 while a still listed it.
    let shard_b = shard(&sim, "b").unwrap();
    assert!(list(&shard_b, "nodesToAdd").is_empty());
    sim.create_pod("default", "on-b", "b", "30", "1Gi").unwrap();
    sim.create_pod("default", "on-b2", "b", "30", "1Gi")
        .unwrap();
    eventually("b schedules on both its nodes", WAIT, || {
        node_of(&sim, "on-b").is_some() && node_of(&sim, "on-b2").is_some()
    })
    .await;
    let mut placed = vec![
        node_of(&sim, "on-b").unwrap(),
        node_of(&sim, "on-b2").unwrap(),
    ];
    placed.sort();
    assert_eq!(placed, [node(1), node(2)]);
    a.stop().await;
    b.stop().await;
    sim.shutdown().await;
}

/// Binds saturated (one bind a second, an eight-pod bind queue, 40 pods waiting) do not delay
/// our NodeShard's status: the engine holds pods back (`bind_backpressure`) instead of the
/// intent router blocking on a full bind queue with the status write behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_bind_queue_does_not_delay_a_nodeshard_status_write() {
    const PODS: usize = 40;
    let sim = Sim::start(cfg(4)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(0), node(1)]);
    let s = Sched::start(&sim, |s| {
        s.sharding = ShardingOptions {
            mode: ShardingMode::Hard,
            shard_name: "agent-scheduler".into(),
            handover_hold: Duration::ZERO,
        };
        s.bind.qps = 1.0;
        s.bind.burst = 1;
        s.bind.concurrency = 1;
        s.bind.queue = 8;
    })
    .await;
    claimed(&sim, &s, &[node(0), node(1)]).await;
    for i in 0..PODS {
        sim.create_pod(
            "default",
            &format!("p{i}"),
            "agent-scheduler",
            "10m",
            "16Mi",
        )
        .unwrap();
    }
    // The queue is full: at least its eight binds claimed, one bound at most.
    eventually("the bind queue is full", WAIT, || {
        s.running.engine_stats().bind_intents >= 8
    })
    .await;
    let client = kube::Client::try_from(client_config(&sim).await).unwrap();
    set_desired(
        &Api::<NodeShard>::all(client),
        "agent-scheduler",
        &[node(0), node(1), node(2)],
    )
    .await;
    // At one bind a second the pods take 40 s; the status write must not wait for them.
    eventually(
        "node 2 claimed while binds are still queued",
        Duration::from_secs(8),
        || in_use(&sim, "agent-scheduler") == [node(0), node(1), node(2)],
    )
    .await;
    let bound = (0..PODS)
        .filter(|i| node_of(&sim, &format!("p{i}")).is_some())
        .count();
    assert!(
        bound < PODS / 2,
        "the status write waited for {bound} binds"
    );
    assert!(
        s.running.engine_stats().bind_backpressure > 0,
        "the engine held pods back"
    );
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_none_neither_watches_nor_writes_nodeshards() {
    let sim = Sim::start(cfg(3)).await.unwrap();
    create_shard(&sim, "agent-scheduler", &[node(0)]);
    let s = start(&sim, ShardingMode::None).await;
    for i in 0..3 {
        sim.create_pod("default", &format!("p{i}"), "agent-scheduler", "20", "1Gi")
            .unwrap();
    }
    eventually("bound everywhere", WAIT, || {
        (0..3).all(|i| node_of(&sim, &format!("p{i}")).is_some())
    })
    .await;
    assert!(in_use(&sim, "agent-scheduler").is_empty());
    assert!(
        sim.writes()
            .iter()
            .all(|w| !w.resource.starts_with("nodeshards"))
    );
    s.stop().await;
    sim.shutdown().await;
}
