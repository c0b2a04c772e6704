//! `scheduling.k8s.io/v1` PriorityClasses and the Priority admission plugin, as kube-apiserver
//! v1.36 serves them: discovery (`pc`), the built-in `system-node-critical` and
//! `system-cluster-critical` (as its bootstrap hook creates them, undeletable), the registry's
//! decoding, defaults and validation messages, `value` and `preemptionPolicy` immutable, one
//! `globalDefault`, list, field selector, watch, patch and delete; pods given their class's
//! priority and preemption policy (the global default's, or 0), refused for an unknown class or
//! a priority or policy of their own that differs; `--disable-admission-plugins Priority`
//! (pods keep the priority they carry, as in kube-scheduler's integration harness) and unknown
//! plugin names refused; and kubectl.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube_sim::{Sim, SimConfig, SimHandle};
use serde_json::{Value, json};

const PCS: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn class(name: &str, value: Value) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": name}, "value": value})
}

async fn create_class(sim: &SimHandle, body: Value) -> Value {
    let (code, got) = curl(sim, "POST", PCS, None, Some(&body)).await;
    assert_eq!(code, 201, "{got}");
    got
}

/// A pod for scheduler `s` with the given extra spec fields.
fn pod_with(name: &str, extra: Value) -> Value {
    let mut p = kube_sim::pod_object("default", name, "s", "100m", "64Mi");
    for (k, v) in extra.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

/// The next watch event that is not a bookmark.
async fn next_change(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<PriorityClass>>> + Unpin),
) -> WatchEvent<PriorityClass> {
    loop {
        match events.try_next().await.unwrap() {
            Some(WatchEvent::Bookmark(_)) => continue,
            Some(e) => return e,
            None => panic!("the watch ended"),
        }
    }
}

/// The `Status` of a 403 from an admission plugin.
fn forbidden(kind: &str, group: &str, name: &str, message: &str) -> Value {
    let mut details = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": "Forbidden", "details": details, "code": 403})
}

