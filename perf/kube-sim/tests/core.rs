//! The `kube` client against the simulator: discovery, CRUD, optimistic concurrency, selectors,
//! patches, status subresources, bindings, leases and the NodeShard CRD.

use crate::common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube_sim::SimConfig;
use serde_json::json;

#[tokio::test]
async fn discovery_and_seeded_nodes() {
    let (sim, client) = start(small()).await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "34"));
    let d = kube::Discovery::new(client.clone()).run().await.unwrap();
    let groups: Vec<String> = d.groups().map(|g| g.name().to_string()).collect();
    for g in [
        "",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
    ] {
        assert!(groups.iter().any(|x| x == g), "{g} missing from {groups:?}");
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["node-00000", "node-00001", "node-00002"]);
    let n = &list.items[0];
    assert_eq!(n.metadata.labels.as_ref().unwrap()["type"], "kwok");
    let st = n.status.as_ref().unwrap();
    assert_eq!(st.allocatable.as_ref().unwrap()["cpu"].0, "32");
    assert_eq!(st.allocatable.as_ref().unwrap()["pods"].0, "110");
    assert!(
        st.conditions
            .as_ref()
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert!(
        list.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in ["default", "kube-system", "volcano-system"] {
        nss.get(ns).await.unwrap();
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn create_get_conflicts_and_delete() {
    let (sim, client) = start(small()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let (code, reason, msg) = api_code(cms.create(&PostParams::default(), &cm).await);
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    // An invalid object is refused as invalid whatever its name: the real server validates
    // before its storage finds the name taken.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = |image: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("busybox"))
        .await
        .unwrap();
    let (code, reason, msg) = api_code(pods.create(&PostParams::default(), &pod("")).await);
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (
            422,
            "Invalid",
            "Pod \"p\" is invalid: spec.containers[0].image: Required value"
        )
    );
    let (code, reason, _) = api_code(pods.create(&PostParams::default(), &pod("busybox")).await);
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    // PUT with the current version succeeds, the old version then conflicts.
    let mut upd = created.clone();
    upd.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &upd)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let (code, reason, msg) = api_code(cms.replace("a", &PostParams::default(), &upd).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.contains("the object has been modified"), "{msg}");

    // generateName, missing namespace, missing object.
    cm.metadata.name = None;
    cm.metadata.generate_name = Some("gen-".into());
    let g = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert!(g.metadata.name.unwrap().starts_with("gen-"));
    // A long base is cut to 58 characters (the generated name fits 63).
    cm.metadata.generate_name = Some(format!("{}-", "g".repeat(70)));
    let g = cms.create(&PostParams::default(), &cm).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert_eq!(name.len(), 63, "{name}");
    assert!(name.starts_with(&"g".repeat(58)), "{name}");
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    cm.metadata.name = Some("x".into());
    let (code, _, msg) = api_code(other.create(&PostParams::default(), &cm).await);
    assert_eq!((code, msg.as_str()), (404, "namespaces \"nope\" not found"));
    let (code, reason, _) = api_code(cms.get("missing").await);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        api_code(cms.delete("a", &DeleteParams::default()).await).0,
        404
    );
    assert_eq!(api_code(cms.get("a").await).0, 404);
    let writes = sim.writes();
    assert_eq!(
        writes
            .iter()
            .filter(|w| w.verb == "delete" && w.resource == "configmaps")
            .count(),
        2
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn binding_rules_and_records() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = pods
        .create(&PostParams::default(), &pod("p1", "magma"))
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    sim.clear_records();

    let ok = bind(&pods, "p1", "node-00001").await.unwrap();
    assert_eq!(ok.code, 201);
    let bound = pods.get("p1").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-00001")
    );
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );

    let (code, reason, msg) = api_code(bind(&pods, "p1", "node-00002").await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        msg,
        "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is already assigned to node \"node-00001\""
    );
    let (code, reason, _) = api_code(bind(&pods, "ghost", "node-00001").await);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));

    // UID precondition and empty target.
    pods.create(&PostParams::default(), &pod("p2", "magma"))
        .await
        .unwrap();
    let wrong = binding("p2", "node-00000", Some("not-the-uid".into()));
    let r: Result<kube::core::Status, _> = pods
        .create_subresource("binding", "p2", &PostParams::default(), &wrong)
        .await;
    assert_eq!(api_code(r).0, 409);
    let (code, reason, _) = api_code(bind(&pods, "p2", "").await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));

    // A gated pod cannot be bound.
    let mut gated = pod("p3", "magma");
    gated.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "wait".into(),
        }]);
    pods.create(&PostParams::default(), &gated).await.unwrap();
    let (code, _, msg) = api_code(bind(&pods, "p3", "node-00000").await);
    assert_eq!(code, 409);
    assert!(
        msg.ends_with("pod p3 has non-empty .spec.schedulingGates"),
        "{msg}"
    );

    // spec.nodeName cannot be set by an update.
    let mut sneaky = pods.get("p2").await.unwrap();
    sneaky.spec.as_mut().unwrap().node_name = Some("node-00000".into());
    assert_eq!(
        api_code(pods.replace("p2", &PostParams::default(), &sneaky).await).0,
        422
    );

    let b = sim.bindings();
    assert_eq!(b.len(), 1, "bound exactly once: {b:?}");
    assert_eq!(
        (b[0].name.as_str(), b[0].node.as_str()),
        ("p1", "node-00001")
    );
    assert_eq!(b[0].uid, p.metadata.uid.unwrap());
    let bind_writes: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|w| w.resource == "pods/binding")
        .collect();
    let codes: Vec<u16> = bind_writes.iter().map(|w| w.code).collect();
    assert_eq!(codes, [201, 409, 404, 409, 422, 409]);
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_status_patches_merge_conditions() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", "magma"))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let cond = |t: &str, s: &str, r: &str| json!({"type": t, "status": s, "reason": r});

    let strategic =
        json!({"status": {"conditions": [cond("PodScheduled", "False", "Unschedulable")]}});
    pods.patch_status("p", &pp, &Patch::Strategic(&strategic))
        .await
        .unwrap();
    let strategic = json!({"status": {"conditions": [cond("Custom", "True", "X")]}});
    let p = pods
        .patch_status("p", &pp, &Patch::Strategic(&strategic))
        .await
        .unwrap();
    let conds = p.status.as_ref().unwrap().conditions.clone().unwrap();
    assert_eq!(conds.len(), 2, "merged by type: {conds:?}");
    let strategic =
        json!({"status": {"conditions": [cond("PodScheduled", "False", "SchedulerError")]}});
    let p = pods
        .patch_status("p", &pp, &Patch::Strategic(&strategic))
        .await
        .unwrap();
    let conds = p.status.as_ref().unwrap().conditions.clone().unwrap();
    assert_eq!(conds.len(), 2);
    assert_eq!(conds[0].reason.as_deref(), Some("SchedulerError"));

    // A merge patch replaces the list; spec changes through /status are ignored.
    let merge = json!({"spec": {"nodeName": "node-00000"}, "status": {"conditions": [cond("Only", "True", "Y")]}});
    let p = pods
        .patch_status("p", &pp, &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(
        p.status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(p.spec.as_ref().unwrap().node_name, None);
    // Main-resource patches ignore status.
    let merge = json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Running"}});
    let p = pods.patch("p", &pp, &Patch::Merge(&merge)).await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(p.metadata.labels.unwrap()["a"], "b");
    // JSON patch and a stale resourceVersion inside a patch.
    let jp = json!([{"op": "add", "path": "/metadata/labels/c", "value": "d"}]);
    let req = http::Request::patch("/api/v1/namespaces/default/pods/p")
        .header("content-type", "application/json-patch+json")
        .body(serde_json::to_vec(&jp).unwrap())
        .unwrap();
    let p: Pod = client.request(req).await.unwrap();
    assert_eq!(p.metadata.labels.unwrap()["c"], "d");
    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"e": "f"}}});
    assert_eq!(
        api_code(pods.patch("p", &pp, &Patch::Merge(&stale)).await).0,
        409
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn field_and_label_selectors() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, sched) in [("a", "magma"), ("b", "magma"), ("c", "other")] {
        let mut p = pod(name, sched);
        p.metadata.labels = Some([("app".to_string(), name.to_string())].into());
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    bind(&pods, "b", "node-00000").await.unwrap();
    let all: Api<Pod> = Api::all(client.clone());
    let names = |l: kube::api::ObjectList<Pod>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let pending = all
        .list(&ListParams::default().fields("spec.schedulerName=magma,spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(names(pending), ["a"]);
    let bound = all
        .list(&ListParams::default().fields("spec.nodeName!="))
        .await
        .unwrap();
    assert_eq!(names(bound), ["b"]);
    let on_node = all
        .list(&ListParams::default().fields("spec.nodeName==node-00000,status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(names(on_node), ["b"]);
    let sel = all
        .list(&ListParams::default().labels("app in (a,c),app!=c"))
        .await
        .unwrap();
    assert_eq!(names(sel), ["a"]);
    let paged = all.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(names(paged.clone()), ["a"]);
    assert!(paged.metadata.continue_.is_some());
    assert_eq!(paged.metadata.remaining_item_count, Some(2));
    let (code, reason, _) = api_code(
        all.list(&ListParams::default().fields("spec.bogus=x"))
            .await,
    );
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    sim.shutdown().await;
}

#[tokio::test]
async fn leases_use_resource_version_preconditions() {
    let (sim, client) = start(small()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "volcano-system");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "agent-scheduler"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}}))
    .unwrap();
    let l1 = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut mine = l1.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let l2 = leases
        .replace("agent-scheduler", &PostParams::default(), &mine)
        .await
        .unwrap();
    assert_eq!(l2.spec.unwrap().holder_identity.as_deref(), Some("b"));
    let mut theirs = l1.clone();
    theirs.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let (code, reason, _) = api_code(
        leases
            .replace("agent-scheduler", &PostParams::default(), &theirs)
            .await,
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    sim.shutdown().await;
}

fn nodeshard_api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("shard.volcano.sh", "v1alpha1", "NodeShard"),
        "nodeshards",
    );
    Api::all_with(client.clone(), &ar)
}

