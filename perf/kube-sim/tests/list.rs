//! Lists as the real API server pages and versions them: `limit`/`continue` with an opaque token
//! consistent with the first page, `remainingItemCount` without selectors, `resourceVersionMatch`
//! (`NotOlderThan`, `Exact`) and its validation, bad and expired continue tokens, and
//! kube-runtime's watcher (which lists in pages of 500) still syncing.

use crate::common;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, PostParams, VersionMatch};
use kube::runtime::watcher;
use kube_sim::SimConfig;
use serde_json::{Value, json};

async fn get(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    client
        .request(http::Request::get(path).body(Vec::new()).unwrap())
        .await
}

fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn pages_are_consistent_with_the_first_page() {
    let (sim, client) = start(SimConfig {
        nodes: 7,
        ..small()
    })
    .await;
    let first = get(&client, "/api/v1/nodes?limit=3").await.unwrap();
    assert_eq!(names(&first), ["node-00000", "node-00001", "node-00002"]);
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(first["metadata"]["remainingItemCount"], 4);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // Changes after the first page do not show in the next pages: they read the first page's
    // version.
    sim.delete("v1", "nodes", "", "node-00004").unwrap();
    sim.create_node("node-00003a").unwrap();
    let second = get(&client, &format!("/api/v1/nodes?limit=3&continue={token}"))
        .await
        .unwrap();
    assert_eq!(names(&second), ["node-00003", "node-00004", "node-00005"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv.as_str());
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let token = second["metadata"]["continue"].as_str().unwrap();
    let last = get(&client, &format!("/api/v1/nodes?limit=3&continue={token}"))
        .await
        .unwrap();
    assert_eq!(names(&last), ["node-00006"]);
    assert!(last["metadata"].get("continue").is_none(), "{last}");
    assert!(last["metadata"].get("remainingItemCount").is_none());
    // A page that ends exactly at the last item has no continue token.
    let all = get(&client, "/api/v1/nodes?limit=7").await.unwrap();
    assert_eq!(names(&all).len(), 7);
    assert!(all["metadata"].get("continue").is_none(), "{all}");
    // resourceVersion=0 is served from the cache in one page: the limit is ignored.
    let any = get(&client, "/api/v1/nodes?limit=2&resourceVersion=0")
        .await
        .unwrap();
    assert_eq!(names(&any).len(), 7);
    sim.shutdown().await;
}

#[tokio::test]
async fn selectors_page_over_matches_without_remaining_count() {
    let (sim, client) = start(small()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        let mut cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("c{i}"), "labels": {"even": (i % 2 == 0).to_string()}}
        }))
        .unwrap();
        cm.metadata.namespace = None;
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let lp = ListParams::default().labels("even=true").limit(2);
    let page = cms.list(&lp).await.unwrap();
    let got: Vec<_> = page
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(got, ["c0", "c2"]);
    assert!(page.metadata.remaining_item_count.is_none());
    let next = cms
        .list(
            &lp.clone()
                .continue_token(page.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let got: Vec<_> = next
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(got, ["c4"]);
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_and_expired_continue_tokens() {
    let (sim, client) = start(SimConfig {
        nodes: 4,
        history: 3,
        ..small()
    })
    .await;
    let (code, reason, msg) =
        api_code(get(&client, "/api/v1/nodes?limit=1&continue=garbage").await);
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert!(
        msg.starts_with("invalid continue token: continue key is not valid"),
        "{msg}"
    );
    let first = get(&client, "/api/v1/nodes?limit=1").await.unwrap();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, _, msg) = api_code(
        get(
            &client,
            &format!("/api/v1/nodes?limit=1&continue={token}&resourceVersion=5"),
        )
        .await,
    );
    assert_eq!(code, 400);
    assert_eq!(
        msg,
        "specifying resource version is not allowed when using continue"
    );
    // Enough writes to push the first page's version out of the retained history.
    for i in 0..5 {
        sim.create_node(&format!("extra-{i}")).unwrap();
    }
    let (code, reason, msg) =
        api_code(get(&client, &format!("/api/v1/nodes?limit=1&continue={token}")).await);
    assert_eq!((code, reason.as_str()), (410, "Expired"));
    assert!(
        msg.starts_with("The provided continue parameter is too old"),
        "{msg}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_version_match_validation_and_semantics() {
    let (sim, _) = start(small()).await;
    // kube's default retry would retry the 504 below (it honours Retry-After).
    let client = client(&sim, false).await;
    let (code, reason, msg) =
        api_code(get(&client, "/api/v1/nodes?resourceVersionMatch=NotOlderThan").await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        msg,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
    let (code, _, msg) = api_code(
        get(
            &client,
            "/api/v1/nodes?resourceVersion=0&resourceVersionMatch=Exact",
        )
        .await,
    );
    assert_eq!(code, 422);
    assert!(msg.ends_with("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""), "{msg}");
    let (code, _, msg) = api_code(
        get(
            &client,
            "/api/v1/nodes?resourceVersion=1&resourceVersionMatch=Newest",
        )
        .await,
    );
    assert_eq!(code, 422);
    assert!(msg.ends_with("resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""), "{msg}");

    // Exact reads the state at that version; NotOlderThan the newest.
    let nodes: Api<Node> = Api::all(client.clone());
    let before = sim.resource_version();
    sim.delete("v1", "nodes", "", "node-00001").unwrap();
    let exact = nodes
        .list(
            &ListParams::default()
                .at(&before.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 3);
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(before.to_string().as_str())
    );
    let newer = nodes
        .list(
            &ListParams::default()
                .at(&before.to_string())
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(newer.items.len(), 2);
    // A version the server has not reached: 504 after the wait, as the watch cache answers.
    let future = sim.resource_version() + 1000;
    let (code, reason, msg) = api_code(
        get(
            &client,
            &format!("/api/v1/nodes?resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
        )
        .await,
    );
    assert_eq!((code, reason.as_str()), (504, "Timeout"));
    assert!(
        msg.starts_with(&format!("Too large resource version: {future}, current: ")),
        "{msg}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn watcher_lists_in_pages_and_syncs() {
    let (sim, client) = start(SimConfig {
        nodes: 1203,
        ..small()
    })
    .await;
    sim.clear_records();
    let nodes: Api<Node> = Api::all(client);
    let mut stream = watcher(nodes, watcher::Config::default()).boxed();
    let mut seen = 0usize;
    loop {
        match stream.next().await.unwrap().unwrap() {
            watcher::Event::InitApply(_) => seen += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, 1203);
    let lists = sim.requests().iter().filter(|r| r.verb == "list").count();
    assert_eq!(lists, 3, "pages of 500");
    sim.shutdown().await;
}
