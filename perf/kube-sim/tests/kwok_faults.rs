//! KWOK-like pod lifecycle (Running after binding, Succeeded and deleted after a lifetime) and
//! fault injection (500 / 429 with Retry-After, latency, the `/sim/faults` admin endpoint).

use crate::common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube_sim::{ErrorRule, Faults, LIFETIME_ANNOTATION, SimConfig};
use std::time::Duration;

#[tokio::test]
async fn bound_pods_run_then_finish_and_disappear() {
    let cfg = SimConfig {
        pod_lifetime: Some(Duration::from_millis(300)),
        ..small()
    };
    let (sim, client) = start(cfg).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("short", "magma"))
        .await
        .unwrap();
    let mut forever = pod("long", "magma");
    forever.metadata.annotations =
        Some([(LIFETIME_ANNOTATION.to_string(), "3600000".to_string())].into());
    pods.create(&PostParams::default(), &forever).await.unwrap();
    bind(&pods, "short", "node-00002").await.unwrap();
    bind(&pods, "long", "node-00002").await.unwrap();

    let running = eventually(|| {
        let pods = pods.clone();
        async move {
            let p = pods.get("short").await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
        }
    })
    .await;
    let st = running.status.unwrap();
    assert!(st.pod_ip.is_some());
    assert!(st.host_ip.as_deref().unwrap().starts_with("10."));
    assert!(
        st.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    eventually(|| {
        let pods = pods.clone();
        async move {
            matches!(pods.get("short").await, Err(kube::Error::Api(s)) if s.code == 404)
                .then_some(())
        }
    })
    .await;
    let long = pods.get("long").await.unwrap();
    assert_eq!(long.status.unwrap().phase.as_deref(), Some("Running"));
    // The simulator's own transitions are not client writes.
    let writes = sim.writes();
    assert_eq!(
        writes.iter().filter(|w| w.verb != "create").count(),
        0,
        "{writes:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn pre_bound_pods_and_disabled_lifecycle() {
    let (sim, client) = start(SimConfig {
        running_delay: Some(Duration::from_millis(50)),
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("direct", "magma");
    p.spec.as_mut().unwrap().node_name = Some("node-00000".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    eventually(|| {
        let pods = pods.clone();
        async move { (pods.get("direct").await.ok()?.status?.phase? == "Running").then_some(()) }
    })
    .await;
    sim.shutdown().await;

    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("stays", "magma"))
        .await
        .unwrap();
    bind(&pods, "stays", "node-00000").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        pods.get("stays")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn injected_errors_and_latency() {
    let (sim, _) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    // Without kube's built-in retry of 429s (it honours Retry-After, up to 15 attempts).
    let client = client(&sim, false).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", "magma"))
        .await
        .unwrap();

    let mut rule = ErrorRule::parse("create:pods/binding=1:429").unwrap();
    rule.retry_after_secs = 7;
    sim.faults().set(Faults {
        errors: vec![rule, ErrorRule::new("list", 1.0)],
        ..Faults::default()
    });
    let (code, reason, _) = api_code(bind(&pods, "p", "node-00000").await);
    assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));
    let (code, reason, msg) = api_code(pods.list(&ListParams::default()).await);
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (
            500,
            "InternalError",
            "Internal error occurred: injected fault"
        )
    );
    pods.get("p").await.unwrap();
    // Retry-After is on the raw response.
    let req = http::Request::post("/api/v1/namespaces/default/pods/p/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding("p", "node-00000", None)).unwrap())
        .unwrap();
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    assert!(sim.bindings().is_empty());

    // The admin endpoint replaces the faults: latency only.
    let body = serde_json::to_vec(&serde_json::json!({"latencyMs": 150})).unwrap();
    let req = http::Request::post("/sim/faults")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let got: Faults = client.request(req).await.unwrap();
    assert_eq!(got.latency_ms, 150);
    assert!(got.errors.is_empty());
    let t0 = tokio::time::Instant::now();
    bind(&pods, "p", "node-00000").await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(150));
    sim.faults().clear();
    let codes: Vec<u16> = sim
        .writes()
        .iter()
        .filter(|w| w.resource == "pods/binding")
        .map(|w| w.code)
        .collect();
    assert_eq!(codes, [429, 429, 201]);
    assert_eq!(sim.bindings().len(), 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn direct_helpers() {
    let (sim, _client) = start(small()).await;
    sim.create_node("extra").unwrap();
    assert_eq!(sim.list("v1", "nodes", None).unwrap().len(), 4);
    sim.create_pod("default", "p", "magma", "1", "1Gi").unwrap();
    let p = sim.get("v1", "pods", "default", "p").unwrap();
    assert_eq!(p["spec"]["schedulerName"], "magma");
    assert_eq!(
        sim.delete("v1", "pods", "default", "p").unwrap()["metadata"]["name"],
        "p"
    );
    assert_eq!(sim.get("v1", "pods", "default", "p").unwrap_err().code, 404);
    assert!(sim.resource_version() > 1);
    sim.shutdown().await;
}
