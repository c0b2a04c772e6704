//! DRA fields of pod status writes through the API: `status.resourceClaimStatuses` and
//! `status.extendedResourceClaimStatus` checked as `ValidatePodStatusUpdate` does on an update,
//! a merge patch and a server-side apply of `pods/status` (the 422 with upstream's message,
//! nothing written), and the container resource names and extended-resource quantities a pod
//! create is judged by.

use crate::common;

use common::*;
use kube_sim::SimHandle;
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A pod with the claim `gpu` (an existing claim, so the claim controller writes nothing) and a
/// container `main` asking for 2 `example.com/gpu`.
async fn create(sim: &SimHandle, name: &str) -> Value {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "nobody",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
            "containers": [{"name": "main", "image": "i",
                "resources": {"limits": {"example.com/gpu": "2"}}}]}});
    let (code, got) = curl(sim, "POST", PODS, None, Some(&pod)).await;
    assert_eq!(code, 201, "{got}");
    got
}

fn extended(mappings: Value, claim: &str) -> Value {
    json!({"requestMappings": mappings, "resourceClaimName": claim})
}

fn mapping(container: &str, resource: &str, request: &str) -> Value {
    json!({"containerName": container, "resourceName": resource, "requestName": request})
}

async fn merge_status(sim: &SimHandle, name: &str, status: Value) -> (u16, Value) {
    curl(
        sim,
        "PATCH",
        &format!("{PODS}/{name}/status"),
        Some("application/merge-patch+json"),
        Some(&json!({"status": status})),
    )
    .await
}

async fn apply_status(sim: &SimHandle, name: &str, status: Value) -> (u16, Value) {
    curl(
        sim,
        "PATCH",
        &format!("{PODS}/{name}/status?fieldManager=test&force=true"),
        Some("application/apply-patch+yaml"),
        Some(
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "status": status}),
        ),
    )
    .await
}

async fn put_status(sim: &SimHandle, name: &str, status: Value) -> (u16, Value) {
    let mut pod = sim.get("v1", "pods", "default", name).unwrap();
    for (k, v) in status.as_object().unwrap() {
        pod["status"][k] = v.clone();
    }
    curl(
        sim,
        "PUT",
        &format!("{PODS}/{name}/status"),
        None,
        Some(&pod),
    )
    .await
}

fn assert_invalid(answer: (u16, Value), message: &str) {
    let (code, got) = answer;
    assert_eq!(code, 422, "{got}");
    assert_eq!(got["reason"], "Invalid", "{got}");
    assert_eq!(got["message"], message, "{got}");
}

