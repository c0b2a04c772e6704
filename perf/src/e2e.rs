//! End-to-end mode: the real scheduler (the `agent-scheduler` library entry point,
//! `magma_kube::app::spawn`) against the HTTP API simulator on 127.0.0.1 — or against a real
//! cluster with `--kubeconfig` — with pods created through the API at a fixed offered rate,
//! and created→bound measured from a watch. Plus the "bind blaster", which does nothing but
//! POST bindings, to show how close the scheduler gets to the API's own limit.
//!
//! Integrity at the end, from the API's point of view: every pod bound exactly once (the
//! simulator's binding record) and no node over its allocatable (from the pods' requests).
//!
//! With `instances > 1`, that many schedulers run side by side (each its own engine, watches,
//! bind client and rate limiter, as separate processes would have), each in hard or soft
//! sharding mode on its own NodeShard; the nodes are split into disjoint shards and the pods
//! go round-robin to the schedulers' names. The report gives the aggregate and each
//! instance's share.

use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use kube_sim::{Sim, SimConfig, SimHandle};
use magma_kube::app::{self, Settings};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

use crate::report::Latency;

/// What to run.
#[derive(Debug, Clone)]
pub struct E2eOptions {
    pub nodes: usize,
    pub pods: usize,
    /// Offered creation rate (pods/s); `None` = as fast as the creators go.
    pub rate: Option<f64>,
    pub workers: usize,
    /// Concurrent pod-creation requests.
    pub creators: usize,
    /// Use this cluster instead of the simulator (its nodes must exist, e.g. KWOK nodes).
    pub kubeconfig: Option<std::path::PathBuf>,
    pub namespace: String,
    pub cpu: String,
    pub memory: String,
    pub timeout: Duration,
    pub progress: bool,
    /// Schedulers side by side, each on its own NodeShard (needs `sharding` soft or hard).
    pub instances: usize,
    pub sharding: magma_engine::ShardingMode,
    /// Each scheduler's `--kube-api-qps` / `--kube-api-burst` (the bind client's limiter).
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    /// Of `pods`, this many (spread evenly through the burst) ask for more CPU than any node
    /// has: each one's created → `PodScheduled=False` time is measured, and the `Scheduled`
    /// events' tail after the last bind (issue 14, point 6).
    pub unschedulable: usize,
}

impl Default for E2eOptions {
    fn default() -> Self {
        E2eOptions {
            nodes: 5000,
            pods: 20_000,
            rate: None,
            workers: 2,
            creators: 64,
            kubeconfig: None,
            namespace: "default".into(),
            cpu: "100m".into(),
            memory: "128Mi".into(),
            timeout: Duration::from_secs(300),
            progress: true,
            instances: 1,
            sharding: magma_engine::ShardingMode::None,
            kube_api_qps: 2000.0,
            kube_api_burst: 2000,
            unschedulable: 0,
        }
    }
}

