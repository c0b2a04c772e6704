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

/// 10 nodes of 4 CPU, 8 pods of 1 CPU created at once: the distinct nodes used.
fn burst(workers: usize, conf: Option<&str>) -> usize {
    let mut c = Sim::workers(workers);
    if let Some(conf) = conf {
        let p = Profile::parse(conf, Default::default()).unwrap();
        c.h.input(Input::Profile(Arc::new(p)));
    }
    for i in 0..10 {
        c.add_node(mk_node(&format!("n{i}"), "4", "32Gi", 110));
    }
    for i in 0..8 {
        c.add_pod(mk_pod(&format!("p{i}"), "1", "1Gi"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 8);
    assert!(c.overcommitted().is_empty());
    assert_eq!(c.duplicate_bindings(), 0);
    let used: BTreeSet<String> = (0..8)
        .map(|i| c.node_of(&format!("uid-p{i}")).unwrap().to_owned())
        .collect();
    c.h.stop();
    used.len()
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
