//! `magma-perf scheduler-perf`: a small workload file in kube-scheduler's scheduler_perf format
//! (`tests/data/scheduler_perf/`) replayed end to end against the embedded kube-sim and the
//! in-process scheduler, asserting on the JSON report; and, run explicitly, the smallest
//! SchedulingBasic workload of the unmodified upstream file when `/work/shared` has it.

use magma_perf::scheduler_perf::{Options, Report, Status, run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scheduler_perf")
        .join(rel)
}

fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workload {name} in {report:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_workload_file_replays_end_to_end_with_unsupported_parts_reported() {
    let opts = Options {
        timeout: Duration::from_secs(60),
        ..Options::new(data("small/performance-config.yaml"))
    };
    let report = run(&opts).await.unwrap();
    let json = serde_json::to_value(&report).unwrap();

    let w = workload(&json, "Replay/small");
    assert_eq!(w["status"], "ran", "{w:#}");
    assert_eq!(w["threshold"], 1.0);
    let m = w["measurements"].as_array().unwrap();
    assert_eq!(m.len(), 2, "{w:#}");
    // The waiting pods: every one measured, bound as the blockers went at 4/s.
    assert_eq!(m[0]["name"], "Replay/small/waiting");
    assert_eq!(m[0]["podsMeasured"], 16);
    let tp = &m[0]["schedulingThroughput"];
    assert!(tp["samples"].as_u64().unwrap() >= 1, "{m:#?}");
    let avg = tp["average"].as_f64().unwrap();
    assert!(avg > 0.0 && avg <= 16.0, "{tp}");
    assert!(tp["perc50"].as_f64().unwrap() > 0.0);
    assert_eq!(w["thresholdPassed"], true, "{w:#}");
    // createPods with collectMetrics in its own namespace-<op index> (op 12).
    assert_eq!(m[1]["name"], "Replay/small/namespace-12");
    assert_eq!(m[1]["podsMeasured"], 4);
    // The churn pod (fits nowhere) was created and deleted in turn, never failing.
    let churn = &w["churn"][0];
    assert_eq!(churn["kind"], "Pod");
    assert!(churn["created"].as_u64().unwrap() >= 1, "{churn}");
    assert!(churn["deleted"].as_u64().unwrap() >= 1, "{churn}");
    assert_eq!(churn["failed"], 0, "{churn}");
    assert!(
        w["notes"][0]
            .as_str()
            .unwrap()
            .contains("SchedulerQueueingHints=true"),
        "{w:#}"
    );

    let u = workload(&json, "Unsupported/dra");
    assert_eq!(u["status"], "not-run");
    assert!(u["measurements"].as_array().unwrap().is_empty());
    let what: Vec<&str> = u["unsupported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["what"].as_str().unwrap())
        .collect();
    assert!(
        what.contains(&"op 1: opcode startCollectingProfile"),
        "{what:?}"
    );
    // DRA itself is implemented now: a note, not a reason.
    assert!(
        !what.contains(&"featureGate DynamicResourceAllocation=true"),
        "{what:?}"
    );
    assert!(
        u["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("featureGate DynamicResourceAllocation=true: Magma allocates devices"),
        "{u:#}"
    );

    // Pre-bound ReadWriteOncePod claims: the waiters were bound once the holders were gone.
    let v = workload(&json, "Volumes/once-pod");
    assert_eq!(v["status"], "ran", "{v:#}");
    assert_eq!(v["measurements"][0]["podsMeasured"], 2, "{v:#}");
    // In-place resize: the scale-down made room for the waiting pod.
    let r = workload(&json, "Resize/scale-down");
    assert_eq!(r["status"], "ran", "{r:#}");
    assert_eq!(r["measurements"][0]["podsMeasured"], 1, "{r:#}");
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("InPlacePodVerticalScaling=true"),
        "{r:#}"
    );

    // Preemption: the high-priority pod evicts three of the four low ones and is bound.
    let p = workload(&json, "Preemption/one");
    assert_eq!(p["status"], "ran", "{p:#}");
    assert_eq!(p["measurements"][0]["podsMeasured"], 1, "{p:#}");
}

/// Runs one test case of `dra/performance-config.yaml` and checks what every DRA workload must
/// leave: no device given twice, every bound pod on the node its claims were allocated for.
async fn dra_case(test_case: &str) -> Value {
    let opts = Options {
        test_case: Some(test_case.into()),
        timeout: Duration::from_secs(60),
        ..Options::new(data("dra/performance-config.yaml"))
    };
    let report = run(&opts).await.unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let w = json["workloads"][0].clone();
    assert_eq!(w["status"], "ran", "{w:#}");
    let d = &w["dra"];
    assert_eq!(d["sharedDevices"], serde_json::json!([]), "{w:#}");
    assert_eq!(d["boundPodsOffTheirClaims"], serde_json::json!([]), "{w:#}");
    w
}

/// DRA (`dra/performance-config.yaml`): `createResourceDriver`, `createAny`,
/// `allocResourceClaims` and a steady-state `createPods`; every measured pod bound, every claim
/// allocated, no device given twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_workloads_replay_with_claims_allocated_on_distinct_devices() {
    // One claim per pod, all on the one node with devices.
    let w = dra_case("ClaimTemplate").await;
    assert_eq!(w["measurements"][0]["podsMeasured"], 10, "{w:#}");
    let d = &w["dra"];
    assert_eq!(
        (d["slices"].as_u64(), d["devices"].as_u64()),
        (Some(1), Some(10))
    );
    assert_eq!(d["claims"]["test"], serde_json::json!([10, 10]), "{w:#}");
    assert_eq!(d["devicesAllocated"], 10);
    assert_eq!(d["boundPodsWithClaims"], 10);

    // Half the devices (4 of 8) held by claims allocated beforehand; pairs of pods come and
    // go on the devices earlier pairs released. Two pairs' worth of free devices: with one, a
    // pair made before the claim controller had released the last pair's claims found no
    // device and waited out a pod's backoff (1 s, then 2 s). Unloaded, the 3 s measure some
    // 150-250 pods either way; a loaded run of the whole suite once measured 3.
    let w = dra_case("SteadyState").await;
    assert!(
        w["measurements"][0]["podsMeasured"].as_u64().unwrap() >= 4,
        "more than one round: {w:#}"
    );
    assert_eq!(
        w["dra"]["claims"]["init"],
        serde_json::json!([4, 4]),
        "{w:#}"
    );
}

/// Pods sharing claims that `allocResourceClaims` allocated just before they are created: they
/// must go where the allocation is, even when the scheduler decided them before it saw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_sharing_claims_allocated_beforehand_go_where_the_allocation_is() {
    // Two claims allocated beforehand, two by the scheduler; five pods on each.
    let w = dra_case("SharedClaims").await;
    assert_eq!(w["measurements"][0]["podsMeasured"], 10, "{w:#}");
    let d = &w["dra"];
    assert_eq!(d["claims"]["test"], serde_json::json!([2, 2]), "{w:#}");
    assert_eq!(d["claims"]["later"], serde_json::json!([2, 2]), "{w:#}");
    assert_eq!(d["devicesAllocated"], 4);
    assert_eq!(d["boundPodsWithClaims"], 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_selection_that_matches_nothing_is_an_error() {
    let opts = Options {
        workload: Some("NoSuchWorkload".into()),
        ..Options::new(data("small/performance-config.yaml"))
    };
    let e = run(&opts).await.unwrap_err();
    assert!(e.to_string().contains("no workload matches"), "{e}");
}

/// `shared/` beside the repository (as `.ci/run` looks for it).
const UPSTREAM_MISC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/upstream/scheduler_perf/misc/performance-config.yaml"
);

const UPSTREAM_DRA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/upstream/scheduler_perf/dra/performance-config.yaml"
);

