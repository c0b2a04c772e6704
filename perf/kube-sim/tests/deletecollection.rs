//! DeleteCollection (`DELETE` on a collection, verb `deletecollection`) as the real server's
//! `Store.DeleteCollection` and its handler serve it, through the `kube` client
//! (`Api::delete_collection`), plain HTTP and `kubectl delete --raw`: the selectors choose what
//! goes, each object is deleted as a single DELETE deletes it (the same watch events, graceful
//! deletion, finalizers, preconditions per object, the kubelet finishing terminating pods), the
//! answer is the list as listed, `limit` deletes one page and hands out its continue token, the
//! query is validated as a list's, the all-namespaces path and namespaces have no such verb,
//! and the request and write records name it.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy, WatchEvent, WatchParams};
use kube_sim::{SimConfig, SimHandle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A pod in `ns` with `labels`, bound to `node` (and then Running) when given, with
/// `finalizers` when given; the created object.
async fn create(
    sim: &SimHandle,
    ns: &str,
    name: &str,
    labels: Value,
    node: Option<&str>,
    finalizers: Option<Value>,
) -> Value {
    let mut p = kube_sim::pod_object(ns, name, "s", "100m", "64Mi");
    p["metadata"]["labels"] = labels;
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if let Some(f) = finalizers {
        p["metadata"]["finalizers"] = f;
    }
    let (code, got) = curl(
        sim,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods"),
        None,
        Some(&p),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    if node.is_some() {
        eventually(|| async {
            let p = sim.get("v1", "pods", ns, name).ok()?;
            (p["status"]["phase"] == "Running").then_some(())
        })
        .await;
    }
    got
}

/// The names of a list's items.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// The names of the pods in `ns`.
fn pods_in(sim: &SimHandle, ns: &str) -> Vec<String> {
    sim.list("v1", "pods", Some(ns))
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// upstream's steady-state options: grace period 0, background propagation.
fn now_in_background() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    }
}

/// A label selector deletes the matching pods of the namespace and nothing else, and the answer
/// is the PodList of those pods as they were listed: at the list's version, before deletion.
#[tokio::test]
async fn a_label_selector_deletes_only_the_matching_pods() {
    let (sim, client) = start(small()).await;
    let mut created = BTreeMap::new();
    for (ns, name, app) in [
        ("default", "a1", "a"),
        ("default", "a2", "a"),
        ("default", "b1", "b"),
        ("kube-public", "a3", "a"),
    ] {
        let p = create(&sim, ns, name, json!({"app": app}), None, None).await;
        created.insert(name, p);
    }
    create(&sim, "default", "plain", json!({}), None, None).await;
    let rv = sim.resource_version();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let got = pods
        .delete_collection(&now_in_background(), &ListParams::default().labels("app=a"))
        .await
        .unwrap()
        .left()
        .expect("the list, not a Status");
    let got = serde_json::to_value(got).unwrap();
    assert_eq!(got["kind"], "PodList");
    assert_eq!(got["apiVersion"], "v1");
    assert_eq!(got["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(names(&got), ["a1", "a2"]);
    for item in got["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        let (m, want) = (&item["metadata"], &created[name]["metadata"]);
        assert_eq!(
            (&m["uid"], &m["resourceVersion"]),
            (&want["uid"], &want["resourceVersion"]),
            "{name} as listed"
        );
        assert!(m.get("deletionTimestamp").is_none(), "{item}");
    }
    assert_eq!(pods_in(&sim, "default"), ["b1", "plain"]);
    assert_eq!(pods_in(&sim, "kube-public"), ["a3"]);
    sim.shutdown().await;
}

/// `kubectl delete --raw` on a collection with a label selector, as an independent client:
/// the matching pod goes, the others stay, and kubectl prints the PodList of what went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_raw_deletes_the_selected_pods() {
    let (sim, _client) = start(small()).await;
    create(&sim, "default", "x", json!({"a": "b"}), None, None).await;
    create(&sim, "default", "y", json!({"a": "c"}), None, None).await;
    create(&sim, "default", "z", json!({}), None, None).await;
    let k = Kubectl::new(&sim, "deletecollection");
    let (ok, out, err) = k
        .run(vec![
            "delete",
            "--raw",
            "/api/v1/namespaces/default/pods?labelSelector=a%3Db",
        ])
        .await;
    assert!(ok, "{out} {err}");
    let list: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(list["kind"], "PodList");
    assert_eq!(names(&list), ["x"]);
    assert_eq!(pods_in(&sim, "default"), ["y", "z"]);
    // kubectl reports a refused one (the all-namespaces path) as an error.
    let (ok, _, err) = k.run(vec!["delete", "--raw", "/api/v1/pods"]).await;
    assert!(
        !ok && err.contains("the server does not allow this method on the requested resource"),
        "{err}"
    );
    assert_eq!(pods_in(&sim, "default"), ["y", "z"]);
    sim.shutdown().await;
}

type Events = std::pin::Pin<Box<dyn futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Send>>;

/// An event as (type, the fields a deletion changes, its resourceVersion).
fn summary(t: &str, p: &Pod) -> (String, Value, u64) {
    let m = &p.metadata;
    (
        t.to_string(),
        json!({"deletionTimestamp": m.deletion_timestamp.is_some(),
               "deletionGracePeriodSeconds": m.deletion_grace_period_seconds,
               "generation": m.generation, "phase": p.status.as_ref().and_then(|s| s.phase.clone())}),
        m.resource_version.as_deref().unwrap().parse().unwrap(),
    )
}

/// Each pod's events (bookmarks skipped) until `n` pods were deleted.
async fn events_until_deleted(
    events: &mut Events,
    n: usize,
) -> BTreeMap<String, Vec<(String, Value, u64)>> {
    let mut by_pod: BTreeMap<String, Vec<_>> = BTreeMap::new();
    let mut deleted = 0;
    while deleted < n {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("an event within 5 s")
            .unwrap()
            .expect("the watch is open");
        let (t, p) = match ev {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => {
                deleted += 1;
                ("DELETED", p)
            }
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        };
        by_pod
            .entry(p.metadata.name.clone().unwrap())
            .or_default()
            .push(summary(t, &p));
    }
    by_pod
}

/// Grace period 0 on a bound (Running) and an unbound pod: both go in the request, and a watch
/// opened before sees for each exactly what a single DELETE with the same options gives its
/// twin: the update that marks it (timestamp, grace 0, generation bumped) and the deletion,
/// at consecutive versions.
#[tokio::test]
async fn grace_zero_gives_the_events_of_single_deletes() {
    let (sim, client) = start(SimConfig {
        termination_delay: None,
        ..small()
    })
    .await;
    for (name, set) in [("single", "one"), ("collection", "all")] {
        create(
            &sim,
            "default",
            &format!("{name}-bound"),
            json!({"set": set}),
            Some("node-00000"),
            None,
        )
        .await;
        create(
            &sim,
            "default",
            &format!("{name}-unbound"),
            json!({"set": set}),
            None,
            None,
        )
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut events: Events = pods
        .watch(
            &WatchParams::default().timeout(10),
            &sim.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    for name in ["single-bound", "single-unbound"] {
        pods.delete(name, &now_in_background()).await.unwrap();
    }
    let got = pods
        .delete_collection(
            &now_in_background(),
            &ListParams::default().labels("set=all"),
        )
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(got.items.len(), 2);
    assert!(pods_in(&sim, "default").is_empty());
    let by_pod = events_until_deleted(&mut events, 4).await;
    for kind in ["bound", "unbound"] {
        let single = &by_pod[&format!("single-{kind}")];
        let collection = &by_pod[&format!("collection-{kind}")];
        let shape = |evs: &[(String, Value, u64)]| -> Vec<(String, Value, u64)> {
            evs.iter()
                .map(|(t, v, rv)| (t.clone(), v.clone(), rv - evs[0].2))
                .collect()
        };
        assert_eq!(shape(collection), shape(single), "{kind}");
        let types: Vec<&str> = single.iter().map(|(t, ..)| t.as_str()).collect();
        assert_eq!(types, ["MODIFIED", "DELETED"], "{kind}");
        let marked = &single[0].1;
        assert_eq!(marked["deletionTimestamp"], true);
        assert_eq!(marked["deletionGracePeriodSeconds"], 0);
        assert_eq!(marked["generation"], 2);
        assert_eq!(single[1].2, single[0].2 + 1);
    }
    sim.shutdown().await;
}

/// A pod with a finalizer stays, marked (timestamp, grace 0), while the pods without go; a
/// Running pod deleted with its default grace period stays terminating until the simulated
/// kubelet finishes and deletes it, as after a single DELETE.
#[tokio::test]
async fn finalizers_keep_pods_and_the_kubelet_finishes_graceful_ones() {
    let (sim, client) = start(SimConfig {
        termination_delay: Some(Duration::from_millis(200)),
        ..small()
    })
    .await;
    create(
        &sim,
        "default",
        "held",
        json!({}),
        None,
        Some(json!(["example.com/hold"])),
    )
    .await;
    create(&sim, "default", "free", json!({}), None, None).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let got = pods
        .delete_collection(&now_in_background(), &ListParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(got.items.len(), 2);
    assert_eq!(pods_in(&sim, "default"), ["held"]);
    let held = sim.get("v1", "pods", "default", "held").unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(held["metadata"]["finalizers"], json!(["example.com/hold"]));

    create(
        &sim,
        "kube-public",
        "web",
        json!({}),
        Some("node-00001"),
        None,
    )
    .await;
    let public: Api<Pod> = Api::namespaced(client, "kube-public");
    public
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let web = sim.get("v1", "pods", "kube-public", "web").unwrap();
    assert_eq!(web["metadata"]["deletionGracePeriodSeconds"], 30, "{web}");
    eventually(|| async {
        sim.get("v1", "pods", "kube-public", "web")
            .is_err()
            .then_some(())
    })
    .await;
    sim.shutdown().await;
}

/// `limit=2` deletes the first page only and answers it with its continue token (and, without
/// selectors, the remaining count); the token deletes the rest of the list it started, and
/// pods of other namespaces stay.
#[tokio::test]
async fn a_limit_deletes_one_page_and_its_token_the_rest() {
    let (sim, _client) = start(small()).await;
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        create(&sim, "default", name, json!({}), None, None).await;
    }
    create(&sim, "kube-public", "other", json!({}), None, None).await;
    let rv = sim.resource_version();
    let (code, first) = curl(&sim, "DELETE", &format!("{PODS}?limit=2"), None, None).await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(names(&first), ["p1", "p2"]);
    assert_eq!(first["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"].as_str().expect("a token");
    assert_eq!(pods_in(&sim, "default"), ["p3", "p4", "p5"]);
    let (code, rest) = curl(
        &sim,
        "DELETE",
        &format!("{PODS}?continue={token}"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["p3", "p4", "p5"]);
    assert_eq!(rest["metadata"]["resourceVersion"], rv.to_string());
    assert!(rest["metadata"].get("continue").is_none(), "{rest}");
    assert!(pods_in(&sim, "default").is_empty());
    assert_eq!(pods_in(&sim, "kube-public"), ["other"]);
    sim.shutdown().await;
}

/// The all-namespaces path and namespaces have no DeleteCollection (405); bad selectors and
/// list options get the answers a list gets; bad `DeleteOptions` the answer a DELETE gets; a
/// dry run, in the query or in kube's `DeleteOptions` body, is refused as for any write; a
/// cluster-scoped collection takes it; discovery lists the verb where it is served.
#[tokio::test]
async fn refused_paths_and_options() {
    let (sim, client) = start(small()).await;
    create(&sim, "default", "keep", json!({"a": "b"}), None, None).await;
    for path in ["/api/v1/pods", "/api/v1/namespaces"] {
        let (code, got) = curl(&sim, "DELETE", path, None, None).await;
        assert_eq!(
            (code, &got["reason"]),
            (405, &json!("MethodNotAllowed")),
            "{path}"
        );
    }
    for query in [
        "labelSelector=a%20in%20(",
        "fieldSelector=spec.foo%3Dx",
        "resourceVersionMatch=Exact",
        "limit=x",
    ] {
        let (code, want) = curl(&sim, "GET", &format!("{PODS}?{query}"), None, None).await;
        assert!(code == 400 || code == 422, "{query}: {code} {want}");
        let got = curl(&sim, "DELETE", &format!("{PODS}?{query}"), None, None).await;
        assert_eq!(got, (code, want), "{query}");
    }
    let (code, want) = curl(
        &sim,
        "DELETE",
        &format!("{PODS}/keep?propagationPolicy=Sideways"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 422);
    let got = curl(
        &sim,
        "DELETE",
        &format!("{PODS}?propagationPolicy=Sideways"),
        None,
        None,
    )
    .await;
    assert_eq!(got, (code, want.clone()));
    // Validated before listing: an empty collection too.
    let got = curl(
        &sim,
        "DELETE",
        "/api/v1/namespaces/kube-public/pods?propagationPolicy=Sideways",
        None,
        None,
    )
    .await;
    assert_eq!(got, (code, want));
    let (code, refused) = curl(&sim, "DELETE", &format!("{PODS}?dryRun=All"), None, None).await;
    assert_eq!(code, 400);
    assert_eq!(refused["message"], "dryRun is not supported by kube-sim");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let (code, _, msg) = api_code(pods.delete_collection(&dry, &ListParams::default()).await);
    assert_eq!(
        (code, msg.as_str()),
        (400, "dryRun is not supported by kube-sim")
    );
    let (code, _, msg) = api_code(pods.delete("keep", &dry).await);
    assert_eq!(
        (code, msg.as_str()),
        (400, "dryRun is not supported by kube-sim")
    );
    assert_eq!(pods_in(&sim, "default"), ["keep"]);

    // Cluster-scoped: the collection path itself, here narrowed to one node.
    let (code, got) = curl(
        &sim,
        "DELETE",
        "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-00002",
        None,
        None,
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        (&got["kind"], names(&got)),
        (&json!("NodeList"), vec!["node-00002"])
    );
    assert_eq!(sim.list("v1", "nodes", None).unwrap().len(), 2);

    let (_, v1) = curl(&sim, "GET", "/api/v1", None, None).await;
    let verbs = |name: &str| {
        v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["verbs"]
            .clone()
    };
    assert_eq!(
        verbs("pods"),
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    assert_eq!(
        verbs("namespaces"),
        json!([
            "create", "delete", "get", "list", "patch", "update", "watch"
        ])
    );
    sim.shutdown().await;
}

/// Preconditions apply to each object: the first object that does not meet them ends the
/// request with the 409 a DELETE of it gets, and what was deleted before stays deleted.
#[tokio::test]
async fn preconditions_per_object_and_no_atomicity() {
    let (sim, _client) = start(small()).await;
    let first = create(&sim, "default", "p1", json!({}), None, None).await;
    let second = create(&sim, "default", "p2", json!({}), None, None).await;
    let uid = |p: &Value| p["metadata"]["uid"].as_str().unwrap().to_string();
    // p1 meets the precondition and goes; p2 does not: 409, as its own DELETE would get.
    let body = json!({"preconditions": {"uid": uid(&first)}});
    let (code, want) = curl(&sim, "DELETE", &format!("{PODS}/p2"), None, Some(&body)).await;
    assert_eq!(code, 409, "{want}");
    sim.clear_records();
    let got = curl(&sim, "DELETE", PODS, None, Some(&body)).await;
    assert_eq!(got, (409, want));
    assert_eq!(pods_in(&sim, "default"), ["p2"]);
    let writes: Vec<_> = sim
        .writes()
        .iter()
        .map(|w| (w.verb, w.name.clone(), w.code))
        .collect();
    assert_eq!(
        writes,
        [
            ("deletecollection", "p1".to_string(), 200),
            ("deletecollection", String::new(), 409)
        ]
    );
    let body = json!({"preconditions": {"uid": uid(&second)}});
    let (code, got) = curl(&sim, "DELETE", PODS, None, Some(&body)).await;
    assert_eq!(code, 200, "{got}");
    assert!(pods_in(&sim, "default").is_empty());
    sim.shutdown().await;
}

/// One request record, verb `deletecollection` on the collection (no name), and one write
/// record per object deleted.
#[tokio::test]
async fn records_name_the_verb_and_each_object_deleted() {
    let (sim, client) = start(small()).await;
    for name in ["a", "b", "c"] {
        create(&sim, "default", name, json!({"go": "yes"}), None, None).await;
    }
    create(&sim, "default", "d", json!({}), None, None).await;
    sim.clear_records();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.delete_collection(
        &now_in_background(),
        &ListParams::default().labels("go=yes"),
    )
    .await
    .unwrap();
    let requests = sim.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    assert_eq!(
        (
            r.verb,
            r.resource.as_str(),
            r.subresource.as_str(),
            r.namespace.as_str(),
            r.name.as_str(),
            r.write,
            r.code
        ),
        ("deletecollection", "pods", "", "default", "", true, 200)
    );
    let writes: Vec<_> = sim
        .writes()
        .iter()
        .map(|w| {
            (
                w.verb,
                w.resource.clone(),
                w.namespace.clone(),
                w.name.clone(),
                w.code,
            )
        })
        .collect();
    let want: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            (
                "deletecollection",
                "pods".to_string(),
                "default".to_string(),
                n.to_string(),
                200,
            )
        })
        .collect();
    assert_eq!(writes, want);
    // The refused all-namespaces path is recorded as RBAC sees it, and writes nothing.
    sim.clear_records();
    assert_eq!(
        curl(&sim, "DELETE", "/api/v1/pods", None, None).await.0,
        405
    );
    let r = &sim.requests()[0];
    assert_eq!(
        (r.verb, r.namespace.as_str(), r.code),
        ("deletecollection", "", 405)
    );
    assert!(sim.writes().is_empty());
    sim.shutdown().await;
}

/// Upstream's DeleteCollection deletes through the generic store, not the PriorityClass
/// storage's own Delete: a system class that a DELETE may not remove (403) goes.
#[tokio::test]
async fn system_priority_classes_are_not_protected_from_a_collection_delete() {
    let (sim, _client) = start(small()).await;
    let pcs = "/apis/scheduling.k8s.io/v1/priorityclasses";
    let (code, _) = curl(
        &sim,
        "DELETE",
        &format!("{pcs}/system-node-critical"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 403);
    let (code, got) = curl(
        &sim,
        "DELETE",
        &format!("{pcs}?fieldSelector=metadata.name%3Dsystem-node-critical"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(names(&got), ["system-node-critical"]);
    let (code, _) = curl(
        &sim,
        "GET",
        &format!("{pcs}/system-node-critical"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 404);
    sim.shutdown().await;
}

/// An object listed but gone when its turn comes (here listed at an older version with
/// `resourceVersionMatch=Exact`) is skipped: the answer lists it, no write is recorded for it.
#[tokio::test]
async fn an_object_already_gone_is_skipped() {
    let (sim, _client) = start(small()).await;
    for name in ["p1", "p2", "p3"] {
        create(&sim, "default", name, json!({}), None, None).await;
    }
    let rv = sim.resource_version();
    sim.delete("v1", "pods", "default", "p2").unwrap();
    sim.clear_records();
    let (code, got) = curl(
        &sim,
        "DELETE",
        &format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact"),
        None,
        None,
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(names(&got), ["p1", "p2", "p3"]);
    assert!(pods_in(&sim, "default").is_empty());
    let deleted: Vec<String> = sim.writes().iter().map(|w| w.name.clone()).collect();
    assert_eq!(deleted, ["p1", "p3"]);
    sim.shutdown().await;
}

/// Without `limit` every match goes, listed in pages of 10,000 at one version; the answer
/// carries the first page's metadata (its continue token and remaining count), as upstream
/// keeps the first page's list and appends every page's items to it.
#[tokio::test]
async fn more_than_a_page_goes_in_one_request() {
    let (sim, _client) = start(small()).await;
    let n = 10_001;
    for i in 0..n {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("cm-{i:05}"), "namespace": "kube-public"}});
        sim.create("v1", "configmaps", cm).unwrap();
    }
    let rv = sim.resource_version();
    let (code, got) = curl(
        &sim,
        "DELETE",
        "/api/v1/namespaces/kube-public/configmaps",
        None,
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(got["kind"], "ConfigMapList");
    assert_eq!(names(&got).len(), n);
    assert_eq!(names(&got)[n - 1], "cm-10000");
    let m = &got["metadata"];
    assert_eq!(m["resourceVersion"], rv.to_string());
    assert_eq!(m["remainingItemCount"], 1);
    assert!(m["continue"].is_string(), "{m}");
    assert!(
        sim.list("v1", "configmaps", Some("kube-public"))
            .unwrap()
            .is_empty()
    );
    sim.shutdown().await;
}
