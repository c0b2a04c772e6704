//! kube-sim's answers to the requests whose answers a real kube-apiserver v1.36.2 gave in
//! `tests/data/apiserver-1.36/` (copies of the shared recordings): the same status code and body,
//! field for field, but for `uid`, timestamps and `resourceVersion` (and, for pods, the general
//! pod defaults kube-sim does not apply, listed where they are left out).

use crate::common;

use common::*;
use serde_json::{Value, json};

/// The copies under `tests/data` are the shared recordings, unmodified (checked when the shared
/// directory sits beside the repository).
#[test]
fn the_copies_match_the_shared_recordings() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/upstream/apiserver-1.36");
    if !shared.is_dir() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/apiserver-1.36");
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name();
        if name.to_string_lossy().ends_with(".json") {
            assert_eq!(
                std::fs::read(dir.join(&name)).unwrap(),
                std::fs::read(shared.join(&name)).unwrap(),
                "{name:?}"
            );
        }
    }
}

/// The general pod defaults of the real server that kube-sim does not apply (container
/// `imagePullPolicy` and `terminationMessage*`, `enableServiceLinks`, and the
/// DefaultTolerationSeconds admission plugin's `tolerations`), with their managedFields
/// entries. (`priority` and `preemptionPolicy`, the Priority plugin's, are compared.)
const GENERAL_POD_DEFAULTS: &[&str] = &[
    "/spec/containers/0/imagePullPolicy",
    "/spec/containers/0/terminationMessagePath",
    "/spec/containers/0/terminationMessagePolicy",
    "/spec/enableServiceLinks",
    "/spec/tolerations",
    "/metadata/managedFields/0/fieldsV1/f:spec/f:containers/k:{\"name\":\"c\"}/f:imagePullPolicy",
    "/metadata/managedFields/0/fieldsV1/f:spec/f:containers/k:{\"name\":\"c\"}/f:terminationMessagePath",
    "/metadata/managedFields/0/fieldsV1/f:spec/f:containers/k:{\"name\":\"c\"}/f:terminationMessagePolicy",
    "/metadata/managedFields/0/fieldsV1/f:spec/f:enableServiceLinks",
];

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A plain pending pod: the Priority plugin's `priority: 0` and `preemptionPolicy:
/// PreemptLowerPriority` (no class, no global default), owned by nobody.
#[tokio::test]
async fn a_pending_pod_is_created_as_recorded() {
    let (sim, _) = start(small()).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1", "labels": {"app": "agent"}},
        "spec": {"schedulerName": "agent-scheduler",
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}});
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&pod)).await;
    assert_eq!(code, 201, "{got}");
    let want = without(
        comparable(recording("pod-create-response.json")),
        GENERAL_POD_DEFAULTS,
    );
    assert_eq!(comparable(got), want);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_pod_with_pod_level_resources_is_created_as_recorded() {
    let (sim, _) = start(small()).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plr"},
        "spec": {"schedulerName": "nobody",
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {}}],
                 "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"},
                               "limits": {"cpu": "2", "memory": "2Gi"}}}});
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&pod)).await;
    assert_eq!(code, 201, "{got}");
    let want = without(
        comparable(recording("pod-level-resources-create-response.json")),
        GENERAL_POD_DEFAULTS,
    );
    assert_eq!(comparable(got), want);
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_level_requests_over_limits_are_refused_as_recorded() {
    let (sim, _) = start(small()).await;
    // Reconstructed from the causes: pod-level cpu request 2 and an nvidia.com/gpu request,
    // a cpu limit of 1, and containers requesting 3 cpus together.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plr-bad"},
        "spec": {"schedulerName": "nobody",
                 "containers": [
                     {"name": "a", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "2"}}},
                     {"name": "b", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}],
                 "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"},
                               "limits": {"cpu": "1"}}}});
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&pod)).await;
    assert_eq!(code, 422);
    assert_eq!(got, recording("pod-level-resources-invalid-response.json"));
    assert!(sim.list("v1", "pods", Some("default")).unwrap().is_empty());
    sim.shutdown().await;
}

const DRA: &str = "/apis/resource.k8s.io/v1";

/// The requests the DRA recordings answered, reconstructed from them, in the recorded order.
fn dra_requests() -> Vec<(&'static str, String, Value)> {
    vec![
        (
            "dra-deviceclass-create-response.json",
            format!("{DRA}/deviceclasses"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                   "metadata": {"name": "gpu.example.com"},
                   "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
        ),
        (
            "dra-resourceslice-create-response.json",
            format!("{DRA}/resourceslices"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": "n1-gpus"},
                   "spec": {"driver": "gpu.example.com",
                            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                            "nodeName": "n1",
                            "devices": [
                                {"name": "gpu-0", "attributes": {"model": {"string": "h100"}},
                                 "capacity": {"memory": {"value": "80Gi"}}},
                                {"name": "gpu-1", "attributes": {"model": {"string": "a100"}}}]}}),
        ),
        (
            "dra-resourceclaimtemplate-create-response.json",
            format!("{DRA}/namespaces/default/resourceclaimtemplates"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "one-gpu"},
                   "spec": {"spec": {"devices": {"requests": [
                       {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}),
        ),
        (
            "dra-resourceclaim-create-response.json",
            format!("{DRA}/namespaces/default/resourceclaims"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": "c1"},
                   "spec": {"devices": {"requests": [
                       {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"a100\""}}]}}]}}}),
        ),
        (
            "dra-resourceclaim-invalid-cel-response.json",
            format!("{DRA}/namespaces/default/resourceclaims"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": "c-bad"},
                   "spec": {"devices": {"requests": [
                       {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model =="}}]}}]}}}),
        ),
    ]
}

#[tokio::test]
async fn dra_objects_are_created_and_refused_as_recorded() {
    let (sim, _) = start(small()).await;
    for (file, path, body) in dra_requests() {
        let (code, got) = curl(&sim, "POST", &path, None, Some(&body)).await;
        let want = recording(file);
        if want["kind"] == "Status" {
            assert_eq!(code, 422, "{file}");
            assert_eq!(got, want, "{file}");
        } else {
            assert_eq!(code, 201, "{file}: {got}");
            assert_eq!(comparable(got), comparable(want), "{file}");
        }
    }
    sim.shutdown().await;
}
