//! Sweeps: one plan, run once per (workers, candidateNodeCount) cell, printed as a scaling table
//! so that "adding a worker never lowers throughput" (DESIGN.md §6) can be read off directly.

use crate::plan::Plan;
use crate::report::{Report, json};
use crate::runner::{Compare, RunOptions, measure};

/// Run every cell of `workers × candidates` on `plan`, in that order.
pub fn sweep(
    scenario: &str,
    plan: &Plan,
    workers: &[usize],
    candidates: &[usize],
    base: &RunOptions,
    mut each: impl FnMut(&Report),
) -> anyhow::Result<Vec<Report>> {
    let mut out = Vec::new();
    for &k in candidates {
        for &w in workers {
            let opts = RunOptions {
                workers: w,
                candidates: k,
                ..base.clone()
            };
            let r = measure(scenario, plan, &opts, Compare::MagmaOnly)?;
            each(&r);
            out.push(r);
        }
    }
    Ok(out)
}

/// The scaling table in Markdown: per K, throughput by worker count and its ratio to the
/// previous worker count ("never lower" = every ratio ≥ 1.0, allowing for noise).
pub fn markdown(runs: &[serde_json::Value]) -> String {
    use json::f;
    let mut out = String::from(
        "| K | workers | pods/s | × prev. workers | nodes used | arrival→claimed p99 ms | pop→claimed p99 ms | conflicts | urgent requeues | unschedulable | load avg | integrity |\n\
         |--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    let mut prev: Option<(f64, f64)> = None;
    for v in runs {
        let k = f(v, "candidates");
        let t = f(v, "throughput_pods_per_s");
        let step = match prev {
            Some((pk, pt)) if pk == k && pt > 0.0 => format!("{:.2}×", t / pt),
            _ => "–".to_owned(),
        };
        prev = Some((k, t));
        let ok = ["overcommitted_nodes", "lost_pods", "duplicate_binds"]
            .iter()
            .all(|key| f(v, key) == 0.0);
        out += &format!(
            "| {:.0} | {:.0} | {:.0} | {} | {:.0} | {:.3} | {:.3} | {:.0} | {:.0} ({:.3}%) | {:.0} | {:.2} | {} |\n",
            k,
            f(v, "workers"),
            t,
            step,
            f(v, "nodes_used"),
            f(v, "latency_ms.p99"),
            f(v, "cycle_latency_ms.p99"),
            f(v, "conflicts"),
            f(v, "urgent_requeues"),
            100.0 * f(v, "urgent_requeues") / f(v, "pods").max(1.0),
            f(v, "unschedulable"),
            v["load_avg"][0].as_f64().unwrap_or(0.0),
            if ok { "ok" } else { "VIOLATED" },
        );
    }
    out
}
