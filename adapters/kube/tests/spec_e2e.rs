//! Never bound against its spec, never left without a word: the real `agent-scheduler` binary
//! against the `kube-sim` binary, pods created and read back with kubectl, as a new user would.
//!
//! - Pod-level resources (`spec.resources`) count as kube-scheduler counts them: the over-commit
//!   cases a user hit are refused with `Insufficient cpu` / `Insufficient memory`, and a node is
//!   filled exactly to its allocatable by pod-level pods at four workers.
//! - Pods with `resourceClaims` are never bound while their claims are not allocated for them:
//!   they wait with a `PodScheduled=False` condition naming the claim and saying why (missing,
//!   made from a template, DRA switched off in the profile), and take nothing from other pods.
//! - NodeVolumeLimits' boundaries (CSINode `allocatable.count` 0, 1, exactly at, one over, a
//!   shared claim counted once).
//! - Every path on which a pod waits has a condition: filters (above), a claim only a PV made by
//!   hand could satisfy, a PreBind that times out (and the node it waited for, nominated
//!   meanwhile), a binding the API server refuses (retried).

use serde_json::Value;
use std::path::Path;
use std::time::Duration;

use crate::procs;
use procs::{Proc, SimProc, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);

fn pod(sim: &SimProc, name: &str) -> Value {
    sim.get("pod", name)
}

fn node_of(p: &Value) -> Option<String> {
    p["spec"]["nodeName"].as_str().map(str::to_owned)
}

/// A pod; `resources` is its pod-level `resources:` block (indented for `spec`), `container` the
/// container's `resources:` block, `extra` more of the spec.
fn pod_yaml(name: &str, resources: &str, container: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n{resources}{extra}  containers:\n  - name: c\n    image: sandbox\n{container}"
    )
}

fn pod_level(cpu: &str, memory: &str) -> String {
    format!("  resources:\n    requests:\n      cpu: {cpu}\n      memory: {memory}\n")
}

fn container_requests(cpu: &str) -> String {
    format!("    resources:\n      requests:\n        cpu: {cpu}\n")
}

fn scheduler(dir: &Path, sim: &SimProc, extra: &[&str]) -> Proc {
    start_scheduler(dir, sim, "agent-scheduler", extra)
}

/// The four over-commit cases on 2-CPU, 4Gi nodes: each refused with upstream's reason.
#[test]
fn pod_level_requests_are_never_overcommitted() {
    let dir = procs::tmpdir("spec-e2e-pod-level");
    let sim = SimProc::start(&dir, 1, &["--node-cpu", "2", "--node-memory", "4Gi"]);
    let _s = scheduler(&dir, &sim, &[]);
    sim.create(&pod_yaml("big-cpu", &pod_level("2500m", "1Gi"), "", ""));
    sim.create(&pod_yaml("big-mem", &pod_level("100m", "5Gi"), "", ""));
    // More than the node's allocatable: no eviction could help (upstream's
    // UnschedulableAndUnresolvable).
    let (_, m) = sim.wait_message("big-cpu", |r, _| r == "Unschedulable");
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient cpu. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    let (_, m) = sim.wait_message("big-mem", |r, _| r == "Unschedulable");
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient memory. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    // A pod-level 1500m pod, then a 600m pod beside it: 2100m on 2 CPUs.
    sim.create(&pod_yaml("plr", &pod_level("1500m", "1Gi"), "", ""));
    sim.wait_bound("plr");
    sim.create(&pod_yaml("beside", "", &container_requests("600m"), ""));
    let (_, m) = sim.wait_message("beside", |r, _| r == "Unschedulable");
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient cpu. \
         preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    // Pod-level 1500m plus 600m of overhead on a fresh node.
    let sim2_dir = dir.join("second");
    std::fs::create_dir_all(&sim2_dir).unwrap();
    let sim2 = SimProc::start(&sim2_dir, 1, &["--node-cpu", "2", "--node-memory", "4Gi"]);
    let _s2 = scheduler(&sim2_dir, &sim2, &[]);
    sim2.create(&pod_yaml(
        "overhead",
        &pod_level("1500m", "1Gi"),
        "",
        "  overhead:\n    cpu: 600m\n",
    ));
    let (_, m) = sim2.wait_message("overhead", |r, _| r == "Unschedulable");
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient cpu. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

/// Four workers racing for one 2-CPU node with 500m pod-level pods: exactly four bound, never a
/// fifth, the others reported.
#[test]
fn pod_level_pods_fill_a_node_exactly_at_four_workers() {
    const PODS: usize = 12;
    let dir = procs::tmpdir("spec-e2e-fill");
    let sim = SimProc::start(&dir, 1, &["--node-cpu", "2", "--node-memory", "64Gi"]);
    let _s = scheduler(&dir, &sim, &["--scheduler-worker-count=4"]);
    let yaml: String = (0..PODS)
        .map(|i| pod_yaml(&format!("p-{i}"), &pod_level("500m", "64Mi"), "", ""))
        .collect();
    sim.create(&yaml);
    wait_until("four bound and every other pod reported", WAIT, || {
        let ps = sim.kubectl_json(&["get", "pods", "-n", "default"]);
        let ps = ps["items"].as_array().cloned().unwrap_or_default();
        let bound = ps.iter().filter(|p| node_of(p).is_some()).count();
        bound == 4
            && ps.iter().filter(|p| node_of(p).is_none()).all(|p| {
                let name = p["metadata"]["name"].as_str().unwrap();
                sim.waiting(name).is_some()
            })
    });
    let bindings = sim.records_blocking("bindings");
    assert_eq!(
        bindings.as_array().map_or(0, Vec::len),
        4,
        "exactly four bindings: {bindings}"
    );
}

fn claim_yaml(name: &str) -> String {
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.example.com\n"
    )
}