#[tokio::test]
async fn nodeshard_crd_and_status_subresource() {
    let (sim, client) = start(small()).await;
    let shards = nodeshard_api(&client);
    assert_eq!(api_code(shards.list(&ListParams::default()).await).0, 404);

    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/shard.volcano.sh_nodeshards.yaml"
    ))
    .unwrap();
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&yaml).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    let conds = created.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let d = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(d.groups().any(|g| g.name() == "shard.volcano.sh"));

    let shard: DynamicObject = serde_json::from_value(json!({"apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
        "metadata": {"name": "shard-a"}, "spec": {"nodesDesired": ["node-00000"]}, "status": {"nodesInUse": ["ignored"]}}))
    .unwrap();
    let s = shards.create(&PostParams::default(), &shard).await.unwrap();
    assert_eq!(s.metadata.generation, Some(1));
    assert!(s.data.get("status").is_none(), "status dropped on create");

    // /status writes change only status.
    let mut st = s.clone();
    st.data["spec"] = json!({"nodesDesired": ["changed"]});
    st.data["status"] =
        json!({"nodesInUse": ["node-00000"], "lastUpdateTime": "2026-01-01T00:00:00Z"});
    let s2 = shards
        .replace_status("shard-a", &PostParams::default(), &st)
        .await
        .unwrap();
    assert_eq!(s2.data["spec"]["nodesDesired"], json!(["node-00000"]));
    assert_eq!(s2.data["status"]["nodesInUse"], json!(["node-00000"]));
    assert_eq!(s2.metadata.generation, Some(1));
    // Main writes ignore status and bump generation on spec changes.
    let patch = json!({"spec": {"nodesDesired": ["node-00001"]}, "status": {"nodesInUse": []}});
    let s3 = shards
        .patch("shard-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(s3.data["status"]["nodesInUse"], json!(["node-00000"]));
    assert_eq!(s3.metadata.generation, Some(2));
    let s4 = shards
        .patch_status(
            "shard-a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"nodesToAdd": ["x"]}})),
        )
        .await
        .unwrap();
    assert_eq!(s4.data["status"]["nodesToAdd"], json!(["x"]));
    // Strategic merge is not allowed on custom resources.
    let r = shards
        .patch(
            "shard-a",
            &PatchParams::default(),
            &Patch::Strategic(&json!({"spec": {}})),
        )
        .await;
    assert_eq!(api_code(r).0, 415);

    crds.delete("nodeshards.shard.volcano.sh", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_code(shards.get("shard-a").await).0, 404);
    sim.shutdown().await;
}

