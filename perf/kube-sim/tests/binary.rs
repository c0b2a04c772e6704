//! The `kube-sim` binary: flags, the kubeconfig it writes (used by the `kube` client), and a clean
//! exit (status 0) on SIGTERM.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn binary_serves_and_exits_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("kube-sim-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc_path = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args([
            "--port",
            "0",
            "--nodes",
            "5",
            "--node-cpu",
            "8",
            "--pod-lifetime",
            "1m30s",
        ])
        .args(["--error-rate", "delete=0.5:429", "--latency-ms", "1"])
        .args(["--termination-delay", "50ms", "--no-disruption-controller"])
        // Packing is on by default; the flag takes a value to turn it off.
        .arg("--pack-versions=false")
        .arg("--kubeconfig-out")
        .arg(&kc_path)
        .stdout(Stdio::null())
        .spawn()
        .expect("binary starts");
    let yaml = kubeconfig_when_written(&kc_path).await;
    assert!(!yaml.is_empty(), "kubeconfig written");
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let nodes: Api<Node> = Api::all(client);
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 5);
    let cpu = &list.items[0]
        .status
        .as_ref()
        .unwrap()
        .capacity
        .as_ref()
        .unwrap()["cpu"];
    assert_eq!(cpu.0, "8");

    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn binary_serves_https_with_tls() {
    let dir = std::env::temp_dir().join(format!("kube-sim-bin-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc_path = dir.join("kubeconfig");
    let ca_path = dir.join("ca.crt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--port", "0", "--nodes", "2", "--tls", "--pack-versions"])
        .arg("--ca-out")
        .arg(&ca_path)
        .arg("--kubeconfig-out")
        .arg(&kc_path)
        .stdout(Stdio::null())
        .spawn()
        .expect("binary starts");
    // The kubeconfig is written after the CA file: once it is complete both are there.
    let yaml = kubeconfig_when_written(&kc_path).await;
    assert!(yaml.contains("server: https://127.0.0.1:"), "{yaml}");
    assert!(yaml.contains("certificate-authority-data: "), "{yaml}");
    let ca = std::fs::read_to_string(&ca_path).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(kube::Client::try_from(cfg).unwrap());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary's `--kubeconfig-out` file once it is complete (polled for up to 5 s; empty if it
/// never is).
async fn kubeconfig_when_written(path: &std::path::Path) -> String {
    for _ in 0..500 {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.contains("current-context")
        {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    String::new()
}
