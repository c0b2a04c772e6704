//! The scheduler process: its components, how they are wired, and the order in which they
//! start and stop. This is the library entry point of the `agent-scheduler` binary, of the
//! end-to-end tests and of the end-to-end benchmark: [`spawn`] starts a scheduler and returns
//! a [`SchedulerHandle`] (its [`Observer`] for tests and the harness, and `stop`); [`run`]
//! runs one until a shutdown future resolves.
//!
//! ## Components
//!
//! Each is a [`Component`] (`run(self, shutdown)`) under one [`Supervisor`]; each owns what
//! its row says and touches nothing else.
//!
//! | component | owns | ends |
//! |---|---|---|
//! | `watches` | the pod informer, node, namespace and storage watches ([`watch`]), the NodeShard watch | on shutdown |
//! | `intents` | the engine's intent channel: routes each intent to its kind's queue | when the engine closes it |
//! | `binder` | the bind queue and executor ([`crate::bind`]) | when the bind queue closes and its calls are done |
//! | `preemptor` | the preemption queue and executor: nominations, victims' `DisruptionTarget` and deletion ([`crate::preempt`]) | when the preemption queue closes and its calls are done |
//! | `status` | the conditions and events lanes and their writer ([`crate::status`]) | on shutdown |
//! | `nodeshard-writer`, `nodeshard-lister` | our NodeShard's status writes, the acquired nodes' pod lists ([`crate::shard`]) | on shutdown |
//! | `elector` | the Lease ([`crate::leader`]) | on shutdown, after releasing it |
//! | `leadership` | claims only while leading and synced (`Engine::set_leading`) | on shutdown |
//! | `readiness` | `/readyz` and the leader gauge follow sync and leadership | on shutdown |
//! | `config-reload` | the `--scheduler-conf` watcher ([`crate::reload`]) | on shutdown |
//! | `admin-http` | `/healthz`, `/readyz`, `/metrics` ([`crate::http`]) | on shutdown |
//!
//! **Engine → adapter.** The engine emits intents on one channel (flume: the driver thread
//! sends synchronously, `intents` receives asynchronously, so an intent wakes the runtime and
//! no thread of its own), and `intents` hands each kind to its own bounded queue: binds,
//! NodeShard status writes, node pod lists, preemptions (unbounded: each holds its preemptor
//! out of the queue, so there are never more than pending pods); status messages go to the
//! status lanes. No kind waits behind another: the engine holds at most
//! `BindConfig::queue` pods handed off or binding (`EngineOptions::max_binds_in_flight`), so
//! the bind queue cannot fill, and when binds are the bottleneck the backpressure stops the
//! engine's hand-off (`magma_bind_backpressure_total`), not the router; the engine keeps at
//! most one NodeShard status write in flight.
//!
//! ## Start-up
//!
//! 1. Connect: API discovery must succeed (as upstream).
//! 2. Start the engine, not claiming (not leading until step 7 says so).
//! 3. Start `watches`: a standby keeps warm caches too.
//! 4. Start `intents`, `binder`, `preemptor`, `status` and, when sharded, the NodeShard writer
//!    and lister.
//! 5. Start `elector` (or lead at once without leader election).
//! 6. Bind the admin HTTP ports (a port in use fails start-up) and start `admin-http`,
//!    `readiness` and `config-reload`.
//! 7. `leadership`: once every watch delivered its first list (or `--resource-sync-timeout`
//!    passed), claim while leading.
//!
//! ## Shutdown
//!
//! On `stop` (SIGTERM for the binary), or when a component fails:
//!
//! 1. Stop `leadership`, then stop claiming: no pod is handed to a worker any more.
//! 2. Stop `watches` and `readiness`: no new inputs.
//! 3. Shut the engine down: its workers finish, every in-flight result is accounted for, and
//!    its intent channel closes.
//! 4. `intents` forwards the last intents and ends, closing the kinds' queues.
//! 5. `binder` finishes the binds it holds (each bounded by the bind timeout) and ends;
//!    `preemptor` finishes the preemptions it started (each call bounded likewise).
//! 6. `elector` releases the Lease, only now, so a successor never binds while ours are in
//!    flight.
//! 7. `status`, the NodeShard writer and lister, and `config-reload` stop.
//! 8. `admin-http` stops last: probes answer until the end.

