//! Dynamic Resource Allocation (`dra`, kube-scheduler's DynamicResources) on the engine's
//! deterministic harness: devices allocated per pod on its node, never one device to two
//! claims (with several workers deciding on one view), shared claims pinning their pods,
//! selectors, `firstAvailable`, device taints, `matchAttribute`, partitionable devices, and
//! pods whose claims are not there yet.

use magma_engine::PodInput;
use magma_engine::core::StatusReason;
use magma_engine::dra::capacity::RequestPolicyInput;
use magma_engine::dra::cel::AttrValue;
use magma_engine::dra::devices::{
    ClassInput, DeviceInput, DeviceTaintInput, NodesInput, SliceInput,
};
use magma_engine::dra::{
    ClaimInput, ConstraintInput, DraInput, ExactInput, PodClaimInput, RequestInput,
};
use magma_engine::model::TolerationInput;
use magma_engine::testing::{Sim, mk_node, mk_pod, with_labels};
use std::collections::BTreeSet;

const DRIVER: &str = "gpu.example.com";

fn class(sim: &mut Sim, name: &str, selector: &str) {
    sim.dra(DraInput::Class(ClassInput {
        name: name.into(),
        selectors: vec![selector.into()],
        ..Default::default()
    }));
}

fn gpu(name: &str, model: &str, mem_gi: i64) -> DeviceInput {
    DeviceInput {
        name: name.into(),
        attributes: vec![
            ("model".into(), AttrValue::String(model.into())),
            ("index".into(), AttrValue::Int(name.len() as i64)),
        ],
        capacity: vec![("memory".into(), format!("{mem_gi}Gi"))],
        ..Default::default()
    }
}

/// A slice of `devices` local to `node` (pool = node).
fn node_slice(sim: &mut Sim, node: &str, devices: Vec<DeviceInput>) {
    sim.dra(DraInput::Slice(SliceInput {
        name: format!("{node}-{DRIVER}"),
        driver: DRIVER.into(),
        pool: node.into(),
        generation: 1,
        slice_count: 1,
        nodes: NodesInput::Node(node.into()),
        devices,
        shared_counters: Vec::new(),
    }));
}

fn exactly(class: &str, selectors: &[&str], count: i64) -> ExactInput {
    ExactInput {
        class: class.into(),
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        count,
        ..Default::default()
    }
}

fn claim(name: &str, requests: Vec<RequestInput>) -> ClaimInput {
    ClaimInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("claim-uid-{name}"),
        requests,
        ..Default::default()
    }
}

fn one_gpu(name: &str) -> ClaimInput {
    claim(
        name,
        vec![RequestInput {
            name: "gpu".into(),
            exactly: Some(exactly("gpu", &[], 1)),
            ..Default::default()
        }],
    )
}

fn with_claim(mut p: PodInput, claim: &str) -> PodInput {
    p.resource_claims.push(PodClaimInput {
        name: "gpu".into(),
        claim: Some(claim.into()),
        ..Default::default()
    });
    p
}

/// The pod's last unschedulable message, without the preemption part (no pod here has lower
/// priority than another: DefaultPreemption says it is not helpful).
fn message(sim: &Sim, name: &str) -> Option<String> {
    let m = sim
        .statuses
        .iter()
        .rev()
        .find(|s| &*s.name == name && s.reason == StatusReason::Unschedulable)
        .map(|s| s.message.to_string())?;
    // A pod upstream's PreEnqueue keeps out is no attempt: no preemption, no suffix.
    let Some((m, preemption)) = m.split_once(" preemption: ") else {
        return Some(m);
    };
    assert!(
        preemption.ends_with("Preemption is not helpful for scheduling."),
        "{preemption}"
    );
    Some(m.to_owned())
}

/// The devices allocated to each claim: (claim, node its nodeSelector names or "" for none,
/// devices).
fn allocations(sim: &Sim) -> Vec<(String, String, Vec<String>)> {
    sim.claims
        .values()
        .filter_map(|c| {
            let a = c.allocation.as_ref()?;
            let node = a
                .nodes
                .as_ref()
                .and_then(|n| n[0].match_fields.first())
                .map_or(String::new(), |r| r.values[0].clone());
            let devices = a
                .devices
                .iter()
                .map(|d| format!("{}/{}", d.pool, d.device))
                .collect();
            Some((c.name.clone(), node, devices))
        })
        .collect()
}

fn two_gpu_nodes(sim: &mut Sim) {
    class(sim, "gpu", &format!("device.driver == \"{DRIVER}\""));
    for n in ["n0", "n1"] {
        sim.add_node(mk_node(n, "64", "256Gi", 110));
        node_slice(
            sim,
            n,
            (0..4)
                .map(|i| gpu(&format!("gpu-{i}"), "a100", 40))
                .collect(),
        );
    }
}

