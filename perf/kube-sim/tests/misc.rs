//! Events (core and `events.k8s.io`), namespace deletion, and the `/sim/*` admin endpoints.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test]
async fn events_in_both_apis() {
    let (sim, client) = start(small()).await;
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "p1."},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reason": "FailedScheduling", "type": "Warning", "action": "Scheduling",
        "reportingController": "magma", "reportingInstance": "magma-0",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p1"},
        "note": "0/3 nodes are available"}))
    .unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let created = events.create(&PostParams::default(), &ev).await.unwrap();
    assert!(created.metadata.name.unwrap().starts_with("p1."));
    let by_reason = events
        .list(&ListParams::default().fields("reason=FailedScheduling"))
        .await
        .unwrap();
    assert_eq!(by_reason.items.len(), 1);

    let core: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "p1.1"}, "reason": "Scheduled", "type": "Normal", "message": "ok",
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"}}))
    .unwrap();
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    core_api
        .create(&PostParams::default(), &core)
        .await
        .unwrap();
    let l = core_api
        .list(&ListParams::default().fields("involvedObject.name=p1"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects() {
    let (sim, client) = start(small()).await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    let created = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(cms.get("c").await).0, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn admin_endpoints() {
    let (sim, client) = start(small()).await;
    let req = http::Request::post("/sim/faults/expire-watches")
        .header("content-type", "application/json")
        .body(br#"{"count": 1}"#.to_vec())
        .unwrap();
    client.request_text(req).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = sim.resource_version().to_string();
    let mut s = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match s.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("{other:?}"),
    }
    // Only one watch was expired.
    let mut s = cms
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(s.try_next().await.unwrap().is_none());

    sim.create_pod("default", "p", "magma", "1", "1Gi").unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    bind(&pods, "p", "node-00000").await.unwrap();
    let req = http::Request::get("/sim/bindings").body(vec![]).unwrap();
    let b: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(b[0]["name"], "p");
    assert_eq!(b[0]["node"], "node-00000");
    let req = http::Request::get("/sim/writes").body(vec![]).unwrap();
    let w: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(w[0]["resource"], "pods/binding");
    assert_eq!(w[0]["code"], 201);
    sim.shutdown().await;
}
