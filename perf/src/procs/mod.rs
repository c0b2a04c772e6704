//! Separate processes: the shipped `agent-scheduler` binary against the `kube-sim` binary,
//! each its own process, with this harness as a third (the pod creator and bind watcher). What
//! a user deploying Magma would see, and what it costs: the scheduler's and the simulator's
//! CPU per pod (from `/proc/<pid>/stat`), the scheduler's API requests per pod by verb and
//! resource (the simulator's request record, told apart from the harness's by `User-Agent`),
//! its open sockets, throughput against the API's own ceiling measured in the same run, and
//! created → bound latency.
//!
//! A pod counts as bound when the simulator committed its first binding (the `at` of its
//! [`kube_sim::BindingRecord`]), not when the harness's own watch saw it: at 3,000 pods/s on two
//! CPUs that watch is the slowest of the run and is at times force-closed, and its lag then read
//! as the scheduler's (P50s of 0.7–2.1 s where the bindings were committed in about 0.1 s;
//! BENCHMARKS.md, "History"). The watch still tells the harness when every pod is bound.
//!
//! Scenarios:
//! - **burst**: the scheduler runs and is ready; `pods` pods are created as fast as the
//!   creators go. With `unschedulable_every` = k, every k-th of them asks for more CPU than any
//!   node has: the run ends when the others are bound and each of those has its
//!   `PodScheduled=False` condition, and the report gives the scheduler's decision → condition
//!   written latency (`magma_condition_write_seconds`, from its buckets) and created →
//!   condition committed (the simulator's write record).
//! - **backlog**: `pods` pods are created while no scheduler runs; then it starts. Time from
//!   its start to the last bind, and from its readiness (lists done, leading) to the last
//!   bind: the drain rate against the ceiling.
//!
//! The CPU per pod runs to the end of the scheduler's events tail: after the last bind the
//! harness waits until the scheduler reports nothing left to write
//! (`magma_status_writes_pending`, polled once a second: a scrape is its CPU too), then until
//! both processes are idle. A lane behind its budget sends in batches that cost less than
//! `until_idle`'s threshold, so idleness alone ended the count early.
//!
//! With `pin`, the simulator runs on CPU 0 and the scheduler and the harness on the others
//! (`taskset`), in the ceiling run and the scenario alike, so the API server has the same CPU
//! in both; unpinned, all three share every CPU and the fraction also says how much CPU the
//! scheduler took from the API server.
//!
//! The ceiling ("blast"): before the scenario, `pods` pods for a scheduler nobody runs are
//! created in their own namespace and bound by the harness itself, as fast as `creators`
//! concurrent requests go, over the same transport and with the scheduler's own client set-up
//! (`magma_kube::process::client_for`: HTTP/2 over HTTPS), while the harness watches them as it
//! watches the scenario's pods: the rate the API accepts bindings at. It runs on a simulator
//! of its own, started like the scenario's and stopped before it, so both binding windows
//! meet the API server in the same state: nodes loaded, `pods` pods just created, none bound
//! yet. On one simulator the scenario came second, and kube-sim binds its first window of
//! pods faster than any later one (its heap reuses what the creates freed, then grows, and
//! first-touch page zeroing makes its kubelet's status writes about twice as costly): the same
//! binder run twice bound 0.68–0.79 as fast the second time (BENCHMARKS.md, "History").
//! A second run after the scenario was tried, to bracket it, and dropped: with two to three
//! times the pods stored, and the informer (below) listing them all, it is no like-for-like
//! sample (14–31 % below the first unpinned, 10–13 % above it pinned).
//!
//! That is the backlog's ceiling. A burst cannot bind faster than its pods are created, so its
//! ceiling is the lower of that and the rate its pods were created at (first create sent to
//! last create answered, in the same run; the creates share the API server with the binds). A
//! harness that creates and binds by itself was tried as a burst's ceiling and dropped: it
//! measured the harness's own CPU, not the API's, and came out slower than the scenario.
//!
//! The binding ceiling is a scheduler that takes no time, and such a scheduler still watches
//! pods: during the ceiling run the harness also holds the scheduler's own pod informer (the
//! same field selector, every event decoded as the scheduler decodes it, then dropped), so the
//! API serves that watch in the ceiling as in the scenario. `bare_ceiling` leaves it out (the
//! API's bindings alone, as this harness measured before).
//!
//! The scenario's pods can carry a placement constraint ([`Constraint`]: required hostname
//! anti-affinity, or a hard zone spread over zones the harness labels the nodes with before the
//! scheduler starts), and the scheduler's instructions can be counted over the same span as
//! its CPU (`instructions`: perf's hardware counter, or callgrind where there is none): a
//! figure that does not move with the machine's load.
//!
//! Layout: this module runs the scenario ([`run`]); below it, `process` starts, pins and stops
//! the processes, `load` creates and watches the pods and runs the ceiling, `measure` reads
//! `/proc`, the scheduler's metrics and the simulator's records, `instructions` counts the
//! scheduler's instructions, `report` holds and prints the [`ProcReport`], and `options` the
//! [`ProcOptions`]. None of them uses this module.

