//! Pod-level resources (`spec.resources`): defaults and validation messages through the API,
//! immutability on update, and in-place resizes of pod-level cpu and memory through
//! `pods/resize` with the simulated kubelet's answer (pod `status.resources` and
//! `status.allocatedResources`, or `PodResizePending` when the node cannot take it).

use crate::common;

use common::*;
use kube_sim::{SimConfig, SimHandle};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, resources: Value, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"schedulerName": "nobody", "resources": resources, "containers": containers}})
}

fn plain(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("c{i}"), "image": "i"}))
        .collect()
}

fn get(sim: &SimHandle, name: &str) -> Value {
    sim.get("v1", "pods", "default", name).unwrap()
}

async fn running(sim: &SimHandle, name: &str) -> Value {
    let (code, got) = curl(
        sim,
        "POST",
        &format!("{PODS}/{name}/binding"),
        None,
        Some(
            &json!({"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-00000"}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    eventually(|| async {
        let p = get(sim, name);
        (p["status"]["phase"] == "Running").then_some(p)
    })
    .await
}

async fn resize(sim: &SimHandle, name: &str, resources: Value) -> (u16, Value) {
    curl(
        sim,
        "PATCH",
        &format!("{PODS}/{name}/resize"),
        Some("application/merge-patch+json"),
        Some(&json!({"spec": {"resources": resources}})),
    )
    .await
}

#[tokio::test]
async fn pod_level_defaults_and_qos() {
    let (sim, _) = start(small()).await;
    // Limits only: requests from the containers' requests, else from the limits.
    let mut containers = plain(2);
    containers[0]["resources"] = json!({"requests": {"cpu": "250m"}});
    containers[1]["resources"] = json!({"limits": {"cpu": "0.5"}});
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "a",
            json!({"limits": {"cpu": "2", "memory": "1Gi"}}),
            containers,
        )),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        got["spec"]["resources"]["requests"],
        json!({"cpu": "750m", "memory": "1Gi"})
    );
    assert_eq!(got["status"]["qosClass"], "Burstable");
    // Equal pod-level requests and limits for cpu and memory: Guaranteed, whatever the
    // containers say.
    let (_, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "g",
            json!({"limits": {"cpu": "1", "memory": "1Gi"}}),
            plain(1),
        )),
    )
    .await;
    assert_eq!(
        got["spec"]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(got["status"]["qosClass"], "Guaranteed");
    // Requests only: the limits come from the containers when all of them set one.
    let mut containers = plain(2);
    containers[0]["resources"] = json!({"limits": {"memory": "1Gi"}});
    containers[1]["resources"] = json!({"limits": {"memory": "512Mi", "cpu": "1"}});
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "r",
            json!({"requests": {"memory": "1.5Gi"}}),
            containers,
        )),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        got["spec"]["resources"]["limits"],
        json!({"memory": "1536Mi"})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_level_resources_are_validated_with_the_real_messages() {
    let (sim, _) = start(small()).await;
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            json!({"requests": {"cpu": "1"}}),
            {
                let mut c = plain(2);
                c[0]["resources"] = json!({"requests": {"cpu": "600m"}});
                c[1]["resources"] = json!({"requests": {"cpu": "0.6"}});
                c
            },
            "spec.resources.requests[cpu]: Invalid value: \"1\": must be greater than or equal to aggregate container requests of 1200m",
        ),
        (
            json!({"limits": {"memory": "1Gi", "cpu": "1"}}),
            {
                let mut c = plain(1);
                c[0]["resources"] =
                    json!({"requests": {"memory": "100Mi"}, "limits": {"cpu": "1500m"}});
                c
            },
            "[spec.resources.requests: Invalid value: \"1500m\": must be less than or equal to cpu limit of 1, spec.resources.containers[0][cpu].limits: Invalid value: \"1500m\": must be less than or equal to pod limits of 1]",
        ),
        (
            json!({"requests": {"ephemeral-storage": "1Gi", "memory": "1Gi"}}),
            plain(1),
            "spec.resources.requests[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
        ),
        (
            json!({"limits": {"hugepages-2Mi": "4Mi"}}),
            plain(1),
            "spec.resources: Forbidden: HugePages require cpu or memory",
        ),
        (
            json!({"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}),
            {
                let mut c = plain(1);
                c[0]["resources"] = json!({"limits": {"hugepages-2Mi": "6Mi"}});
                c
            },
            // The container's own requirements are checked first (`validateResourceRequirements`
            // of each container has no pod-level exemption).
            "[spec.containers[0].resources: Forbidden: HugePages require cpu or memory, spec.resources.requests[hugepages-2Mi]: Invalid value: \"4Mi\": must be greater than or equal to aggregate container requests of 6Mi, spec.resources.limits[hugepages-2Mi]: Invalid value: \"4Mi\": must be greater than or equal to aggregate container limits of 6Mi, spec.resources.containers[0][hugepages-2Mi].limits: Invalid value: \"6Mi\": must be less than or equal to pod limits of 4Mi]",
        ),
        (
            json!({"requests": {"cpu": "-1"}}),
            plain(1),
            "spec.resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        (
            json!({"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}),
            plain(1),
            "spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level",
        ),
    ];
    for (resources, containers, want) in cases {
        let (code, got) = curl(
            &sim,
            "POST",
            PODS,
            None,
            Some(&pod("p", resources.clone(), containers)),
        )
        .await;
        assert_eq!(code, 422, "{resources}: {got}");
        assert_eq!(
            got["message"],
            format!("Pod \"p\" is invalid: {want}"),
            "{resources}"
        );
    }
    let mut windows = pod("w", json!({"requests": {"cpu": "1"}}), plain(1));
    windows["spec"]["os"] = json!({"name": "windows"});
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&windows)).await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "Pod \"w\" is invalid: spec.resources: Forbidden: may not be set for a windows pod"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_level_resources_are_immutable_outside_resize() {
    let (sim, _) = start(small()).await;
    let (_, created) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("p", json!({"requests": {"cpu": "1"}}), plain(1))),
    )
    .await;
    let mut upd = created.clone();
    upd["spec"]["resources"]["requests"]["cpu"] = json!("2");
    let (code, got) = curl(&sim, "PUT", &format!("{PODS}/p"), None, Some(&upd)).await;
    assert_eq!(code, 422);
    assert!(
        got["message"].as_str().unwrap().starts_with(
            "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than"
        ),
        "{got}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_pod_level_resize_is_actuated_and_reported_at_pod_level() {
    let (sim, _) = start(small()).await;
    let res =
        json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}});
    curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("p", res.clone(), plain(2))),
    )
    .await;
    let p = running(&sim, "p").await;
    assert_eq!(p["status"]["resources"], res);
    assert_eq!(
        p["status"]["allocatedResources"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    // A pod without pod-level resources reports neither.
    curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("q", Value::Null, plain(1))),
    )
    .await;
    let q = running(&sim, "q").await;
    assert!(
        q["status"].get("resources").is_none() && q["status"].get("allocatedResources").is_none()
    );

    let (code, got) = resize(
        &sim,
        "p",
        json!({"requests": {"cpu": "1500m"}, "limits": {"cpu": "3"}}),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        got["spec"]["resources"]["requests"],
        json!({"cpu": "1500m", "memory": "1Gi"})
    );
    assert_eq!(got["metadata"]["generation"], 2);
    let p = eventually(|| async {
        let p = get(&sim, "p");
        (p["status"]["allocatedResources"]["cpu"] == "1500m").then_some(p)
    })
    .await;
    assert_eq!(
        p["status"]["resources"]["limits"],
        json!({"cpu": "3", "memory": "2Gi"})
    );
    // Only cpu and memory change in place.
    let (code, got) = resize(
        &sim,
        "p",
        json!({"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "Pod \"p\" is invalid: spec: Forbidden: only cpu and memory resources are mutable"
    );
    // The QoS class may not change.
    let (code, got) = resize(
        &sim,
        "p",
        json!({"requests": {"cpu": "3", "memory": "2Gi"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "Pod \"p\" is invalid: spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_resize_the_node_cannot_take_is_pending() {
    let cfg = SimConfig {
        node_cpu: "4".into(),
        node_memory: "8Gi".into(),
        ..small()
    };
    let (sim, _) = start(cfg).await;
    curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("big", json!({"requests": {"cpu": "3"}}), plain(1))),
    )
    .await;
    running(&sim, "big").await;
    curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("p", json!({"requests": {"cpu": "500m"}}), plain(1))),
    )
    .await;
    running(&sim, "p").await;
    // More than the node has at all: Infeasible.
    let (code, _) = resize(&sim, "p", json!({"requests": {"cpu": "8"}})).await;
    assert_eq!(code, 200);
    let pending = |reason: &'static str| {
        let sim = &sim;
        async move {
            eventually(|| async {
                let p = get(sim, "p");
                let c = p["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "PodResizePending" && c["reason"] == reason)?
                    .clone();
                Some((p, c))
            })
            .await
        }
    };
    let (p, c) = pending("Infeasible").await;
    assert_eq!(
        c["message"],
        "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000"
    );
    assert_eq!(c["observedGeneration"], p["metadata"]["generation"]);
    assert_eq!(p["status"]["allocatedResources"], json!({"cpu": "500m"}));
    // Room on the node, but not next to the other pod: Deferred.
    resize(&sim, "p", json!({"requests": {"cpu": "2"}})).await;
    let (p, c) = pending("Deferred").await;
    assert_eq!(
        c["message"],
        "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
    );
    assert_eq!(p["status"]["allocatedResources"], json!({"cpu": "500m"}));
    // A resize that fits is actuated and the condition goes.
    resize(&sim, "p", json!({"requests": {"cpu": "1"}})).await;
    let p = eventually(|| async {
        let p = get(&sim, "p");
        (p["status"]["allocatedResources"]["cpu"] == "1").then_some(p)
    })
    .await;
    assert!(
        !p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "PodResizePending")
    );
    sim.shutdown().await;
}
