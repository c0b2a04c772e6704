//! Dynamic resource allocation (`resource.k8s.io/v1`) end to end: the real scheduler
//! (`app::spawn`, in process, over HTTP) against the API simulator with its resource claim
//! controller (claims made from templates, reservations released and claims deallocated and
//! collected when their pods go). DeviceClasses select devices ResourceSlices publish per node;
//! the scheduler allocates them, writes each claim's allocation and the pod's reservation before
//! the binding (PreBind), and unreserves when the binding fails. Every wait is on observable
//! state (objects, records), never a fixed sleep.
//!
//! - Templates at four workers: 8 GPUs on 2 nodes, 9 pods asking one each: 8 bound, each claim
//!   allocated with its own device on its pod's node and reserved for it; the 9th says `cannot
//!   allocate all claims` until a bound pod goes.
//! - A shared claim: both pods land where its allocation pins them.
//! - CEL selectors on attributes and capacity pick only the devices they match.
//! - `firstAvailable` falls back to the next subrequest.
//! - A `NoSchedule` device taint repels a claim that does not tolerate it.
//! - A pod naming a claim that does not exist waits until it is created.
//! - A failed binding after the claim was written: the claim is unreserved and deallocated, and
//!   the pod is bound on its next attempt.
//! - Extended resources backed by DRA: pods asking for `example.com/gpu`, which no node offers
//!   and a DeviceClass names, each get a claim made for them (owned, annotated, allocated one
//!   device of their node, named in `status.extendedResourceClaimStatus`); the fifth of four
//!   GPUs waits; a failed binding deletes the claim it made.

use kube_sim::{ErrorRule, Faults, SimHandle};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

use crate::common;
use common::*;

const WAIT: Duration = Duration::from_secs(30);
const DRIVER: &str = "gpu.example.com";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
const NODES: [&str; 2] = ["node-00000", "node-00001"];

async fn cluster(workers: usize) -> (SimHandle, Sched) {
    let sim = kube_sim::Sim::start(sim_cfg(2)).await.unwrap();
    let s = Sched::start(&sim, |st| st.workers = workers).await;
    (sim, s)
}

fn create(sim: &SimHandle, plural: &str, obj: Value) {
    let api = if plural == "pods" {
        "v1"
    } else {
        "resource.k8s.io/v1"
    };
    sim.create(api, plural, obj)
        .unwrap_or_else(|e| panic!("create {plural}: {e:?}"));
}

