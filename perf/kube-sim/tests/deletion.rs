//! Graceful deletion of pods as the real server does it (`CheckGracefulDelete`, `BeforeDelete`,
//! the generic store's update-then-delete) and the simulated kubelet finishing terminating pods:
//! a bound pod gets `deletionTimestamp` and `deletionGracePeriodSeconds` and stays until the
//! kubelet reports it terminated and deletes it with grace period 0; shorter grace periods
//! shorten, 0 deletes at once; unbound and finished pods go in the request; finalizers hold a
//! deleted pod until an update removes them; status patches keep working on terminating pods;
//! `kubectl delete pod` waits for the pod to go and ends.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_sim::{SimConfig, SimHandle};
use serde_json::{Value, json};
use std::time::Duration;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn cfg(termination_delay: Option<Duration>) -> SimConfig {
    SimConfig {
        termination_delay,
        ..small()
    }
}

/// A pod created bound to `node-00000` (Running at once), with `finalizers` when given.
async fn bound_pod(sim: &SimHandle, name: &str, finalizers: Option<Value>) -> Value {
    let mut p = kube_sim::pod_object("default", name, "s", "100m", "64Mi");
    p["spec"]["nodeName"] = json!("node-00000");
    if let Some(f) = finalizers {
        p["metadata"]["finalizers"] = f;
    }
    let (code, got) = curl(sim, "POST", PODS, None, Some(&p)).await;
    assert_eq!(code, 201, "{got}");
    let api_pod = got.clone();
    eventually(|| async {
        let p = sim.get("v1", "pods", "default", name).ok()?;
        (p["status"]["phase"] == "Running").then_some(())
    })
    .await;
    api_pod
}

fn ts(v: &Value) -> std::time::SystemTime {
    let s = v.as_str().unwrap();
    // `2026-01-02T03:04:05Z`: compare as seconds since the epoch.
    let days = |y: i64, m: i64, d: i64| {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + d - 1;
        era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    };
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let secs =
        days(n(0..4), n(5..7), n(8..10)) * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19);
    std::time::UNIX_EPOCH + Duration::from_secs(secs as u64)
}

fn secs_between(a: &Value, b: &Value) -> i64 {
    let (a, b) = (ts(a), ts(b));
    match b.duration_since(a) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

type Events = std::pin::Pin<Box<dyn futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Send>>;

async fn watch_pods(sim: &SimHandle, pods: &Api<Pod>) -> Events {
    pods.watch(
        &WatchParams::default().timeout(10),
        &sim.resource_version().to_string(),
    )
    .await
    .unwrap()
    .boxed()
}

/// The next event (bookmarks skipped) as (type, pod as JSON).
async fn next(events: &mut Events) -> (&'static str, Value) {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("an event within 5 s")
            .unwrap()
            .expect("the watch is open");
        return match ev {
            WatchEvent::Added(p) => ("ADDED", serde_json::to_value(p).unwrap()),
            WatchEvent::Modified(p) => ("MODIFIED", serde_json::to_value(p).unwrap()),
            WatchEvent::Deleted(p) => ("DELETED", serde_json::to_value(p).unwrap()),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        };
    }
}