use crate::bind::{BindConfig, BindExecutor, OutcomeHook};
use crate::metrics::Metrics;
use crate::process::{Component, ComponentId, Shutdown, Supervisor, Task, until};
use crate::ratelimit::TokenBucket;
use crate::status::{StatusLanes, StatusMsg, StatusSink};
use crate::watch::{self, SyncState, WatchConfig};
use anyhow::Context;
use kube::Client;
use magma_engine::core::{BindIntent, BindResult, Input, Intent, PreemptIntent};
use magma_engine::{
    Clock, Engine, EngineHandle, EngineOptions, Nanos, Profile, ShardStatusIntent, ShardingMode,
    ShardingOptions,
};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch as tokio_watch;

use crate::process::client_for;
pub use crate::process::{connect, kube_config, run_main, shutdown_signal};

/// Monotonic system time for the engine.
#[derive(Debug)]
pub struct SystemClock(Instant);

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock(Instant::now())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos() as u64)
    }
}

/// Everything the scheduler needs to run, already validated.
#[derive(Clone)]
pub struct Settings {
    pub client_config: kube::Config,
    pub scheduler_name: String,
    pub workers: usize,
    pub pin_workers: bool,
    pub node_selector: Vec<(String, String)>,
    pub profile: Profile,
    pub bind: BindConfig,
    /// DefaultPreemption (`--preemption`, on by default) and how its calls are made.
    pub preemption: bool,
    pub preempt: crate::preempt::PreemptConfig,
    /// The events client's budget (`--event-qps`/`--event-burst`; by default the main
    /// client's, `bind.qps`/`bind.burst`).
    pub event_qps: f64,
    pub event_burst: u32,
    /// `Some` when leader election is on.
    pub leader: Option<crate::leader::LeaseConfig>,
    /// `--scheduler-conf`: watched for hot reload when set.
    pub config_path: Option<std::path::PathBuf>,
    pub healthz_addr: Option<std::net::SocketAddr>,
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `--resource-sync-timeout`: scheduling starts once every watch delivered its first list,
    /// or after this long (zero: at once), as upstream.
    pub resource_sync_timeout: Duration,
    /// `--scheduler-sharding-mode` / `--scheduler-sharding-name`; the hand-over hold is the
    /// bind timeout plus a margin (see `magma_engine::shard`).
    pub sharding: ShardingOptions,
}

impl Settings {
    /// Upstream's defaults for everything but the client: scheduler name `agent-scheduler`,
    /// one worker, the built-in profile, QPS/burst 2000/2000 (events too), no leader election,
    /// no HTTP.
    pub fn new(client_config: kube::Config) -> Settings {
        Settings {
            client_config,
            scheduler_name: "agent-scheduler".into(),
            workers: 1,
            pin_workers: false,
            node_selector: vec![],
            profile: Profile::default(),
            bind: BindConfig::default(),
            preemption: true,
            preempt: crate::preempt::PreemptConfig::default(),
            event_qps: BindConfig::default().qps,
            event_burst: BindConfig::default().burst,
            leader: None,
            config_path: None,
            healthz_addr: None,
            metrics_addr: None,
            resource_sync_timeout: Duration::from_secs(60),
            sharding: ShardingOptions {
                handover_hold: handover_hold(BindConfig::default().timeout),
                ..ShardingOptions::default()
            },
        }
    }
}

/// How long a new leader keeps its shard's inherited in-use nodes: long enough for any bind
/// its predecessor may still have in flight (the bind timeout) to finish, plus a margin.
pub fn handover_hold(bind_timeout: Duration) -> Duration {
    bind_timeout + Duration::from_secs(5)
}

/// What a run did (for tests and the benchmark).
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub binds_sent: u64,
    /// Status writes dropped, every lane (`magma_events_dropped_total`,
    /// `magma_conditions_dropped_total`).
    pub status_dropped: u64,
    /// Of those, condition writes (the conditions lane was full).
    pub conditions_dropped: u64,
    /// Condition writes replaced or cancelled before they were sent
    /// (`magma_status_writes_coalesced_total`).
    pub conditions_coalesced: u64,
}

