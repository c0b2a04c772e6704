//! `resource.k8s.io/v1` through the `kube` client and plain HTTP: discovery, defaults, the real
//! server's validation messages, field selectors, watches of claims, and the resource claim
//! controller (claims made from templates, the pod's `resourceClaimStatuses`, reservations,
//! release and deallocation, garbage collection with the pod).

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube_sim::{DELETE_PROTECTION_FINALIZER, POD_CLAIM_NAME_ANNOTATION, SimConfig, SimHandle};
use serde_json::{Value, json};

const DRA: &str = "/apis/resource.k8s.io/v1";
const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
const TEMPLATES: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn claim(name: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
           "spec": {"devices": {"requests": requests}}})
}

fn gpu_request() -> Value {
    json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}])
}

fn slice(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
           "spec": spec})
}

fn template(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": name},
           "spec": {"metadata": {"labels": {"team": "ml"}},
                    "spec": {"devices": {"requests": gpu_request()}}}})
}

fn pod_with_claims(name: &str, claims: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"schedulerName": "nobody", "resourceClaims": claims,
                    "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}]}})
}

/// The `details.causes` messages of a 422 as `field: message`, after checking the code.
fn causes(code: u16, status: &Value) -> Vec<String> {
    assert_eq!(code, 422, "{status}");
    status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

async fn create(sim: &SimHandle, path: &str, obj: &Value) -> Value {
    let (code, got) = curl(sim, "POST", path, None, Some(obj)).await;
    assert_eq!(code, 201, "{got}");
    got
}

#[tokio::test]
async fn discovery_lists_the_dra_resources() {
    let (sim, _) = start(small()).await;
    let (code, group) = curl(&sim, "GET", "/apis/resource.k8s.io", None, None).await;
    assert_eq!(code, 200);
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "resource.k8s.io/v1"
    );
    let (_, list) = curl(&sim, "GET", DRA, None, None).await;
    let names: Vec<(String, bool)> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["namespaced"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("deviceclasses", false),
            ("resourceclaims", true),
            ("resourceclaims/status", true),
            ("resourceclaimtemplates", true),
            ("resourceslices", false)
        ]
        .map(|(n, ns)| (n.to_string(), ns))
    );
    let (_, apis) = curl(&sim, "GET", "/apis", None, None).await;
    assert!(apis.to_string().contains("resource.k8s.io/v1"));
    sim.shutdown().await;
}