#[tokio::test]
async fn discovery_and_the_built_in_classes() {
    let (sim, _) = start(small()).await;
    let (code, groups) = curl(&sim, "GET", "/apis", None, None).await;
    assert_eq!(code, 200);
    let g = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "scheduling.k8s.io")
        .cloned()
        .expect("scheduling.k8s.io served");
    assert_eq!(
        g["preferredVersion"]["groupVersion"],
        "scheduling.k8s.io/v1"
    );
    let (_, list) = curl(&sim, "GET", "/apis/scheduling.k8s.io/v1", None, None).await;
    assert_eq!(
        list["resources"],
        json!([{"name": "priorityclasses", "singularName": "priorityclass", "namespaced": false,
                "kind": "PriorityClass", "shortNames": ["pc"],
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                          "watch"]}])
    );

    let (code, list) = curl(&sim, "GET", PCS, None, None).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PriorityClassList");
    let items: Vec<Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(comparable)
        .collect();
    let built_in = |name: &str, value: i64, description: &str| {
        json!({"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1",
               "metadata": {"name": name, "generation": 1, "managedFields": [{
                   "manager": "kube-apiserver", "operation": "Update",
                   "apiVersion": "scheduling.k8s.io/v1", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:description": {}, "f:preemptionPolicy": {}, "f:value": {}}}]},
               "value": value, "description": description,
               "preemptionPolicy": "PreemptLowerPriority"})
    };
    assert_eq!(
        items,
        vec![
            built_in(
                "system-cluster-critical",
                2_000_000_000,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
            ),
            built_in(
                "system-node-critical",
                2_000_001_000,
                "Used for system critical pods that must not be moved from their current node."
            ),
        ]
    );
    // The field selector the real server supports for them.
    let (code, one) = curl(
        &sim,
        "GET",
        &format!("{PCS}?fieldSelector=metadata.name%3Dsystem-node-critical"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    let (code, _) = curl(
        &sim,
        "GET",
        &format!("{PCS}?fieldSelector=value%3D1"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 400);

    // They cannot be deleted; their value and policy cannot change, their description can.
    let nc = format!("{PCS}/system-node-critical");
    let (code, got) = curl(&sim, "DELETE", &nc, None, None).await;
    assert_eq!(
        (code, got),
        (
            403,
            forbidden(
                "priorityclasses",
                "scheduling.k8s.io",
                "system-node-critical",
                "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"
            )
        )
    );
    // The refusal goes by the name, before the object is looked up: a system class removed
    // behind the API's back is still refused, not "not found".
    sim.delete(
        "scheduling.k8s.io/v1",
        "priorityclasses",
        "",
        "system-cluster-critical",
    )
    .unwrap();
    let (code, got) = curl(
        &sim,
        "DELETE",
        &format!("{PCS}/system-cluster-critical"),
        None,
        None,
    )
    .await;
    assert_eq!(
        (code, got["reason"].as_str()),
        (403, Some("Forbidden")),
        "{got}"
    );
    let merge = Some("application/merge-patch+json");
    let (code, got) = curl(&sim, "PATCH", &nc, merge, Some(&json!({"value": 1}))).await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "PriorityClass.scheduling.k8s.io \"system-node-critical\" is invalid: value: Forbidden: may not be changed in an update."
    );
    let (code, got) = curl(
        &sim,
        "PATCH",
        &nc,
        merge,
        Some(&json!({"description": "mine now"})),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        (&got["description"], &got["metadata"]["generation"]),
        (&json!("mine now"), &json!(1))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn create_validation_and_updates() {
    let (sim, client) = start(small()).await;
    // Defaults: the policy; an empty description and a false globalDefault are not shown; a
    // left-out value is 0 (`value` is `+k8s:optional` and not a pointer).
    let got = create_class(
        &sim,
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "zero"}, "globalDefault": false, "description": ""}),
    )
    .await;
    assert_eq!(
        without(got, &["/metadata"]),
        json!({"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1", "value": 0,
               "preemptionPolicy": "PreemptLowerPriority"})
    );

    let refused = |body: Value| {
        let sim = &sim;
        async move {
            let (code, got) = curl(sim, "POST", PCS, None, Some(&body)).await;
            (code, got["message"].as_str().unwrap_or("").to_string(), got)
        }
    };
    let (code, msg, got) = refused(class("huge", json!(1_000_000_001))).await;
    assert_eq!(code, 422);
    assert_eq!(
        msg,
        "PriorityClass.scheduling.k8s.io \"huge\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
    );
    assert_eq!(
        got["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "message": "Forbidden: maximum allowed value of a user defined priority is 1000000000", "field": "value"}])
    );
    create_class(&sim, class("highest", json!(1_000_000_000))).await;
    create_class(&sim, class("negative", json!(-5))).await;
    let (code, msg, _) = refused(class("system-mine", json!(5))).await;
    assert_eq!(
        (code, msg.as_str()),
        (
            422,
            "PriorityClass.scheduling.k8s.io \"system-mine\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"
        )
    );
    let (code, msg, _) = refused(class("system-node-critical", json!(2_000_001_000))).await;
    assert_eq!(
        (code, msg.as_str()),
        (
            409,
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" already exists"
        )
    );
    let mut bad = class("Bad_Name", json!(1));
    bad["preemptionPolicy"] = json!("Sometimes");
    let (code, msg, _) = refused(bad).await;
    assert_eq!(code, 422);
    assert!(
        msg.starts_with("PriorityClass.scheduling.k8s.io \"Bad_Name\" is invalid: [metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
            && msg.ends_with(", preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\"]"),
        "{msg}"
    );
    let (code, msg, _) = refused(class("text", json!("high"))).await;
    assert_eq!(
        (code, msg.as_str()),
        (
            400,
            "PriorityClass in version \"v1\" cannot be handled as a PriorityClass: json: cannot unmarshal string into Go struct field PriorityClass.value of type int32"
        )
    );

    // Through the kube client: get, list with a resourceVersion, watch, replace, patch, delete.
    let api: Api<PriorityClass> = Api::all(client);
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.clone().unwrap();
    assert_eq!(list.items.len(), 5);
    let mut events = api
        .watch(&WatchParams::default().timeout(2), &rv)
        .await
        .unwrap()
        .boxed();
    let mut never: PriorityClass = serde_json::from_value(class("never", json!(100))).unwrap();
    never.preemption_policy = Some("Never".into());
    let created = api.create(&PostParams::default(), &never).await.unwrap();
    match next_change(&mut events).await {
        WatchEvent::Added(pc) => assert_eq!(pc.metadata.name.as_deref(), Some("never")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let mut changed = created.clone();
    changed.value = 101;
    changed.preemption_policy = Some("PreemptLowerPriority".into());
    let (code, _, msg) = api_code(api.replace("never", &PostParams::default(), &changed).await);
    assert_eq!(
        (code, msg.as_str()),
        (
            422,
            "PriorityClass.scheduling.k8s.io \"never\" is invalid: [value: Forbidden: may not be changed in an update., preemptionPolicy: Invalid value: \"PreemptLowerPriority\": field is immutable]"
        )
    );
    let mut described = created.clone();
    described.description = Some("never preempts".into());
    let replaced = api
        .replace("never", &PostParams::default(), &described)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(1));
    match next_change(&mut events).await {
        WatchEvent::Modified(pc) => assert_eq!(pc.description.as_deref(), Some("never preempts")),
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    // A stale resourceVersion is a conflict.
    let (code, _, _) = api_code(api.replace("never", &PostParams::default(), &created).await);
    assert_eq!(code, 409);
    let patched = api
        .patch(
            "never",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"tier": "batch"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["tier"], "batch");
    api.delete("never", &DeleteParams::default()).await.unwrap();
    assert!(matches!(
        next_change(&mut events).await,
        WatchEvent::Modified(_)
    ));
    match next_change(&mut events).await {
        WatchEvent::Deleted(pc) => assert_eq!(pc.metadata.name.as_deref(), Some("never")),
        other => panic!("expected DELETED, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn only_one_global_default() {
    let (sim, _) = start(small()).await;
    let mut low = class("low", json!(-10));
    low["globalDefault"] = json!(true);
    create_class(&sim, low).await;
    let mut other = class("other", json!(7));
    other["globalDefault"] = json!(true);
    let (code, got) = curl(&sim, "POST", PCS, None, Some(&other)).await;
    assert_eq!(
        (code, got),
        (
            403,
            forbidden(
                "priorityclasses",
                "scheduling.k8s.io",
                "other",
                "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass low is already marked as default. Only one default can exist"
            )
        )
    );
    create_class(&sim, class("other", json!(7))).await;
    let merge = Some("application/merge-patch+json");
    let (code, got) = curl(
        &sim,
        "PATCH",
        &format!("{PCS}/other"),
        merge,
        Some(&json!({"globalDefault": true})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        got["message"],
        "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass low is already marked as default. Only one default can exist"
    );
    // The default itself may be updated; once it is no longer the default another may be.
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{PCS}/low"),
        merge,
        Some(&json!({"description": "the default"})),
    )
    .await;
    assert_eq!(code, 200);
    let (code, got) = curl(
        &sim,
        "PATCH",
        &format!("{PCS}/low"),
        merge,
        Some(&json!({"globalDefault": false})),
    )
    .await;
    assert_eq!(code, 200);
    assert!(got.get("globalDefault").is_none(), "{got}");
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{PCS}/other"),
        merge,
        Some(&json!({"globalDefault": true})),
    )
    .await;
    assert_eq!(code, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_get_their_class_priority_and_policy() {
    let (sim, _) = start(small()).await;
    let mut never = class("batch-never", json!(1000));
    never["preemptionPolicy"] = json!("Never");
    create_class(&sim, never).await;

    // No class and no default: 0 and PreemptLowerPriority, owned by nobody.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("plain", json!({}))),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        (&got["spec"]["priority"], &got["spec"]["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
    assert!(got["spec"].get("priorityClassName").is_none());
    let owned = got["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"].clone();
    assert!(
        owned.get("f:priority").is_none() && owned.get("f:preemptionPolicy").is_none(),
        "{owned}"
    );

    // A class: its value and policy; a built-in class in any namespace.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with(
            "batch",
            json!({"priorityClassName": "batch-never"}),
        )),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        (
            &got["spec"]["priorityClassName"],
            &got["spec"]["priority"],
            &got["spec"]["preemptionPolicy"]
        ),
        (&json!("batch-never"), &json!(1000), &json!("Never"))
    );
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with(
            "critical",
            json!({"priorityClassName": "system-node-critical", "priority": 2_000_001_000,
                   "preemptionPolicy": "PreemptLowerPriority"}),
        )),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(got["spec"]["priority"], 2_000_001_000);

    // Refusals: an unknown class (named by generateName before a name is generated), a
    // priority or a policy of the pod's own that differs from the class's.
    let mut unnamed = pod_with("x", json!({"priorityClassName": "gold"}));
    unnamed["metadata"] = json!({"generateName": "worker-"});
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&unnamed)).await;
    assert_eq!(
        (code, got),
        (
            403,
            forbidden(
                "pods",
                "",
                "worker-",
                "pods \"worker-\" is forbidden: no PriorityClass with name gold was found"
            )
        )
    );
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("high", json!({"priority": 10}))),
    )
    .await;
    assert_eq!(
        (code, got),
        (
            403,
            forbidden(
                "pods",
                "",
                "high",
                "pods \"high\" is forbidden: the integer value of priority (10) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
            )
        )
    );
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with(
            "eager",
            json!({"priorityClassName": "batch-never", "preemptionPolicy": "PreemptLowerPriority"}),
        )),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        got["message"],
        "pods \"eager\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
    );
    // Admission comes before validation: an invalid pod naming an unknown class is a 403.
    let mut invalid = pod_with("invalid", json!({"priorityClassName": "gold"}));
    invalid["spec"]["containers"][0]["image"] = json!("");
    let (code, _) = curl(&sim, "POST", PODS, None, Some(&invalid)).await;
    assert_eq!(code, 403);
    for name in ["worker-", "high", "eager", "invalid"] {
        assert!(sim.get("v1", "pods", "default", name).is_err());
    }

    // A replace that leaves the priority and policy out keeps them (the plugin's update half).
    let mut stored = sim.get("v1", "pods", "default", "batch").unwrap();
    let spec = stored["spec"].as_object_mut().unwrap();
    spec.remove("priority");
    spec.remove("preemptionPolicy");
    spec.insert("activeDeadlineSeconds".into(), json!(60));
    let (code, got) = curl(&sim, "PUT", &format!("{PODS}/batch"), None, Some(&stored)).await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        (&got["spec"]["priority"], &got["spec"]["preemptionPolicy"]),
        (&json!(1000), &json!("Never"))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_without_a_class_get_the_global_default() {
    let (sim, _) = start(small()).await;
    for (name, value) in [("mid", 50), ("lowest", -3)] {
        let mut c = class(name, json!(value));
        c["preemptionPolicy"] = json!("Never");
        create_class(&sim, c).await;
    }
    let (code, _) = curl(
        &sim,
        "PATCH",
        &format!("{PCS}/mid"),
        Some("application/merge-patch+json"),
        Some(&json!({"globalDefault": true})),
    )
    .await;
    assert_eq!(code, 200);
    // The pod is given the default's name too (not owned by its creator).
    let (code, got) = curl(&sim, "POST", PODS, None, Some(&pod_with("p", json!({})))).await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        (
            &got["spec"]["priorityClassName"],
            &got["spec"]["priority"],
            &got["spec"]["preemptionPolicy"]
        ),
        (&json!("mid"), &json!(50), &json!("Never"))
    );
    assert!(
        got["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            .get("f:priorityClassName")
            .is_none()
    );
    // A pod naming another class still gets that one.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("q", json!({"priorityClassName": "lowest"}))),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(got["spec"]["priority"], -3);
    // An explicit priority must now match the default's.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("r", json!({"priority": 0}))),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        got["message"],
        "pods \"r\" is forbidden: the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 50 from the given PriorityClass name"
    );
    sim.shutdown().await;
}