/// Eight GPUs on two nodes, nine pods each with its own one-GPU claim, four workers deciding on
/// one view: exactly eight bound, each claim given a distinct GPU of its pod's node, the ninth
/// told upstream's reason; deleting a bound pod and its claim lets the ninth in.
#[test]
fn one_gpu_per_pod_never_double_booked() {
    let mut c = Sim::workers(4);
    two_gpu_nodes(&mut c);
    for i in 0..9 {
        c.add_claim(one_gpu(&format!("c{i}")));
        c.add_pod(with_claim(
            mk_pod(&format!("p{i}"), "1", "1Gi"),
            &format!("c{i}"),
        ));
    }
    c.settle();
    assert_eq!(c.bound_count(), 8);
    assert!(
        c.double_allocations.is_empty(),
        "{:?}",
        c.double_allocations
    );
    let allocs = allocations(&c);
    assert_eq!(allocs.len(), 8);
    let devices: BTreeSet<String> = allocs.iter().flat_map(|a| a.2.clone()).collect();
    assert_eq!(devices.len(), 8, "distinct devices: {allocs:?}");
    for (claim, node, devs) in &allocs {
        let pod = format!("uid-p{}", &claim[1..]);
        assert_eq!(c.node_of(&pod), Some(node.as_str()), "{claim}");
        assert!(devs.iter().all(|d| d.starts_with(&format!("{node}/"))));
        assert_eq!(
            c.claims[&("default".into(), claim.clone())].reserved_for,
            [pod]
        );
    }
    let waiting = (0..9)
        .find(|i| c.node_of(&format!("uid-p{i}")).is_none())
        .unwrap();
    assert_eq!(
        message(&c, &format!("p{waiting}")).as_deref(),
        Some("0/2 nodes are unavailable: 2 cannot allocate all claims.")
    );
    // A bound pod goes, and its claim with it (as the resource-claim controller does for a
    // template's claim): the ninth gets the freed GPU.
    let gone = (0..9).find(|&i| i != waiting).unwrap();
    c.delete_pod(&format!("uid-p{gone}"));
    c.claims.remove(&("default".into(), format!("c{gone}")));
    c.dra(DraInput::ClaimDelete {
        namespace: "default".into(),
        name: format!("c{gone}"),
    });
    c.run_for(std::time::Duration::from_secs(30));
    assert!(c.node_of(&format!("uid-p{waiting}")).is_some());
    assert!(c.double_allocations.is_empty());
}

/// Devices every node reaches (network-attached): a node's bind version does not guard them,
/// so two workers may choose one device on two nodes. The driver decides again when it applies
/// each claim: two devices, four pods at four workers, exactly two bound.
#[test]
fn devices_every_node_reaches_are_given_once() {
    let mut c = Sim::workers(4);
    class(&mut c, "nic", "device.driver == \"nic.example.com\"");
    for n in ["n0", "n1", "n2", "n3"] {
        c.add_node(mk_node(n, "64", "256Gi", 110));
    }
    c.dra(DraInput::Slice(SliceInput {
        name: "fabric".into(),
        driver: "nic.example.com".into(),
        pool: "fabric".into(),
        generation: 1,
        slice_count: 1,
        nodes: NodesInput::All,
        devices: vec![gpu("nic-0", "x", 1), gpu("nic-1", "x", 1)],
        shared_counters: Vec::new(),
    }));
    for i in 0..4 {
        c.add_claim(claim(
            &format!("c{i}"),
            vec![RequestInput {
                name: "nic".into(),
                exactly: Some(exactly("nic", &[], 1)),
                ..Default::default()
            }],
        ));
        c.add_pod(with_claim(
            mk_pod(&format!("p{i}"), "1", "1Gi"),
            &format!("c{i}"),
        ));
    }
    c.settle();
    assert_eq!(c.bound_count(), 2);
    assert!(
        c.double_allocations.is_empty(),
        "{:?}",
        c.double_allocations
    );
    let devices: BTreeSet<String> = allocations(&c).into_iter().flat_map(|a| a.2).collect();
    assert_eq!(devices.len(), 2);
}