/// What tests and the benchmark may observe of a running scheduler (cheap to clone).
#[derive(Clone)]
pub struct Observer {
    pub sync: Arc<SyncState>,
    pub leading: tokio_watch::Receiver<bool>,
    pub stats: Arc<magma_engine::stats::Stats>,
    metrics: Metrics,
    binds: tokio_watch::Receiver<u64>,
}

impl Observer {
    /// Resolves once every watch has delivered its first list.
    pub async fn synced(&self) {
        self.sync.wait().await
    }

    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Resolves once leadership is `want`.
    pub async fn leading_is(&self, want: bool) {
        let mut rx = self.leading.clone();
        let _ = rx.wait_for(|l| *l == want).await;
    }

    /// The engine's counters now.
    pub fn engine_stats(&self) -> magma_engine::stats::StatsSnapshot {
        self.stats.snapshot()
    }

    /// Bind calls completed (any outcome) so far.
    pub fn binds_done(&self) -> u64 {
        *self.binds.borrow()
    }

    /// Resolves once at least `n` bind calls have completed (any outcome).
    pub async fn binds_at_least(&self, n: u64) {
        let mut rx = self.binds.clone();
        let _ = rx.wait_for(|b| *b >= n).await;
    }

    /// The Prometheus exposition, as `/metrics` serves it.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }
}

/// A running scheduler: observe it, stop it.
pub struct SchedulerHandle {
    observer: Observer,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<RunSummary>>,
}

impl SchedulerHandle {
    pub fn observer(&self) -> &Observer {
        &self.observer
    }

    /// Shut down in order (the module doc) and report.
    pub async fn stop(mut self) -> anyhow::Result<RunSummary> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.context("the scheduler task panicked")?
    }

    /// Run until `shutdown` resolves (then stop), or until a component fails.
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<RunSummary> {
        tokio::select! {
            _ = shutdown => self.stop().await,
            r = &mut self.task => r.context("the scheduler task panicked")?,
        }
    }
}

/// Run the scheduler until `shutdown` resolves (the binary's entry point; tests and the
/// benchmark use [`spawn`] and the handle).
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<RunSummary> {
    spawn(settings).await?.run_until(shutdown).await
}