#[tokio::test]
async fn requests_are_defaulted() {
    let (sim, _) = start(small()).await;
    let got = create(
        &sim,
        CLAIMS,
        &claim(
            "c",
            json!([
                {"name": "one", "exactly": {"deviceClassName": "gpu.example.com",
                    "tolerations": [{"key": "k", "value": "v"}]}},
                {"name": "all", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}},
                {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "big.example.com"},
                                                     {"name": "small", "deviceClassName": "small.example.com", "count": 2}]}]),
        ),
    )
    .await;
    let r = &got["spec"]["devices"]["requests"];
    assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
    assert_eq!(r[0]["exactly"]["count"], 1);
    assert_eq!(r[0]["exactly"]["tolerations"][0]["operator"], "Equal");
    assert_eq!(
        r[1]["exactly"],
        json!({"deviceClassName": "gpu.example.com", "allocationMode": "All"})
    );
    assert_eq!(r[2]["firstAvailable"][0]["count"], 1);
    assert_eq!(r[2]["firstAvailable"][1]["count"], 2);
    assert_eq!(got["status"], json!({}));
    assert!(got["metadata"].get("generation").is_none());
    // A device taint gets the time it was added.
    let s = create(
        &sim,
        SLICES,
        &slice("s", json!({"driver": "d.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "allNodes": true, "devices": [{"name": "d0", "taints": [{"key": "broken", "effect": "NoSchedule"}]}]})),
    )
    .await;
    assert!(s["spec"]["devices"][0]["taints"][0]["timeAdded"].is_string());
    assert_eq!(s["metadata"]["generation"], 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn claims_are_validated_with_the_real_messages() {
    let (sim, _) = start(small()).await;
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!([{"name": "gpu"}]),
            vec![
                "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c"}, "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}]),
            vec![
                "spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "count": -1}}]),
            vec![
                "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}}]),
            vec![
                "spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}]),
            vec![
                "spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"",
            ],
        ),
        (
            json!([{"name": "GPU", "exactly": {"deviceClassName": ""}}]),
            vec![
                "spec.devices.requests[0].name: Invalid value: \"GPU\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.devices.requests[0].exactly.deviceClassName: Required value",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c"}}, {"name": "gpu", "exactly": {"deviceClassName": "c"}}]),
            vec!["spec.devices.requests[1]: Duplicate value: \"gpu\""],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{}]}}]),
            vec!["spec.devices.requests[0].exactly.selectors[0].cel: Required value"],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {"expression": "device.vendor == \"x\""}}]}}]),
            vec![
                "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.vendor == \\\"x\\\"\": compilation failed: ERROR: <input>:1:7: undefined field 'vendor'\n | device.vendor == \"x\"\n | ......^",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {"expression": "device.driver"}}]}}]),
            vec![
                "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver\": must evaluate to bool or the unknown type, not string",
            ],
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "c", "tolerations": [{"operator": "Exists", "value": "v", "effect": "Sometimes"}]}}]),
            vec![
                "spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: \"v\": must be empty for operator `Exists`",
                "spec.devices.requests[0].exactly.tolerations[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
            ],
        ),
    ];
    for (requests, want) in cases {
        let (code, got) = curl(
            &sim,
            "POST",
            CLAIMS,
            None,
            Some(&claim("c", requests.clone())),
        )
        .await;
        assert_eq!(causes(code, &got), want, "{requests}");
    }
    let many: Vec<Value> = (0..33)
        .map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "c"}}))
        .collect();
    let (code, got) = curl(
        &sim,
        "POST",
        CLAIMS,
        None,
        Some(&claim("c", Value::Array(many))),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        ["spec.devices.requests: Too many: 33: must have at most 32 items"]
    );
    assert_eq!(
        got["message"],
        "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests: Too many: 33: must have at most 32 items"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn slices_are_validated_with_the_real_messages() {
    let (sim, _) = start(small()).await;
    let pool = json!({"name": "p", "generation": 1, "resourceSliceCount": 1});
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"driver": "d.example.com", "pool": pool}),
            vec![
                "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
            ],
        ),
        (
            json!({"driver": "d.example.com", "pool": pool, "nodeName": "n1", "allNodes": true}),
            vec![
                "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
            ],
        ),
        (
            json!({"driver": "", "pool": {"name": "", "resourceSliceCount": 0}, "allNodes": true}),
            vec![
                "spec.driver: Required value",
                "spec.driver: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.pool.name: Required value",
                "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
            ],
        ),
        (
            json!({"driver": "d.example.com", "pool": pool, "allNodes": true, "devices": [
                {"name": "d0", "attributes": {"model": {"string": "a", "int": 1}, "d.example.com/ver": {"version": "1.2"}},
                 "capacity": {"mem": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}},
                 "taints": [{"key": "k", "effect": "PreferNoSchedule"}]},
                {"name": "d0"}]}),
            vec![
                "spec.devices[0].attributes[d.example.com/ver].version: Invalid value: \"1.2\": must be a string compatible with semver.org spec 2.0.0",
                "spec.devices[0].attributes[model]: Invalid value: {\"int\":1,\"string\":\"a\"}: exactly one value must be specified",
                "spec.devices[0].capacity[mem].requestPolicy: Forbidden: allowMultipleAllocations must be true",
                "spec.devices[0].taints[0].effect: Unsupported value: \"PreferNoSchedule\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
                "spec.devices[1]: Duplicate value: \"d0\"",
            ],
        ),
    ];
    for (spec, want) in cases {
        let (code, got) = curl(&sim, "POST", SLICES, None, Some(&slice("s", spec.clone()))).await;
        assert_eq!(causes(code, &got), want, "{spec}");
    }
    // A capacity that is not a quantity fails decoding (400).
    let (code, got) = curl(
        &sim,
        "POST",
        SLICES,
        None,
        Some(&slice(
            "s",
            json!({"driver": "d.example.com", "pool": pool, "allNodes": true,
            "devices": [{"name": "d0", "capacity": {"mem": {"value": "lots"}}}]}),
        )),
    )
    .await;
    assert_eq!(code, 400, "{got}");
    // Driver, pool name and node name are immutable.
    let mut s = create(
        &sim,
        SLICES,
        &slice(
            "s",
            json!({"driver": "d.example.com", "pool": pool, "nodeName": "n1"}),
        ),
    )
    .await;
    s["spec"]["nodeName"] = json!("n2");
    let (code, got) = curl(&sim, "PUT", &format!("{SLICES}/s"), None, Some(&s)).await;
    assert_eq!(
        causes(code, &got),
        ["spec.nodeName: Invalid value: \"n2\": field is immutable"]
    );
    sim.shutdown().await;
}

