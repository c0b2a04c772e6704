//! What a run reports ([`ProcReport`]: throughput against the ceiling, latency, CPU, requests,
//! connections, forced watch closes, integrity) and how it is printed, and the quantiles of a
//! scheduler's Prometheus histogram ([`BucketQuantiles`]). Plain data: it uses only the
//! harness's latency summary (`crate::report::Latency`).

use crate::report::Latency;
use serde::Serialize;
use std::collections::BTreeMap;

/// The result of [`super::run`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcReport {
    pub scenario: String,
    pub transport: String,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub bound: usize,
    /// Bound pods ÷ (last bind − first create), or − the scheduler's readiness for the backlog.
    pub throughput_pods_per_s: f64,
    /// Bindings/s the API accepted from the harness itself (same run, same transport).
    pub ceiling_pods_per_s: f64,
    /// Burst: pods/s created (first create sent → last create answered).
    pub created_pods_per_s: Option<f64>,
    /// Throughput ÷ the scenario's ceiling: for a backlog the binding ceiling, for a burst the
    /// lower of that and the creation rate.
    pub fraction_of_ceiling: f64,
    /// Whether the ceiling runs held the scheduler's pod informer (not `bare_ceiling`).
    pub ceiling_with_informer: bool,
    /// Backlog: scheduler start → last bind.
    pub drain_s: Option<f64>,
    /// Backlog: scheduler start → ready (its lists done).
    pub ready_s: Option<f64>,
    /// CPUs the simulator was pinned to (`--pin`), else empty.
    pub sim_cpus: String,
    pub latency_ms: Latency,
    /// Scheduler CPU (user + system) per bound pod, over the scenario until it is idle again.
    pub scheduler_cpu_ms_per_pod: f64,
    pub sim_cpu_ms_per_pod: f64,
    /// The scheduler's context switches (voluntary and not, over its threads) per bound pod,
    /// over the same span as its CPU: each is a thread that parked and was woken again.
    pub scheduler_context_switches_per_pod: f64,
    pub scheduler_rss_mib: f64,
    /// The scheduler's requests per bound pod, by `verb resource[/subresource]`.
    pub requests_per_pod: BTreeMap<String, f64>,
    pub scheduler_requests_per_pod: f64,
    /// The scheduler's requests by protocol (`HTTP/2` over HTTPS where negotiated), counts.
    pub scheduler_requests_by_protocol: BTreeMap<String, u64>,
    /// Sockets the scheduler holds open at the end (its connection pool).
    pub scheduler_open_sockets: usize,
    /// The simulator's accepted connections per pod over the scenario, when it reports them.
    pub new_connections_per_pod: Option<f64>,
    /// Watches the simulator force-closed for not keeping up (as the real watch cache does).
    pub watches_forced_closed: u64,
    /// The same, by watch: `resource labels fields` from the simulator's log, with counts.
    pub forced_closes_by_watch: BTreeMap<String, u64>,
    pub duplicate_binds: u64,
    pub lost_pods: u64,
    /// Unschedulable pods in the scenario (`unschedulable_every`), and how many of them the
    /// harness saw with their `PodScheduled=False` condition.
    pub unschedulable: usize,
    pub conditions_seen: usize,
    /// The scheduler's decision → condition written (`magma_condition_write_seconds`: the upper
    /// bound of the bucket each quantile falls in), ms.
    pub condition_write_ms: Option<BucketQuantiles>,
    /// Created → condition committed by the simulator (its write record), ms.
    pub condition_seen_ms: Option<Latency>,
    /// The scheduler's Scheduled events written / dropped (its metric).
    pub events_dropped: u64,
    /// The scenario pods' placement constraint (`none`, or which).
    pub constraint: String,
    /// What counted the scheduler's instructions (`--instructions`), if anything did.
    pub instructions_counter: Option<String>,
    /// The scheduler's instructions per bound pod, over the same span as its CPU.
    pub scheduler_instructions_per_pod: Option<f64>,
    /// Why the count failed, when it did.
    pub instructions_error: Option<String>,
}

/// Quantiles of a Prometheus histogram, each the upper bound of the bucket it falls in.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BucketQuantiles {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
    pub max_bucket: f64,
}

impl BucketQuantiles {
    /// From the exposition's `<name>_bucket{le="…"} n` lines (cumulative), scaled by `scale`.
    pub fn from_metrics(text: &str, name: &str, scale: f64) -> Option<BucketQuantiles> {
        let prefix = format!("{name}_bucket{{le=\"");
        let mut buckets: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (le, n) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((le, n.trim().parse().ok()?))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = buckets.last()?.1;
        if count == 0 {
            return Some(BucketQuantiles::default());
        }
        let q = |f: f64| {
            let want = (count as f64 * f).ceil() as u64;
            buckets
                .iter()
                .find(|(_, n)| *n >= want)
                .map_or(f64::INFINITY, |(le, _)| le * scale)
        };
        Some(BucketQuantiles {
            count,
            p50: q(0.5),
            p99: q(0.99),
            max_bucket: q(1.0),
        })
    }
}

