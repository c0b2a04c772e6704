//! Replays kube-scheduler's own benchmark, scheduler_perf (`test/integration/scheduler_perf` in
//! kubernetes/kubernetes), against Magma: its unmodified `performance-config.yaml` files
//! ([`config`]), their templates ([`template`], [`objects`]) and `$params`, the opcodes
//! `createNodes`, `createNamespaces`, `createPods` (`collectMetrics`,
//! `skipWaitToCompletion`, `steadyState`), `createPodSets`, `churn`, `barrier`, `deletePods`, `sleep`,
//! `startCollectingMetrics`/`stopCollectingMetrics`, `createAny` and `updateAny`
//! ([`executor`]), and the DRA ones, `createResourceDriver` and `allocResourceClaims`
//! ([`dra`]), with every
//! pod's `schedulerName` set to Magma's, and SchedulingThroughput computed as upstream's
//! `throughputCollector` does ([`throughput`]) from a pod watch ([`tracker`]).
//!
//! Before a workload runs, [`support::check`] decides what of it can be replayed: opcodes,
//! fields and feature gates this harness or Magma do not implement, and preemption, are
//! reported per workload and the workload is **not run**; a part that cannot change where the
//! measured pods go (Service churn on kube-sim, which serves no Services) is left out and the
//! workload marked **partial**. Nothing is skipped silently.
//!
//! ## Targets
//!
//! - Default: for each workload a fresh embedded kube-sim (no nodes) and Magma's scheduler in
//!   process against it (`magma_kube::app::spawn`, as `e2e`), as upstream starts a fresh API
//!   server and scheduler per workload. Like upstream's, that cluster runs no kubelet: bound
//!   pods stay Pending (kube-sim's simulated kubelet is off), while its resource-claim
//!   controller runs, as upstream starts kube-controller-manager's for its DRA workloads.
//! - `kubeconfig`: any cluster. The scheduler is expected to run there already under
//!   `scheduler_name`, unless `in_process_scheduler` starts Magma in this process against it.
//!   The namespaces `namespace-<op>` must not exist; what a workload created (namespaces,
//!   nodes, CSINodes) is deleted after it.
//!
//! ## Differences from upstream, all on the harness side
//!
//! Node prepare strategies are applied in the node's create instead of a patch right after it
//! (and to the op's own nodes; upstream patches the `nextNodeIndex`-th nodes of the sorted node
//! list, which with random names are not necessarily the new ones). Nodes without
//! `status.allocatable` are sent with it set to their capacity, as the real API server
//! defaults it (kube-sim does not). `deletePods` without a rate sends one DELETE per pod
//! (upstream: one DeleteCollection). Churn failures are counted and reported.
//! `createResourceDriver` returns once its slices are created (upstream
//! waits until kube-scheduler's informer holds them; Magma's cache cannot be seen from here);
//! `allocResourceClaims` allocates with Magma's structured allocator instead of
//! kube-scheduler's (see [`dra`]).

pub mod config;
pub mod dra;
pub mod executor;
pub mod objects;
pub mod scale;
pub mod support;
pub mod template;
pub mod throughput;
pub mod tracker;

use anyhow::Context;
use config::{ConfigFile, Unsupported};
use executor::{ChurnStat, Executor, Measurement};
use kube_sim::{Sim, SimConfig};
use magma_kube::app::RunSummary;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to replay and against what.
#[derive(Debug, Clone)]
pub struct Options {
    pub file: PathBuf,
    /// Only test cases with this name.
    pub test_case: Option<String>,
    /// Only workloads with this name (`TestCase/Workload` also accepted).
    pub workload: Option<String>,
    /// upstream's label filter (`performance,-integration-test`); applies to workloads that
    /// `workload` did not name explicitly.
    pub labels: Option<String>,
    pub scheduler_name: String,
    pub kubeconfig: Option<PathBuf>,
    /// With `kubeconfig`: start Magma in this process against that cluster.
    pub in_process_scheduler: bool,
    pub workers: usize,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    /// The in-process scheduler's events budget (`--event-qps/--event-burst`; Magma's default:
    /// the main client's, `kube_api_qps`/`kube_api_burst`). Conditions go on the main budget.
    pub event_qps: f64,
    pub event_burst: u32,
    /// Per wait (a createPods op, a barrier), as upstream's 10 minutes.
    pub timeout: Duration,
    /// Resolve and check only.
    pub dry_run: bool,
    /// Where to write the in-process scheduler's final metrics per workload
    /// (`<testcase>_<workload>.prom`).
    pub metrics_dir: Option<PathBuf>,
    /// `--scale-pods`: multiply each workload's measured pods by this (see [`scale`]); `None`
    /// runs the workloads as written.
    pub scale_pods: Option<f64>,
}

