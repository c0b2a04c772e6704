//! The sharding controller's runtime: watches the sharding ConfigMap, Nodes, Pods and NodeShards,
//! keeps the [`ClusterIndex`], elects a leader, and, while leading, turns [`plan_sync`]'s decisions
//! into NodeShard writes. It owns the controller's API client use: it writes only NodeShards'
//! `spec.nodesDesired` (merge patches with a `resourceVersion` precondition), creates NodeShards
//! and deletes released stale ones (delete with a `resourceVersion` precondition). It never writes
//! a NodeShard's status (the schedulers own it) and never touches any other object but its Lease
//! (through [`LeaderElector`]).
//!
//! The protocol, one task owning all state (no locks):
//!
//! 1. Watches start at once on every replica, so a standby's caches are warm. Their initial
//!    lists (`Init … InitDone`) become resets; the first sync waits until all four have synced,
//!    a configuration is active, and this replica leads.
//! 2. Configuration: a valid `sharding.yaml` replaces the active configuration and triggers a
//!    sync. Invalid, empty or missing-key data is rejected (error log,
//!    `magma_shardctl_config_reloads_total{result="rejected"}`) and the previous configuration
//!    stays. The ConfigMap absent while no configuration is active → the flag configuration;
//!    deleted later → the last configuration stays. Present but unusable at start → no
//!    configuration, hence no writes, until it is fixed.
//! 3. Triggers set a sync deadline: at most `debounce` (200 ms) after the first event of a burst,
//!    later events join it, so a burst costs one sync. Node add/delete, label or annotation
//!    changes, capacity changes that move utilisation, and pod events that move a node's
//!    utilisation by more than the threshold *since the last sync* trigger only with
//!    `enableNodeEventTrigger`; NodeShard changes (created, deleted, spec changed, `nodesInUse`
//!    changed: a hand-off progressed) and config reloads always do. Every sync re-arms the
//!    periodic one (`shardSyncPeriod`).
//! 4. A sync plans from the index and the observed NodeShards, then writes in order, applying
//!    each response to its view at once. On `409` (or `404` on update) it re-reads that NodeShard
//!    and replans; on `429`, `5xx` or a transport error it backs off (100 ms doubling, 5 s cap)
//!    and replans; at most [`MAX_ATTEMPTS`] rounds, then it retries 5 s later. Requests other than
//!    watches pass a token bucket (`--kube-api-qps/--kube-api-burst`).
//! 5. A sync is abandoned when leadership is lost or shutdown is requested: every write is
//!    conditional, so a half-done sync leaves only states a later sync starts from. On shutdown
//!    the loop stops first, then the elector releases the Lease.

use super::config::{DEFAULT_UTIL_CHANGE_THRESHOLD, ShardingConfig};
use super::handoff::ObservedShard;
use super::index::{ClusterIndex, NodeRelist, PodRelist};
use super::metrics::ControllerMetrics;
use super::plan::{ShardWrite, SyncPlan, plan_sync};
use crate::feed::{self, Change};
use crate::http::Readiness;
use crate::leader::{Elector, LeaderElector, LeaseConfig};
use crate::nodeshard::NodeShard;
use crate::process::Supervisor;
use crate::ratelimit::TokenBucket;
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The ConfigMap key holding the configuration.
pub const CONFIG_KEY: &str = "sharding.yaml";
/// Rounds of plan + writes one sync makes before giving up.
pub const MAX_ATTEMPTS: u32 = 8;
/// Upstream's 200 ms delay after an event, used as the coalescing window.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Everything the controller needs; [`ControllerSettings::new`] gives the flag defaults.
pub struct ControllerSettings {
    pub client: kube::Client,
    pub configmap_namespace: String,
    pub configmap_name: String,
    /// Used when the ConfigMap is absent (from `--scheduler-configs` & co.).
    pub flag_config: ShardingConfig,
    /// `None`: no leader election (this replica always leads).
    pub lease: Option<LeaseConfig>,
    pub api_qps: f64,
    pub api_burst: u32,
    pub debounce: Duration,
    pub metrics: ControllerMetrics,
    pub readiness: Arc<Readiness>,
    status: watch::Sender<ControllerStatus>,
}

