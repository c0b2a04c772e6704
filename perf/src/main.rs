//! `magma-perf`: run a scenario and print throughput, latency and integrity; sweep worker and
//! candidate counts; print Markdown tables from report JSON; draw SVG plots.
//!
//! ```text
//! magma-perf burst --nodes 5000 --pods 200000 --workers 2          # + baseline on 2,000 pods
//! magma-perf burst --baseline-pods 0                               # baseline on every pod
//! magma-perf burst --baseline-only --baseline-pods 5000
//! magma-perf steady --rate 10000 --json steady.json                # no baseline by default
//! magma-perf sweep burst --workers 1,2,4,8 --candidates 1,3,5 --json sweep.json
//! magma-perf table burst.json steady.json                          # Markdown rows
//! magma-perf plot --sweep sweep.json --latency burst.json --out-dir .
//! magma-perf scheduler-perf misc/performance-config.yaml --testcase SchedulingBasic --workload 5000Nodes_10000Pods --json out.json
//! ```

use clap::{Args, Parser, Subcommand};
use magma_perf::plan::Plan;
use magma_perf::report::{json, markdown_table};
use magma_perf::runner::{Compare, DEFAULT_BASELINE_PODS, RunOptions, measure};
use magma_perf::scenario::{Params, Scenario, build};
use std::path::PathBuf;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "magma-perf",
    about = "Run Magma scheduling scenarios on an in-process simulated cluster"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// N pods at once onto an empty cluster.
    Burst(RunArgs),
    /// Poisson arrivals at a fixed offered rate (latency below saturation).
    Steady(RunArgs),
    /// Short-lived agent pods that finish after a random lifetime and free their node.
    Churn(RunArgs),
    /// Nodes pre-filled to random levels; small pods fill the gaps.
    Fragmented(RunArgs),
    /// Cluster pre-filled to 95%, more pods than fit: conflicts expected, no livelock allowed.
    NearFull(RunArgs),
    /// Several pod sizes and priorities, taints and selectors on part of the cluster.
    Mixed(RunArgs),
    /// Run one plan at every (workers, candidates) combination and print the scaling table.
    Sweep(SweepArgs),
    /// Print report JSON files (single runs or sweep arrays) as one Markdown table.
    Table(TableArgs),
    /// Draw throughput-vs-workers.svg and/or latency-cdf.svg from report JSON.
    Plot(PlotArgs),
    /// End to end: the agent-scheduler (library entry point) against the HTTP API simulator
    /// (or a real cluster with --kubeconfig); pods created through the API, created→bound
    /// measured from a watch.
    E2e(E2eArgs),
    /// End to end as deployed: the shipped agent-scheduler and kube-sim binaries as separate
    /// processes (HTTPS with --tls); scheduler and simulator CPU per pod from /proc, requests
    /// per pod, throughput against the API ceiling measured in the same run.
    Processes(ProcArgs),
    /// POST bindings as fast as possible against the simulator: the API's own ceiling.
    Blast(BlastArgs),
    /// Wake-up latency on the simulator: every node full, pods waiting for room, blockers
    /// deleted one by one; room freed → waiting pod bound.
    Wakeup(WakeupArgs),
    /// Replay kube-scheduler's scheduler_perf workloads (a performance-config.yaml) against
    /// Magma and report SchedulingThroughput as upstream computes it.
    SchedulerPerf(SchedulerPerfArgs),
}

