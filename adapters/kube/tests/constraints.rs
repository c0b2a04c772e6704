//! Constraints that span nodes, end to end: the real scheduler (`app::spawn`, in process) against
//! the API simulator. Inter-pod anti-affinity and affinity, topology spread, and volumes: a
//! missing claim, a claim bound to a PV, a `WaitForFirstConsumer` claim the scheduler annotates
//! and the simulator's provisioner binds (PreBind), a provisioner that never binds (the bind
//! times out and is retried), a claim deleted while its pod waits, and volume waits that leave
//! ordinary binds alone. Every wait is on observable state (objects, records).

use kube_sim::{Provisioner, SimConfig, SimHandle};
use magma_engine::{Profile, Sampling};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common;
use common::*;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";
const WAIT: Duration = Duration::from_secs(20);

/// A simulator with `zones.len()` nodes `node-00000`…, node `i` in zone `zones[i]` (none when
/// empty), and the given provisioner.
async fn sim_with(zones: &[&str], provisioner: Provisioner) -> SimHandle {
    let cfg = SimConfig {
        nodes: 0,
        provisioner,
        ..sim_cfg(0)
    };
    let sim = kube_sim::Sim::start(cfg.clone()).await.unwrap();
    for (i, z) in zones.iter().enumerate() {
        let name = kube_sim::node_name(i);
        let mut n = kube_sim::node_object(&cfg, &name, i);
        if !z.is_empty() {
            n["metadata"]["labels"][ZONE] = json!(z);
        }
        sim.create("v1", "nodes", n).unwrap();
    }
    sim
}

/// A pending pod of ours with labels and extra spec fields.
fn pod_with(name: &str, labels: Value, spec: Value) -> Value {
    let mut p = kube_sim::pod_object("default", name, "agent-scheduler", "100m", "64Mi");
    p["metadata"]["labels"] = labels;
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

fn create_pod(sim: &SimHandle, pod: Value) {
    sim.create("v1", "pods", pod).unwrap();
}

/// A pod using claim `claim` as volume `data`.
fn pod_with_claim(name: &str, claim: &str) -> Value {
    pod_with(
        name,
        json!({}),
        json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}),
    )
}

