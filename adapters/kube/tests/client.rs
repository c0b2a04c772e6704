//! The API client both binaries build (`process::client_for`): HTTP/2 over HTTPS, every request
//! of a client a stream of one connection; HTTP/1.1 over plain HTTP. Checked from the
//! simulator's request record (each request's protocol) and its connection counter.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube_sim::{Sim, SimConfig, SimHandle};
use magma_kube::process::client_for;

mod common;

async fn client(sim: &SimHandle) -> kube::Client {
    client_for(&common::client_config(sim).await).unwrap()
}

fn protocols(sim: &SimHandle) -> Vec<&'static str> {
    let mut p: Vec<&'static str> = sim.requests().iter().map(|r| r.http_version).collect();
    p.dedup();
    p
}

/// 64 concurrent lists: with HTTP/1.1 each would need its own connection.
async fn concurrent_lists(client: &kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let lists = (0..64).map(|_| {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_every_request_is_an_http2_stream_of_one_connection() {
    let sim = Sim::start(SimConfig {
        nodes: 3,
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
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
