//! `policy/v1` PodDisruptionBudgets: the recorded answers of kube-apiserver v1.36.2 reproduced,
//! discovery (`pdb`, `/status`), the validation and decoding messages, spec updates and status
//! writes, and the disruption controller's status for absolute and percentage budgets as pods
//! come, become ready, terminate and go (owners with a scale subresource, unmanaged pods,
//! owners that cannot be found), the stale `DisruptionTarget` reset, the controller switched
//! off, and kubectl.

use crate::common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sim::{SimConfig, SimHandle};
use serde_json::{Value, json};
use std::time::Duration;

const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn pdb(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec})
}

async fn create_pdb(sim: &SimHandle, name: &str, spec: Value) -> Value {
    let (code, got) = curl(sim, "POST", PDBS, None, Some(&pdb(name, spec))).await;
    assert_eq!(code, 201, "{got}");
    got
}

/// A pod labelled `app: <app>`, bound to a node (Running and Ready at once) unless `node` is
/// None, with `owner` as its controller reference when given.
async fn app_pod(sim: &SimHandle, name: &str, app: &str, node: Option<&str>, owner: Option<Value>) {
    let mut p = kube_sim::pod_object("default", name, "s", "100m", "64Mi");
    p["metadata"]["labels"] = json!({"app": app});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if let Some(o) = owner {
        p["metadata"]["ownerReferences"] = json!([o]);
    }
    let (code, got) = curl(sim, "POST", PODS, None, Some(&p)).await;
    assert_eq!(code, 201, "{got}");
}

/// The status counters and the `DisruptionAllowed` condition's status and reason.
fn summary(pdb: &Value) -> (i64, i64, i64, i64, String, String) {
    let st = &pdb["status"];
    let n = |f: &str| st[f].as_i64().unwrap_or(-1);
    let cond = st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionAllowed"))
        .cloned()
        .unwrap_or(Value::Null);
    (
        n("expectedPods"),
        n("currentHealthy"),
        n("desiredHealthy"),
        n("disruptionsAllowed"),
        cond["status"].as_str().unwrap_or("").to_string(),
        cond["reason"].as_str().unwrap_or("").to_string(),
    )
}