fn template_yaml(name: &str) -> String {
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu.example.com\n"
    )
}

fn claim_pod(name: &str, source: &str) -> String {
    pod_yaml(
        name,
        "",
        &container_requests("100m"),
        &format!("  resourceClaims:\n  - name: gpu\n    {source}\n"),
    )
}

/// A pod naming a claim and one naming a template wait while their claims, their device class
/// or a device are missing, and say so; a plain pod beside them is bound as usual. Once a
/// driver publishes devices, both are bound with a device each.
#[test]
fn pods_with_resource_claims_wait_with_a_condition_naming_the_claim() {
    let dir = procs::tmpdir("spec-e2e-claims");
    let sim = SimProc::start(&dir, 2, &[]);
    let _s = scheduler(&dir, &sim, &[]);
    sim.create(&claim_pod("named", "resourceClaimName: gpu-claim"));
    sim.create(&claim_pod(
        "templated",
        "resourceClaimTemplateName: gpu-tpl",
    ));
    sim.create(&pod_yaml("plain", "", &container_requests("100m"), ""));
    sim.wait_bound("plain");
    let (reason, m) = sim.wait_message("named", |_, m| m.contains("gpu-claim"));
    assert_eq!(reason, "Unschedulable");
    // Held back as upstream's PreEnqueue holds it: no attempt, so no preemption to report.
    assert_eq!(
        m,
        "0/2 nodes are unavailable: 2 resourceclaim.resource.k8s.io \"gpu-claim\" not found."
    );
    let (_, m) = sim.wait_message("templated", |_, m| m.contains("ResourceClaim"));
    assert!(
        m.contains("pod \"default/templated\": ResourceClaim not created yet"),
        "{m}"
    );
    // The claim and the template appear (the claim controller makes the pod's claim): both
    // pods still wait, now because their device class does not exist.
    sim.create(&claim_yaml("gpu-claim"));
    sim.create(&template_yaml("gpu-tpl"));
    for p in ["named", "templated"] {
        // The engine's text names the request and the class.
        let (_, m) = sim.wait_message(p, |_, m| m.contains("device class gpu.example.com"));
        assert!(m.contains("request gpu"), "{m}");
    }
    // The class appears: no device yet.
    sim.create("---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.example.com\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == \"gpu.example.com\"\n",
    );
    for p in ["named", "templated"] {
        let (_, m) = sim.wait_message(p, |_, m| m.contains("cannot allocate all claims"));
        assert_eq!(
            m,
            "0/2 nodes are unavailable: 2 cannot allocate all claims. preemption: 0/2 nodes are \
             available: 2 Preemption is not helpful for scheduling."
        );
        assert!(node_of(&pod(&sim, p)).is_none(), "{p} was bound");
    }
    // A driver publishes two devices on a node: both pods go there, each claim allocated.
    let node = pod(&sim, "plain")["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.create(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: gpus\nspec:\n  driver: gpu.example.com\n  nodeName: {node}\n  pool:\n    name: {node}\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n  - name: gpu-0\n  - name: gpu-1\n"
        ),
    );
    for p in ["named", "templated"] {
        assert_eq!(sim.wait_bound(p), node, "{p}");
    }
    let claims = sim.kubectl_json(&["get", "resourceclaims", "-n", "default"]);
    let devices: std::collections::BTreeSet<&str> = claims["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["status"]["allocation"]["devices"]["results"][0]["device"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(devices.len(), 2, "{claims}");
}