/// The allocation's node selector is upstream's: none for devices every node reaches (a pod
/// sharing the claim may go to any node), the slice's own selector for devices of a selected
/// pool (its pods go where that selector allows), the node for a node-local device.
#[test]
fn the_allocation_reaches_the_nodes_its_devices_reach() {
    use magma_engine::model::{SelectorRequirementInput, SelectorTermInput};
    let mut c = Sim::workers(2);
    class(&mut c, "nic", "device.driver == \"nic.example.com\"");
    for (n, rack) in [("n0", "r0"), ("n1", "r0"), ("n2", "r1")] {
        c.add_node(with_labels(
            mk_node(n, "64", "256Gi", 110),
            &[("rack", rack), ("kubernetes.io/hostname", n)],
        ));
    }
    let rack0 = SelectorTermInput {
        match_expressions: vec![SelectorRequirementInput {
            key: "rack".into(),
            operator: "In".into(),
            values: vec!["r0".into()],
        }],
        match_fields: vec![],
    };
    for (name, nodes) in [
        ("fabric", NodesInput::All),
        ("rack0", NodesInput::Selector(vec![rack0.clone()])),
    ] {
        c.dra(DraInput::Slice(SliceInput {
            name: name.into(),
            driver: "nic.example.com".into(),
            pool: name.into(),
            generation: 1,
            slice_count: 1,
            nodes,
            devices: vec![gpu(&format!("{name}-nic"), name, 1)],
            shared_counters: Vec::new(),
        }));
    }
    let nic = |sel: &str| RequestInput {
        name: "nic".into(),
        exactly: Some(exactly("nic", &[sel], 1)),
        ..Default::default()
    };
    c.add_claim(claim(
        "everywhere",
        vec![nic(
            "device.attributes[\"nic.example.com\"].model == \"fabric\"",
        )],
    ));
    c.add_claim(claim(
        "in-rack",
        vec![nic(
            "device.attributes[\"nic.example.com\"].model == \"rack0\"",
        )],
    ));
    let on = |p: PodInput, node: &str| {
        let mut p = p;
        p.node_selector = vec![("kubernetes.io/hostname".into(), node.into())];
        p
    };
    c.add_pod(on(with_claim(mk_pod("a", "1", "1Gi"), "everywhere"), "n0"));
    c.add_pod(on(with_claim(mk_pod("b", "1", "1Gi"), "in-rack"), "n0"));
    c.settle();
    assert_eq!(c.bound_count(), 2);
    let written = |name: &str| {
        c.claims[&("default".to_string(), name.to_string())]
            .allocation
            .clone()
            .unwrap()
            .nodes
    };
    assert_eq!(written("everywhere"), None);
    assert_eq!(written("in-rack"), Some(vec![rack0]));
    // Pods sharing the claims follow what the allocation allows, not the first pod's node.
    c.add_pod(on(with_claim(mk_pod("a2", "1", "1Gi"), "everywhere"), "n2"));
    c.add_pod(on(with_claim(mk_pod("b2", "1", "1Gi"), "in-rack"), "n1"));
    c.add_pod(on(with_claim(mk_pod("b3", "1", "1Gi"), "in-rack"), "n2"));
    c.settle();
    assert_eq!(c.node_of("uid-a2"), Some("n2"));
    assert_eq!(c.node_of("uid-b2"), Some("n1"));
    assert_eq!(c.node_of("uid-b3"), None);
    assert_eq!(
        message(&c, "b3").as_deref(),
        Some(
            "0/3 nodes are unavailable: 1 resourceclaim not available on the node, 2 node(s) didn't match Pod's node affinity/selector."
        )
    );
}

/// A claim two pods name is allocated once, for the first pod's node; the second pod follows it
/// there (the allocation's node selector) and is added to `reservedFor`.
#[test]
fn a_shared_claim_pins_its_pods_to_one_node() {
    let mut c = Sim::workers(2);
    two_gpu_nodes(&mut c);
    c.add_claim(one_gpu("shared"));
    c.add_pod(with_claim(mk_pod("a", "1", "1Gi"), "shared"));
    c.settle();
    let node = c.node_of("uid-a").unwrap().to_owned();
    c.add_pod(with_claim(mk_pod("b", "1", "1Gi"), "shared"));
    c.settle();
    assert_eq!(c.node_of("uid-b"), Some(node.as_str()));
    let shared = &c.claims[&("default".into(), "shared".into())];
    assert_eq!(shared.reserved_for, ["uid-a", "uid-b"]);
    assert_eq!(shared.allocation.as_ref().unwrap().devices.len(), 1);
}

/// Upstream's PostFilter: a claim allocated for a node the pod cannot use, reserved for
/// nobody, is deallocated (on the condition of its version), and the pod is then given devices
/// where it fits. A claim some pod still reserves is left alone.
#[test]
fn an_unused_claim_allocated_where_the_pod_cannot_go_is_deallocated() {
    let mut c = Sim::workers(1);
    two_gpu_nodes(&mut c);
    c.add_claim(one_gpu("sticky"));
    c.add_pod(with_claim(mk_pod("a", "1", "1Gi"), "sticky"));
    c.settle();
    let first = c.node_of("uid-a").unwrap().to_owned();
    // Its pod is gone and the reservation with it; the allocation stays (no finalizer of ours
    // to make the controller undo it, as for a claim allocated by someone else).
    c.delete_pod("uid-a");
    let key = ("default".to_owned(), "sticky".to_owned());
    let mut claim = c.claims[&key].clone();
    claim.reserved_for.clear();
    c.add_claim(claim);
    // The allocation's node is cordoned: the next pod fits nowhere the claim allows.
    let mut cordoned = mk_node(&first, "64", "256Gi", 110);
    cordoned.unschedulable = true;
    c.add_node(cordoned);
    c.add_pod(with_claim(mk_pod("b", "1", "1Gi"), "sticky"));
    c.settle();
    assert_eq!(c.deallocations.len(), 1, "{:?}", c.deallocations);
    assert_eq!(&*c.deallocations[0].name, "sticky");
    let other = c
        .node_of("uid-b")
        .expect("bound once the claim was deallocated");
    assert_ne!(other, first);
    let allocated = allocations(&c);
    assert_eq!(allocated.len(), 1);
    assert_eq!(allocated[0].1, other, "allocated again where the pod went");

    // A claim still reserved by a pod is never deallocated for another.
    let mut c = Sim::workers(1);
    two_gpu_nodes(&mut c);
    c.add_claim(one_gpu("held"));
    c.add_pod(with_claim(mk_pod("a", "1", "1Gi"), "held"));
    c.settle();
    let first = c.node_of("uid-a").unwrap().to_owned();
    let mut cordoned = mk_node(&first, "64", "256Gi", 110);
    cordoned.unschedulable = true;
    c.add_node(cordoned);
    c.add_pod(with_claim(mk_pod("b", "1", "1Gi"), "held"));
    c.settle();
    assert!(c.deallocations.is_empty(), "{:?}", c.deallocations);
    assert_eq!(c.node_of("uid-b"), None);
    assert!(message(&c, "b").is_some());
}