/// Waits until the budget's status summary is `want` (and observes its generation).
async fn wait_status(sim: &SimHandle, name: &str, want: (i64, i64, i64, i64, &str, &str)) -> Value {
    let want = (
        want.0,
        want.1,
        want.2,
        want.3,
        want.4.to_string(),
        want.5.to_string(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let p = sim
            .get("policy/v1", "poddisruptionbudgets", "default", name)
            .unwrap();
        if summary(&p) == want && p["status"]["observedGeneration"] == p["metadata"]["generation"] {
            return p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: status {:?}, want {want:?}: {}",
            summary(&p),
            p["status"]
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn budgets_are_created_and_refused_as_recorded() {
    let (sim, _) = start(small()).await;
    let spec = json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "agent"}}});
    let got = create_pdb(&sim, "agents", spec).await;
    assert_eq!(
        comparable(got),
        comparable(recording("pdb-create-response.json"))
    );
    let bad = json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "agent"}}, "maxUnavailable": 1});
    let (code, got) = curl(&sim, "POST", PDBS, None, Some(&pdb("bad", bad))).await;
    assert_eq!(code, 422);
    assert_eq!(got, recording("pdb-invalid-response.json"));
    sim.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_budgets_with_their_short_name() {
    let (sim, _) = start(small()).await;
    let (code, list) = curl(&sim, "GET", "/apis/policy/v1", None, None).await;
    assert_eq!(code, 200);
    let res = list["resources"].as_array().unwrap();
    let main = res
        .iter()
        .find(|r| r["name"] == "poddisruptionbudgets")
        .unwrap();
    assert_eq!(
        (&main["kind"], &main["namespaced"], &main["shortNames"]),
        (&json!("PodDisruptionBudget"), &json!(true), &json!(["pdb"]))
    );
    assert!(
        res.iter()
            .any(|r| r["name"] == "poddisruptionbudgets/status")
    );
    let (_, groups) = curl(&sim, "GET", "/apis", None, None).await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "policy" && g["preferredVersion"]["groupVersion"] == "policy/v1")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn validation_and_decoding_messages() {
    let (sim, _) = start(small()).await;
    let refused = |spec: Value| {
        let sim = &sim;
        async move {
            let (code, got) = curl(sim, "POST", PDBS, None, Some(&pdb("x", spec))).await;
            (code, got["message"].as_str().unwrap_or("").to_string())
        }
    };
    const PERCENT: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
    assert_eq!(
        refused(json!({"minAvailable": -1})).await,
        (
            422,
            "PodDisruptionBudget.policy \"x\" is invalid: spec.minAvailable: Invalid value: -1: must be greater than or equal to 0".into()
        )
    );
    assert_eq!(
        refused(json!({"maxUnavailable": "120%"})).await.1,
        "PodDisruptionBudget.policy \"x\" is invalid: spec.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"
    );
    assert_eq!(
        refused(json!({"maxUnavailable": "half"})).await.1,
        format!(
            "PodDisruptionBudget.policy \"x\" is invalid: spec.maxUnavailable: Invalid value: \"half\": {PERCENT}"
        )
    );
    assert_eq!(
        refused(json!({"minAvailable": 2, "unhealthyPodEvictionPolicy": "Never",
            "selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}}))
        .await
        .1,
        "PodDisruptionBudget.policy \"x\" is invalid: [spec.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator, spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"]"
    );
    assert_eq!(
        refused(json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}))
            .await
            .1,
        "PodDisruptionBudget.policy \"x\" is invalid: spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
    );
    // Percentages both ways in the "both set" message.
    assert_eq!(
        refused(json!({"minAvailable": "50%", "maxUnavailable": "10%"}))
            .await
            .1,
        "PodDisruptionBudget.policy \"x\" is invalid: spec: Invalid value: {\"MinAvailable\":\"50%\",\"Selector\":null,\"MaxUnavailable\":\"10%\",\"UnhealthyPodEvictionPolicy\":null}: minAvailable and maxUnavailable cannot be both set"
    );
    // What the decoder refuses: 400.
    assert_eq!(
        refused(json!({"minAvailable": 1.5})).await,
        (
            400,
            "PodDisruptionBudget in version \"v1\" cannot be handled as a PodDisruptionBudget: json: cannot unmarshal number 1.5 into Go value of type int32".into()
        )
    );
    assert_eq!(refused(json!({"maxUnavailable": true})).await.0, 400);
    // The policy is kept only when set; no budget was stored.
    let got = create_pdb(
        &sim,
        "always",
        json!({"maxUnavailable": "25%", "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": {}}),
    )
    .await;
    assert_eq!(got["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    assert_eq!(
        sim.list("policy/v1", "poddisruptionbudgets", Some("default"))
            .unwrap()
            .len(),
        1
    );
    sim.shutdown().await;
}

/// The spec may change (generation bumped, the controller observes it); main writes keep the
/// status, `/status` writes are validated; a strategic merge patch replaces the selector
/// (`patchStrategy=replace`); deleting a budget answers a Status naming it.
#[tokio::test]
async fn spec_updates_status_writes_and_deletion() {
    let (sim, client) = start(SimConfig {
        disruption_controller: false,
        ..small()
    })
    .await;
    let spec = json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "a", "tier": "web"}}});
    create_pdb(&sim, "b", spec).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    let p = pdbs
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "b"}}},
                                     "status": {"disruptionsAllowed": 9}}),
            ),
        )
        .await
        .unwrap();
    let p = serde_json::to_value(p).unwrap();
    assert_eq!(p["metadata"]["generation"], 2);
    assert_eq!(p["spec"]["selector"], json!({"matchLabels": {"app": "b"}}));
    assert_eq!(
        p["status"]["disruptionsAllowed"], 0,
        "main writes keep the status"
    );
    assert_eq!(
        p["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:selector"],
        json!({}),
        "a label selector is owned as a whole"
    );
    let url = format!("{PDBS}/b/status");
    let bad = json!({"status": {"disruptionsAllowed": -1, "conditions": [
        {"type": "DisruptionAllowed", "status": "Maybe", "reason": "x-y", "message": ""}]}});
    let (code, got) = curl(
        &sim,
        "PATCH",
        &url,
        Some("application/merge-patch+json"),
        Some(&bad),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "PodDisruptionBudget.policy \"b\" is invalid: [status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\", status.conditions[0].lastTransitionTime: Required value: must be set, status.conditions[0].reason: Invalid value: \"x-y\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?'), status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0]"
    );
    let good = json!({"status": {"expectedPods": 3, "currentHealthy": null}});
    let (code, got) = curl(
        &sim,
        "PATCH",
        &url,
        Some("application/merge-patch+json"),
        Some(&good),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        (
            &got["status"]["expectedPods"],
            &got["status"]["currentHealthy"],
            &got["spec"]["minAvailable"]
        ),
        (&json!(3), &json!(0), &json!(2))
    );
    let (code, got) = curl(&sim, "DELETE", &format!("{PDBS}/b"), None, None).await;
    assert_eq!(code, 200);
    assert_eq!(
        got,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "b", "group": "policy", "kind": "poddisruptionbudgets", "uid": p["metadata"]["uid"]}})
    );
    sim.shutdown().await;
}

