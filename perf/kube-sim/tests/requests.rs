//! The request record (`SimHandle::requests`, `/sim/requests`): every API request with the verb,
//! group, resource, subresource and namespace RBAC would check, including requests for
//! resources the simulator does not serve.

mod common;

use common::{pod, small, start};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_sim::RequestRecord;
use serde_json::json;

fn key(r: &RequestRecord) -> (String, String, String, String, String) {
    (
        r.verb.to_string(),
        r.group.clone(),
        r.resource.clone(),
        r.subresource.clone(),
        r.namespace.clone(),
    )
}

fn k(v: &str, g: &str, r: &str, s: &str, ns: &str) -> (String, String, String, String, String) {
    (v.into(), g.into(), r.into(), s.into(), ns.into())
}

#[tokio::test]
async fn every_verb_is_recorded_as_rbac_sees_it() {
    let (sim, client) = start(small()).await;
    sim.clear_records();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", "agent-scheduler"))
        .await
        .unwrap();
    pods.get("p").await.unwrap();
    Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending"}})),
    )
    .await
    .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "volcano-system");
    assert!(leases.get("nope").await.is_err());
    pods.delete("p", &Default::default()).await.unwrap();
    // A resource the simulator does not serve is still recorded (404).
    let svc: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "default");
    assert!(svc.list(&ListParams::default()).await.is_err());

    let got: Vec<_> = sim.requests().iter().map(key).collect();
    assert_eq!(
        got,
        vec![
            k("create", "", "pods", "", "default"),
            k("get", "", "pods", "", "default"),
            k("list", "", "pods", "", ""),
            k("patch", "", "pods", "status", "default"),
            k("get", "coordination.k8s.io", "leases", "", "volcano-system"),
            k("delete", "", "pods", "", "default"),
            k("list", "", "services", "", "default"),
        ]
    );
    // kube-rs sends no User-Agent; kubectl does (tests use it to tell the two apart).
    assert!(sim.requests().iter().all(|r| r.user_agent.is_empty()));

    // The same over HTTP.
    let req = http::Request::get("/sim/requests").body(vec![]).unwrap();
    let v: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(v.as_array().unwrap().len(), 7);
    assert_eq!(v[3]["subresource"], "status");
    assert_eq!(v[4]["group"], "coordination.k8s.io");
    sim.clear_records();
    assert!(sim.requests().is_empty());
    sim.shutdown().await;
}