/// As kube-scheduler's integration harness runs its API server (scheduler_perf's
/// `pod-high-priority.yaml` sets `priority: 10` and names no class).
#[tokio::test]
async fn priority_admission_disabled() {
    let (sim, _) = start(SimConfig {
        disable_admission_plugins: vec![
            "ServiceAccount".into(),
            "TaintNodesByCondition".into(),
            "Priority".into(),
        ],
        ..small()
    })
    .await;
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("high", json!({"priority": 10}))),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(got["spec"]["priority"], 10);
    assert!(got["spec"].get("preemptionPolicy").is_none(), "{got}");
    // Nothing is added to a pod that carries nothing, and no class is looked up.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("plain", json!({}))),
    )
    .await;
    assert_eq!(code, 201);
    assert!(got["spec"].get("priority").is_none(), "{got}");
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("classy", json!({"priorityClassName": "gold"}))),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert!(got["spec"].get("priority").is_none());
    // Pod validation still applies to the fields.
    let (code, got) = curl(
        &sim,
        "POST",
        PODS,
        None,
        Some(&pod_with("odd", json!({"preemptionPolicy": "Sometimes"}))),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "Pod \"odd\" is invalid: spec.preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""
    );
    // A replace that leaves the priority out would change it: the update half is off too.
    let mut stored = sim.get("v1", "pods", "default", "high").unwrap();
    stored["spec"].as_object_mut().unwrap().remove("priority");
    let (code, _) = curl(&sim, "PUT", &format!("{PODS}/high"), None, Some(&stored)).await;
    assert_eq!(code, 422);
    // The registry's validation stays; the plugin's one-default rule is off.
    for name in ["a", "b"] {
        let mut c = class(name, json!(1));
        c["globalDefault"] = json!(true);
        create_class(&sim, c).await;
    }
    let (code, _) = curl(
        &sim,
        "POST",
        PCS,
        None,
        Some(&class("huge", json!(2_000_000_000))),
    )
    .await;
    assert_eq!(code, 422);
    sim.shutdown().await;

    let err = Sim::start(SimConfig {
        disable_admission_plugins: vec!["Priority".into(), "PriorityClasses".into()],
        ..small()
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "disable-admission-plugins plugin \"PriorityClasses\" is unknown"
    );
}