#[derive(Debug, Args)]
struct SchedulerPerfArgs {
    /// A scheduler_perf `performance-config.yaml` (template paths resolve against its directory).
    file: PathBuf,
    /// Only the test case with this name (e.g. SchedulingBasic).
    #[arg(long)]
    testcase: Option<String>,
    /// Only the workload with this name (e.g. 5000Nodes_10000Pods, or TestCase/Workload).
    #[arg(long)]
    workload: Option<String>,
    /// Label filter as upstream's -perf-scheduling-label-filter (e.g. performance,-integration-test);
    /// ignored for a workload named by --workload.
    #[arg(long)]
    labels: Option<String>,
    /// spec.schedulerName of every created pod, and the in-process scheduler's name.
    #[arg(long, default_value = "agent-scheduler")]
    scheduler_name: String,
    /// Run against this cluster instead of an embedded kube-sim; the scheduler is expected to
    /// run there already unless --in-process-scheduler.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: start Magma in this process against that cluster.
    #[arg(long)]
    in_process_scheduler: bool,
    /// `--scheduler-worker-count` of the in-process scheduler (Magma's default: 1)
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The in-process scheduler's bind rate limit (scheduler_perf gives kube-scheduler 5000).
    #[arg(long, default_value_t = 5000.0)]
    kube_api_qps: f64,
    #[arg(long, default_value_t = 5000)]
    kube_api_burst: u32,
    /// The in-process scheduler's events budget (default: --kube-api-qps, as Magma's
    /// `--event-qps`). Conditions, which `barrier stageRequirement: Attempted` waits for, go on
    /// the main budget.
    #[arg(long)]
    event_qps: Option<f64>,
    /// Default: --kube-api-burst.
    #[arg(long)]
    event_burst: Option<u32>,
    /// Seconds each wait (createPods, barrier) may take, as upstream's 10 minutes.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Write the report as JSON to this file (`-`: stdout, instead of the text summary).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Resolve and check the workloads (params, templates, support) without running them.
    #[arg(long)]
    dry_run: bool,
    /// Write the in-process scheduler's metrics at the end of each workload to
    /// `<dir>/<testcase>_<workload>.prom`.
    #[arg(long)]
    metrics_dir: Option<PathBuf>,
    /// Multiply each workload's measured pods (and what counts by the same param) by N, so a
    /// workload too short for upstream's 1 s samples yields a SchedulingThroughput; reported as
    /// scaled. Default: the workloads as written.
    #[arg(long, value_name = "N")]
    scale_pods: Option<f64>,
}

fn scheduler_perf(a: SchedulerPerfArgs) -> anyhow::Result<()> {
    let opts = magma_perf::scheduler_perf::Options {
        test_case: a.testcase,
        workload: a.workload,
        labels: a.labels,
        scheduler_name: a.scheduler_name,
        kubeconfig: a.kubeconfig,
        in_process_scheduler: a.in_process_scheduler,
        workers: a.workers,
        kube_api_qps: a.kube_api_qps,
        kube_api_burst: a.kube_api_burst,
        event_qps: a.event_qps.unwrap_or(a.kube_api_qps),
        event_burst: a.event_burst.unwrap_or(a.kube_api_burst),
        timeout: Duration::from_secs(a.timeout),
        dry_run: a.dry_run,
        metrics_dir: a.metrics_dir,
        scale_pods: a.scale_pods,
        ..magma_perf::scheduler_perf::Options::new(a.file)
    };
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(magma_perf::scheduler_perf::run(&opts))?;
    let text = serde_json::to_string_pretty(&report)? + "\n";
    match a.json.as_deref() {
        Some(p) if p == std::path::Path::new("-") => print!("{text}"),
        Some(p) => {
            std::fs::write(p, text)?;
            report.print();
        }
        None => report.print(),
    }
    let failed: Vec<&str> = report
        .workloads
        .iter()
        .filter(|w| w.status == magma_perf::scheduler_perf::Status::Error)
        .map(|w| w.name.as_str())
        .collect();
    anyhow::ensure!(failed.is_empty(), "workloads failed: {}", failed.join(", "));
    Ok(())
}

