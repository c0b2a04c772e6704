//! A/B of two scheduler binaries as separate processes (`magma-perf processes --compare`): the
//! same scenario run alternately with each, so that both see the same machine. On a shared
//! machine the CPU per pod of one binary moves by ±20 % from run to run and by up to 1.9× from
//! day to day (BENCHMARKS.md, "History"). Only ratios measured in one session say anything,
//! and they need several rounds.
//!
//! Rounds alternate the order (A B, B A, A B, …), so that a drift over the session (another
//! tenant's load, a warming page cache) weighs on both builds alike. Each round gives a paired
//! ratio, candidate ÷ baseline, of the scheduler's CPU per pod; the summary is the median of
//! those ratios and each build's median, lowest and highest CPU per pod. Every run is also
//! checked for integrity (each pod bound exactly once), as a single run is.
//!
//! A second ratio divides each run's scheduler CPU by the simulator's in the same run before
//! pairing. The machine's speed of the moment moves both alike, so this one varies less: an
//! A/A of one binary gave 0.94–1.09 per round against 0.79–1.19 for the plain ratio. It holds
//! only while the candidate asks the same of the API server as the baseline (the simulator's
//! CPU also pays for the scheduler's requests).
//!
//! Owns: the alternation and the summary. The runs themselves are [`crate::procs::run`]'s.

use crate::procs::{ProcOptions, ProcReport, run};
use serde::Serialize;
use std::path::PathBuf;

/// One run of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct AbRun {
    /// `baseline` or `candidate`.
    pub build: &'static str,
    /// From 1.
    pub round: usize,
    pub report: ProcReport,
}

/// One build's CPU per pod over its runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BuildSummary {
    pub binary: PathBuf,
    pub median_cpu_ms_per_pod: f64,
    pub min_cpu_ms_per_pod: f64,
    pub max_cpu_ms_per_pod: f64,
    pub median_context_switches_per_pod: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AbReport {
    pub rounds: usize,
    pub baseline: BuildSummary,
    pub candidate: BuildSummary,
    /// Per round: the candidate's scheduler CPU per pod ÷ the baseline's.
    pub cpu_ratios: Vec<f64>,
    pub median_cpu_ratio: f64,
    /// Per round: the same ratio with each run's scheduler CPU divided by the simulator's in
    /// that run (see the module doc).
    pub cpu_over_sim_ratios: Vec<f64>,
    pub median_cpu_over_sim_ratio: f64,
    /// In the order they ran.
    pub runs: Vec<AbRun>,
}

/// The median (the mean of the middle two for an even count); 0 for none.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Which build runs first in `round` (from 1): the baseline in odd rounds.
pub fn order(round: usize) -> [&'static str; 2] {
    if round % 2 == 1 {
        ["baseline", "candidate"]
    } else {
        ["candidate", "baseline"]
    }
}

fn summary(binary: PathBuf, runs: &[&ProcReport]) -> BuildSummary {
    let cpu: Vec<f64> = runs.iter().map(|r| r.scheduler_cpu_ms_per_pod).collect();
    BuildSummary {
        binary,
        median_cpu_ms_per_pod: median(cpu.clone()),
        min_cpu_ms_per_pod: cpu.iter().copied().fold(f64::INFINITY, f64::min),
        max_cpu_ms_per_pod: cpu.iter().copied().fold(0.0, f64::max),
        median_context_switches_per_pod: median(
            runs.iter()
                .map(|r| r.scheduler_context_switches_per_pod)
                .collect(),
        ),
    }
}

