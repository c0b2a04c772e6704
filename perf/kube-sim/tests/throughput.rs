//! Bind throughput through HTTP with a pod watch open (the scheduler's shape). Ignored by default;
//! run in release: `cargo test -p kube-sim --release --test integration -- throughput:: --ignored --nocapture`.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use kube_sim::SimConfig;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn binds_per_second() {
    const PODS: usize = 20_000;
    const CONCURRENCY: usize = 64;
    let (sim, client) = start(SimConfig {
        nodes: 1000,
        ..SimConfig::default()
    })
    .await;
    for i in 0..PODS {
        sim.create_pod("default", &format!("p{i}"), "magma", "10m", "10Mi")
            .unwrap();
    }
    let rv = sim.resource_version().to_string();
    let all: Api<Pod> = Api::all(client.clone());
    let watcher = tokio::spawn(async move {
        let mut s = all
            .watch(&WatchParams::default().timeout(60), &rv)
            .await
            .unwrap()
            .boxed();
        let mut bound = 0;
        while let Some(ev) = s.try_next().await.unwrap() {
            if let WatchEvent::Modified(p) = ev
                && p.status.and_then(|s| s.phase).as_deref() == Some("Running")
            {
                bound += 1;
                if bound == PODS {
                    break;
                }
            }
        }
        Instant::now()
    });
    let start = Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..PODS)
        .for_each_concurrent(CONCURRENCY, |i| {
            let pods = pods.clone();
            async move {
                bind(&pods, &format!("p{i}"), &kube_sim::node_name(i % 1000))
                    .await
                    .unwrap();
            }
        })
        .await;
    let bind_time = start.elapsed();
    let seen = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .unwrap()
        .unwrap();
    println!(
        "{PODS} binds in {bind_time:?}: {:.0} binds/s; all Running seen by the watch after {:?}",
        PODS as f64 / bind_time.as_secs_f64(),
        seen - start
    );
    assert_eq!(sim.bindings().len(), PODS);
    sim.shutdown().await;
}