#[derive(Debug, Args)]
struct WakeupArgs {
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Pods waiting for room (one deletion measured each).
    #[arg(long, default_value_t = 200)]
    waiting: usize,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
struct E2eArgs {
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    #[arg(long, default_value_t = 20_000)]
    pods: usize,
    /// Offered creation rate in pods/s (default: as fast as the creators go).
    #[arg(long)]
    rate: Option<f64>,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Concurrent pod-creation requests.
    #[arg(long, default_value_t = 64)]
    creators: usize,
    /// Run against this cluster instead of the simulator (nodes must exist, e.g. KWOK).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Seconds to wait for every pod to be bound.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Schedulers side by side, each on a disjoint NodeShard (needs --sharding soft|hard).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// Sharding mode of every scheduler: none, soft or hard.
    #[arg(long, default_value = "none")]
    sharding: magma_engine::ShardingMode,
    /// Each scheduler's bind rate limit (upstream's --kube-api-qps, default 2000).
    #[arg(long, default_value_t = 2000.0)]
    kube_api_qps: f64,
    /// Each scheduler's bind burst (upstream's --kube-api-burst, default 2000).
    #[arg(long, default_value_t = 2000)]
    kube_api_burst: u32,
    /// Of --pods, this many (spread through the burst) fit nowhere: report their created →
    /// PodScheduled=False time and the Scheduled events' tail after the last bind.
    #[arg(long, default_value_t = 0)]
    unschedulable: usize,
}

#[derive(Debug, Args)]
struct ProcArgs {
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// `--scheduler-worker-count` (upstream's and the chart's default: one, on the driver's
    /// thread)
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Concurrent pod-creation (and ceiling binding) requests.
    #[arg(long, default_value_t = 64)]
    creators: usize,
    /// Create the pods while no scheduler runs, then start it: time to drain the backlog.
    #[arg(long)]
    backlog: bool,
    /// Serve the simulator over HTTPS (self-signed; the scheduler verifies it).
    #[arg(long)]
    tls: bool,
    /// Give the simulator CPU 0 and the scheduler and this harness the others (taskset), in
    /// the ceiling run and the scenario alike: the API server has the same CPU in both, as on
    /// a cluster where the scheduler does not share the API server's cores.
    #[arg(long)]
    pin: bool,
    /// Ceiling runs without the scheduler's pod informer: the API's bindings alone (by default
    /// the ceiling is a scheduler that takes no time, and it watches pods as the scheduler does).
    #[arg(long)]
    bare_ceiling: bool,
    /// The agent-scheduler binary (default: beside this one).
    #[arg(long)]
    scheduler_bin: Option<PathBuf>,
    /// The kube-sim binary (default: beside this one).
    #[arg(long)]
    sim_bin: Option<PathBuf>,
    /// A/B: run the scenario alternately with `--scheduler-bin` (the baseline) and this
    /// scheduler binary (the candidate), `--rounds` times each, and report each build's CPU per
    /// pod and the paired ratios (one session, one machine: the only comparison that holds).
    #[arg(long)]
    compare: Option<PathBuf>,
    /// Rounds of an A/B (`--compare`); the order alternates each round.
    #[arg(long, default_value_t = 3, requires = "compare")]
    rounds: usize,
    #[arg(long, default_value_t = 2000.0)]
    kube_api_qps: f64,
    #[arg(long, default_value_t = 2000)]
    kube_api_burst: u32,
    /// Seconds to wait for every pod to be bound.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Every k-th pod of the burst asks for more CPU than any node has: the report gives its
    /// condition's latency (the scheduler's decision → written, and created → seen).
    #[arg(long)]
    unschedulable_every: Option<usize>,
    /// One more flag for the scheduler (repeatable), e.g. `--scheduler-arg=--event-qps=0.001`.
    #[arg(long = "scheduler-arg", allow_hyphen_values = true)]
    scheduler_args: Vec<String>,
    /// The scenario pods' placement constraint: none, hostname-anti-affinity (one pod per
    /// node: --pods ≤ --nodes) or zone-spread[:ZONES] (maxSkew 1 over ZONES zones, default 10,
    /// the nodes labelled round-robin by the harness).
    #[arg(long, default_value = "none")]
    constraint: magma_perf::procs::Constraint,
    /// Count the scheduler's instructions per pod over the span its CPU is measured: perf
    /// (`perf stat -e instructions:u`, hardware counters), callgrind (the scheduler under
    /// valgrind: deterministic, ~50× slower, rates meaningless) or auto (perf where it counts).
    #[arg(long, value_name = "COUNTER")]
    instructions: Option<magma_perf::procs::instructions::Counter>,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct BlastArgs {
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    #[arg(long, default_value_t = 20_000)]
    pods: usize,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

/// What shapes the plan.
#[derive(Debug, Args)]
struct PlanArgs {
    #[arg(long)]
    nodes: Option<usize>,
    #[arg(long)]
    pods: Option<usize>,
    /// Offered arrival rate in pods/s (steady, churn).
    #[arg(long)]
    rate: Option<f64>,
    /// Mean pod lifetime in seconds (churn).
    #[arg(long)]
    lifetime: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pre-fill every node to this fraction (0..1) of its CPU and memory before the run
    /// (burst, steady, churn, mixed; near-full's level, default 0.95).
    #[arg(long)]
    fill: Option<f64>,
    /// Node CPU in millicores (default 32000, KWOK's node).
    #[arg(long)]
    node_cpu_milli: Option<i64>,
    /// Pod CPU request in millicores (burst, steady, churn: default 250).
    #[arg(long)]
    pod_cpu_milli: Option<i64>,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    plan: PlanArgs,
    /// Workers (one runs on the engine's driver thread; more are threads of their own).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// candidateNodeCount.
    #[arg(long, default_value_t = 3)]
    candidates: usize,
    /// Pin worker threads to cores (one worker: the driver that runs it).
    #[arg(long)]
    pin: bool,
    /// Score with binpack (`mostrequested.weight: 10`) instead of the default spread.
    #[arg(long)]
    binpack: bool,
    /// Seconds to wait after the last arrival for pending pods before ending the run.
    #[arg(long, default_value_t = 120.0)]
    drain_timeout: f64,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Also run the baseline reference scheduler on the same plan. On by default for scenarios
    /// whose pods all arrive at once (burst, fragmented, near-full, mixed); off for steady and
    /// churn, whose throughput is capped by the offered rate.
    #[arg(long, conflicts_with = "no_baseline")]
    baseline: bool,
    /// Do not run the baseline.
    #[arg(long)]
    no_baseline: bool,
    /// Run only the baseline.
    #[arg(long, conflicts_with = "no_baseline")]
    baseline_only: bool,
    /// The baseline schedules only the first N pods of the plan (0 = all of them); its
    /// throughput in pods/s is compared with Magma's on the whole plan.
    #[arg(long, default_value_t = DEFAULT_BASELINE_PODS)]
    baseline_pods: usize,
}

#[derive(Debug, Args)]
struct SweepArgs {
    #[arg(value_enum)]
    scenario: Scenario,
    #[command(flatten)]
    plan: PlanArgs,
    /// Worker counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    workers: Vec<usize>,
    /// candidateNodeCount values, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    candidates: Vec<usize>,
    #[arg(long)]
    pin: bool,
    /// Score with binpack (`mostrequested.weight: 10`) instead of the default spread.
    #[arg(long)]
    binpack: bool,
    /// Write the runs as a JSON array to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct TableArgs {
    /// Report JSON files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the sweep scaling table instead of the run table.
    #[arg(long)]
    sweep: bool,
}

#[derive(Debug, Args)]
struct PlotArgs {
    /// Sweep JSON (array of runs) → throughput-vs-workers.svg.
    #[arg(long)]
    sweep: Option<PathBuf>,
    /// Run JSON files (one run each, or arrays) → latency-cdf.svg, one line per run.
    #[arg(long, num_args = 1..)]
    latency: Vec<PathBuf>,
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
}

fn params(s: Scenario, a: &PlanArgs) -> anyhow::Result<Params> {
    let mut p = s.defaults();
    if let Some(n) = a.nodes {
        p.nodes = n;
    }
    if let Some(n) = a.pods {
        p.pods = n;
    }
    if let Some(r) = a.rate {
        anyhow::ensure!(r > 0.0, "--rate must be positive");
        p.rate = Some(r);
    }
    if let Some(l) = a.lifetime {
        anyhow::ensure!(l > 0.0, "--lifetime must be positive");
        p.lifetime_mean = Duration::from_secs_f64(l);
    }
    if let Some(f) = a.fill {
        anyhow::ensure!((0.0..1.0).contains(&f), "--fill must be within 0..1");
        p.fill = Some(f);
    }
    if let Some(c) = a.node_cpu_milli {
        anyhow::ensure!(c > 0, "--node-cpu-milli must be positive");
        p.shape.cpu_milli = c;
    }
    if let Some(c) = a.pod_cpu_milli {
        anyhow::ensure!(c > 0, "--pod-cpu-milli must be positive");
        p.pod_cpu_milli = c;
    }
    p.seed = a.seed;
    Ok(p)
}

fn plan(s: Scenario, a: &PlanArgs) -> anyhow::Result<(Params, Plan)> {
    let p = params(s, a)?;
    eprintln!(
        "building plan: {} {} nodes, {} pods ...",
        s.name(),
        p.nodes,
        p.pods
    );
    let plan = build(s, &p);
    Ok((p, plan))
}

fn check_counts(workers: &[usize], candidates: &[usize]) -> anyhow::Result<()> {
    anyhow::ensure!(
        !workers.is_empty() && workers.iter().all(|&w| w > 0),
        "--workers must be greater than 0"
    );
    anyhow::ensure!(
        !candidates.is_empty() && candidates.iter().all(|k| (1..=64).contains(k)),
        "--candidates must be within 1..=64"
    );
    Ok(())
}

fn write_json(path: &Option<PathBuf>, v: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, serde_json::to_string_pretty(v)? + "\n")?;
    }
    Ok(())
}

fn run_one(s: Scenario, a: RunArgs) -> anyhow::Result<()> {
    check_counts(&[a.workers], &[a.candidates])?;
    let (p, plan) = plan(s, &a.plan)?;
    let limit = (a.baseline_pods > 0).then_some(a.baseline_pods);
    if a.baseline_only {
        let b = magma_perf::baseline::run(&plan, limit)?;
        println!(
            "{:<11} nodes={:<6} baseline on {} pods: {:.0} pods/s  ({} bound, {} unschedulable, cycle p50 {:.3} ms p99 {:.3} ms)",
            s.name(),
            p.nodes,
            b.pods,
            b.throughput_pods_per_s,
            b.bound,
            b.unschedulable,
            b.cycle_latency_ms.p50,
            b.cycle_latency_ms.p99
        );
        write_json(
            &a.json,
            &serde_json::json!({
                "scenario": s.name(),
                "nodes": p.nodes,
                "pods": p.pods,
                "baseline_throughput_pods_per_s": b.throughput_pods_per_s,
                "baseline": b,
            }),
        )?;
        anyhow::ensure!(
            b.overcommitted_nodes == 0,
            "baseline integrity violated: {} node(s) over allocatable",
            b.overcommitted_nodes
        );
        return Ok(());
    }
    let with_baseline = if a.baseline {
        true
    } else {
        !a.no_baseline && p.rate.is_none()
    };
    let opts = RunOptions {
        workers: a.workers,
        candidates: a.candidates,
        pin: a.pin,
        progress: !a.quiet,
        drain_timeout: Duration::from_secs_f64(a.drain_timeout.max(0.0)),
        binpack: a.binpack,
    };
    let compare = if with_baseline {
        Compare::WithBaseline(limit)
    } else {
        Compare::MagmaOnly
    };
    let report = measure(s.name(), &plan, &opts, compare)?;
    write_json(&a.json, &report)?;
    report.print();
    let v = report.violations();
    anyhow::ensure!(v.is_empty(), "integrity violated: {}", v.join("; "));
    Ok(())
}

fn sweep(a: SweepArgs) -> anyhow::Result<()> {
    check_counts(&a.workers, &a.candidates)?;
    let (_, plan) = plan(a.scenario, &a.plan)?;
    let base = RunOptions {
        pin: a.pin,
        progress: !a.quiet,
        binpack: a.binpack,
        ..Default::default()
    };
    let runs = magma_perf::sweep::sweep(
        a.scenario.name(),
        &plan,
        &a.workers,
        &a.candidates,
        &base,
        |r| {
            eprintln!(
                "  workers={} K={}: {:.0} pods/s, p99 {:.3} ms",
                r.workers, r.candidates, r.throughput_pods_per_s, r.latency_ms.p99
            )
        },
    )?;
    write_json(&a.json, &runs)?;
    let values: Vec<serde_json::Value> = runs
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    print!("{}", magma_perf::sweep::markdown(&values));
    let bad: Vec<String> = runs
        .iter()
        .filter(|r| !r.violations().is_empty())
        .map(|r| {
            format!(
                "workers={} K={}: {}",
                r.workers,
                r.candidates,
                r.violations().join("; ")
            )
        })
        .collect();
    anyhow::ensure!(bad.is_empty(), "integrity violated: {}", bad.join(" | "));
    Ok(())
}

fn e2e(a: E2eArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.rate.is_none_or(|r| r > 0.0), "--rate must be positive");
    let opts = magma_perf::e2e::E2eOptions {
        nodes: a.nodes,
        pods: a.pods,
        rate: a.rate,
        workers: a.workers,
        creators: a.creators,
        kubeconfig: a.kubeconfig,
        namespace: a.namespace,
        timeout: Duration::from_secs(a.timeout),
        progress: !a.quiet,
        instances: a.instances,
        sharding: a.sharding,
        kube_api_qps: a.kube_api_qps,
        kube_api_burst: a.kube_api_burst,
        unschedulable: a.unschedulable,
        ..Default::default()
    };
    opts.validate()?;
    let rt = tokio::runtime::Runtime::new()?;
    let report = rt.block_on(magma_perf::e2e::run(&opts))?;
    report.print();
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    let v = report.violations();
    anyhow::ensure!(v.is_empty(), "integrity violated: {}", v.join("; "));
    Ok(())
}