/// CEL: the request's attribute and capacity selectors pick only matching devices.
#[test]
fn selectors_pick_matching_devices_only() {
    let mut c = Sim::workers(1);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    c.add_node(mk_node("n1", "64", "256Gi", 110));
    node_slice(
        &mut c,
        "n0",
        vec![gpu("g0", "t4", 16), gpu("g1", "a100", 40)],
    );
    node_slice(&mut c, "n1", vec![gpu("g0", "a100", 80)]);
    let by = |name: &str, sel: &str| {
        claim(
            name,
            vec![RequestInput {
                name: "gpu".into(),
                exactly: Some(exactly("gpu", &[sel], 1)),
                ..Default::default()
            }],
        )
    };
    c.add_claim(by(
        "big",
        &format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"64Gi\")) >= 0"),
    ));
    c.add_pod(with_claim(mk_pod("big", "1", "1Gi"), "big"));
    c.add_claim(by(
        "t4",
        &format!("device.attributes[\"{DRIVER}\"].model == \"t4\""),
    ));
    c.add_pod(with_claim(mk_pod("t4", "1", "1Gi"), "t4"));
    c.add_claim(by(
        "h100",
        &format!("device.attributes[\"{DRIVER}\"].model == \"h100\""),
    ));
    c.add_pod(with_claim(mk_pod("h100", "1", "1Gi"), "h100"));
    c.settle();
    assert_eq!(c.node_of("uid-big"), Some("n1"));
    assert_eq!(c.node_of("uid-t4"), Some("n0"));
    let t4 = &c.claims[&("default".into(), "t4".into())];
    assert_eq!(t4.allocation.as_ref().unwrap().devices[0].device, "g0");
    assert_eq!(c.node_of("uid-h100"), None);
    assert_eq!(
        message(&c, "h100").as_deref(),
        Some("0/2 nodes are unavailable: 2 cannot allocate all claims.")
    );
}

/// `firstAvailable`: the first subrequest that can be satisfied, named `request/subrequest` in
/// the allocation.
#[test]
fn first_available_falls_back_in_order() {
    let mut c = Sim::workers(1);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    node_slice(&mut c, "n0", vec![gpu("g0", "t4", 16), gpu("g1", "t4", 16)]);
    let model = |m: &str| format!("device.attributes[\"{DRIVER}\"].model == \"{m}\"");
    let mut big = exactly("gpu", &[&model("a100")], 1);
    big.name = "a100".into();
    let mut small = exactly("gpu", &[&model("t4")], 2);
    small.name = "two-t4".into();
    c.add_claim(claim(
        "c",
        vec![RequestInput {
            name: "gpu".into(),
            first_available: vec![big, small],
            ..Default::default()
        }],
    ));
    c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "c"));
    c.settle();
    assert_eq!(c.node_of("uid-p"), Some("n0"));
    let a = c.claims[&("default".into(), "c".into())]
        .allocation
        .clone()
        .unwrap();
    let got: Vec<(&str, &str)> = a
        .devices
        .iter()
        .map(|d| (d.request.as_str(), d.device.as_str()))
        .collect();
    assert_eq!(got, [("gpu/two-t4", "g0"), ("gpu/two-t4", "g1")]);
}

/// A device tainted `NoSchedule` is not given unless the request tolerates the taint.
#[test]
fn a_device_taint_repels_unless_tolerated() {
    let mut c = Sim::workers(1);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    let mut g = gpu("g0", "a100", 40);
    g.taints.push(DeviceTaintInput {
        key: "maintenance".into(),
        value: "true".into(),
        effect: "NoSchedule".into(),
    });
    node_slice(&mut c, "n0", vec![g]);
    c.add_claim(one_gpu("plain"));
    c.add_pod(with_claim(mk_pod("plain", "1", "1Gi"), "plain"));
    let mut tolerant = exactly("gpu", &[], 1);
    tolerant.tolerations.push(TolerationInput {
        key: "maintenance".into(),
        operator: "Exists".into(),
        value: String::new(),
        effect: "NoSchedule".into(),
    });
    c.settle();
    assert_eq!(c.node_of("uid-plain"), None);
    assert_eq!(
        message(&c, "plain").as_deref(),
        Some("0/1 nodes are unavailable: 1 cannot allocate all claims.")
    );
    c.add_claim(claim(
        "tolerant",
        vec![RequestInput {
            name: "gpu".into(),
            exactly: Some(tolerant),
            ..Default::default()
        }],
    ));
    c.add_pod(with_claim(mk_pod("tolerant", "1", "1Gi"), "tolerant"));
    c.settle();
    assert_eq!(c.node_of("uid-tolerant"), Some("n0"));
}

