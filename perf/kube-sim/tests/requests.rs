//! The request record (`SimHandle::requests`, `/sim/requests`): every API request with the verb,
//! group, resource, subresource and namespace RBAC would check, including requests for
//! resources the simulator does not serve.

use crate::common;

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
    // Names and outcomes: the failed get is a 404, reads are not writes.
    let outcome: Vec<_> = sim
        .requests()
        .iter()
        .map(|r| (r.verb, r.name.clone(), r.write, r.code))
        .collect();
    assert_eq!(
        outcome,
        vec![
            ("create", "p".to_string(), true, 201),
            ("get", "p".to_string(), false, 200),
            ("list", String::new(), false, 200),
            ("patch", "p".to_string(), true, 200),
            ("get", "nope".to_string(), false, 404),
            ("delete", "p".to_string(), true, 200),
            ("list", String::new(), false, 404),
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
    assert_eq!(v[4]["code"], 404);
    assert_eq!(v[0]["write"], true);
    sim.clear_records();
    assert!(sim.requests().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn failed_bindings_are_recorded_with_their_code() {
    let (sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p", "agent-scheduler"))
        .await
        .unwrap();
    sim.clear_records();
    common::bind(&pods, "p", "node-00000").await.unwrap();
    assert!(common::bind(&pods, "p", "node-00001").await.is_err());
    assert!(common::bind(&pods, "missing", "node-00001").await.is_err());
    let attempts: Vec<_> = sim
        .requests()
        .iter()
        .filter(|r| r.subresource == "binding")
        .map(|r| (r.verb, r.name.clone(), r.write, r.code))
        .collect();
    assert_eq!(
        attempts,
        vec![
            ("create", "p".to_string(), true, 201),
            ("create", "p".to_string(), true, 409),
            ("create", "missing".to_string(), true, 404),
        ]
    );
    // Only the successful one is a binding.
    assert_eq!(sim.bindings().len(), 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn generated_names_are_recorded() {
    let (sim, client) = start(small()).await;
    sim.clear_records();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut p = pod("", "agent-scheduler");
    p.metadata.name = None;
    p.metadata.generate_name = Some("gen-".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let r = &sim.requests()[0];
    assert_eq!((r.verb, r.code), ("create", 201));
    assert_eq!(Some(&r.name), created.metadata.name.as_ref());
    assert!(r.name.starts_with("gen-"), "{}", r.name);
    sim.shutdown().await;
}