/// Pod writes are computed outside the state lock and written if the version they read is still
/// current: concurrent patches of one pod must each land (none computed on a version another
/// replaced), and of concurrent PUTs naming the same `resourceVersion` exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pod_writes_lose_nothing_and_conflict_once() {
    let (_sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", "magma"))
        .await
        .unwrap();
    let n = 32;
    let patches = (0..n).map(|i| {
        let pods = pods.clone();
        async move {
            let status = json!({"status": {"conditions": [
                {"type": format!("C{i}"), "status": "True", "reason": "R"}]}});
            let labels = json!({"metadata": {"labels": {format!("l{i}"): "v"}}});
            pods.patch_status("p", &PatchParams::default(), &Patch::Strategic(&status))
                .await
                .unwrap();
            pods.patch("p", &PatchParams::default(), &Patch::Merge(&labels))
                .await
                .unwrap();
        }
    });
    futures::future::join_all(patches).await;
    let p = pods.get("p").await.unwrap();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let conds = p.status.clone().unwrap().conditions.unwrap_or_default();
    for i in 0..n {
        assert!(labels.contains_key(&format!("l{i}")), "label l{i} lost");
        assert!(
            conds.iter().any(|c| c.type_ == format!("C{i}")),
            "condition C{i} lost"
        );
    }

    let puts = (0..8).map(|i| {
        let pods = pods.clone();
        let mut p = p.clone();
        async move {
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("winner".into(), format!("w{i}"));
            match pods.replace("p", &PostParams::default(), &p).await {
                Ok(_) => 200,
                r => api_code(r).0,
            }
        }
    });
    let mut codes = futures::future::join_all(puts).await;
    codes.sort_unstable();
    assert_eq!(codes, [200, 409, 409, 409, 409, 409, 409, 409], "{codes:?}");
}