/// An absolute `minAvailable`: the selected pods are expected, the Ready ones healthy; a pod
/// being deleted is not healthy; new pods count once Ready; the spec's change is observed.
#[tokio::test]
async fn absolute_budgets_follow_pods_as_they_come_and_go() {
    let (sim, _) = start(SimConfig {
        termination_delay: None,
        ..small()
    })
    .await;
    for i in 0..3 {
        app_pod(&sim, &format!("web-{i}"), "web", Some("node-00000"), None).await;
    }
    app_pod(&sim, "other", "db", Some("node-00001"), None).await;
    create_pdb(
        &sim,
        "web",
        json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}),
    )
    .await;
    let p = wait_status(&sim, "web", (3, 3, 2, 1, "True", "SufficientPods")).await;
    let c = &p["status"]["conditions"][0];
    assert_eq!(
        (&c["message"], &c["observedGeneration"]),
        (&json!(""), &json!(1))
    );
    let mf = p["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["manager"] == "kube-controller-manager" && e["subresource"] == "status")
    );
    // A pod being deleted (the kubelet never finishes here) is no longer healthy.
    let (code, _) = curl(&sim, "DELETE", &format!("{PODS}/web-0"), None, None).await;
    assert_eq!(code, 200);
    wait_status(&sim, "web", (3, 2, 2, 0, "False", "InsufficientPods")).await;
    // Gone: no longer expected. An unscheduled pod is expected but not healthy.
    curl(
        &sim,
        "DELETE",
        &format!("{PODS}/web-0?gracePeriodSeconds=0"),
        None,
        None,
    )
    .await;
    app_pod(&sim, "web-3", "web", None, None).await;
    wait_status(&sim, "web", (3, 2, 2, 0, "False", "InsufficientPods")).await;
    app_pod(&sim, "web-4", "web", Some("node-00002"), None).await;
    let p = wait_status(&sim, "web", (4, 3, 2, 1, "True", "SufficientPods")).await;
    assert_eq!(
        p["status"]["conditions"].as_array().unwrap().len(),
        1,
        "one DisruptionAllowed condition"
    );
    // The spec changes: the new generation is observed.
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{PDBS}/web"),
        Some("application/merge-patch+json"),
        Some(&json!({"spec": {"minAvailable": 1}})),
    )
    .await;
    assert_eq!(code, 200);
    let p = wait_status(&sim, "web", (4, 3, 1, 2, "True", "SufficientPods")).await;
    assert_eq!(p["status"]["observedGeneration"], 2);
    // `disruptedPods` written through /status (there is no eviction API here): a recent entry
    // for a live pod is kept and that pod not counted healthy; an entry older than the
    // 2-minute DeletionTimeout, or for a pod that is not there, is dropped.
    let (code, got) = curl(
        &sim,
        "PATCH",
        &format!("{PDBS}/web/status"),
        Some("application/merge-patch+json"),
        Some(
            &json!({"status": {"disruptedPods": {"web-1": kube_sim_now(),
            "web-2": "2020-01-01T00:00:00Z", "gone": kube_sim_now()}}}),
        ),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    let p = wait_status(&sim, "web", (4, 2, 1, 1, "True", "SufficientPods")).await;
    let disrupted = p["status"]["disruptedPods"].as_object().unwrap();
    assert_eq!(disrupted.keys().collect::<Vec<_>>(), ["web-1"]);
    // An empty selector selects every pod of the namespace; none selects nothing.
    create_pdb(&sim, "all", json!({"minAvailable": 0, "selector": {}})).await;
    wait_status(&sim, "all", (5, 4, 0, 4, "True", "SufficientPods")).await;
    create_pdb(&sim, "none", json!({"minAvailable": 0})).await;
    wait_status(&sim, "none", (0, 0, 0, 0, "False", "InsufficientPods")).await;
    sim.shutdown().await;
}