impl E2eOptions {
    /// The option combinations that make sense.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.workers > 0, "--workers must be greater than 0");
        anyhow::ensure!(self.instances >= 1, "--instances must be at least 1");
        anyhow::ensure!(
            self.unschedulable <= self.pods / 2,
            "--unschedulable must be at most half of --pods"
        );
        anyhow::ensure!(
            self.instances == 1 || self.sharding != magma_engine::ShardingMode::None,
            "--instances {} needs --sharding soft or hard: unsharded schedulers would share nodes",
            self.instances
        );
        anyhow::ensure!(
            self.kube_api_qps > 0.0 && self.kube_api_burst > 0,
            "--kube-api-qps and --kube-api-burst must be positive"
        );
        Ok(())
    }

    /// The scheduler name (and NodeShard name) of instance `i`.
    fn scheduler(&self, i: usize) -> String {
        if self.instances == 1 {
            "agent-scheduler".into()
        } else {
            format!("agent-scheduler-{i}")
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct E2eReport {
    pub scenario: String,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub instances: usize,
    pub sharding: String,
    /// Pods bound by each instance.
    pub bound_per_instance: Vec<usize>,
    pub offered_rate: Option<f64>,
    pub created: usize,
    pub bound: usize,
    /// Bound pods ÷ (last bind seen − first create sent).
    pub throughput_pods_per_s: f64,
    /// Created (create call sent) → bound (seen on the watch).
    pub latency_ms: Latency,
    pub duplicate_binds: u64,
    pub overcommitted_nodes: u64,
    pub lost_pods: u64,
    /// Hard sharding: pods bound outside their scheduler's NodeShard.
    pub pods_outside_shard: u64,
    /// API writes per scheduled pod on the scheduler's hot path (bindings only), simulator only.
    pub binding_writes_per_pod: Option<f64>,
    /// `--unschedulable`: pods that fit nowhere, and their created → condition written.
    pub unschedulable: usize,
    pub condition_ms: Option<Latency>,
    /// `Scheduled` events written, and the last one's time after the last bind.
    pub scheduled_events: u64,
    pub events_tail_s: Option<f64>,
    /// Status writes the scheduler shed (its `magma_events_dropped_total`).
    pub events_dropped: u64,
}

impl E2eReport {
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.duplicate_binds > 0 {
            v.push(format!("{} duplicate bind(s)", self.duplicate_binds));
        }
        if self.overcommitted_nodes > 0 {
            v.push(format!(
                "{} node(s) over allocatable",
                self.overcommitted_nodes
            ));
        }
        if self.lost_pods > 0 {
            v.push(format!("{} pod(s) not bound", self.lost_pods));
        }
        if self.pods_outside_shard > 0 {
            v.push(format!(
                "{} pod(s) bound outside their scheduler's NodeShard",
                self.pods_outside_shard
            ));
        }
        v
    }

    pub fn print(&self) {
        let l = &self.latency_ms;
        println!(
            "e2e         nodes={:<6} pods={:<7} workers={}  throughput {:>8.0} pods/s (created→bound)",
            self.nodes, self.pods, self.workers, self.throughput_pods_per_s
        );
        if self.instances > 1 {
            println!(
                "  {} schedulers ({} sharding, disjoint shards); bound per instance: {:?}",
                self.instances, self.sharding, self.bound_per_instance
            );
        }
        println!(
            "  created→bound ms    p50 {:.2}  p90 {:.2}  p99 {:.2}  p999 {:.2}  max {:.2}",
            l.p50, l.p90, l.p99, l.p999, l.max
        );
        if let Some(w) = self.binding_writes_per_pod {
            println!("  binding writes per scheduled pod: {w:.3}");
        }
        if let Some(c) = &self.condition_ms {
            println!(
                "  {} unschedulable: created→PodScheduled=False ms p50 {:.1}  p99 {:.1}  max {:.1}; Scheduled events {} written, {} shed, last {:.1} s after the last bind",
                self.unschedulable,
                c.p50,
                c.p99,
                c.max,
                self.scheduled_events,
                self.events_dropped,
                self.events_tail_s.unwrap_or(f64::NAN)
            );
        }
        let v = self.violations();
        if v.is_empty() {
            println!("  integrity: OK (every pod bound exactly once, no node over allocatable)");
        } else {
            println!("  integrity: VIOLATED: {}", v.join("; "));
        }
    }
}

/// A scheduler in this process (`app::spawn`), started and synced.
pub(crate) async fn start_in_process(settings: Settings) -> anyhow::Result<app::SchedulerHandle> {
    let handle = app::spawn(settings)
        .await
        .context("scheduler failed to start")?;
    handle.observer().synced().await;
    Ok(handle)
}

pub(crate) async fn client_from(
    kubeconfig_yaml: &str,
    retry: bool,
) -> anyhow::Result<(kube::Config, kube::Client)> {
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml)?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    cfg.default_retry = retry;
    let client = kube::Client::try_from(cfg.clone())?;
    Ok((cfg, client))
}

fn pod(
    ns: &str,
    name: &str,
    scheduler: &str,
    run: &str,
    cpu: &str,
    mem: &str,
) -> anyhow::Result<Pod> {
    let mut v = kube_sim::pod_object(ns, name, scheduler, cpu, mem);
    v["metadata"]["labels"] = serde_json::json!({"magma-e2e": run});
    Ok(serde_json::from_value(v)?)
}

/// Start the simulator unless a kubeconfig was given.
async fn cluster(opts: &E2eOptions) -> anyhow::Result<(Option<SimHandle>, String)> {
    match &opts.kubeconfig {
        Some(p) => Ok((
            None,
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )),
        None => {
            let sim = Sim::start(SimConfig {
                nodes: opts.nodes,
                history: (opts.pods * 8).max(100_000),
                install_nodeshard_crd: opts.sharding != magma_engine::ShardingMode::None,
                ..SimConfig::default()
            })
            .await?;
            let yaml = sim.kubeconfig_yaml();
            Ok((Some(sim), yaml))
        }
    }
}

