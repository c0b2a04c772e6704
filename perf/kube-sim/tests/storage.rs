//! Storage objects through the `kube` client: PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses and CSINodes (discovery, defaults, validation with the real field paths, status
//! subresources, immutability, the DefaultStorageClass and PersistentVolumeClaimResize admission
//! rules, and both switched off), and the simulated PV controller and CSI provisioner (WaitForFirstConsumer and
//! Immediate provisioning, the delay, "never", static pre-binding, claims naming their volume,
//! Lost and Released), kubectl
//! and the binary's flags. Waits are on watch events and reads, never on fixed sleeps.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Resource;
use kube_sim::{
    BIND_COMPLETED_ANNOTATION, BOUND_BY_CONTROLLER_ANNOTATION, DEFAULT_CLASS_ANNOTATION,
    PROVISIONED_BY_ANNOTATION, Provisioner, SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION, SimConfig,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Debug;
use std::time::{Duration, Instant};

const DRIVER: &str = "csi.kube-sim.io";

fn pvc(name: &str, class: Option<&str>, size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(kube_sim::pvc_object("default", name, class, size)).unwrap()
}

fn sc(name: &str, binding_mode: Option<&str>) -> StorageClass {
    serde_json::from_value(kube_sim::storage_class_object(name, DRIVER, binding_mode)).unwrap()
}

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// A CSI PV of 1Gi (RWO) with `extra` merged into its spec.
fn pv(name: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "csi": {"driver": DRIVER, "volumeHandle": name}}});
    for (k, x) in extra.as_object().unwrap() {
        if x.is_null() {
            v["spec"].as_object_mut().unwrap().remove(k);
        } else {
            v["spec"][k] = x.clone();
        }
    }
    from(v)
}

/// The 422 of a rejected write: checks the code, the reason and that a cause names `field`;
/// returns the message.
fn invalid<T: Debug>(r: Result<T, kube::Error>, field: &str) -> String {
    match r {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str()),
                (422, "Invalid"),
                "{}",
                s.message
            );
            let causes = s
                .details
                .as_ref()
                .map(|d| d.causes.clone())
                .unwrap_or_default();
            assert!(
                causes.iter().any(|c| c.field == field),
                "no cause for {field}: {} {causes:?}",
                s.message
            );
            s.message.clone()
        }
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

fn phase_of(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn pv_phase(v: &PersistentVolume) -> &str {
    v.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn bound(c: &PersistentVolumeClaim) -> bool {
    phase_of(c) == "Bound"
}

fn annotation<'a, K: Resource>(o: &'a K, key: &str) -> Option<&'a str> {
    o.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn rv_of<K: Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Watches `name` (current state first) until `pred` holds; at most 10 s.
async fn wait_for<K>(api: &Api<K>, name: &str, mut pred: impl FnMut(&K) -> bool) -> K
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut s = api.watch(&wp, "0").await.unwrap().boxed();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = s.try_next().await.unwrap() {
            match ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) if pred(&o) => return o,
                WatchEvent::Error(e) => panic!("{e:?}"),
                _ => {}
            }
        }
        panic!("watch of {name} ended")
    })
    .await
    .unwrap_or_else(|_| panic!("{name} did not reach the state within 10 s"))
}

/// The next event of a watch stream other than a bookmark (at most 10 s).
async fn next_event<K: Clone + Debug + DeserializeOwned + Send + 'static>(
    s: &mut (impl futures::Stream<Item = Result<WatchEvent<K>, kube::Error>> + Unpin),
) -> WatchEvent<K> {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), s.try_next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .expect("the watch goes on");
        if !matches!(ev, WatchEvent::Bookmark(_)) {
            return ev;
        }
    }
}

fn provisioning(delay: Duration) -> SimConfig {
    SimConfig {
        provisioner: Provisioner::After(delay),
        ..small()
    }
}

