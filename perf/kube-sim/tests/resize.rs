//! `pods/<name>/resize` (in-place pod vertical scaling) through the `kube` client and kubectl:
//! PATCH (strategic, merge, JSON patch) and PUT change only the containers' resources, bump the
//! resourceVersion and generation and reach watchers as `MODIFIED`; the real server's refusals
//! (422 with its messages, 404 for a missing pod, 405 for other verbs); the request and write
//! records, managedFields with subresource `resize`, and discovery listing `pods/resize`.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_sim::Sim;
use serde_json::{Value, json};

/// A pod with one container `c` and the given resources (and optionally init containers).
fn pod_with(name: &str, resources: Value, init: Option<Value>) -> Pod {
    let mut p = json!({"metadata": {"name": name, "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "sandbox", "resources": resources}]}});
    if let Some(i) = init {
        p["spec"]["initContainers"] = i;
    }
    serde_json::from_value(p).unwrap()
}

fn resources(pod: &Pod) -> Value {
    serde_json::to_value(&pod.spec.as_ref().unwrap().containers[0].resources).unwrap()
}

fn burstable() -> Value {
    json!({"requests": {"cpu": "100m", "memory": "128Mi"}})
}

async fn create(pods: &Api<Pod>, p: Pod) -> Pod {
    pods.create(&PostParams::default(), &p).await.unwrap()
}

fn cpu_patch(cpu: &str) -> Patch<Value> {
    Patch::Strategic(
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
    )
}

#[tokio::test]
async fn patch_changes_only_resources_and_is_watched() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let before = create(&pods, pod_with("p", burstable(), None)).await;
    assert_eq!(before.metadata.generation, Some(1));
    let rv0 = before.metadata.resource_version.clone().unwrap();
    let mut stream = pods
        .watch(&WatchParams::default().timeout(5), &rv0)
        .await
        .unwrap()
        .boxed();

    // Everything but the container's resources is dropped: the label, the image, the status.
    let patch = json!({"metadata": {"labels": {"app": "b"}},
        "spec": {"containers": [{"name": "c", "image": "other",
                                 "resources": {"requests": {"cpu": "200m"}}}]},
        "status": {"phase": "Running"}});
    let after = pods
        .patch_resize(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(patch.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        resources(&after),
        json!({"requests": {"cpu": "200m", "memory": "128Mi"}})
    );
    let spec = after.spec.as_ref().unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("sandbox"));
    assert_eq!(after.metadata.labels.as_ref().unwrap()["app"], "a");
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    let rv1 = after.metadata.resource_version.clone().unwrap();
    assert!(rv1.parse::<u64>().unwrap() > rv0.parse::<u64>().unwrap());
    assert_eq!(after.metadata.generation, Some(2));
    // The pod as stored, and as GET on the subresource answers it.
    assert_eq!(pods.get("p").await.unwrap(), after);
    assert_eq!(pods.get_resize("p").await.unwrap(), after);

    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Modified(p)) => {
            assert_eq!(p.metadata.resource_version.as_deref(), Some(rv1.as_str()));
            assert_eq!(resources(&p)["requests"]["cpu"], "200m");
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    // The resize manager owns the cpu request now; the creator keeps the rest.
    let mf = after.metadata.managed_fields.as_ref().unwrap();
    let resize = mf
        .iter()
        .find(|e| e.subresource.as_deref() == Some("resize"))
        .expect("a resize entry");
    assert_eq!(resize.operation.as_deref(), Some("Update"));
    assert_eq!(
        serde_json::to_value(resize.fields_v1.as_ref().unwrap()).unwrap(),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:resources": {"f:requests": {"f:cpu": {}}}}}}})
    );
    let creator = mf.iter().find(|e| e.subresource.is_none()).unwrap();
    let owned = serde_json::to_string(creator.fields_v1.as_ref().unwrap()).unwrap();
    assert!(
        owned.contains("f:memory") && !owned.contains("f:cpu"),
        "{owned}"
    );

    // The same resize again is a no-op: no write, no new version.
    let again = pods
        .patch_resize("p", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version.as_deref(),
        Some(rv1.as_str())
    );

    // Merge patch (the container list is replaced: only resources are taken from it) and JSON
    // patch.
    let merged = pods
        .patch_resize(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}}}]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        resources(&merged),
        json!({"requests": {"cpu": "300m", "memory": "256Mi"}})
    );
    assert_eq!(
        merged.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("sandbox")
    );
    let (code, jp) = raw(
        &sim,
        "PATCH",
        RESIZE_P,
        json!([
            {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "400m"},
            {"op": "replace", "path": "/spec/schedulerName", "value": "other"}]),
    )
    .await;
    assert_eq!(code, 200, "{jp}");
    assert_eq!(
        jp["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "400m"
    );
    assert_eq!(jp["spec"]["schedulerName"], "default-scheduler");
    assert_eq!(jp["metadata"]["generation"], 4);
    sim.shutdown().await;
}