impl Options {
    pub fn new(file: impl Into<PathBuf>) -> Options {
        Options {
            file: file.into(),
            test_case: None,
            workload: None,
            labels: None,
            scheduler_name: "agent-scheduler".into(),
            kubeconfig: None,
            in_process_scheduler: false,
            workers: 1,
            kube_api_qps: 5000.0,
            kube_api_burst: 5000,
            event_qps: 5000.0,
            event_burst: 5000,
            timeout: Duration::from_secs(600),
            dry_run: false,
            metrics_dir: None,
            scale_pods: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Ran completely.
    Ran,
    /// Ran with the `partial` parts left out (they cannot change the measured placement).
    Partial,
    /// Not run: see `unsupported`.
    NotRun,
    /// Started and failed: see `error`.
    Error,
    /// `dry_run`: resolved and checked only.
    Checked,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadReport {
    /// `<testcase>/<workload>`.
    pub name: String,
    pub test_case: String,
    pub workload: String,
    pub labels: Vec<String>,
    /// The params the workload ran with (scaled ones included).
    pub params: std::collections::BTreeMap<String, serde_json::Value>,
    /// `--scale-pods`: the factor the measured pods were multiplied by; `None`: upstream's
    /// workload as written.
    pub pod_scale: Option<f64>,
    /// What that scaling changed (`measurePods 2000 → 4000`).
    pub scaled: Vec<String>,
    pub status: Status,
    pub unsupported: Vec<Unsupported>,
    pub partial: Vec<Unsupported>,
    pub notes: Vec<String>,
    /// The file's `threshold` for this workload (SchedulingThroughput Average, pods/s).
    pub threshold: Option<f64>,
    /// Every measurement's Average ≥ threshold (`None`: no threshold, or nothing measured).
    pub threshold_passed: Option<bool>,
    pub measurements: Vec<Measurement>,
    pub churn: Vec<ChurnStat>,
    /// Status writes (conditions, events) the in-process scheduler shed over its
    /// `event_qps` budget (`magma_events_dropped_total`); `None` without an in-process one.
    pub status_writes_shed: Option<u64>,
    /// Of those, conditions (`PodScheduled=False` + FailedScheduling): a pod left without one.
    pub conditions_dropped: Option<u64>,
    /// Condition writes replaced by a newer one for the same pod or cancelled by its binding.
    pub condition_writes_coalesced: Option<u64>,
    /// The in-process scheduler's preemptions, when it tried any.
    pub preemption: Option<PreemptionStats>,
    /// The cluster's ResourceClaims after the last op, when it has slices or claims.
    pub dra: Option<dra::DraSummary>,
    pub error: Option<String>,
    pub duration_s: f64,
}

/// What the in-process scheduler's preemption did over a workload (its metrics).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionStats {
    /// Unschedulable pods that ran DefaultPreemption (`magma_preemption_attempts_total`).
    pub attempts: u64,
    /// Preemptions decided, and their victims.
    pub decided: u64,
    pub victims: u64,
    /// Decision → preemptor bound, ms (`magma_preemption_to_bound_seconds`: each quantile the
    /// upper bound of its bucket).
    pub to_bound_ms: Option<crate::procs::BucketQuantiles>,
}

impl PreemptionStats {
    /// From the scheduler's metrics exposition; `None` when it never tried to preempt.
    pub fn from_metrics(text: &str) -> Option<PreemptionStats> {
        let counter = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map_or(0, |v| v as u64)
        };
        let attempts = counter("magma_preemption_attempts_total");
        (attempts > 0).then(|| PreemptionStats {
            attempts,
            decided: counter("magma_preemptions_total"),
            victims: counter("magma_preemption_victims_total"),
            to_bound_ms: crate::procs::BucketQuantiles::from_metrics(
                text,
                "magma_preemption_to_bound_seconds",
                1e3,
            ),
        })
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub file: String,
    pub target: String,
    pub scheduler_name: String,
    pub workers: usize,
    pub event_qps: f64,
    pub event_burst: u32,
    pub workloads: Vec<WorkloadReport>,
}

impl Report {
    pub fn print(&self) {
        println!(
            "scheduler-perf {} on {} (scheduler {})",
            self.file, self.target, self.scheduler_name
        );
        for w in &self.workloads {
            let status = match w.status {
                Status::Ran => "ran",
                Status::Partial => "PARTIAL",
                Status::NotRun => "NOT RUN",
                Status::Error => "ERROR",
                Status::Checked => "checked",
            };
            println!("  {:<60} {status} ({:.1} s)", w.name, w.duration_s);
            if let Some(f) = w.pod_scale {
                println!(
                    "    SCALED (--scale-pods {f}, not upstream's workload as written): {}",
                    w.scaled.join(", ")
                );
            }
            let scaled = w
                .pod_scale
                .map_or(String::new(), |f| format!(" [measured pods scaled ×{f}]"));
            for m in &w.measurements {
                match &m.scheduling_throughput {
                    Some(s) => println!(
                        "    {}: {} pods, SchedulingThroughput avg {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1} pods/s ({} samples){}{scaled}{}",
                        m.name,
                        m.pods_measured,
                        s.average,
                        s.perc50,
                        s.perc90,
                        s.perc99,
                        s.samples,
                        match (w.threshold, w.threshold_passed) {
                            (Some(t), Some(true)) => format!("; threshold {t}: pass"),
                            (Some(t), Some(false)) => format!("; threshold {t}: FAIL"),
                            _ => String::new(),
                        },
                        m.waiting.map_or(String::new(), |q| format!(
                            "; waiting to be scheduled at the samples: median {}, most {}",
                            q.median, q.max
                        ))
                    ),
                    None if m.pods_measured == 0 => println!(
                        "    {}: no pod scheduled in {:.2} s: no SchedulingThroughput",
                        m.name, m.duration_s
                    ),
                    None => println!(
                        "    {}: {} pods in {:.2} s, too fast for two 1 s samples: no SchedulingThroughput (as upstream){}",
                        m.name,
                        m.pods_measured,
                        m.duration_s,
                        if w.pod_scale.is_some() {
                            scaled.clone()
                        } else {
                            "; --scale-pods N multiplies the measured pods".into()
                        }
                    ),
                }
            }
            if let Some(p) = &w.preemption {
                println!(
                    "    preemption: {} attempts, {} decided, {} victims; decision→bound ms (bucket bounds) {}",
                    p.attempts,
                    p.decided,
                    p.victims,
                    p.to_bound_ms.as_ref().map_or("-".to_owned(), |q| format!(
                        "P50 ≤{} P99 ≤{} ({} bound)",
                        q.p50, q.p99, q.count
                    ))
                );
            }
            if let Some(d) = &w.dra {
                let claims: Vec<String> = d
                    .claims
                    .iter()
                    .map(|(ns, (n, a))| format!("{ns} {a}/{n}"))
                    .collect();
                println!(
                    "    dra: {} slices, {} devices; claims allocated (per namespace) {}; {} devices allocated{}; {} bound pods with claims{}",
                    d.slices,
                    d.devices,
                    if claims.is_empty() {
                        "-".into()
                    } else {
                        claims.join(", ")
                    },
                    d.devices_allocated,
                    if d.shared_devices.is_empty() {
                        String::new()
                    } else {
                        format!(", ALLOCATED TWICE: {:?}", d.shared_devices)
                    } + &if d.overcommitted_shares.is_empty() {
                        String::new()
                    } else {
                        format!(", SHARES OVER CAPACITY: {:?}", d.overcommitted_shares)
                    },
                    d.bound_pods_with_claims,
                    if d.bound_pods_off_their_claims.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", BOUND WITHOUT THEIR CLAIMS ALLOCATED THERE: {:?}",
                            d.bound_pods_off_their_claims
                        )
                    },
                );
            }
            for u in &w.unsupported {
                println!("    unsupported: {}: {}", u.what, u.reason);
            }
            for u in &w.partial {
                println!("    left out: {}: {}", u.what, u.reason);
            }
            for c in &w.churn {
                println!(
                    "    churn {} ({}): {} created, {} deleted, {} failed{}",
                    c.template,
                    c.kind,
                    c.created,
                    c.deleted,
                    c.failed,
                    c.first_error
                        .as_ref()
                        .map(|e| format!(" (first error: {e})"))
                        .unwrap_or_default()
                );
            }
            if let Some(n) = w.status_writes_shed.filter(|n| *n > 0) {
                let c = w.conditions_dropped.unwrap_or(0);
                println!(
                    "    the scheduler shed {n} status writes over its --event-qps budget ({} Scheduled events, {c} conditions)",
                    n - c
                );
            }
            if let Some(n) = w.condition_writes_coalesced.filter(|n| *n > 0) {
                println!(
                    "    {n} condition writes were replaced by a newer one for the same pod or cancelled by its binding"
                );
            }
            if let Some(e) = &w.error {
                println!("    error: {e}");
            }
        }
    }
}

