//! Runs a [`Plan`] against the engine on an in-process simulated cluster.
//!
//! The runner plays the API server: it creates nodes and pre-fill pods, creates the planned
//! pods at their arrival times, answers every bind intent at once (success, then the pod shows
//! up bound on the "watch"), completes and deletes short-lived pods when their lifetime ends,
//! and keeps its own ledger of what is bound where — independent of the engine — to check
//! integrity at the end: no node over allocatable, every pod bound exactly once or reported
//! unschedulable, nothing lost.

use crate::clock::RealClock;
use crate::plan::Plan;
use crate::report::{Latency, Report, latency_cdf, load_average};
use hdrhistogram::Histogram;
use magma_engine::core::{BindResult, Input, Intent};
use magma_engine::model::{
    Interner, PodPhase, ResourceList, ResourceRegistry, compile_node, effective_requests,
};
use magma_engine::{Engine, EngineOptions, Profile};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub workers: usize,
    pub candidates: usize,
    pub pin: bool,
    /// Stop waiting this long after the last arrival if pods are still pending. Pods the engine
    /// still holds then (queued, or claimed and not yet answered) are reported as
    /// `pending_at_end`, not as lost.
    pub drain_timeout: Duration,
    /// Draw a progress bar on stderr (hidden when stderr is not a terminal).
    pub progress: bool,
    /// Score with binpack (`nodeorder` `mostrequested.weight: 10`, the other weights at their
    /// defaults) instead of the default spread.
    pub binpack: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            workers: 1,
            candidates: 3,
            pin: false,
            drain_timeout: Duration::from_secs(120),
            progress: false,
            binpack: false,
        }
    }
}

#[derive(Default)]
struct Ledger {
    registry: ResourceRegistry,
    /// node name → (allocatable, used)
    nodes: HashMap<String, (ResourceList, ResourceList)>,
    /// uid → node
    bound: HashMap<Arc<str>, String>,
    overcommitted: HashSet<String>,
    duplicate_binds: u64,
}

fn add(list: &mut ResourceList, other: &ResourceList, sign: i64) {
    for &(s, a) in other {
        match list.iter_mut().find(|(x, _)| *x == s) {
            Some((_, v)) => *v += sign * a,
            None => list.push((s, sign * a)),
        }
    }
}

impl Ledger {
    fn place(&mut self, uid: Arc<str>, node: &str, req: &ResourceList) {
        if self.bound.contains_key(&uid) {
            self.duplicate_binds += 1;
            return;
        }
        let Some((alloc, used)) = self.nodes.get_mut(node) else {
            return;
        };
        add(used, req, 1);
        for &(s, u) in used.iter() {
            let a = alloc.iter().find(|(x, _)| *x == s).map_or(0, |(_, a)| *a);
            if u > a {
                self.overcommitted.insert(node.to_owned());
            }
        }
        self.bound.insert(uid, node.to_owned());
    }

    fn release(&mut self, uid: &str, req: &ResourceList) {
        if let Some(node) = self.bound.remove(uid)
            && let Some((_, used)) = self.nodes.get_mut(&node)
        {
            add(used, req, -1);
        }
    }
}

/// Read this process's resident set size.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

