//! Wake-up latency: how long a pending pod waits once room appears. The real scheduler
//! (`magma_kube::app::spawn`) against the API simulator: every node is filled with pods bound
//! directly (`spec.nodeName`, not through the scheduler), `waiting` more pods are created and
//! reported unschedulable, and once every one of them has had its `PodScheduled=False`
//! condition written and seen again by the scheduler, blocker pods are deleted one at a time.
//! For each deletion: the time from the delete request to the next waiting pod being bound (as
//! a watch sees it). Every deletion frees exactly one waiting pod's worth of room.

use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube_sim::{Sim, SimConfig};
use magma_kube::app::Settings;
use serde::Serialize;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

use crate::report::Latency;

#[derive(Debug, Clone)]
pub struct WakeupOptions {
    pub nodes: usize,
    /// Pods waiting for room (and deletions measured).
    pub waiting: usize,
    pub workers: usize,
    /// Longest wait for one pod after its deletion before the run fails.
    pub timeout: Duration,
}

impl Default for WakeupOptions {
    fn default() -> Self {
        WakeupOptions {
            nodes: 100,
            waiting: 200,
            workers: 2,
            timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WakeupReport {
    pub scenario: String,
    pub nodes: usize,
    pub waiting: usize,
    pub workers: usize,
    /// Delete request sent → the next waiting pod seen bound.
    pub wakeup_ms: Latency,
    /// Worker attempts per waiting pod over the run (1 failure + the bind is 2; more: retries
    /// the deletions' wake-ups caused for pods that did not get the room).
    pub attempts: u64,
    /// Pending-pod updates the engine ignored as unchanged (its own conditions coming back).
    pub unchanged_updates: u64,
}

impl WakeupReport {
    pub fn print(&self) {
        let l = &self.wakeup_ms;
        println!(
            "wake-up: {} nodes full, {} pods waiting, {} workers: room freed → bound P50 {:.2} ms, P99 {:.2} ms, max {:.2} ms ({} attempts, {} unchanged updates ignored)",
            self.nodes,
            self.waiting,
            self.workers,
            l.p50,
            l.p99,
            l.max,
            self.attempts,
            self.unchanged_updates
        );
    }
}

/// Pods per node: each takes 1 CPU of 4.
const PER_NODE: usize = 4;

pub async fn run(opts: &WakeupOptions) -> anyhow::Result<WakeupReport> {
    anyhow::ensure!(
        opts.nodes > 0 && opts.workers > 0,
        "--nodes and --workers must be positive"
    );
    anyhow::ensure!(
        opts.waiting <= opts.nodes * PER_NODE,
        "--waiting must not exceed the blocker pods ({} per node)",
        PER_NODE
    );
    let sim = Sim::start(SimConfig {
        nodes: opts.nodes,
        node_cpu: "4".into(),
        node_memory: "64Gi".into(),
        ..SimConfig::default()
    })
    .await?;
    let (cfg, client) = crate::e2e::client_from(&sim.kubeconfig_yaml(), true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let object = |name: &str, node: Option<&str>| -> anyhow::Result<Pod> {
        let mut v = kube_sim::pod_object("default", name, "agent-scheduler", "1", "1Gi");
        if let Some(n) = node {
            v["spec"]["nodeName"] = serde_json::json!(n);
        }
        Ok(serde_json::from_value(v)?)
    };
    // Fill every node.
    let nodes: Vec<String> = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let mut blockers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for k in 0..PER_NODE {
            let name = format!("blocker-{n:05}-{k}");
            pods.create(&PostParams::default(), &object(&name, Some(node))?)
                .await
                .with_context(|| format!("creating {name} on {node}"))?;
            blockers.push(name);
        }
    }

    let settings = Settings {
        workers: opts.workers,
        ..Settings::new(cfg.clone())
    };
    let sched = crate::e2e::start_in_process(settings).await?;
    let running = sched.observer().clone();

    // Bindings of waiting pods, as a watch sees them.
    let bound: Arc<std::sync::Mutex<(HashSet<String>, Vec<Instant>)>> = Arc::default();
    let changed = Arc::new(Notify::new());
    let watch_task = {
        let (bound, changed, api) = (bound.clone(), changed.clone(), pods.clone());
        tokio::spawn(async move {
            let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = s.next().await {
                let p = match ev {
                    Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => p,
                    _ => continue,
                };
                let name = p.metadata.name.clone().unwrap_or_default();
                if !name.starts_with("waiting-") || p.spec.and_then(|s| s.node_name).is_none() {
                    continue;
                }
                let mut b = bound.lock().unwrap();
                if b.0.insert(name) {
                    b.1.push(Instant::now());
                    changed.notify_one();
                }
            }
        })
    };

    for i in 0..opts.waiting {
        pods.create(
            &PostParams::default(),
            &object(&format!("waiting-{i:05}"), None)?,
        )
        .await?;
    }
    // Every waiting pod reported and its condition seen again (ignored as unchanged).
    let deadline = Instant::now() + opts.timeout.max(Duration::from_secs(60));
    loop {
        let s = running.stats.snapshot();
        let q = running.stats.queue_depths();
        if q.unschedulable + q.backoff >= opts.waiting && s.unchanged_updates >= opts.waiting as u64
        {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "waiting pods were not all reported unschedulable (unschedulable {}, unchanged updates {})",
            q.unschedulable,
            s.unchanged_updates
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let attempts_before = running.stats.snapshot().attempts;

    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for (k, blocker) in blockers.iter().take(opts.waiting).enumerate() {
        let t = Instant::now();
        // Grace period 0: the room appears at the delete, as when the kubelet has finished the
        // pod; the figure is the scheduler's, not the simulated kubelet's termination delay.
        pods.delete(blocker, &DeleteParams::default().grace_period(0))
            .await?;
        let end = t + opts.timeout;
        loop {
            let notified = changed.notified();
            {
                let b = bound.lock().unwrap();
                if b.1.len() > k {
                    h.record(b.1[k].saturating_duration_since(t).as_nanos().max(1) as u64)?;
                    break;
                }
            }
            anyhow::ensure!(
                tokio::time::timeout_at(end.into(), notified).await.is_ok(),
                "no waiting pod was bound within {:?} of deleting {blocker}",
                opts.timeout
            );
        }
    }
    let s = running.stats.snapshot();
    let _ = sched.stop().await;
    watch_task.abort();
    sim.shutdown().await;
    Ok(WakeupReport {
        scenario: "wakeup".into(),
        nodes: opts.nodes,
        waiting: opts.waiting,
        workers: opts.workers,
        wakeup_ms: Latency::from_histogram(&h),
        attempts: s.attempts - attempts_before,
        unchanged_updates: s.unchanged_updates,
    })
}