pub mod instructions;
mod load;
mod measure;
mod options;
mod process;
mod report;

use crate::report::Latency;
use hdrhistogram::Histogram;
use load::{Tracked, ceiling, create_pods, label_zones, watch_scenario};
use measure::{
    committed_bindings, forced_closes, open_sockets, rss_mib, sim_connections, sim_records,
    sim_stat, until_idle, until_status_written,
};
use process::{
    HARNESS_AGENT, Pinning, admin_fetch, admin_get, start_scheduler, start_sim, wait_ready,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

pub use measure::{context_switches, cpu_time};
pub use options::{Constraint, ProcOptions};
pub use report::{BucketQuantiles, ProcReport};

/// Runs the scenario `o` asks for (module doc): the ceiling on a simulator of its own, then the
/// scheduler and the scenario's pods on another, and reports what it measured.
pub async fn run(o: &ProcOptions) -> anyhow::Result<ProcReport> {
    anyhow::ensure!(
        o.pods > 0 && o.nodes > 0,
        "--pods and --nodes must be positive"
    );
    let dir = std::env::temp_dir().join(format!("magma-procs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pin = if o.pin { Some(Pinning::apply()?) } else { None };
    let sched_cpus = pin.as_ref().map(|p| p.rest.as_str());
    let sim_cpus = pin.as_ref().map(|p| p.sim.as_str());
    // The ceiling on a simulator of its own (module doc), gone before the scenario's starts.
    let ceiling_rate = {
        let dir = dir.join("ceiling");
        std::fs::create_dir_all(&dir)?;
        let mut c = start_sim(o, &dir, sim_cpus).await?;
        let rate = ceiling(o, &c.client).await;
        c.sim.stop();
        rate?
    };
    let mut c = start_sim(o, &dir, sim_cpus).await?;
    let client = c.client.clone();
    if let Constraint::ZoneSpread { zones } = o.constraint {
        label_zones(&client, zones, o.creators).await?;
    }
    let counter = o.instructions.map(instructions::Counter::resolve);
    anyhow::ensure!(
        o.constraint != Constraint::HostnameAntiAffinity || o.pods <= o.nodes,
        "hostname anti-affinity places one pod per node: --pods must not exceed --nodes"
    );

    // The bind watch over the scenario's pods.
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let conditioned: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch_task = watch_scenario(&client, "default", bound.clone(), Some(conditioned.clone()));
    let every = o.unschedulable_every.filter(|&k| k > 0);
    let is_unschedulable = move |i: usize| every.is_some_and(|k| (i + 1).is_multiple_of(k));
    let unschedulable = (0..o.pods).filter(|&i| is_unschedulable(i)).count();
    let expected = o.pods - unschedulable;

    let mut requests_before = sim_records(&client, "requests").await?.len();
    let mut connections_before = sim_connections(&client).await;
    let create_scenario_pods = || {
        create_pods(
            &client,
            "default",
            "procs-",
            "agent-scheduler",
            o.pods,
            o.creators,
            Some(Tracked {
                created: created.clone(),
                unschedulable: &is_unschedulable,
                constraint: o.constraint,
            }),
        )
    };
    // Burst: the simulator's cost includes the creates (a real API server serves them too);
    // backlog: from the scheduler's start, which lists the backlog.
    let mut ready_at = None;
    let mut created_rate = None;
    let mut sched_switches0 = 0;
    let (mut sched, admin, start, sched_cpu0, sim_cpu_start, span) = if o.backlog {
        create_scenario_pods().await?;
        let sim_cpu0 = cpu_time(c.sim.pid())?;
        let (s, admin) = start_scheduler(o, counter, &c, &dir, sched_cpus)?;
        let start = Instant::now();
        // From its start, as its CPU.
        let span = counter
            .map(|k| instructions::start(k, s.pid(), &dir, false))
            .transpose()?;
        // Readiness, polled beside the drain (the scheduler binds from the moment it is).
        ready_at = Some(tokio::spawn(async move {
            while admin_get(admin, "/readyz").await != Some(200) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Instant::now()
        }));
        (s, admin, start, Duration::ZERO, sim_cpu0, span)
    } else {
        let (mut s, admin) = start_scheduler(o, counter, &c, &dir, sched_cpus)?;
        wait_ready(&mut s, admin).await?;
        // Idle before the burst: its start-up (lists, caches) is not the pods' cost.
        let cpu0 = until_idle(s.pid(), Duration::from_secs(10)).await;
        let span = counter
            .map(|k| instructions::start(k, s.pid(), &dir, true))
            .transpose()?;
        sched_switches0 = context_switches(s.pid());
        requests_before = sim_records(&client, "requests").await?.len();
        connections_before = sim_connections(&client).await;
        let sim_cpu0 = cpu_time(c.sim.pid())?;
        let start = Instant::now();
        create_scenario_pods().await?;
        created_rate = Some(o.pods as f64 / start.elapsed().as_secs_f64().max(1e-6));
        (s, admin, start, cpu0, sim_cpu0, span)
    };
    let bar = crate::progress::bar(o.pods as u64, o.progress);
    let deadline = Instant::now() + o.timeout;
    loop {
        let n = bound.lock().await.len();
        let c = conditioned.lock().await.len();
        bar.set_position((n + c) as u64);
        if (n >= expected && c >= unschedulable) || Instant::now() > deadline {
            break;
        }
        sched.check_alive()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    // Until both are idle again: the scheduler's events and conditions count too.
    until_status_written(admin, Duration::from_secs(30)).await;
    let sched_cpu1 = until_idle(sched.pid(), Duration::from_secs(30)).await;
    // Before the metrics scrape below, which is the scheduler's work too but not the pods'.
    let counted = span.map(instructions::finish);
    let sched_switches1 = context_switches(sched.pid());
    let sim_cpu1 = until_idle(c.sim.pid(), Duration::from_secs(10)).await;
    let metrics = admin_fetch(admin, "/metrics").await.map(|(_, t)| t);
    let rss = rss_mib(sched.pid());
    let sockets = open_sockets(sched.pid());
    let requests = sim_records(&client, "requests").await?;
    let connections_after = sim_connections(&client).await;
    let forced_closed = sim_stat(&client, "watchesForcedClosed").await.unwrap_or(0);
    let bindings = sim_records(&client, "bindings").await?;
    // The unschedulable pods' condition patches, committed (their only status writes).
    let condition_writes: Vec<serde_json::Value> = if unschedulable > 0 {
        sim_records(&client, "writes")
            .await?
            .into_iter()
            .filter(|w| w["verb"] == "patch" && w["resource"] == "pods/status" && w["code"] == 200)
            .collect()
    } else {
        Vec::new()
    };
    sched.stop();
    watch_task.abort();

    let created = created.lock().await;
    let seen = bound.lock().await;
    let conditioned = conditioned.lock().await;
    let condition_seen_ms = (unschedulable > 0)
        .then(|| -> anyhow::Result<Latency> {
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
            // When each condition was committed (not when the harness's watch, the slowest of
            // a burst, saw it), as for the bindings.
            let committed = committed_bindings(&condition_writes, "default", &conditioned);
            for (name, t) in committed.iter() {
                if let Some(at) = created.get(name) {
                    h.record(t.saturating_duration_since(*at).as_nanos().max(1) as u64)?;
                }
            }
            Ok(Latency::from_histogram(&h))
        })
        .transpose()?;
    let metric_sum = |series: &str| -> u64 {
        metrics.as_deref().map_or(0, |t| {
            t.lines()
                .filter_map(|l| l.strip_prefix(series))
                .filter_map(|v| v.rsplit(' ').next()?.trim().parse::<u64>().ok())
                .sum()
        })
    };
    let bound = committed_bindings(&bindings, "default", &seen);
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut last = start;
    for (name, t) in bound.iter() {
        if let Some(at) = created.get(name) {
            h.record(t.saturating_duration_since(*at).as_nanos().max(1) as u64)?;
        }
        last = last.max(*t);
    }
    let n = bound.len().max(1) as f64;
    let elapsed = last
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-6);
    let mut by: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0usize;
    let mut by_protocol: BTreeMap<String, u64> = BTreeMap::new();
    for r in requests.iter().skip(requests_before) {
        if r["user_agent"].as_str() == Some(HARNESS_AGENT) {
            continue;
        }
        let sub = r["subresource"].as_str().unwrap_or("");
        let key = format!(
            "{} {}{}{}",
            r["verb"].as_str().unwrap_or("?"),
            r["resource"].as_str().unwrap_or("?"),
            if sub.is_empty() { "" } else { "/" },
            sub
        );
        *by.entry(key).or_default() += 1.0;
        *by_protocol
            .entry(r["http_version"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
        total += 1;
    }
    for v in by.values_mut() {
        *v /= n;
    }
    let mut seen = std::collections::HashSet::new();
    let duplicate_binds = bindings
        .iter()
        .filter(|b| b["namespace"] == "default")
        .filter(|b| !seen.insert(b["name"].as_str().unwrap_or("").to_owned()))
        .count() as u64;
    let ready = match ready_at {
        Some(t) if t.is_finished() => Some(t.await?),
        Some(t) => {
            t.abort();
            anyhow::bail!("the scheduler bound the backlog but never reported ready");
        }
        None => None,
    };
    let throughput = match ready {
        Some(r) => bound.len() as f64 / last.saturating_duration_since(r).as_secs_f64().max(1e-6),
        None => bound.len() as f64 / elapsed,
    };
    let mut report = ProcReport {
        scenario: if o.backlog { "backlog" } else { "burst" }.into(),
        transport: if o.tls { "HTTPS" } else { "HTTP" }.into(),
        nodes: o.nodes,
        pods: o.pods,
        workers: o.workers,
        bound: bound.len(),
        throughput_pods_per_s: throughput,
        ceiling_pods_per_s: ceiling_rate,
        created_pods_per_s: created_rate,
        fraction_of_ceiling: throughput
            / created_rate
                .map_or(ceiling_rate, |c| c.min(ceiling_rate))
                .max(1e-9),
        ceiling_with_informer: !o.bare_ceiling,
        drain_s: o.backlog.then_some(elapsed),
        ready_s: ready.map(|r| r.saturating_duration_since(start).as_secs_f64()),
        sim_cpus: pin.map(|p| p.sim).unwrap_or_default(),
        latency_ms: Latency::from_histogram(&h),
        scheduler_cpu_ms_per_pod: sched_cpu1.saturating_sub(sched_cpu0).as_secs_f64() * 1e3 / n,
        sim_cpu_ms_per_pod: sim_cpu1.saturating_sub(sim_cpu_start).as_secs_f64() * 1e3 / n,
        scheduler_context_switches_per_pod: sched_switches1.saturating_sub(sched_switches0) as f64
            / n,
        scheduler_rss_mib: rss,
        requests_per_pod: by,
        scheduler_requests_per_pod: total as f64 / n,
        scheduler_requests_by_protocol: by_protocol,
        scheduler_open_sockets: sockets,
        new_connections_per_pod: connections_before
            .zip(connections_after)
            .map(|(a, b)| b.saturating_sub(a) as f64 / n),
        watches_forced_closed: forced_closed,
        forced_closes_by_watch: BTreeMap::new(),
        duplicate_binds,
        lost_pods: (expected - bound.len().min(expected)) as u64,
        unschedulable,
        conditions_seen: conditioned.len(),
        condition_write_ms: metrics
            .as_deref()
            .and_then(|t| BucketQuantiles::from_metrics(t, "magma_condition_write_seconds", 1e3)),
        condition_seen_ms,
        events_dropped: metric_sum("magma_events_dropped_total{"),
        constraint: o.constraint.describe(),
        instructions_counter: counter.map(|k| k.describe().to_owned()),
        scheduler_instructions_per_pod: counted
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|&i| instructions::per_pod(i, bound.len())),
        instructions_error: counted.and_then(|r| r.err().map(|e| format!("{e:#}"))),
    };
    c.sim.stop();
    report.forced_closes_by_watch = forced_closes(&c.sim.log);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}