impl ControllerSettings {
    /// Upstream's ConfigMap name and namespace, QPS/burst 50/100, no leader election.
    pub fn new(client: kube::Client, flag_config: ShardingConfig) -> ControllerSettings {
        ControllerSettings {
            client,
            configmap_namespace: "volcano-system".into(),
            configmap_name: "volcano-sharding-configmap".into(),
            flag_config,
            lease: None,
            api_qps: 50.0,
            api_burst: 100,
            debounce: DEFAULT_DEBOUNCE,
            metrics: ControllerMetrics::new(),
            readiness: Arc::new(Readiness::new(false)),
            status: watch::channel(ControllerStatus::default()).0,
        }
    }

    /// Follow the controller's progress (tests, tools).
    pub fn subscribe(&self) -> watch::Receiver<ControllerStatus> {
        self.status.subscribe()
    }
}

/// Where the active configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The sharding ConfigMap at this resourceVersion.
    ConfigMap { resource_version: String },
    /// The `--scheduler-configs` flags (ConfigMap absent).
    Flags,
}

/// Progress counters, published after every change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerStatus {
    pub caches_synced: bool,
    pub leading: bool,
    pub config: Option<ConfigSource>,
    pub syncs_ok: u64,
    pub syncs_failed: u64,
    pub reloads_ok: u64,
    pub reloads_rejected: u64,
    /// Writes made by the last successful sync.
    pub last_sync_writes: usize,
    pub last_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{verb} NodeShard {name:?}")]
    Api {
        verb: &'static str,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("NodeShard {name:?} is known without a resourceVersion: cannot write it conditionally")]
    NoResourceVersion { name: String },
    #[error("no sync succeeded within {attempts} rounds; last failure: {last}")]
    Exhausted { attempts: u32, last: String },
    #[error("{0}")]
    Component(String),
    #[error("no active sharding configuration")]
    NoConfig,
}

/// How a failed write is handled (module doc, step 4).
#[derive(Debug)]
enum WriteFailure {
    /// Re-read this NodeShard, then replan.
    Conflict {
        name: String,
        why: String,
    },
    /// Back off, then replan.
    Retryable(String),
    Fatal(ControllerError),
}

fn classify(verb: &'static str, name: &str, e: kube::Error) -> WriteFailure {
    match &e {
        kube::Error::Api(s) if s.code == 409 || (s.code == 404 && verb != "delete") => {
            WriteFailure::Conflict {
                name: name.to_owned(),
                why: format!("{verb} {name}: {} ({})", s.message, s.code),
            }
        }
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => {
            WriteFailure::Retryable(format!("{verb} {name}: {} ({})", s.message, s.code))
        }
        kube::Error::Api(_) => WriteFailure::Fatal(ControllerError::Api {
            verb,
            name: name.to_owned(),
            source: Box::new(e),
        }),
        _ => WriteFailure::Retryable(format!("{verb} {name}: {e}")),
    }
}

#[expect(
    clippy::large_enum_variant,
    reason = "each message is moved once, from the merged stream to its handler"
)]
enum Msg {
    Node(Change<Node, Node>),
    Pod(Change<Pod, Pod>),
    Shard(Change<NodeShard, NodeShard>),
    Config(Change<ConfigMap, ConfigMap>),
}

#[derive(Debug, Default, Clone, Copy)]
struct Synced {
    nodes: bool,
    pods: bool,
    shards: bool,
    config: bool,
}

impl Synced {
    fn all(self) -> bool {
        self.nodes && self.pods && self.shards && self.config
    }
}

struct Controller {
    api: Api<NodeShard>,
    limiter: TokenBucket,
    metrics: ControllerMetrics,
    readiness: Arc<Readiness>,
    status: watch::Sender<ControllerStatus>,
    flag_config: ShardingConfig,
    configmap: String,
    debounce: Duration,

    index: ClusterIndex,
    shards: BTreeMap<String, NodeShard>,
    config: Option<ShardingConfig>,
    /// resourceVersion of the ConfigMap last processed (a relist re-delivers it).
    config_rv: Option<String>,
    synced: Synced,
    /// When the next (event- or reload-triggered) sync is due.
    pending: Option<Instant>,
    /// When the next periodic sync is due.
    periodic: Option<Instant>,
    leading: bool,
}