const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WORKERS: &str = "/apis/example.com/v1/namespaces/default/workers";

/// Percentages are of the controllers' scale, rounded up: owners found through a CRD's scale
/// subresource count their `spec.replicas`; pods without a controller count nothing; an owner
/// that cannot be found, or one without a scale subresource, fails the sync (`SyncFailed`).
#[tokio::test]
async fn percentage_budgets_use_the_owners_scale() {
    let (sim, _) = start(small()).await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workers.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "workers", "singular": "worker", "kind": "Worker"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                              "statusReplicasPath": ".status.replicas"}}}]}});
    assert_eq!(curl(&sim, "POST", CRD, None, Some(&crd)).await.0, 201);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Worker", "metadata": {"name": "pool"},
                   "spec": {"replicas": 4}});
    let (code, w) = curl(&sim, "POST", WORKERS, None, Some(&w)).await;
    assert_eq!(code, 201, "{w}");
    let owner = json!({"apiVersion": "example.com/v1", "kind": "Worker", "name": "pool",
                       "uid": w["metadata"]["uid"], "controller": true});
    for i in 0..3 {
        app_pod(
            &sim,
            &format!("w-{i}"),
            "w",
            Some("node-00000"),
            Some(owner.clone()),
        )
        .await;
    }
    // minAvailable 50% of 4 = 2; maxUnavailable 30% of 4 = ceil(1.2) = 2, so 2 desired.
    create_pdb(
        &sim,
        "min",
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "w"}}}),
    )
    .await;
    create_pdb(
        &sim,
        "max",
        json!({"maxUnavailable": "30%", "selector": {"matchLabels": {"app": "w"}}}),
    )
    .await;
    create_pdb(
        &sim,
        "abs",
        json!({"maxUnavailable": 3, "selector": {"matchLabels": {"app": "w"}}}),
    )
    .await;
    wait_status(&sim, "min", (4, 3, 2, 1, "True", "SufficientPods")).await;
    wait_status(&sim, "max", (4, 3, 2, 1, "True", "SufficientPods")).await;
    wait_status(&sim, "abs", (4, 3, 1, 2, "True", "SufficientPods")).await;
    // The owner scales to 5: 50% is 3 (rounded up), and 3 are healthy.
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{WORKERS}/pool"),
        Some("application/merge-patch+json"),
        Some(&json!({"spec": {"replicas": 5}})),
    )
    .await;
    assert_eq!(code, 200);
    // A pod change makes the controller look again.
    app_pod(&sim, "w-3", "w", None, Some(owner.clone())).await;
    wait_status(&sim, "min", (5, 3, 3, 0, "False", "InsufficientPods")).await;
    wait_status(&sim, "max", (5, 3, 3, 0, "False", "InsufficientPods")).await;

    // Unmanaged pods count nothing towards a percentage budget.
    app_pod(&sim, "loose-0", "loose", Some("node-00001"), None).await;
    app_pod(&sim, "loose-1", "loose", Some("node-00001"), None).await;
    create_pdb(
        &sim,
        "loose",
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "loose"}}}),
    )
    .await;
    wait_status(&sim, "loose", (0, 2, 0, 0, "False", "InsufficientPods")).await;
    // An integer minAvailable counts them.
    create_pdb(
        &sim,
        "loose-abs",
        json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "loose"}}}),
    )
    .await;
    wait_status(&sim, "loose-abs", (2, 2, 1, 1, "True", "SufficientPods")).await;

    // Owners that cannot be found fail the sync.
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true});
    app_pod(&sim, "rs-0", "rs", Some("node-00002"), Some(rs)).await;
    create_pdb(
        &sim,
        "rs",
        json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "rs"}}}),
    )
    .await;
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-uid", "controller": true});
    app_pod(&sim, "job-0", "job", Some("node-00002"), Some(job)).await;
    create_pdb(
        &sim,
        "job",
        json!({"minAvailable": "10%", "selector": {"matchLabels": {"app": "job"}}}),
    )
    .await;
    for (name, message) in [
        ("rs", "found no controllers for pod \"rs-0\""),
        ("job", "jobs.batch does not implement the scale subresource"),
    ] {
        let p = eventually(|| async {
            let p = sim
                .get("policy/v1", "poddisruptionbudgets", "default", name)
                .unwrap();
            let c = p["status"]["conditions"].get(0)?.clone();
            (c["reason"] == "SyncFailed").then_some(p)
        })
        .await;
        let c = &p["status"]["conditions"][0];
        assert_eq!(
            (&c["status"], &c["message"]),
            (&json!("False"), &json!(message))
        );
        assert_eq!(p["status"]["disruptionsAllowed"], 0);
    }
    sim.shutdown().await;
}