pub fn run(plan: &Plan, opts: &RunOptions, mut profile: Profile) -> anyhow::Result<Report> {
    profile.candidate_node_count = opts.candidates;
    if opts.binpack {
        profile.weights.most_allocated = 10;
    }
    let clock = Arc::new(RealClock::new());
    let engine = Engine::start(
        EngineOptions {
            workers: opts.workers,
            pin_workers: opts.pin,
            profile,
            ..Default::default()
        },
        clock.clone(),
    )?;
    let h = engine.handle();

    // Independent ledger of node capacity.
    let mut ledger = Ledger::default();
    let mut interner = Interner::default();
    for n in &plan.nodes {
        let c = compile_node(n, &mut interner, &mut ledger.registry)?;
        ledger
            .nodes
            .insert(n.name.clone(), (c.allocatable.clone(), ResourceList::new()));
    }
    let mut requests: Vec<ResourceList> = Vec::with_capacity(plan.pods.len());
    for p in &plan.pods {
        let mut r = effective_requests(&mut ledger.registry, &p.input, false)?;
        r.push((magma_engine::model::PODS, 1));
        requests.push(r);
    }
    let index: HashMap<Arc<str>, usize> = plan
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| (Arc::from(p.input.uid.as_str()), i))
        .collect();

    // What the harness itself holds (plan, ledger, indexes) before the engine gets any input.
    let harness_rss = rss_bytes();
    h.send(Input::NodeReset(plan.nodes.clone()));
    for f in &plan.prefill {
        let mut r = effective_requests(&mut ledger.registry, &f.input, false)?;
        r.push((magma_engine::model::PODS, 1));
        ledger.place(
            Arc::from(f.input.uid.as_str()),
            f.input.node_name.as_deref().unwrap_or(""),
            &r,
        );
        h.send(Input::PodApply(f.input.clone()));
    }
    // Wait for the cache to have every node.
    let wait_start = Instant::now();
    while engine.snapshot().nodes < plan.nodes.len() {
        if wait_start.elapsed() > Duration::from_secs(120) {
            anyhow::bail!("engine did not load {} nodes", plan.nodes.len());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let startup = wait_start.elapsed();
    let stats0 = engine.stats();

    let mut e2e = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut cycle = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut reported: HashSet<Arc<str>> = HashSet::new();
    let mut completions: BinaryHeap<std::cmp::Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut deleted = 0usize;
    let mut next = 0usize;
    let total = plan.pods.len();
    let start = Instant::now();
    let mut last_bind = start;
    // Start-up figure: caches synced (every node loaded) → first pod claimed.
    let mut first_claim: Option<Duration> = None;
    let mut last_progress = start;
    let bar = crate::progress::bar(total as u64, opts.progress);
    let last_arrival = plan.pods.last().map_or(Duration::ZERO, |p| p.arrival);
    let deadline = start + last_arrival + opts.drain_timeout;

    loop {
        let now = Instant::now();
        // Arrivals due now.
        while next < total && start + plan.pods[next].arrival <= now {
            h.send(Input::PodApply(plan.pods[next].input.clone()));
            next += 1;
        }
        // Completions due now: the pod succeeds (watch update), then it is deleted.
        while let Some(std::cmp::Reverse((t, i))) = completions.peek().copied() {
            if t > now {
                break;
            }
            completions.pop();
            let p = &plan.pods[i];
            ledger.release(&p.input.uid, &requests[i]);
            h.send(Input::PodDelete {
                uid: p.input.uid.clone(),
            });
            deleted += 1;
        }
        // Intents: wait briefly for the first one, then take what is ready.
        let mut wait = Duration::from_millis(2);
        if next < total {
            wait = wait.min((start + plan.pods[next].arrival).saturating_duration_since(now));
        }
        if let Some(std::cmp::Reverse((t, _))) = completions.peek() {
            wait = wait.min(t.saturating_duration_since(now));
        }
        let mut handled = 0;
        let mut pending = engine.intents().recv_timeout(wait).ok();
        while let Some(intent) = pending.take() {
            handled += 1;
            match intent {
                Intent::Bind(b) => {
                    let Some(&i) = index.get(&*b.pod.uid) else {
                        continue;
                    };
                    let already = ledger.bound.contains_key(&*b.pod.uid);
                    ledger.place(b.pod.uid.clone(), &b.node, &requests[i]);
                    let result = if already {
                        BindResult::AlreadyBound
                    } else {
                        BindResult::Bound
                    };
                    h.send(Input::BindOutcome {
                        uid: b.pod.uid.to_string(),
                        result: result.clone(),
                    });
                    if result == BindResult::Bound {
                        reported.remove(&b.pod.uid);
                        let mut echo = plan.pods[i].input.clone();
                        echo.node_name = Some(b.node.to_string());
                        echo.phase = PodPhase::Running;
                        h.send(Input::PodApply(echo));
                        e2e.record(b.claimed.0.saturating_sub(b.arrived.0).max(1))?;
                        cycle.record(b.claimed.0.saturating_sub(b.popped.0).max(1))?;
                        last_bind = Instant::now();
                        first_claim
                            .get_or_insert_with(|| last_bind.saturating_duration_since(start));
                        if let Some(l) = plan.pods[i].lifetime {
                            completions.push(std::cmp::Reverse((last_bind + l, i)));
                        }
                    }
                }
                Intent::Status(s) => {
                    reported.insert(s.uid.clone());
                }
                Intent::Error(e) => eprintln!("engine rejected input: {e}"),
                // The server's side of a preemption: the victims go at once.
                Intent::Preempt(p) => {
                    for v in &p.victims {
                        if let Some(&i) = index.get(&*v.uid) {
                            ledger.release(&v.uid, &requests[i]);
                        }
                        h.send(Input::PodDelete {
                            uid: v.uid.to_string(),
                        });
                    }
                    h.send(Input::PreemptionDone {
                        uid: p.preemptor.uid.to_string(),
                        result: Ok(()),
                    });
                }
                // The in-process cluster runs unsharded engines.
                Intent::ShardStatus(_) | Intent::ListNodePods(_) | Intent::Deallocate(_) => {}
            }
            if handled < 4096 {
                pending = engine.intents().try_recv().ok();
            }
        }
        let bound_ever = e2e.len() as usize;
        // `bound_ever + reported.len()` bounds the settled count from above; count exactly
        // (O(reported)) only once that bound says the run may be done.
        let mut settled = bound_ever + reported.len();
        if settled >= total {
            settled = bound_ever
                + reported
                    .iter()
                    .filter(|u| !ledger.bound.contains_key(&***u))
                    .count();
        }
        if !bar.is_hidden() && now.duration_since(last_progress) > Duration::from_millis(200) {
            last_progress = now;
            bar.set_position(settled as u64);
            bar.set_message(format!(
                "created {next}  bound {bound_ever}  unschedulable {}  running {}",
                settled - bound_ever,
                ledger.bound.len().saturating_sub(plan.prefill.len()),
            ));
        }
        if next == total && settled >= total && completions.is_empty() {
            break;
        }
        if now > deadline {
            break;
        }
    }
    bar.finish_and_clear();
    let elapsed = last_bind
        .saturating_duration_since(start)
        .max(Duration::from_micros(1));
    let stats = engine.stats();
    let rss = rss_bytes();
    let core = engine.shutdown();
    let audit = core.audit();
    let bound = e2e.len();
    let unschedulable = reported
        .iter()
        .filter(|u| !ledger.bound.contains_key(&***u))
        .count() as u64;
    // Pods neither bound nor reported: still held by the engine (the run timed out), or lost.
    let pending = plan
        .pods
        .iter()
        .filter(|p| {
            let uid = p.input.uid.as_str();
            !ledger.bound.contains_key(uid) && !reported.contains(uid)
        })
        .filter(|p| {
            let uid = p.input.uid.as_str();
            core.queue().get(uid).is_some() || core.cache().placement(uid).is_some()
        })
        .count() as u64;
    let lost = (total as u64).saturating_sub(bound.min(total as u64) + unschedulable + pending);
    let lat = |h: &Histogram<u64>| Latency::from_histogram(h);
    Ok(Report {
        nodes: plan.nodes.len(),
        pods: total,
        workers: opts.workers,
        candidates: opts.candidates,
        throughput_pods_per_s: bound as f64 / elapsed.as_secs_f64(),
        elapsed_s: elapsed.as_secs_f64(),
        bound,
        latency_ms: lat(&e2e),
        cycle_latency_ms: lat(&cycle),
        conflicts: stats.conflicts - stats0.conflicts,
        urgent_requeues: stats.urgent_requeues - stats0.urgent_requeues,
        unschedulable,
        overcommitted_nodes: ledger.overcommitted.len() as u64 + audit.len() as u64,
        nodes_used: ledger.bound.values().collect::<HashSet<_>>().len() as u64,
        lost_pods: lost,
        pending_at_end: pending,
        duplicate_binds: ledger.duplicate_binds,
        rss_bytes: rss,
        harness_rss_bytes: harness_rss,
        publications: stats.publications - stats0.publications,
        publish_us_avg: if stats.publications > stats0.publications {
            (stats.publish_nanos - stats0.publish_nanos) as f64
                / (stats.publications - stats0.publications) as f64
                / 1000.0
        } else {
            0.0
        },
        completed_pods: deleted as u64,
        startup_ms: startup.as_secs_f64() * 1000.0,
        first_pod_ms: first_claim.map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        latency_cdf_ms: latency_cdf(&e2e),
        load_avg: load_average(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ..Report::default()
    })
}

/// Pods the baseline schedules by default (`--baseline-pods`): it clones and scans the whole
/// cluster per pod, so a full plan would take minutes. Throughputs (pods/s) are compared.
pub const DEFAULT_BASELINE_PODS: usize = 2_000;

/// Which runs [`measure`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Magma only.
    MagmaOnly,
    /// Magma on the whole plan, then the baseline on its first `n` pods (`None` = all).
    WithBaseline(Option<usize>),
}

/// Run Magma on `plan`, then (if asked) the baseline on the same plan in the same process.
pub fn measure(
    scenario: &str,
    plan: &Plan,
    opts: &RunOptions,
    compare: Compare,
) -> anyhow::Result<Report> {
    let mut report = run(plan, opts, Profile::default())?;
    report.scenario = scenario.to_owned();
    if let Compare::WithBaseline(limit) = compare {
        report.set_baseline(crate::baseline::run(plan, limit)?);
    }
    Ok(report)
}