#[tokio::test]
async fn extended_resource_claim_status_writes_are_validated() {
    let (sim, _) = start(small()).await;
    create(&sim, "p").await;
    let good = extended(
        json!([mapping("main", "example.com/gpu", "container-0-request-0")]),
        "p-extended-resources-x7k2q",
    );
    // What Magma writes (a strategic merge patch, `dra::extended_status`) is accepted.
    let (code, got) = curl(
        &sim,
        "PATCH",
        &format!("{PODS}/p/status"),
        Some("application/strategic-merge-patch+json"),
        Some(&json!({"status": {"extendedResourceClaimStatus": good}})),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["status"]["extendedResourceClaimStatus"], good);

    let bad_container = extended(json!([mapping("other", "example.com/gpu", "r")]), "c");
    let container_msg = "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings[0].containerName: Invalid value: \"other\": must match the name of an entry in spec.initContainers.name or spec.containers.name";
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": bad_container}),
        )
        .await,
        container_msg,
    );
    assert_invalid(
        put_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": bad_container}),
        )
        .await,
        container_msg,
    );
    assert_invalid(
        apply_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": bad_container}),
        )
        .await,
        container_msg,
    );
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": extended(json!([mapping("main", "example.com/fpga", "r")]), "c")}),
        )
        .await,
        "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings[0].resourceName: Invalid value: \"example.com/fpga\": must match the extended resource name of an entry in spec.initContainers.resources.requests or spec.containers.resources.requests",
    );
    // A merge patch replaces the atomic list, so an empty one clears the mappings.
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": {"requestMappings": []}}),
        )
        .await,
        "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping is required",
    );
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": extended(json!([mapping("main", "example.com/gpu", "Bad")]), "c")}),
        )
        .await,
        "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestName: Invalid value: \"Bad\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    );
    let m = mapping("main", "example.com/gpu", "r");
    assert_invalid(
        put_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": extended(json!([m, m]), "c")}),
        )
        .await,
        "Pod \"p\" is invalid: [status.extendedResourceClaimStatus.requestMappings[1].containerName: Duplicate value: \"main\", status.extendedResourceClaimStatus.requestMappings[1].resourceName: Duplicate value: \"example.com/gpu\", status.extendedResourceClaimStatus.requestMappings[1].requestName: Duplicate value: \"r\"]",
    );
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"extendedResourceClaimStatus": {"resourceClaimName": null}}),
        )
        .await,
        "Pod \"p\" is invalid: status.extendedResourceClaimStatus.resourceClaimName: Required value",
    );
    // Refusals wrote nothing.
    let p = sim.get("v1", "pods", "default", "p").unwrap();
    assert_eq!(p["status"]["extendedResourceClaimStatus"], good);
    // No immutability rule upstream: a set status may change, and go.
    let other = extended(json!([mapping("main", "example.com/gpu", "r2")]), "p-other");
    let (code, got) = merge_status(&sim, "p", json!({"extendedResourceClaimStatus": other})).await;
    assert_eq!(code, 200, "{got}");
    let (code, got) = merge_status(&sim, "p", json!({"extendedResourceClaimStatus": null})).await;
    assert_eq!(code, 200, "{got}");
    assert!(got["status"].get("extendedResourceClaimStatus").is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_claim_statuses_writes_are_validated() {
    let (sim, _) = start(small()).await;
    create(&sim, "p").await;
    let (code, got) = apply_status(
        &sim,
        "p",
        json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]}),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_invalid(
        apply_status(
            &sim,
            "p",
            json!({"resourceClaimStatuses": [{"name": "nic"}]}),
        )
        .await,
        "Pod \"p\" is invalid: status.resourceClaimStatuses[0].name: Invalid value: \"nic\": must match the name of an entry in `spec.resourceClaims`",
    );
    assert_invalid(
        put_status(
            &sim,
            "p",
            json!({"resourceClaimStatuses": [{"name": "gpu"}, {"name": "gpu"}]}),
        )
        .await,
        "Pod \"p\" is invalid: status.resourceClaimStatuses[1].name: Duplicate value: \"gpu\"",
    );
    assert_invalid(
        merge_status(
            &sim,
            "p",
            json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p_gpu"}]}),
        )
        .await,
        "Pod \"p\" is invalid: status.resourceClaimStatuses[0].resourceClaimName: Invalid value: \"p_gpu\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
    let p = sim.get("v1", "pods", "default", "p").unwrap();
    assert_eq!(
        p["status"]["resourceClaimStatuses"],
        json!([{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}])
    );
    sim.shutdown().await;
}

/// Container resources on create: the implicit DRA name is accepted as a native resource,
/// extended resources need whole numbers and requests equal to their limits.
#[tokio::test]
async fn container_extended_resources_on_create() {
    let (sim, _) = start(small()).await;
    let pod = |name: &str, resources: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}})
    };
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "implicit",
            json!({"requests": {"deviceclass.resource.kubernetes.io/gpu.example.com": "1"}}),
        )),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "unequal",
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
        )),
    )
    .await;
    assert_eq!(code, 422, "{got}");
    assert_eq!(
        got["message"],
        "Pod \"unequal\" is invalid: spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"
    );
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod(
            "no-limit",
            json!({"requests": {"example.com/gpu": "1"}}),
        )),
    )
    .await;
    assert_eq!(code, 422, "{got}");
    assert_eq!(
        got["message"],
        "Pod \"no-limit\" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
    );
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod("half", json!({"limits": {"example.com/gpu": "500m"}}))),
    )
    .await;
    assert_eq!(code, 422, "{got}");
    // Rendered by the quantity's `MarshalJSON`, as the text given when it is canonical.
    let q = "\"500m\"";
    assert_eq!(
        got["message"],
        format!(
            "Pod \"half\" is invalid: [spec.containers[0].resources.limits[example.com/gpu]: Invalid value: {q}: must be an integer, spec.containers[0].resources.requests[example.com/gpu]: Invalid value: {q}: must be an integer]"
        )
    );
    sim.shutdown().await;
}
