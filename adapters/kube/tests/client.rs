//! The API client both binaries build (`process::client_for`): HTTP/2 over HTTPS, every request
//! of a client a stream of one connection; HTTP/1.1 over plain HTTP. Checked from the
//! simulator's request record (each request's protocol) and its connection counter.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube_sim::{Sim, SimConfig, SimHandle};
use magma_kube::process::client_for;

use crate::common;

async fn client(sim: &SimHandle) -> kube::Client {
    client_for(&common::client_config(sim).await).await.unwrap()
}

/// Three nodes behind HTTPS, as a real API server serves them.
async fn tls_sim() -> SimHandle {
    Sim::start(SimConfig {
        nodes: 3,
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

fn protocols(sim: &SimHandle) -> Vec<&'static str> {
    let mut p: Vec<&'static str> = sim.requests().iter().map(|r| r.http_version).collect();
    p.dedup();
    p
}

/// `n` concurrent lists: with HTTP/1.1 each would need its own connection.
async fn concurrent_lists_n(client: &kube::Client, n: usize) {
    let pods: Api<Pod> = Api::all(client.clone());
    let lists = (0..n).map(|_| {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default())
                .await
                .map(|l| l.items.len())
        }
    });
    for r in futures::future::join_all(lists).await {
        assert_eq!(r.unwrap(), 0);
    }
}

async fn concurrent_lists(client: &kube::Client) {
    concurrent_lists_n(client, 64).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_every_request_is_an_http2_stream_of_one_connection() {
    let sim = tls_sim().await;
    let client = client(&sim).await;
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
    let before = sim.stats().connections_accepted;
    concurrent_lists(&client).await;
    assert_eq!(protocols(&sim), ["HTTP/2"]);
    assert_eq!(
        sim.stats().connections_accepted,
        before,
        "the 64 lists reused the one connection"
    );
}

// One runtime thread, as the scheduler's: every request is sent before any connection is up.
#[tokio::test(flavor = "current_thread")]
async fn a_cold_client_sends_its_first_concurrent_requests_over_one_connection() {
    // The start of a backlog drain: hundreds of binds before any connection is up. A client
    // that learnt HTTP/2 only from its first connection's ALPN dialled once per request.
    let sim = tls_sim().await;
    let cfg = common::client_config(&sim).await;
    assert!(magma_kube::process::negotiates_http2(&cfg).await.unwrap());
    let client = client_for(&cfg).await.unwrap();
    let before = sim.stats().connections_accepted;
    // As many as `--bind-concurrency` lets the executor send at once.
    concurrent_lists_n(&client, 256).await;
    assert_eq!(protocols(&sim), ["HTTP/2"]);
    assert_eq!(
        sim.stats().connections_accepted,
        before + 1,
        "256 concurrent lists on a new client: one connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_plain_http_the_client_speaks_http1() {
    let sim = Sim::start(SimConfig {
        nodes: 3,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let client = client(&sim).await;
    concurrent_lists(&client).await;
    assert_eq!(protocols(&sim), ["HTTP/1.1"]);
}
