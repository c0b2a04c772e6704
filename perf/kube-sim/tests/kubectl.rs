//! `kubectl` (v1.32 at /usr/bin/kubectl here) against the simulator through the generated
//! kubeconfig: get nodes, apply a ConfigMap (create, then update through a strategic merge patch),
//! get pods across namespaces, delete; DRA objects (apply, a field selector on ResourceSlices, a
//! refused CEL selector); and the same kubeconfig over HTTPS (the CA embedded, so
//! kubectl verifies the server certificate). Without kubectl these tests fail, naming where they
//! looked: `$KUBECTL`, `PATH`, /usr/bin, /usr/local/bin and `target/tools/bin` (where
//! `deploy/tools/install.sh` installs one on a machine without it).

use crate::common;

use common::Kubectl;
use kube_sim::{Sim, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_https_verifies_the_ca() {
    let sim = Sim::start(SimConfig {
        nodes: 2,
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let k = Kubectl::new(&sim, "tls");
    let (ok, out, err) = k.run(vec!["get", "nodes"]).await;
    assert!(ok && out.contains("node-00001"), "{out} {err}");
    let manifest = k.dir.join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: over-tls\ndata:\n  a: b\n",
    )
    .unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", manifest.to_str().unwrap()]).await;
    assert!(
        ok && out.contains("configmap/over-tls created"),
        "{out} {err}"
    );
    assert_eq!(
        sim.get("v1", "configmaps", "default", "over-tls").unwrap()["data"]["a"],
        "b"
    );
    assert!(sim.stats().tls_handshakes >= 1, "{:?}", sim.stats());
    // Without the CA kubectl refuses the self-signed certificate.
    std::fs::write(&k.kubeconfig, kube_sim::kubeconfig_yaml(&sim.url())).unwrap();
    let (ok, _, err) = k.run(vec!["get", "nodes"]).await;
    assert!(
        !ok && err.contains("certificate signed by unknown authority"),
        "{err}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_apply_delete() {
    let sim = Sim::start(SimConfig {
        nodes: 2,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let k = Kubectl::new(&sim, "http");
    let dir = k.dir.clone();

    let (ok, out, err) = k.run(vec!["get", "nodes"]).await;
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
    let (ok, out, err) = k.run(vec!["apply", "--validate=false", "-f", m]).await;
    assert!(ok && out.contains("configmap/demo created"), "{out} {err}");
    write("2");
    let (ok, out, err) = k.run(vec!["apply", "--validate=false", "-f", m]).await;
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
    let (ok, out, err) = k.run(vec!["apply", "-f", m]).await;
    assert!(
        ok && out.contains("configmap/demo configured"),
        "{out} {err}"
    );
    let (ok, out, err) = k.run(vec!["apply", "--server-side", "-f", m]).await;
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
    let (ok, out, err) = k.run(vec!["apply", "-f", crd]).await;
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
    let (ok, out, err) = k.run(vec!["apply", "-f", shard.to_str().unwrap()]).await;
    assert!(
        ok && out.contains("nodeshard.shard.volcano.sh/shard-a created"),
        "{out} {err}"
    );
    let (ok, out, err) = k.run(vec!["get", "nsh"]).await;
    assert!(ok && out.contains("shard-a"), "{out} {err}");

    sim.create_pod("kube-system", "sys", "default-scheduler", "1", "1Gi")
        .unwrap();
    let (ok, out, err) = k.run(vec!["get", "pods", "-A"]).await;
    assert!(
        ok && out.contains("kube-system") && out.contains("sys"),
        "{out} {err}"
    );

    let (ok, out, err) = k.run(vec!["delete", "-f", m]).await;
    assert!(
        ok && out.contains("configmap \"demo\" deleted"),
        "{out} {err}"
    );
    let (ok, _, err) = k.run(vec!["delete", "configmap", "demo"]).await;
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

    sim.shutdown().await;
}

/// DRA objects through kubectl: apply a DeviceClass, a ResourceSlice and a claim template,
/// list slices by node with a field selector, and see a bad CEL selector refused with the
/// server's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_and_lists_dra_objects() {
    let sim = Sim::start(SimConfig {
        nodes: 1,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let k = Kubectl::new(&sim, "dra");
    let manifest = k.dir.join("dra.yaml");
    std::fs::write(
        &manifest,
        r#"apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-00000-gpus
spec:
  driver: gpu.example.com
  nodeName: node-00000
  pool: {name: node-00000, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: a100}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"#,
    )
    .unwrap();
    let (ok, out, err) = k.run(vec!["apply", "-f", manifest.to_str().unwrap()]).await;
    assert!(ok, "{out} {err}");
    for created in [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "resourceslice.resource.k8s.io/node-00000-gpus created",
        "resourceclaimtemplate.resource.k8s.io/one-gpu created",
    ] {
        assert!(out.contains(created), "{out}");
    }
    let (ok, out, err) = k
        .run(vec![
            "get",
            "resourceslices",
            "--field-selector",
            "spec.nodeName=node-00000",
            "-o",
            "name",
        ])
        .await;
    assert!(
        ok && out.trim() == "resourceslice.resource.k8s.io/node-00000-gpus",
        "{out} {err}"
    );
    let bad = k.dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: bad\nspec:\n  selectors:\n  - cel:\n      expression: device.foo\n",
    )
    .unwrap();
    let (ok, _, err) = k.run(vec!["apply", "-f", bad.to_str().unwrap()]).await;
    assert!(
        !ok && err.contains("spec.selectors[0].cel.expression: Invalid value: \"device.foo\": compilation failed: ERROR: <input>:1:7: undefined field 'foo'"),
        "{err}"
    );
    sim.shutdown().await;
}
