//! Model 12 — DRA devices: a device more than one node reaches (a network-attached NIC or a
//! shared accelerator) is never given to two claims (`Cache::allocate_claims`,
//! `plugins::dynamic_resources`).
//!
//! Two nodes `x` and `y`, one device every node reaches, and two pods each naming its own
//! one-device ResourceClaim. Two workers run the real scheduling cycle at once on one view, in
//! which the device is free; each may claim a different node, so no node's bind version
//! separates them. The driver (the real `Core`) decides the devices again against every
//! decision it applied (protocol: `docs/dra.md`, steps 3–4), hands off what is left, and a
//! worker on the model's thread decides it, until nothing is left.
//!
//! Checked in every interleaving: the device is in at most one bind intent; the pod left
//! without it is reported unschedulable, not lost; the cache counts every claim
//! (`check_settled`).
//!
//! Mutation `dra_trust_worker` (the driver assumes the worker's devices, chosen on the
//! hand-off's view) must fail this model: both pods are given the device.
#![cfg(loom)]

use magma_engine::core::Input;
use magma_engine::dra::devices::{ClassInput, DeviceInput, NodesInput, SliceInput};
use magma_engine::dra::{ClaimInput, DraInput, ExactInput, PodClaimInput, RequestInput};
use magma_engine::model::PodInput;
use magma_loom_tests::{harness, node, pod};

fn with_claim(mut p: PodInput, claim: &str) -> PodInput {
    p.resource_claims.push(PodClaimInput {
        name: "nic".into(),
        claim: Some(claim.into()),
        ..Default::default()
    });
    p
}

fn claim(name: &str) -> ClaimInput {
    ClaimInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("claim-uid-{name}"),
        requests: vec![RequestInput {
            name: "nic".into(),
            exactly: Some(ExactInput {
                class: "nic".into(),
                count: 1,
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn device_claims() {
    magma_loom_tests::model(|| {
        let mut d = harness(2, 2);
        for n in ["x", "y"] {
            d.input(Input::NodeApply(node(n, 4000)));
        }
        d.input(Input::Dra(DraInput::Class(ClassInput {
            name: "nic".into(),
            selectors: vec!["device.driver == \"nic.example.com\"".into()],
            ..Default::default()
        })));
        d.input(Input::Dra(DraInput::Slice(SliceInput {
            name: "fabric".into(),
            driver: "nic.example.com".into(),
            pool: "fabric".into(),
            generation: 1,
            slice_count: 1,
            nodes: NodesInput::All,
            devices: vec![DeviceInput {
                name: "nic-0".into(),
                ..Default::default()
            }],
            shared_counters: Vec::new(),
        })));
        for i in 0..2 {
            d.input(Input::Dra(DraInput::Claim(claim(&format!("c{i}")))));
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
            .filter(|b| {
                b.devices.iter().any(|a| {
                    a.devices
                        .as_ref()
                        .is_some_and(|ds| ds.iter().any(|x| x.device == "nic-0"))
                })
            })
            .map(|b| &*b.pod.uid)
            .collect();
        assert!(
            given.len() <= 1,
            "the device was given to two pods at once: {given:?}"
        );
        magma_loom_tests::other_is_unschedulable(&d, &given, "p0", "p1");
        d.check_settled();
    });
}