/// `matchAttribute`: two devices of one claim agree on the attribute, so they come from the
/// same node's NUMA group (here: `numa`), not any two free devices.
#[test]
fn match_attribute_keeps_devices_together() {
    let mut c = Sim::workers(1);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    let numa = |name: &str, n: i64| {
        let mut d = gpu(name, "a100", 40);
        d.attributes.push(("numa".into(), AttrValue::Int(n)));
        d
    };
    node_slice(
        &mut c,
        "n0",
        vec![numa("g0", 0), numa("g1", 1), numa("g2", 1), numa("g3", 2)],
    );
    let mut cl = claim(
        "pair",
        vec![RequestInput {
            name: "gpu".into(),
            exactly: Some(exactly("gpu", &[], 2)),
            ..Default::default()
        }],
    );
    cl.constraints.push(ConstraintInput {
        requests: Vec::new(),
        match_attribute: format!("{DRIVER}/numa"),
        distinct: false,
    });
    c.add_claim(cl);
    c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "pair"));
    c.settle();
    let a = c.claims[&("default".into(), "pair".into())]
        .allocation
        .clone()
        .expect("allocated");
    let got: Vec<&str> = a.devices.iter().map(|d| d.device.as_str()).collect();
    assert_eq!(got, ["g1", "g2"]);
}

/// A pod naming a claim that does not exist waits with upstream's text and takes nothing; it is
/// bound once the claim appears.
#[test]
fn a_missing_claim_holds_the_pod_until_it_exists() {
    let mut c = Sim::workers(1);
    two_gpu_nodes(&mut c);
    c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "later"));
    c.settle();
    assert_eq!(c.node_of("uid-p"), None);
    // Reported once it has waited `HOLD_REPORT_GRACE`, not at once.
    assert_eq!(message(&c, "p"), None);
    c.run_for(magma_engine::core::HOLD_REPORT_GRACE);
    assert_eq!(c.node_of("uid-p"), None);
    assert_eq!(
        message(&c, "p").as_deref(),
        Some("0/2 nodes are unavailable: 2 resourceclaim.resource.k8s.io \"later\" not found.")
    );
    // Upstream's PreEnqueue: not an attempt, so no preemption and no backoff.
    let stats = c.h.stats().snapshot();
    assert_eq!(stats.preemption_attempts, 0);
    assert_eq!(stats.attempts, 0, "no worker tried it");
    assert!(stats.claim_holds >= 1);
    c.add_claim(one_gpu("later"));
    c.settle();
    assert!(c.node_of("uid-p").is_some(), "woken by its claim, at once");
}

/// A pod whose claim appears within `HOLD_REPORT_GRACE` (the resource-claim controller's
/// ordinary delay) is bound without ever being reported: upstream writes nothing for it either.
#[test]
fn a_claim_made_promptly_leaves_no_condition() {
    let mut c = Sim::workers(1);
    two_gpu_nodes(&mut c);
    c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "soon"));
    c.settle();
    c.add_claim(one_gpu("soon"));
    c.run_for(magma_engine::core::HOLD_REPORT_GRACE * 2);
    assert!(c.node_of("uid-p").is_some());
    assert!(
        c.statuses.iter().all(|s| &*s.name != "p"),
        "{:?}",
        c.statuses
    );
}

/// A class that does not exist: the claim cannot be allocated anywhere as written.
#[test]
fn a_missing_class_is_reported() {
    let mut c = Sim::workers(1);
    two_gpu_nodes(&mut c);
    c.add_claim(claim(
        "c",
        vec![RequestInput {
            name: "gpu".into(),
            exactly: Some(exactly("tpu", &[], 1)),
            ..Default::default()
        }],
    ));
    c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "c"));
    c.settle();
    assert_eq!(c.node_of("uid-p"), None);
    let m = message(&c, "p").unwrap();
    assert!(
        m.contains("2 request gpu: device class tpu does not exist"),
        "{m}"
    );
}

/// A device that allows multiple allocations with `memory: 80Gi` (requests from 1Gi, the
/// default), as kube-scheduler's ConsumableCapacity benchmark publishes them.
fn shareable(name: &str) -> DeviceInput {
    DeviceInput {
        name: name.into(),
        capacity: vec![("memory".into(), "80Gi".into())],
        allow_multiple_allocations: true,
        request_policies: vec![(
            "memory".into(),
            RequestPolicyInput {
                default: Some("1Gi".into()),
                valid_range: Some((Some("1Gi".into()), None, None)),
                ..Default::default()
            },
        )],
        ..Default::default()
    }
}

