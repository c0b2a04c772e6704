//! Shared helpers: start a simulator and build a `kube` client from its kubeconfig.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{Sim, SimConfig, SimHandle};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub async fn start(cfg: SimConfig) -> (SimHandle, kube::Client) {
    let sim = Sim::start(cfg).await.expect("simulator starts");
    let client = client(&sim, true).await;
    (sim, client)
}

/// A client from the simulator's kubeconfig; `retry: false` disables kube's built-in retry of
/// 429/503/504 (which honours `Retry-After`, up to 15 attempts).
pub async fn client(sim: &SimHandle, retry: bool) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.default_retry = retry;
    kube::Client::try_from(config).expect("client")
}

pub fn small() -> SimConfig {
    SimConfig {
        nodes: 3,
        bookmark_interval: Duration::from_millis(100),
        ..SimConfig::default()
    }
}

pub fn pod(name: &str, scheduler: &str) -> Pod {
    serde_json::from_value(kube_sim::pod_object(
        "default", name, scheduler, "100m", "128Mi",
    ))
    .expect("pod")
}

pub fn binding(pod: &str, node: &str, uid: Option<String>) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.into()),
            uid,
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..ObjectReference::default()
        },
    }
}

pub async fn bind(
    api: &Api<Pod>,
    pod: &str,
    node: &str,
) -> Result<kube::core::Status, kube::Error> {
    api.create_subresource(
        "binding",
        pod,
        &PostParams::default(),
        &binding(pod, node, None),
    )
    .await
}

pub fn api_code(r: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `f` every 10 ms until it returns Some, for at most 5 s.
pub async fn eventually<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// kubectl: `$KUBECTL`, `PATH`, /usr/bin, /usr/local/bin or `target/tools/bin` (where
/// `deploy/tools/install.sh` installs one).
pub fn kubectl_path() -> PathBuf {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("KUBECTL") {
        candidates.push(p.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("kubectl")));
    }
    candidates.push("/usr/bin/kubectl".into());
    candidates.push("/usr/local/bin/kubectl".into());
    let tools = std::env::var_os("MAGMA_TOOLS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools"),
        PathBuf::from,
    );
    candidates.push(tools.join("bin/kubectl"));
    match candidates.iter().find(|p| p.is_file()) {
        Some(p) => p.clone(),
        None => panic!(
            "kubectl not found (looked at {candidates:?}); install kubectl, set KUBECTL, or run \
             deploy/tools/install.sh (it installs one into target/tools/bin)"
        ),
    }
}

/// Runs kubectl against `sim` with a kubeconfig and cache in a fresh directory.
pub struct Kubectl {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(sim: &SimHandle, tag: &str) -> Self {
        let bin = kubectl_path();
        let dir =
            std::env::temp_dir().join(format!("kube-sim-kubectl-{tag}-{}", sim.addr().port()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            bin,
            dir,
            kubeconfig,
        }
    }

    /// (success, stdout, stderr); kubectl blocks, so it runs off the runtime's worker threads.
    pub async fn run(&self, args: Vec<&str>) -> (bool, String, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args);
        let out = tokio::task::spawn_blocking(move || cmd.output().expect("kubectl runs"))
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stdout, stderr)
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