impl ProcReport {
    pub fn print(&self) {
        println!(
            "processes/{} over {}: {} nodes, {} pods, {} workers, constraint {}",
            self.scenario, self.transport, self.nodes, self.pods, self.workers, self.constraint
        );
        let ceiling = match self.created_pods_per_s {
            Some(c) => format!(
                "ceiling: created at {c:.0}/s, the API binds {:.0}/s",
                self.ceiling_pods_per_s
            ),
            None => format!("API ceiling {:.0}/s", self.ceiling_pods_per_s),
        };
        let informer = if self.ceiling_with_informer {
            ", ceilings with the scheduler's pod informer"
        } else {
            ", bare ceilings"
        };
        println!(
            "  bound {}  throughput {:.0} pods/s = {:.0}% of the {ceiling}{informer}{}",
            self.bound,
            self.throughput_pods_per_s,
            self.fraction_of_ceiling * 100.0,
            self.drain_s
                .zip(self.ready_s)
                .map(|(d, r)| format!("  drained in {d:.2} s from start, ready after {r:.2} s"))
                .unwrap_or_default()
        );
        if !self.sim_cpus.is_empty() {
            println!(
                "  pinned: kube-sim on CPU {}, the scheduler and the harness on the others",
                self.sim_cpus
            );
        }
        println!(
            "  created→bound ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            self.latency_ms.p50, self.latency_ms.p90, self.latency_ms.p99, self.latency_ms.max
        );
        println!(
            "  CPU per pod: scheduler {:.3} ms ({:.1} context switches), kube-sim {:.3} ms;  scheduler RSS {:.0} MiB, {} open sockets",
            self.scheduler_cpu_ms_per_pod,
            self.scheduler_context_switches_per_pod,
            self.sim_cpu_ms_per_pod,
            self.scheduler_rss_mib,
            self.scheduler_open_sockets
        );
        match (
            &self.instructions_counter,
            self.scheduler_instructions_per_pod,
            &self.instructions_error,
        ) {
            (Some(c), Some(i), _) => {
                println!("  instructions per pod: scheduler {i:.0} ({c})")
            }
            (Some(c), None, e) => println!(
                "  instructions per pod: none ({c}: {})",
                e.as_deref().unwrap_or("no pod bound")
            ),
            (None, ..) => {}
        }
        let by: Vec<String> = self
            .requests_per_pod
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect();
        println!(
            "  scheduler requests per pod {:.3}: {}",
            self.scheduler_requests_per_pod,
            by.join(", ")
        );
        let protocols: Vec<String> = self
            .scheduler_requests_by_protocol
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        println!("  scheduler requests by protocol: {}", protocols.join(", "));
        if let Some(c) = self.new_connections_per_pod {
            println!("  new connections per pod {c:.4}");
        }
        println!(
            "  watches force-closed by the API: {}{}",
            self.watches_forced_closed,
            if self.forced_closes_by_watch.is_empty() {
                String::new()
            } else {
                let by: Vec<String> = self
                    .forced_closes_by_watch
                    .iter()
                    .map(|(w, n)| format!("{n}× {w}"))
                    .collect();
                format!(" ({})", by.join("; "))
            }
        );
        if self.unschedulable > 0 {
            println!(
                "  unschedulable pods {}: conditions seen {}; decision→written ms (bucket bounds) {}; created→committed ms {}",
                self.unschedulable,
                self.conditions_seen,
                self.condition_write_ms
                    .as_ref()
                    .map_or("n/a".into(), |q| format!(
                        "p50 ≤{:.1} p99 ≤{:.1} max ≤{:.1} ({} written)",
                        q.p50, q.p99, q.max_bucket, q.count
                    )),
                self.condition_seen_ms
                    .as_ref()
                    .map_or("n/a".into(), |l| format!(
                        "p50 {:.1} p99 {:.1} max {:.1}",
                        l.p50, l.p99, l.max
                    )),
            );
        }
        if self.events_dropped > 0 {
            println!("  events dropped by the scheduler: {}", self.events_dropped);
        }
        if self.duplicate_binds > 0 || self.lost_pods > 0 {
            println!(
                "  integrity: VIOLATED: {} duplicate bind(s), {} pod(s) not bound",
                self.duplicate_binds, self.lost_pods
            );
        } else {
            println!("  integrity: OK (every pod bound exactly once)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantiles from a histogram's cumulative buckets: each the upper bound of its bucket.
    #[test]
    fn bucket_quantiles_from_the_exposition() {
        let text = "# TYPE x histogram\nx_bucket{le=\"0.001\"} 90\nx_bucket{le=\"0.002\"} 99\n\
                    x_bucket{le=\"0.004\"} 100\nx_bucket{le=\"+Inf\"} 100\nx_sum 0.1\nx_count 100\n";
        let q = BucketQuantiles::from_metrics(text, "x", 1e3).unwrap();
        assert_eq!((q.count, q.p50, q.p99, q.max_bucket), (100, 1.0, 2.0, 4.0));
        assert!(BucketQuantiles::from_metrics(text, "y", 1e3).is_none());
    }
}