/// A request for `memory` of one device of class `gpu`.
fn memory_request(name: &str, memory: &str) -> RequestInput {
    let mut e = exactly("gpu", &[], 1);
    e.capacity = vec![("memory".into(), memory.into())];
    RequestInput {
        name: name.into(),
        exactly: Some(e),
        ..Default::default()
    }
}

/// What the written shares consume of each device, in GiB: (pool/device → GiB).
fn shared_gib(sim: &Sim) -> std::collections::BTreeMap<String, i64> {
    let mut used = std::collections::BTreeMap::new();
    for c in sim.claims.values() {
        for d in c.allocation.iter().flat_map(|a| a.devices.iter()) {
            let share = d.share.as_ref().expect("a shareable device is shared");
            assert!(share.id.is_some(), "a share has its shareID");
            for (name, q) in &share.consumed {
                assert_eq!(name, "memory");
                let gib: i64 = q.strip_suffix("Gi").expect("GiB").parse().unwrap();
                *used.entry(format!("{}/{}", d.pool, d.device)).or_default() += gib;
            }
        }
    }
    used
}

/// Consumable capacity: pods asking 40Gi each of devices with 80Gi that allow multiple
/// allocations, decided by four workers at once: two shares per device, never three, and the
/// pod left over binds once a share is given back.
#[test]
fn shareable_devices_are_shared_until_their_capacity_is_used() {
    let mut c = Sim::workers(4);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    node_slice(&mut c, "n0", vec![shareable("s0"), shareable("s1")]);
    for i in 0..5 {
        c.add_claim(claim(&format!("c{i}"), vec![memory_request("mem", "40Gi")]));
        c.add_pod(with_claim(
            mk_pod(&format!("p{i}"), "1", "1Gi"),
            &format!("c{i}"),
        ));
    }
    c.settle();
    assert_eq!(c.bound_count(), 4);
    assert!(c.double_allocations.is_empty());
    let used = shared_gib(&c);
    assert_eq!(used, [("n0/s0".into(), 80), ("n0/s1".into(), 80)].into());
    let waiting = (0..5)
        .find(|i| c.node_of(&format!("uid-p{i}")).is_none())
        .unwrap();
    assert_eq!(
        message(&c, &format!("p{waiting}")).as_deref(),
        Some("0/1 nodes are unavailable: 1 cannot allocate all claims.")
    );
    let gone = (0..5).find(|&i| i != waiting).unwrap();
    c.delete_pod(&format!("uid-p{gone}"));
    c.claims.remove(&("default".into(), format!("c{gone}")));
    c.dra(DraInput::ClaimDelete {
        namespace: "default".into(),
        name: format!("c{gone}"),
    });
    c.run_for(std::time::Duration::from_secs(30));
    assert!(c.node_of(&format!("uid-p{waiting}")).is_some());
    assert!(shared_gib(&c).values().all(|&g| g <= 80));
}

/// Two requests of one claim may share one device (upstream's ConsumableCapacity template:
/// two requests of 40Gi); with `distinctAttribute` on the device's name they may not.
#[test]
fn requests_of_one_claim_share_a_device_unless_distinct() {
    for distinct in [false, true] {
        let mut c = Sim::workers(1);
        class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
        c.add_node(mk_node("n0", "64", "256Gi", 110));
        let named = |name: &str, id: i64| {
            let mut d = shareable(name);
            d.attributes.push(("id".into(), AttrValue::Int(id)));
            d
        };
        node_slice(&mut c, "n0", vec![named("s0", 0), named("s1", 1)]);
        let mut cl = claim(
            "two",
            vec![
                memory_request("req-0", "40Gi"),
                memory_request("req-1", "40Gi"),
            ],
        );
        if distinct {
            cl.constraints.push(ConstraintInput {
                requests: Vec::new(),
                match_attribute: format!("{DRIVER}/id"),
                distinct: true,
            });
        }
        c.add_claim(cl);
        c.add_pod(with_claim(mk_pod("p", "1", "1Gi"), "two"));
        c.settle();
        let a = c.claims[&("default".into(), "two".into())]
            .allocation
            .clone()
            .expect("allocated");
        let got: Vec<&str> = a.devices.iter().map(|d| d.device.as_str()).collect();
        let want: &[&str] = if distinct {
            &["s0", "s1"]
        } else {
            &["s0", "s0"]
        };
        assert_eq!(got, want, "distinct: {distinct}");
    }
}