#[tokio::test]
async fn discovery_defaults_selectors_and_deletion() {
    let (sim, client) = start(small()).await;
    let core = client.list_core_api_resources("v1").await.unwrap();
    let find = |l: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList, n: &str| {
        l.resources.iter().find(|r| r.name == n).cloned()
    };
    let pvcs_res = find(&core, "persistentvolumeclaims").unwrap();
    assert!(pvcs_res.namespaced);
    assert_eq!(pvcs_res.short_names, Some(vec!["pvc".to_string()]));
    let pvs_res = find(&core, "persistentvolumes").unwrap();
    assert!(!pvs_res.namespaced);
    assert_eq!(pvs_res.short_names, Some(vec!["pv".to_string()]));
    assert!(find(&core, "persistentvolumeclaims/status").is_some());
    assert!(find(&core, "persistentvolumes/status").is_some());
    let st = client
        .list_api_group_resources("storage.k8s.io/v1")
        .await
        .unwrap();
    let scs_res = find(&st, "storageclasses").unwrap();
    assert_eq!(
        (scs_res.namespaced, scs_res.short_names),
        (false, Some(vec!["sc".to_string()]))
    );
    assert!(find(&st, "csinodes").is_some());
    assert!(find(&st, "storageclasses/status").is_none());

    // StorageClass defaults.
    let scs: Api<StorageClass> = Api::all(client.clone());
    let c = scs
        .create(&PostParams::default(), &sc("fast", None))
        .await
        .unwrap();
    assert_eq!(c.volume_binding_mode.as_deref(), Some("Immediate"));
    assert_eq!(c.reclaim_policy.as_deref(), Some("Delete"));

    // PVC defaults: volumeMode, status reset to Pending on create.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let mut claim = pvc("data", Some("fast"), "1Gi");
    claim.status = Some(from(
        json!({"phase": "Bound", "capacity": {"storage": "9Gi"}}),
    ));
    let created = pvcs.create(&PostParams::default(), &claim).await.unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().volume_mode.as_deref(),
        Some("Filesystem")
    );
    assert_eq!(
        serde_json::to_value(&created.status).unwrap(),
        json!({"phase": "Pending"})
    );
    pvcs.create(&PostParams::default(), &pvc("other", Some("fast"), "1Gi"))
        .await
        .unwrap();

    // PV defaults: reclaim policy, volume mode, hostPath type, Pending with a transition time.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let created = pvs
        .create(
            &PostParams::default(),
            &pv("host", json!({"csi": null, "hostPath": {"path": "/data"}})),
        )
        .await
        .unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(spec.host_path.as_ref().unwrap().type_.as_deref(), Some(""));
    let st = created.status.as_ref().unwrap();
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert!(st.last_phase_transition_time.is_some());

    // Field selectors: metadata.name and the legacy `name`; others are rejected.
    let names = |l: kube::api::ObjectList<PersistentVolumeClaim>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    let by_name = pvcs
        .list(&ListParams::default().fields("name=data"))
        .await
        .unwrap();
    assert_eq!(names(by_name), ["data"]);
    let not = pvcs
        .list(&ListParams::default().fields("metadata.name!=data"))
        .await
        .unwrap();
    assert_eq!(names(not), ["other"]);
    let (code, _, _) = api_code(
        pvcs.list(&ListParams::default().fields("status.phase=Pending"))
            .await,
    );
    assert_eq!(code, 400);

    // CSINode round trip, by the kube client and the direct handle.
    let nodes: Api<CSINode> = Api::all(client.clone());
    let n: CSINode = from(
        json!({"metadata": {"name": "node-00000"}, "spec": {"drivers": [
        {"name": DRIVER, "nodeID": "node-00000", "topologyKeys": ["kubernetes.io/hostname"],
         "allocatable": {"count": 16}}]}}),
    );
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let got = sim
        .get("storage.k8s.io/v1", "csinodes", "", "node-00000")
        .unwrap();
    assert_eq!(got["spec"]["drivers"][0]["allocatable"]["count"], 16);

    pvcs.delete("data", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(pvcs.get("data").await).0, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn claim_validation() {
    let (sim, client) = start(small()).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = kube_sim::pvc_object("default", "bad", Some("fast"), "1Gi");
        f(&mut v);
        from::<PersistentVolumeClaim>(v)
    };

    let m = invalid(
        pvcs.create(
            &pp,
            &with(&|v| {
                v["spec"].as_object_mut().unwrap().remove("accessModes");
            }),
        )
        .await,
        "spec.accessModes",
    );
    assert_eq!(
        m,
        "PersistentVolumeClaim \"bad\" is invalid: spec.accessModes: Required value: at least 1 access mode is required"
    );
    let m = invalid(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["accessModes"] = json!(["ReadWriteSometimes"])),
        )
        .await,
        "spec.accessModes",
    );
    assert!(
        m.ends_with("spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""),
        "{m}"
    );
    let m = invalid(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["accessModes"] = json!(["ReadWriteOncePod", "ReadOnlyMany"])),
        )
        .await,
        "spec.accessModes",
    );
    assert!(
        m.ends_with(
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"
        ),
        "{m}"
    );
    pvcs.create(
        &pp,
        &with(&|v| {
            v["metadata"]["name"] = json!("rwop");
            v["spec"]["accessModes"] = json!(["ReadWriteOncePod"]);
        }),
    )
    .await
    .unwrap();
    let m = invalid(
        pvcs.create(&pp, &with(&|v| v["spec"]["resources"] = json!({})))
            .await,
        "spec.resources[storage]",
    );
    assert!(
        m.ends_with("spec.resources[storage]: Required value"),
        "{m}"
    );
    let m = invalid(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["resources"]["requests"]["storage"] = json!("0")),
        )
        .await,
        "spec.resources[storage]",
    );
    assert!(
        m.ends_with("spec.resources[storage]: Invalid value: \"0\": must be greater than zero"),
        "{m}"
    );
    invalid(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["resources"]["requests"]["storage"] = json!("-1Gi")),
        )
        .await,
        "spec.resources[storage]",
    );
    // A malformed quantity fails decoding (400), as on the real server.
    let (code, reason, msg) = api_code(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["resources"]["requests"]["storage"] = json!("lots")),
        )
        .await,
    );
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert!(
        msg.contains("quantities must match the regular expression"),
        "{msg}"
    );
    let m = invalid(
        pvcs.create(&pp, &with(&|v| v["spec"]["volumeMode"] = json!("Raw")))
            .await,
        "spec.volumeMode",
    );
    assert!(
        m.ends_with("spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\""),
        "{m}"
    );
    invalid(
        pvcs.create(
            &pp,
            &with(&|v| v["spec"]["storageClassName"] = json!("Not_A_Name")),
        )
        .await,
        "spec.storageClassName",
    );
    invalid(
        pvcs.create(&pp, &with(&|v| v["metadata"]["name"] = json!("Bad_Name")))
            .await,
        "metadata.name",
    );
    invalid(
        pvcs.create(
            &pp,
            &with(&|v| {
                v["spec"]["selector"] =
                    json!({"matchExpressions": [{"key": "tier", "operator": "In"}]})
            }),
        )
        .await,
        "spec.selector.matchExpressions[0].values",
    );
    // Several errors at once are aggregated in brackets, one cause each.
    let m = invalid(
        pvcs.create(
            &pp,
            &with(&|v| {
                v["spec"] = json!({"volumeMode": "Block"});
            }),
        )
        .await,
        "spec.resources[storage]",
    );
    assert_eq!(
        m,
        "PersistentVolumeClaim \"bad\" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn claim_immutability_and_status_subresource() {
    let (sim, client) = start(small()).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pp = PatchParams::default();
    pvcs.create(&PostParams::default(), &pvc("c", Some("fast"), "1Gi"))
        .await
        .unwrap();
    let patch = |v: Value| Patch::Merge(v);

    // Main-resource writes keep status.
    let p = pvcs
        .patch(
            "c",
            &pp,
            &patch(json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    assert_eq!(phase_of(&p), "Pending");
    assert_eq!(p.metadata.labels.unwrap()["a"], "b");
    let mut full = pvcs.get("c").await.unwrap();
    full.status.as_mut().unwrap().phase = Some("Lost".into());
    let r = pvcs
        .replace("c", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!(phase_of(&r), "Pending");

    // /status writes change only status.
    let s = pvcs
        .patch_status(
            "c",
            &pp,
            &patch(json!({"spec": {"volumeName": "sneaky"}, "status": {"phase": "Lost"}})),
        )
        .await
        .unwrap();
    assert_eq!(phase_of(&s), "Lost");
    assert_eq!(s.spec.as_ref().unwrap().volume_name, None);
    let mut no_rv = s.clone();
    no_rv.metadata.resource_version = None;
    no_rv.status.as_mut().unwrap().phase = Some("Pending".into());
    let m = invalid(
        pvcs.replace_status("c", &PostParams::default(), &no_rv)
            .await,
        "resourceVersion",
    );
    assert!(m.ends_with("resourceVersion: Required value"), "{m}");
    // An empty phase is defaulted.
    let s = pvcs
        .patch_status("c", &pp, &patch(json!({"status": {"phase": null}})))
        .await
        .unwrap();
    assert_eq!(phase_of(&s), "Pending");

    // Spec immutability: access modes, class, request of an unbound claim.
    let spec_forbidden = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";
    for change in [
        json!({"spec": {"accessModes": ["ReadOnlyMany"]}}),
        json!({"spec": {"storageClassName": "slow"}}),
        json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
    ] {
        let m = invalid(pvcs.patch("c", &pp, &patch(change)).await, "spec");
        assert!(m.ends_with(spec_forbidden), "{m}");
    }
    let m = invalid(
        pvcs.patch("c", &pp, &patch(json!({"spec": {"volumeMode": "Block"}})))
            .await,
        "volumeMode",
    );
    assert!(
        m.contains("volumeMode: Invalid value: \"Block\": field is immutable"),
        "{m}"
    );
    // volumeName may be set once, and not changed afterwards.
    let p = pvcs
        .patch("c", &pp, &patch(json!({"spec": {"volumeName": "pv-1"}})))
        .await
        .unwrap();
    assert_eq!(
        p.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("pv-1")
    );
    invalid(
        pvcs.patch("c", &pp, &patch(json!({"spec": {"volumeName": "pv-2"}})))
            .await,
        "spec",
    );
    // A claim without a class may get one (upgrade from nil); "" is a class choice.
    pvcs.create(&PostParams::default(), &pvc("nil", None, "1Gi"))
        .await
        .unwrap();
    let p = pvcs
        .patch(
            "nil",
            &pp,
            &patch(json!({"spec": {"storageClassName": "fast"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().storage_class_name.as_deref(), Some("fast"));
    sim.shutdown().await;
}

#[tokio::test]
async fn volume_validation_and_status() {
    let (sim, client) = start(small()).await;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();

    let m = invalid(
        pvs.create(&pp, &pv("bad", json!({"capacity": null}))).await,
        "spec.capacity",
    );
    assert_eq!(
        m,
        "PersistentVolume \"bad\" is invalid: [spec.capacity: Required value, spec.capacity: Unsupported value: core.ResourceList(nil): supported values: \"storage\"]"
    );
    let m = invalid(
        pvs.create(&pp, &pv("bad", json!({"accessModes": null})))
            .await,
        "spec.accessModes",
    );
    assert!(m.ends_with("spec.accessModes: Required value"), "{m}");
    invalid(
        pvs.create(&pp, &pv("bad", json!({"capacity": {"storage": "0"}})))
            .await,
        "spec.capacity[storage]",
    );
    let m = invalid(
        pvs.create(&pp, &pv("bad", json!({"csi": null}))).await,
        "spec",
    );
    assert!(
        m.ends_with("spec: Required value: must specify a volume type"),
        "{m}"
    );
    let m = invalid(
        pvs.create(&pp, &pv("bad", json!({"hostPath": {"path": "/x"}})))
            .await,
        "spec.csi",
    );
    assert!(
        m.ends_with("spec.csi: Forbidden: may not specify more than 1 volume type"),
        "{m}"
    );
    let m = invalid(
        pvs.create(&pp, &pv("bad", json!({"csi": {"driver": DRIVER}})))
            .await,
        "spec.csi.volumeHandle",
    );
    assert!(m.ends_with("spec.csi.volumeHandle: Required value"), "{m}");
    invalid(
        pvs.create(
            &pp,
            &pv("bad", json!({"csi": {"driver": "", "volumeHandle": "h"}})),
        )
        .await,
        "spec.csi.driver",
    );
    let m = invalid(
        pvs.create(
            &pp,
            &pv("bad", json!({"csi": null, "local": {"path": "/mnt/disk"}})),
        )
        .await,
        "spec.nodeAffinity",
    );
    assert!(
        m.ends_with("spec.nodeAffinity: Required value: Local volume requires node affinity"),
        "{m}"
    );
    invalid(
        pvs.create(
            &pp,
            &pv("bad", json!({"csi": null, "hostPath": {"path": "/a/../b"}})),
        )
        .await,
        "spec.hostPath.path",
    );
    invalid(
        pvs.create(
            &pp,
            &pv("bad", json!({"persistentVolumeReclaimPolicy": "Keep"})),
        )
        .await,
        "spec.persistentVolumeReclaimPolicy",
    );
    // Node affinity: node selector term rules.
    let expr = |e: Value| json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [e]}]}}});
    let terms = "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]";
    for (e, field, msg) in [
        (
            json!({"key": "zone", "operator": "In"}),
            "values",
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            json!({"key": "zone", "operator": "Exists", "values": ["a"]}),
            "values",
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            json!({"key": "rank", "operator": "Gt", "values": ["1", "2"]}),
            "values",
            "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        ),
        (
            json!({"key": "zone", "operator": "Near", "values": ["a"]}),
            "operator",
            "Invalid value: \"Near\": not a valid selector operator",
        ),
        (
            json!({"key": "", "operator": "Exists"}),
            "key",
            "Invalid value: \"\": name part must be non-empty",
        ),
    ] {
        let path = format!("{terms}.{field}");
        let m = invalid(pvs.create(&pp, &pv("bad", expr(e))).await, &path);
        assert!(m.contains(&format!("{path}: {msg}")), "{m}");
    }
    let m = invalid(
        pvs.create(
            &pp,
            &pv(
                "bad",
                json!({"nodeAffinity": {"required": {"nodeSelectorTerms": []}}}),
            ),
        )
        .await,
        "spec.nodeAffinity.required.nodeSelectorTerms",
    );
    assert!(
        m.ends_with("must have at least one node selector term"),
        "{m}"
    );
    let local = pv(
        "local",
        json!({"csi": null, "local": {"path": "/mnt/disk"},
               "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-00000"]},
                   {"key": "rank", "operator": "Lt", "values": ["5"]}]}]}}}),
    );
    pvs.create(&pp, &local).await.unwrap();

    // Update: the source, volume mode and node affinity are immutable.
    let ppatch = PatchParams::default();
    let m = invalid(
        pvs.patch(
            "local",
            &ppatch,
            &Patch::Merge(json!({"spec": {"local": {"path": "/mnt/other"}}})),
        )
        .await,
        "spec.persistentvolumesource",
    );
    assert!(
        m.ends_with("spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"),
        "{m}"
    );
    invalid(
        pvs.patch(
            "local",
            &ppatch,
            &Patch::Merge(json!({"spec": {"volumeMode": "Block"}})),
        )
        .await,
        "volumeMode",
    );
    invalid(
        pvs.patch(
            "local",
            &ppatch,
            &Patch::Merge(json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-00001"]}]}]}}}})),
        )
        .await,
        "nodeAffinity",
    );
    // Capacity, reclaim policy and claimRef may change.
    let p = pvs
        .patch(
            "local",
            &ppatch,
            &Patch::Merge(json!({"spec": {"capacity": {"storage": "2Gi"}, "persistentVolumeReclaimPolicy": "Delete"},
                                 "status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        p.spec.as_ref().unwrap().capacity.as_ref().unwrap()["storage"].0,
        "2Gi"
    );
    assert_eq!(pv_phase(&p), "Pending", "main writes keep status");
    // /status changes only status, and needs a resourceVersion on PUT.
    let s = pvs
        .patch_status(
            "local",
            &ppatch,
            &Patch::Merge(
                json!({"spec": {"capacity": {"storage": "9Gi"}}, "status": {"phase": "Available"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(pv_phase(&s), "Available");
    assert_eq!(
        s.spec.as_ref().unwrap().capacity.as_ref().unwrap()["storage"].0,
        "2Gi"
    );
    assert!(
        s.status
            .as_ref()
            .unwrap()
            .last_phase_transition_time
            .is_some()
    );
    let mut no_rv = s.clone();
    no_rv.metadata.resource_version = None;
    invalid(
        pvs.replace_status("local", &PostParams::default(), &no_rv)
            .await,
        "resourceVersion",
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn storage_class_and_csinode_validation() {
    let (sim, client) = start(small()).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = kube_sim::storage_class_object("bad", DRIVER, None);
        f(&mut v);
        from::<StorageClass>(v)
    };
    let m = invalid(
        scs.create(&pp, &with(&|v| v["provisioner"] = json!("")))
            .await,
        "provisioner",
    );
    assert_eq!(
        m,
        "StorageClass.storage.k8s.io \"bad\" is invalid: provisioner: Required value"
    );
    invalid(
        scs.create(&pp, &with(&|v| v["provisioner"] = json!("a/b/c")))
            .await,
        "provisioner",
    );
    let m = invalid(
        scs.create(&pp, &with(&|v| v["volumeBindingMode"] = json!("Later")))
            .await,
        "volumeBindingMode",
    );
    assert!(
        m.ends_with("volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\""),
        "{m}"
    );
    invalid(
        scs.create(&pp, &with(&|v| v["reclaimPolicy"] = json!("Recycle")))
            .await,
        "reclaimPolicy",
    );
    let m = invalid(
        scs.create(
            &pp,
            &with(&|v| {
                v["allowedTopologies"] =
                    json!([{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": []}]}])
            }),
        )
        .await,
        "allowedTopologies[0].matchLabelExpressions[0].values",
    );
    assert!(
        m.ends_with("allowedTopologies[0].matchLabelExpressions[0].values: Required value"),
        "{m}"
    );
    invalid(
        scs.create(
            &pp,
            &with(&|v| {
                v["allowedTopologies"] =
                    json!([{"matchLabelExpressions": [{"key": "bad key", "values": ["a"]}]}])
            }),
        )
        .await,
        "allowedTopologies[0].matchLabelExpressions[0].key",
    );
    invalid(
        scs.create(
            &pp,
            &with(&|v| {
                v["allowedTopologies"] = json!([{"matchLabelExpressions": [
                    {"key": "zone", "values": ["a", "a"]}]}])
            }),
        )
        .await,
        "allowedTopologies[0].matchLabelExpressions[0].values[1]",
    );

    // Immutable: provisioner, parameters, volumeBindingMode, reclaimPolicy.
    let mut good = sc("good", Some("WaitForFirstConsumer"));
    good.parameters = Some([("type".to_string(), "ssd".to_string())].into());
    scs.create(&pp, &good).await.unwrap();
    let ppatch = PatchParams::default();
    for (change, field, msg) in [
        (
            json!({"provisioner": "other.csi.io"}),
            "provisioner",
            "provisioner: Forbidden: updates to provisioner are forbidden.",
        ),
        (
            json!({"parameters": {"type": "hdd"}}),
            "parameters",
            "parameters: Forbidden: updates to parameters are forbidden.",
        ),
        (
            json!({"volumeBindingMode": "Immediate"}),
            "volumeBindingMode",
            "volumeBindingMode: Invalid value: \"Immediate\": field is immutable",
        ),
        (
            json!({"reclaimPolicy": "Retain"}),
            "reclaimPolicy",
            "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
        ),
    ] {
        let m = invalid(
            scs.patch("good", &ppatch, &Patch::Merge(change)).await,
            field,
        );
        assert!(m.ends_with(msg), "{m}");
    }
    // A PUT without volumeBindingMode is defaulted to Immediate, hence a change.
    let mut put = scs.get("good").await.unwrap();
    put.volume_binding_mode = None;
    invalid(scs.replace("good", &pp, &put).await, "volumeBindingMode");
    // allowVolumeExpansion and labels may change.
    let p = scs
        .patch(
            "good",
            &ppatch,
            &Patch::Merge(
                json!({"allowVolumeExpansion": true, "metadata": {"labels": {"a": "b"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.allow_volume_expansion, Some(true));

    // CSINode.
    let nodes: Api<CSINode> = Api::all(client.clone());
    let csinode = |drivers: Value| -> CSINode {
        from(json!({"metadata": {"name": "node-00001"}, "spec": {"drivers": drivers}}))
    };
    let d = |name: &str, id: &str| json!({"name": name, "nodeID": id});
    invalid(
        nodes.create(&pp, &csinode(json!([d("", "n1")]))).await,
        "spec.drivers[0].name",
    );
    let m = invalid(
        nodes.create(&pp, &csinode(json!([d(DRIVER, "")]))).await,
        "spec.drivers[0].nodeID",
    );
    assert!(m.ends_with("spec.drivers[0].nodeID: Required value"), "{m}");
    let mut negative = d(DRIVER, "n1");
    negative["allocatable"] = json!({"count": -1});
    let m = invalid(
        nodes.create(&pp, &csinode(json!([negative]))).await,
        "spec.drivers[0].allocatable.count",
    );
    assert!(
        m.ends_with("spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0"),
        "{m}"
    );
    let m = invalid(
        nodes
            .create(&pp, &csinode(json!([d(DRIVER, "n1"), d(DRIVER, "n2")])))
            .await,
        "spec.drivers[1].name",
    );
    assert!(
        m.ends_with(&format!(
            "spec.drivers[1].name: Duplicate value: \"{DRIVER}\""
        )),
        "{m}"
    );
    let mut counted = d(DRIVER, "n1");
    counted["allocatable"] = json!({"count": 8});
    nodes
        .create(&pp, &csinode(json!([counted, d("other.csi.io", "o1")])))
        .await
        .unwrap();
    // Existing drivers keep their fields, except allocatable; strategic merge by name.
    let p = nodes
        .patch(
            "node-00001",
            &ppatch,
            &Patch::Strategic(
                json!({"spec": {"drivers": [{"name": DRIVER, "allocatable": {"count": 4}}]}}),
            ),
        )
        .await
        .unwrap();
    let drivers = p.spec.drivers;
    assert_eq!(drivers.len(), 2);
    assert_eq!(drivers[0].allocatable.as_ref().unwrap().count, Some(4));
    invalid(
        nodes
            .patch(
                "node-00001",
                &ppatch,
                &Patch::Strategic(
                    json!({"spec": {"drivers": [{"name": DRIVER, "nodeID": "changed"}]}}),
                ),
            )
            .await,
        "spec.drivers",
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn default_class_and_resize_admission() {
    let (sim, client) = start(provisioning(Duration::ZERO)).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    let mut expandable = sc("expandable", None);
    expandable.allow_volume_expansion = Some(true);
    expandable.metadata.annotations =
        Some([(DEFAULT_CLASS_ANNOTATION.to_string(), "true".to_string())].into());
    scs.create(&pp, &expandable).await.unwrap();
    scs.create(&pp, &sc("fixed", None)).await.unwrap();

    // DefaultStorageClass: an unset class gets the default; "" stays "".
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let c = pvcs.create(&pp, &pvc("grow", None, "1Gi")).await.unwrap();
    assert_eq!(
        c.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("expandable")
    );
    let c = pvcs
        .create(&pp, &pvc("none", Some(""), "1Gi"))
        .await
        .unwrap();
    assert_eq!(
        c.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("")
    );
    pvcs.create(&pp, &pvc("stuck", Some("fixed"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "grow", bound).await;
    wait_for(&pvcs, "stuck", bound).await;

    let ppatch = PatchParams::default();
    let size = |s: &str| Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": s}}}}));
    let (code, reason, msg) = api_code(pvcs.patch("stuck", &ppatch, &size("2Gi")).await);
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        msg,
        "persistentvolumeclaims \"stuck\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    let (code, _, msg) = api_code(pvcs.patch("none", &ppatch, &size("2Gi")).await);
    assert_eq!(code, 422, "an unbound claim's request is immutable: {msg}");
    let grown = pvcs.patch("grow", &ppatch, &size("2Gi")).await.unwrap();
    let spec = grown.spec.as_ref().unwrap();
    assert_eq!(
        spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
        "2Gi"
    );
    assert_eq!(
        grown.status.as_ref().unwrap().capacity.as_ref().unwrap()["storage"].0,
        "1Gi"
    );
    // Shrinking: allowed above the recorded capacity, not down to it.
    let m = invalid(
        pvcs.patch("grow", &ppatch, &size("1Gi")).await,
        "spec.resources.requests.storage",
    );
    assert!(
        m.ends_with(
            "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
        ),
        "{m}"
    );
    pvcs.patch("grow", &ppatch, &size("1536Mi")).await.unwrap();
    sim.shutdown().await;
}

/// `--disable-admission-plugins DefaultStorageClass,PersistentVolumeClaimResize`: a claim
/// without a class keeps none, and a bound claim grows whatever its class allows.
#[tokio::test]
async fn default_class_and_resize_admission_switched_off() {
    let (sim, client) = start(SimConfig {
        disable_admission_plugins: vec![
            "DefaultStorageClass".into(),
            "PersistentVolumeClaimResize".into(),
        ],
        ..provisioning(Duration::ZERO)
    })
    .await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    let mut default = sc("default", None);
    default.metadata.annotations =
        Some([(DEFAULT_CLASS_ANNOTATION.to_string(), "true".to_string())].into());
    scs.create(&pp, &default).await.unwrap();
    scs.create(&pp, &sc("fixed", None)).await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let c = pvcs
        .create(&pp, &pvc("classless", None, "1Gi"))
        .await
        .unwrap();
    assert_eq!(c.spec.as_ref().unwrap().storage_class_name, None);
    pvcs.create(&pp, &pvc("stuck", Some("fixed"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "stuck", bound).await;
    let grown = pvcs
        .patch(
            "stuck",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        grown.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0,
        "2Gi"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn wait_for_first_consumer_claim_is_provisioned_on_the_selected_node() {
    let delay = Duration::from_millis(300);
    let (sim, client) = start(provisioning(delay)).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    let mut wffc = sc("wffc", Some("WaitForFirstConsumer"));
    wffc.reclaim_policy = Some("Retain".into());
    wffc.mount_options = Some(vec!["noatime".into()]);
    scs.create(&pp, &wffc).await.unwrap();
    scs.create(&pp, &sc("now", None)).await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let mut claim = pvc("data", Some("wffc"), "5Gi");
    claim.spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteOncePod".into()]);
    let claim = pvcs.create(&pp, &claim).await.unwrap();
    let uid = claim.metadata.uid.clone().unwrap();

    // Barrier: an Immediate claim created afterwards is provisioned (after the delay) while the
    // WaitForFirstConsumer claim without a selected node is left alone.
    pvcs.create(&pp, &pvc("barrier", Some("now"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "barrier", bound).await;
    let waiting = pvcs.get("data").await.unwrap();
    assert_eq!(phase_of(&waiting), "Pending");
    assert_eq!(annotation(&waiting, STORAGE_PROVISIONER_ANNOTATION), None);
    assert_eq!(
        pvs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // Watch the claim and its future volume from now, then select a node.
    let rv = pvcs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut claim_events = pvcs
        .watch(&WatchParams::default().fields("metadata.name=data"), &rv)
        .await
        .unwrap()
        .boxed();
    let pv_name = format!("pvc-{uid}");
    let mut volume_events = pvs
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={pv_name}")),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let t0 = Instant::now();
    let patched = pvcs
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "node-00001"}}}),
            ),
        )
        .await
        .unwrap();
    let early = pvcs.get("data").await.unwrap();
    if t0.elapsed() < delay {
        assert!(!bound(&early) && early.spec.as_ref().unwrap().volume_name.is_none());
    }

    // The claim's changes, in order: the selected node, the hand-over to the provisioner, the
    // volume name with the binding annotations, the Bound status.
    let mut changes = Vec::new();
    let bound_claim = loop {
        match next_event(&mut claim_events).await {
            WatchEvent::Modified(c) => {
                changes.push(c.clone());
                if bound(&c) {
                    break c;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    let elapsed = t0.elapsed();
    assert!(
        elapsed >= delay,
        "bound after {elapsed:?}, before the delay"
    );
    assert_eq!(changes.len(), 4, "{changes:#?}");
    assert_eq!(rv_of(&changes[0]), rv_of(&patched));
    assert_eq!(
        annotation(&changes[1], STORAGE_PROVISIONER_ANNOTATION),
        Some(DRIVER)
    );
    assert_eq!(
        annotation(&changes[1], "volume.beta.kubernetes.io/storage-provisioner"),
        Some(DRIVER)
    );
    assert_eq!(
        changes[2].spec.as_ref().unwrap().volume_name.as_deref(),
        Some(pv_name.as_str())
    );
    assert_eq!(
        annotation(&changes[2], BIND_COMPLETED_ANNOTATION),
        Some("yes")
    );
    assert_eq!(
        annotation(&changes[2], BOUND_BY_CONTROLLER_ANNOTATION),
        Some("yes")
    );
    assert_eq!(phase_of(&changes[2]), "Pending");
    let st = bound_claim.status.as_ref().unwrap();
    assert_eq!(st.access_modes, Some(vec!["ReadWriteOncePod".to_string()]));
    assert_eq!(st.capacity.as_ref().unwrap()["storage"].0, "5Gi");

    // The volume: created Pending between the hand-over and the binding, then Bound.
    let created = match next_event(&mut volume_events).await {
        WatchEvent::Added(v) => v,
        other => panic!("unexpected {other:?}"),
    };
    let bound_volume = match next_event(&mut volume_events).await {
        WatchEvent::Modified(v) => v,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(pv_phase(&created), "Pending");
    assert_eq!(pv_phase(&bound_volume), "Bound");
    let order = [
        rv_of(&changes[1]),
        rv_of(&created),
        rv_of(&bound_volume),
        rv_of(&changes[2]),
        rv_of(&changes[3]),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert_eq!(
        annotation(&created, PROVISIONED_BY_ANNOTATION),
        Some(DRIVER)
    );
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "5Gi");
    assert_eq!(
        spec.access_modes,
        Some(vec!["ReadWriteOncePod".to_string()])
    );
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("wffc"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    assert_eq!(spec.mount_options, Some(vec!["noatime".to_string()]));
    let csi = spec.csi.as_ref().unwrap();
    assert_eq!(csi.driver, DRIVER);
    assert!(!csi.volume_handle.is_empty());
    let r = spec.claim_ref.as_ref().unwrap();
    assert_eq!(
        (
            r.kind.as_deref(),
            r.namespace.as_deref(),
            r.name.as_deref(),
            r.uid.as_deref(),
            r.api_version.as_deref()
        ),
        (
            Some("PersistentVolumeClaim"),
            Some("default"),
            Some("data"),
            Some(uid.as_str()),
            Some("v1")
        )
    );
    assert_eq!(
        serde_json::to_value(spec.node_affinity.as_ref().unwrap()).unwrap(),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-00001"]}]}]}})
    );
    // The Immediate barrier's volume has no node affinity.
    let barrier = pvcs.get("barrier").await.unwrap();
    let bv = pvs
        .get(barrier.spec.unwrap().volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert!(bv.spec.unwrap().node_affinity.is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn topology_of_provisioned_volumes() {
    let (sim, client) = start(provisioning(Duration::ZERO)).await;
    let nodes: Api<Node> = Api::all(client.clone());
    for (node, zone) in [
        ("node-00000", "zone-a"),
        ("node-00001", "zone-b"),
        ("node-00002", "zone-c"),
    ] {
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}}),
                ),
            )
            .await
            .unwrap();
    }
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    let zones = json!([{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-a", "zone-b"]}]}]);
    let mut zonal = sc("zonal", Some("WaitForFirstConsumer"));
    zonal.allowed_topologies = Some(from(zones.clone()));
    scs.create(&pp, &zonal).await.unwrap();
    let mut pinned = sc("pinned", None);
    pinned.allowed_topologies = Some(from(zones));
    scs.create(&pp, &pinned).await.unwrap();

    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let selected = |node: &str| {
        let mut c = kube_sim::pvc_object("default", "", Some("zonal"), "1Gi");
        c["metadata"]["annotations"] = json!({SELECTED_NODE_ANNOTATION: node});
        c
    };
    let mut outside = selected("node-00002");
    outside["metadata"]["name"] = json!("outside");
    pvcs.create(&pp, &from(outside)).await.unwrap();
    let mut inside = selected("node-00001");
    inside["metadata"]["name"] = json!("inside");
    pvcs.create(&pp, &from(inside)).await.unwrap();
    let c = wait_for(&pvcs, "inside", bound).await;
    let v = pvs
        .get(c.spec.unwrap().volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(v.spec.unwrap().node_affinity).unwrap(),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]}})
    );
    // The claim on a node outside the allowed topologies was handed over but got no volume
    // (it was synced before "inside", which is bound).
    let o = pvcs.get("outside").await.unwrap();
    assert_eq!(annotation(&o, STORAGE_PROVISIONER_ANNOTATION), Some(DRIVER));
    assert!(!bound(&o) && o.spec.unwrap().volume_name.is_none());

    // Immediate: the class's first allowed topology term.
    pvcs.create(&pp, &pvc("early", Some("pinned"), "1Gi"))
        .await
        .unwrap();
    let c = wait_for(&pvcs, "early", bound).await;
    let v = pvs
        .get(c.spec.unwrap().volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(v.spec.unwrap().node_affinity).unwrap(),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}]}]}})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn claims_left_alone_until_their_class_exists() {
    let (sim, client) = start(provisioning(Duration::ZERO)).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    scs.create(&pp, &sc("now", None)).await.unwrap();
    pvcs.create(&pp, &pvc("ghost", Some("later"), "1Gi"))
        .await
        .unwrap();
    let mut named = pvc("named", Some("now"), "1Gi");
    named.spec.as_mut().unwrap().volume_name = Some("somewhere".into());
    pvcs.create(&pp, &named).await.unwrap();
    let mut local = sc("local", Some("WaitForFirstConsumer"));
    local.provisioner = kube_sim::NO_PROVISIONER.into();
    scs.create(&pp, &local).await.unwrap();
    let mut manual = kube_sim::pvc_object("default", "manual", Some("local"), "1Gi");
    manual["metadata"]["annotations"] = json!({SELECTED_NODE_ANNOTATION: "node-00000"});
    pvcs.create(&pp, &from(manual)).await.unwrap();
    // Barrier: a later claim is provisioned; the earlier ones were not touched.
    pvcs.create(&pp, &pvc("barrier", Some("now"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "barrier", bound).await;
    for name in ["ghost", "named", "manual"] {
        let c = pvcs.get(name).await.unwrap();
        assert_eq!(phase_of(&c), "Pending", "{name}");
        assert_eq!(
            annotation(&c, STORAGE_PROVISIONER_ANNOTATION),
            None,
            "{name}"
        );
    }
    assert_eq!(
        pvs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    // Once the class exists the claim is provisioned.
    scs.create(&pp, &sc("later", None)).await.unwrap();
    wait_for(&pvcs, "ghost", bound).await;
    sim.shutdown().await;
}

#[tokio::test]
async fn never_provisions_but_binds_pre_bound_volumes() {
    let (sim, client) = start(SimConfig {
        provisioner: Provisioner::Never,
        ..small()
    })
    .await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    scs.create(&pp, &sc("now", None)).await.unwrap();
    pvcs.create(&pp, &pvc("waits", Some("now"), "1Gi"))
        .await
        .unwrap();
    // The PV controller hands the claim over...
    let c = wait_for(&pvcs, "waits", |c| {
        annotation(c, STORAGE_PROVISIONER_ANNOTATION).is_some()
    })
    .await;
    assert_eq!(phase_of(&c), "Pending");
    // ...and binds a claim a volume is pre-bound to (a static volume, no class): that happens
    // after the first claim was synced, which got no volume.
    let claim = pvcs
        .create(&pp, &pvc("static", Some(""), "1Gi"))
        .await
        .unwrap();
    let prebound = pv(
        "static-pv",
        json!({"capacity": {"storage": "2Gi"},
               "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "static"}}),
    );
    pvs.create(&pp, &prebound).await.unwrap();
    let c = wait_for(&pvcs, "static", bound).await;
    assert_eq!(
        c.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("static-pv")
    );
    assert_eq!(
        c.status.as_ref().unwrap().capacity.as_ref().unwrap()["storage"].0,
        "2Gi"
    );
    // The controller set the claim's volumeName, not the volume's claimRef (its user did): the
    // claim is marked bound by the controller, the volume is not (`IsVolumeBoundToClaim`).
    assert_eq!(annotation(&c, BOUND_BY_CONTROLLER_ANNOTATION), Some("yes"));
    assert_eq!(annotation(&c, BIND_COMPLETED_ANNOTATION), Some("yes"));
    let v = pvs.get("static-pv").await.unwrap();
    assert_eq!(pv_phase(&v), "Bound");
    assert_eq!(annotation(&v, BOUND_BY_CONTROLLER_ANNOTATION), None);
    assert_eq!(v.spec.unwrap().claim_ref.unwrap().uid, claim.metadata.uid);
    let w = pvcs.get("waits").await.unwrap();
    assert_eq!(phase_of(&w), "Pending");
    assert!(w.spec.unwrap().volume_name.is_none());
    assert_eq!(
        pvs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    sim.shutdown().await;
}

/// A claim named `name` of no class asking for `size` and naming the volume `volume`.
fn naming(name: &str, volume: &str, size: &str) -> PersistentVolumeClaim {
    let mut c = pvc(name, Some(""), size);
    c.spec.as_mut().unwrap().volume_name = Some(volume.into());
    c
}

fn volume_name(c: &PersistentVolumeClaim) -> Option<&str> {
    c.spec.as_ref().and_then(|s| s.volume_name.as_deref())
}

fn claim_ref_name(v: &PersistentVolume) -> Option<String> {
    v.spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|r| r.name.clone())
}

#[tokio::test]
async fn claims_naming_a_volume_are_bound_to_it_as_the_pv_controller_does() {
    let (sim, client) = start(SimConfig {
        provisioner: Provisioner::Never,
        ..small()
    })
    .await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();

    // An unclaimed volume and a claim naming it: the controller sets the volume's claimRef (and
    // marks the volume), completes the claim's binding (without marking it: its user named the
    // volume), each step its own write.
    pvs.create(&pp, &pv("free", json!({"capacity": {"storage": "2Gi"}})))
        .await
        .unwrap();
    wait_for(&pvs, "free", |v| pv_phase(v) == "Available").await;
    let created = pvcs
        .create(&pp, &naming("wants-free", "free", "1Gi"))
        .await
        .unwrap();
    let mut changes = pvcs
        .watch(
            &WatchParams::default().fields("metadata.name=wants-free"),
            &created.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let completed = match next_event(&mut changes).await {
        WatchEvent::Modified(c) => c,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(
        annotation(&completed, BIND_COMPLETED_ANNOTATION),
        Some("yes")
    );
    assert_eq!(annotation(&completed, BOUND_BY_CONTROLLER_ANNOTATION), None);
    assert_eq!(phase_of(&completed), "Pending");
    let c = match next_event(&mut changes).await {
        WatchEvent::Modified(c) => c,
        other => panic!("unexpected {other:?}"),
    };
    assert!(bound(&c), "{c:?}");
    assert_eq!(volume_name(&c), Some("free"));
    let st = c.status.as_ref().unwrap();
    assert_eq!(st.capacity.as_ref().unwrap()["storage"].0, "2Gi");
    assert_eq!(st.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    let v = pvs.get("free").await.unwrap();
    assert_eq!(pv_phase(&v), "Bound");
    assert_eq!(annotation(&v, BOUND_BY_CONTROLLER_ANNOTATION), Some("yes"));
    let r = v.spec.unwrap().claim_ref.unwrap();
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref(), r.uid),
        (
            Some("default"),
            Some("wants-free"),
            created.metadata.uid.clone()
        )
    );

    // Pre-bound both ways (the volume's claimRef without UID, the claim's volumeName): bound,
    // neither marked as bound by the controller.
    pvs.create(
        &pp,
        &pv(
            "mutual",
            json!({"claimRef": {"namespace": "default", "name": "mutual"}}),
        ),
    )
    .await
    .unwrap();
    let mutual = pvcs
        .create(&pp, &naming("mutual", "mutual", "1Gi"))
        .await
        .unwrap();
    let c = wait_for(&pvcs, "mutual", bound).await;
    assert_eq!(annotation(&c, BIND_COMPLETED_ANNOTATION), Some("yes"));
    assert_eq!(annotation(&c, BOUND_BY_CONTROLLER_ANNOTATION), None);
    let v = pvs.get("mutual").await.unwrap();
    assert_eq!(pv_phase(&v), "Bound");
    assert_eq!(annotation(&v, BOUND_BY_CONTROLLER_ANNOTATION), None);
    assert_eq!(v.spec.unwrap().claim_ref.unwrap().uid, mutual.metadata.uid);

    // Claims that cannot be bound stay Pending: their volume does not exist, is claimed by
    // another claim, or does not satisfy them (too small, another class, another access mode).
    pvs.create(
        &pp,
        &pv(
            "taken",
            json!({"claimRef": {"namespace": "default", "name": "owner"}}),
        ),
    )
    .await
    .unwrap();
    pvs.create(&pp, &pv("small", json!({}))).await.unwrap();
    pvs.create(&pp, &pv("classy", json!({"storageClassName": "gold"})))
        .await
        .unwrap();
    pvs.create(&pp, &pv("single", json!({"accessModes": ["ReadOnlyMany"]})))
        .await
        .unwrap();
    for (claim, volume, size) in [
        ("early", "later", "1Gi"),
        ("thief", "taken", "1Gi"),
        ("big", "small", "2Gi"),
        ("plain", "classy", "1Gi"),
        ("writer", "single", "1Gi"),
    ] {
        pvcs.create(&pp, &naming(claim, volume, size))
            .await
            .unwrap();
    }
    // Barrier: a claim created afterwards is bound, so the earlier ones were synced.
    pvs.create(&pp, &pv("barrier", json!({}))).await.unwrap();
    pvcs.create(&pp, &naming("barrier", "barrier", "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "barrier", bound).await;
    for name in ["early", "thief", "big", "plain", "writer"] {
        let c = pvcs.get(name).await.unwrap();
        assert_eq!(phase_of(&c), "Pending", "{name}");
        assert_eq!(annotation(&c, BIND_COMPLETED_ANNOTATION), None, "{name}");
        assert!(c.status.as_ref().unwrap().capacity.is_none(), "{name}");
    }
    for name in ["small", "classy", "single"] {
        let v = pvs.get(name).await.unwrap();
        assert_eq!(pv_phase(&v), "Available", "{name}");
        assert_eq!(claim_ref_name(&v), None, "{name}");
    }
    let taken = pvs.get("taken").await.unwrap();
    assert_eq!(claim_ref_name(&taken).as_deref(), Some("owner"));
    assert_eq!(
        pv_phase(&taken),
        "Available",
        "pre-bound to a claim that does not exist"
    );

    // The named volume appears: the claim is bound to it.
    pvs.create(&pp, &pv("later", json!({}))).await.unwrap();
    let c = wait_for(&pvcs, "early", bound).await;
    assert_eq!(volume_name(&c), Some("later"));
    assert_eq!(
        claim_ref_name(&pvs.get("later").await.unwrap()).as_deref(),
        Some("early")
    );

    // The claimed volume is released by its user (claimRef cleared): the claim takes it.
    pvs.patch(
        "taken",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    wait_for(&pvcs, "thief", bound).await;
    assert_eq!(
        claim_ref_name(&pvs.get("taken").await.unwrap()).as_deref(),
        Some("thief")
    );
    assert_eq!(
        pvs.list(&ListParams::default()).await.unwrap().items.len(),
        8,
        "nothing provisioned"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn claims_naming_a_volume_are_not_provisioned_and_lost_when_it_is_claimed_elsewhere() {
    let (sim, client) = start(provisioning(Duration::ZERO)).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    scs.create(&pp, &sc("now", None)).await.unwrap();
    // A claim of a provisioning class naming a volume of that class: bound to it, nothing
    // handed to the provisioner.
    pvs.create(&pp, &pv("static", json!({"storageClassName": "now"})))
        .await
        .unwrap();
    let mut claim = pvc("named", Some("now"), "1Gi");
    claim.spec.as_mut().unwrap().volume_name = Some("static".into());
    pvcs.create(&pp, &claim).await.unwrap();
    let c = wait_for(&pvcs, "named", bound).await;
    assert_eq!(volume_name(&c), Some("static"));
    assert_eq!(annotation(&c, STORAGE_PROVISIONER_ANNOTATION), None);
    // A claim naming a missing volume of that class is not provisioned either.
    let mut claim = pvc("waits", Some("now"), "1Gi");
    claim.spec.as_mut().unwrap().volume_name = Some("nowhere".into());
    pvcs.create(&pp, &claim).await.unwrap();
    pvcs.create(&pp, &pvc("barrier", Some("now"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "barrier", bound).await;
    let w = pvcs.get("waits").await.unwrap();
    assert_eq!(phase_of(&w), "Pending");
    assert_eq!(annotation(&w, STORAGE_PROVISIONER_ANNOTATION), None);
    assert_eq!(
        pvs.list(&ListParams::default()).await.unwrap().items.len(),
        2,
        "the static volume and the barrier's"
    );
    // The bound claim's volume is given to another claim (UID): the claim is Lost
    // (`syncBoundClaim`'s misbound claim) and the volume, its claim gone, Released.
    pvs.patch(
        "static",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"claimRef": {"namespace": "default", "name": "other", "uid": "other-uid"}}}),
        ),
    )
    .await
    .unwrap();
    let c = wait_for(&pvcs, "named", |c| phase_of(c) == "Lost").await;
    assert_eq!(volume_name(&c), Some("static"));
    assert!(c.status.unwrap().capacity.is_none());
    wait_for(&pvs, "static", |v| pv_phase(v) == "Released").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn deleted_volumes_lose_claims_and_deleted_claims_release_volumes() {
    let delay = Duration::from_millis(50);
    let (sim, client) = start(provisioning(delay)).await;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    scs.create(&pp, &sc("now", None)).await.unwrap();
    for name in ["lost", "released"] {
        pvcs.create(&pp, &pvc(name, Some("now"), "1Gi"))
            .await
            .unwrap();
    }
    let lost = wait_for(&pvcs, "lost", bound).await;
    let released = wait_for(&pvcs, "released", bound).await;

    // A bound claim whose volume is deleted becomes Lost.
    let lost_pv = lost.spec.unwrap().volume_name.unwrap();
    pvs.delete(&lost_pv, &DeleteParams::default())
        .await
        .unwrap();
    let c = wait_for(&pvcs, "lost", |c| phase_of(c) == "Lost").await;
    assert_eq!(c.spec.unwrap().volume_name, Some(lost_pv));
    assert!(c.status.unwrap().capacity.is_none());

    // A deleted claim releases its volume, which (reclaim policy Delete) is then deleted.
    let pv_name = released.spec.unwrap().volume_name.unwrap();
    let rv = pvs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = pvs
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={pv_name}")),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let t0 = Instant::now();
    pvcs.delete("released", &DeleteParams::default())
        .await
        .unwrap();
    match next_event(&mut events).await {
        WatchEvent::Modified(v) => assert_eq!(pv_phase(&v), "Released"),
        other => panic!("unexpected {other:?}"),
    }
    match next_event(&mut events).await {
        WatchEvent::Deleted(_) => assert!(t0.elapsed() >= delay),
        other => panic!("unexpected {other:?}"),
    }
    sim.shutdown().await;
}

fn kubectl_path() -> Option<&'static str> {
    ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_storage_objects() {
    let Some(kubectl) = kubectl_path() else {
        eprintln!("NOTICE: kubectl not found; skipping kubectl_lists_storage_objects");
        return;
    };
    let (sim, client) = start(provisioning(Duration::ZERO)).await;
    let dir = std::env::temp_dir().join(format!("kube-sim-storage-{}", sim.addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let cache = dir.join("cache");
    let run = |args: Vec<String>| {
        let mut cmd = std::process::Command::new(kubectl);
        cmd.arg("--kubeconfig")
            .arg(&kc)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args);
        async move {
            let out = tokio::task::spawn_blocking(move || cmd.output().expect("kubectl runs"))
                .await
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let manifest = dir.join("storage.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\nprovisioner: {DRIVER}\n---\n\
             apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: default\n\
             spec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: fast\n  resources:\n    requests:\n      storage: 1Gi\n"
        ),
    )
    .unwrap();
    let m = manifest.to_str().unwrap().to_string();
    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), m.clone()]).await;
    assert!(
        ok && out.contains("storageclass.storage.k8s.io/fast created")
            && out.contains("persistentvolumeclaim/data created"),
        "{out} {err}"
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let c = wait_for(&pvcs, "data", bound).await;
    let pv_name = c.spec.unwrap().volume_name.unwrap();
    let nodes: Api<CSINode> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "node-00000"}, "spec": {"drivers": [{"name": DRIVER, "nodeID": "n0"}]}})),
        )
        .await
        .unwrap();
    for (what, want) in [
        ("sc", "fast".to_string()),
        ("pvc", "data".to_string()),
        ("persistentvolumeclaims", "data".to_string()),
        ("pv", pv_name.clone()),
        ("csinodes", "node-00000".to_string()),
    ] {
        let (ok, out, err) = run(vec!["get".into(), what.into()]).await;
        assert!(ok && out.contains(&want), "kubectl get {what}: {out} {err}");
    }
    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), m]).await;
    assert!(
        ok && out.contains("persistentvolumeclaim/data unchanged"),
        "{out} {err}"
    );
    let (ok, out, err) = run(vec!["delete".into(), "pvc".into(), "data".into()]).await;
    assert!(ok && out.contains("deleted"), "{out} {err}");
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

#[tokio::test]
async fn binary_provisioner_flags() {
    let bin = env!("CARGO_BIN_EXE_kube-sim");
    // The two flags exclude each other.
    let out = std::process::Command::new(bin)
        .args(["--provisioner-delay", "1s", "--provisioner-never"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = std::process::Command::new(bin)
        .args(["--port", "0", "--provisioner-delay", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--provisioner-delay"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = std::env::temp_dir().join(format!("kube-sim-bin-storage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc_path = dir.join("kubeconfig");
    let mut child = std::process::Command::new(bin)
        .args(["--port", "0", "--nodes", "2", "--provisioner-delay", "20ms"])
        .arg("--kubeconfig-out")
        .arg(&kc_path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let yaml = eventually(|| async {
        std::fs::read_to_string(&kc_path)
            .ok()
            .filter(|s| s.contains("current-context"))
    })
    .await;
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let scs: Api<StorageClass> = Api::all(client.clone());
    scs.create(&PostParams::default(), &sc("now", None))
        .await
        .unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    pvcs.create(&PostParams::default(), &pvc("data", Some("now"), "1Gi"))
        .await
        .unwrap();
    wait_for(&pvcs, "data", bound).await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
