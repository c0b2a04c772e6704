//! CI smoke tests: every scenario preset at a tiny size through the library (seconds in a debug
//! build), checked for integrity and progress; the report JSON's keys; and the baseline against
//! Magma on a plan that fits entirely.

use magma_perf::plan::Plan;
use magma_perf::report::Report;
use magma_perf::runner::{Compare, RunOptions, measure};
use magma_perf::scenario::{Params, Scenario, build};
use std::time::Duration;

fn tiny(s: Scenario) -> Params {
    let mut p = s.defaults();
    p.nodes = 40;
    p.pods = 400;
    p.lifetime_mean = Duration::from_millis(30);
    if p.rate.is_some() {
        p.rate = Some(20_000.0);
    }
    if s == Scenario::NearFull {
        p.pods = 200;
    }
    p
}

fn run(s: Scenario, p: &Params, compare: Compare) -> (Plan, Report) {
    let plan = build(s, p);
    let opts = RunOptions {
        workers: 2,
        candidates: 3,
        drain_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let report = measure(s.name(), &plan, &opts, compare).expect("run completes");
    (plan, report)
}

#[test]
fn every_preset_runs_with_integrity() {
    for s in [
        Scenario::Burst,
        Scenario::Steady,
        Scenario::Churn,
        Scenario::Fragmented,
        Scenario::NearFull,
        Scenario::Mixed,
    ] {
        let (plan, r) = run(s, &tiny(s), Compare::MagmaOnly);
        assert!(
            r.violations().is_empty(),
            "{}: {:?}",
            s.name(),
            r.violations()
        );
        assert!(r.throughput_pods_per_s > 0.0, "{}: no throughput", s.name());
        assert!(r.bound > 0, "{}: nothing bound", s.name());
        assert_eq!(
            r.bound + r.unschedulable,
            plan.pods.len() as u64,
            "{}: every pod bound or reported unschedulable",
            s.name()
        );
        if s == Scenario::Churn {
            assert_eq!(r.completed_pods, r.bound, "churn: every bound pod finished");
        }
    }
}

#[test]
fn report_json_has_the_documented_keys() {
    let s = Scenario::Burst;
    let (_, r) = run(s, &tiny(s), Compare::WithBaseline(Some(50)));
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "scenario",
        "nodes",
        "pods",
        "workers",
        "candidates",
        "throughput_pods_per_s",
        "latency_ms",
        "conflicts",
        "urgent_requeues",
        "unschedulable",
        "overcommitted_nodes",
        "lost_pods",
        "duplicate_binds",
        "rss_bytes",
        "baseline_throughput_pods_per_s",
        "latency_cdf_ms",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}: {v}");
    }
    for p in ["p50", "p99", "p999", "max"] {
        assert!(v["latency_ms"][p].is_number(), "latency_ms.{p}");
    }
    let cdf = v["latency_cdf_ms"].as_array().unwrap();
    assert!(cdf.len() >= 100);
    let values: Vec<f64> = cdf.iter().map(|p| p[1].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "CDF is monotone");
    assert_eq!(v["scenario"], "burst");
    assert!(v["baseline_throughput_pods_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn baseline_and_magma_place_the_same_pods_when_all_fit() {
    let s = Scenario::Mixed;
    let mut p = tiny(s);
    p.pods = 300;
    let (plan, r) = run(s, &p, Compare::WithBaseline(None));
    let b = r.baseline.as_ref().expect("baseline ran");
    assert!(r.violations().is_empty(), "{:?}", r.violations());
    assert_eq!(b.pods, plan.pods.len());
    assert_eq!(r.unschedulable, 0, "the plan fits entirely");
    assert_eq!(b.unschedulable, 0, "the plan fits entirely");
    assert_eq!(b.bound, r.bound);
    assert_eq!(r.bound, plan.pods.len() as u64);
}

#[test]
fn baseline_leaves_the_same_pods_out_on_a_full_cluster() {
    // Both schedulers see the same cluster; where pods do not all fit, both place exactly as
    // many as the pod-count limit allows (every pod is identical).
    let s = Scenario::Burst;
    let mut p = tiny(s);
    p.nodes = 4;
    p.shape.pods = 10;
    p.pods = 60;
    let (_, r) = run(s, &p, Compare::WithBaseline(None));
    let b = r.baseline.as_ref().unwrap();
    assert_eq!((r.bound, r.unschedulable), (40, 20));
    assert_eq!((b.bound, b.unschedulable), (40, 20));
}

#[test]
fn sweep_and_plots_work_end_to_end() {
    let s = Scenario::Burst;
    let plan = build(s, &tiny(s));
    let runs = magma_perf::sweep::sweep(
        "burst",
        &plan,
        &[1, 2],
        &[1, 3],
        &RunOptions::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(runs.len(), 4);
    let values: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let table = magma_perf::sweep::markdown(&values);
    assert_eq!(table.lines().count(), 2 + 4);
    let dir = std::env::temp_dir().join(format!("magma-perf-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tp = dir.join("throughput-vs-workers.svg");
    let cdf = dir.join("latency-cdf.svg");
    magma_perf::plot::throughput_vs_workers(&values, &tp).unwrap();
    magma_perf::plot::latency_cdf(&values[..2], &cdf).unwrap();
    for f in [&tp, &cdf] {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<text"),
            "{}",
            f.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fill_prefills_every_node_and_still_fits() {
    let s = Scenario::Burst;
    let mut p = tiny(s);
    p.fill = Some(0.8);
    let (plan, r) = run(s, &p, Compare::MagmaOnly);
    assert_eq!(plan.prefill.len(), plan.nodes.len());
    assert!(r.violations().is_empty(), "{:?}", r.violations());
    assert_eq!(r.bound + r.unschedulable, plan.pods.len() as u64);
}

#[test]
fn an_ab_refuses_rounds_without_a_candidate_and_zero_rounds() {
    let perf = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_magma-perf"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = perf(&["processes", "--rounds", "2"]);
    assert!(err.contains("--compare"), "{err}");
    let err = perf(&["processes", "--compare", "/nonexistent", "--rounds", "0"]);
    assert!(err.contains("--rounds must be at least 1"), "{err}");
}