/// Split the nodes into one disjoint NodeShard per instance (contiguous ranges of the sorted
/// names) and create or replace them.
async fn create_shards(
    client: &kube::Client,
    opts: &E2eOptions,
    nodes: &[Node],
) -> anyhow::Result<Vec<Vec<String>>> {
    use magma_kube::nodeshard::NodeShard;
    let mut names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    let per = names.len().div_ceil(opts.instances).max(1);
    let api: Api<NodeShard> = Api::all(client.clone());
    let mut shards = Vec::new();
    for i in 0..opts.instances {
        let part: Vec<String> = names.iter().skip(i * per).take(per).cloned().collect();
        let name = opts.scheduler(i);
        let _ = api.delete(&name, &Default::default()).await;
        api.create(&PostParams::default(), &NodeShard::new(&name, &part))
            .await
            .with_context(|| format!("creating NodeShard {name}"))?;
        shards.push(part);
    }
    Ok(shards)
}

pub async fn run(opts: &E2eOptions) -> anyhow::Result<E2eReport> {
    opts.validate()?;
    let (sim, kubeconfig) = cluster(opts).await?;
    let (cfg, client) = client_from(&kubeconfig, true).await?;
    let run_id = format!("{:x}", rand_id());
    let node_list = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let node_count = node_list.len();
    let shards = if opts.sharding != magma_engine::ShardingMode::None {
        Some(create_shards(&client, opts, &node_list).await?)
    } else {
        None
    };

    // The schedulers, in process.
    let mut scheds = Vec::new();
    for i in 0..opts.instances {
        let base = Settings::new(cfg.clone());
        let settings = Settings {
            workers: opts.workers,
            scheduler_name: opts.scheduler(i),
            bind: magma_kube::bind::BindConfig {
                qps: opts.kube_api_qps,
                burst: opts.kube_api_burst,
                ..base.bind.clone()
            },
            sharding: magma_engine::ShardingOptions {
                mode: opts.sharding,
                shard_name: opts.scheduler(i),
                ..base.sharding.clone()
            },
            ..base
        };
        scheds.push(start_in_process(settings).await?);
    }
    // Sharded: wait until every scheduler uses its whole shard (write before use).
    if let Some(shards) = &shards {
        let deadline = Instant::now() + Duration::from_secs(60);
        for (sched, part) in scheds.iter().zip(shards) {
            while sched.observer().engine_stats().shard.view < part.len() {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "a scheduler did not take up its NodeShard within 60 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    // The watch that sees bindings.
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, (Instant, String)>>> = Arc::default();
    let conditions: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &opts.namespace);
    let (w_created, w_bound, w_cond) = (created.clone(), bound.clone(), conditions.clone());
    let wc = watcher::Config::default().labels(&format!("magma-e2e={run_id}"));
    let watch_api = pods_api.clone();
    let watch_task = tokio::spawn(async move {
        let mut s = watcher::watcher(watch_api, wc).boxed();
        while let Some(ev) = s.next().await {
            let p = match ev {
                Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => p,
                _ => continue,
            };
            let unschedulable = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "PodScheduled"
                            && c.status == "False"
                            && c.reason.as_deref() == Some("Unschedulable")
                    })
                });
            if unschedulable && let Some(name) = p.metadata.name.clone() {
                w_cond.lock().await.entry(name).or_insert_with(Instant::now);
            }
            let (Some(name), Some(node)) =
                (p.metadata.name.clone(), p.spec.and_then(|s| s.node_name))
            else {
                continue;
            };
            let now = Instant::now();
            let mut b = w_bound.lock().await;
            b.entry(name).or_insert((now, node));
            let _ = &w_created;
        }
    });

    // `Scheduled` events as they are written (only with --unschedulable).
    let scheduled_events: Arc<Mutex<(u64, Option<Instant>)>> = Arc::default();
    let events_task = (opts.unschedulable > 0).then(|| {
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), &opts.namespace);
        let seen = scheduled_events.clone();
        tokio::spawn(async move {
            let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = s.next().await {
                if let Ok(Event::Apply(e)) = ev
                    && e.reason.as_deref() == Some("Scheduled")
                {
                    let mut g = seen.lock().await;
                    g.0 += 1;
                    g.1 = Some(Instant::now());
                }
            }
        })
    });
    let every = (opts.unschedulable > 0).then(|| (opts.pods / opts.unschedulable).max(1));
    let is_unschedulable =
        |i: usize| every.is_some_and(|e| i % e == e / 2 && i / e < opts.unschedulable);
    let to_bind = opts.pods - (0..opts.pods).filter(|&i| is_unschedulable(i)).count();

    // Create pods at the offered rate.
    let start = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(opts.creators.max(1)));
    let bar = crate::progress::bar(opts.pods as u64, opts.progress);
    for i in 0..opts.pods {
        if let Some(rate) = opts.rate {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let permit = sem.clone().acquire_owned().await?;
        let name = format!("e2e-{run_id}-{i:07}");
        let scheduler = opts.scheduler(i % opts.instances);
        let cpu = if is_unschedulable(i) {
            "100000"
        } else {
            opts.cpu.as_str()
        };
        let p = pod(
            &opts.namespace,
            &name,
            &scheduler,
            &run_id,
            cpu,
            &opts.memory,
        )?;
        let api = pods_api.clone();
        let created = created.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            created.lock().await.insert(name, t);
            if let Err(e) = api.create(&PostParams::default(), &p).await {
                eprintln!("create failed: {e}");
            }
            drop(permit);
        });
        if i % 256 == 0 {
            bar.set_position(bound.lock().await.len() as u64);
        }
    }
    // Wait for every pod to be bound (or the timeout).
    let deadline = Instant::now() + opts.timeout;
    loop {
        let n = bound.lock().await.len();
        bar.set_position(n as u64);
        let conds = conditions.lock().await.len();
        if (n >= to_bind && conds >= opts.pods - to_bind) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    let mut bound_per_instance = Vec::new();
    // The Scheduled events' tail: until none has come for 3 s (or a minute).
    if events_task.is_some() {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let last = scheduled_events.lock().await.1;
            let quiet = last.is_some_and(|t| t.elapsed() >= Duration::from_secs(3));
            if quiet || Instant::now() > end {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut events_dropped = 0;
    let stopping = scheds.into_iter().map(|h| async move {
        let running = h.observer().clone();
        (h.stop().await, running)
    });
    for (summary, running) in futures::future::join_all(stopping).await {
        if let Ok(summary) = summary {
            events_dropped += summary.status_dropped;
        }
        bound_per_instance.push(running.engine_stats().binds_confirmed as usize);
    }
    watch_task.abort();
    if let Some(t) = &events_task {
        t.abort();
    }

    // Figures.
    let created = created.lock().await;
    let bound = bound.lock().await;
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut last = start;
    for (name, (t, _)) in bound.iter() {
        if let Some(c) = created.get(name) {
            h.record(t.saturating_duration_since(*c).as_nanos().max(1) as u64)?;
        }
        last = last.max(*t);
    }
    let elapsed = last
        .saturating_duration_since(start)
        .max(Duration::from_micros(1));
    let outside = match (&shards, opts.sharding) {
        (Some(shards), magma_engine::ShardingMode::Hard) => {
            let sets: Vec<std::collections::HashSet<&str>> = shards
                .iter()
                .map(|p| p.iter().map(String::as_str).collect())
                .collect();
            bound
                .iter()
                .filter(|(name, (_, node))| {
                    let i: usize = name
                        .rsplit('-')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    !sets[i % opts.instances].contains(node.as_str())
                })
                .count() as u64
        }
        _ => 0,
    };
    let mut report = E2eReport {
        pods_outside_shard: outside,
        scenario: "e2e".into(),
        nodes: node_count,
        pods: opts.pods,
        workers: opts.workers,
        instances: opts.instances,
        sharding: opts.sharding.as_str().into(),
        bound_per_instance,
        offered_rate: opts.rate,
        created: created.len(),
        bound: bound.len(),
        throughput_pods_per_s: bound.len() as f64 / elapsed.as_secs_f64(),
        latency_ms: Latency::from_histogram(&h),
        lost_pods: (to_bind - bound.len().min(to_bind)) as u64,
        unschedulable: opts.pods - to_bind,
        events_dropped,
        ..E2eReport::default()
    };
    if opts.unschedulable > 0 {
        let conditions = conditions.lock().await;
        let mut c = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
        for (name, t) in conditions.iter() {
            if let Some(at) = created.get(name) {
                c.record(t.saturating_duration_since(*at).as_nanos().max(1) as u64)?;
            }
        }
        report.condition_ms = Some(Latency::from_histogram(&c));
        let (n, last_event) = *scheduled_events.lock().await;
        report.scheduled_events = n;
        report.events_tail_s = last_event.map(|t| t.saturating_duration_since(last).as_secs_f64());
        if conditions.len() < opts.pods - to_bind {
            report.lost_pods += (opts.pods - to_bind - conditions.len()) as u64;
        }
    }
    // Integrity from the API: requests per node against allocatable.
    let all = pods_api
        .list(&ListParams::default().labels(&format!("magma-e2e={run_id}")))
        .await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    report.overcommitted_nodes = overcommitted(&nodes.items, &all.items) as u64;
    if let Some(sim) = sim {
        let b = sim.bindings();
        let mut seen = std::collections::HashSet::new();
        report.duplicate_binds = b
            .iter()
            .filter(|r| !seen.insert((r.namespace.clone(), r.name.clone())))
            .count() as u64;
        let writes = sim
            .writes()
            .iter()
            .filter(|w| w.resource.contains("binding"))
            .count();
        report.binding_writes_per_pod = Some(writes as f64 / bound.len().max(1) as f64);
        sim.shutdown().await;
    }
    Ok(report)
}

fn rand_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ (std::process::id() as u64) << 32
}

/// Nodes whose bound pods request more CPU, memory or pods than the node allows (counting only
/// the pods of this run, on top of nothing else: the simulator's nodes start empty).
fn overcommitted(nodes: &[Node], pods: &[Pod]) -> usize {
    use magma_engine::model::parse_scaled;
    let mut used: HashMap<&str, (i64, i64, i64)> = HashMap::new();
    for p in pods {
        let Some(spec) = &p.spec else { continue };
        let Some(node) = spec.node_name.as_deref() else {
            continue;
        };
        let e = used.entry(node).or_default();
        for c in &spec.containers {
            if let Some(r) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
                if let Some(q) = r.get("cpu") {
                    e.0 += parse_scaled("cpu", &q.0, 1000).unwrap_or(0);
                }
                if let Some(q) = r.get("memory") {
                    e.1 += parse_scaled("memory", &q.0, 1).unwrap_or(0);
                }
            }
        }
        e.2 += 1;
    }
    nodes
        .iter()
        .filter(|n| {
            let name = n.metadata.name.as_deref().unwrap_or("");
            let Some((cpu, mem, count)) = used.get(name) else {
                return false;
            };
            let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let get = |k: &str, scale| {
                alloc
                    .and_then(|a| a.get(k))
                    .map_or(0, |q| parse_scaled(k, &q.0, scale).unwrap_or(0))
            };
            *cpu > get("cpu", 1000) || *mem > get("memory", 1) || *count > get("pods", 1)
        })
        .count()
}

