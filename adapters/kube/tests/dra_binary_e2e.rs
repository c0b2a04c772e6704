//! Dynamic Resource Allocation as a user meets it: the real `agent-scheduler` binary at four
//! workers against the `kube-sim` binary (which runs the resource-claim controller), every
//! object created and read back with kubectl.
//!
//! A GPU-per-pod burst: two nodes publish eight GPUs each, seventeen pods each get a claim from
//! one ResourceClaimTemplate. Exactly sixteen are bound, eight per node, each claim allocated
//! one distinct GPU of its pod's node and reserved for that pod; the seventeenth waits with
//! upstream's `cannot allocate all claims`, and is bound once a bound pod is deleted.

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

use crate::procs;
use procs::{SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);
const DRIVER: &str = "gpu.example.com";

fn pods(sim: &SimProc) -> Vec<Value> {
    sim.kubectl_json(&["get", "pods", "-n", "default"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn claims(sim: &SimProc) -> Vec<Value> {
    sim.kubectl_json(&["get", "resourceclaims", "-n", "default"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn bound(sim: &SimProc) -> Vec<(String, String)> {
    pods(sim)
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?.to_owned(),
                p["spec"]["nodeName"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn message(sim: &SimProc, pod: &str) -> Option<String> {
    sim.waiting(pod).map(|(_, m)| m)
}

fn slice(node: &str) -> String {
    let devices: String = (0..8)
        .map(|i| {
            format!(
                "  - name: gpu-{i}\n    attributes:\n      model:\n        string: a100\n    capacity:\n      memory:\n        value: 40Gi\n"
            )
        })
        .collect();
    format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: {node}-gpus\nspec:\n  driver: {DRIVER}\n  nodeName: {node}\n  pool:\n    name: {node}\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n{devices}"
    )
}

fn pod(name: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: one-gpu\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n        memory: 64Mi\n      claims:\n      - name: gpu\n"
    )
}

/// Every allocated claim: (its pod by `reservedFor`, its node by the allocation's selector, its
/// devices as `pool/device`).
fn allocations(sim: &SimProc) -> Vec<(String, String, Vec<String>)> {
    claims(sim)
        .iter()
        .filter_map(|c| {
            let a = c["status"]["allocation"].as_object()?;
            let pod = c["status"]["reservedFor"][0]["name"].as_str()?.to_owned();
            let node = a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                .as_str()?
                .to_owned();
            let devices = a["devices"]["results"]
                .as_array()?
                .iter()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r["pool"].as_str().unwrap(),
                        r["device"].as_str().unwrap()
                    )
                })
                .collect();
            Some((pod, node, devices))
        })
        .collect()
}

#[test]
fn a_gpu_per_pod_burst_fills_each_node_to_exactly_its_devices() {
    let dir = procs::tmpdir("dra-binary");
    let sim = SimProc::start(&dir, 2, &["--node-cpu", "64"]);
    let nodes = ["node-00000", "node-00001"];
    sim.create(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == \"{DRIVER}\"\n"
        ),
    );
    for n in nodes {
        sim.create(&slice(n));
    }
    sim.create("---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: one-gpu\n  namespace: default\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu\n",
    );
    let port = free_port();
    let _s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--scheduler-worker-count=4",
            "--enable-metrics",
            &format!("--listen-address=127.0.0.1:{port}"),
        ],
    );
    let all: String = (0..17).map(|i| pod(&format!("p{i:02}"))).collect();
    sim.create(&all);

    // Sixteen bound and one reported: the scheduler has answered every pod.
    wait_until("16 pods bound and one reported", WAIT, || {
        bound(&sim).len() == 16
            && pods(&sim).iter().any(|p| {
                p["spec"]["nodeName"].is_null()
                    && message(&sim, p["metadata"]["name"].as_str().unwrap()).is_some()
            })
    });
    wait_until("every bound pod's claim allocated", WAIT, || {
        allocations(&sim).len() == 16
    });
    let placed = bound(&sim);
    for n in nodes {
        assert_eq!(
            placed.iter().filter(|(_, on)| on == n).count(),
            8,
            "{n}: {placed:?}"
        );
    }
    let allocs = allocations(&sim);
    let devices: BTreeSet<&String> = allocs.iter().flat_map(|a| &a.2).collect();
    assert_eq!(devices.len(), 16, "no GPU given twice: {allocs:?}");
    for (pod, node, devs) in &allocs {
        let on = placed.iter().find(|(p, _)| p == pod).map(|(_, n)| n);
        assert_eq!(on, Some(node), "{pod}'s claim is on its node");
        assert_eq!(devs.len(), 1);
        assert!(devs[0].starts_with(&format!("{node}/gpu-")), "{devs:?}");
    }
    let waiting = pods(&sim)
        .into_iter()
        .find(|p| p["spec"]["nodeName"].is_null())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(
        message(&sim, &waiting).as_deref(),
        Some(
            "0/2 nodes are unavailable: 2 cannot allocate all claims. preemption: 0/2 nodes are \
             available: 2 Preemption is not helpful for scheduling."
        )
    );
    // Every bound pod was decided once: no decision was voided for its devices here (the
    // nodes' bind versions keep node-local GPUs apart before the driver's check).
    assert_eq!(metric(port, "magma_device_conflicts_total"), 0);

    // A bound pod goes (its claim with it, by the controller): the waiting one takes its GPU.
    let (gone, node) = placed[0].clone();
    let (ok, out) = sim.kubectl(
        &[
            "delete",
            "pod",
            &gone,
            "-n",
            "default",
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    assert!(ok, "{out}");
    wait_until(&format!("{waiting} bound"), WAIT, || {
        bound(&sim).iter().any(|(p, _)| *p == waiting)
    });
    let on = bound(&sim)
        .into_iter()
        .find(|(p, _)| *p == waiting)
        .map(|(_, n)| n);
    assert_eq!(on.as_deref(), Some(node.as_str()));
    wait_until("its claim allocated on that node", WAIT, || {
        allocations(&sim)
            .iter()
            .any(|(p, n, _)| *p == waiting && *n == node)
    });
    let devices: BTreeSet<String> = allocations(&sim)
        .into_iter()
        .filter(|(p, _, _)| *p != gone)
        .flat_map(|a| a.2)
        .collect();
    assert_eq!(devices.len(), 16, "still no GPU given twice");
}