/// `predicate.DynamicResourceAllocationEnable: false`: upstream ignores the key, Magma honours
/// it by keeping such pods pending with a condition that says so.
#[test]
fn with_dra_switched_off_a_pod_with_claims_says_so() {
    let dir = procs::tmpdir("spec-e2e-dra-off");
    let sim = SimProc::start(&dir, 1, &[]);
    let conf = dir.join("scheduler.conf");
    std::fs::write(
        &conf,
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.DynamicResourceAllocationEnable: false\n  - name: nodeorder\n",
    )
    .unwrap();
    let _s = scheduler(
        &dir,
        &sim,
        &[&format!("--scheduler-conf={}", conf.display())],
    );
    sim.create(&claim_yaml("gpu-claim"));
    sim.create(&claim_pod("named", "resourceClaimName: gpu-claim"));
    let (_, m) = sim.wait_message("named", |_, m| m.contains("switched off"));
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 pod resource claim \"gpu\": dynamic resource allocation is \
         switched off in this scheduler profile (predicate.DynamicResourceAllocationEnable: \
         false)."
    );
}

fn csi_class_and_claims(sim: &SimProc, claims: &[&str]) {
    let mut yaml = "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: csi\nprovisioner: csi.example.com\n".to_owned();
    for c in claims {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {c}\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: csi\n  resources:\n    requests:\n      storage: 1Gi\n"
        ));
    }
    sim.create(&yaml);
}

fn csinode(sim: &SimProc, node: &str, count: u32) {
    sim.create(&format!(
            "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata:\n  name: {node}\nspec:\n  drivers:\n  - name: csi.example.com\n    nodeID: {node}\n    allocatable:\n      count: {count}\n"
        ),
    );
}

fn volume_pod(name: &str, claims: &[&str]) -> String {
    let vols: String = claims
        .iter()
        .enumerate()
        .map(|(i, c)| format!("  - name: v{i}\n    persistentVolumeClaim:\n      claimName: {c}\n"))
        .collect();
    pod_yaml(
        name,
        "",
        &container_requests("10m"),
        &format!("  volumes:\n{vols}"),
    )
}

/// NodeVolumeLimits' boundaries on one node with its CSINode: `count` volumes fit, one more
/// does not, a claim two pods share counts once.
#[test]
fn csi_attach_limits_at_their_boundaries() {
    const TOO_MANY: &str = "0/1 nodes are unavailable: 1 node(s) exceed max volume count. \
                            preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    for (limit, label) in [(0u32, "zero"), (1, "one"), (2, "two")] {
        let dir = procs::tmpdir(&format!("spec-e2e-csi-{label}"));
        let sim = SimProc::start(&dir, 1, &["--provisioner-delay", "50ms"]);
        let node = sim.kubectl_json(&["get", "nodes"])["items"][0]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        csinode(&sim, &node, limit);
        csi_class_and_claims(&sim, &["c0", "c1", "c2"]);
        wait_until("the claims bound", WAIT, || {
            sim.kubectl_json(&["get", "pvc", "-n", "default"])["items"]
                .as_array()
                .is_some_and(|a| a.iter().all(|c| c["status"]["phase"] == "Bound"))
        });
        let _s = scheduler(&dir, &sim, &[]);
        match limit {
            0 => {
                sim.create(&volume_pod("first", &["c0"]));
                let (_, m) = sim.wait_message("first", |r, _| r == "Unschedulable");
                assert_eq!(m, TOO_MANY, "limit 0 takes no volume");
            }
            1 => {
                sim.create(&volume_pod("first", &["c0"]));
                sim.wait_bound("first");
                // The same claim again: counted once, fits.
                sim.create(&volume_pod("sharer", &["c0"]));
                sim.wait_bound("sharer");
                sim.create(&volume_pod("second", &["c1"]));
                let (_, m) = sim.wait_message("second", |r, _| r == "Unschedulable");
                assert_eq!(m, TOO_MANY, "one over the limit");
            }
            _ => {
                // Exactly at the limit with one pod of two claims, then one over.
                sim.create(&volume_pod("pair", &["c0", "c1"]));
                sim.wait_bound("pair");
                sim.create(&volume_pod("third", &["c2"]));
                let (_, m) = sim.wait_message("third", |r, _| r == "Unschedulable");
                assert_eq!(m, TOO_MANY);
                // Freed: the pair is deleted, the third fits.
                let (ok, out) = sim.kubectl(&["delete", "pod", "pair", "-n", "default"], None);
                assert!(ok, "{out}");
                sim.wait_bound("third");
            }
        }
    }
}