/// The workloads `opts` selects, in file order.
fn selected<'a>(
    file: &'a ConfigFile,
    opts: &Options,
) -> Vec<(&'a config::TestCase, &'a config::Workload)> {
    let mut out = Vec::new();
    for tc in &file.test_cases {
        if opts.test_case.as_ref().is_some_and(|n| n != &tc.name) {
            continue;
        }
        for w in &tc.workloads {
            let named = opts
                .workload
                .as_ref()
                .map(|n| *n == w.name || *n == format!("{}/{}", tc.name, w.name));
            if named == Some(false) {
                continue;
            }
            let mut labels = tc.labels.clone();
            labels.extend(w.labels.iter().cloned());
            if named.is_none()
                && let Some(f) = &opts.labels
                && !config::labels_match(f, &labels)
            {
                continue;
            }
            out.push((tc, w));
        }
    }
    out
}

pub async fn run(opts: &Options) -> anyhow::Result<Report> {
    anyhow::ensure!(opts.workers > 0, "--workers must be greater than 0");
    anyhow::ensure!(
        opts.kube_api_qps > 0.0 && opts.kube_api_burst > 0,
        "--kube-api-qps and --kube-api-burst must be positive"
    );
    anyhow::ensure!(
        opts.event_qps > 0.0 && opts.event_burst > 0,
        "--event-qps and --event-burst must be positive"
    );
    anyhow::ensure!(
        !opts.in_process_scheduler || opts.kubeconfig.is_some(),
        "--in-process-scheduler only applies with --kubeconfig (the simulator always gets one)"
    );
    let file = config::load(&opts.file)?;
    let chosen = selected(&file, opts);
    anyhow::ensure!(
        !chosen.is_empty(),
        "{}: no workload matches (test case {:?}, workload {:?}, labels {:?})",
        opts.file.display(),
        opts.test_case,
        opts.workload,
        opts.labels
    );
    let mut report = Report {
        file: opts.file.display().to_string(),
        target: match &opts.kubeconfig {
            Some(p) => format!("kubeconfig {}", p.display()),
            None => "embedded kube-sim".into(),
        },
        scheduler_name: opts.scheduler_name.clone(),
        workers: opts.workers,
        event_qps: opts.event_qps,
        event_burst: opts.event_burst,
        workloads: Vec::new(),
    };
    for (tc, w) in chosen {
        let started = Instant::now();
        let mut labels = tc.labels.clone();
        labels.extend(w.labels.iter().cloned());
        let scaled = opts
            .scale_pods
            .map(|f| scale::scale_measured_pods(tc, w, f))
            .transpose();
        let (scaled, scale_error) = match scaled {
            Ok(s) => (s, None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let (tc, w) = scaled
            .as_ref()
            .map_or((tc, w), |s| (&s.test_case, &s.workload));
        let mut wr = WorkloadReport {
            name: format!("{}/{}", tc.name, w.name),
            test_case: tc.name.clone(),
            workload: w.name.clone(),
            labels,
            params: w.params.clone(),
            pod_scale: opts.scale_pods,
            scaled: scaled
                .as_ref()
                .map(|s| s.changes.clone())
                .unwrap_or_default(),
            status: Status::NotRun,
            unsupported: Vec::new(),
            partial: Vec::new(),
            notes: Vec::new(),
            threshold: config::threshold(w, &file.topic),
            threshold_passed: None,
            measurements: Vec::new(),
            churn: Vec::new(),
            status_writes_shed: None,
            preemption: None,
            dra: None,
            conditions_dropped: None,
            condition_writes_coalesced: None,
            error: None,
            duration_s: 0.0,
        };
        match config::resolve(&file, tc, w) {
            _ if scale_error.is_some() => {
                wr.status = Status::Error;
                wr.error = scale_error;
            }
            Err(e) => {
                wr.status = Status::Error;
                wr.error = Some(format!("{e:#}"));
            }
            Ok((ops, unsupported)) => {
                let f = support::check(tc, w, &ops, opts.kubeconfig.is_none());
                wr.unsupported = unsupported;
                wr.unsupported.extend(f.unsupported);
                wr.partial = f.partial;
                wr.notes = f.notes;
                if !wr.unsupported.is_empty() {
                    wr.status = Status::NotRun;
                } else if opts.dry_run {
                    wr.status = Status::Checked;
                } else {
                    eprintln!("scheduler-perf: running {}", wr.name);
                    let (outcome, extras) = run_workload(opts, &wr.name, &ops).await;
                    let summary = extras.scheduler;
                    if let (Some(dir), Some((_, metrics))) = (&opts.metrics_dir, &summary) {
                        let (file, text) = match opts.scale_pods {
                            None => (
                                dir.join(format!("{}_{}.prom", tc.name, w.name)),
                                metrics.clone(),
                            ),
                            Some(f) => (
                                dir.join(format!("{}_{}_scaled-x{f}.prom", tc.name, w.name)),
                                format!(
                                    "# magma-perf scheduler-perf --scale-pods {f}: measured pods scaled, not upstream's workload as written ({})\n{metrics}",
                                    wr.scaled.join(", ")
                                ),
                            ),
                        };
                        if let Err(e) =
                            std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&file, text))
                        {
                            eprintln!("scheduler-perf: writing {}: {e}", file.display());
                        }
                    }
                    wr.dra = extras.dra;
                    wr.status_writes_shed = summary.as_ref().map(|s| s.0.status_dropped);
                    wr.conditions_dropped = summary.as_ref().map(|s| s.0.conditions_dropped);
                    wr.condition_writes_coalesced =
                        summary.as_ref().map(|s| s.0.conditions_coalesced);
                    wr.preemption = summary.and_then(|s| PreemptionStats::from_metrics(&s.1));
                    match outcome {
                        Ok((measurements, churn)) => {
                            wr.measurements = measurements;
                            for c in &churn {
                                if c.created == 0
                                    && c.failed + u64::from(c.first_error.is_some()) > 0
                                    && !wr.partial.iter().any(|p| p.what.contains(&c.template))
                                {
                                    wr.partial.push(Unsupported {
                                        what: format!("churn of {} ({})", c.kind, c.template),
                                        reason: format!(
                                            "no object could be created: {}",
                                            c.first_error.clone().unwrap_or_default()
                                        ),
                                    });
                                }
                            }
                            wr.churn = churn;
                            wr.status = if wr.partial.is_empty() {
                                Status::Ran
                            } else {
                                Status::Partial
                            };
                        }
                        Err(e) => {
                            wr.status = Status::Error;
                            wr.error = Some(format!("{e:#}"));
                        }
                    }
                }
            }
        }
        if let Some(t) = wr.threshold {
            let avgs: Vec<f64> = wr
                .measurements
                .iter()
                .filter_map(|m| m.scheduling_throughput.map(|s| s.average))
                .collect();
            if !avgs.is_empty() {
                wr.threshold_passed = Some(avgs.iter().all(|a| *a >= t));
            }
        }
        wr.duration_s = started.elapsed().as_secs_f64();
        report.workloads.push(wr);
    }
    Ok(report)
}

