//! Wiring: builds the engine and every adapter task from [`Settings`], runs until the shutdown
//! future resolves, then shuts down gracefully. This is the library entry point of the
//! `agent-scheduler` binary, of the end-to-end tests and of the end-to-end benchmark.
//!
//! Start-up: API discovery must succeed (as upstream) → configuration loaded → engine started
//! (not claiming while not leading) → watches started (standby replicas keep warm caches) →
//! bind executor, status writer, intent router → leader election → config watcher → HTTP.
//!
//! Shutdown (SIGTERM): stop claiming at once, let the engine account for every in-flight
//! result, finish the binds already sent, release the lease, stop.

use crate::bind::{BindConfig, BindExecutor, OutcomeHook};
use crate::ratelimit::TokenBucket;
use crate::status::{StatusMsg, StatusSink};
use crate::watch::{self, SyncState, WatchConfig};
use anyhow::Context;
use kube::Client;
use magma_engine::core::{BindResult, Input, Intent};
use magma_engine::{Clock, Engine, EngineOptions, Nanos, Profile, ShardingMode, ShardingOptions};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch as tokio_watch};

/// The binaries' common `main`: `-v` logging to stderr, a two-thread runtime, `run`, and the
/// error report and exit code (1 on error; flag errors are the caller's, exit 2).
pub fn run_main<F>(name: &str, verbosity: u8, run: F) -> std::process::ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    init_logging(name, verbosity);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("{name}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// klog's `-v` as a `tracing` filter (0–1 info, 2–4 debug, 5+ trace); `RUST_LOG` overrides.
fn init_logging(name: &str, v: u8) {
    let level = match v {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let bin = name.replace('-', "_");
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "warn,magma_kube={level},magma_engine={level},{bin}={level}"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
    }
}

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
    /// one worker, the built-in profile, QPS/burst 2000/2000, no leader election, no HTTP.
    pub fn new(client_config: kube::Config) -> Settings {
        Settings {
            client_config,
            scheduler_name: "agent-scheduler".into(),
            workers: 1,
            pin_workers: false,
            node_selector: vec![],
            profile: Profile::default(),
            bind: BindConfig::default(),
            event_qps: 50.0,
            event_burst: 100,
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
    pub status_dropped: u64,
}

/// Shared view of a running scheduler.
#[derive(Clone)]
pub struct Running {
    pub sync: Arc<SyncState>,
    pub leading: tokio_watch::Receiver<bool>,
    pub stats: Arc<magma_engine::stats::Stats>,
}

fn client_for(cfg: &kube::Config) -> anyhow::Result<Client> {
    Client::try_from(cfg.clone()).context("building the Kubernetes client")
}

/// A client for `cfg`, once API discovery answered: upstream's binaries refuse to start when
/// it fails; so do ours, with the reason.
pub async fn connect(cfg: &kube::Config) -> anyhow::Result<Client> {
    let client = client_for(cfg)?;
    let version = client
        .apiserver_version()
        .await
        .context("API server discovery failed")?;
    tracing::info!(server = %version.git_version, "connected to the API server");
    Ok(client)
}

/// Run the scheduler until `shutdown` resolves. `started` receives handles once it is running.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send,
    started: Option<tokio::sync::oneshot::Sender<Running>>,
) -> anyhow::Result<RunSummary> {
    let watch_client = connect(&settings.client_config).await?;
    let bind_client = client_for(&settings.client_config)?;
    let status_client = client_for(&settings.client_config)?;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let engine = Engine::start(
        EngineOptions {
            workers: settings.workers,
            pin_workers: settings.pin_workers,
            profile: settings.profile.clone(),
            sharding: settings.sharding.clone(),
            ..Default::default()
        },
        clock,
    )?;
    let sharded = settings.sharding.mode != ShardingMode::None;
    let (leading_tx, leading_rx) = tokio_watch::channel(settings.leader.is_none());
    // Not before the caches have synced (the leadership follower below).
    engine.set_leading(false);

    // Watches: always on, so a standby's caches are warm when it takes over.
    let sync = Arc::new(SyncState::new(sharded));
    // The claims binds wait for (PreBind), fed by the claim watch.
    let claims = crate::prebind::Claims::new();
    let mut watches = watch::spawn(
        watch_client.clone(),
        engine.handle(),
        WatchConfig {
            scheduler_name: settings.scheduler_name.clone(),
            node_selector: settings.node_selector.clone(),
        },
        sync.clone(),
        claims.clone(),
    );

    // Metrics: engine counters are read at scrape time (per-worker atomics, no contention).
    let metrics = crate::metrics::Metrics::new();
    {
        let stats = engine.stats_handle();
        metrics.set_engine_source(move || (stats.snapshot(), stats.queue_depths()));
    }

    // Sharding: the NodeShard watch and our NodeShard's status writer (soft and hard mode).
    let (shard_tx, shard_rx) = mpsc::channel(16);
    let (list_tx, list_rx) = mpsc::channel(64);
    let shard_writer = sharded.then(|| {
        tokio::spawn(crate::shard::run_lister(
            status_client.clone(),
            engine.handle(),
            list_rx,
        ));
        let s = sync.clone();
        watches.push(tokio::spawn(crate::shard::watch(
            watch_client.clone(),
            engine.handle(),
            settings.sharding.shard_name.clone(),
            move || s.mark_shards(),
        )));
        tokio::spawn(crate::shard::run_writer(
            status_client.clone(),
            engine.handle(),
            metrics.clone(),
            shard_rx,
        ))
    });

    // Status writer (separate client, bounded and lossy).
    let drops = metrics.event_drops();
    let (sink, status_lanes) = StatusSink::new(
        crate::status::FAILED_CAPACITY,
        crate::status::scheduled_capacity(settings.event_qps, settings.event_burst),
        drops.clone(),
    );
    let status_task = tokio::spawn(crate::status::run_writer(
        status_client,
        settings.scheduler_name.clone(),
        TokenBucket::new(settings.event_qps, settings.event_burst),
        TokenBucket::new(settings.event_qps, settings.event_burst),
        status_lanes,
        drops,
    ));

    // Bind executor.
    let (bind_tx, bind_rx) = mpsc::channel(65_536);
    let sink_for_binds = sink.clone();
    let binds_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let binds_counter = binds_sent.clone();
    let bind_metrics = metrics.clone();
    let hook: OutcomeHook = Arc::new(move |intent, result, took, throttled| {
        binds_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        use crate::metrics::BindOutcomeLabel as L;
        let label = match result {
            BindResult::Bound => L::Bound,
            BindResult::AlreadyBound => L::AlreadyBound,
            BindResult::PodGone => L::PodGone,
            BindResult::Failed(_) | BindResult::Abandoned => L::Failed,
        };
        bind_metrics.observe_bind(label, took);
        bind_metrics.observe_throttle("bind", throttled);
        bind_metrics.observe_attempt(if *result == BindResult::Bound {
            "scheduled"
        } else {
            "error"
        });
        if *result == BindResult::Bound {
            if let Some(age) = since_creation(intent.pod.created_unix_ms) {
                bind_metrics.observe_task_latency("Bound", age);
            }
            sink_for_binds.offer(StatusMsg::Scheduled {
                namespace: intent.pod.namespace.clone(),
                name: intent.pod.name.clone(),
                uid: intent.pod.uid.clone(),
                node: intent.node.clone(),
            });
        }
    });
    let binder = BindExecutor::new(
        bind_client,
        engine.handle(),
        settings.bind.clone(),
        leading_rx.clone(),
        claims,
    )
    .on_outcome(hook);
    let bind_task = tokio::spawn(binder.run(bind_rx));

    // Intent router: the engine's output channel is synchronous; route it on a thread.
    let intents = engine.intents().clone();
    let router_sink = sink.clone();
    let router_metrics = metrics.clone();
    let router = std::thread::Builder::new()
        .name("magma-intents".into())
        .spawn(move || {
            while let Ok(intent) = intents.recv() {
                match intent {
                    Intent::Bind(b) => {
                        // One scheduling cycle: popped from the queue → claimed.
                        router_metrics.observe_cycle(b.claimed.saturating_since(b.popped));
                        if let Some(age) = since_creation(b.pod.created_unix_ms) {
                            router_metrics.observe_task_latency("Assumed", age);
                        }
                        if bind_tx.blocking_send(b).is_err() {
                            break;
                        }
                    }
                    Intent::Status(s) => {
                        if s.reason == magma_engine::StatusReason::Unschedulable {
                            router_metrics.observe_attempt("unschedulable");
                        }
                        router_sink.offer(StatusMsg::Failed(s));
                    }
                    Intent::ShardStatus(s) => {
                        // At most one is in flight (the engine waits for its outcome).
                        if shard_tx.blocking_send(s).is_err() {
                            tracing::warn!("NodeShard status writer stopped");
                        }
                    }
                    Intent::ListNodePods(nodes) => {
                        if list_tx.blocking_send(nodes).is_err() {
                            tracing::warn!("acquired-node pod lister stopped");
                        }
                    }
                    Intent::Error(e) => tracing::warn!(error = %e, "input rejected"),
                }
            }
        })?;

    // Leader election.
    let (stop_tx, stop_rx) = tokio_watch::channel(false);
    let leader_task = settings.leader.clone().map(|cfg| {
        let elector = crate::leader::LeaderElector::new(watch_client.clone(), cfg);
        let tx = leading_tx.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            if let Err(e) = elector.run(tx, stop).await {
                tracing::error!(error = %e, "leader election failed");
            }
        })
    });
    // Follow leadership: claim only while leading, and only once the caches have synced, so
    // no pod is placed on a node whose pods are not counted yet (upstream waits the same way).
    let follow = {
        let mut rx = leading_rx.clone();
        let handle_leading = engine.leading_setter();
        let (sync, wait) = (sync.clone(), settings.resource_sync_timeout);
        tokio::spawn(async move {
            if !wait.is_zero() && tokio::time::timeout(wait, sync.wait()).await.is_err() {
                tracing::warn!(
                    ?wait,
                    unsynced = ?sync.unsynced(),
                    "caches did not sync within --resource-sync-timeout; scheduling anyway"
                );
            }
            loop {
                let leading = *rx.borrow_and_update();
                handle_leading(leading);
                if rx.changed().await.is_err() {
                    break;
                }
            }
        })
    };

    // Config hot reload: a valid new profile reaches every worker at its next cycle.
    let reload_handle = engine.handle();
    let reload_metrics = metrics.clone();
    let _config_watcher = match &settings.config_path {
        Some(path) => {
            let sampling = settings.profile.sampling;
            Some(crate::reload::watch(
                path.clone(),
                sampling,
                move |r| match r {
                    Ok(p) => {
                        for w in &p.warnings {
                            tracing::warn!("scheduler configuration: {w}");
                        }
                        tracing::info!("scheduler configuration reloaded");
                        reload_metrics.observe_config_reload(true);
                        reload_handle.send(Input::Profile(Arc::new(p)));
                    }
                    Err(reason) => {
                        reload_metrics.observe_config_reload(false);
                        tracing::error!(%reason, "new scheduler configuration rejected; keeping the current one")
                    }
                },
            )?)
        }
        None => None,
    };

    // Health, readiness and metrics.
    let readiness = Arc::new(crate::http::Readiness::new(settings.leader.is_some()));
    let (http_stop_tx, http_stop_rx) = tokio_watch::channel(false);
    let encoder = {
        let m = metrics.clone();
        Arc::new(move || m.encode()) as crate::http::MetricsEncoder
    };
    let servers = crate::http::serve_admin(
        settings.healthz_addr,
        settings.metrics_addr.map(|a| (a, encoder)),
        readiness.clone(),
        http_stop_rx,
    )
    .await?;
    // Readiness follows cache sync and leadership; metrics follow leadership.
    let readiness_task = {
        let (sync, readiness, metrics, mut rx) = (
            sync.clone(),
            readiness.clone(),
            metrics.clone(),
            leading_rx.clone(),
        );
        tokio::spawn(async move {
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
    };

    if let Some(tx) = started {
        let _ = tx.send(Running {
            sync: sync.clone(),
            leading: leading_rx.clone(),
            stats: engine.stats_handle(),
        });
    }

    shutdown.await;
    tracing::info!("shutting down: no new claims");
    engine.set_leading(false);
    let _ = stop_tx.send(true);
    for w in &watches {
        w.abort();
    }
    follow.abort();
    readiness_task.abort();
    // The engine accounts for every in-flight result; then its intent channel closes, the
    // router ends, the bind executor finishes what it has and stops.
    let core = tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    drop(core);
    let _ = tokio::task::spawn_blocking(move || router.join()).await;
    let _ = bind_task.await;
    if let Some(t) = leader_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    status_task.abort();
    if let Some(t) = shard_writer {
        t.abort();
    }
    let _ = http_stop_tx.send(true);
    for s in servers {
        let _ = tokio::time::timeout(Duration::from_secs(2), s).await;
    }
    Ok(RunSummary {
        binds_sent: binds_sent.load(std::sync::atomic::Ordering::Relaxed),
        status_dropped: sink.dropped(),
    })
}

/// Time since a pod's creation timestamp (upstream's task-latency metrics measure from there).
fn since_creation(created_unix_ms: Option<i64>) -> Option<Duration> {
    let created = u64::try_from(created_unix_ms?).ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    now.checked_sub(Duration::from_millis(created))
}

/// The client configuration: `--kubeconfig`, else in-cluster / `KUBECONFIG` / `~/.kube/config`
/// (`Config::infer`); `--master` overrides the server URL in either case.
pub async fn kube_config(kubeconfig: &str, master: &str) -> anyhow::Result<kube::Config> {
    let mut cfg = if !kubeconfig.is_empty() {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading --kubeconfig {kubeconfig}"))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading --kubeconfig {kubeconfig}"))?
    } else if !master.is_empty() {
        kube::Config::new(
            master
                .parse()
                .with_context(|| format!("invalid --master {master:?}"))?,
        )
    } else {
        kube::Config::infer()
            .await
            .context("no --kubeconfig given and no in-cluster or default configuration found")?
    };
    if !master.is_empty() {
        cfg.cluster_url = master
            .parse()
            .with_context(|| format!("invalid --master {master:?}"))?;
    }
    Ok(cfg)
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
        bind: BindConfig {
            qps: f64::from(o.kube_api_qps),
            burst: o.kube_api_burst,
            concurrency: o.bind_concurrency,
            timeout: bind_timeout,
            ..BindConfig::default()
        },
        event_qps: f64::from(o.event_qps),
        event_burst: o.event_burst,
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