/// A device that does not allow multiple allocations is taken whole: a request's capacity only
/// selects it (too little there: not this device), and its result carries no share.
#[test]
fn capacity_requests_select_ordinary_devices() {
    let mut c = Sim::workers(1);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    node_slice(
        &mut c,
        "n0",
        vec![gpu("small", "a100", 40), gpu("large", "h100", 80)],
    );
    c.add_claim(claim("big", vec![memory_request("mem", "60Gi")]));
    c.add_pod(with_claim(mk_pod("p0", "1", "1Gi"), "big"));
    c.add_claim(claim("more", vec![memory_request("mem", "60Gi")]));
    c.add_pod(with_claim(mk_pod("p1", "1", "1Gi"), "more"));
    c.settle();
    assert_eq!(
        c.bound_count(),
        1,
        "one device has 60Gi, and it is taken whole"
    );
    let (_, _, devices) = allocations(&c).pop().unwrap();
    assert_eq!(devices, ["n0/large"]);
    assert!(
        c.claims
            .values()
            .flat_map(|c| c.allocation.iter().flat_map(|a| a.devices.iter()))
            .all(|d| d.share.is_none())
    );
    let mut odd = claim("odd", vec![memory_request("mem", "1Gi")]);
    if let Some(e) = odd.requests[0].exactly.as_mut() {
        e.capacity = vec![("bandwidth".into(), "1".into())];
    }
    c.add_claim(odd);
    c.add_pod(with_claim(mk_pod("p2", "1", "1Gi"), "odd"));
    c.settle();
    assert_eq!(
        message(&c, "p2").as_deref(),
        Some("0/1 nodes are unavailable: 1 cannot allocate all claims."),
        "no device publishes the capacity asked for"
    );
}

/// Shares of a device every node reaches are decided by workers on different nodes at once:
/// the driver's second decision keeps the capacity (cross-node claim path).
#[test]
fn shares_of_a_device_every_node_reaches_never_exceed_it() {
    let mut c = Sim::workers(4);
    class(&mut c, "gpu", &format!("device.driver == \"{DRIVER}\""));
    for n in ["n0", "n1", "n2", "n3"] {
        c.add_node(mk_node(n, "64", "256Gi", 110));
    }
    c.dra(DraInput::Slice(SliceInput {
        name: "fabric".into(),
        driver: DRIVER.into(),
        pool: "fabric".into(),
        generation: 1,
        slice_count: 1,
        nodes: NodesInput::All,
        devices: vec![shareable("pooled")],
        shared_counters: Vec::new(),
    }));
    for i in 0..6 {
        c.add_claim(claim(&format!("c{i}"), vec![memory_request("mem", "30Gi")]));
        c.add_pod(with_claim(
            mk_pod(&format!("p{i}"), "1", "1Gi"),
            &format!("c{i}"),
        ));
    }
    c.settle();
    assert_eq!(c.bound_count(), 2, "80Gi holds two shares of 30Gi");
    assert_eq!(shared_gib(&c), [("fabric/pooled".into(), 60)].into());
}

// ---------------------------------------------------------------------------------------------
// Extended resources backed by DRA (`DRAExtendedResource`)

fn gpu_class_for(sim: &mut Sim, name: &str, extended: Option<&str>, created: &str) {
    sim.dra(DraInput::Class(ClassInput {
        name: name.into(),
        selectors: vec![format!("device.driver == \"{DRIVER}\"")],
        extended_resource_name: extended.map(str::to_owned),
        created: created.into(),
    }));
}

/// A pod whose only container asks for `n` of `resource`.
fn wants(name: &str, resource: &str, n: i64) -> PodInput {
    let mut p = mk_pod(name, "1", "1Gi");
    p.containers[0]
        .requests
        .push((resource.into(), n.to_string()));
    p
}

/// The claims made for pods' extended resources: (owner pod UID, node, devices).
fn extended_allocations(sim: &Sim) -> Vec<(String, String, Vec<String>)> {
    let made: BTreeSet<String> = sim
        .claims
        .values()
        .filter(|c| c.extended)
        .map(|c| c.name.clone())
        .collect();
    allocations(sim)
        .into_iter()
        .filter(|a| made.contains(&a.0))
        .map(|(name, node, devs)| {
            let owner = sim.claims[&("default".into(), name)]
                .owner_uid
                .clone()
                .unwrap();
            (owner, node, devs)
        })
        .collect()
}

/// Nodes n0 and n1 offer no `example.com/gpu` but have four GPUs each in slices; n2 offers two
/// through its allocatable (a device plugin). Eleven one-GPU pods at four workers: eight get a
/// claim made for them with a distinct GPU of their node, two go to n2 without one (counted by
/// NodeResourcesFit), the eleventh is told why on every node.
#[test]
fn extended_resources_are_devices_where_no_node_offers_them() {
    let mut c = Sim::workers(4);
    gpu_class_for(
        &mut c,
        "gpu",
        Some("example.com/gpu"),
        "2026-01-01T00:00:00Z",
    );
    for n in ["n0", "n1"] {
        c.add_node(mk_node(n, "64", "256Gi", 110));
        node_slice(
            &mut c,
            n,
            (0..4)
                .map(|i| gpu(&format!("gpu-{i}"), "a100", 40))
                .collect(),
        );
    }
    let mut n2 = mk_node("n2", "64", "256Gi", 110);
    n2.allocatable.push(("example.com/gpu".into(), "2".into()));
    c.add_node(n2);
    for i in 0..11 {
        c.add_pod(wants(&format!("p{i}"), "example.com/gpu", 1));
    }
    c.settle();
    assert_eq!(c.bound_count(), 10);
    assert!(
        c.double_allocations.is_empty(),
        "{:?}",
        c.double_allocations
    );
    let made = extended_allocations(&c);
    assert_eq!(made.len(), 8, "{made:?}");
    let devices: BTreeSet<String> = made.iter().flat_map(|a| a.2.clone()).collect();
    assert_eq!(devices.len(), 8, "distinct devices: {made:?}");
    for (owner, node, devs) in &made {
        assert_eq!(c.node_of(owner), Some(node.as_str()), "{owner}");
        assert!(devs.iter().all(|d| d.starts_with(&format!("{node}/"))));
        let (claim, mappings) = &c.extended_status[owner];
        assert!(claim.starts_with(&owner[4..]), "{claim}");
        assert_eq!(
            mappings,
            &[(
                "main".to_string(),
                "example.com/gpu".to_string(),
                "container-0-request-1".to_string()
            )]
        );
    }
    let on_n2 = (0..11)
        .filter(|i| c.node_of(&format!("uid-p{i}")) == Some("n2"))
        .count();
    assert_eq!(on_n2, 2);
    let waiting = (0..11)
        .find(|i| c.node_of(&format!("uid-p{i}")).is_none())
        .unwrap();
    assert_eq!(
        message(&c, &format!("p{waiting}")).as_deref(),
        Some(
            "0/3 nodes are unavailable: 1 Insufficient example.com/gpu, 2 cannot allocate all \
             claims."
        )
    );
}

