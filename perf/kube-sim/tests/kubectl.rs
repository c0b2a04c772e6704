//! `kubectl` (v1.32 at /usr/bin/kubectl) against the simulator through the generated kubeconfig:
//! get nodes, apply a ConfigMap (create, then update through a strategic merge patch), get pods
//! across namespaces, delete. Skipped with a notice when kubectl is not installed.

use kube_sim::{Sim, SimConfig};
use std::path::Path;
use std::process::Command;

fn kubectl_path() -> Option<&'static str> {
    ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_apply_delete() {
    let Some(kubectl) = kubectl_path() else {
        eprintln!("NOTICE: kubectl not found; skipping kubectl_get_apply_delete");
        return;
    };
    let sim = Sim::start(SimConfig {
        nodes: 2,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("kube-sim-kubectl-{}", sim.addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let cache = dir.join("cache");
    let run = |args: Vec<&str>| {
        let mut cmd = Command::new(kubectl);
        cmd.arg("--kubeconfig")
            .arg(&kc)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args);
        // kubectl blocks: run it off the runtime's worker threads.
        async move {
            let out = tokio::task::spawn_blocking(move || cmd.output().expect("kubectl runs"))
                .await
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.success(), stdout, stderr)
        }
    };

    let (ok, out, err) = run(vec!["get", "nodes"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("node-00000") && out.contains("node-00001"),
        "{out}"
    );

    let manifest = dir.join("cm.yaml");
    let write = |v: &str| {
        std::fs::write(
            &manifest,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: default\ndata:\n  a: \"{v}\"\n"),
        )
        .unwrap()
    };
    write("1");
    let m = manifest.to_str().unwrap();
    let (ok, out, err) = run(vec!["apply", "--validate=false", "-f", m]).await;
    assert!(ok && out.contains("configmap/demo created"), "{out} {err}");
    write("2");
    let (ok, out, err) = run(vec!["apply", "--validate=false", "-f", m]).await;
    assert!(
        ok && out.contains("configmap/demo configured"),
        "{out} {err}"
    );
    let cm = sim.get("v1", "configmaps", "default", "demo").unwrap();
    assert_eq!(cm["data"]["a"], "2");
    let ann = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    assert!(ann.contains("\"a\":\"2\""), "{ann}");

    // Plain apply (client-side validation off, server-side "Strict" validation chosen through the
    // minimal OpenAPI v3 the simulator serves) and server-side apply.
    write("3");
    let (ok, out, err) = run(vec!["apply", "-f", m]).await;
    assert!(
        ok && out.contains("configmap/demo configured"),
        "{out} {err}"
    );
    let (ok, out, err) = run(vec!["apply", "--server-side", "-f", m]).await;
    assert!(ok && out.contains("serverside-applied"), "{out} {err}");
    assert_eq!(
        sim.get("v1", "configmaps", "default", "demo").unwrap()["data"]["a"],
        "3"
    );

    // The NodeShard CRD and a NodeShard through kubectl, by short name too.
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/shard.volcano.sh_nodeshards.yaml"
    );
    let (ok, out, err) = run(vec!["apply", "-f", crd]).await;
    assert!(
        ok && out.contains("nodeshards.shard.volcano.sh created"),
        "{out} {err}"
    );
    let shard = dir.join("shard.yaml");
    std::fs::write(
        &shard,
        "apiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: shard-a\nspec:\n  nodesDesired: [node-00000]\n",
    )
    .unwrap();
    let (ok, out, err) = run(vec!["apply", "-f", shard.to_str().unwrap()]).await;
    assert!(
        ok && out.contains("nodeshard.shard.volcano.sh/shard-a created"),
        "{out} {err}"
    );
    let (ok, out, err) = run(vec!["get", "nsh"]).await;
    assert!(ok && out.contains("shard-a"), "{out} {err}");

    sim.create_pod("kube-system", "sys", "default-scheduler", "1", "1Gi")
        .unwrap();
    let (ok, out, err) = run(vec!["get", "pods", "-A"]).await;
    assert!(
        ok && out.contains("kube-system") && out.contains("sys"),
        "{out} {err}"
    );

    let (ok, out, err) = run(vec!["delete", "-f", m]).await;
    assert!(
        ok && out.contains("configmap \"demo\" deleted"),
        "{out} {err}"
    );
    let (ok, _, err) = run(vec!["delete", "configmap", "demo"]).await;
    assert!(
        !ok && err.contains("configmaps \"demo\" not found"),
        "{err}"
    );
    assert_eq!(
        sim.get("v1", "configmaps", "default", "demo")
            .unwrap_err()
            .code,
        404
    );

    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}