/// The class every test uses: the driver's devices.
fn gpu_class(sim: &SimHandle) {
    create(
        sim,
        "deviceclasses",
        json!({"metadata": {"name": DRIVER}, "spec": {"selectors": [
            {"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    );
}

/// A device: its name, attributes and capacity (JSON maps), taints.
fn device(name: &str, attributes: Value, capacity: Value, taints: Value) -> Value {
    let mut d = json!({"name": name});
    if !attributes.is_null() {
        d["attributes"] = attributes;
    }
    if !capacity.is_null() {
        d["capacity"] = capacity;
    }
    if !taints.is_null() {
        d["taints"] = taints;
    }
    d
}

fn plain(name: &str) -> Value {
    device(name, Value::Null, Value::Null, Value::Null)
}

/// A ResourceSlice of the driver on `node` (pool named after the node).
fn slice(sim: &SimHandle, node: &str, devices: Vec<Value>) {
    create(
        sim,
        "resourceslices",
        json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {
            "driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}),
    );
}

fn exactly(selectors: &[&str], extra: Value) -> Value {
    let mut e = json!({"deviceClassName": DRIVER});
    if !selectors.is_empty() {
        e["selectors"] = selectors
            .iter()
            .map(|s| json!({"cel": {"expression": s}}))
            .collect();
    }
    if let Some(o) = extra.as_object() {
        for (k, v) in o {
            e[k] = v.clone();
        }
    }
    e
}

/// A named claim with one request `gpu` (`request` is its body: `exactly` or
/// `firstAvailable`).
fn claim(sim: &SimHandle, name: &str, request: Value) {
    let mut r = json!({"name": "gpu"});
    for (k, v) in request.as_object().unwrap() {
        r[k] = v.clone();
    }
    create(
        sim,
        "resourceclaims",
        json!({"metadata": {"name": name, "namespace": "default"},
               "spec": {"devices": {"requests": [r]}}}),
    );
}

/// A pod of ours with one pod claim `gpu` from `source` (`resourceClaimName` or
/// `resourceClaimTemplateName`).
fn pod(name: &str, source: Value) -> Value {
    let mut p = kube_sim::pod_object("default", name, "agent-scheduler", "100m", "64Mi");
    let mut c = json!({"name": "gpu"});
    for (k, v) in source.as_object().unwrap() {
        c[k] = v.clone();
    }
    p["spec"]["resourceClaims"] = json!([c]);
    p
}

fn named_pod(sim: &SimHandle, name: &str, claim: &str) {
    create(sim, "pods", pod(name, json!({"resourceClaimName": claim})));
}

fn get_claim(sim: &SimHandle, name: &str) -> Option<Value> {
    sim.get("resource.k8s.io/v1", "resourceclaims", "default", name)
        .ok()
}

/// The claim a pod uses: named, or made from its template (the pod's status names it).
fn claim_of(sim: &SimHandle, pod: &str) -> Option<Value> {
    let p = sim.get("v1", "pods", "default", pod).ok()?;
    let name = match p["spec"]["resourceClaims"][0]["resourceClaimName"].as_str() {
        Some(n) => n.to_owned(),
        None => p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            .as_str()?
            .to_owned(),
    };
    get_claim(sim, &name)
}

fn uid_of(sim: &SimHandle, pod: &str) -> String {
    sim.get("v1", "pods", "default", pod).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// (pool, device) of each result of a claim's allocation, and its request names.
fn results(c: &Value) -> Vec<(String, String, String)> {
    c["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["request"].as_str().unwrap_or("").to_owned(),
                r["pool"].as_str().unwrap_or("").to_owned(),
                r["device"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The node an allocation's selector pins its claim to.
fn pinned(c: &Value) -> Option<String> {
    let f = &c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0];
    (f["key"] == "metadata.name" && f["operator"] == "In")
        .then(|| f["values"][0].as_str().map(str::to_owned))
        .flatten()
}

fn reserved(c: &Value) -> Vec<(String, String, String)> {
    c["status"]["reservedFor"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["resource"].as_str().unwrap_or("").to_owned(),
                r["name"].as_str().unwrap_or("").to_owned(),
                r["uid"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn finalized(c: &Value) -> bool {
    c["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// The pod's `PodScheduled=False` message, once it contains `what`.
async fn wait_message(sim: &SimHandle, pod: &str, what: &str) -> String {
    wait_for(
        &format!("{pod} to say {what:?}"),
        WAIT,
        || {
            condition(sim, pod)
                .filter(|(s, _, m)| s == "False" && m.contains(what))
                .map(|(_, _, m)| m)
        },
        || format!("{:?}", condition(sim, pod)),
    )
    .await
}

async fn wait_bound(sim: &SimHandle, pod: &str) -> String {
    wait_for(
        &format!("{pod} bound"),
        WAIT,
        || node_of(sim, pod),
        || format!("{:?}", condition(sim, pod)),
    )
    .await
}

/// Checks a bound pod's claim: allocated on its node with devices of that node's pool, pinned
/// there, reserved for exactly `reservers`, protected by the finalizer. Returns its devices.
fn check_allocated(
    sim: &SimHandle,
    pod: &str,
    reservers: &[&str],
) -> Vec<(String, String, String)> {
    let node = node_of(sim, pod).unwrap();
    let c = claim_of(sim, pod).unwrap_or_else(|| panic!("{pod}'s claim"));
    let res = results(&c);
    assert!(!res.is_empty(), "{pod}'s claim is not allocated: {c}");
    for (_, pool, _) in &res {
        assert_eq!(pool, &node, "{pod}'s device is not on its node: {c}");
    }
    assert_eq!(pinned(&c).as_deref(), Some(node.as_str()), "{c}");
    let want: BTreeSet<(String, String, String)> = reservers
        .iter()
        .map(|p| ("pods".to_owned(), (*p).to_owned(), uid_of(sim, p)))
        .collect();
    let got: BTreeSet<_> = reserved(&c).into_iter().collect();
    assert_eq!(got, want, "{pod}'s claim reservations: {c}");
    assert!(finalized(&c), "{c}");
    res
}

/// The case: two nodes with four GPUs each, nine pods asking one GPU each through a
/// template, at four workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_gpus_take_eight_pods_and_the_ninth_waits_for_one_to_go() {
    let (sim, s) = cluster(4).await;
    gpu_class(&sim);
    for n in NODES {
        slice(
            &sim,
            n,
            (0..4).map(|i| plain(&format!("gpu-{i}"))).collect(),
        );
    }
    create(
        &sim,
        "resourceclaimtemplates",
        json!({"metadata": {"name": "one-gpu", "namespace": "default"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}}),
    );
    let names: Vec<String> = (0..9).map(|i| format!("trainer-{i}")).collect();
    for n in &names {
        create(
            &sim,
            "pods",
            pod(n, json!({"resourceClaimTemplateName": "one-gpu"})),
        );
    }
    let waiting = wait_for(
        "8 bound and the 9th told why",
        WAIT,
        || {
            let bound = names.iter().filter(|n| node_of(&sim, n).is_some()).count();
            let left: Vec<&String> = names
                .iter()
                .filter(|n| node_of(&sim, n).is_none())
                .collect();
            (bound == 8 && left.len() == 1)
                .then(|| left[0].clone())
                .filter(|p| {
                    condition(&sim, p).is_some_and(|(s, _, m)| {
                        s == "False" && m.contains("cannot allocate all claims")
                    })
                })
        },
        || {
            let bound: Vec<_> = names.iter().filter_map(|n| node_of(&sim, n)).collect();
            format!("bound: {bound:?}")
        },
    )
    .await;
    let (_, reason, message) = condition(&sim, &waiting).unwrap();
    assert_eq!(reason, "Unschedulable");
    assert_eq!(
        message,
        "0/2 nodes are unavailable: 2 cannot allocate all claims. preemption: 0/2 nodes are \
         available: 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(sim.bindings().len(), 8);
    let mut devices = BTreeSet::new();
    for n in names.iter().filter(|n| **n != waiting) {
        let res = check_allocated(&sim, n, &[n]);
        assert_eq!(res.len(), 1);
        assert!(
            devices.insert(res[0].clone()),
            "{:?} allocated twice",
            res[0]
        );
    }
    assert_eq!(devices.len(), 8);

    // A bound pod goes: the controller releases and deallocates its claim and collects it; the
    // ninth takes its device.
    let gone = names.iter().find(|n| **n != waiting).unwrap().clone();
    let (freed_node, freed) = (
        node_of(&sim, &gone).unwrap(),
        check_allocated(&sim, &gone, &[&gone]),
    );
    sim.delete("v1", "pods", "default", &gone).unwrap();
    assert_eq!(wait_bound(&sim, &waiting).await, freed_node);
    let res = check_allocated(&sim, &waiting, &[&waiting]);
    assert_eq!(res[0].1, freed[0].1);
    assert_eq!(res[0].2, freed[0].2, "the ninth got the freed device");
    s.stop().await;
    sim.shutdown().await;
}

/// Two pods share one claim: the first allocation pins the claim to a node and both go there,
/// both reserved on the one device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_sharing_a_claim_land_on_its_node() {
    let (sim, s) = cluster(4).await;
    gpu_class(&sim);
    for n in NODES {
        slice(
            &sim,
            n,
            (0..4).map(|i| plain(&format!("gpu-{i}"))).collect(),
        );
    }
    claim(&sim, "shared", json!({"exactly": exactly(&[], json!({}))}));
    for p in ["reader-0", "reader-1", "reader-2"] {
        named_pod(&sim, p, "shared");
    }
    let mut nodes = BTreeSet::new();
    for p in ["reader-0", "reader-1", "reader-2"] {
        nodes.insert(wait_bound(&sim, p).await);
    }
    assert_eq!(
        nodes.len(),
        1,
        "every user of the claim on its node: {nodes:?}"
    );
    let res = check_allocated(&sim, "reader-0", &["reader-0", "reader-1", "reader-2"]);
    assert_eq!(res.len(), 1, "one device for the one request");
    // A pod decided on the allocation another bind was still writing waited for it: no
    // reservation was refused for want of an allocation, no bind failed.
    let refused: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|w| w.resource == "resourceclaims/status" && w.code == 422)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(sim.bindings().len(), 3);
    s.stop().await;
    sim.shutdown().await;
}

/// A claim on a device every node reaches (an `allNodes` slice) is written with no node
/// selector, as upstream's `createNodeSelector` writes it: pods sharing it go to any node, not
/// only the first one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_a_device_every_node_reaches_pins_no_node() {
    let (sim, s) = cluster(2).await;
    gpu_class(&sim);
    create(
        &sim,
        "resourceslices",
        json!({"metadata": {"name": "fabric"}, "spec": {
            "driver": DRIVER, "allNodes": true,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [plain("nic-0")]}}),
    );
    claim(&sim, "fabric", json!({"exactly": exactly(&[], json!({}))}));
    for (p, node) in [("on-0", NODES[0]), ("on-1", NODES[1])] {
        let mut obj = pod(p, json!({"resourceClaimName": "fabric"}));
        obj["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
        create(&sim, "pods", obj);
    }
    assert_eq!(wait_bound(&sim, "on-0").await, NODES[0]);
    assert_eq!(wait_bound(&sim, "on-1").await, NODES[1]);
    let c = get_claim(&sim, "fabric").unwrap();
    assert_eq!(
        c["status"]["allocation"]["nodeSelector"],
        Value::Null,
        "{c}"
    );
    assert_eq!(
        results(&c),
        [("gpu".to_owned(), "fabric".to_owned(), "nic-0".to_owned())]
    );
    assert_eq!(reserved(&c).len(), 2, "{c}");
    s.stop().await;
    sim.shutdown().await;
}

/// Selectors on attributes and capacity: each claim gets only a device they match (taken in
/// an order where any other choice would leave a later claim without one), and a selector no
/// device matches keeps its pod waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_selectors_on_attributes_and_capacity_pick_only_matching_devices() {
    let (sim, s) = cluster(2).await;
    gpu_class(&sim);
    let gpu = |name: &str, model: &str, memory: &str| {
        device(
            name,
            json!({"model": {"string": model}}),
            json!({"memory": {"value": memory}}),
            Value::Null,
        )
    };
    slice(
        &sim,
        "node-00000",
        vec![gpu("gpu-0", "a100", "40Gi"), gpu("gpu-1", "h100", "80Gi")],
    );
    slice(
        &sim,
        "node-00001",
        vec![gpu("gpu-0", "t4", "16Gi"), gpu("gpu-1", "a100", "80Gi")],
    );
    let a100 = format!("device.attributes[\"{DRIVER}\"].model == \"a100\"");
    let big = format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"80Gi\")) >= 0");
    let cases = [
        (
            "big-a100",
            vec![a100.as_str(), big.as_str()],
            ("node-00001", "gpu-1"),
        ),
        ("any-a100", vec![a100.as_str()], ("node-00000", "gpu-0")),
        ("any-big", vec![big.as_str()], ("node-00000", "gpu-1")),
    ];
    for (name, selectors, (node, dev)) in cases {
        claim(
            &sim,
            name,
            json!({"exactly": exactly(&selectors, json!({}))}),
        );
        named_pod(&sim, name, name);
        assert_eq!(wait_bound(&sim, name).await, node, "{name}");
        let res = check_allocated(&sim, name, &[name]);
        assert_eq!(
            res,
            [("gpu".to_owned(), node.to_owned(), dev.to_owned())],
            "{name}"
        );
    }
    let v100 = format!("device.attributes[\"{DRIVER}\"].model == \"v100\"");
    claim(
        &sim,
        "v100",
        json!({"exactly": exactly(&[&v100], json!({}))}),
    );
    named_pod(&sim, "v100", "v100");
    wait_message(&sim, "v100", "cannot allocate all claims").await;
    assert!(results(&get_claim(&sim, "v100").unwrap()).is_empty());
    s.stop().await;
    sim.shutdown().await;
}

/// `firstAvailable`: the first subrequest no device satisfies falls back to the second (the
/// result names `request/subrequest`); a claim whose first subrequest can be met gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_available_falls_back_to_the_next_subrequest() {
    let (sim, s) = cluster(2).await;
    gpu_class(&sim);
    let gpu = |name: &str, model: &str| {
        device(
            name,
            json!({"model": {"string": model}}),
            Value::Null,
            Value::Null,
        )
    };
    slice(&sim, "node-00000", vec![gpu("gpu-0", "t4")]);
    slice(&sim, "node-00001", vec![gpu("gpu-0", "h100")]);
    let model = |m: &str| format!("device.attributes[\"{DRIVER}\"].model == \"{m}\"");
    let (h200, t4, h100) = (model("h200"), model("t4"), model("h100"));
    let sub = |name: &str, sel: &str| {
        let mut e = exactly(&[sel], json!({}));
        e["name"] = json!(name);
        e
    };
    claim(
        &sim,
        "fallback",
        json!({"firstAvailable": [sub("h200", &h200), sub("t4", &t4)]}),
    );
    named_pod(&sim, "fallback", "fallback");
    assert_eq!(wait_bound(&sim, "fallback").await, "node-00000");
    let res = check_allocated(&sim, "fallback", &["fallback"]);
    assert_eq!(
        res,
        [(
            "gpu/t4".to_owned(),
            "node-00000".to_owned(),
            "gpu-0".to_owned()
        )]
    );
    claim(
        &sim,
        "first",
        json!({"firstAvailable": [sub("h100", &h100), sub("t4", &t4)]}),
    );
    named_pod(&sim, "first", "first");
    assert_eq!(wait_bound(&sim, "first").await, "node-00001");
    let res = check_allocated(&sim, "first", &["first"]);
    assert_eq!(res[0].0, "gpu/h100");
    s.stop().await;
    sim.shutdown().await;
}

/// A `NoSchedule` device taint: a claim without a matching toleration cannot have the device;
/// one that tolerates it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_taint_repels_unless_tolerated() {
    let (sim, s) = cluster(2).await;
    gpu_class(&sim);
    slice(
        &sim,
        "node-00000",
        vec![device(
            "gpu-0",
            Value::Null,
            Value::Null,
            json!([{"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}]),
        )],
    );
    claim(&sim, "plain", json!({"exactly": exactly(&[], json!({}))}));
    named_pod(&sim, "plain", "plain");
    wait_message(&sim, "plain", "cannot allocate all claims").await;
    claim(
        &sim,
        "tolerant",
        json!({"exactly": exactly(&[], json!({"tolerations": [
            {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]}))}),
    );
    named_pod(&sim, "tolerant", "tolerant");
    assert_eq!(wait_bound(&sim, "tolerant").await, "node-00000");
    check_allocated(&sim, "tolerant", &["tolerant"]);
    assert!(node_of(&sim, "plain").is_none());
    assert!(results(&get_claim(&sim, "plain").unwrap()).is_empty());
    s.stop().await;
    sim.shutdown().await;
}

/// A pod naming a claim that does not exist waits with upstream's message, and is bound once
/// the claim is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_claim_holds_its_pod_until_it_is_created() {
    let (sim, s) = cluster(2).await;
    gpu_class(&sim);
    slice(&sim, "node-00001", vec![plain("gpu-0")]);
    named_pod(&sim, "early", "later");
    let m = wait_message(&sim, "early", "not found").await;
    assert!(
        m.contains("resourceclaim.resource.k8s.io \"later\" not found"),
        "{m}"
    );
    claim(&sim, "later", json!({"exactly": exactly(&[], json!({}))}));
    assert_eq!(wait_bound(&sim, "early").await, "node-00001");
    check_allocated(&sim, "early", &["early"]);
    s.stop().await;
    sim.shutdown().await;
}

/// The binding fails after the claim was written: the pod is taken out of the claim's
/// reservations and, as this bind allocated it and nobody else uses it, the claim is
/// deallocated and loses its finalizer before the failure is reported; the next attempt binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_unreserves_and_deallocates_the_claim() {
    let (sim, s) = cluster(1).await;
    gpu_class(&sim);
    slice(&sim, "node-00000", vec![plain("gpu-0")]);
    claim(&sim, "c", json!({"exactly": exactly(&[], json!({}))}));
    sim.faults().set(Faults {
        errors: vec![ErrorRule {
            resource: Some("pods/binding".into()),
            ..ErrorRule::new("create", 1.0)
        }],
        ..Faults::default()
    });
    named_pod(&sim, "p", "c");
    wait_message(&sim, "p", "failed to bind").await;
    // The failure is reported after Unreserve; the next attempt comes after a backoff.
    let c = get_claim(&sim, "c").unwrap();
    assert!(reserved(&c).is_empty(), "{c}");
    assert!(c["status"]["allocation"].is_null(), "{c}");
    assert!(!finalized(&c), "{c}");
    let claim_writes: Vec<(String, u16)> = sim
        .writes()
        .iter()
        .filter(|w| w.resource.starts_with("resourceclaims") && w.name == "c")
        .map(|w| (format!("{} {}", w.verb, w.resource), w.code))
        .collect();
    assert!(
        claim_writes.len() >= 4,
        "finalizer, allocation, unreserve, finalizer: {claim_writes:?}"
    );
    sim.faults().set(Faults::default());
    assert_eq!(wait_bound(&sim, "p").await, "node-00000");
    check_allocated(&sim, "p", &["p"]);
    s.stop().await;
    sim.shutdown().await;
}

/// Upstream's PostFilter: a claim allocated by someone else for a node its pod cannot go to,
/// reserved for nobody, is deallocated by the scheduler (a conditional status write), then
/// allocated again where the pod fits, and the pod is bound there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_allocated_where_its_pod_cannot_go_is_deallocated_and_allocated_again() {
    let (sim, s) = cluster(1).await;
    gpu_class(&sim);
    for n in NODES {
        slice(&sim, n, vec![plain("gpu-0")]);
    }
    claim(
        &sim,
        "elsewhere",
        json!({"exactly": exactly(&[], json!({}))}),
    );
    // Allocated on node 0 (as scheduler_perf's allocResourceClaims does), reserved for nobody.
    let mut c = get_claim(&sim, "elsewhere").unwrap();
    c["status"] = json!({"allocation": {
        "devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": NODES[0], "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODES[0]]}]}]}}});
    sim.update_status("resource.k8s.io/v1", "resourceclaims", c)
        .expect("allocate by hand");
    // The pod may only go to node 1.
    let mut p = pod("pinned", json!({"resourceClaimName": "elsewhere"}));
    p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": NODES[1]});
    create(&sim, "pods", p);
    assert_eq!(wait_bound(&sim, "pinned").await, NODES[1]);
    let res = check_allocated(&sim, "pinned", &["pinned"]);
    assert_eq!(
        res,
        [("gpu".to_owned(), NODES[1].to_owned(), "gpu-0".to_owned())]
    );
    // Deallocated once, then allocated again: two status writes of the claim, both accepted.
    let status_writes: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|w| w.resource == "resourceclaims/status" && w.name == "elsewhere")
        .collect();
    assert_eq!(status_writes.len(), 2, "{status_writes:?}");
    assert!(
        status_writes.iter().all(|w| w.code == 200),
        "{status_writes:?}"
    );
    s.stop().await;
    sim.shutdown().await;
}

/// A pod asking for `n` of the extended resource `resource` (requests and limits, as the API
/// server requires for extended resources).
fn extended_pod(name: &str, resource: &str, n: u32) -> Value {
    let mut p = kube_sim::pod_object("default", name, "agent-scheduler", "100m", "64Mi");
    let r = &mut p["spec"]["containers"][0]["resources"];
    r["requests"][resource] = json!(n.to_string());
    r["limits"] = json!({resource: n.to_string()});
    p
}

/// The claim made for `pod`'s extended resources, by its pod status.
fn extended_claim_of(sim: &SimHandle, pod: &str) -> Option<Value> {
    let p = sim.get("v1", "pods", "default", pod).ok()?;
    let name = p["status"]["extendedResourceClaimStatus"]["resourceClaimName"].as_str()?;
    get_claim(sim, name)
}

/// Four GPUs on two nodes that offer no `example.com/gpu`, a class naming it, five pods asking
/// for one each at four workers: four bound, each with a claim made for it (owned by the pod,
/// annotated, one request `container-0-request-<j>`, allocated a distinct GPU of its node,
/// reserved for it, named with its mapping in the pod's status); the fifth is told why and is
/// bound when a bound pod goes (its claim collected with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_get_a_claim_made_for_them() {
    let (sim, s) = cluster(4).await;
    create(
        &sim,
        "deviceclasses",
        json!({"metadata": {"name": DRIVER}, "spec": {
            "extendedResourceName": "example.com/gpu",
            "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    );
    for n in NODES {
        slice(
            &sim,
            n,
            (0..2).map(|i| plain(&format!("gpu-{i}"))).collect(),
        );
    }
    let names: Vec<String> = (0..5).map(|i| format!("agent-{i}")).collect();
    for n in &names {
        create(&sim, "pods", extended_pod(n, "example.com/gpu", 1));
    }
    let waiting = wait_for(
        "4 bound and the 5th told why",
        WAIT,
        || {
            let left: Vec<&String> = names
                .iter()
                .filter(|n| node_of(&sim, n).is_none())
                .collect();
            (left.len() == 1).then(|| left[0].clone()).filter(|p| {
                condition(&sim, p).is_some_and(|(s, _, m)| {
                    s == "False" && m.contains("cannot allocate all claims")
                })
            })
        },
        || {
            format!(
                "{:?}",
                names.iter().map(|n| condition(&sim, n)).collect::<Vec<_>>()
            )
        },
    )
    .await;
    assert_eq!(
        condition(&sim, &waiting).unwrap().2,
        "0/2 nodes are unavailable: 2 cannot allocate all claims. preemption: 0/2 nodes are \
         available: 2 Preemption is not helpful for scheduling."
    );
    let mut devices = BTreeSet::new();
    for n in names.iter().filter(|n| **n != waiting) {
        let node = node_of(&sim, n).unwrap();
        let c = wait_for(
            &format!("{n}'s extended resource claim"),
            WAIT,
            || extended_claim_of(&sim, n),
            || format!("{:?}", sim.get("v1", "pods", "default", n)),
        )
        .await;
        assert_eq!(
            c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"], "true",
            "{c}"
        );
        let owner = &c["metadata"]["ownerReferences"][0];
        assert_eq!(owner["uid"], uid_of(&sim, n).as_str(), "{c}");
        assert_eq!(owner["controller"], true, "{c}");
        assert!(
            c["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{n}-extended-resources-")),
            "{c}"
        );
        let request = &c["spec"]["devices"]["requests"][0];
        assert_eq!(request["name"], "container-0-request-1", "{c}");
        assert_eq!(request["exactly"]["deviceClassName"], DRIVER, "{c}");
        let res = results(&c);
        assert_eq!(res.len(), 1, "{c}");
        assert_eq!(res[0].1, node, "{c}");
        assert!(
            devices.insert(res[0].clone()),
            "{:?} allocated twice",
            res[0]
        );
        assert_eq!(
            reserved(&c),
            [("pods".to_owned(), n.clone(), uid_of(&sim, n))]
        );
        assert!(finalized(&c), "{c}");
        let p = sim.get("v1", "pods", "default", n).unwrap();
        assert_eq!(
            p["status"]["extendedResourceClaimStatus"]["requestMappings"],
            json!([{"containerName": "main", "resourceName": "example.com/gpu",
                    "requestName": "container-0-request-1"}])
        );
    }
    let gone = names.iter().find(|n| **n != waiting).unwrap().clone();
    let freed_node = node_of(&sim, &gone).unwrap();
    sim.delete("v1", "pods", "default", &gone).unwrap();
    let bound = wait_for(
        &format!("{waiting} bound"),
        WAIT,
        || node_of(&sim, &waiting),
        || {
            format!(
                "{:?} {:?}",
                condition(&sim, &waiting),
                sim.list("resource.k8s.io/v1", "resourceclaims", Some("default"))
            )
        },
    )
    .await;
    assert_eq!(bound, freed_node);
    assert!(extended_claim_of(&sim, &waiting).is_some());
    s.stop().await;
    sim.shutdown().await;
}

/// The binding fails after the claim for the pod's extended resources was made: it is deleted
/// (Unreserve), and the next attempt makes another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_deletes_the_claim_it_made_for_extended_resources() {
    let (sim, s) = cluster(1).await;
    create(
        &sim,
        "deviceclasses",
        json!({"metadata": {"name": DRIVER}, "spec": {
            "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    );
    slice(&sim, "node-00000", vec![plain("gpu-0")]);
    sim.faults().set(Faults {
        errors: vec![ErrorRule {
            resource: Some("pods/binding".into()),
            ..ErrorRule::new("create", 1.0)
        }],
        ..Faults::default()
    });
    let resource = format!("deviceclass.resource.kubernetes.io/{DRIVER}");
    create(&sim, "pods", extended_pod("p", &resource, 1));
    wait_message(&sim, "p", "failed to bind").await;
    let made: Vec<String> = sim
        .writes()
        .iter()
        .filter(|w| w.resource == "resourceclaims" && w.verb == "create" && w.code == 201)
        .map(|w| w.name.clone())
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    wait_for(
        "the claim made deleted",
        WAIT,
        || get_claim(&sim, &made[0]).is_none().then_some(()),
        || format!("{:?}", get_claim(&sim, &made[0])),
    )
    .await;
    sim.faults().set(Faults::default());
    assert_eq!(wait_bound(&sim, "p").await, "node-00000");
    let c = extended_claim_of(&sim, "p").unwrap();
    assert_ne!(c["metadata"]["name"], made[0].as_str());
    assert_eq!(results(&c).len(), 1, "{c}");
    s.stop().await;
    sim.shutdown().await;
}