/// Run the controller until `shutdown` resolves.
pub async fn run(
    settings: ControllerSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ControllerError> {
    let client = settings.client.clone();
    let streams = watch_streams(&client, &settings);

    // Leadership: the elector (a component of the shared scaffolding), or a constant `true`
    // whose sender we keep.
    let (leading_tx, mut leading_rx) = watch::channel(settings.lease.is_none());
    let mut sup = Supervisor::new();
    let mut _constant_leader = None;
    let elector = match settings.lease.clone() {
        Some(lease) => {
            let renew = lease.renew_deadline;
            let elector = Elector::new(LeaderElector::new(client.clone(), lease), leading_tx);
            Some((sup.start(elector), renew))
        }
        None => {
            _constant_leader = Some(leading_tx);
            None
        }
    };

    let mut c = Controller {
        api: Api::all(client),
        limiter: TokenBucket::new(settings.api_qps, settings.api_burst),
        metrics: settings.metrics,
        readiness: settings.readiness,
        status: settings.status,
        flag_config: settings.flag_config,
        configmap: format!(
            "{}/{}",
            settings.configmap_namespace, settings.configmap_name
        ),
        debounce: settings.debounce,
        index: ClusterIndex::new(),
        shards: BTreeMap::new(),
        config: None,
        config_rv: None,
        synced: Synced::default(),
        pending: Some(Instant::now()),
        periodic: None,
        leading: *leading_rx.borrow(),
    };
    c.publish_leader();
    // A failed elector ends the run as a shutdown would, and the process exits with it.
    let mut failure = None;
    let stop = async {
        tokio::select! {
            _ = shutdown => {}
            e = sup.failed() => failure = Some(e),
        }
    };
    c.run_loop(streams, &mut leading_rx, stop).await;

    // Stop competing and release the Lease (bounded: never hang the process on it).
    if let Some((id, renew)) = elector {
        let _ = sup.stop(id, renew + Duration::from_secs(2)).await;
    }
    c.metrics.set_leader(false);
    match failure {
        Some(e) => Err(ControllerError::Component(format!("{e:#}"))),
        None => Ok(()),
    }
}

fn watch_streams(client: &kube::Client, s: &ControllerSettings) -> BoxStream<'static, Msg> {
    let nodes = feed::watch(
        Api::<Node>::all(client.clone()),
        watcher::Config::default().any_semantic(),
        "node",
        Some,
    )
    .map(Msg::Node);
    // Finished pods hold no resources: kube-scheduler's selector (a finished pod arrives as a
    // delete).
    let pods = feed::watch(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default()
            .any_semantic()
            .fields(crate::watch::POD_FIELD_SELECTOR),
        "pod",
        Some,
    )
    .map(Msg::Pod);
    let shards = feed::watch(
        Api::<NodeShard>::all(client.clone()),
        watcher::Config::default(),
        "NodeShard (is the shard.volcano.sh CRD installed?)",
        Some,
    )
    .map(Msg::Shard);
    let configmap = format!(
        "sharding ConfigMap {}/{}",
        s.configmap_namespace, s.configmap_name
    );
    let config = feed::watch(
        Api::<ConfigMap>::namespaced(client.clone(), &s.configmap_namespace),
        watcher::Config::default().fields(&format!("metadata.name={}", s.configmap_name)),
        configmap,
        Some,
    )
    .map(Msg::Config);
    futures::stream::select_all([nodes.boxed(), pods.boxed(), shards.boxed(), config.boxed()])
        .boxed()
}

/// Resolves when leadership is lost (or the elector is gone).
async fn lost(leading: &mut watch::Receiver<bool>) {
    let _ = leading.wait_for(|l| !*l).await;
}

