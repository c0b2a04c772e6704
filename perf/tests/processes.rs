//! `magma-perf processes` end to end on a small cluster: the real `agent-scheduler` and
//! `kube-sim` binaries as separate processes; every pod bound once, and the figures the
//! benchmark reports (CPU from /proc, requests per pod, the ceiling) present and sane. The
//! backlog runs over HTTPS (kube-sim's self-signed CA, verified by both clients).

use magma_perf::procs::{ProcOptions, run};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The binaries, built (or found up to date) in this build's target directory.
fn binaries() -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_magma-perf"))
        .parent()
        .expect("target dir")
        .to_owned();
    let profile = if dir.ends_with("release") {
        vec!["--release"]
    } else {
        vec![]
    };
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "magma-kube",
            "--bin",
            "agent-scheduler",
        ])
        .args(["-p", "kube-sim", "--bin", "kube-sim"])
        .args(profile)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building agent-scheduler and kube-sim");
    (dir.join("agent-scheduler"), dir.join("kube-sim"))
}

fn opts(backlog: bool) -> ProcOptions {
    let (scheduler_bin, sim_bin) = binaries();
    ProcOptions {
        nodes: 50,
        pods: 300,
        workers: 2,
        creators: 16,
        backlog,
        tls: backlog,
        pin: backlog,
        // The burst's ceilings are bare, the backlog's hold the informer: both paths run.
        bare_ceiling: !backlog,
        scheduler_bin,
        sim_bin,
        kube_api_qps: 2000.0,
        kube_api_burst: 2000,
        timeout: Duration::from_secs(60),
        progress: false,
        // The burst carries unschedulable pods; their conditions are awaited and timed.
        unschedulable_every: (!backlog).then_some(10),
        scheduler_args: Vec::new(),
        // The backlog's pods spread over zones the harness labels the nodes with.
        constraint: if backlog {
            magma_perf::procs::Constraint::ZoneSpread { zones: 5 }
        } else {
            magma_perf::procs::Constraint::None
        },
        instructions: None,
    }
}