/// A DELETE of a Running pod: 200 with the pod marked (grace 30 from its spec, timestamp 30 s
/// ahead, generation bumped); the pod stays while the kubelet terminates it; the watch sees the
/// mark, the kubelet's terminal status, the grace-0 update of its delete, and the deletion.
#[tokio::test]
async fn a_running_pod_is_deleted_gracefully_and_finished_by_the_kubelet() {
    let (sim, client) = start(cfg(Some(Duration::from_millis(300)))).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    bound_pod(&sim, "web", None).await;
    let mut events = watch_pods(&sim, &pods).await;
    let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/web"), None, None).await;
    assert_eq!(code, 200, "{got}");
    let m = &got["metadata"];
    assert_eq!(m["deletionGracePeriodSeconds"], 30);
    assert_eq!(m["generation"], 2);
    let ahead = ts(&m["deletionTimestamp"])
        .duration_since(std::time::SystemTime::now())
        .unwrap()
        .as_secs();
    assert!((28..=30).contains(&ahead), "{ahead}");
    assert_eq!(got["status"]["phase"], "Running");
    // Still there, terminating.
    let now = sim.get("v1", "pods", "default", "web").unwrap();
    assert_eq!(now["metadata"]["deletionTimestamp"], m["deletionTimestamp"]);

    let (t, p) = next(&mut events).await;
    assert_eq!(
        (t, &p["metadata"]["deletionGracePeriodSeconds"]),
        ("MODIFIED", &json!(30))
    );
    let (t, p) = next(&mut events).await;
    assert_eq!(t, "MODIFIED");
    assert_eq!(
        p["status"]["phase"], "Succeeded",
        "the kubelet's terminal status"
    );
    let state = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (&state["exitCode"], &state["reason"]),
        (&json!(0), &json!("Completed"))
    );
    let ready = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("PodCompleted"))
    );
    let (t, p) = next(&mut events).await;
    assert_eq!(
        (t, &p["metadata"]["deletionGracePeriodSeconds"]),
        ("MODIFIED", &json!(0))
    );
    let (t, p) = next(&mut events).await;
    assert_eq!(
        (t, p["metadata"]["name"].as_str()),
        ("DELETED", Some("web"))
    );
    assert_eq!(
        sim.get("v1", "pods", "default", "web").unwrap_err().code,
        404
    );
    sim.shutdown().await;
}