#[tokio::test]
async fn put_changes_only_resources() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let before = create(&pods, pod_with("p", burstable(), None)).await;
    let mut body = before.clone();
    {
        let spec = body.spec.as_mut().unwrap();
        let c = &mut spec.containers[0];
        c.image = Some("other".into());
        let mut r = serde_json::to_value(&c.resources).unwrap();
        r["requests"]["memory"] = json!("256Mi");
        c.resources = Some(serde_json::from_value(r).unwrap());
        spec.active_deadline_seconds = Some(10);
    }
    body.metadata
        .annotations
        .get_or_insert_default()
        .insert("x".into(), "y".into());
    let after = pods
        .replace_resize("p", &PostParams::default(), &body)
        .await
        .unwrap();
    assert_eq!(
        resources(&after),
        json!({"requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    let spec = after.spec.as_ref().unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("sandbox"));
    assert_eq!(spec.active_deadline_seconds, None);
    assert_eq!(after.metadata.annotations, None);
    assert_ne!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    // A stale resourceVersion in the body is a conflict, as for any update.
    let (code, reason, _) = api_code(
        pods.replace_resize("p", &PostParams::default(), &body)
            .await,
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    sim.shutdown().await;
}

/// The message of a resize patch the server refuses with 422.
async fn refused(pods: &Api<Pod>, name: &str, patch: Patch<Value>) -> String {
    let (code, reason, message) = api_code(
        pods.patch_resize(name, &PatchParams::default(), &patch)
            .await,
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{message}");
    message
}

fn resources_patch(r: Value) -> Patch<Value> {
    Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "resources": r}]}}))
}

#[tokio::test]
async fn validation_errors_are_the_real_ones() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, pod_with("b", burstable(), None)).await;
    let guaranteed = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
    create(&pods, pod_with("g", guaranteed, None)).await;
    let rv = sim.resource_version();

    assert_eq!(
        refused(
            &pods,
            "b",
            resources_patch(json!({"requests": {"ephemeral-storage": "1Gi"}}))
        )
        .await,
        "Pod \"b\" is invalid: spec: Forbidden: only cpu and memory resources are mutable"
    );
    assert_eq!(
        refused(&pods, "g", cpu_patch("500m")).await,
        "Pod \"g\" is invalid: spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
    );
    assert_eq!(
        refused(&pods, "b", cpu_patch("-1")).await,
        "Pod \"b\" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
    );
    assert_eq!(
        refused(
            &pods,
            "b",
            resources_patch(json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}))
        )
        .await,
        "Pod \"b\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
    );
    assert_eq!(
        refused(
            &pods,
            "b",
            resources_patch(json!({"requests": {"memory": null}}))
        )
        .await,
        "Pod \"b\" is invalid: spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed"
    );
    assert_eq!(
        refused(
            &pods,
            "g",
            resources_patch(
                json!({"requests": {"memory": "512Mi"}, "limits": {"memory": "512Mi"}})
            )
        )
        .await,
        "Pod \"g\" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
    );
    let (code, status) = raw(
        &sim,
        "PATCH",
        "/api/v1/namespaces/default/pods/b/resize",
        json!([{"op": "replace", "path": "/spec/containers/0/name", "value": "d"}]),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "Pod \"b\" is invalid: spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
    );
    // A quantity that does not decode is a 400, before validation.
    let (code, _, message) = api_code(
        pods.patch_resize("b", &PatchParams::default(), &cpu_patch("lots"))
            .await,
    );
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("quantities must match"), "{message}");

    // Nothing refused was written.
    assert_eq!(sim.resource_version(), rv);

    // Init containers: a sidecar (restartPolicy Always) resizes, another init container does not.
    let init = json!([
        {"name": "once", "image": "sandbox", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "side", "image": "sandbox", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "100m"}}}]);
    create(&pods, pod_with("i", burstable(), Some(init))).await;
    let init_patch = |n: &str| {
        Patch::Strategic(json!({"spec": {"initContainers": [
            {"name": n, "resources": {"requests": {"cpu": "200m"}}}]}}))
    };
    assert_eq!(
        refused(&pods, "i", init_patch("once")).await,
        "Pod \"i\" is invalid: spec: Forbidden: resources for non-sidecar init containers are immutable"
    );
    let p = pods
        .patch_resize("i", &PatchParams::default(), &init_patch("side"))
        .await
        .unwrap();
    let side = &p.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[1];
    assert_eq!(
        serde_json::to_value(&side.resources).unwrap()["requests"]["cpu"],
        "200m"
    );

    sim.shutdown().await;
}

