//! `metadata.managedFields` as the real server records them: the creating manager (from the
//! User-Agent or `fieldManager`), no entry for a binding, the kubelet's status entry, merging
//! per (manager, operation, subresource), and `fieldManager` validation.

use crate::common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{SimConfig, SimHandle};
use serde_json::{Value, json};
use std::time::Duration;

async fn client_as(sim: &SimHandle, user_agent: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(user_agent).expect("header value"),
    ));
    kube::Client::try_from(config).expect("client")
}

fn entries(p: &Pod) -> Vec<ManagedFieldsEntry> {
    p.metadata.managed_fields.clone().unwrap_or_default()
}

fn fields(e: &ManagedFieldsEntry) -> Value {
    e.fields_v1.as_ref().expect("fieldsV1").0.clone()
}

fn entry<'a>(
    es: &'a [ManagedFieldsEntry],
    manager: &str,
    sub: Option<&str>,
) -> &'a ManagedFieldsEntry {
    es.iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.subresource.as_deref() == sub)
        .unwrap_or_else(|| panic!("no entry of {manager} ({sub:?}) in {es:?}"))
}

#[tokio::test]
async fn create_bind_status_and_update_record_managers() {
    let (sim, _) = start(SimConfig {
        running_delay: Some(Duration::from_millis(50)),
        ..small()
    })
    .await;
    let client = client_as(&sim, "magma-test/1.2.3 (linux/amd64)").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("mf", "magma");
    p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let es = entries(&created);
    assert_eq!(es.len(), 1, "{es:?}");
    let e = &es[0];
    assert_eq!(e.manager.as_deref(), Some("magma-test"));
    assert_eq!(e.operation.as_deref(), Some("Update"));
    assert_eq!(e.api_version.as_deref(), Some("v1"));
    assert_eq!(e.fields_type.as_deref(), Some("FieldsV1"));
    assert_eq!(e.subresource, None);
    assert!(e.time.is_some());
    let f = fields(e);
    assert_eq!(f["f:metadata"], json!({"f:labels": {".": {}, "f:app": {}}}));
    let c = &f["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"];
    assert_eq!(c["."], json!({}), "{f}");
    assert_eq!(c["f:image"], json!({}));
    assert_eq!(c["f:resources"]["f:requests"]["f:cpu"], json!({}));
    assert_eq!(f["f:spec"]["f:schedulerName"], json!({}));
    // Server-set fields are nobody's.
    assert!(f.get("f:status").is_none(), "{f}");
    for m in [
        "f:uid",
        "f:resourceVersion",
        "f:creationTimestamp",
        "f:name",
    ] {
        assert!(f["f:metadata"].get(m).is_none(), "{m} in {f}");
    }
    // GET and LIST carry the same entries.
    assert_eq!(entries(&pods.get("mf").await.unwrap()), es);
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(entries(&listed.items[0]), es);

    // A binding goes around the field manager (pod storage writes the pod directly), so the real
    // server records no entry for it: spec.nodeName and PodScheduled stay unowned.
    bind(&pods, "mf", "node-00001").await.unwrap();
    let bound = pods.get("mf").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-00001")
    );
    assert_eq!(entries(&bound), es);

    // The simulated kubelet's status write is an Update of the `status` subresource.
    let running = eventually(|| {
        let pods = pods.clone();
        async move {
            let p = pods.get("mf").await.unwrap();
            (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
        }
    })
    .await;
    let es = entries(&running);
    assert_eq!(es.len(), 2, "{es:?}");
    let k = entry(&es, "kubelet", Some("status"));
    assert_eq!(k.operation.as_deref(), Some("Update"));
    let kf = fields(k);
    assert_eq!(kf["f:status"]["f:phase"], json!({}));
    assert_eq!(
        kf["f:status"]["f:conditions"]["k:{\"type\":\"Ready\"}"]["."],
        json!({})
    );
    assert!(kf.get("f:spec").is_none(), "{kf}");

    // A second Update by the same manager merges into its entry.
    let patched = pods
        .patch(
            "mf",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
        )
        .await
        .unwrap();
    let es = entries(&patched);
    assert_eq!(es.len(), 2, "{es:?}");
    let labels = &fields(entry(&es, "magma-test", None))["f:metadata"]["f:labels"];
    assert_eq!(*labels, json!({".": {}, "f:app": {}, "f:tier": {}}));
    // Another manager (fieldManager wins over the User-Agent) takes the field it changes.
    let patched = pods
        .patch(
            "mf",
            &PatchParams {
                field_manager: Some("relabeler".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"metadata": {"labels": {"app": "api"}}})),
        )
        .await
        .unwrap();
    let es = entries(&patched);
    assert_eq!(es.len(), 3, "{es:?}");
    let mine = fields(entry(&es, "magma-test", None));
    assert_eq!(
        mine["f:metadata"]["f:labels"],
        json!({".": {}, "f:tier": {}})
    );
    let theirs = fields(entry(&es, "relabeler", None));
    assert_eq!(theirs, json!({"f:metadata": {"f:labels": {"f:app": {}}}}));
    // A no-op write changes no entry (and no version).
    let again = pods
        .patch(
            "mf",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "api"}}})),
        )
        .await
        .unwrap();
    assert_eq!(entries(&again), es);
    assert_eq!(
        again.metadata.resource_version,
        patched.metadata.resource_version
    );
}

#[tokio::test]
async fn apply_records_an_apply_entry() {
    let (sim, _) = start(small()).await;
    let client = client_as(&sim, "kubectl/v1.34.0").await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let applied = cms
        .patch("c", &PatchParams::apply("applier"), &Patch::Apply(&cm))
        .await
        .unwrap();
    let es = applied.metadata.managed_fields.unwrap();
    assert_eq!(es.len(), 1, "{es:?}");
    assert_eq!(es[0].manager.as_deref(), Some("applier"));
    assert_eq!(es[0].operation.as_deref(), Some("Apply"));
    assert_eq!(
        es[0].fields_v1.as_ref().unwrap().0,
        json!({"f:data": {".": {}, "f:a": {}}})
    );
}

#[tokio::test]
async fn field_manager_is_validated() {
    let (_sim, client) = start(small()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // kube checks the length itself, so these go out as raw requests.
    let create = |fm: String| {
        let client = client.clone();
        async move {
            let q: String = fm
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            let body = serde_json::to_vec(&pod("raw", "magma")).unwrap();
            let req =
                http::Request::post(format!("/api/v1/namespaces/default/pods?fieldManager={q}"))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .unwrap();
            client.request::<Pod>(req).await
        }
    };
    let (code, reason, msg) = api_code(create("m".repeat(129)).await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        msg,
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    let (code, _, msg) = api_code(create("bad\tmanager".into()).await);
    assert_eq!(code, 422);
    assert!(
        msg.contains("fieldManager: Invalid value: \"bad\\tmanager\": invalid characters"),
        "{msg}"
    );
    // Nothing was created; 128 characters are fine.
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        0
    );
    let ok = PostParams {
        field_manager: Some("m".repeat(128)),
        ..PostParams::default()
    };
    let p = pods.create(&ok, &pod("ok", "magma")).await.unwrap();
    assert_eq!(
        entries(&p)[0].manager.as_deref(),
        Some("m".repeat(128).as_str())
    );
}