impl Controller {
    async fn run_loop(
        &mut self,
        mut streams: BoxStream<'static, Msg>,
        leading_rx: &mut watch::Receiver<bool>,
        shutdown: impl Future<Output = ()> + Send,
    ) {
        tokio::pin!(shutdown);
        let mut elector_alive = true;
        loop {
            let due = self.due();
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                r = leading_rx.changed(), if elector_alive => {
                    if r.is_err() {
                        elector_alive = false;
                    }
                    let now = r.is_ok() && *leading_rx.borrow_and_update();
                    self.set_leading(now);
                }
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    let started = Instant::now();
                    let outcome = tokio::select! {
                        biased;
                        _ = &mut shutdown => {
                            tracing::info!("shutdown requested: abandoning the sync in progress");
                            break;
                        }
                        _ = lost(leading_rx) => None,
                        r = self.sync() => Some(r),
                    };
                    self.after_sync(outcome, started.elapsed());
                }
                msg = streams.next() => match msg {
                    Some(m) => self.handle(m),
                    None => break,
                },
            }
        }
        tracing::info!("sharding controller stopped");
    }

    /// The next sync deadline, if a sync may run at all.
    fn due(&self) -> Option<Instant> {
        if !(self.leading && self.synced.all() && self.config.is_some()) {
            return None;
        }
        match (self.pending, self.periodic) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn trigger(&mut self, why: &str) {
        let at = Instant::now() + self.debounce;
        if self.pending.is_none_or(|p| p > at) {
            tracing::debug!(why, "shard sync scheduled");
            self.pending = Some(at);
        }
    }

    fn event_trigger_enabled(&self) -> bool {
        self.config
            .as_ref()
            .is_none_or(|c| c.enable_node_event_trigger)
    }

    fn threshold(&self) -> f64 {
        self.config
            .as_ref()
            .map_or(DEFAULT_UTIL_CHANGE_THRESHOLD, |c| {
                c.utilization_change_threshold
            })
    }

    fn set_leading(&mut self, leading: bool) {
        if leading == self.leading {
            return;
        }
        self.leading = leading;
        if leading {
            tracing::info!("leading: syncing NodeShards");
            self.pending = Some(Instant::now());
        } else {
            tracing::warn!("not leading: NodeShard writes stop; caches stay warm");
        }
        self.publish_leader();
    }

    fn publish_leader(&mut self) {
        self.metrics.set_leader(self.leading);
        self.readiness
            .set_leader_state(self.leading, self.synced.all());
        let leading = self.leading;
        self.status.send_modify(|s| s.leading = leading);
    }

    fn mark_synced(&mut self, f: impl FnOnce(&mut Synced)) {
        let before = self.synced.all();
        f(&mut self.synced);
        if !before && self.synced.all() {
            tracing::info!(
                nodes = self.index.node_count(),
                nodeshards = self.shards.len(),
                "caches synced"
            );
            self.readiness.set_synced();
            self.readiness.set_leader_state(self.leading, true);
            self.status.send_modify(|s| s.caches_synced = true);
            self.pending = Some(Instant::now());
        }
    }

    // ---- Watch events ---------------------------------------------------------------------

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Node(c) => self.on_node(c),
            Msg::Pod(c) => self.on_pod(c),
            Msg::Shard(c) => self.on_shard(c),
            Msg::Config(c) => self.on_config(c),
        }
    }

    fn on_node(&mut self, c: Change<Node, Node>) {
        let events = self.event_trigger_enabled();
        match c {
            Change::Reset(all) => {
                let mut r = NodeRelist::default();
                for n in &all {
                    r.apply(n);
                }
                if self.index.finish_node_relist(r) && events {
                    self.trigger("nodes relisted with changes");
                }
                self.mark_synced(|s| s.nodes = true);
            }
            Change::Apply(n) => {
                if let Some(change) = self.index.apply_node(&n, self.threshold())
                    && events
                {
                    tracing::debug!(
                        node = n.metadata.name.as_deref().unwrap_or(""),
                        ?change,
                        "node changed"
                    );
                    self.trigger("node changed");
                }
            }
            Change::Delete(n) => {
                let name = n.metadata.name.unwrap_or_default();
                if self.index.delete_node(&name) && events {
                    tracing::debug!(node = %name, "node deleted");
                    self.trigger("node deleted");
                }
            }
        }
    }

    fn on_pod(&mut self, c: Change<Pod, Pod>) {
        let events = self.event_trigger_enabled();
        let th = self.threshold();
        match c {
            Change::Reset(all) => {
                let mut r = PodRelist::default();
                for p in &all {
                    r.apply(p);
                }
                self.index.finish_pod_relist(r);
                if events && self.synced.pods {
                    // A relist after a disconnect may have missed changes.
                    self.trigger("pods relisted");
                }
                self.mark_synced(|s| s.pods = true);
            }
            Change::Apply(p) => {
                let touched = self.index.apply_pod(&p);
                if events && touched.iter().any(|n| self.index.usage_significant(n, th)) {
                    self.trigger("node utilisation changed");
                }
            }
            Change::Delete(p) => {
                let ns = p.metadata.namespace.as_deref().unwrap_or("");
                let name = p.metadata.name.as_deref().unwrap_or("");
                if let Some(n) = self.index.delete_pod(ns, name)
                    && events
                    && self.index.usage_significant(&n, th)
                {
                    self.trigger("node utilisation changed");
                }
            }
        }
    }

    fn on_shard(&mut self, c: Change<NodeShard, NodeShard>) {
        match c {
            Change::Reset(list) => {
                let new: BTreeMap<String, NodeShard> = list
                    .into_iter()
                    .filter_map(|s| Some((s.metadata.name.clone()?, s)))
                    .collect();
                for gone in self.shards.keys().filter(|k| !new.contains_key(*k)) {
                    self.metrics.remove_shard(gone);
                }
                self.shards = new;
                self.trigger("NodeShards relisted");
                self.mark_synced(|s| s.shards = true);
            }
            Change::Apply(s) => {
                let Some(name) = s.metadata.name.clone() else {
                    return;
                };
                let relevant = self
                    .shards
                    .get(&name)
                    .is_none_or(|old| old.spec != s.spec || in_use(old) != in_use(&s));
                self.metrics
                    .set_shard_nodes(&name, s.spec.nodes_desired.len());
                self.shards.insert(name, s);
                if relevant {
                    self.trigger("NodeShard changed");
                }
            }
            Change::Delete(s) => {
                if let Some(name) = s.metadata.name {
                    self.metrics.remove_shard(&name);
                    if self.shards.remove(&name).is_some() {
                        self.trigger("NodeShard deleted");
                    }
                }
            }
        }
    }

    fn on_config(&mut self, c: Change<ConfigMap, ConfigMap>) {
        match c {
            Change::Reset(list) => {
                // The field selector names one object: a list holds it or nothing.
                match list.into_iter().next_back() {
                    Some(cm) => self.load_configmap(&cm),
                    None => self.configmap_absent("not found"),
                }
                self.mark_synced(|s| s.config = true);
            }
            Change::Apply(cm) => self.load_configmap(&cm),
            Change::Delete(_) => self.configmap_absent("deleted"),
        }
    }

    fn configmap_absent(&mut self, how: &str) {
        self.config_rv = None;
        if self.config.is_none() {
            tracing::info!(
                configmap = %self.configmap,
                "sharding ConfigMap {how}: using the --scheduler-configs configuration"
            );
            let c = self.flag_config.clone();
            self.activate(c, ConfigSource::Flags);
        } else {
            tracing::warn!(
                configmap = %self.configmap,
                "sharding ConfigMap {how}: keeping the last configuration"
            );
        }
    }

    fn load_configmap(&mut self, cm: &ConfigMap) {
        let rv = cm.metadata.resource_version.clone().unwrap_or_default();
        if self.config_rv.as_deref() == Some(rv.as_str()) {
            return;
        }
        self.config_rv = Some(rv.clone());
        let parsed = match cm.data.as_ref().and_then(|d| d.get(CONFIG_KEY)) {
            None => Err(format!("key {CONFIG_KEY:?} is missing")),
            Some(yaml) => ShardingConfig::parse(yaml).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok(c) => {
                self.metrics.observe_reload(true);
                self.status.send_modify(|s| s.reloads_ok += 1);
                tracing::info!(
                    configmap = %self.configmap,
                    resource_version = %rv,
                    schedulers = ?c.schedulers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                    "sharding configuration loaded"
                );
                self.activate(
                    c,
                    ConfigSource::ConfigMap {
                        resource_version: rv,
                    },
                );
            }
            Err(why) => {
                self.metrics.observe_reload(false);
                self.status.send_modify(|s| {
                    s.reloads_rejected += 1;
                    s.last_error = Some(why.clone());
                });
                tracing::error!(
                    configmap = %self.configmap,
                    resource_version = %rv,
                    error = %why,
                    "sharding configuration rejected; {} (NodeShards are left as they are)",
                    if self.config.is_some() { "keeping the previous configuration" } else { "no configuration is active, so nothing is synced until it is fixed" }
                );
            }
        }
    }

    fn activate(&mut self, config: ShardingConfig, source: ConfigSource) {
        self.periodic = Some(Instant::now() + config.shard_sync_period);
        self.config = Some(config);
        self.status.send_modify(|s| s.config = Some(source));
        self.trigger("configuration changed");
    }

    // ---- Sync -----------------------------------------------------------------------------

    fn observed(&self) -> BTreeMap<String, ObservedShard> {
        self.shards
            .iter()
            .map(|(k, s)| {
                (
                    k.clone(),
                    ObservedShard {
                        nodes_desired: s.spec.nodes_desired.clone(),
                        nodes_in_use: in_use(s).to_vec(),
                    },
                )
            })
            .collect()
    }

    async fn sync(&mut self) -> Result<SyncPlan, ControllerError> {
        let config = self.config.clone().ok_or(ControllerError::NoConfig)?;
        let mut backoff = BACKOFF_START;
        let mut last = String::new();
        // No watch event is handled during a sync: the nodes stay as they are, only the
        // NodeShards re-read after a conflict change.
        let nodes = self.index.shard_nodes();
        for attempt in 1..=MAX_ATTEMPTS {
            let plan = plan_sync(&nodes, &config, &self.observed());
            match self.execute(&plan).await {
                Ok(()) => return Ok(plan),
                Err(WriteFailure::Fatal(e)) => return Err(e),
                Err(WriteFailure::Conflict { name, why }) => {
                    tracing::debug!(attempt, %why, "NodeShard changed meanwhile; re-reading and replanning");
                    last = why;
                    self.limiter.acquire().await;
                    match self.api.get_opt(&name).await {
                        Ok(Some(s)) => {
                            self.shards.insert(name, s);
                        }
                        Ok(None) => {
                            self.shards.remove(&name);
                        }
                        Err(e) => last = format!("re-reading NodeShard {name}: {e}"),
                    }
                }
                Err(WriteFailure::Retryable(why)) => {
                    tracing::warn!(attempt, %why, ?backoff, "NodeShard write failed; backing off");
                    last = why;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        Err(ControllerError::Exhausted {
            attempts: MAX_ATTEMPTS,
            last,
        })
    }

    async fn execute(&mut self, plan: &SyncPlan) -> Result<(), WriteFailure> {
        for w in &plan.writes {
            let name = w.name().to_owned();
            let verb = w.verb();
            self.limiter.acquire().await;
            let res = match w {
                ShardWrite::Create { nodes_desired, .. } => self
                    .api
                    .create(
                        &PostParams::default(),
                        &NodeShard::new(&name, nodes_desired),
                    )
                    .await
                    .map(Some),
                ShardWrite::Update { nodes_desired, .. } => {
                    let rv = self.resource_version(&name)?;
                    // Only the spec, conditional on the version the plan was made from.
                    let patch = serde_json::json!({
                        "metadata": {"resourceVersion": rv},
                        "spec": {"nodesDesired": nodes_desired},
                    });
                    self.api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(Some)
                }
                ShardWrite::Delete { .. } => {
                    let rv = self.resource_version(&name)?;
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version: Some(rv),
                            uid: None,
                        }),
                        ..DeleteParams::default()
                    };
                    match self.api.delete(&name, &dp).await {
                        Ok(_) => Ok(None),
                        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            };
            match res {
                Ok(obj) => {
                    self.metrics.observe_write(verb, "ok");
                    match obj {
                        Some(s) => {
                            self.metrics
                                .set_shard_nodes(&name, s.spec.nodes_desired.len());
                            self.shards.insert(name.clone(), s);
                        }
                        None => {
                            self.metrics.remove_shard(&name);
                            self.shards.remove(&name);
                        }
                    }
                    match w {
                        ShardWrite::Update { stale: true, .. } => tracing::info!(
                            nodeshard = %name,
                            "scheduler no longer configured: NodeShard emptied (deleted once its status lists no node in use)"
                        ),
                        ShardWrite::Delete { .. } => {
                            tracing::info!(nodeshard = %name, "stale NodeShard released its nodes: deleted")
                        }
                        ShardWrite::Create { nodes_desired, .. }
                        | ShardWrite::Update { nodes_desired, .. } => tracing::info!(
                            nodeshard = %name,
                            verb,
                            nodes = nodes_desired.len(),
                            "NodeShard spec.nodesDesired written"
                        ),
                    }
                }
                Err(e) => {
                    let f = classify(verb, &name, e);
                    self.metrics.observe_write(
                        verb,
                        if matches!(f, WriteFailure::Conflict { .. }) {
                            "conflict"
                        } else {
                            "error"
                        },
                    );
                    return Err(f);
                }
            }
        }
        Ok(())
    }

    fn resource_version(&self, name: &str) -> Result<String, WriteFailure> {
        self.shards
            .get(name)
            .and_then(|s| s.metadata.resource_version.clone())
            .ok_or_else(|| {
                WriteFailure::Fatal(ControllerError::NoResourceVersion { name: name.into() })
            })
    }

    fn after_sync(&mut self, outcome: Option<Result<SyncPlan, ControllerError>>, took: Duration) {
        let Some(outcome) = outcome else {
            tracing::warn!("leadership lost: abandoning the sync in progress");
            return;
        };
        match outcome {
            Ok(plan) => {
                self.index.mark_synced();
                self.pending = None;
                let period = self
                    .config
                    .as_ref()
                    .map_or(self.flag_config.shard_sync_period, |c| c.shard_sync_period);
                self.periodic = Some(Instant::now() + period);
                self.metrics.observe_sync(true, took);
                for (name, s) in &self.shards {
                    self.metrics
                        .set_shard_nodes(name, s.spec.nodes_desired.len());
                }
                for a in plan
                    .assignments
                    .iter()
                    .filter_map(|a| a.min_nodes_unmet.map(|m| (a, m)))
                {
                    tracing::warn!(
                        nodeshard = %a.0.scheduler,
                        min_nodes = a.1.min_nodes,
                        selected = a.1.selected,
                        "fewer nodes than minNodes qualify"
                    );
                }
                for t in &plan.in_transit {
                    tracing::debug!(node = %t.node, releasing = ?t.releasing, to = ?t.destinations, "node in transit: kept with its destination");
                }
                if !plan.draining.is_empty() {
                    tracing::info!(nodeshards = ?plan.draining, "stale NodeShards wait for their scheduler to release nodes");
                }
                let writes = plan.writes.len();
                self.status.send_modify(|s| {
                    s.syncs_ok += 1;
                    s.last_sync_writes = writes;
                });
            }
            Err(e) => {
                self.metrics.observe_sync(false, took);
                let msg = format!("{e}");
                tracing::error!(error = %msg, "shard sync failed; retrying in {RETRY_AFTER_FAILURE:?}");
                self.pending = Some(Instant::now() + RETRY_AFTER_FAILURE);
                self.status.send_modify(|s| {
                    s.syncs_failed += 1;
                    s.last_error = Some(msg);
                });
            }
        }
    }
}

fn in_use(s: &NodeShard) -> &[String] {
    s.status
        .as_ref()
        .map_or(&[], |st| st.nodes_in_use.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                message: "m".into(),
                ..Default::default()
            }
            .boxed(),
        )
    }

    #[test]
    fn write_failures_are_classified_like_the_api_edge_rules() {
        assert!(matches!(
            classify("update", "s", api_error(409)),
            WriteFailure::Conflict { .. }
        ));
        assert!(matches!(
            classify("create", "s", api_error(409)),
            WriteFailure::Conflict { .. }
        ));
        assert!(matches!(
            classify("update", "s", api_error(404)),
            WriteFailure::Conflict { .. }
        ));
        assert!(matches!(
            classify("delete", "s", api_error(404)),
            WriteFailure::Fatal(_)
        ));
        assert!(matches!(
            classify("update", "s", api_error(429)),
            WriteFailure::Retryable(_)
        ));
        assert!(matches!(
            classify("update", "s", api_error(503)),
            WriteFailure::Retryable(_)
        ));
        assert!(matches!(
            classify("update", "s", api_error(422)),
            WriteFailure::Fatal(_)
        ));
        assert!(matches!(
            classify("update", "s", api_error(403)),
            WriteFailure::Fatal(_)
        ));
    }
}