fn processes(a: ProcArgs) -> anyhow::Result<()> {
    use magma_perf::procs::{ProcOptions, run};
    let o = ProcOptions {
        nodes: a.nodes,
        pods: a.pods,
        workers: a.workers,
        creators: a.creators,
        backlog: a.backlog,
        tls: a.tls,
        pin: a.pin,
        bare_ceiling: a.bare_ceiling,
        scheduler_bin: a
            .scheduler_bin
            .unwrap_or_else(|| ProcOptions::sibling("agent-scheduler")),
        sim_bin: a
            .sim_bin
            .unwrap_or_else(|| ProcOptions::sibling("kube-sim")),
        kube_api_qps: a.kube_api_qps,
        kube_api_burst: a.kube_api_burst,
        timeout: Duration::from_secs(a.timeout),
        progress: !a.quiet,
        unschedulable_every: a.unschedulable_every,
        scheduler_args: a.scheduler_args,
        constraint: a.constraint,
        instructions: a.instructions,
    };
    let rt = tokio::runtime::Runtime::new()?;
    if let Some(candidate) = a.compare {
        let report = rt.block_on(magma_perf::ab::compare(&o, candidate, a.rounds))?;
        report.print();
        if let Some(path) = &a.json {
            std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        }
        return Ok(());
    }
    let report = rt.block_on(run(&o))?;
    report.print();
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    anyhow::ensure!(
        report.duplicate_binds == 0 && report.lost_pods == 0,
        "integrity violated"
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (s, a) = match cli.cmd {
        Cmd::Burst(a) => (Scenario::Burst, a),
        Cmd::Steady(a) => (Scenario::Steady, a),
        Cmd::Churn(a) => (Scenario::Churn, a),
        Cmd::Fragmented(a) => (Scenario::Fragmented, a),
        Cmd::NearFull(a) => (Scenario::NearFull, a),
        Cmd::Mixed(a) => (Scenario::Mixed, a),
        Cmd::Sweep(a) => return sweep(a),
        Cmd::E2e(a) => return e2e(a),
        Cmd::Processes(a) => return processes(a),
        Cmd::SchedulerPerf(a) => return scheduler_perf(a),
        Cmd::Wakeup(a) => {
            let opts = magma_perf::wakeup::WakeupOptions {
                nodes: a.nodes,
                waiting: a.waiting,
                workers: a.workers,
                ..Default::default()
            };
            let rt = tokio::runtime::Runtime::new()?;
            let report = rt.block_on(magma_perf::wakeup::run(&opts))?;
            report.print();
            if let Some(path) = &a.json {
                std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
            }
            return Ok(());
        }
        Cmd::Blast(a) => {
            let rt = tokio::runtime::Runtime::new()?;
            let rate = rt.block_on(magma_perf::e2e::blast(a.nodes, a.pods, a.concurrency))?;
            println!(
                "bind blaster: {rate:.0} bindings/s ({} pods, concurrency {})",
                a.pods, a.concurrency
            );
            return Ok(());
        }
        Cmd::Table(t) => {
            let mut runs = Vec::new();
            for f in &t.files {
                runs.extend(json::load(f)?);
            }
            if t.sweep {
                print!("{}", magma_perf::sweep::markdown(&runs));
            } else {
                print!("{}", markdown_table(&runs));
            }
            return Ok(());
        }
        Cmd::Plot(p) => {
            anyhow::ensure!(
                p.sweep.is_some() || !p.latency.is_empty(),
                "nothing to plot: give --sweep and/or --latency"
            );
            std::fs::create_dir_all(&p.out_dir)?;
            if let Some(f) = &p.sweep {
                let out = p.out_dir.join("throughput-vs-workers.svg");
                magma_perf::plot::throughput_vs_workers(&json::load(f)?, &out)?;
                eprintln!("wrote {}", out.display());
            }
            if !p.latency.is_empty() {
                let mut runs = Vec::new();
                for f in &p.latency {
                    runs.extend(json::load(f)?);
                }
                let out = p.out_dir.join("latency-cdf.svg");
                magma_perf::plot::latency_cdf(&runs, &out)?;
                eprintln!("wrote {}", out.display());
            }
            return Ok(());
        }
    };
    run_one(s, a)
}
