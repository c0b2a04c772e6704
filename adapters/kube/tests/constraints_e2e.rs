//! Constraints that span nodes, end to end with real processes and kubectl as the client: the
//! `kube-sim` binary (with its provisioner), the `agent-scheduler` binary, and pods created with
//! `kubectl create`, as a new user would. The four cases a user hit before these plugins existed
//! (a required hostname anti-affinity, a zone spread of maxSkew 1, a required affinity to a
//! database pod, a pod whose claim does not exist), a WaitForFirstConsumer claim provisioned
//! before its pod is bound, and a claim that never binds: the pod reports why and is retried.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::procs;
use procs::{Proc, SimProc, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";

/// A simulator with `nodes` nodes, labelled alternately `zone-a` / `zone-b`.
fn sim(dir: &Path, nodes: usize, extra: &[&str]) -> (SimProc, Vec<String>) {
    let sim = SimProc::start(dir, nodes, extra);
    let list = sim.kubectl_json(&["get", "nodes"]);
    let names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    for (i, n) in names.iter().enumerate() {
        let zone = if i % 2 == 0 { "zone-a" } else { "zone-b" };
        let (ok, out) = sim.kubectl(&["label", "node", n, &format!("{ZONE}={zone}")], None);
        assert!(ok, "{out}");
    }
    (sim, names)
}

fn create(sim: &SimProc, yaml: &str) {
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(yaml));
    assert!(ok, "kubectl create: {out}\n{yaml}");
}