const UPSTREAM_CONSUMABLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/upstream/scheduler_perf/dra/consumablecapacity/performance-config.yaml"
);

/// Replay upstream's unmodified `file` (outside the repository), one workload of one test
/// case. Without the file it fails: it never passes having checked nothing.
async fn upstream_report(file: &str, test_case: &str, workload: &str) -> Report {
    let path = Path::new(file);
    assert!(
        path.exists(),
        "{file} is not present on this machine: nothing was checked"
    );
    let opts = Options {
        test_case: Some(test_case.into()),
        workload: Some(workload.into()),
        timeout: Duration::from_secs(60),
        ..Options::new(path)
    };
    run(&opts).await.unwrap()
}

/// upstream's SchedulingWithResourceClaimTemplate/fast, unmodified; run as the one below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ../shared/upstream/scheduler_perf beside the repository; .ci/run runs it when present"]
async fn upstream_dra_claim_template_fast_workload() {
    let report = upstream_report(UPSTREAM_DRA, "SchedulingWithResourceClaimTemplate", "fast").await;
    let w = &report.workloads[0];
    assert_eq!(w.status, Status::Ran, "{w:#?}");
    assert_eq!(w.measurements[0].pods_measured, 10);
    let d = w.dra.as_ref().expect("a DRA summary");
    assert_eq!(d.claims["test"], (10, 10), "{d:?}");
    assert!(
        d.shared_devices.is_empty()
            && d.overcommitted_shares.is_empty()
            && d.bound_pods_off_their_claims.is_empty(),
        "{d:?}"
    );
}