/// Run `o` with `o.scheduler_bin` (the baseline) and with `candidate`, `rounds` times each,
/// alternating. Fails on the first run that fails or binds a pod twice or not at all.
pub async fn compare(
    o: &ProcOptions,
    candidate: PathBuf,
    rounds: usize,
) -> anyhow::Result<AbReport> {
    anyhow::ensure!(rounds > 0, "--rounds must be at least 1");
    for bin in [&o.scheduler_bin, &candidate] {
        anyhow::ensure!(bin.is_file(), "no scheduler binary at {}", bin.display());
    }
    let mut runs = Vec::with_capacity(2 * rounds);
    for round in 1..=rounds {
        for build in order(round) {
            let mut opts = o.clone();
            if build == "candidate" {
                opts.scheduler_bin = candidate.clone();
            }
            let report = run(&opts).await?;
            anyhow::ensure!(
                report.duplicate_binds == 0 && report.lost_pods == 0,
                "integrity violated in round {round} ({build}): {} pods bound twice, {} lost",
                report.duplicate_binds,
                report.lost_pods
            );
            if o.progress {
                eprintln!(
                    "round {round} {build}: scheduler {:.3} ms/pod, {:.1} context switches/pod",
                    report.scheduler_cpu_ms_per_pod, report.scheduler_context_switches_per_pod
                );
            }
            runs.push(AbRun {
                build,
                round,
                report,
            });
        }
    }
    let of = |build: &str| -> Vec<&ProcReport> {
        runs.iter()
            .filter(|r| r.build == build)
            .map(|r| &r.report)
            .collect()
    };
    let (a, b) = (of("baseline"), of("candidate"));
    let cpu_ratios: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| b.scheduler_cpu_ms_per_pod / a.scheduler_cpu_ms_per_pod)
        .collect();
    let over_sim = |r: &ProcReport| r.scheduler_cpu_ms_per_pod / r.sim_cpu_ms_per_pod;
    let cpu_over_sim_ratios: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(a, b)| over_sim(b) / over_sim(a))
        .collect();
    Ok(AbReport {
        rounds,
        baseline: summary(o.scheduler_bin.clone(), &a),
        candidate: summary(candidate, &b),
        median_cpu_ratio: median(cpu_ratios.clone()),
        cpu_ratios,
        median_cpu_over_sim_ratio: median(cpu_over_sim_ratios.clone()),
        cpu_over_sim_ratios,
        runs,
    })
}

impl AbReport {
    pub fn print(&self) {
        println!("A/B over {} rounds, alternated", self.rounds);
        println!(
            "| build | round | pods/s | fraction | P50 ms | P99 ms | scheduler CPU ms/pod | context switches/pod | kube-sim CPU ms/pod |"
        );
        println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.runs {
            let p = &r.report;
            println!(
                "| {} | {} | {:.0} | {:.2} | {:.1} | {:.1} | {:.3} | {:.1} | {:.3} |",
                r.build,
                r.round,
                p.throughput_pods_per_s,
                p.fraction_of_ceiling,
                p.latency_ms.p50,
                p.latency_ms.p99,
                p.scheduler_cpu_ms_per_pod,
                p.scheduler_context_switches_per_pod,
                p.sim_cpu_ms_per_pod
            );
        }
        for (name, s) in [("baseline", &self.baseline), ("candidate", &self.candidate)] {
            println!(
                "{name} ({}): CPU per pod median {:.3} ms (lowest {:.3}, highest {:.3}), {:.1} context switches",
                s.binary.display(),
                s.median_cpu_ms_per_pod,
                s.min_cpu_ms_per_pod,
                s.max_cpu_ms_per_pod,
                s.median_context_switches_per_pod
            );
        }
        let list = |v: &[f64]| {
            v.iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "candidate ÷ baseline, CPU per pod: median {:.2} (per round: {})",
            self.median_cpu_ratio,
            list(&self.cpu_ratios)
        );
        println!(
            "  each run's CPU over its kube-sim's: median {:.2} (per round: {})",
            self.median_cpu_over_sim_ratio,
            list(&self.cpu_over_sim_ratios)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_which_build_goes_first() {
        assert_eq!(order(1), ["baseline", "candidate"]);
        assert_eq!(order(2), ["candidate", "baseline"]);
        assert_eq!(order(3), ["baseline", "candidate"]);
    }

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn summary_of_a_build() {
        let r = |cpu: f64, cs: f64| ProcReport {
            scheduler_cpu_ms_per_pod: cpu,
            scheduler_context_switches_per_pod: cs,
            ..ProcReport::default()
        };
        let (a, b, c) = (r(0.12, 2.0), r(0.10, 3.0), r(0.11, 2.5));
        let s = summary(PathBuf::from("x"), &[&a, &b, &c]);
        assert_eq!(s.median_cpu_ms_per_pod, 0.11);
        assert_eq!((s.min_cpu_ms_per_pod, s.max_cpu_ms_per_pod), (0.10, 0.12));
        assert_eq!(s.median_context_switches_per_pod, 2.5);
    }
}