#[tokio::test]
async fn missing_pods_other_verbs_records_and_discovery() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (code, reason, message) = api_code(
        pods.patch_resize("nope", &PatchParams::default(), &cpu_patch("1"))
            .await,
    );
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (404, "NotFound", "pods \"nope\" not found")
    );
    assert_eq!(api_code(pods.get_resize("nope").await).0, 404);

    // An unscheduled pod resizes (the real server checks only the kubelet's support, and a
    // pod without running containers is assumed to be on a node that has it); so does one the
    // simulated kubelet runs, since it reports the containers' resources.
    create(&pods, pod_with("p", burstable(), None)).await;
    sim.clear_records();
    pods.patch_resize("p", &PatchParams::default(), &cpu_patch("150m"))
        .await
        .unwrap();
    let recs: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.resource == "pods")
        .map(|r| (r.verb, r.subresource, r.name, r.write, r.code))
        .collect();
    assert_eq!(
        recs,
        vec![("patch", "resize".to_string(), "p".to_string(), true, 200)]
    );
    let writes: Vec<_> = sim
        .writes()
        .into_iter()
        .map(|w| (w.verb, w.resource, w.name, w.code))
        .collect();
    assert_eq!(
        writes,
        vec![("patch", "pods/resize".to_string(), "p".to_string(), 200)]
    );

    // Only get, update and patch are served.
    let (code, _) = raw(
        &sim,
        "DELETE",
        "/api/v1/namespaces/default/pods/p/resize",
        Value::Null,
    )
    .await;
    assert_eq!(code, 405);
    assert!(pods.get("p").await.is_ok());

    let (_, list) = raw(&sim, "GET", "/api/v1", Value::Null).await;
    let resize = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/resize")
        .expect("pods/resize is discoverable");
    assert_eq!(resize["verbs"], json!(["get", "patch", "update"]));
    assert_eq!(resize["kind"], "Pod");
    sim.shutdown().await;
}

const RESIZE_P: &str = "/api/v1/namespaces/default/pods/p/resize";

/// One plain HTTP/1.1 request (a JSON patch when `body` is an array): the status code and the
/// decoded JSON body.
async fn raw(sim: &kube_sim::SimHandle, method: &str, path: &str, body: Value) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: kube-sim\r\nConnection: close\r\n\
         Content-Type: application/json-patch+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.split(' ').nth(1).unwrap().parse().unwrap();
    let (_, payload) = out.split_once("\r\n\r\n").unwrap();
    (code, serde_json::from_str(payload).unwrap_or(Value::Null))
}

#[tokio::test]
async fn running_pods_resize_and_the_kubelet_actuates_it() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, pod_with("p", burstable(), None)).await;
    bind(&pods, "p", "node-00000").await.unwrap();
    eventually(|| async {
        let p = pods.get("p").await.unwrap();
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    let p = pods
        .patch_resize("p", &PatchParams::default(), &cpu_patch("250m"))
        .await
        .unwrap();
    assert_eq!(resources(&p)["requests"]["cpu"], "250m");
    // The response is the resize itself; the simulated kubelet then actuates it in a status
    // write of its own, as a kubelet with room does: the container reports the new resources.
    let actuated = |p: &Pod| {
        p.status.as_ref()?.container_statuses.as_ref()?[0]
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("cpu")
            .map(|q| q.0.clone())
    };
    let before = p.metadata.resource_version.clone();
    eventually(|| async {
        let p = pods.get("p").await.unwrap();
        (actuated(&p).as_deref() == Some("250m") && p.metadata.resource_version != before)
            .then_some(())
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_subresource_resize() {
    let sim = Sim::start(small()).await.unwrap();
    sim.create_pod("default", "web", "default-scheduler", "100m", "128Mi")
        .unwrap();
    let k = Kubectl::new(&sim, "resize");
    let (ok, out, err) = k
        .run(vec![
            "patch",
            "pod",
            "web",
            "--subresource",
            "resize",
            "--patch",
            r#"{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"200m"}}}]}}"#,
        ])
        .await;
    assert!(ok && out.contains("pod/web patched"), "{out} {err}");
    let p = sim.get("v1", "pods", "default", "web").unwrap();
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "200m", "memory": "128Mi"})
    );
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.verb == "patch" && r.subresource == "resize" && r.code == 200),
        "{:?}",
        sim.requests()
    );
    // kubectl shows the server's refusal.
    let (ok, _, err) = k
        .run(vec![
            "patch",
            "pod",
            "web",
            "--subresource",
            "resize",
            "--patch",
            r#"{"spec":{"containers":[{"name":"main","resources":{"requests":{"ephemeral-storage":"1Gi"}}}]}}"#,
        ])
        .await;
    assert!(
        !ok && err.contains("only cpu and memory resources are mutable"),
        "{err}"
    );
    sim.shutdown().await;
}