/// Upstream's ConsumableCapacity (v1beta2 objects, created as v1): a claim of two 40Gi
/// requests of a device with 80Gi that allows multiple allocations, allocated as shares
/// within the device's capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ../shared/upstream/scheduler_perf beside the repository; .ci/run runs it when present"]
async fn upstream_dra_consumable_capacity_fast_workload() {
    let report = upstream_report(UPSTREAM_CONSUMABLE, "ConsumableCapacity", "fast").await;
    let w = &report.workloads[0];
    assert_eq!(w.status, Status::Ran, "{w:#?}");
    let d = w.dra.as_ref().expect("a DRA summary");
    assert_eq!(d.claims["test"], (1, 1), "{d:?}");
    assert_eq!(d.bound_pods_with_claims, 1, "{d:?}");
    assert!(
        d.shared_devices.is_empty()
            && d.overcommitted_shares.is_empty()
            && d.bound_pods_off_their_claims.is_empty(),
        "{d:?}"
    );
}

/// Needs the unmodified upstream files outside the repository, so it is not part of the
/// default run: `cargo test -p magma-perf --test integration -- scheduler_perf:: --ignored`.
/// Without the file it fails (it never passes having checked nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ../shared/upstream/scheduler_perf beside the repository; .ci/run runs it when present"]
async fn upstream_scheduling_basic_smallest_workload() {
    let report = upstream_report(UPSTREAM_MISC, "SchedulingBasic", "5Nodes").await;
    assert_eq!(report.workloads.len(), 1);
    let w = &report.workloads[0];
    assert_eq!(w.status, Status::Ran, "{w:#?}");
    assert_eq!(w.measurements.len(), 1);
    assert_eq!(w.measurements[0].name, "SchedulingBasic/5Nodes/namespace-2");
    assert_eq!(w.measurements[0].pods_measured, 10);
}

/// `deletePods` sends what upstream's `runDeletePodsOp` sends: all at once, one
/// DeleteCollection; at a rate, one DELETE per pod. Against a standalone kube-sim, whose request
/// and write records say what came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_pods_at_once_is_one_delete_collection_and_at_a_rate_one_delete_each() {
    let sim = kube_sim::Sim::start(kube_sim::SimConfig {
        nodes: 0,
        running_delay: None,
        ..kube_sim::SimConfig::default()
    })
    .await
    .unwrap();
    let kubeconfig = std::env::temp_dir().join(format!(
        "magma-delete-pods-{}.kubeconfig",
        std::process::id()
    ));
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let opts = Options {
        timeout: Duration::from_secs(60),
        kubeconfig: Some(kubeconfig.clone()),
        in_process_scheduler: true,
        ..Options::new(data("delete/performance-config.yaml"))
    };
    let report = run(&opts).await.unwrap();
    let _ = std::fs::remove_file(&kubeconfig);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(workload(&json, "Delete/at-once-and-paced")["status"], "ran");
    let requests = sim.requests();
    let collections: Vec<_> = requests
        .iter()
        .filter(|r| r.verb == "deletecollection")
        .map(|r| (r.resource.as_str(), r.namespace.as_str(), r.code))
        .collect();
    assert_eq!(collections, [("pods", "doomed", 200)]);
    let deleted = |verb: &str, ns: &str| {
        sim.writes()
            .iter()
            .filter(|w| w.verb == verb && w.namespace == ns && w.resource == "pods")
            .count()
    };
    assert_eq!(deleted("deletecollection", "doomed"), 3);
    assert_eq!(deleted("delete", "doomed"), 0);
    assert_eq!(deleted("delete", "paced"), 2);
}