fn node_label(sim: &SimHandle, node: &str, key: &str) -> String {
    sim.get("v1", "nodes", "", node).unwrap()["metadata"]["labels"][key]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn claim(sim: &SimHandle, name: &str) -> Value {
    sim.get("v1", "persistentvolumeclaims", "default", name)
        .unwrap()
}

/// Patches of a claim the scheduler made (successful ones).
fn claim_patches(sim: &SimHandle, name: &str) -> usize {
    sim.writes()
        .iter()
        .filter(|w| {
            w.verb == "patch"
                && w.resource == "persistentvolumeclaims"
                && w.name == name
                && w.code == 200
        })
        .count()
}

fn wffc_class(sim: &SimHandle) {
    sim.create(
        "storage.k8s.io/v1",
        "storageclasses",
        kube_sim::storage_class_object("wffc", "sim.csi.magma.io", Some("WaitForFirstConsumer")),
    )
    .unwrap();
}

fn wffc_claim(sim: &SimHandle, name: &str) {
    sim.create(
        "v1",
        "persistentvolumeclaims",
        kube_sim::pvc_object("default", name, Some("wffc"), "1Gi"),
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Pod affinity and topology spread

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_hostname_anti_affinity_never_shares_a_node() {
    let sim = sim_with(&["", "", "", ""], Provisioner::Off).await;
    let s = Sched::start(&sim, |_| {}).await;
    // A Deployment-style set of five replicas, one more than there are nodes.
    let anti = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}});
    for i in 0..5 {
        create_pod(
            &sim,
            pod_with(
                &format!("web-7d9f-{i}"),
                json!({"app": "web", "pod-template-hash": "7d9f"}),
                json!({"affinity": anti}),
            ),
        );
    }
    eventually("four replicas bound", WAIT, || sim.bindings().len() == 4).await;
    let left = (0..5)
        .map(|i| format!("web-7d9f-{i}"))
        .find(|n| node_of(&sim, n).is_none())
        .unwrap();
    eventually("the fifth reported", WAIT, || {
        condition(&sim, &left).is_some()
    })
    .await;
    let (status, reason, message) = condition(&sim, &left).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable")
    );
    assert!(
        message.starts_with("0/4 nodes are unavailable: ") && message.contains("anti-affinity"),
        "{message}"
    );
    let nodes: BTreeSet<String> = sim.bindings().into_iter().map(|b| b.node).collect();
    assert_eq!(nodes.len(), 4, "every replica on its own node");
    // A replica leaves: the fifth takes its node (a pod leaving wakes anti-affinity).
    let gone = sim.bindings()[0].clone();
    sim.delete("v1", "pods", "default", &gone.name).unwrap();
    eventually("the fifth bound where one left", WAIT, || {
        node_of(&sim, &left).is_some()
    })
    .await;
    assert_eq!(node_of(&sim, &left).unwrap(), gone.node);
    let placed: Vec<String> = (0..5)
        .filter_map(|i| node_of(&sim, &format!("web-7d9f-{i}")))
        .collect();
    let distinct: BTreeSet<&String> = placed.iter().collect();
    assert_eq!((placed.len(), distinct.len()), (4, 4));
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_skew_one_zone_spread_is_kept() {
    let sim = sim_with(&["a", "a", "b", "b", "c", "c"], Provisioner::Off).await;
    // Zone a's nodes are ten times larger: the resource scorers alone would fill them first.
    for i in [0, 1] {
        let mut n = sim.get("v1", "nodes", "", &kube_sim::node_name(i)).unwrap();
        for f in ["capacity", "allocatable"] {
            n["status"][f]["cpu"] = json!("320");
            n["status"][f]["memory"] = json!("2560Gi");
        }
        sim.update_status("v1", "nodes", n).unwrap();
    }
    // Two replicas already run in zone a (placed by someone else).
    for (i, node) in [(0, 0), (1, 1)] {
        let mut p = pod_with(&format!("old-{i}"), json!({"app": "spread"}), json!({}));
        p["spec"]["schedulerName"] = json!("default-scheduler");
        p["spec"]["nodeName"] = json!(kube_sim::node_name(node));
        create_pod(&sim, p);
    }
    let s = Sched::start(&sim, |_| {}).await;
    let spread = json!([{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                         "labelSelector": {"matchLabels": {"app": "spread"}}}]);
    for i in 0..7 {
        create_pod(
            &sim,
            pod_with(
                &format!("new-{i}"),
                json!({"app": "spread"}),
                json!({"topologySpreadConstraints": spread}),
            ),
        );
    }
    eventually("seven bound", WAIT, || sim.bindings().len() == 7).await;
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    per_zone.insert("a".into(), 2);
    for b in sim.bindings() {
        *per_zone.entry(node_label(&sim, &b.node, ZONE)).or_default() += 1;
    }
    // From 2/0/0, nine replicas with skew at most 1 can only end 3/3/3.
    assert_eq!(
        per_zone,
        BTreeMap::from([("a".into(), 3), ("b".into(), 3), ("c".into(), 3)])
    );
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_affinity_lands_beside_the_db_pod() {
    let sim = sim_with(&["", "", "", ""], Provisioner::Off).await;
    let db_node = kube_sim::node_name(2);
    let mut db = pod_with("db-0", json!({"app": "db"}), json!({}));
    db["spec"]["schedulerName"] = json!("default-scheduler");
    db["spec"]["nodeName"] = json!(db_node);
    create_pod(&sim, db);
    let s = Sched::start(&sim, |_| {}).await;
    let with = |app: &str| {
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}]}}})
    };
    for i in 0..3 {
        create_pod(
            &sim,
            pod_with(&format!("api-{i}"), json!({"app": "api"}), with("db")),
        );
    }
    create_pod(
        &sim,
        pod_with("lonely", json!({"app": "api"}), with("cache")),
    );
    eventually("three bound", WAIT, || sim.bindings().len() == 3).await;
    for i in 0..3 {
        assert_eq!(node_of(&sim, &format!("api-{i}")).unwrap(), db_node);
    }
    // Nothing matches app=cache (and the pod is not one itself): nowhere to go.
    eventually("lonely reported", WAIT, || {
        condition(&sim, "lonely").is_some()
    })
    .await;
    let (_, reason, message) = condition(&sim, "lonely").unwrap();
    assert_eq!(reason, "Unschedulable");
    assert_eq!(
        message,
        "0/4 nodes are unavailable: 4 node(s) didn't match pod affinity rules. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    );
    s.stop().await;
    sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Volumes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_claim_is_unschedulable_until_it_exists_bound_to_a_pv() {
    // The PV controller (no provisioning) completes the claim's binding to the PV it names;
    // until then the claim is only pre-bound, which the scheduler does not take as bound.
    let sim = sim_with(&["", "", ""], Provisioner::Never).await;
    let s = Sched::start(&sim, |_| {}).await;
    create_pod(&sim, pod_with_claim("uses-x", "x"));
    eventually("reported", WAIT, || condition(&sim, "uses-x").is_some()).await;
    let (_, reason, message) = condition(&sim, "uses-x").unwrap();
    assert_eq!(reason, "Unschedulable");
    assert!(
        message.contains("persistentvolumeclaim \"x\" not found"),
        "{message}"
    );
    // A PV pinned to node 1, and the claim bound to it: the pod goes there, with nothing to
    // provision (no claim patch).
    let node = kube_sim::node_name(1);
    sim.create(
        "v1",
        "persistentvolumes",
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-x"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "csi": {"driver": "sim.csi.magma.io", "volumeHandle": "h-x"},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}}),
    )
    .unwrap();
    let mut pvc = kube_sim::pvc_object("default", "x", None, "1Gi");
    pvc["spec"]["volumeName"] = json!("pv-x");
    pvc["spec"]["storageClassName"] = json!("");
    sim.create("v1", "persistentvolumeclaims", pvc).unwrap();
    eventually("bound once the claim exists", WAIT, || {
        node_of(&sim, "uses-x").is_some()
    })
    .await;
    assert_eq!(node_of(&sim, "uses-x").unwrap(), node);
    assert_eq!(claim_patches(&sim, "x"), 0);
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_claim_is_annotated_provisioned_then_the_pod_bound() {
    let sim = sim_with(
        &["", "", ""],
        Provisioner::After(Duration::from_millis(300)),
    )
    .await;
    let s = Sched::start(&sim, |_| {}).await;
    wffc_class(&sim);
    wffc_claim(&sim, "data-e");
    create_pod(&sim, pod_with_claim("uses-e", "data-e"));
    eventually("bound", WAIT, || node_of(&sim, "uses-e").is_some()).await;
    let node = node_of(&sim, "uses-e").unwrap();
    let c = claim(&sim, "data-e");
    assert_eq!(
        c["metadata"]["annotations"][kube_sim::SELECTED_NODE_ANNOTATION],
        json!(node),
        "{c}"
    );
    assert_eq!(c["status"]["phase"], "Bound");
    let pv_name = c["spec"]["volumeName"].as_str().unwrap().to_owned();
    let pv = sim.get("v1", "persistentvolumes", "", &pv_name).unwrap();
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            [0],
        json!(node)
    );
    // One patch, then one binding, in that order.
    let writes = sim.writes();
    let patch = writes
        .iter()
        .position(|w| w.verb == "patch" && w.resource == "persistentvolumeclaims")
        .unwrap();
    let bind = writes
        .iter()
        .position(|w| w.resource == "pods/binding")
        .unwrap();
    assert!(patch < bind);
    assert_eq!(claim_patches(&sim, "data-e"), 1);
    assert_eq!(sim.bindings().len(), 1);
    // The binding waited for the provisioner (its delay after the patch).
    let waited = sim.bindings()[0]
        .at
        .duration_since(writes[patch].at)
        .unwrap();
    assert!(
        waited >= Duration::from_millis(300),
        "bound {waited:?} after the patch"
    );
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_never_bound_times_out_with_the_reason_and_is_retried() {
    let sim = sim_with(&["", ""], Provisioner::Never).await;
    let conf = "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      volumebinding.bindTimeoutSeconds: 1\n  - name: nodeorder\n";
    let s = Sched::start(&sim, |st| {
        st.profile = Profile::parse(conf, Sampling::default()).unwrap();
    })
    .await;
    wffc_class(&sim);
    wffc_claim(&sim, "data-f");
    create_pod(&sim, pod_with_claim("uses-f", "data-f"));
    eventually("SchedulerError", WAIT, || {
        condition(&sim, "uses-f").is_some_and(|c| c.1 == "SchedulerError")
    })
    .await;
    let (status, _, message) = condition(&sim, "uses-f").unwrap();
    assert_eq!(status, "False");
    assert!(
        message
            == "execute preBind for pod default/uses-f failed: binding volumes: context deadline \
                exceeded (persistentvolumeclaims not bound: default/data-f), resync the task",
        "{message}"
    );
    // Backed off, then tried again: the claim is annotated anew.
    eventually("retried", WAIT, || claim_patches(&sim, "data-f") >= 2).await;
    assert!(sim.bindings().is_empty(), "never bound without its volume");
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_while_its_pod_waits_fails_the_bind() {
    let sim = sim_with(&["", ""], Provisioner::Never).await;
    let s = Sched::start(&sim, |_| {}).await;
    wffc_class(&sim);
    wffc_claim(&sim, "data-g");
    create_pod(&sim, pod_with_claim("uses-g", "data-g"));
    eventually("annotated", WAIT, || claim_patches(&sim, "data-g") == 1).await;
    sim.delete("v1", "persistentvolumeclaims", "default", "data-g")
        .unwrap();
    eventually("SchedulerError", WAIT, || {
        condition(&sim, "uses-g").is_some_and(|c| c.1 == "SchedulerError")
    })
    .await;
    let message = condition(&sim, "uses-g").unwrap().2;
    assert!(
        message.contains(
            "binding volumes: failed to check provisioning pvc: could not find v1.PersistentVolumeClaim \"default/data-g\""
        ),
        "{message}"
    );
    // Its retry finds no claim at all.
    eventually("then Unschedulable", WAIT, || {
        condition(&sim, "uses-g").is_some_and(|c| c.1 == "Unschedulable")
    })
    .await;
    assert!(
        condition(&sim, "uses-g")
            .unwrap()
            .2
            .contains("persistentvolumeclaim \"data-g\" not found")
    );
    assert!(sim.bindings().is_empty());
    s.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_waits_leave_ordinary_binds_alone() {
    let sim = sim_with(&["", "", "", ""], Provisioner::Never).await;
    // One ordinary bind at a time: a volume wait holding that permit would stall them all.
    let s = Sched::start(&sim, |st| st.bind.concurrency = 1).await;
    wffc_class(&sim);
    for i in 0..3 {
        let c = format!("data-h{i}");
        wffc_claim(&sim, &c);
        create_pod(&sim, pod_with_claim(&format!("waits-{i}"), &c));
    }
    eventually("every claim annotated", WAIT, || {
        (0..3).all(|i| claim_patches(&sim, &format!("data-h{i}")) == 1)
    })
    .await;
    for i in 0..30 {
        sim.create_pod(
            "default",
            &format!("plain-{i}"),
            "agent-scheduler",
            "10m",
            "16Mi",
        )
        .unwrap();
    }
    eventually("the ordinary pods bound", WAIT, || {
        sim.bindings().len() == 30
    })
    .await;
    assert!(
        (0..3).all(|i| node_of(&sim, &format!("waits-{i}")).is_none()),
        "the volume pods still wait"
    );
    // Stopping abandons the waits promptly (no bind timeout to sit out).
    let stopped = tokio::time::timeout(Duration::from_secs(15), s.stop()).await;
    assert!(
        stopped.is_ok(),
        "the scheduler stops while binds wait for volumes"
    );
    sim.shutdown().await;
}