#[tokio::test]
async fn binary_disable_admission_plugins_flag() {
    let run = |plugins: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kube-sim"))
            .args([
                "--port",
                "0",
                "--nodes",
                "0",
                "--disable-admission-plugins",
                plugins,
            ])
            .output()
            .expect("binary runs")
    };
    let out = tokio::task::spawn_blocking(move || run("ServiceAccount,Bogus"))
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("disable-admission-plugins plugin \"Bogus\" is unknown"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_and_applies_priority_classes() {
    let sim = Sim::start(small()).await.unwrap();
    let k = Kubectl::new(&sim, "priority");
    let (ok, out, err) = k
        .run(vec![
            "create",
            "priorityclass",
            "batch",
            "--value=1000",
            "--description=batch jobs",
            "--preemption-policy=Never",
        ])
        .await;
    assert!(
        ok && out.contains("priorityclass.scheduling.k8s.io/batch created"),
        "{out} {err}"
    );
    let pc = sim
        .get("scheduling.k8s.io/v1", "priorityclasses", "", "batch")
        .unwrap();
    assert_eq!(
        (&pc["value"], &pc["preemptionPolicy"], &pc["description"]),
        (&json!(1000), &json!("Never"), &json!("batch jobs"))
    );
    assert_eq!(
        pc["metadata"]["managedFields"][0]["manager"],
        "kubectl-create"
    );
    let (ok, out, err) = k
        .run(vec![
            "create",
            "priorityclass",
            "over",
            "--value=2000000000",
        ])
        .await;
    assert!(!ok, "{out}");
    assert!(
        err.contains(
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        ),
        "{err}"
    );

    let manifest = k.dir.join("pc.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: applied\nvalue: 42\nglobalDefault: true\ndescription: from a file\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", m]).await;
    assert!(
        ok && out.contains("priorityclass.scheduling.k8s.io/applied created"),
        "{out} {err}"
    );
    let (ok, out, err) = k.run(vec!["get", "pc"]).await;
    assert!(ok, "{err}");
    for name in [
        "applied",
        "batch",
        "system-cluster-critical",
        "system-node-critical",
    ] {
        assert!(out.contains(name), "{out}");
    }
    let (ok, out, err) = k
        .run(vec![
            "get",
            "priorityclass",
            "applied",
            "-o",
            "jsonpath={.value}",
        ])
        .await;
    assert!(ok && out == "42", "{out} {err}");
    // Pods created through kubectl get the default.
    let pod = k.dir.join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: by-kubectl\nspec:\n  schedulerName: s\n  containers:\n  - name: c\n    image: i\n",
    )
    .unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", pod.to_str().unwrap()]).await;
    assert!(ok, "{out} {err}");
    let p = sim.get("v1", "pods", "default", "by-kubectl").unwrap();
    assert_eq!(
        (&p["spec"]["priorityClassName"], &p["spec"]["priority"]),
        (&json!("applied"), &json!(42))
    );
    let (ok, _, err) = k.run(vec!["delete", "pc", "system-cluster-critical"]).await;
    assert!(!ok);
    assert!(
        err.contains("this is a system priority class and cannot be deleted"),
        "{err}"
    );
    let (ok, out, err) = k.run(vec!["delete", "pc", "batch"]).await;
    assert!(
        ok && out.contains("priorityclass.scheduling.k8s.io \"batch\" deleted"),
        "{out} {err}"
    );
    sim.shutdown().await;
}
