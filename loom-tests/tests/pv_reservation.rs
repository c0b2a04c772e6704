//! Model 10 — static volume binding: a PersistentVolume reachable from two nodes is never given
//! to two pods (`volumes::matching`, `Core::pump`).
//!
//! Two nodes `x` and `y` in one zone, one local PV whose node affinity is the zone, and two pods
//! whose unbound `WaitForFirstConsumer` claims (distinct, of a `kubernetes.io/no-provisioner`
//! class) could each take it. Two workers run the real scheduling cycle at once; the driver
//! (the real `Core`) applies their results, hands off what is left, and a worker on the model's
//! thread decides it, until nothing is left.
//!
//! Checked in every interleaving: the PV is in at most one bind intent; the pod left without it
//! is reported unschedulable, not lost; the cache counts every claim (`check_settled`).
//!
//! Mutation `static_pv_outside_lane` (both pods handed off at once, outside the lane) must fail
//! this model: each decision sees the PV free, on a node of its own.
#![cfg(loom)]

use magma_engine::core::Input;
use magma_engine::model::{PodInput, SelectorRequirementInput, SelectorTermInput};
use magma_engine::testing::with_labels;
use magma_engine::volumes::{PodVolumeInput, PvInput, PvcInput, StorageClassInput, StorageInput};
use magma_loom_tests::{harness, node, pod};

const ZONE: &str = "topology.kubernetes.io/zone";

fn with_claim(mut p: PodInput, claim: &str) -> PodInput {
    p.volumes.push(PodVolumeInput {
        name: "data".into(),
        claim: Some(claim.into()),
        ephemeral: false,
    });
    p
}

fn claim(name: &str) -> PvcInput {
    PvcInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("pvc-uid-{name}"),
        storage_class: Some("local".into()),
        phase: "Pending".into(),
        access_modes: vec!["ReadWriteOnce".into()],
        request: Some("1Gi".into()),
        ..Default::default()
    }
}

#[test]
fn pv_reservation() {
    magma_loom_tests::model(|| {
        let mut d = harness(2, 2);
        for n in ["x", "y"] {
            d.input(Input::NodeApply(with_labels(
                node(n, 4000),
                &[(ZONE, "a"), ("kubernetes.io/hostname", n)],
            )));
        }
        d.input(Input::Storage(StorageInput::Class(StorageClassInput {
            name: "local".into(),
            provisioner: "kubernetes.io/no-provisioner".into(),
            binding_mode: "WaitForFirstConsumer".into(),
            allowed_topologies: vec![],
        })));
        d.input(Input::Storage(StorageInput::Pv(PvInput {
            name: "shared".into(),
            node_affinity: Some(vec![SelectorTermInput {
                match_expressions: vec![SelectorRequirementInput {
                    key: ZONE.into(),
                    operator: "In".into(),
                    values: vec!["a".into()],
                }],
                match_fields: vec![],
            }]),
            capacity: Some("10Gi".into()),
            access_modes: vec!["ReadWriteOnce".into()],
            storage_class: Some("local".into()),
            phase: "Available".into(),
            ..Default::default()
        })));
        for i in 0..2 {
            d.input(Input::Storage(StorageInput::Pvc(claim(&format!("c{i}")))));
            d.input(Input::PodApply(with_claim(
                pod(&format!("p{i}"), 100),
                &format!("c{i}"),
            )));
        }
        d.flush();

        magma_loom_tests::race_then_settle(&mut d, |_| ());

        let given: Vec<&str> = d
            .binds
            .iter()
            .filter(|b| b.bind_pvs.iter().any(|s| &*s.pv == "shared"))
            .map(|b| &*b.pod.uid)
            .collect();
        assert!(
            given.len() <= 1,
            "the PV was given to two pods at once: {given:?}"
        );
        magma_loom_tests::other_is_unschedulable(&d, &given, "p0", "p1");
        d.check_settled();
    });
}