async fn start_scheduler(
    opts: &Options,
    cfg: kube::Config,
) -> anyhow::Result<magma_kube::app::SchedulerHandle> {
    use magma_kube::app::Settings;
    let base = Settings::new(cfg);
    let settings = Settings {
        workers: opts.workers,
        scheduler_name: opts.scheduler_name.clone(),
        bind: magma_kube::bind::BindConfig {
            qps: opts.kube_api_qps,
            burst: opts.kube_api_burst,
            ..base.bind.clone()
        },
        event_qps: opts.event_qps,
        event_burst: opts.event_burst,
        ..base
    };
    crate::e2e::start_in_process(settings).await
}

type Outcome = anyhow::Result<(Vec<Measurement>, Vec<ChurnStat>)>;

/// What a workload's run gives besides its outcome: the in-process scheduler's run summary
/// (its status writes) and last metrics, and the cluster's claims after the last op.
#[derive(Default)]
struct Extras {
    scheduler: Option<(RunSummary, String)>,
    dra: Option<dra::DraSummary>,
}

/// Runs the ops.
async fn run_workload(opts: &Options, name: &str, ops: &[config::Op]) -> (Outcome, Extras) {
    let mut extras = Extras::default();
    let r = run_workload_inner(opts, name, ops, &mut extras).await;
    (r, extras)
}

