//! Shared helpers of the in-process adapter tests: the real scheduler (`app::spawn`) started
//! against an API simulator, and small polling and lookup helpers.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{SimConfig, SimHandle};
use magma_kube::app::{self, Observer, Settings};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub async fn client_config(sim: &SimHandle) -> kube::Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

pub struct Sched {
    handle: app::SchedulerHandle,
    pub running: Observer,
}

impl Sched {
    pub async fn start(sim: &SimHandle, tweak: impl FnOnce(&mut Settings)) -> Sched {
        // One worker, the default: the driver runs it (`binary.rs` runs two worker threads).
        let mut settings = Settings {
            workers: 1,
            event_qps: 1000.0,
            event_burst: 1000,
            ..Settings::new(client_config(sim).await)
        };
        tweak(&mut settings);
        let handle = tokio::time::timeout(Duration::from_secs(10), app::spawn(settings))
            .await
            .expect("the scheduler starts within 10 s")
            .expect("the scheduler starts");
        let running = handle.observer().clone();
        if tokio::time::timeout(Duration::from_secs(10), running.synced())
            .await
            .is_err()
        {
            panic!("caches did not sync: {:?}", running.sync.unsynced());
        }
        Sched { handle, running }
    }

    pub async fn stop(self) -> app::RunSummary {
        self.handle.stop().await.unwrap()
    }
}

pub fn pod(name: &str, scheduler: &str, cpu: &str) -> Pod {
    serde_json::from_value(kube_sim::pod_object(
        "default", name, scheduler, cpu, "128Mi",
    ))
    .unwrap()
}

pub async fn eventually<F: Fn() -> bool>(what: &str, timeout: Duration, f: F) {
    wait_for(what, timeout, || f().then_some(()), String::new).await
}

/// Polls `f` every 25 ms until it returns `Some`; panics naming `what` and the last state
/// `seen` describes after `timeout`.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    seen: impl Fn() -> String,
) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {timeout:?} waiting for {what}; last seen: {}",
            seen()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A free TCP port on 127.0.0.1 (for the scheduler's `/metrics`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("local address")
        .port()
}

/// The value of one series on `http://127.0.0.1:<port>/metrics` (e.g.
/// `magma_config_reload_total{result="ok"}`); `None` while nothing serves there or the series
/// is absent.
pub async fn metric(port: u16, series: &str) -> Option<u64> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf);
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until `series` on the scheduler's `/metrics` reaches at least `want`; returns it.
pub async fn metric_reaches(port: u16, series: &str, want: u64, timeout: Duration) -> u64 {
    let end = Instant::now() + timeout;
    loop {
        let v = metric(port, series).await;
        if let Some(v) = v.filter(|v| *v >= want) {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {timeout:?} waiting for {series} >= {want}; last seen: {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub fn node_of(sim: &SimHandle, name: &str) -> Option<String> {
    sim.get("v1", "pods", "default", name).ok()?["spec"]["nodeName"]
        .as_str()
        .map(str::to_owned)
}

pub fn condition(sim: &SimHandle, name: &str) -> Option<(String, String, String)> {
    let p = sim.get("v1", "pods", "default", name).ok()?;
    let c = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")?
        .clone();
    Some((
        c["status"].as_str()?.into(),
        c["reason"].as_str()?.into(),
        c["message"].as_str().unwrap_or("").into(),
    ))
}

pub fn sim_cfg(nodes: usize) -> SimConfig {
    SimConfig {
        nodes,
        bookmark_interval: Duration::from_millis(200),
        ..SimConfig::default()
    }
}
