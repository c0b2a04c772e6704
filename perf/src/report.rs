//! Run reports: the figures every run prints, and the JSON object `--json` writes.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ms = |v: u64| v as f64 / 1e6;
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub candidates: usize,
    pub throughput_pods_per_s: f64,
    pub elapsed_s: f64,
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
    pub lost_pods: u64,
    pub duplicate_binds: u64,
    pub rss_bytes: u64,
    pub publications: u64,
    pub publish_us_avg: f64,
    pub completed_pods: u64,
    pub startup_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_throughput_pods_per_s: Option<f64>,
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
        v
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
        println!(
            "  conflicts {}  urgent requeues {} ({:.3}%)  unschedulable {}  completed {}",
            self.conflicts,
            self.urgent_requeues,
            100.0 * self.urgent_requeues as f64 / self.pods.max(1) as f64,
            self.unschedulable,
            self.completed_pods
        );
        println!(
            "  snapshots {} (avg {:.1} µs)  RSS {} MiB  node load {:.0} ms",
            self.publications,
            self.publish_us_avg,
            self.rss_bytes >> 20,
            self.startup_ms
        );
        if let Some(b) = self.baseline_throughput_pods_per_s {
            println!(
                "  baseline {:.0} pods/s  → ratio {:.1}×",
                b,
                self.throughput_pods_per_s / b.max(1e-9)
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