async fn run_workload_inner(
    opts: &Options,
    name: &str,
    ops: &[config::Op],
    extras: &mut Extras,
) -> Outcome {
    let (sim, kubeconfig) = match &opts.kubeconfig {
        Some(p) => (
            None,
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        ),
        None => {
            let sim = Sim::start(SimConfig {
                nodes: 0,
                history: 1_000_000,
                // As scheduler_perf's own API server (`mustSetupCluster`): without the Priority
                // admission plugin its pod templates' `spec.priority` (pod-high-priority.yaml:
                // `priority: 10`, no class) is kept rather than refused with a 403. The other
                // two change nothing in kube-sim.
                disable_admission_plugins: ["ServiceAccount", "TaintNodesByCondition", "Priority"]
                    .map(String::from)
                    .to_vec(),
                // scheduler_perf runs no kubelet: bound pods stay Pending, with no status write
                // of their own (a write and a watch event per pod the scheduler would not see
                // there).
                running_delay: None,
                ..SimConfig::default()
            })
            .await?;
            let y = sim.kubeconfig_yaml();
            (Some(sim), y)
        }
    };
    let (cfg, client) = crate::e2e::client_from(&kubeconfig, true).await?;
    let scheduler = if sim.is_some() || opts.in_process_scheduler {
        Some(start_scheduler(opts, cfg).await?)
    } else {
        None
    };
    let tracker = tracker::Tracker::new();
    let watch = tracker.spawn_watch(client.clone());
    let mut ex = Executor::new(
        client.clone(),
        tracker,
        &opts.scheduler_name,
        opts.timeout,
        name,
    );
    let mut result = async {
        for (i, op) in ops.iter().enumerate() {
            ex.run_op(i, op).await.with_context(|| format!("op {i}"))?;
        }
        anyhow::Ok(())
    }
    .await;
    let churn = match ex.finish().await {
        Ok(c) => c,
        Err(e) => {
            result = result.and(Err(e));
            Vec::new()
        }
    };
    extras.dra = match dra::summary(&client).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scheduler-perf: no DRA summary: {e:#}");
            None
        }
    };
    if sim.is_none() {
        ex.cleanup().await;
    }
    watch.abort();
    if let Some(sched) = scheduler {
        let metrics = sched.observer().metrics_text();
        if let Ok(s) = sched.stop().await {
            extras.scheduler = Some((s, metrics));
        }
    }
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    result.map(|()| (ex.measurements, churn))
}
