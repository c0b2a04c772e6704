//! Placement quality under bursts (issue 14, point 1): many workers deciding on one snapshot
//! must place about as well as one sequential worker. The harness steps every worker on the
//! same snapshot before any result is applied, the worst case for the K-candidate fallback.

use magma_engine::Profile;
use magma_engine::core::Input;
use magma_engine::testing::{Sim, mk_node, mk_pod};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The configuration: `mostrequested.weight: 10`, every other weight at its default.
const BINPACK: &str = "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      mostrequested.weight: 10\n";

/// `nodes` nodes of 4 CPU, `pods` pods of 1 CPU created at once: the distinct nodes used and
/// the scheduling attempts it took.
fn burst_of(workers: usize, conf: Option<&str>, nodes: usize, pods: usize) -> (usize, u64) {
    let mut c = Sim::workers(workers);
    if let Some(conf) = conf {
        let p = Profile::parse(conf, Default::default()).unwrap();
        c.h.input(Input::Profile(Arc::new(p)));
    }
    for i in 0..nodes {
        c.add_node(mk_node(&format!("n{i}"), "4", "32Gi", 110));
    }
    for i in 0..pods {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), pods);
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    let used: BTreeSet<String> = (0..pods)
        .map(|i| c.node_of(&format!("uid-p{i}")).unwrap().to_owned())
        .collect();
    let attempts = c.h.stats().snapshot().attempts;
    c.h.stop();
    (used.len(), attempts)
}

/// The burst: 10 nodes of 4 CPU, 8 pods of 1 CPU; the distinct nodes used.
fn burst(workers: usize, conf: Option<&str>) -> usize {
    burst_of(workers, conf, 10, 8).0
}

#[test]
fn a_binpack_burst_packs_as_one_worker_does() {
    assert_eq!(burst(1, Some(BINPACK)), 2, "one sequential worker");
    for workers in [2, 4, 8] {
        assert_eq!(burst(workers, Some(BINPACK)), 2, "{workers} workers");
    }
}

#[test]
fn the_same_burst_spreads_with_the_default_weights() {
    for workers in [1, 2, 4, 8] {
        assert_eq!(burst(workers, None), 8, "{workers} workers");
    }
}

/// A burst big enough to fill every bin concurrent decisions open (`allocate`, "Fallbacks":
/// open packing): a lost claim falls back to another node instead of being decided again, so
/// many workers take about one attempt per pod, and the strict tail packs the bins they opened.
/// 1,000 nodes of 4 CPU, 2,000 pods of 1 CPU (500 nodes is the ideal).
#[test]
fn a_large_binpack_burst_falls_back_without_re_deciding_and_packs_as_one_worker_does() {
    let (nodes, pods) = (1000, 2000);
    let (one, _) = burst_of(1, Some(BINPACK), nodes, pods);
    assert!(
        one <= pods / 4 + 2,
        "one sequential worker used {one} nodes"
    );
    for workers in [2, 4, 8] {
        let (used, attempts) = burst_of(workers, Some(BINPACK), nodes, pods);
        assert!(
            used * 100 <= one * 105,
            "{workers} workers used {used} nodes, one worker {one}"
        );
        // Strict packing throughout took 2,834 attempts at 4 workers and 4,051 at 8 (open
        // packing 2,109 and 2,473): each lost claim was decided again.
        assert!(
            attempts <= pods as u64 * 13 / 10,
            "{workers} workers took {attempts} attempts for {pods} pods"
        );
    }
}