/// Every class provides `deviceclass.resource.kubernetes.io/<class>`; a pod asking for a
/// resource no class names stays pending `Insufficient` until a class names it, and is then
/// woken by the class.
#[test]
fn implicit_names_and_a_class_created_later() {
    let mut c = Sim::workers(1);
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    node_slice(
        &mut c,
        "n0",
        (0..2)
            .map(|i| gpu(&format!("gpu-{i}"), "a100", 40))
            .collect(),
    );
    gpu_class_for(&mut c, "gpu", None, "2026-01-01T00:00:00Z");
    c.add_pod(wants(
        "implicit",
        "deviceclass.resource.kubernetes.io/gpu",
        1,
    ));
    c.add_pod(wants("named", "example.com/gpu", 1));
    c.settle();
    assert_eq!(c.node_of("uid-implicit"), Some("n0"));
    assert_eq!(c.node_of("uid-named"), None);
    assert_eq!(
        message(&c, "named").as_deref(),
        Some("0/1 nodes are unavailable: 1 Insufficient example.com/gpu.")
    );
    // Two classes name it: the later created provides it.
    gpu_class_for(
        &mut c,
        "old",
        Some("example.com/gpu"),
        "2026-01-01T00:00:00Z",
    );
    c.dra(DraInput::Class(ClassInput {
        name: "new".into(),
        selectors: vec!["false".into()],
        extended_resource_name: Some("example.com/gpu".into()),
        created: "2026-02-01T00:00:00Z".into(),
    }));
    c.settle();
    assert_eq!(
        c.node_of("uid-named"),
        None,
        "the newer class selects nothing"
    );
    c.dra(DraInput::ClassDelete("new".into()));
    c.settle();
    assert_eq!(c.node_of("uid-named"), Some("n0"));
    let made = extended_allocations(&c);
    assert_eq!(made.len(), 2, "{made:?}");
}

/// A claim an earlier attempt made for the pod (its bind failed after creating it) is deleted
/// (PostFilter), and the pod then gets a new one.
#[test]
fn a_stale_claim_for_extended_resources_is_deleted_first() {
    let mut c = Sim::workers(1);
    gpu_class_for(
        &mut c,
        "gpu",
        Some("example.com/gpu"),
        "2026-01-01T00:00:00Z",
    );
    c.add_node(mk_node("n0", "64", "256Gi", 110));
    node_slice(
        &mut c,
        "n0",
        (0..1)
            .map(|i| gpu(&format!("gpu-{i}"), "a100", 40))
            .collect(),
    );
    c.add_claim(ClaimInput {
        namespace: "default".into(),
        name: "p-extended-resources-old".into(),
        uid: "old".into(),
        owner_uid: Some("uid-p".into()),
        extended: true,
        requests: vec![RequestInput {
            name: "container-0-request-1".into(),
            exactly: Some(exactly("gpu", &[], 1)),
            ..Default::default()
        }],
        ..Default::default()
    });
    c.add_pod(wants("p", "example.com/gpu", 1));
    c.settle();
    assert!(
        c.statuses.iter().any(|s| s
            .message
            .starts_with("0/1 nodes are unavailable: 1 cannot schedule extended resource claim.")),
        "{:?}",
        c.statuses
    );
    assert!(
        c.deallocations
            .iter()
            .any(|d| d.delete && &*d.name == "p-extended-resources-old"),
        "{:?}",
        c.deallocations
    );
    assert!(
        !c.claims
            .contains_key(&("default".into(), "p-extended-resources-old".into()))
    );
    let st: Vec<_> = c.statuses.iter().map(|s| s.message.to_string()).collect();
    assert_eq!(c.node_of("uid-p"), Some("n0"), "{st:?}");
    assert_eq!(extended_allocations(&c).len(), 1);
}
