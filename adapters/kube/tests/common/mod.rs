//! Shared helpers of the in-process adapter tests: the real scheduler (`app::run`) started
//! against an API simulator, and small polling and lookup helpers.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{SimConfig, SimHandle};
use magma_kube::app::{self, Running, Settings};
use std::time::{Duration, Instant};

pub async fn client_config(sim: &SimHandle) -> kube::Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

pub struct Sched {
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<anyhow::Result<app::RunSummary>>,
    pub running: Running,
}

impl Sched {
    pub async fn start(sim: &SimHandle, tweak: impl FnOnce(&mut Settings)) -> Sched {
        let mut settings = Settings {
            workers: 2,
            event_qps: 1000.0,
            event_burst: 1000,
            ..Settings::new(client_config(sim).await)
        };
        tweak(&mut settings);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(app::run(
            settings,
            async move {
                let _ = stop_rx.await;
            },
            Some(started_tx),
        ));
        let running = tokio::time::timeout(Duration::from_secs(10), started_rx)
            .await
            .unwrap()
            .unwrap();
        if tokio::time::timeout(Duration::from_secs(10), running.sync.wait())
            .await
            .is_err()
        {
            panic!("caches did not sync: {:?}", running.sync.unsynced());
        }
        Sched {
            stop: Some(stop_tx),
            task,
            running,
        }
    }

    pub async fn stop(mut self) -> app::RunSummary {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap()
    }
}

pub fn pod(name: &str, scheduler: &str, cpu: &str) -> Pod {
    serde_json::from_value(kube_sim::pod_object(
        "default", name, scheduler, cpu, "128Mi",
    ))
    .unwrap()
}

pub async fn eventually<F: Fn() -> bool>(what: &str, timeout: Duration, f: F) {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
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
