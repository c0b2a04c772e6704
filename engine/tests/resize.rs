//! In-place resize (`model::ContainerStatusInput`): a bound pod counts at the larger of its spec
//! and what its status says the node holds, as kube-scheduler counts it
//! (`resourcehelper.determineContainerReqs`). A scale-down frees room only once the kubelet
//! reports it actuated, and then a waiting pod is bound at once; a scale-up counts as soon as
//! the spec asks it. Never a node booked below what its pods hold.

use magma_engine::PodInput;
use magma_engine::model::ContainerStatusInput;
use magma_engine::testing::{Sim, bound, mk_node, mk_pod};
use std::time::Duration;

/// Long enough for any backoff to pass, well short of the 5 min pool flush.
const BACKOFFS: Duration = Duration::from_secs(30);

/// `big` bound to n0 with `spec` CPU asked and `held` CPU actuated and allocated.
fn big(spec: &str, held: Option<&str>) -> PodInput {
    let mut p = bound(mk_pod("big", spec, "1Gi"), "n0");
    p.containers[0].status = held.map(|h| ContainerStatusInput {
        requests: vec![("cpu".into(), h.into()), ("memory".into(), "1Gi".into())],
        allocated: vec![("cpu".into(), h.into()), ("memory".into(), "1Gi".into())],
    });
    p
}

#[test]
fn a_scale_down_frees_room_once_actuated_and_wakes_the_waiting_pod() {
    let mut c = Sim::workers(2);
    c.add_node(mk_node("n0", "4", "32Gi", 110));
    c.add_pod(big("3", Some("3")));
    c.add_pod(mk_pod("p", "2", "1Gi"));
    c.run_for(BACKOFFS);
    assert_eq!(c.node_of("uid-p"), None, "3 + 2 CPU do not fit in 4");
    // The resize is asked (spec 1 CPU) but the node still holds 3: p still does not fit.
    c.add_pod(big("1", Some("3")));
    c.run_for(BACKOFFS);
    assert_eq!(
        c.node_of("uid-p"),
        None,
        "bound against CPU the node still holds"
    );
    // Actuated: p fits, and is bound without waiting for a backoff or a flush.
    c.add_pod(big("1", Some("1")));
    c.settle();
    assert_eq!(c.node_of("uid-p"), Some("n0"));
    assert!(c.overcommitted().is_empty());
}

#[test]
fn a_scale_up_counts_as_soon_as_the_spec_asks_it() {
    let mut c = Sim::workers(2);
    c.add_node(mk_node("n0", "4", "32Gi", 110));
    c.add_pod(big("1", Some("1")));
    // Asked 3, not yet allocated or actuated: the node is booked for 3.
    c.add_pod(big("3", Some("1")));
    c.add_pod(mk_pod("p", "2", "1Gi"));
    c.run_for(BACKOFFS);
    assert_eq!(c.node_of("uid-p"), None);
    assert!(c.overcommitted().is_empty());
}
