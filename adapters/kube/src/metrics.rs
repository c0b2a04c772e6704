//! The Prometheus registry: upstream's `volcano_*` metrics (names, labels and buckets from
//! `volcano-agent-scheduler.md` §8) and Magma's own `magma_*` metrics, encoded in the Prometheus
//! text format 0.0.4 exactly as Go's client writes it (`# TYPE x_total counter`, Go-formatted
//! `le` labels). This module owns the metric definitions and their storage; it reads the engine
//! only through the source closure the application installs.
//!
//! Recording never takes a lock: the engine's counters are per-worker atomics summed at scrape
//! time by a collector ([`Metrics::set_engine_source`]); the adapter's histograms are striped
//! atomic buckets (one cache-line-separated row per stripe, a thread picks its stripe once), and
//! counters with a known label set are plain atomics. A label value outside the known set takes a
//! read lock once per observation (at most [`MAX_EXTRA_LABELS`] of them per family; more are
//! dropped so a bug cannot explode the cardinality).
//!
//! | Name | Type | Labels | Fed by |
//! |---|---|---|---|
//! | `volcano_worker_scheduling_cycle_duration_milliseconds` | histogram exp(5, ×2, 15) | – | [`Metrics::observe_cycle`] |
//! | `volcano_update_snapshot_duration_milliseconds` | histogram exp(5, ×2, 15) | – | [`Metrics::observe_snapshot_update`] |
//! | `volcano_action_scheduling_latency_milliseconds` | histogram exp range 1..2000, 20 | `action` | [`Metrics::observe_action`] |
//! | `volcano_scheduling_stage_duration_milliseconds` | histogram exp range 0.1..500, 20 | `stage` | [`Metrics::observe_stage`] |
//! | `volcano_task_scheduling_latency_milliseconds` | histogram exp range 50..60000, 30 | `stage` | [`Metrics::observe_task_latency`] |
//! | `volcano_schedule_attempts_total` | counter | `result` | [`Metrics::observe_attempt`] |
//! | `magma_*_total` engine counters, `magma_queue_pods{queue}` | counter, gauge | | engine source, at scrape |
//! | `magma_bind_total{outcome}`, `magma_bind_duration_seconds` | counter, histogram | | [`Metrics::observe_bind`] |
//! | `magma_api_throttle_wait_seconds{client}` | histogram | | [`Metrics::observe_throttle`] |
//! | `magma_leader`, `magma_info{version}` | gauge | | [`Metrics::set_leader`], constant |
//! | `magma_shard_nodes{state}` (desired, in_view, in_use, draining), `magma_shard_missing` | gauge | | engine source, at scrape (soft/hard mode) |
//! | `magma_shard_status_writes_total{result}` (ok, conflict, error) | counter | | [`Metrics::observe_shard_write`] |
//! | `magma_config_reload_total{result}` (ok, rejected) | counter | | [`Metrics::observe_config_reload`] |
//! | `magma_events_dropped_total{reason}` (Scheduled, FailedScheduling) | counter | | [`Metrics::event_drops`], the events lane (queue full: only below the default budget) |
//! | `magma_conditions_dropped_total` | counter | | [`Metrics::event_drops`], the conditions lane (more than a million pods waiting) |
//! | `magma_status_writes_failed_total` | counter | | [`Metrics::event_drops`]: conditions and events the API server kept refusing |
//! | `magma_status_writes_pending{lane}` (conditions, events) | gauge | | [`Metrics::event_drops`], the status lanes (writes queued or in flight) |
//! | `magma_status_writes_coalesced_total` | counter | | [`Metrics::event_drops`], the conditions lane (a pod's queued write replaced or cancelled) |
//! | `magma_condition_write_seconds` | histogram | | [`Metrics::observe_condition_write`]: decision → `PodScheduled=False` written |

use magma_engine::queue::QueueDepths;
use magma_engine::stats::StatsSnapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::{exponential_buckets, exponential_buckets_range};
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// `Content-Type` of [`Metrics::encode`]'s output (what Go's client serves by default).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Label values outside a family's known set that are kept; further ones are dropped.
pub const MAX_EXTRA_LABELS: usize = 32;

/// Histogram stripes; threads spread over them round-robin.
const STRIPES: usize = 8;

