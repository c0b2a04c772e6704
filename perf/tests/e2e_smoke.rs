//! CI smoke test of the end-to-end mode and the bind blaster: a tiny run through the HTTP API
//! simulator, with integrity checked, so the mode cannot rot.

use magma_perf::e2e::{E2eOptions, blast, run};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_mode_binds_every_pod_once() {
    let opts = E2eOptions {
        nodes: 20,
        pods: 200,
        rate: Some(2000.0),
        creators: 16,
        timeout: Duration::from_secs(60),
        progress: false,
        ..E2eOptions::default()
    };
    let report = run(&opts).await.unwrap();
    assert!(report.violations().is_empty(), "{:?}", report.violations());
    assert_eq!(report.bound, 200);
    assert!(report.throughput_pods_per_s > 0.0);
    assert_eq!(
        report.binding_writes_per_pod,
        Some(1.0),
        "exactly one API write per scheduled pod"
    );
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "scenario",
        "nodes",
        "pods",
        "workers",
        "throughput_pods_per_s",
        "latency_ms",
        "duplicate_binds",
        "overcommitted_nodes",
        "lost_pods",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_blaster_reports_a_rate() {
    let rate = blast(10, 200, 16).await.unwrap();
    assert!(rate > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_instances_split_the_work_on_disjoint_shards() {
    let opts = E2eOptions {
        nodes: 40,
        pods: 300,
        rate: Some(2000.0),
        creators: 16,
        timeout: Duration::from_secs(60),
        progress: false,
        instances: 3,
        sharding: magma_engine::ShardingMode::Hard,
        ..E2eOptions::default()
    };
    let report = run(&opts).await.unwrap();
    assert!(report.violations().is_empty(), "{:?}", report.violations());
    assert_eq!(report.bound, 300);
    assert_eq!(
        report.bound_per_instance,
        [100, 100, 100],
        "round-robin pods, each bound by its own scheduler"
    );
    assert_eq!(report.binding_writes_per_pod, Some(1.0));
}

#[test]
fn several_unsharded_instances_are_refused() {
    let opts = E2eOptions {
        instances: 2,
        ..E2eOptions::default()
    };
    let e = opts.validate().unwrap_err().to_string();
    assert!(e.contains("--sharding"), "{e}");
}