/// POST a pod's binding to `node`; whether it was accepted.
pub(crate) async fn post_binding(api: &Api<Pod>, name: &str, node: String) -> bool {
    let b = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node),
            ..Default::default()
        },
    };
    api.create_subresource::<Binding, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &b,
    )
    .await
    .is_ok()
}

/// The bind blaster: create `pods` pods for a scheduler nobody runs, then POST their bindings
/// as fast as `concurrency` allows. Returns binds/s — the API's own ceiling for the scheduler.
pub async fn blast(nodes: usize, pods: usize, concurrency: usize) -> anyhow::Result<f64> {
    let sim = Sim::start(SimConfig {
        nodes,
        history: (pods * 4).max(100_000),
        ..SimConfig::default()
    })
    .await?;
    for i in 0..pods {
        sim.create_pod("default", &format!("blast-{i:07}"), "nobody", "10m", "16Mi")
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let (_, client) = client_from(&sim.kubeconfig_yaml(), true).await?;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let sem = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(pods);
    for i in 0..pods {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let node = kube_sim::node_name(i % nodes.max(1));
        tasks.push(tokio::spawn(async move {
            let ok = post_binding(&api, &format!("blast-{i:07}"), node).await;
            drop(permit);
            ok
        }));
    }
    let mut ok = 0usize;
    for t in tasks {
        ok += usize::from(t.await.unwrap_or(false));
    }
    let rate = ok as f64 / start.elapsed().as_secs_f64();
    sim.shutdown().await;
    Ok(rate)
}
