//! What a constrained pod costs the engine, in process (issue 32, point 2): 5,000 nodes, pods
//! shaped like kube-scheduler's scheduler_perf templates (`pod-with-pod-anti-affinity.yaml`,
//! `pod-with-topology-spreading.yaml`, `pod-with-pod-affinity.yaml`,
//! `pod-with-preferred-pod-affinity.yaml`, `pod-default.yaml`), scheduled through the deterministic
//! harness with one worker. Ignored by default; run in release and read the output:
//!
//! ```sh
//! cargo test --release -p magma-engine --test integration -- constraints_cost:: --ignored --nocapture
//! ```
//!
//! Each case places `INIT` pods of its kind first, then times `MEASURED` more (the whole
//! engine: driver, worker, claim, the harness answering the binds), and prints µs per pod.

#![allow(clippy::disallowed_methods)] // a wall clock around the harness, to report what it took

use magma_engine::model::{
    LabelSelectorInput, PodAffinityInput, PodAffinityTermInput, PodInput, TopologySpreadInput,
};
use magma_engine::testing::{Sim, mk_node, mk_pod, with_labels};
use std::time::Instant;

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
/// One value on every node, as scheduler_perf's affinity workloads label all nodes `zone1`.
const REGION: &str = "topology.kubernetes.io/region";
const NODES: usize = 5000;
const ZONES: usize = 10;
const INIT: usize = 1000;
const MEASURED: usize = 1000;

fn green(mut p: PodInput) -> PodInput {
    p.labels = vec![("color".into(), "green".into())];
    p
}

fn selector() -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![("color".into(), "green".into())],
        match_expressions: vec![],
    })
}

fn anti_host(p: PodInput) -> PodInput {
    let mut p = green(p);
    p.pod_affinity = Some(PodAffinityInput {
        required_anti: vec![PodAffinityTermInput {
            label_selector: selector(),
            topology_key: HOSTNAME.into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

/// `pod-with-pod-affinity.yaml`: required affinity to its own label on a key every node shares
/// (SchedulingPodAffinity's nodes are all in `zone1`), so every node stays feasible.
fn region_affinity(p: PodInput) -> PodInput {
    let mut p = green(p);
    p.pod_affinity = Some(PodAffinityInput {
        required: vec![PodAffinityTermInput {
            label_selector: selector(),
            topology_key: REGION.into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

/// `pod-with-preferred-pod-affinity.yaml`: preferred affinity (weight 1) to its own label on
/// the hostname.
fn preferred_affinity(p: PodInput) -> PodInput {
    let mut p = green(p);
    p.pod_affinity = Some(PodAffinityInput {
        preferred: vec![(
            1,
            PodAffinityTermInput {
                label_selector: selector(),
                topology_key: HOSTNAME.into(),
                ..Default::default()
            },
        )],
        ..Default::default()
    });
    p
}

fn zone_spread(p: PodInput) -> PodInput {
    let mut p = green(p);
    p.topology_spread = vec![TopologySpreadInput {
        max_skew: 5,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: selector(),
        ..Default::default()
    }];
    p
}

fn plain(p: PodInput) -> PodInput {
    p
}

/// No constraints, two labels no selector reads: one shared, one unique to the pod (a sandbox
/// id).
fn labelled(mut p: PodInput) -> PodInput {
    p.labels = vec![
        ("app".into(), "sandbox".into()),
        ("sandbox-id".into(), format!("id-{}", p.uid)),
    ];
    p
}

/// How a case shapes its pods.
type Shape = fn(PodInput) -> PodInput;

fn run(name: &str, shape: Shape) {
    let mut c = Sim::workers(1);
    for i in 0..NODES {
        let n = format!("node-{i}");
        let z = format!("zone-{}", i % ZONES);
        c.add_node(with_labels(
            mk_node(&n, "4", "32Gi", 110),
            &[(HOSTNAME, &n), (ZONE, &z), (REGION, "region-1")],
        ));
    }
    c.settle();
    for i in 0..INIT {
        c.add_pod(shape(mk_pod(&format!("init-{i}"), "100m", "500Mi")));
    }
    c.settle();
    assert_eq!(c.bound_count(), INIT, "{name}: init pods");
    let t = Instant::now();
    for i in 0..MEASURED {
        c.add_pod(shape(mk_pod(&format!("m-{i}"), "100m", "500Mi")));
    }
    c.settle();
    let took = t.elapsed();
    assert_eq!(c.bound_count(), INIT + MEASURED, "{name}: measured pods");
    println!(
        "{name}: {:.1} µs per pod ({MEASURED} pods after {INIT}, {NODES} nodes); {} strings interned",
        took.as_secs_f64() * 1e6 / MEASURED as f64,
        c.h.core().cache().interner().len()
    );
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn cost_per_constrained_pod() {
    let only = std::env::var("CASE").ok();
    let cases: [(&str, Shape); 6] = [
        ("plain", plain),
        ("labelled", labelled),
        ("hostname-anti-affinity", anti_host),
        ("zone-spread", zone_spread),
        ("region-affinity", region_affinity),
        ("hostname-preferred-affinity", preferred_affinity),
    ];
    for (name, shape) in cases {
        if only.as_deref().is_none_or(|o| o == name) {
            run(name, shape);
        }
    }
}

/// Resident memory, bytes (Linux).
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// What the driver keeps of pods it compiled and dropped: a million pods, each labelled with
/// an id no selector reads (a sandbox's), compiled by the cache and dropped. Prints the
/// interner's strings and the resident memory before and after.
#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn what_a_million_labelled_pods_leave_behind() {
    let mut cache = magma_engine::cache::Cache::new(
        std::sync::Arc::new(magma_engine::binder::BindVersions::default()),
        std::sync::Arc::new(magma_engine::conf::Profile::default()),
    );
    let (strings, before) = (cache.interner().len(), rss());
    for i in 0..1_000_000 {
        let p = labelled(mk_pod(&format!("sandbox-{i}"), "100m", "128Mi"));
        drop(cache.compile_pod(&p).unwrap());
    }
    println!(
        "1,000,000 labelled pods compiled and dropped: {} strings interned (from {strings}), \
         resident memory +{:.1} MB",
        cache.interner().len(),
        (rss() as f64 - before as f64) / 1e6
    );
}
