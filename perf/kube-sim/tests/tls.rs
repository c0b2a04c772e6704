//! HTTPS mode ([`SimConfig::tls`]): the real `kube` client lists and creates over TLS verifying
//! the self-signed CA from the kubeconfig; a client without the CA and a plain-HTTP client are
//! rejected; accepted connections and handshakes are counted in `/sim/stats`.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube_sim::SimConfig;
use std::time::Duration;

use crate::common;
use common::*;

fn tls() -> SimConfig {
    SimConfig {
        tls: true,
        ..small()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_client_lists_and_creates_over_https_with_the_ca() {
    let (sim, client) = start(tls()).await;
    assert!(sim.url().starts_with("https://127.0.0.1:"), "{}", sim.url());
    let ca = sim.ca_pem().expect("a CA in TLS mode");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(
        sim.kubeconfig_yaml()
            .contains("certificate-authority-data: "),
        "{}",
        sim.kubeconfig_yaml()
    );
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &pod("p", "s"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    // Sequential requests reuse the client's connection: one handshake, not one per request.
    for _ in 0..20 {
        pods.get("p").await.unwrap();
    }
    let s = sim.stats();
    assert!(s.tls_handshakes >= 1, "{s:?}");
    assert!(
        s.connections_accepted <= 2 && s.tls_handshakes <= 2,
        "a kept-alive connection: {s:?}"
    );
    assert_eq!(s.tls_handshake_failures, 0, "{s:?}");
    let via_http: serde_json::Value = pods
        .into_client()
        .request(http::Request::get("/sim/stats").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(via_http["tlsHandshakes"], s.tls_handshakes, "{via_http}");
    assert_eq!(via_http["watchesForcedClosed"], 0, "{via_http}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_the_ca_or_without_tls_are_rejected() {
    let (sim, _) = start(tls()).await;
    // The same kubeconfig without the CA: the system roots do not know it.
    let yaml = kube_sim::kubeconfig_yaml(&sim.url());
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    let nodes: Api<Node> = Api::all(kube::Client::try_from(cfg).unwrap());
    let err = nodes.list(&ListParams::default()).await.unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.contains("UnknownIssuer") || text.contains("certificate"),
        "a certificate error: {text}"
    );
    eventually(|| async { (sim.stats().tls_handshake_failures >= 1).then_some(()) }).await;

    // Plain HTTP to the HTTPS port is not served.
    let http_url = sim.url().replace("https://", "http://");
    let kc = kube::config::Kubeconfig::from_yaml(&kube_sim::kubeconfig_yaml(&http_url)).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    cfg.read_timeout = Some(Duration::from_secs(5));
    let nodes: Api<Node> = Api::all(kube::Client::try_from(cfg).unwrap());
    assert!(nodes.list(&ListParams::default()).await.is_err());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_counts_connections_too() {
    let (sim, client) = start(small()).await;
    assert!(sim.url().starts_with("http://"));
    assert!(sim.ca_pem().is_none());
    let nodes: Api<Node> = Api::all(client);
    for _ in 0..10 {
        nodes.list(&ListParams::default()).await.unwrap();
    }
    let s = sim.stats();
    assert!(
        (1..=2).contains(&s.connections_accepted),
        "one kept-alive connection: {s:?}"
    );
    assert_eq!(s.tls_handshakes, 0);
    sim.shutdown().await;
}
