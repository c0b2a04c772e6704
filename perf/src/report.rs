//! Run reports: the figures every run prints, and the JSON object `--json` writes.

use crate::baseline::BaselineReport;
use serde::Serialize;

pub use crate::latency::{Latency, latency_cdf};

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`), to judge how quiet the machine was.
pub fn load_average() -> [f64; 3] {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = s.split_whitespace().map(|v| v.parse().unwrap_or(0.0));
    [
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    ]
}

/// One run. Serialised as the JSON object `--json` writes (a sweep writes an array of them).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub candidates: usize,
    /// Bound pods per second, from the start to the last bind.
    pub throughput_pods_per_s: f64,
    pub elapsed_s: f64,
    /// Pods bound (once each).
    pub bound: u64,
    /// Arrival → claimed.
    pub latency_ms: Latency,
    /// Queue pop → claimed (one scheduling cycle).
    pub cycle_latency_ms: Latency,
    /// Candidates lost to another worker's claim.
    pub conflicts: u64,
    /// Pods whose every candidate conflicted (sent back urgent).
    pub urgent_requeues: u64,
    pub unschedulable: u64,
    pub overcommitted_nodes: u64,
    /// Distinct nodes the plan's pods were bound to (placement quality: under binpack, fewer is
    /// better; compare with one worker on the same plan).
    pub nodes_used: u64,
    pub lost_pods: u64,
    /// Pods the engine still held when the drain timeout ended the run (queued or in flight):
    /// the run is incomplete, but nothing is lost.
    pub pending_at_end: u64,
    pub duplicate_binds: u64,
    /// Resident set size of the whole process at the end of the run (harness included).
    pub rss_bytes: u64,
    /// Resident set size before the engine got its first input: the plan, the ledger and the
    /// harness's indexes. `rss_bytes - harness_rss_bytes` approximates the engine's own share.
    pub harness_rss_bytes: u64,
    pub publications: u64,
    pub publish_us_avg: f64,
    pub completed_pods: u64,
    pub startup_ms: f64,
    /// Caches synced (all nodes loaded) → first pod claimed and its bind intent seen.
    pub first_pod_ms: f64,
    /// Arrival → claimed as `[percentile, ms]` points (see [`latency_cdf`]).
    pub latency_cdf_ms: Vec<[f64; 2]>,
    /// Load averages at the end of the run (other work on the machine skews the figures).
    pub load_avg: [f64; 3],
    /// CPUs available to this process.
    pub cpus: usize,
    /// The baseline's throughput on the same plan (see `baseline`), when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_throughput_pods_per_s: Option<f64>,
    /// `throughput_pods_per_s / baseline_throughput_pods_per_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
}

impl Report {
    /// Integrity violations, if any.
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.overcommitted_nodes > 0 {
            v.push(format!(
                "{} node(s) over allocatable",
                self.overcommitted_nodes
            ));
        }
        if self.lost_pods > 0 {
            v.push(format!(
                "{} pod(s) neither bound nor reported unschedulable",
                self.lost_pods
            ));
        }
        if self.duplicate_binds > 0 {
            v.push(format!("{} duplicate bind(s)", self.duplicate_binds));
        }
        if let Some(b) = &self.baseline
            && b.overcommitted_nodes > 0
        {
            v.push(format!(
                "baseline: {} node(s) over allocatable",
                b.overcommitted_nodes
            ));
        }
        v
    }

    /// Attach a baseline run of the same plan.
    pub fn set_baseline(&mut self, b: BaselineReport) {
        self.baseline_throughput_pods_per_s = Some(b.throughput_pods_per_s);
        self.baseline_ratio = Some(self.throughput_pods_per_s / b.throughput_pods_per_s.max(1e-9));
        self.baseline = Some(b);
    }

    pub fn print(&self) {
        let l = &self.latency_ms;
        let c = &self.cycle_latency_ms;
        println!(
            "{:<11} nodes={:<6} pods={:<7} workers={} K={}  throughput {:>9.0} pods/s",
            self.scenario,
            self.nodes,
            self.pods,
            self.workers,
            self.candidates,
            self.throughput_pods_per_s
        );
        println!(
            "  arrival→claimed ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p999 {:.3}  max {:.3}",
            l.p50, l.p90, l.p99, l.p999, l.max
        );
        println!(
            "  pop→claimed ms      p50 {:.3}  p90 {:.3}  p99 {:.3}  p999 {:.3}  max {:.3}",
            c.p50, c.p90, c.p99, c.p999, c.max
        );
        println!("  nodes used {}", self.nodes_used);
        println!(
            "  conflicts {}  urgent requeues {} ({:.3}%)  unschedulable {}  completed {}",
            self.conflicts,
            self.urgent_requeues,
            100.0 * self.urgent_requeues as f64 / self.pods.max(1) as f64,
            self.unschedulable,
            self.completed_pods
        );
        println!(
            "  snapshots {} (avg {:.1} µs)  RSS {} MiB (harness before the engine started: {} MiB)  node load {:.0} ms, first pod {:.2} ms after",
            self.publications,
            self.publish_us_avg,
            self.rss_bytes >> 20,
            self.harness_rss_bytes >> 20,
            self.startup_ms,
            self.first_pod_ms
        );
        if let Some(b) = &self.baseline {
            println!(
                "  baseline {:.0} pods/s on the first {} pods ({} bound, {} unschedulable, cycle p99 {:.3} ms, {:.0}% copying the cache)  → Magma/baseline {:.1}×",
                b.throughput_pods_per_s,
                b.pods,
                b.bound,
                b.unschedulable,
                b.cycle_latency_ms.p99,
                100.0 * b.snapshot_share,
                self.baseline_ratio.unwrap_or(0.0)
            );
        }
        println!(
            "  load average {:.2} {:.2} {:.2} on {} CPUs",
            self.load_avg[0], self.load_avg[1], self.load_avg[2], self.cpus
        );
        if self.pending_at_end > 0 {
            println!(
                "  INCOMPLETE: {} pod(s) still pending in the engine when the drain timeout ended the run",
                self.pending_at_end
            );
        }
        let v = self.violations();
        if v.is_empty() {
            println!("  integrity: OK (no node over allocatable, no pod lost, no duplicate bind)");
        } else {
            println!("  integrity: VIOLATED: {}", v.join("; "));
        }
    }
}

