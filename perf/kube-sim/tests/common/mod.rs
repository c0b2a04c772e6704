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

/// One plain HTTP/1.1 request as `curl` sends it (User-Agent `curl/8.5.0`, so the field manager
/// is `curl`, as in the recorded answers of the real server): the status code and the decoded
/// JSON body (`Null` when the body is not JSON). `content_type` defaults to JSON.
pub async fn curl(
    sim: &SimHandle,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: kube-sim\r\nUser-Agent: curl/8.5.0\r\nConnection: close\r\n\
         Content-Type: {}\r\nContent-Length: {}\r\n\r\n{body}",
        content_type.unwrap_or("application/json"),
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.split(' ').nth(1).unwrap().parse().unwrap();
    let (_, payload) = out.split_once("\r\n\r\n").unwrap();
    (
        code,
        serde_json::from_str(payload).unwrap_or(serde_json::Value::Null),
    )
}

/// A recorded answer of kube-apiserver v1.36.2 (`tests/data/apiserver-1.36/<file>`).
pub fn recording(file: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/apiserver-1.36")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// An object without what differs between any two servers: `uid`, `creationTimestamp`,
/// `resourceVersion` and the managedFields entries' `time`.
pub fn comparable(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for f in ["uid", "creationTimestamp", "resourceVersion"] {
            m.remove(f);
        }
        if let Some(serde_json::Value::Array(entries)) = m.get_mut("managedFields") {
            for e in entries {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
        }
    }
    v
}

/// Removes the fields at the given JSON pointers (those a comparison leaves out).
pub fn without(mut v: serde_json::Value, pointers: &[&str]) -> serde_json::Value {
    for p in pointers {
        let (parent, last) = p.rsplit_once('/').unwrap();
        let last = last.replace("~1", "/").replace("~0", "~");
        if let Some(serde_json::Value::Object(m)) = v.pointer_mut(parent) {
            m.remove(&last);
        }
    }
    v
}