/// Start a scheduler (start-up steps 1–7 of the module doc). Returns once every component
/// runs; the caches sync in the background ([`Observer::synced`]).
pub async fn spawn(settings: Settings) -> anyhow::Result<SchedulerHandle> {
    // 1. Connect.
    let watch_client = connect(&settings.client_config).await?;
    // The main client (bindings, condition patches, nominations) and its budget.
    let bind_client = client_for(&settings.client_config).await?;
    let main_limiter = Arc::new(TokenBucket::new(settings.bind.qps, settings.bind.burst));
    let status_client = client_for(&settings.client_config).await?;

    // 2. The engine, not claiming.
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let engine = Engine::start(
        EngineOptions {
            workers: settings.workers,
            pin_workers: settings.pin_workers,
            profile: settings.profile.clone(),
            sharding: settings.sharding.clone(),
            max_binds_in_flight: Some(settings.bind.queue.max(1)),
            preemption: settings.preemption,
            ..Default::default()
        },
        clock,
    )?;
    engine.set_leading(false);
    let sharded = settings.sharding.mode != ShardingMode::None;
    let (leading_tx, leading_rx) = tokio_watch::channel(settings.leader.is_none());
    let metrics = Metrics::new();
    {
        let stats = engine.stats_handle();
        metrics.set_engine_source(move || (stats.snapshot(), stats.queue_depths()));
    }
    let sync = Arc::new(SyncState::new(sharded));
    let mut sup = Supervisor::new();

    // 3. Watches.
    let claims = crate::prebind::Claims::new();
    let watches = sup.start(Watches {
        client: watch_client.clone(),
        engine: engine.handle(),
        cfg: WatchConfig {
            scheduler_name: settings.scheduler_name.clone(),
            node_selector: settings.node_selector.clone(),
        },
        sync: sync.clone(),
        claims: claims.clone(),
        own_shard: sharded.then(|| settings.sharding.shard_name.clone()),
    });

    // 4. The intent router, the kinds' queues and their consumers.
    let (bind_tx, bind_rx) = flume::bounded(settings.bind.queue.max(1));
    let (shard_tx, shard_rx) = flume::bounded(16);
    let (list_tx, list_rx) = flume::bounded(64);
    // Preemptions: as many as the engine decides (each holds its preemptor out of the queue).
    let (preempt_tx, preempt_rx) = flume::unbounded();
    let decided = Arc::new(crate::preempt::Decided::default());
    let drops = metrics.event_drops();
    let (sink, status_lanes) = StatusSink::new(
        crate::status::CONDITIONS_CAPACITY,
        crate::status::events_capacity(settings.event_qps, settings.event_burst),
        drops,
    );
    let intents = sup.start(IntentRouter {
        intents: engine.intents().clone(),
        binds: bind_tx,
        shard_status: shard_tx,
        node_pod_lists: list_tx,
        preempts: preempt_tx,
        decided: decided.clone(),
        status: sink.clone(),
        metrics: metrics.clone(),
        deallocator: crate::apicall::Caller {
            client: bind_client.clone(),
            limiter: main_limiter.clone(),
            call_timeout: settings.bind.timeout,
        },
    });
    let status = sup.start(StatusWriter {
        budgets: crate::status::Budgets {
            main: bind_client.clone(),
            main_limiter: main_limiter.clone(),
            events: status_client.clone(),
            events_limiter: TokenBucket::new(settings.event_qps, settings.event_burst),
        },
        component: settings.scheduler_name.clone(),
        lanes: status_lanes,
        sink: sink.clone(),
        metrics: metrics.clone(),
    });
    let (binds_tx, binds_rx) = tokio_watch::channel(0u64);
    let binds_sent = Arc::new(AtomicU64::new(0));
    let (preempt_client, preempt_limiter) = (bind_client.clone(), main_limiter.clone());
    let binder = sup.start(Binder {
        executor: BindExecutor::new(
            bind_client,
            engine.handle(),
            settings.bind.clone(),
            main_limiter,
            leading_rx.clone(),
            claims,
        )
        .on_outcome(outcome_hook(
            metrics.clone(),
            sink.clone(),
            binds_sent.clone(),
            binds_tx,
            decided,
        )),
        queue: bind_rx,
    });
    let preemptor = {
        let m = metrics.clone();
        sup.start(PreemptExecutor {
            executor: crate::preempt::Preemptor {
                client: preempt_client,
                events: status_client.clone(),
                limiter: preempt_limiter,
                engine: engine.handle(),
                component: settings.scheduler_name.clone(),
                cfg: settings.preempt.clone(),
                on_failure: Arc::new(move || m.observe_preemption_failure()),
            },
            queue: preempt_rx,
        })
    };
    let mut shard_parts = Vec::new();
    if sharded {
        let (client, engine_h, m) = (status_client.clone(), engine.handle(), metrics.clone());
        shard_parts.push(
            sup.start(Task::new("nodeshard-writer", move |sd| async move {
                until(&sd, crate::shard::run_writer(client, engine_h, m, shard_rx)).await;
                Ok(())
            })),
        );
        let (client, engine_h) = (status_client, engine.handle());
        shard_parts.push(
            sup.start(Task::new("nodeshard-lister", move |sd| async move {
                until(&sd, crate::shard::run_lister(client, engine_h, list_rx)).await;
                Ok(())
            })),
        );
    }

    // 5. Leader election.
    // Without leader election, leadership is a constant `true` whose sender lives as long as
    // the scheduler (a closed channel would read as "leadership lost" to the binds).
    let (elector, constant_leader) = match settings.leader.clone() {
        Some(cfg) => {
            let elector = crate::leader::LeaderElector::new(watch_client.clone(), cfg);
            (
                Some(sup.start(crate::leader::Elector::new(elector, leading_tx))),
                None,
            )
        }
        None => (None, Some(leading_tx)),
    };

    // 6. Admin HTTP, readiness, config reload.
    let readiness = Arc::new(crate::http::Readiness::new(settings.leader.is_some()));
    let admin = {
        let encoder = {
            let m = metrics.clone();
            Arc::new(move || m.encode()) as crate::http::MetricsEncoder
        };
        sup.start(
            crate::http::Admin::bind(
                settings.healthz_addr,
                settings.metrics_addr.map(|a| (a, encoder)),
                readiness.clone(),
            )
            .await?,
        )
    };
    let readiness_task = {
        let (sync, readiness, metrics, mut rx) = (
            sync.clone(),
            readiness.clone(),
            metrics.clone(),
            leading_rx.clone(),
        );
        sup.start(Task::new("readiness", move |sd| async move {
            until(&sd, async move {
                sync.wait().await;
                readiness.set_synced();
                loop {
                    let leading = *rx.borrow_and_update();
                    // A standby watches everything: its caches are warm once synced.
                    readiness.set_leader_state(leading, true);
                    metrics.set_leader(leading);
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
            Ok(())
        }))
    };
    let reload = match &settings.config_path {
        Some(path) => Some(sup.start(config_reload(
            path.clone(),
            settings.profile.sampling,
            engine.handle(),
            metrics.clone(),
        )?)),
        None => None,
    };

    // 7. Claim while leading, once synced.
    let leadership = {
        let mut rx = leading_rx.clone();
        let set_leading = engine.leading_setter();
        let (sync, wait) = (sync.clone(), settings.resource_sync_timeout);
        sup.start(Task::new("leadership", move |sd| async move {
            until(&sd, async move {
                if !wait.is_zero() && tokio::time::timeout(wait, sync.wait()).await.is_err() {
                    tracing::warn!(
                        ?wait,
                        unsynced = ?sync.unsynced(),
                        "caches did not sync within --resource-sync-timeout; scheduling anyway"
                    );
                }
                loop {
                    let leading = *rx.borrow_and_update();
                    set_leading(leading);
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
            Ok(())
        }))
    };

    let observer = Observer {
        sync,
        leading: leading_rx,
        stats: engine.stats_handle(),
        metrics,
        binds: binds_rx,
    };
    let parts = Parts {
        leadership,
        watches,
        readiness: readiness_task,
        intents,
        binder,
        preemptor,
        elector,
        status,
        shard_parts,
        reload,
        admin,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _constant_leader = constant_leader;
        let failure = tokio::select! {
            _ = stop_rx => None,
            e = sup.failed() => Some(e),
        };
        if let Some(e) = &failure {
            tracing::error!("{e:#}; shutting down");
        }
        let summary = shut_down(sup, parts, engine, &binds_sent, &sink).await;
        match failure {
            Some(e) => Err(e),
            None => summary,
        }
    });
    Ok(SchedulerHandle {
        observer,
        stop: Some(stop_tx),
        task,
    })
}

/// Every component of a running scheduler, for [`shut_down`].
struct Parts {
    leadership: ComponentId,
    watches: ComponentId,
    readiness: ComponentId,
    intents: ComponentId,
    binder: ComponentId,
    preemptor: ComponentId,
    elector: Option<ComponentId>,
    status: ComponentId,
    shard_parts: Vec<ComponentId>,
    reload: Option<ComponentId>,
    admin: ComponentId,
}

/// Shutdown steps 1–8 of the module doc.
async fn shut_down(
    mut sup: Supervisor,
    p: Parts,
    engine: Engine,
    binds_sent: &AtomicU64,
    sink: &StatusSink,
) -> anyhow::Result<RunSummary> {
    const QUICK: Duration = Duration::from_secs(2);
    tracing::info!("shutting down: no new claims");
    // 1.
    let _ = sup.stop(p.leadership, QUICK).await;
    engine.set_leading(false);
    // 2.
    let _ = sup.stop(p.watches, QUICK).await;
    let _ = sup.stop(p.readiness, QUICK).await;
    // 3.
    let core = tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    drop(core);
    // 4. and 5.: each ends when its input closes (the binds by the bind timeout).
    let _ = sup.join(p.intents, QUICK).await;
    let _ = sup.join(p.binder, Duration::from_secs(60)).await;
    let _ = sup.join(p.preemptor, Duration::from_secs(60)).await;
    // 6.
    if let Some(e) = p.elector {
        let _ = sup.stop(e, Duration::from_secs(5)).await;
    }
    // 7.
    let _ = sup.stop(p.status, QUICK).await;
    for s in p.shard_parts {
        let _ = sup.stop(s, QUICK).await;
    }
    if let Some(r) = p.reload {
        let _ = sup.stop(r, QUICK).await;
    }
    // 8.
    let _ = sup.stop(p.admin, QUICK).await;
    Ok(RunSummary {
        binds_sent: binds_sent.load(Ordering::Relaxed),
        status_dropped: sink.dropped(),
        conditions_dropped: sink.counters().conditions.load(Ordering::Relaxed),
        conditions_coalesced: sink.counters().coalesced.load(Ordering::Relaxed),
    })
}

/// The watches (step 3): every watch of [`watch`], plus the NodeShard watch when sharded.
struct Watches {
    client: Client,
    engine: EngineHandle,
    cfg: WatchConfig,
    sync: Arc<SyncState>,
    claims: Arc<crate::prebind::Claims>,
    own_shard: Option<String>,
}

impl Component for Watches {
    fn name(&self) -> &'static str {
        "watches"
    }

    async fn run(self, shutdown: Shutdown) -> anyhow::Result<()> {
        let mut tasks = watch::spawn(
            self.client.clone(),
            self.engine.clone(),
            self.cfg,
            self.sync.clone(),
            self.claims,
        );
        if let Some(own) = self.own_shard {
            let sync = self.sync.clone();
            tasks.push(tokio::spawn(crate::shard::watch(
                self.client,
                self.engine,
                own,
                move || sync.mark_shards(),
            )));
        }
        shutdown.cancelled().await;
        for t in &tasks {
            t.abort();
        }
        Ok(())
    }
}

/// Routes the engine's intents to their kinds' queues (see "Engine → adapter"). Ends when the
/// engine closes its intent channel (shutdown step 3), not on shutdown.
struct IntentRouter {
    intents: flume::Receiver<Intent>,
    binds: flume::Sender<BindIntent>,
    shard_status: flume::Sender<ShardStatusIntent>,
    node_pod_lists: flume::Sender<Vec<String>>,
    preempts: flume::Sender<PreemptIntent>,
    decided: Arc<crate::preempt::Decided>,
    status: StatusSink,
    metrics: Metrics,
    /// Where PostFilter's claim deallocations go (`dra::deallocate`), each its own task.
    deallocator: crate::apicall::Caller,
}

impl IntentRouter {
    /// Hand `item` to `queue`; a full queue is a broken invariant (the engine bounds each
    /// kind), so it is logged, then waited for rather than lost.
    async fn forward<T>(queue: &flume::Sender<T>, item: T, what: &str) -> bool {
        match queue.try_send(item) {
            Ok(()) => true,
            Err(flume::TrySendError::Full(item)) => {
                tracing::warn!("{what} queue full; waiting");
                queue.send_async(item).await.is_ok()
            }
            Err(flume::TrySendError::Disconnected(_)) => false,
        }
    }

    async fn route(self) {
        while let Ok(intent) = self.intents.recv_async().await {
            match intent {
                Intent::Bind(b) => {
                    // One scheduling cycle: popped from the queue → claimed.
                    self.metrics
                        .observe_cycle(b.claimed.saturating_since(b.popped));
                    if let Some(age) = since_creation(b.pod.created_unix_ms) {
                        self.metrics.observe_task_latency("Assumed", age);
                    }
                    if !Self::forward(&self.binds, b, "bind").await {
                        tracing::warn!("bind executor stopped");
                    }
                }
                Intent::Status(s) => {
                    if s.reason == magma_engine::StatusReason::Unschedulable {
                        self.metrics.observe_attempt("unschedulable");
                    }
                    self.status.offer(StatusMsg::Failed(s));
                }
                Intent::ShardStatus(s) => {
                    if !Self::forward(&self.shard_status, s, "NodeShard status").await {
                        tracing::warn!("NodeShard status writer stopped");
                    }
                }
                Intent::Preempt(p) => {
                    self.decided.decided(p.preemptor.uid.clone());
                    if !Self::forward(&self.preempts, p, "preemption").await {
                        tracing::warn!("preemption executor stopped");
                    }
                }
                Intent::ListNodePods(nodes) => {
                    if !Self::forward(&self.node_pod_lists, nodes, "node pod list").await {
                        tracing::warn!("acquired-node pod lister stopped");
                    }
                }
                Intent::Deallocate(d) => {
                    let caller = self.deallocator.clone();
                    tokio::spawn(async move {
                        match crate::dra::deallocate(&caller, &d).await {
                            Ok(()) => {
                                tracing::debug!(claim = %format!("{}/{}", d.namespace, d.name), "claim deallocated")
                            }
                            Err(e) => {
                                tracing::info!(claim = %format!("{}/{}", d.namespace, d.name), error = %e, "deallocating the claim failed")
                            }
                        }
                    });
                }
                Intent::Error(e) => tracing::warn!(error = %e, "input rejected"),
            }
        }
    }
}

impl Component for IntentRouter {
    fn name(&self) -> &'static str {
        "intents"
    }

    async fn run(self, _shutdown: Shutdown) -> anyhow::Result<()> {
        self.route().await;
        Ok(())
    }
}

/// The preemption executor over its queue; ends when the queue closes and its calls are done.
struct PreemptExecutor {
    executor: crate::preempt::Preemptor,
    queue: flume::Receiver<PreemptIntent>,
}

impl Component for PreemptExecutor {
    fn name(&self) -> &'static str {
        "preemptor"
    }

    async fn run(self, _shutdown: Shutdown) -> anyhow::Result<()> {
        self.executor.run(self.queue).await;
        Ok(())
    }
}

/// The bind executor over its queue; ends when the queue closes and its calls are done.
struct Binder {
    executor: BindExecutor,
    queue: flume::Receiver<BindIntent>,
}

impl Component for Binder {
    fn name(&self) -> &'static str {
        "binder"
    }

    async fn run(self, _shutdown: Shutdown) -> anyhow::Result<()> {
        self.executor.run(self.queue).await;
        Ok(())
    }
}

/// Metrics, the `Scheduled` event, and the observer's count, after every bind call.
fn outcome_hook(
    metrics: Metrics,
    sink: StatusSink,
    sent: Arc<AtomicU64>,
    done: tokio_watch::Sender<u64>,
    decided: Arc<crate::preempt::Decided>,
) -> OutcomeHook {
    Arc::new(move |intent, result, took, throttled| {
        let n = sent.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(pod = %intent.pod.key(), node = %intent.node, ?result, ?took, "bind call");
        use crate::metrics::BindOutcomeLabel as L;
        let label = match result {
            BindResult::Bound => L::Bound,
            BindResult::AlreadyBound => L::AlreadyBound,
            BindResult::PodGone => L::PodGone,
            BindResult::Failed(_) | BindResult::PreBindFailed(_) | BindResult::Abandoned => {
                L::Failed
            }
        };
        metrics.observe_bind(label, took);
        metrics.observe_throttle("bind", throttled);
        metrics.observe_attempt(if *result == BindResult::Bound {
            "scheduled"
        } else {
            "error"
        });
        if *result == BindResult::Bound {
            if let Some(age) = since_creation(intent.pod.created_unix_ms) {
                metrics.observe_task_latency("Bound", age);
            }
            if let Some(since) = decided.bound(&intent.pod.uid) {
                metrics.observe_preemption_to_bound(since);
            }
            sink.offer(StatusMsg::Scheduled {
                namespace: intent.pod.namespace.clone(),
                name: intent.pod.name.clone(),
                uid: intent.pod.uid.clone(),
                node: intent.node.clone(),
            });
        }
        done.send_replace(n);
    })
}

/// The conditions and events writer ([`crate::status`]).
struct StatusWriter {
    budgets: crate::status::Budgets,
    component: String,
    lanes: StatusLanes,
    sink: StatusSink,
    metrics: Metrics,
}

impl Component for StatusWriter {
    fn name(&self) -> &'static str {
        "status"
    }

    async fn run(self, shutdown: Shutdown) -> anyhow::Result<()> {
        let metrics = self.metrics;
        let writer = crate::status::run_writer(
            self.budgets,
            self.component,
            self.lanes,
            self.sink,
            Arc::new(move |waited| metrics.observe_condition_write(waited)),
        );
        until(&shutdown, writer).await;
        Ok(())
    }
}