/// Without a kubelet finishing it, a terminating pod keeps its mark; a longer or equal grace
/// period changes nothing, a shorter one moves the timestamp back, 0 deletes it at once. The
/// grace period comes from the request (body or query), else the pod's spec.
#[tokio::test]
async fn shorter_grace_periods_shorten_and_zero_deletes_at_once() {
    let (sim, _client) = start(cfg(None)).await;
    let mut p = kube_sim::pod_object("default", "long", "s", "100m", "64Mi");
    p["spec"]["nodeName"] = json!("node-00001");
    p["spec"]["terminationGracePeriodSeconds"] = json!(120);
    assert_eq!(curl(&sim, "POST", PODS, None, Some(&p)).await.0, 201);
    let url = format!("{PODS}/long");
    let (code, first) = curl(&sim, "DELETE", &url, None, None).await;
    assert_eq!(code, 200);
    assert_eq!(first["metadata"]["deletionGracePeriodSeconds"], 120);
    let dt = first["metadata"]["deletionTimestamp"].clone();
    // Longer or equal: pending, the object as it is (no write).
    for grace in [120, 300] {
        let body =
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace});
        let (code, got) = curl(&sim, "DELETE", &url, None, Some(&body)).await;
        assert_eq!(code, 200);
        assert_eq!(
            got["metadata"]["resourceVersion"],
            first["metadata"]["resourceVersion"]
        );
    }
    // Shorter: 100 s earlier.
    let body = json!({"gracePeriodSeconds": 20});
    let (code, got) = curl(&sim, "DELETE", &url, None, Some(&body)).await;
    assert_eq!(code, 200);
    assert_eq!(got["metadata"]["deletionGracePeriodSeconds"], 20);
    assert_eq!(
        secs_between(&got["metadata"]["deletionTimestamp"], &dt),
        100
    );
    assert_eq!(
        got["metadata"]["generation"], 2,
        "bumped once, when the deletion started"
    );
    // The kubelet never finishes here: still there.
    tokio::task::yield_now().await;
    assert!(sim.get("v1", "pods", "default", "long").is_ok());
    // Grace 0 in the query: gone in this request.
    let (code, got) = curl(
        &sim,
        "DELETE",
        &format!("{url}?gracePeriodSeconds=0"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(got["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(
        sim.get("v1", "pods", "default", "long").unwrap_err().code,
        404
    );
    sim.shutdown().await;
}

/// An unbound pod and a finished one are deleted in the request (grace period 0): the watch
/// sees the update that marks them, then the deletion.
#[tokio::test]
async fn unbound_and_finished_pods_go_at_once() {
    let (sim, client) = start(cfg(None)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("pending", "nobody"))
        .await
        .unwrap();
    bound_pod(&sim, "done", None).await;
    pods.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    let mut events = watch_pods(&sim, &pods).await;
    for name in ["pending", "done"] {
        let body = json!({"gracePeriodSeconds": 30});
        let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/{name}"), None, Some(&body)).await;
        assert_eq!(code, 200, "{got}");
        assert_eq!(got["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(
            sim.get("v1", "pods", "default", name).unwrap_err().code,
            404
        );
        let (t, p) = next(&mut events).await;
        assert_eq!(
            (t, p["metadata"]["name"].as_str()),
            ("MODIFIED", Some(name))
        );
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 0);
        let (t, _) = next(&mut events).await;
        assert_eq!(t, "DELETED");
    }
    sim.shutdown().await;
}

/// Finalizers hold a deleted pod: the kubelet finishes it (terminal phase, grace 0) but it stays
/// until a patch removes the last finalizer, which deletes it; an unbound pod with a finalizer
/// stays marked (and cannot be bound) until then.
#[tokio::test]
async fn finalizers_hold_a_deleted_pod_until_they_are_removed() {
    let (sim, client) = start(cfg(Some(Duration::ZERO))).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    bound_pod(&sim, "held", Some(json!(["example.com/hold"]))).await;
    let (code, _) = curl(&sim, "DELETE", &format!("{PODS}/held"), None, None).await;
    assert_eq!(code, 200);
    let p = eventually(|| async {
        let p = sim.get("v1", "pods", "default", "held").unwrap();
        (p["metadata"]["deletionGracePeriodSeconds"] == 0).then_some(p)
    })
    .await;
    assert_eq!(p["status"]["phase"], "Succeeded");
    let mut events = watch_pods(&sim, &pods).await;
    let (code, got) = curl(
        &sim,
        "PATCH",
        &format!("{PODS}/held"),
        Some("application/merge-patch+json"),
        Some(&json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert!(got["metadata"].get("finalizers").is_none());
    assert_eq!(
        sim.get("v1", "pods", "default", "held").unwrap_err().code,
        404
    );
    let (t, _) = next(&mut events).await;
    assert_eq!(t, "DELETED");

    let mut p = kube_sim::pod_object("default", "unbound", "s", "100m", "64Mi");
    p["metadata"]["finalizers"] = json!(["example.com/a", "example.com/b"]);
    assert_eq!(curl(&sim, "POST", PODS, None, Some(&p)).await.0, 201);
    let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/unbound"), None, None).await;
    assert_eq!(code, 200);
    assert_eq!(got["metadata"]["deletionGracePeriodSeconds"], 0);
    let (code, _, msg) = api_code(bind(&pods, "unbound", "node-00000").await);
    assert_eq!(code, 409);
    assert!(msg.contains("is being deleted"), "{msg}");
    // One finalizer removed: still there; the last: gone.
    let patch = |f: Value| {
        let sim = &sim;
        async move {
            curl(
                sim,
                "PATCH",
                &format!("{PODS}/unbound"),
                Some("application/merge-patch+json"),
                Some(&json!({"metadata": {"finalizers": f}})),
            )
            .await
        }
    };
    assert_eq!(patch(json!(["example.com/b"])).await.0, 200);
    assert!(sim.get("v1", "pods", "default", "unbound").is_ok());
    assert_eq!(patch(json!([])).await.0, 200);
    assert_eq!(
        sim.get("v1", "pods", "default", "unbound")
            .unwrap_err()
            .code,
        404
    );
    sim.shutdown().await;
}

/// A terminating pod takes status patches (a `DisruptionTarget` condition, as a scheduler writes
/// before deleting a victim, and then the deletion) and updates keep its mark.
#[tokio::test]
async fn terminating_pods_take_status_patches_and_keep_their_mark() {
    let (sim, client) = start(cfg(None)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    bound_pod(&sim, "victim", None).await;
    // Set now: an older condition on a pod not yet deleted is stale, and the disruption
    // controller would rightly reset it to False before the DELETE below.
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap();
    let condition = json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
        "reason": "PreemptionByScheduler", "message": "agent-scheduler: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now.to_string()}]}});
    pods.patch_status(
        "victim",
        &PatchParams::default(),
        &Patch::Strategic(condition),
    )
    .await
    .unwrap();
    let (code, marked) = curl(&sim, "DELETE", &format!("{PODS}/victim"), None, None).await;
    assert_eq!(code, 200);
    let p = pods
        .patch_status(
            "victim",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    let conds = p.status.as_ref().unwrap().conditions.as_ref().unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    );
    let p = pods
        .patch(
            "victim",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"},
                "deletionTimestamp": null, "deletionGracePeriodSeconds": null}})),
        )
        .await
        .unwrap();
    let p = serde_json::to_value(p).unwrap();
    assert_eq!(
        p["metadata"]["deletionTimestamp"],
        marked["metadata"]["deletionTimestamp"]
    );
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(p["metadata"]["labels"]["seen"], "yes");
    sim.shutdown().await;
}

/// Preconditions are checked as `BeforeDelete` does (409 naming the kind), and `DeleteOptions`
/// are validated (422).
#[tokio::test]
async fn preconditions_and_delete_options() {
    let (sim, _client) = start(cfg(None)).await;
    let created = bound_pod(&sim, "p", None).await;
    let body = json!({"preconditions": {"uid": "not-the-uid"}});
    let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/p"), None, Some(&body)).await;
    assert_eq!(code, 409);
    assert_eq!(
        got["message"],
        format!(
            "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (not-the-uid) does not match the UID in record ({}). The object might have been deleted and then recreated",
            created["metadata"]["uid"].as_str().unwrap()
        )
    );
    let body = json!({"propagationPolicy": "Sideways"});
    let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/p"), None, Some(&body)).await;
    assert_eq!(code, 422);
    assert_eq!(
        got["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    // The handler validates the options before it looks the object up: a 422 for a pod that
    // does not exist either.
    let (code, got) = curl(
        &sim,
        "DELETE",
        &format!("{PODS}/missing"),
        None,
        Some(&body),
    )
    .await;
    assert_eq!(
        (code, got["reason"].as_str()),
        (422, Some("Invalid")),
        "{got}"
    );
    // orphanDependents: false on an object that stays: 202.
    let body = json!({"orphanDependents": false});
    let (code, got) = curl(&sim, "DELETE", &format!("{PODS}/p"), None, Some(&body)).await;
    assert_eq!(code, 202, "{got}");
    sim.shutdown().await;
}

/// `kubectl delete pod` waits until the pod is gone (the kubelet finishes it) and ends;
/// `--grace-period=0 --force` deletes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_pod_waits_for_the_pod_to_go() {
    let (sim, _client) = start(cfg(Some(Duration::from_millis(300)))).await;
    bound_pod(&sim, "a", None).await;
    bound_pod(&sim, "b", None).await;
    let k = Kubectl::new(&sim, "delete-pod");
    let (ok, out, err) = k.run(vec!["delete", "pod", "a", "--timeout=20s"]).await;
    assert!(ok && out.contains("pod \"a\" deleted"), "{out} {err}");
    assert_eq!(sim.get("v1", "pods", "default", "a").unwrap_err().code, 404);
    let (ok, out, err) = k
        .run(vec!["delete", "pod", "b", "--grace-period=0", "--force"])
        .await;
    assert!(ok && out.contains("deleted"), "{out} {err}");
    assert_eq!(sim.get("v1", "pods", "default", "b").unwrap_err().code, 404);
    sim.shutdown().await;
}