fn pods(sim: &SimProc) -> Vec<Value> {
    sim.kubectl_json(&["get", "pods", "-n", "default"])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn node_of(p: &Value) -> Option<String> {
    p["spec"]["nodeName"].as_str().map(str::to_owned)
}

fn name_of(p: &Value) -> &str {
    p["metadata"]["name"].as_str().unwrap_or("")
}

/// The `PodScheduled=False` message of a pod, if any.
fn unschedulable_message(sim: &SimProc, pod: &str) -> Option<String> {
    let p = sim.kubectl_json(&["get", "pod", pod, "-n", "default"]);
    p["status"]["conditions"].as_array()?.iter().find_map(|c| {
        (c["type"] == "PodScheduled" && c["status"] == "False")
            .then(|| c["message"].as_str().unwrap_or("").to_owned())
    })
}

fn zones(sim: &SimProc) -> BTreeMap<String, String> {
    sim.kubectl_json(&["get", "nodes"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_owned(),
                n["metadata"]["labels"][ZONE]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

fn pod_yaml(name: &str, app: &str, extra_spec: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels:\n    app: {app}\nspec:\n  schedulerName: agent-scheduler\n{extra_spec}  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n        memory: 64Mi\n"
    )
}

fn scheduler(dir: &Path, sim: &SimProc, extra: &[&str]) -> Proc {
    start_scheduler(dir, sim, "agent-scheduler", extra)
}

#[test]
fn the_four_cases_a_new_user_hit_behave_as_kube_scheduler() {
    let dir = procs::tmpdir("constraints-e2e");
    // The PV controller (no provisioning) completes the binding of case 4's pre-bound claim.
    let (sim, nodes) = sim(&dir, 4, &["--provisioner-never"]);
    let _s = scheduler(&dir, &sim, &[]);

    // 1. Five replicas refusing each other on a node, on four nodes: one node each, one left.
    let anti = "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector:\n          matchLabels:\n            app: web\n        topologyKey: kubernetes.io/hostname\n";
    let yaml: String = (0..5)
        .map(|i| pod_yaml(&format!("web-{i}"), "web", anti))
        .collect();
    create(&sim, &yaml);
    wait_until("four web pods bound, one reported", WAIT, || {
        let ps = pods(&sim);
        let bound = ps.iter().filter(|p| node_of(p).is_some()).count();
        bound == 4
            && ps
                .iter()
                .any(|p| node_of(p).is_none() && unschedulable_message(&sim, name_of(p)).is_some())
    });
    let ps = pods(&sim);
    let used: BTreeSet<String> = ps.iter().filter_map(node_of).collect();
    assert_eq!(used.len(), 4, "two web pods share a node");
    let left = ps.iter().find(|p| node_of(p).is_none()).unwrap();
    assert_eq!(
        unschedulable_message(&sim, name_of(left)).unwrap(),
        "0/4 nodes are unavailable: 4 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    );

    // 2. Four pods spread over the zone with maxSkew 1: two and two.
    let spread = "  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector:\n      matchLabels:\n        app: spread\n";
    let yaml: String = (0..4)
        .map(|i| pod_yaml(&format!("spread-{i}"), "spread", spread))
        .collect();
    create(&sim, &yaml);
    wait_until("four spread pods bound", WAIT, || {
        pods(&sim)
            .iter()
            .filter(|p| name_of(p).starts_with("spread-") && node_of(p).is_some())
            .count()
            == 4
    });
    let z = zones(&sim);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for p in pods(&sim)
        .iter()
        .filter(|p| name_of(p).starts_with("spread-"))
    {
        *per_zone.entry(z[&node_of(p).unwrap()].clone()).or_default() += 1;
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        [2, 2],
        "{per_zone:?}"
    );

    // 3. A database, then a pod that must be in its zone.
    create(&sim, &pod_yaml("db", "db", ""));
    wait_until("db bound", WAIT, || {
        pods(&sim)
            .iter()
            .any(|p| name_of(p) == "db" && node_of(p).is_some())
    });
    let aff = "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector:\n          matchLabels:\n            app: db\n        topologyKey: topology.kubernetes.io/zone\n";
    create(&sim, &pod_yaml("api", "api", aff));
    wait_until("api bound", WAIT, || {
        pods(&sim)
            .iter()
            .any(|p| name_of(p) == "api" && node_of(p).is_some())
    });
    let ps = pods(&sim);
    let at = |n: &str| node_of(ps.iter().find(|p| name_of(p) == n).unwrap()).unwrap();
    assert_eq!(z[&at("api")], z[&at("db")], "api is away from the db");

    // 4. A pod whose claim does not exist: reported, then bound once the claim is there.
    let vol =
        "  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: data-claim\n";
    create(&sim, &pod_yaml("stateful", "stateful", vol));
    wait_until("stateful reported", WAIT, || {
        unschedulable_message(&sim, "stateful").is_some()
    });
    let msg = unschedulable_message(&sim, "stateful").unwrap();
    assert!(
        msg.contains("persistentvolumeclaim \"data-claim\" not found"),
        "{msg}"
    );
    let node = &nodes[0];
    create(
        &sim,
        &format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv-data\nspec:\n  capacity:\n    storage: 1Gi\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  claimRef:\n    namespace: default\n    name: data-claim\n  csi:\n    driver: csi.example.com\n    volumeHandle: vol-data\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - key: kubernetes.io/hostname\n          operator: In\n          values: [{node}]\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-claim\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  volumeName: pv-data\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
    wait_until("stateful bound", WAIT, || {
        pods(&sim)
            .iter()
            .any(|p| name_of(p) == "stateful" && node_of(p).is_some())
    });
    let ps = pods(&sim);
    assert_eq!(
        node_of(ps.iter().find(|p| name_of(p) == "stateful").unwrap()).as_deref(),
        Some(node.as_str()),
        "the PV's node affinity pins it"
    );
}

fn wffc_class_and_claim(sim: &SimProc, claim: &str) {
    create(
        sim,
        &format!(
            "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: late\nprovisioner: csi.example.com\nvolumeBindingMode: WaitForFirstConsumer\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {claim}\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: late\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    );
}

#[test]
fn a_wait_for_first_consumer_claim_is_provisioned_before_its_pod_is_bound() {
    let dir = procs::tmpdir("constraints-e2e-wffc");
    let (sim, _) = sim(&dir, 2, &["--provisioner-delay", "200ms"]);
    let _s = scheduler(&dir, &sim, &[]);
    wffc_class_and_claim(&sim, "scratch");
    let vol = "  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: scratch\n";
    create(&sim, &pod_yaml("sandbox", "sandbox", vol));
    wait_until("sandbox bound", WAIT, || {
        pods(&sim)
            .iter()
            .any(|p| name_of(p) == "sandbox" && node_of(p).is_some())
    });
    let pvc = sim.kubectl_json(&["get", "pvc", "scratch", "-n", "default"]);
    let node = node_of(&sim.kubectl_json(&["get", "pod", "sandbox", "-n", "default"])).unwrap();
    assert_eq!(
        pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        node.as_str(),
        "the scheduler chose the node for the claim"
    );
    assert_eq!(pvc["status"]["phase"], "Bound", "bound before the pod was");
}

#[test]
fn a_claim_that_never_binds_is_reported_and_retried() {
    let dir = procs::tmpdir("constraints-e2e-never");
    let (sim, _) = sim(&dir, 2, &["--provisioner-never"]);
    let conf = dir.join("scheduler.conf");
    std::fs::write(
        &conf,
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      volumebinding.bindTimeoutSeconds: 1\n  - name: nodeorder\n",
    )
    .unwrap();
    let _s = scheduler(
        &dir,
        &sim,
        &[&format!("--scheduler-conf={}", conf.display())],
    );
    wffc_class_and_claim(&sim, "stuck");
    let vol = "  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: stuck\n";
    create(&sim, &pod_yaml("waiting", "waiting", vol));
    // Reported with the reason, then tried again after its backoff (the claim, the only one, is
    // annotated again: the request record shows a second patch).
    wait_until("the pod reports the volume bind failure", WAIT, || {
        unschedulable_message(&sim, "waiting").is_some_and(|m| m.contains("binding volumes"))
    });
    wait_until("a second attempt", WAIT, || {
        let reqs = sim.records_blocking("requests");
        reqs.as_array().is_some_and(|a| {
            a.iter()
                .filter(|r| r["verb"] == "patch" && r["resource"] == "persistentvolumeclaims")
                .count()
                >= 2
        })
    });
    let p = sim.kubectl_json(&["get", "pod", "waiting", "-n", "default"]);
    assert!(node_of(&p).is_none(), "never bound while its claim is not");
}