/// Config hot reload: a valid new profile reaches every worker at its next cycle.
fn config_reload(
    path: std::path::PathBuf,
    sampling: magma_engine::Sampling,
    engine: EngineHandle,
    metrics: Metrics,
) -> anyhow::Result<impl Component> {
    let watcher = crate::reload::watch(path, sampling, move |r| match r {
        Ok(p) => {
            for w in &p.warnings {
                tracing::warn!("scheduler configuration: {w}");
            }
            tracing::info!("scheduler configuration reloaded");
            metrics.observe_config_reload(true);
            engine.send(Input::Profile(Arc::new(p)));
        }
        Err(reason) => {
            metrics.observe_config_reload(false);
            tracing::error!(%reason, "new scheduler configuration rejected; keeping the current one")
        }
    })?;
    Ok(Task::new("config-reload", move |sd: Shutdown| async move {
        sd.cancelled().await;
        drop(watcher);
        Ok(())
    }))
}

/// Time since a pod's creation timestamp (upstream's task-latency metrics measure from there).
fn since_creation(created_unix_ms: Option<i64>) -> Option<Duration> {
    let created = u64::try_from(created_unix_ms?).ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    now.checked_sub(Duration::from_millis(created))
}

/// Translate validated flags into [`Settings`] (the profile is loaded separately).
pub async fn settings_from_options(o: &crate::flags::Options) -> anyhow::Result<Settings> {
    let client_config = kube_config(&o.kubeconfig, &o.master).await?;
    let leader = o.leader_elect.then(|| crate::leader::LeaseConfig {
        name: o.leader_elect_resource_name.clone(),
        namespace: o.leader_elect_resource_namespace.clone(),
        identity: crate::leader::default_identity(),
        lease_duration: o.leader_elect_lease_duration,
        renew_deadline: o.leader_elect_renew_deadline,
        retry_period: o.leader_elect_retry_period,
    });
    let bind_timeout = BindConfig::default().timeout;
    Ok(Settings {
        sharding: ShardingOptions {
            mode: o.scheduler_sharding_mode,
            shard_name: o.scheduler_sharding_name.clone(),
            handover_hold: handover_hold(bind_timeout),
        },
        client_config,
        scheduler_name: o.scheduler_name.clone(),
        workers: o.scheduler_worker_count as usize,
        pin_workers: o.pin_workers,
        node_selector: o.node_selector.clone(),
        profile: Profile::default(),
        preemption: o.preemption,
        preempt: crate::preempt::PreemptConfig {
            timeout: bind_timeout,
            ..Default::default()
        },
        bind: BindConfig {
            qps: f64::from(o.kube_api_qps),
            burst: o.kube_api_burst,
            concurrency: o.bind_concurrency,
            timeout: bind_timeout,
            ..BindConfig::default()
        },
        event_qps: f64::from(o.event_qps()),
        event_burst: o.event_burst(),
        leader,
        resource_sync_timeout: o.resource_sync_timeout,
        config_path: (!o.scheduler_conf.is_empty())
            .then(|| std::path::PathBuf::from(&o.scheduler_conf)),
        healthz_addr: if o.enable_healthz {
            Some(crate::flags::Options::http_addr(&o.healthz_address)?)
        } else {
            None
        },
        metrics_addr: if o.enable_metrics {
            Some(crate::flags::Options::http_addr(&o.listen_address)?)
        } else {
            None
        },
    })
}