fn check(r: &magma_perf::procs::ProcReport) {
    assert_eq!(r.bound, 300 - r.unschedulable, "{r:?}");
    assert_eq!((r.duplicate_binds, r.lost_pods), (0, 0), "{r:?}");
    assert!(r.scheduler_cpu_ms_per_pod > 0.0, "{r:?}");
    assert!(r.sim_cpu_ms_per_pod > 0.0, "{r:?}");
    assert!(
        r.ceiling_pods_per_s > 0.0 && r.throughput_pods_per_s > 0.0,
        "{r:?}"
    );
    // One binding per pod, nothing else on the hot path but (some) events.
    assert_eq!(
        r.requests_per_pod.get("create pods/binding"),
        Some(&1.0),
        "{r:?}"
    );
    assert!(r.scheduler_open_sockets > 0, "{r:?}");
    // Connections are reused: fewer new ones (the harness's included) than requests made (the
    // scheduler's, plus the harness's one create per pod). The pool itself (about the bind
    // concurrency, 256) can be as large as this small run's pod count, so no tighter bound.
    assert!(
        r.new_connections_per_pod
            .is_some_and(|c| c < r.scheduler_requests_per_pod + 1.0),
        "{r:?}"
    );
    // No watch (the scheduler's or the harness's) fell behind far enough to be closed.
    assert_eq!(r.watches_forced_closed, 0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_as_separate_processes() {
    let r = run(&opts(false)).await.unwrap();
    check(&r);
    assert_eq!((r.drain_s, r.ready_s), (None, None));
    // Every tenth pod fits nowhere: each has its condition, written and timed.
    assert_eq!((r.unschedulable, r.conditions_seen), (30, 30), "{r:?}");
    let written = r
        .condition_write_ms
        .as_ref()
        .expect("the scheduler's metric");
    assert!(written.count >= 30 && written.p99 > 0.0, "{r:?}");
    assert!(r.condition_seen_ms.is_some(), "{r:?}");
    assert_eq!(r.events_dropped, 0, "{r:?}");
    assert_eq!(r.sim_cpus, "", "{r:?}");
    // A burst is measured against the lower of its creation rate and the binding ceiling; the
    // backlog against the binding ceiling.
    let created = r.created_pods_per_s.expect("a burst's creation rate");
    assert!(created > 0.0 && !r.ceiling_with_informer, "{r:?}");
    let fraction = r.throughput_pods_per_s / created.min(r.ceiling_pods_per_s);
    assert!((r.fraction_of_ceiling - fraction).abs() < 1e-9, "{r:?}");
    // Plain HTTP: HTTP/1.1 (no cleartext HTTP/2, as against a real API server, which is HTTPS).
    let by = &r.scheduler_requests_by_protocol;
    assert_eq!(by.keys().collect::<Vec<_>>(), ["HTTP/1.1"], "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_drains_after_the_scheduler_starts() {
    let r = run(&opts(true)).await.unwrap();
    check(&r);
    assert!(r.drain_s.is_some_and(|d| d > 0.0), "{r:?}");
    assert_eq!(r.created_pods_per_s, None, "{r:?}");
    assert!(r.ceiling_with_informer, "{r:?}");
    // Timed from readiness too; pinned (kube-sim on CPU 0).
    let (ready, drain) = (r.ready_s.unwrap(), r.drain_s.unwrap());
    assert!(ready > 0.0 && ready <= drain, "{r:?}");
    assert_eq!(r.sim_cpus, "0", "{r:?}");
    // Over HTTPS the scheduler negotiates HTTP/2: every request of its clients is a stream of
    // a shared connection.
    let by = &r.scheduler_requests_by_protocol;
    assert!(by.get("HTTP/2").is_some_and(|n| *n >= 300), "{r:?}");
    assert_eq!(by.len(), 1, "{r:?}");
    // A handful of connections (watches, binds, events, the admin listener), not a pool of
    // one per concurrent bind.
    assert!(r.scheduler_open_sockets <= 16, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ab_alternates_the_builds_and_pairs_their_cpu() {
    let mut o = opts(false);
    o.pods = 100;
    o.unschedulable_every = None;
    let candidate = o.scheduler_bin.clone();
    let r = magma_perf::ab::compare(&o, candidate, 2).await.unwrap();
    // Round 1 baseline first, round 2 candidate first; every run bound every pod once.
    let order: Vec<_> = r.runs.iter().map(|x| (x.round, x.build)).collect();
    assert_eq!(
        order,
        [
            (1, "baseline"),
            (1, "candidate"),
            (2, "candidate"),
            (2, "baseline")
        ]
    );
    for x in &r.runs {
        assert_eq!(x.report.bound, 100, "{x:?}");
        assert_eq!(
            (x.report.duplicate_binds, x.report.lost_pods),
            (0, 0),
            "{x:?}"
        );
    }
    // One ratio per round, each the candidate's CPU over the same round's baseline's, plain and
    // over each run's simulator CPU.
    assert_eq!((r.cpu_ratios.len(), r.cpu_over_sim_ratios.len()), (2, 2));
    for round in 1..=2 {
        let run = |build: &str| {
            let x = r.runs.iter().find(|x| x.round == round && x.build == build);
            let p = &x.unwrap().report;
            (p.scheduler_cpu_ms_per_pod, p.sim_cpu_ms_per_pod)
        };
        let ((a, a_sim), (b, b_sim)) = (run("baseline"), run("candidate"));
        assert!(a > 0.0 && a_sim > 0.0, "{r:?}");
        let (plain, over_sim) = (r.cpu_ratios[round - 1], r.cpu_over_sim_ratios[round - 1]);
        assert!((plain - b / a).abs() < 1e-12, "{r:?}");
        assert!(
            (over_sim - (b / b_sim) / (a / a_sim)).abs() < 1e-12,
            "{r:?}"
        );
    }
    let s = &r.baseline;
    assert!(
        s.min_cpu_ms_per_pod <= s.median_cpu_ms_per_pod
            && s.median_cpu_ms_per_pod <= s.max_cpu_ms_per_pod,
        "{r:?}"
    );
    // A missing candidate is refused before anything runs.
    let missing = magma_perf::ab::compare(&o, "/nonexistent/agent-scheduler".into(), 1).await;
    assert!(
        missing
            .unwrap_err()
            .to_string()
            .contains("no scheduler binary")
    );
}