/// A `DisruptionTarget=True` condition left on a pod that is not being deleted is reset to
/// False after the stale timeout; one on a terminating pod is left alone.
#[tokio::test]
async fn stale_disruption_targets_are_reset() {
    let (sim, client) = start(SimConfig {
        stale_disruption_condition_timeout: Duration::from_millis(300),
        termination_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    for name in ["kept", "going"] {
        app_pod(&sim, name, "x", Some("node-00000"), None).await;
    }
    // Terminating first (the kubelet never finishes here), so it is never stale.
    curl(&sim, "DELETE", &format!("{PODS}/going"), None, None).await;
    for name in ["kept", "going"] {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                "reason": "PreemptionByScheduler", "message": "preempted", "lastTransitionTime": kube_sim_now()}]}})),
        )
        .await
        .unwrap();
    }
    let target = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DisruptionTarget")
            .cloned()
            .unwrap()
    };
    let reset = eventually(|| async {
        let p = sim.get("v1", "pods", "default", "kept").unwrap();
        let c = target(&p);
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert!(reset.get("reason").is_none(), "{reset}");
    let going = sim.get("v1", "pods", "default", "going").unwrap();
    assert_eq!(target(&going)["status"], "True");
    sim.shutdown().await;
}

/// Now as a metav1.Time (`2026-01-02T03:04:05Z`).
fn kube_sim_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Switched off, nobody writes the status: it stays as created, owned by its creator alone.
#[tokio::test]
async fn the_controller_can_be_switched_off() {
    let (sim, client) = start(SimConfig {
        disruption_controller: false,
        ..small()
    })
    .await;
    app_pod(&sim, "a", "a", Some("node-00000"), None).await;
    create_pdb(
        &sim,
        "a",
        json!({"minAvailable": 0, "selector": {"matchLabels": {"app": "a"}}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("later", "s"))
        .await
        .unwrap();
    let p = sim
        .get("policy/v1", "poddisruptionbudgets", "default", "a")
        .unwrap();
    assert_eq!(
        p["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
    );
    assert_eq!(p["metadata"]["managedFields"].as_array().unwrap().len(), 1);
    sim.shutdown().await;
}

/// kubectl creates, lists (by short name) and deletes budgets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_and_deletes_budgets() {
    let (sim, _) = start(small()).await;
    let k = Kubectl::new(&sim, "pdb");
    let manifest = k.dir.join("pdb.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  maxUnavailable: 25%\n  selector:\n    matchLabels:\n      app: web\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", m]).await;
    assert!(
        ok && out.contains("poddisruptionbudget.policy/web created"),
        "{out} {err}"
    );
    let (ok, out, err) = k.run(vec!["get", "pdb", "web", "-o", "json"]).await;
    assert!(ok, "{err}");
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got["spec"]["maxUnavailable"], "25%");
    // Apply a changed selector: replaced, not merged.
    std::fs::write(
        &manifest,
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  maxUnavailable: 25%\n  selector:\n    matchLabels:\n      tier: front\n",
    )
    .unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", m]).await;
    assert!(ok && out.contains("configured"), "{out} {err}");
    let p = sim
        .get("policy/v1", "poddisruptionbudgets", "default", "web")
        .unwrap();
    assert_eq!(
        p["spec"]["selector"],
        json!({"matchLabels": {"tier": "front"}})
    );
    let (ok, out, err) = k.run(vec!["delete", "pdb", "web"]).await;
    assert!(ok && out.contains("deleted"), "{out} {err}");
    assert!(
        sim.list("policy/v1", "poddisruptionbudgets", Some("default"))
            .unwrap()
            .is_empty()
    );
    sim.shutdown().await;
}