/// A claim only a PV made by hand could satisfy (`kubernetes.io/no-provisioner`, no PV): the
/// pod says so at once instead of waiting in PreBind for a volume that never comes.
#[test]
fn a_claim_no_provisioner_can_satisfy_is_reported() {
    let dir = procs::tmpdir("spec-e2e-no-provisioner");
    let sim = SimProc::start(&dir, 2, &["--provisioner-delay", "50ms"]);
    let _s = scheduler(&dir, &sim, &[]);
    sim.create("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: nvme\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  resources:\n    requests:\n      storage: 10Gi\n",
    );
    sim.create(&volume_pod("local", &["nvme"]));
    let (reason, m) = sim.wait_message("local", |_, _| true);
    assert_eq!(reason, "Unschedulable");
    assert_eq!(
        m,
        "0/2 nodes are unavailable: 2 node(s) didn't find available persistent volumes to bind. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

/// A PreBind that waits for a volume the provisioner never makes: the node it waits for is the
/// pod's `status.nominatedNodeName` meanwhile; then `SchedulerError` in Volcano's words, and the
/// nomination is cleared.
#[test]
fn a_prebind_wait_is_nominated_then_reported_with_its_reason() {
    let dir = procs::tmpdir("spec-e2e-prebind");
    let sim = SimProc::start(&dir, 2, &["--provisioner-never"]);
    let conf = dir.join("scheduler.conf");
    std::fs::write(
        &conf,
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      volumebinding.bindTimeoutSeconds: 3\n  - name: nodeorder\n",
    )
    .unwrap();
    let _s = scheduler(
        &dir,
        &sim,
        &[&format!("--scheduler-conf={}", conf.display())],
    );
    sim.create("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: late\nprovisioner: csi.example.com\nvolumeBindingMode: WaitForFirstConsumer\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: stuck\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: late\n  resources:\n    requests:\n      storage: 1Gi\n",
    );
    sim.create(&volume_pod("waiting", &["stuck"]));
    wait_until("the node PreBind waits for is nominated", WAIT, || {
        pod(&sim, "waiting")["status"]["nominatedNodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    });
    let (reason, m) = sim.wait_message("waiting", |r, _| r == "SchedulerError");
    assert!(
        m.starts_with("execute preBind for pod default/waiting failed: binding volumes: ")
            && m.ends_with(", resync the task"),
        "{m}"
    );
    assert_eq!(reason, "SchedulerError");
    assert!(
        pod(&sim, "waiting")["status"]["nominatedNodeName"].is_null(),
        "the failure clears the nomination"
    );
}

/// Bindings the API server refuses (500): `SchedulerError` with the reason, and retried until
/// one goes through.
#[test]
fn a_refused_binding_is_reported_and_retried() {
    let dir = procs::tmpdir("spec-e2e-bind-refused");
    let sim = SimProc::start(&dir, 1, &[]);
    let _s = scheduler(&dir, &sim, &[]);
    let faults = serde_json::json!({"errors": [{"verb": "create", "resource": "pods/binding", "rate": 1.0, "code": 500}]});
    procs::post_faults(&sim, &faults);
    sim.create(&pod_yaml("refused", "", &container_requests("100m"), ""));
    let (_, m) = sim.wait_message("refused", |r, _| r == "SchedulerError");
    assert!(m.starts_with("failed to bind to node "), "{m}");
    procs::post_faults(&sim, &serde_json::json!({}));
    sim.wait_bound("refused");
}