/// Outcome of one bind request, the `outcome` label of `magma_bind_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindOutcomeLabel {
    Bound,
    /// 409: someone else bound it first.
    AlreadyBound,
    /// 404: the pod was deleted meanwhile.
    PodGone,
    Failed,
}

impl BindOutcomeLabel {
    pub const ALL: [BindOutcomeLabel; 4] =
        [Self::Bound, Self::AlreadyBound, Self::PodGone, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bound => "bound",
            Self::AlreadyBound => "already_bound",
            Self::PodGone => "pod_gone",
            Self::Failed => "failed",
        }
    }
}

/// Result of one NodeShard status write attempt, the `result` label of
/// `magma_shard_status_writes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardWriteLabel {
    Ok,
    Conflict,
    Error,
}

impl ShardWriteLabel {
    pub const ALL: [ShardWriteLabel; 3] = [Self::Ok, Self::Conflict, Self::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Conflict => "conflict",
            Self::Error => "error",
        }
    }
}

type EngineSource = dyn Fn() -> (StatsSnapshot, QueueDepths) + Send + Sync;

/// The process's metrics; clones share one registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    m: Arc<Shared>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Arc::new(Shared::new());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(m.clone()));
        Metrics {
            inner: Arc::new(Inner { registry, m }),
        }
    }

    /// Installs the closure read at every scrape for the engine's counters and queue depths.
    pub fn set_engine_source(
        &self,
        f: impl Fn() -> (StatsSnapshot, QueueDepths) + Send + Sync + 'static,
    ) {
        *self
            .inner
            .m
            .engine
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(f));
    }

    /// One bind request finished after `latency`.
    pub fn observe_bind(&self, outcome: BindOutcomeLabel, latency: Duration) {
        let m = &self.inner.m;
        m.binds[outcome as usize].fetch_add(1, Relaxed);
        m.bind_duration.observe(latency);
    }

    /// A pod reached `stage` (`Assumed`, `Bound`) `since_creation` after its creationTimestamp.
    pub fn observe_task_latency(&self, stage: &str, since_creation: Duration) {
        self.inner
            .m
            .task_latency
            .with(stage, |h| h.observe(since_creation));
    }

    /// One worker scheduling cycle took `d`.
    pub fn observe_cycle(&self, d: Duration) {
        self.inner.m.cycle.observe(d);
    }

    /// Taking or refreshing a snapshot took `d`.
    pub fn observe_snapshot_update(&self, d: Duration) {
        self.inner.m.snapshot_update.observe(d);
    }

    /// One run of `action` (e.g. `allocate`) took `d`.
    pub fn observe_action(&self, action: &str, d: Duration) {
        self.inner.m.action.with(action, |h| h.observe(d));
    }

    /// One `stage` (`Predicate`, `Scoring`, ...) of one pod took `d`.
    pub fn observe_stage(&self, stage: &str, d: Duration) {
        self.inner.m.stage.with(stage, |h| h.observe(d));
    }

    /// One scheduling attempt ended with `result` (`scheduled`, `unschedulable`, `error`).
    pub fn observe_attempt(&self, result: &str) {
        self.inner.m.attempts.with(result, |c| {
            c.fetch_add(1, Relaxed);
        });
    }

    /// A request of `client` (`bind`, `events`) waited `wait` for the client-side rate limiter.
    pub fn observe_throttle(&self, client: &str, wait: Duration) {
        self.inner.m.throttle.with(client, |h| h.observe(wait));
    }

    /// One NodeShard status write attempt: `ok`, `conflict` (a 409, re-read and retried) or
    /// `error`.
    pub fn observe_shard_write(&self, result: ShardWriteLabel) {
        self.inner.m.shard_writes[result as usize].fetch_add(1, Relaxed);
    }

    /// A pod's `PodScheduled=False` condition was written `waited` after its decision.
    pub fn observe_condition_write(&self, waited: Duration) {
        self.inner.m.condition_write.observe(waited);
    }

    /// A preemptor was bound `since` after its preemption was decided.
    pub fn observe_preemption_to_bound(&self, since: Duration) {
        self.inner.m.preemption_to_bound.observe(since);
    }

    /// A preemption's API calls failed.
    pub fn observe_preemption_failure(&self) {
        self.inner.m.preemption_failures.fetch_add(1, Relaxed);
    }

    /// The counters the status lanes add their dropped writes to.
    pub fn event_drops(&self) -> Arc<crate::status::EventDrops> {
        self.inner.m.event_drops.clone()
    }

    /// A `--scheduler-conf` update was applied (`ok`) or rejected, the old one kept.
    pub fn observe_config_reload(&self, ok: bool) {
        self.inner.m.config_reloads[usize::from(!ok)].fetch_add(1, Relaxed);
    }

    pub fn set_leader(&self, leading: bool) {
        self.inner.m.leader.store(leading, Relaxed);
    }

    /// The text exposition (format 0.0.4, [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail; a collector error would truncate the output.
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
        {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

/// Everything recorded, and the collector that encodes it.
struct Shared {
    cycle: Histogram,
    snapshot_update: Histogram,
    action: Labeled<Histogram>,
    stage: Labeled<Histogram>,
    task_latency: Labeled<Histogram>,
    attempts: Labeled<AtomicU64>,
    binds: [AtomicU64; 4],
    bind_duration: Histogram,
    condition_write: Histogram,
    /// Preemption decided → its preemptor bound.
    preemption_to_bound: Histogram,
    /// Preemptions whose API calls failed (the nomination reverted).
    preemption_failures: AtomicU64,
    throttle: Labeled<Histogram>,
    leader: AtomicBool,
    /// NodeShard status writes: ok, conflict (409, retried), error.
    shard_writes: [AtomicU64; 3],
    /// `--scheduler-conf` updates: applied, rejected.
    config_reloads: [AtomicU64; 2],
    /// Status writes shed because their lane was full (`status`).
    event_drops: Arc<crate::status::EventDrops>,
    engine: RwLock<Option<Arc<EngineSource>>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

const MS: f64 = 1e6;
const SECONDS: f64 = 1e9;

impl Shared {
    fn new() -> Self {
        let cycle_buckets: Arc<[f64]> = exponential_buckets(5.0, 2.0, 15).collect();
        let action_buckets: Arc<[f64]> = exponential_buckets_range(1.0, 2000.0, 20).collect();
        let stage_buckets: Arc<[f64]> = exponential_buckets_range(0.1, 500.0, 20).collect();
        let task_buckets: Arc<[f64]> = exponential_buckets_range(50.0, 60000.0, 30).collect();
        // 0.25 ms .. ~8 s: a bind is one API round trip.
        let bind_buckets: Arc<[f64]> = exponential_buckets(0.00025, 2.0, 16).collect();
        // 0.1 ms .. ~13 s of rate-limiter wait.
        let throttle_buckets: Arc<[f64]> = exponential_buckets(0.0001, 2.0, 18).collect();
        Shared {
            cycle: Histogram::new(cycle_buckets.clone(), MS),
            snapshot_update: Histogram::new(cycle_buckets, MS),
            action: Labeled::histograms(&["allocate"], action_buckets, MS),
            stage: Labeled::histograms(&["Predicate", "Scoring"], stage_buckets, MS),
            task_latency: Labeled::histograms(&["Assumed", "Bound"], task_buckets, MS),
            attempts: Labeled::new(
                &["scheduled", "unschedulable", "error"],
                Box::new(AtomicU64::default),
            ),
            binds: Default::default(),
            shard_writes: Default::default(),
            config_reloads: Default::default(),
            event_drops: Default::default(),
            bind_duration: Histogram::new(bind_buckets.clone(), SECONDS),
            condition_write: Histogram::new(bind_buckets, SECONDS),
            // 10 ms .. ~160 s: victims terminate within their grace period.
            preemption_to_bound: Histogram::new(
                exponential_buckets(0.01, 2.0, 15).collect(),
                SECONDS,
            ),
            preemption_failures: AtomicU64::new(0),
            throttle: Labeled::histograms(&["bind", "events"], throttle_buckets, SECONDS),
            leader: AtomicBool::new(false),
            engine: RwLock::new(None),
        }
    }
}

impl Collector for Shared {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        // Upstream's metrics.
        histogram(
            &mut enc,
            "volcano_worker_scheduling_cycle_duration_milliseconds",
            "E2E scheduling latency in milliseconds (one worker cycle)",
            &self.cycle,
        )?;
        histogram(
            &mut enc,
            "volcano_update_snapshot_duration_milliseconds",
            "Update snapshot duration in milliseconds",
            &self.snapshot_update,
        )?;
        histogram_family(
            &mut enc,
            "volcano_action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds",
            "action",
            &self.action,
        )?;
        histogram_family(
            &mut enc,
            "volcano_scheduling_stage_duration_milliseconds",
            "Scheduling stage duration in milliseconds",
            "stage",
            &self.stage,
        )?;
        histogram_family(
            &mut enc,
            "volcano_task_scheduling_latency_milliseconds",
            "Task scheduling latency in milliseconds, from pod creation",
            "stage",
            &self.task_latency,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "volcano_schedule_attempts",
                "Number of attempts to schedule pods, by the result",
                None,
                MetricType::Counter,
            )?;
            let mut err = Ok(());
            self.attempts.for_each(|label, c| {
                if err.is_ok() {
                    err = m.encode_family(&[("result", label)]).and_then(|mut m| {
                        m.encode_counter::<NoLabelSet, _, u64>(&c.load(Relaxed), None)
                    });
                }
            });
            err?;
        }

        // The engine's counters, summed now.
        let source = self
            .engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (s, q) = source.map(|f| f()).unwrap_or_default();
        let counters: [(&str, &str, u64); 19] = [
            (
                "magma_scheduling_attempts",
                "Pods taken by a worker for a scheduling attempt",
                s.attempts,
            ),
            ("magma_claims", "Candidates claimed by the binder", s.claims),
            (
                "magma_conflicts",
                "Candidates lost to another worker's claim",
                s.conflicts,
            ),
            (
                "magma_urgent_requeues",
                "Pods requeued as urgent because every candidate conflicted",
                s.urgent_requeues,
            ),
            (
                "magma_unschedulable",
                "Attempts that found no feasible node",
                s.unschedulable,
            ),
            (
                "magma_snapshot_publications",
                "Snapshots published by the cache",
                s.publications,
            ),
            (
                "magma_bind_intents",
                "Bind intents handed to the bind executor",
                s.bind_intents,
            ),
            (
                "magma_binds_confirmed",
                "Assumed pods confirmed bound by the watch",
                s.binds_confirmed,
            ),
            (
                "magma_bind_failures",
                "Assumed pods dropped after a failed bind",
                s.bind_failures,
            ),
            (
                "magma_status_intents",
                "Event and condition intents emitted",
                s.status_intents,
            ),
            (
                "magma_stale_results",
                "Worker results discarded as stale",
                s.stale_results,
            ),
            (
                "magma_device_conflicts",
                "Claimed decisions voided because the devices of their ResourceClaims (DRA) were taken by a decision applied first",
                s.device_conflicts,
            ),
            (
                "magma_claim_holds",
                "Pods their ResourceClaims (DRA) held back before any node was tried: a claim not created yet, missing, being deleted or being allocated for another pod",
                s.claim_holds,
            ),
            (
                "magma_claim_deallocations",
                "ResourceClaims (DRA) the scheduler deallocated: allocated, reserved for nobody, named by a pod that fits on no node the allocation allows (upstream's DynamicResources PostFilter)",
                s.deallocations,
            ),
            (
                "magma_unchanged_pod_updates",
                "Pending-pod updates ignored because nothing the scheduler reads changed (e.g. its own PodScheduled condition)",
                s.unchanged_updates,
            ),
            (
                "magma_bind_backpressure",
                "Times the engine held pods back because the bind queue's worth of pods were handed off or binding",
                s.bind_backpressure,
            ),
            (
                "magma_preemption_attempts",
                "Unschedulable pods that ran DefaultPreemption (kube-scheduler's scheduler_preemption_attempts_total)",
                s.preemption_attempts,
            ),
            (
                "magma_preemptions",
                "Preemptions decided: a node and its victims chosen, the preemptor nominated there",
                s.preemptions,
            ),
            (
                "magma_preemption_victims",
                "Pods chosen as victims by the preemptions decided",
                s.preemption_victims,
            ),
        ];
        for (name, help, v) in counters {
            enc.encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
        let seconds: [(&str, &str, u64); 2] = [
            (
                "magma_snapshot_publication_seconds",
                "Time spent publishing snapshots",
                s.publish_nanos,
            ),
            (
                "magma_worker_busy_seconds",
                "Time workers spent in allocate and claim",
                s.worker_busy_nanos,
            ),
        ];
        for (name, help, nanos) in seconds {
            enc.encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&(nanos as f64 / SECONDS), None)?;
        }
        enc.encode_descriptor(
            "magma_rejected_pods",
            "Pods the engine rejected as invalid input",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&s.rejected_pods, None)?;
        {
            let mut m = enc.encode_descriptor(
                "magma_queue_pods",
                "Pods in each part of the scheduling queue",
                None,
                MetricType::Gauge,
            )?;
            for (queue, v) in [
                ("active", q.active),
                ("backoff", q.backoff),
                ("unschedulable", q.unschedulable),
                ("gated", q.gated),
                ("in_flight", q.in_flight),
                ("binding", q.binding),
                ("preempting", q.preempting),
            ] {
                m.encode_family(&[("queue", queue)])?
                    .encode_gauge(&(v as u64))?;
            }
        }

        {
            let mut m = enc.encode_descriptor(
                "magma_shard_nodes",
                "Nodes of this scheduler's NodeShard: desired, in the scheduling view, reported in use, draining",
                None,
                MetricType::Gauge,
            )?;
            let g = s.shard;
            for (state, v) in [
                ("desired", g.desired),
                ("in_view", g.view),
                ("in_use", g.in_use),
                ("draining", g.draining),
            ] {
                m.encode_family(&[("state", state)])?
                    .encode_gauge(&(v as u64))?;
            }
        }
        enc.encode_descriptor(
            "magma_shard_missing",
            "1 while soft/hard sharding is on and this scheduler's NodeShard does not exist",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&i64::from(s.shard.missing))?;

        // The adapter's own.
        {
            let mut m = enc.encode_descriptor(
                "magma_shard_status_writes",
                "NodeShard status write attempts by result",
                None,
                MetricType::Counter,
            )?;
            for r in ShardWriteLabel::ALL {
                m.encode_family(&[("result", r.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(
                        &self.shard_writes[r as usize].load(Relaxed),
                        None,
                    )?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "magma_events_dropped",
                "Events dropped because the events queue was full (only with --event-qps below \
                 the default), by event reason",
                None,
                MetricType::Counter,
            )?;
            let d = &self.event_drops;
            for (r, c) in [
                ("Scheduled", &d.scheduled),
                ("FailedScheduling", &d.failed_scheduling),
            ] {
                m.encode_family(&[("reason", r)])?
                    .encode_counter::<NoLabelSet, _, u64>(&c.load(Relaxed), None)?;
            }
        }
        for (name, help, c) in [
            (
                "magma_conditions_dropped",
                "PodScheduled=False writes dropped because their queue was full",
                &self.event_drops.conditions,
            ),
            (
                "magma_status_writes_failed",
                "Conditions and events given up after the API server refused every try",
                &self.event_drops.failed_writes,
            ),
        ] {
            enc.encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&c.load(Relaxed), None)?;
        }
        {
            let mut m = enc.encode_descriptor(
                "magma_status_writes_pending",
                "Conditions and events queued or in flight, by lane (conditions: PodScheduled=False; \
                 events: Scheduled and FailedScheduling)",
                None,
                MetricType::Gauge,
            )?;
            let d = &self.event_drops;
            for (lane, c) in [
                ("conditions", &d.pending_conditions),
                ("events", &d.pending_events),
            ] {
                m.encode_family(&[("lane", lane)])?
                    .encode_gauge(&(c.load(Relaxed) as i64))?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "magma_status_writes_coalesced",
                "Condition and FailedScheduling writes replaced by a newer one for the same pod, \
                 or cancelled by its binding, before they were sent",
                None,
                MetricType::Counter,
            )?;
            m.encode_counter::<NoLabelSet, _, u64>(
                &self.event_drops.coalesced.load(Relaxed),
                None,
            )?;
        }
        {
            let mut m = enc.encode_descriptor(
                "magma_config_reload",
                "Scheduler configuration updates by result (rejected: the previous one stays)",
                None,
                MetricType::Counter,
            )?;
            for (i, r) in ["ok", "rejected"].into_iter().enumerate() {
                m.encode_family(&[("result", r)])?
                    .encode_counter::<NoLabelSet, _, u64>(
                        &self.config_reloads[i].load(Relaxed),
                        None,
                    )?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "magma_bind",
                "Bind requests by outcome",
                None,
                MetricType::Counter,
            )?;
            for o in BindOutcomeLabel::ALL {
                m.encode_family(&[("outcome", o.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(
                        &self.binds[o as usize].load(Relaxed),
                        None,
                    )?;
            }
        }
        histogram(
            &mut enc,
            "magma_bind_duration_seconds",
            "Latency of pods/binding requests",
            &self.bind_duration,
        )?;
        histogram(
            &mut enc,
            "magma_condition_write_seconds",
            "Time from a pod's unschedulable decision to its PodScheduled=False condition written",
            &self.condition_write,
        )?;
        histogram(
            &mut enc,
            "magma_preemption_to_bound_seconds",
            "Time from a preemption decision to its preemptor bound",
            &self.preemption_to_bound,
        )?;
        enc.encode_descriptor(
            "magma_preemption_failures",
            "Preemptions whose API calls failed (the preemptor's nomination is reverted and it backs off)",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&self.preemption_failures.load(Relaxed), None)?;
        histogram_family(
            &mut enc,
            "magma_api_throttle_wait_seconds",
            "Time requests waited for the client-side rate limiter",
            "client",
            &self.throttle,
        )?;
        enc.encode_descriptor(
            "magma_leader",
            "1 while this replica holds the leader lease",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&i64::from(self.leader.load(Relaxed)))?;
        enc.encode_descriptor("magma", "Build information", None, MetricType::Info)?
            .encode_info(&[("version", env!("CARGO_PKG_VERSION"))])?;
        Ok(())
    }
}

fn histogram(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &Histogram,
) -> Result<(), fmt::Error> {
    let (sum, count, buckets) = h.read();
    enc.encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
}

fn histogram_family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    family: &Labeled<Histogram>,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    let mut err = Ok(());
    family.for_each(|value, h| {
        if err.is_ok() {
            let (sum, count, buckets) = h.read();
            err = m
                .encode_family(&[(label, value)])
                .and_then(|mut m| m.encode_histogram::<NoLabelSet>(sum, count, &buckets, None));
        }
    });
    err
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
}

/// A histogram of durations with atomic, striped buckets. Each stripe's row holds one counter
/// per bucket, the `+Inf` overflow and the sum in nanoseconds, padded so that rows of different
/// stripes never share a 128-byte line.
struct Histogram {
    bounds: Arc<[f64]>,
    /// Nanoseconds per unit of the bucket bounds (1e6 for milliseconds).
    unit_nanos: f64,
    row: usize,
    cells: Box<[AtomicU64]>,
}

impl Histogram {
    fn new(bounds: Arc<[f64]>, unit_nanos: f64) -> Self {
        // buckets + overflow + sum, then at least 16 words (128 bytes) of padding.
        let row = (bounds.len() + 2 + 16).div_ceil(16) * 16;
        Histogram {
            bounds,
            unit_nanos,
            row,
            cells: (0..row * STRIPES).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn observe(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let v = nanos as f64 / self.unit_nanos;
        // Go's rule: the first bucket whose upper bound is >= v (the overflow slot if none).
        let i = self.bounds.partition_point(|b| *b < v);
        let base = STRIPE.with(|s| *s) * self.row;
        self.cells[base + i].fetch_add(1, Relaxed);
        self.cells[base + self.bounds.len() + 1].fetch_add(nanos, Relaxed);
    }

    /// (sum in units, count, per-bucket counts ending with `+Inf`). The count is the sum of
    /// the buckets read, so the exposition is always self-consistent.
    fn read(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let n = self.bounds.len();
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .map(|b| (*b, 0))
            .chain(std::iter::once((f64::INFINITY, 0)))
            .collect();
        let mut sum_nanos = 0u64;
        for s in 0..STRIPES {
            let row = &self.cells[s * self.row..];
            for (i, b) in buckets.iter_mut().enumerate() {
                b.1 += row[i].load(Relaxed);
            }
            sum_nanos = sum_nanos.wrapping_add(row[n + 1].load(Relaxed));
        }
        let count = buckets.iter().map(|b| b.1).sum();
        (sum_nanos as f64 / self.unit_nanos, count, buckets)
    }
}

/// A metric per label value: known values are created up front (always exposed, found without
/// a lock); others are added on first use, up to [`MAX_EXTRA_LABELS`].
struct Labeled<T> {
    known: Vec<(&'static str, T)>,
    extra: RwLock<Vec<(Box<str>, Arc<T>)>>,
    make: Box<dyn Fn() -> T + Send + Sync>,
}

impl Labeled<Histogram> {
    fn histograms(known: &[&'static str], bounds: Arc<[f64]>, unit_nanos: f64) -> Self {
        Self::new(
            known,
            Box::new(move || Histogram::new(bounds.clone(), unit_nanos)),
        )
    }
}

impl<T> Labeled<T> {
    fn new(known: &[&'static str], make: Box<dyn Fn() -> T + Send + Sync>) -> Self {
        Labeled {
            known: known.iter().map(|k| (*k, make())).collect(),
            extra: RwLock::new(Vec::new()),
            make,
        }
    }

    fn with(&self, label: &str, f: impl FnOnce(&T)) {
        if let Some((_, t)) = self.known.iter().find(|(k, _)| *k == label) {
            return f(t);
        }
        let found = {
            let extra = self.extra.read().unwrap_or_else(|p| p.into_inner());
            extra
                .iter()
                .find(|(k, _)| &**k == label)
                .map(|(_, t)| t.clone())
        };
        let t = match found {
            Some(t) => t,
            None => {
                let mut extra = self.extra.write().unwrap_or_else(|p| p.into_inner());
                if let Some((_, t)) = extra.iter().find(|(k, _)| &**k == label) {
                    t.clone()
                } else if extra.len() < MAX_EXTRA_LABELS {
                    let t = Arc::new((self.make)());
                    extra.push((label.into(), t.clone()));
                    t
                } else {
                    tracing::debug!(label, "metric label dropped: too many distinct values");
                    return;
                }
            }
        };
        f(&t)
    }

    fn for_each(&self, mut f: impl FnMut(&str, &T)) {
        for (k, t) in &self.known {
            f(k, t);
        }
        let extra = self.extra.read().unwrap_or_else(|p| p.into_inner());
        for (k, t) in extra.iter() {
            f(k, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Duration {
        Duration::from_secs_f64(v / 1000.0)
    }

    #[test]
    fn buckets_follow_go_le_rule() {
        let h = Histogram::new(Arc::from([5.0, 10.0, 20.0].as_slice()), MS);
        for v in [1.0, 5.0, 5.000001, 10.0, 25.0] {
            h.observe(ms(v));
        }
        let (sum, count, b) = h.read();
        assert_eq!(count, 5);
        assert_eq!(
            b.iter().map(|x| x.1).collect::<Vec<_>>(),
            [2, 2, 0, 1],
            "v <= le goes to that bucket; beyond the last goes to +Inf"
        );
        assert!((sum - 46.000001).abs() < 1e-3, "{sum}");
    }

    #[test]
    fn stripes_sum_across_threads() {
        let h = Arc::new(Histogram::new(Arc::from([1.0].as_slice()), SECONDS));
        let threads: Vec<_> = (0..STRIPES * 2)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        h.observe(Duration::from_millis(500));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let (sum, count, b) = h.read();
        assert_eq!(count, 16_000);
        assert_eq!(b[0].1, 16_000);
        assert!((sum - 8000.0).abs() < 1e-6);
    }

    #[test]
    fn extra_labels_are_capped() {
        let l: Labeled<AtomicU64> = Labeled::new(&["a"], Box::new(AtomicU64::default));
        for i in 0..MAX_EXTRA_LABELS + 10 {
            l.with(&format!("x{i}"), |c| {
                c.fetch_add(1, Relaxed);
            });
        }
        l.with("a", |c| {
            c.fetch_add(1, Relaxed);
        });
        let mut n = 0;
        l.for_each(|_, _| n += 1);
        assert_eq!(n, 1 + MAX_EXTRA_LABELS);
    }
}