/// Reading a report back from JSON (`table`, `plot`): tolerant of missing keys, so files
/// written by older versions of the harness still load.
pub mod json {
    use serde_json::Value;

    pub fn f(v: &Value, key: &str) -> f64 {
        let mut cur = v;
        for k in key.split('.') {
            cur = &cur[k];
        }
        cur.as_f64().unwrap_or(0.0)
    }

    pub fn s<'a>(v: &'a Value, key: &str) -> &'a str {
        v[key].as_str().unwrap_or("")
    }

    /// A file holding one run object or an array of them.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Vec<Value>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?;
        Ok(match v {
            Value::Array(a) => a,
            v => vec![v],
        })
    }
}

fn integrity(v: &serde_json::Value) -> &'static str {
    let bad = ["overcommitted_nodes", "lost_pods", "duplicate_binds"]
        .iter()
        .any(|k| json::f(v, k) > 0.0)
        || json::f(v, "baseline.overcommitted_nodes") > 0.0;
    if bad {
        "VIOLATED"
    } else if json::f(v, "pending_at_end") > 0.0 {
        "ok (incomplete: timed out)"
    } else {
        "ok"
    }
}

/// One Markdown row per run: the table BENCHMARKS.md shows.
pub fn markdown_table(runs: &[serde_json::Value]) -> String {
    use json::{f, s};
    let mut out = String::from(
        "| scenario | nodes | pods | workers | K | pods/s | arrival→claimed p50 / p99 / p99.9 ms | pop→claimed p99 ms | conflicts | urgent requeues | unschedulable | RSS MiB (harness) | snapshot µs | baseline pods/s (pods) | Magma/baseline | load avg | integrity |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    for v in runs {
        let pods = f(v, "pods");
        let (base, ratio) = if v.get("baseline").is_some_and(|b| !b.is_null()) {
            (
                format!(
                    "{:.0} ({:.0})",
                    f(v, "baseline.throughput_pods_per_s"),
                    f(v, "baseline.pods")
                ),
                format!("{:.1}×", f(v, "baseline_ratio")),
            )
        } else {
            ("–".to_owned(), "–".to_owned())
        };
        out += &format!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} / {:.3} / {:.3} | {:.3} | {:.0} | {:.0} ({:.3}%) | {:.0} | {:.0} ({:.0}) | {:.1} | {} | {} | {:.2} | {} |\n",
            s(v, "scenario"),
            f(v, "nodes"),
            pods,
            f(v, "workers"),
            f(v, "candidates"),
            f(v, "throughput_pods_per_s"),
            f(v, "latency_ms.p50"),
            f(v, "latency_ms.p99"),
            f(v, "latency_ms.p999"),
            f(v, "cycle_latency_ms.p99"),
            f(v, "conflicts"),
            f(v, "urgent_requeues"),
            100.0 * f(v, "urgent_requeues") / pods.max(1.0),
            f(v, "unschedulable"),
            f(v, "rss_bytes") / (1u64 << 20) as f64,
            f(v, "harness_rss_bytes") / (1u64 << 20) as f64,
            f(v, "publish_us_avg"),
            base,
            ratio,
            v["load_avg"][0].as_f64().unwrap_or(0.0),
            integrity(v),
        );
    }
    out
}