/// The message of the 400 a quantity that does not parse gets while decoding.
fn bad_quantity(kind: &str) -> String {
    format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
}

/// Consumable capacity (KEP-5075): a multi-allocatable device's `requestPolicy` is checked as
/// `validateRequestPolicy` does, and its quantities are decoded.
#[tokio::test]
async fn request_policies_of_consumable_capacity_are_validated_with_the_real_messages() {
    let (sim, _) = start(small()).await;
    let pool = json!({"name": "p", "generation": 1, "resourceSliceCount": 1});
    let shared = |capacity: Value| {
        json!({"driver": "d.example.com", "pool": pool, "allNodes": true,
               "devices": [{"name": "d0", "allowMultipleAllocations": true, "capacity": capacity}]})
    };
    // Every form of policy, a capacity without one, and one without a value (zero, as decoded).
    create(
        &sim,
        SLICES,
        &slice(
            "ok",
            shared(json!({
                "mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi",
                    "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}}},
                "cores": {"value": 16, "requestPolicy": {"default": "4", "validValues": ["2", "4", "8", "16"]}},
                "bw": {"value": "100", "requestPolicy": {"default": "10"}},
                "open": {"value": "1k", "requestPolicy": {"default": "0", "validRange": {"min": "0"}}},
                "ports": {"value": "4"},
                "slots": {}
            })),
        ),
    )
    .await;
    const CAP: &str = "spec.devices[0].capacity";
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            json!({"mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi"],
                "validRange": {"min": "1Gi"}}}}),
            vec![format!(
                "{CAP}[mem].requestPolicy: Forbidden: exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time"
            )],
        ),
        (
            json!({"mem": {"value": "8Gi", "requestPolicy": {"validValues": ["1Gi"]}},
                   "vram": {"value": "8Gi", "requestPolicy": {"validRange": {"min": "1Gi"}}}}),
            vec![
                format!(
                    "{CAP}[mem].requestPolicy.default: Required value: required when validValues is defined"
                ),
                format!(
                    "{CAP}[vram].requestPolicy.default: Required value: required when validRange is defined"
                ),
            ],
        ),
        (
            json!({"cores": {"value": "8", "requestPolicy": {"default": "3", "validValues": ["1500m", "2", "8", "4", "16"]}}}),
            vec![
                format!(
                    "{CAP}[cores].requestPolicy.validValues[3]: Invalid value: \"4\": values must be sorted in ascending order"
                ),
                format!(
                    "{CAP}[cores].requestPolicy.validValues[4]: Invalid value: \"16\": option is larger than capacity value: 8"
                ),
                // 1500m is 2 as a whole number (rounded up), the key upstream compares.
                format!("{CAP}[cores].requestPolicy.validValues[1]: Duplicate value: \"2\""),
                format!(
                    "{CAP}[cores].requestPolicy.validValues: Invalid value: \"3\": default value is not valid according to the requestPolicy"
                ),
            ],
        ),
        (
            json!({"cores": {"value": "64", "requestPolicy": {"default": "1",
                "validValues": (1..=11).map(|i| i.to_string()).collect::<Vec<_>>()}}}),
            vec![
                format!(
                    "{CAP}[cores].requestPolicy.validValues: Too many: 11: must have at most 10 items"
                ),
                format!(
                    "{CAP}[cores].requestPolicy.validValues: Invalid value: \"1\": default value is not valid according to the requestPolicy"
                ),
            ],
        ),
        (
            json!({"mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"max": "2Gi"}}}}),
            vec![format!(
                "{CAP}[mem].requestPolicy.validRange.min: Required value: required when validRange is defined"
            )],
        ),
        (
            json!({"mem": {"value": "1Gi", "requestPolicy": {"default": "512Mi",
                "validRange": {"min": "2Gi", "max": "1536Mi", "step": "1Gi"}}}}),
            [
                "min: Invalid value: \"2Gi\": min is larger than capacity value: 1Gi",
                "min: Invalid value: \"512Mi\": default is less than min: 2Gi",
                "max: Invalid value: \"2Gi\": min is larger than max: 1536Mi",
                "max: Invalid value: \"1536Mi\": max is larger than capacity value: 1Gi",
                "step: Invalid value: \"1Gi\": one step 3Gi is larger than capacity value: 1Gi",
                "step: Invalid value: \"512Mi\": value is not a multiple of a given step (1Gi) from (2Gi)",
                "step: Invalid value: \"1536Mi\": value is not a multiple of a given step (1Gi) from (2Gi)",
            ]
            .map(|m| format!("{CAP}[mem].requestPolicy.validRange.{m}"))
            .to_vec(),
        ),
        (
            json!({"a": {"value": "10", "requestPolicy": {"default": "6", "validRange": {"min": "0", "max": "4"}}},
                   "b": {"value": "10", "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "0"}}}}),
            vec![
                format!(
                    "{CAP}[a].requestPolicy.validRange.max: Invalid value: \"6\": default is more than max: 4"
                ),
                format!(
                    "{CAP}[b].requestPolicy.validRange.step: Invalid value: \"0\": must be greater than zero"
                ),
            ],
        ),
    ];
    for (capacity, want) in cases {
        let (code, got) = curl(
            &sim,
            "POST",
            SLICES,
            None,
            Some(&slice("s", shared(capacity.clone()))),
        )
        .await;
        assert_eq!(causes(code, &got), want, "{capacity}");
    }
    // A policy's quantities are decoded: a bad one is a 400.
    let (code, got) = curl(
        &sim,
        "POST",
        SLICES,
        None,
        Some(&slice(
            "s",
            shared(
                json!({"mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi",
                "validRange": {"min": "1Gi", "step": "one"}}}}),
            ),
        )),
    )
    .await;
    assert_eq!(code, 400, "{got}");
    assert_eq!(got["message"], bad_quantity("ResourceSlice"));
    sim.shutdown().await;
}

/// A claim's capacity requests and an allocation's consumed capacity are only decoded (upstream
/// validates neither their names nor their signs); shares are UUIDs; a constraint needs one of
/// `matchAttribute` and `distinctAttribute`; device statuses name allocated shares.
#[tokio::test]
async fn consumable_capacity_of_claims_is_checked_as_upstream_does() {
    let (sim, _) = start(SimConfig {
        resource_claim_controller: false,
        ..small()
    })
    .await;
    let with_capacity = |requests: Value| {
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "capacity": {"requests": requests}}},
               {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com",
                    "capacity": {"requests": {"dra.example.com/bandwidth": "10G"}}}]}])
    };
    let mut c = claim(
        "c",
        with_capacity(json!({"memory": "1Gi", "odd/name/here": "-1"})),
    );
    c["spec"]["devices"]["constraints"] =
        json!([{"requests": ["gpu", "nic"], "distinctAttribute": "dra.example.com/numa"}]);
    let c = create(&sim, CLAIMS, &c).await;
    assert_eq!(
        c["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["odd/name/here"],
        "-1"
    );
    let mut bad = claim("bad", gpu_request());
    bad["spec"]["devices"]["constraints"] = json!([{"requests": ["gpu"]}]);
    let (code, got) = curl(&sim, "POST", CLAIMS, None, Some(&bad)).await;
    assert_eq!(
        causes(code, &got),
        [
            "spec.devices.constraints[0]: Required value: exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set"
        ]
    );
    let (code, got) = curl(
        &sim,
        "POST",
        CLAIMS,
        None,
        Some(&claim("bad", with_capacity(json!({"memory": "lots"})))),
    )
    .await;
    assert_eq!(
        (code, got["message"].clone()),
        (400, json!(bad_quantity("ResourceClaim")))
    );
    let mut t = template("t");
    t["spec"]["spec"]["devices"]["requests"] = with_capacity(json!({"memory": "1Qi"}));
    let (code, got) = curl(&sim, "POST", TEMPLATES, None, Some(&t)).await;
    assert_eq!(code, 400, "{got}");

    // Status: the scheduler's allocation of a share.
    let status = |s: Value| {
        let mut c = c.clone();
        c["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        c["status"] = s;
        c
    };
    const SHARE: &str = "0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f";
    let allocation = |share: &str, consumed: Value| {
        json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
            "device": "gpu-0", "shareID": share, "consumedCapacity": consumed}]}})
    };
    let path = format!("{CLAIMS}/c/status");
    let put = |s: Value| {
        let body = status(s);
        let sim = &sim;
        let path = path.clone();
        async move { curl(sim, "PUT", &path, None, Some(&body)).await }
    };
    let result = "status.allocation.devices.results[0].shareID";
    for (share, want) in [
        (
            "share-1",
            format!(
                "{result}: Invalid value: \"share-1\": error validating uid: invalid UUID length: 7"
            ),
        ),
        (
            "0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5g",
            format!(
                "{result}: Invalid value: \"0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5g\": error validating uid: invalid UUID format"
            ),
        ),
        (
            "0B9A1A77-3A47-4D36-9F49-6A1C2C3D4E5F",
            format!(
                "{result}: Invalid value: \"0B9A1A77-3A47-4D36-9F49-6A1C2C3D4E5F\": uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters"
            ),
        ),
    ] {
        let (code, got) =
            put(json!({"allocation": allocation(share, json!({"memory": "1Gi"}))})).await;
        assert_eq!(causes(code, &got), [want], "{share}");
    }
    let (code, got) =
        put(json!({"allocation": allocation(SHARE, json!({"memory": "lots"}))})).await;
    assert_eq!(
        (code, got["message"].clone()),
        (400, json!(bad_quantity("ResourceClaim")))
    );
    // A device status must name an allocated share.
    let entry = |share: &str| json!({"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0", "shareID": share});
    let other = "5f4e3d2c-1c6a-49f9-b64d-a7731a9a0b90";
    let (code, got) = put(
        json!({"allocation": allocation(SHARE, json!({"memory": "1Gi", "x/y/z": "-1"})),
        "devices": [entry(SHARE), entry(other), entry(SHARE)]}),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        [
            format!(
                "status.devices[1]: Invalid value: gpu.example.com/n1/gpu-0/{other}: must be an allocated device in the claim"
            ),
            format!("status.devices[2]: Duplicate value: gpu.example.com/n1/gpu-0/{SHARE}"),
        ]
    );
    let (code, got) = put(
        json!({"allocation": allocation(SHARE, json!({"memory": "1Gi", "x/y/z": "-1"})),
        "devices": [entry(SHARE)]}),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        got["status"]["allocation"]["devices"]["results"][0]["shareID"],
        SHARE
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn claim_specs_are_immutable_and_status_writes_are_checked() {
    let (sim, _) = start(small()).await;
    let c = create(&sim, CLAIMS, &claim("c", gpu_request())).await;
    let mut upd = c.clone();
    upd["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(2);
    let (code, got) = curl(&sim, "PUT", &format!("{CLAIMS}/c"), None, Some(&upd)).await;
    let msgs = causes(code, &got);
    assert_eq!(msgs.len(), 1);
    assert!(
        msgs[0].starts_with("spec: Invalid value: ") && msgs[0].ends_with(": field is immutable"),
        "{msgs:?}"
    );
    // Labels may change.
    let mut upd = c.clone();
    upd["metadata"]["labels"] = json!({"a": "b"});
    let (code, _) = curl(&sim, "PUT", &format!("{CLAIMS}/c"), None, Some(&upd)).await;
    assert_eq!(code, 200);

    let status = |s: Value| {
        let mut c = c.clone();
        c["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        c["status"] = s;
        c
    };
    let reserved = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")}))
            .collect()
    };
    let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}});
    let path = format!("{CLAIMS}/c/status");
    let (code, got) = curl(
        &sim,
        "PUT",
        &path,
        None,
        Some(&status(json!({"reservedFor": reserved(1)}))),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        ["status.reservedFor: Forbidden: may not be specified when `allocated` is not set"]
    );
    let (code, got) = curl(
        &sim,
        "PUT",
        &path,
        None,
        Some(&status(
            json!({"allocation": allocation, "reservedFor": reserved(257)}),
        )),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        ["status.reservedFor: Too many: 257: must have at most 256 items"]
    );
    let bad = json!({"devices": {"results": [{"request": "tpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}});
    let (code, got) = curl(
        &sim,
        "PUT",
        &path,
        None,
        Some(&status(json!({"allocation": bad}))),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        [
            "status.allocation.devices.results[0].request: Invalid value: \"tpu\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
        ]
    );
    let (code, got) = curl(
        &sim,
        "PUT",
        &path,
        None,
        Some(&status(
            json!({"allocation": allocation, "reservedFor": reserved(256)}),
        )),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["status"]["reservedFor"].as_array().unwrap().len(), 256);
    let mut other = allocation.clone();
    other["devices"]["results"][0]["device"] = json!("gpu-1");
    let (code, got) = curl(
        &sim,
        "PUT",
        &path,
        None,
        Some(&status(json!({"allocation": other}))),
    )
    .await;
    let msgs = causes(code, &got);
    assert!(
        msgs[0].starts_with("status.allocation: Invalid value: ")
            && msgs[0].ends_with("field is immutable"),
        "{msgs:?}"
    );
    sim.shutdown().await;
}

/// A claim being deleted (held by a finalizer) keeps its consumers and may lose them, but gains
/// none (`validateResourceClaimStatusUpdate`).
#[tokio::test]
async fn a_claim_being_deleted_takes_no_new_consumers() {
    // No claim controller: it would release the reservations of pods that do not exist.
    let (sim, _) = start(SimConfig {
        resource_claim_controller: false,
        ..small()
    })
    .await;
    let mut c = claim("c", gpu_request());
    c["metadata"]["finalizers"] = json!([DELETE_PROTECTION_FINALIZER]);
    create(&sim, CLAIMS, &c).await;
    let path = format!("{CLAIMS}/c/status");
    let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}});
    let consumer =
        |i: usize| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")});
    let patch =
        |reserved: Value| json!({"status": {"allocation": allocation, "reservedFor": reserved}});
    let (code, got) = curl(
        &sim,
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        Some(&patch(json!([consumer(0)]))),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    let (code, _) = curl(&sim, "DELETE", &format!("{CLAIMS}/c"), None, None).await;
    assert_eq!(code, 200);
    let (code, got) = curl(
        &sim,
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        Some(&patch(json!([consumer(0), consumer(1)]))),
    )
    .await;
    assert_eq!(
        causes(code, &got),
        [
            "status.reservedFor: Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
        ]
    );
    let (code, got) = curl(
        &sim,
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        Some(&json!({"status": {"reservedFor": null}})),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_slices_are_selected_by_node_and_driver() {
    let (sim, client) = start(small()).await;
    let pool = |n: &str| json!({"name": n, "generation": 1, "resourceSliceCount": 1});
    create(
        &sim,
        SLICES,
        &slice(
            "a",
            json!({"driver": "gpu.example.com", "pool": pool("n1"), "nodeName": "n1"}),
        ),
    )
    .await;
    create(
        &sim,
        SLICES,
        &slice(
            "b",
            json!({"driver": "nic.example.com", "pool": pool("n1"), "nodeName": "n1"}),
        ),
    )
    .await;
    create(
        &sim,
        SLICES,
        &slice(
            "c",
            json!({"driver": "gpu.example.com", "pool": pool("all"), "allNodes": true}),
        ),
    )
    .await;
    let slices: Api<ResourceSlice> = Api::all(client);
    let names = |l: kube::core::ObjectList<ResourceSlice>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|s| s.metadata.name.unwrap())
            .collect()
    };
    let by = |f: &str| ListParams::default().fields(f);
    assert_eq!(
        names(slices.list(&by("spec.nodeName=n1")).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(
            slices
                .list(&by("spec.driver=gpu.example.com"))
                .await
                .unwrap()
        ),
        ["a", "c"]
    );
    assert_eq!(
        names(
            slices
                .list(&by("spec.nodeName=,spec.driver=gpu.example.com"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    assert_eq!(
        names(slices.list(&by("metadata.name!=a")).await.unwrap()),
        ["b", "c"]
    );
    let (code, _, msg) = api_code(slices.list(&by("spec.pool.name=n1")).await);
    assert_eq!(code, 400);
    assert_eq!(
        msg,
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool.name"
    );
    sim.shutdown().await;
}

/// A claim made from the template for the pod, its name in the pod's status, and its deletion
/// with the pod, all seen on a watch of claims.
#[tokio::test]
async fn the_controller_makes_claims_from_templates_and_collects_them_with_the_pod() {
    let (sim, client) = start(small()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut watch = claims
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    create(&sim, TEMPLATES, &template("one-gpu")).await;
    let pod = create(
        &sim,
        PODS,
        &pod_with_claims(
            "worker",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    )
    .await;
    let made = match watch.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => c,
        other => panic!("expected ADDED, got {other:?}"),
    };
    let name = made.metadata.name.clone().unwrap();
    assert!(
        name.starts_with("worker-gpu-") && name.len() == "worker-gpu-".len() + 5,
        "{name}"
    );
    let owner = &made.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        (
            "Pod",
            "worker",
            pod["metadata"]["uid"].as_str().unwrap(),
            Some(true),
            Some(true)
        )
    );
    assert_eq!(
        made.metadata.annotations.as_ref().unwrap()[POD_CLAIM_NAME_ANNOTATION],
        "gpu"
    );
    assert_eq!(made.metadata.labels.as_ref().unwrap()["team"], "ml");
    let req = &made
        .spec
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0];
    assert_eq!(req.exactly.as_ref().unwrap().count, Some(1));
    let mf = made.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("kube-controller-manager"));

    let p = eventually(|| async {
        let p = pods.get("worker").await.unwrap();
        p.status.as_ref()?.resource_claim_statuses.as_ref()?;
        Some(p)
    })
    .await;
    let st = &p
        .status
        .as_ref()
        .unwrap()
        .resource_claim_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (st.name.as_str(), st.resource_claim_name.as_deref()),
        ("gpu", Some(name.as_str()))
    );
    let entry = p
        .metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.manager.as_deref() == Some("ResourceClaimController"))
        .expect("the controller's entry");
    assert_eq!(
        (entry.operation.as_deref(), entry.subresource.as_deref()),
        (Some("Apply"), Some("status"))
    );

    pods.delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(c)) => assert_eq!(c.metadata.name.as_deref(), Some(name.as_str())),
        other => panic!("expected DELETED, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn a_missing_template_delays_the_claim_until_it_exists() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(client, "default");
    create(
        &sim,
        PODS,
        &pod_with_claims(
            "w",
            json!([{"name": "gpu", "resourceClaimTemplateName": "later"}]),
        ),
    )
    .await;
    // Another pod's claim, made from an existing template, shows the controller has gone past
    // the first pod without making anything for it.
    create(&sim, TEMPLATES, &template("now")).await;
    create(
        &sim,
        PODS,
        &pod_with_claims(
            "v",
            json!([{"name": "gpu", "resourceClaimTemplateName": "now"}]),
        ),
    )
    .await;
    eventually(|| async {
        let l = claims.list(&ListParams::default()).await.unwrap();
        (!l.items.is_empty()).then_some(())
    })
    .await;
    let l = claims.list(&ListParams::default()).await.unwrap();
    assert_eq!(l.items.len(), 1);
    assert!(
        l.items[0]
            .metadata
            .name
            .as_ref()
            .unwrap()
            .starts_with("v-gpu-")
    );
    assert!(
        pods.get("w")
            .await
            .unwrap()
            .status
            .unwrap()
            .resource_claim_statuses
            .is_none()
    );
    create(&sim, TEMPLATES, &template("later")).await;
    let p = eventually(|| async {
        let p = pods.get("w").await.unwrap();
        p.status.as_ref()?.resource_claim_statuses.as_ref()?;
        Some(p)
    })
    .await;
    let claim_name = p.status.unwrap().resource_claim_statuses.unwrap()[0]
        .resource_claim_name
        .clone()
        .unwrap();
    assert!(claim_name.starts_with("w-gpu-"));
    claims.get(&claim_name).await.unwrap();
    sim.shutdown().await;
}

/// The scheduler allocated the claim (its finalizer) and reserved it for the pod: the pod's
/// deletion releases the reservation, deallocates and drops the finalizer; a claim allocated by
/// someone else (no finalizer) keeps its allocation.
#[tokio::test]
async fn reservations_of_deleted_pods_are_released_and_scheduler_allocations_undone() {
    let (sim, client) = start(small()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}});
    for (name, finalizer) in [("sched", true), ("other", false)] {
        let mut c = claim(name, gpu_request());
        if finalizer {
            c["metadata"]["finalizers"] = json!([DELETE_PROTECTION_FINALIZER]);
        }
        create(&sim, CLAIMS, &c).await;
        let p = create(
            &sim,
            PODS,
            &pod_with_claims(
                &format!("p-{name}"),
                json!([{"name": "gpu", "resourceClaimName": name}]),
            ),
        )
        .await;
        let st = json!({"metadata": {"name": name}, "status": {"allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": format!("p-{name}"), "uid": p["metadata"]["uid"]}]}});
        let (code, got) = curl(
            &sim,
            "PATCH",
            &format!("{CLAIMS}/{name}/status"),
            Some("application/merge-patch+json"),
            Some(&st),
        )
        .await;
        assert_eq!(code, 200, "{got}");
    }
    let mut watch = claims
        .watch(
            &WatchParams::default().timeout(10),
            &sim.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    pods.delete("p-sched", &DeleteParams::default())
        .await
        .unwrap();
    let released = match watch.try_next().await.unwrap() {
        Some(WatchEvent::Modified(c)) => c,
        other => panic!("expected MODIFIED, got {other:?}"),
    };
    let status = released.status.unwrap();
    assert!(status.reserved_for.is_none() && status.allocation.is_none());
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Modified(c)) => {
            assert!(c.metadata.finalizers.is_none_or(|f| f.is_empty()))
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    pods.delete("p-other", &DeleteParams::default())
        .await
        .unwrap();
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Modified(c)) => {
            let status = c.status.unwrap();
            assert!(status.reserved_for.is_none());
            assert!(status.allocation.is_some());
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    sim.shutdown().await;
}

