//! What the simulator keeps per bound pod, in windows: pods created over HTTP, bound over HTTP
//! (64 at a time, with a watch of the window's pods open), marked Running by the simulated kubelet;
//! after each window the bind rate, the process's CPU per pod over the window (creates, binds,
//! the kubelet's writes; the client's share included) and its RSS (mimalloc, as the
//! `kube-sim` binary's). Ignored by default; run in release:
//! `cargo test -p kube-sim --release --test integration -- memory:: --ignored --nocapture`
//! (`MEM_PODS`, `MEM_WINDOWS`, `MEM_HISTORY` change the window size, the number of windows and
//! `--history`; versions are packed, the default, unless `MEM_PACK=0`: `--pack-versions=false`).

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube_sim::SimConfig;
use std::time::{Duration, Instant};

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// CPU time this process has used (user + system), in ms.
fn cpu_ms() -> f64 {
    let tck: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name: state is the first, utime the 12th, stime the 13th.
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        rest.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * 1000.0 / tck
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn retained_per_bound_pod() {
    const NODES: usize = 1000;
    const CONCURRENCY: usize = 64;
    let pods = env("MEM_PODS", 10_000);
    let windows = env("MEM_WINDOWS", 4);
    let history = env("MEM_HISTORY", 100_000);
    let pack_versions = env("MEM_PACK", 1) != 0;
    let (sim, client) = start(SimConfig {
        nodes: NODES,
        history,
        pack_versions,
        ..SimConfig::default()
    })
    .await;
    let base_rss = rss_mib();
    println!("{NODES} nodes, history {history}, packed {pack_versions}: RSS {base_rss:.0} MiB");
    let mut first_rate = None;
    for w in 0..windows {
        let ns = format!("w{w}");
        sim.create(
            "v1",
            "namespaces",
            serde_json::json!({"metadata": {"name": ns}}),
        )
        .unwrap();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let cpu0 = cpu_ms();
        futures::stream::iter(0..pods)
            .for_each_concurrent(CONCURRENCY, |i| {
                let (api, ns) = (api.clone(), ns.clone());
                async move {
                    // The harness's pod (`magma-perf processes`).
                    let mut p =
                        kube_sim::pod_object(&ns, &format!("p{i}"), "nobody", "100m", "128Mi");
                    p["metadata"]["labels"] = serde_json::json!({"magma-procs": "1"});
                    let p: Pod = serde_json::from_value(p).unwrap();
                    api.create(&PostParams::default(), &p).await.unwrap();
                }
            })
            .await;
        // Every pod seen Running, as the scheduler's informer would see it.
        let rv = sim.resource_version().to_string();
        let watch_api = api.clone();
        let watcher = tokio::spawn(async move {
            let mut s = watch_api
                .watch(&WatchParams::default().timeout(290), &rv)
                .await
                .unwrap()
                .boxed();
            let mut running = 0;
            while let Some(ev) = s.try_next().await.unwrap() {
                if let WatchEvent::Modified(p) = ev
                    && p.status.and_then(|s| s.phase).as_deref() == Some("Running")
                {
                    running += 1;
                    if running == pods {
                        break;
                    }
                }
            }
        });
        let start = Instant::now();
        futures::stream::iter(0..pods)
            .for_each_concurrent(CONCURRENCY, |i| {
                let api = api.clone();
                async move {
                    bind(&api, &format!("p{i}"), &kube_sim::node_name(i % NODES))
                        .await
                        .unwrap();
                }
            })
            .await;
        let rate = pods as f64 / start.elapsed().as_secs_f64();
        tokio::time::timeout(Duration::from_secs(300), watcher)
            .await
            .unwrap()
            .unwrap();
        let cpu = (cpu_ms() - cpu0) / pods as f64;
        let first = *first_rate.get_or_insert(rate);
        let bound = (w + 1) * pods;
        let rss = rss_mib();
        println!(
            "window {w}: {rate:.0} binds/s ({:.2} of the first), {cpu:.3} CPU ms/pod (the client's \
             included); {bound} pods bound: RSS {rss:.0} MiB (+{:.0} B/pod); versions left plain \
             (packer's queue full) {}",
            rate / first,
            (rss - base_rss) * (1 << 20) as f64 / bound as f64,
            sim.stats().versions_left_plain,
        );
    }
    sim.shutdown().await;
}
