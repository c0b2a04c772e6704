//! The resource-name registry (`model::ResourceRegistry`): one pod's requests never change how
//! other pods are scheduled. Names no node offers take no slot; every name a node offers gets
//! one, however many there are.

use magma_engine::core::StatusReason;
use magma_engine::model::ContainerInput;
use magma_engine::testing::{Sim, mk_node, mk_pod};
use magma_engine::{NodeInput, PodInput};
use std::time::Duration;

/// Long enough for any backoff to pass, well short of the 5 min pool flush.
const BACKOFFS: Duration = Duration::from_secs(30);

fn offering(mut n: NodeInput, extra: &[(&str, &str)]) -> NodeInput {
    for (name, q) in extra {
        n.allocatable.push((name.to_string(), q.to_string()));
    }
    n
}

fn requesting(name: &str, extra: &[(String, String)]) -> PodInput {
    let mut p = mk_pod(name, "100m", "64Mi");
    p.containers.push(ContainerInput {
        requests: extra.to_vec(),
        ..Default::default()
    });
    p
}

fn message_of(c: &Sim, uid: &str) -> Option<String> {
    c.statuses
        .iter()
        .rev()
        .find(|s| &*s.uid == uid && s.reason == StatusReason::Unschedulable)
        .map(|s| s.message.to_string())
}

#[test]
fn a_pod_asking_for_forty_unoffered_names_does_not_block_others() {
    let mut c = Sim::workers(2);
    c.add_node(mk_node("n-plain", "4", "8Gi", 110));
    let greedy: Vec<(String, String)> = (0..40)
        .map(|k| (format!("example.com/r{k}"), "1".to_string()))
        .collect();
    c.add_pod(requesting("greedy", &greedy));
    c.settle();
    // A node offering a new name after the greedy pod: it still gets a slot.
    c.add_node(offering(
        mk_node("n0", "4", "8Gi", 110),
        &[("example.org/fpga", "2")],
    ));
    c.add_pod(requesting(
        "fpga",
        &[("example.org/fpga".to_string(), "1".to_string())],
    ));
    c.settle();
    assert_eq!(c.node_of("uid-fpga"), Some("n0"));
    assert_eq!(c.node_of("uid-greedy"), None);
    let m = message_of(&c, "uid-greedy").expect("greedy is reported unschedulable");
    assert!(
        m.starts_with("0/2 nodes are unavailable: 2 Insufficient example.com/r0, ")
            && m.ends_with(
                "2 Insufficient example.com/r9. preemption: 0/2 nodes are available: 2 \
                 Preemption is not helpful for scheduling."
            ),
        "{m}"
    );
    assert!(
        !c.statuses
            .iter()
            .any(|s| s.reason == StatusReason::SchedulerError)
    );
    assert_eq!(
        c.h.core().cache().registry().len(),
        5,
        "cpu, memory, ephemeral-storage, pods and the fpga a node offers"
    );
    c.h.stop();
}

#[test]
fn hundreds_of_names_across_pods_and_nodes() {
    const OFFERED: usize = 300;
    const UNOFFERED: usize = 200;
    let mut c = Sim::workers(4);
    for k in 0..OFFERED {
        let name = format!("example.org/dev-{k}");
        c.add_node(offering(
            mk_node(&format!("n{k}"), "2", "4Gi", 110),
            &[(name.as_str(), "1")],
        ));
    }
    for k in 0..OFFERED {
        c.add_pod(requesting(
            &format!("dev-{k}"),
            &[(format!("example.org/dev-{k}"), "1".into())],
        ));
    }
    for j in 0..UNOFFERED {
        c.add_pod(requesting(
            &format!("none-{j}"),
            &[(format!("example.com/none-{j}"), "1".into())],
        ));
    }
    c.settle();
    for k in 0..OFFERED {
        assert_eq!(
            c.node_of(&format!("uid-dev-{k}")),
            Some(format!("n{k}").as_str()),
            "dev-{k} goes where its device is"
        );
    }
    for j in [0, 7, UNOFFERED - 1] {
        let uid = format!("uid-none-{j}");
        assert_eq!(c.node_of(&uid), None);
        let m = message_of(&c, &uid).expect("reported");
        assert_eq!(
            m,
            format!(
                "0/{OFFERED} nodes are unavailable: {OFFERED} Insufficient example.com/none-{j}. \
                 preemption: 0/{OFFERED} nodes are available: {OFFERED} Preemption is not helpful \
                 for scheduling."
            )
        );
    }
    assert_eq!(c.reported().len(), UNOFFERED);
    assert_eq!(c.h.core().cache().registry().len(), 4 + OFFERED);
    assert!(c.overcommitted().is_empty());

    // A node that offers one of the names no node offered: that pod is re-resolved and bound.
    c.add_node(offering(
        mk_node("late", "2", "4Gi", 110),
        &[("example.com/none-7", "1")],
    ));
    assert!(c.run_until(BACKOFFS, |c| c.node_of("uid-none-7").is_some()));
    assert_eq!(c.node_of("uid-none-7"), Some("late"));
    assert_eq!(c.bound_count(), OFFERED + 1);
    c.h.stop();
    assert_eq!(c.duplicate_bindings(), 0);
}