/// A bound pod whose allocated claim is not reserved for it gets the reservation.
#[tokio::test]
async fn the_controller_reserves_allocated_claims_for_scheduled_pods() {
    let (sim, client) = start(small()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&sim, CLAIMS, &claim("c", gpu_request())).await;
    let st = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}}}});
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{CLAIMS}/c/status"),
        Some("application/merge-patch+json"),
        Some(&st),
    )
    .await;
    assert_eq!(code, 200);
    let p = create(
        &sim,
        PODS,
        &pod_with_claims("p", json!([{"name": "gpu", "resourceClaimName": "c"}])),
    )
    .await;
    bind(&pods, "p", "node-00000").await.unwrap();
    let c = eventually(|| async {
        let c = claims.get("c").await.unwrap();
        c.status.as_ref()?.reserved_for.as_ref()?;
        Some(c)
    })
    .await;
    let r = &c.status.unwrap().reserved_for.unwrap()[0];
    assert_eq!(
        (r.resource.as_str(), r.name.as_str(), r.uid.as_str()),
        ("pods", "p", p["metadata"]["uid"].as_str().unwrap())
    );
    sim.shutdown().await;
}

/// A pod that finishes releases its claim, and the claim made for it is deleted at once.
#[tokio::test]
async fn a_finished_pods_generated_claim_is_deleted() {
    let (sim, client) = start(small()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&sim, TEMPLATES, &template("t")).await;
    create(
        &sim,
        PODS,
        &pod_with_claims(
            "p",
            json!([{"name": "gpu", "resourceClaimTemplateName": "t"}]),
        ),
    )
    .await;
    eventually(|| async {
        (!claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty())
        .then_some(())
    })
    .await;
    let mut p = pods.get("p").await.unwrap();
    p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    pods.replace_status("p", &PostParams::default(), &p)
        .await
        .unwrap();
    eventually(|| async {
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    sim.shutdown().await;
}
