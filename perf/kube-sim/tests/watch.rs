//! Watches through the `kube` client: raw event streams with bookmarks and timeouts, `410
//! Expired` for versions older than the history, and `kube::runtime::watcher` relisting after a
//! forced 410 and after dropped watches.

use crate::common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use kube_sim::SimConfig;
use serde_json::json;
use std::time::Duration;

/// The collection's resourceVersion now (a list), to watch from.
async fn list_rv(cms: &Api<ConfigMap>) -> String {
    cms.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn watch_events_bookmarks_and_timeout() {
    let (sim, client) = start(small()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let rv = list_rv(&cms).await;
    let wp = WatchParams::default().timeout(2);
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    let mut last_rv = String::new();
    let mut bookmark = None;
    while let Some(ev) = stream.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
                if o.metadata.name.as_deref() == Some("before") =>
            {
                panic!("replayed an event from before the requested version")
            }
            WatchEvent::Added(o) => {
                kinds.push("ADDED");
                last_rv = o.metadata.resource_version.unwrap();
            }
            WatchEvent::Modified(o) => {
                kinds.push("MODIFIED");
                last_rv = o.metadata.resource_version.unwrap();
            }
            WatchEvent::Deleted(o) => {
                kinds.push("DELETED");
                last_rv = o.metadata.resource_version.unwrap();
            }
            WatchEvent::Bookmark(b) => {
                bookmark = Some(b.metadata.resource_version);
                break;
            }
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    let bookmark = bookmark.expect("a bookmark within the timeout");
    assert!(bookmark.parse::<u64>().unwrap() >= last_rv.parse::<u64>().unwrap());

    // timeoutSeconds ends the stream.
    let t0 = tokio::time::Instant::now();
    let stream = cms
        .watch(
            &WatchParams::default().timeout(1).disable_bookmarks(),
            &bookmark,
        )
        .await
        .unwrap();
    let rest: Vec<_> = stream.collect().await;
    assert!(rest.is_empty(), "{rest:?}");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn watch_with_selectors_and_initial_state() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("old", "magma"))
        .await
        .unwrap();
    let all: Api<Pod> = Api::all(client.clone());
    let wp = WatchParams::default()
        .fields("spec.schedulerName=magma")
        .timeout(2)
        .disable_bookmarks();
    // "0": current state first.
    let mut s = all.watch(&wp, "0").await.unwrap().boxed();
    match s.try_next().await.unwrap() {
        Some(WatchEvent::Added(p)) => assert_eq!(p.metadata.name.as_deref(), Some("old")),
        other => panic!("{other:?}"),
    }
    pods.create(&PostParams::default(), &pod("other", "default-scheduler"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("mine", "magma"))
        .await
        .unwrap();
    match s.try_next().await.unwrap() {
        Some(WatchEvent::Added(p)) => assert_eq!(p.metadata.name.as_deref(), Some("mine")),
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

/// As the watch cache: an object that stops matching a field selector is `DELETED` (its
/// previous state, at the change's version); one that starts matching is `ADDED`.
#[tokio::test]
async fn leaving_and_entering_a_selection_are_delete_and_add() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", "magma"))
        .await
        .unwrap();
    let all: Api<Pod> = Api::all(client.clone());
    let wp = |f: &str| {
        WatchParams::default()
            .fields(f)
            .timeout(5)
            .disable_bookmarks()
    };
    let rv = all
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut pending = all.watch(&wp("spec.nodeName="), &rv).await.unwrap().boxed();
    let mut bound = all
        .watch(&wp("spec.nodeName!="), &rv)
        .await
        .unwrap()
        .boxed();
    let mut running = all
        .watch(&wp("status.phase!=Succeeded,status.phase!=Failed"), &rv)
        .await
        .unwrap()
        .boxed();
    bind(&pods, "p", "node-00000").await.unwrap();
    match pending.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(p)) => {
            // The last state that matched, at the binding's version.
            assert_eq!(p.spec.unwrap().node_name, None);
            assert_ne!(p.metadata.resource_version.as_deref(), Some(rv.as_str()));
        }
        other => panic!("pending watch: {other:?}"),
    }
    match bound.try_next().await.unwrap() {
        Some(WatchEvent::Added(p)) => {
            assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-00000"))
        }
        other => panic!("bound watch: {other:?}"),
    }
    match running.try_next().await.unwrap() {
        Some(WatchEvent::Modified(p)) => assert_eq!(p.metadata.name.as_deref(), Some("p")),
        other => panic!("phase watch: {other:?}"),
    }
    // The pod finishes: it leaves the phase selection.
    let pods_status: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods_status
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .unwrap();
    match running.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(p)) => {
            assert_ne!(p.status.unwrap().phase.as_deref(), Some("Succeeded"))
        }
        other => panic!("phase watch: {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn expired_versions_get_410() {
    let (sim, client) = start(SimConfig {
        history: 5,
        ..small()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = list_rv(&cms).await;
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let mut s = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match s.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        s.try_next().await.unwrap().is_none(),
        "stream ends after the error"
    );
    sim.shutdown().await;
}

/// Drives a `kube::runtime::watcher` until `n` `Init` events were seen, counting errors.
async fn run_watcher(api: Api<ConfigMap>, mut on_init_done: impl FnMut(usize)) -> (usize, usize) {
    let cfg = watcher::Config::default().timeout(30);
    let mut s = watcher(api, cfg).boxed();
    let (mut inits, mut errors) = (0, 0);
    while let Some(ev) = s.next().await {
        match ev {
            Ok(watcher::Event::Init) => inits += 1,
            Ok(watcher::Event::InitDone) => {
                on_init_done(inits);
                if inits == 2 {
                    break;
                }
            }
            Ok(_) => {}
            Err(_) => errors += 1,
        }
    }
    (inits, errors)
}

#[tokio::test]
async fn watcher_relists_after_forced_410() {
    let (sim, client) = start(small()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("x")).await.unwrap();
    let faults = sim.faults().clone();
    let res = tokio::time::timeout(
        Duration::from_secs(10),
        run_watcher(cms.clone(), move |inits| {
            if inits == 1 {
                // The watch that follows the first list is already open or about to open:
                // close it and make the next one expire.
                faults.expire_next_watches(1);
                faults.drop_all_watches();
            }
        }),
    )
    .await
    .expect("watcher relists within 10 s");
    assert_eq!(res.0, 2);
    assert!(res.1 >= 1, "the 410 surfaces as a watcher error");
    sim.shutdown().await;
}

#[tokio::test]
async fn watcher_resumes_after_dropped_watches() {
    let mut cfg = small();
    cfg.faults.drop_watches_after_ms = Some(100);
    let (sim, client) = start(cfg).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut s = watcher(cms.clone(), watcher::Config::default()).boxed();
    // Let a few watches be dropped, then make a change: it must still arrive.
    let writer = {
        let cms = cms.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(350)).await;
            cms.create(&PostParams::default(), &cm("late"))
                .await
                .unwrap();
        })
    };
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = s.next().await {
            if let Ok(watcher::Event::Apply(o)) = ev
                && o.metadata.name.as_deref() == Some("late")
            {
                return true;
            }
        }
        false
    })
    .await
    .expect("event within 10 s");
    assert!(got);
    writer.await.unwrap();
    let writes = sim.writes();
    assert_eq!(
        writes.len(),
        1,
        "only the test's create is a write: {writes:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_watch_delay_sends_events_in_order_after_the_writes_answers() {
    let delay = Duration::from_millis(1500);
    let mut cfg = small();
    cfg.faults.watch_delay_ms = delay.as_millis() as u64;
    let (_sim, client) = start(cfg).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = list_rv(&cms).await;
    let mut stream = cms
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let written = std::time::Instant::now();
    for name in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    // The writes are answered; their events are not out yet.
    assert!(
        futures::FutureExt::now_or_never(stream.next()).is_none(),
        "an event was sent before its delay"
    );
    let mut names = Vec::new();
    while names.len() < 3 {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Added(o)) => names.push(o.metadata.name.unwrap()),
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        written.elapsed() >= delay,
        "sent after {:?}",
        written.elapsed()
    );
    assert_eq!(names, ["a", "b", "c"], "in commit order");
}

/// `GET path` through the client: the body as the server wrote it.
async fn raw(client: &kube::Client, path: &str) -> String {
    client
        .request_text(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap()
}

/// The lines of a watch from `rv` that ends after a second: (type, object as sent).
async fn replay(client: &kube::Client, query: &str, rv: &str) -> Vec<(String, String)> {
    let body = raw(
        client,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1{query}"),
    )
    .await;
    body.lines()
        .map(|l| {
            let rest = l.strip_prefix("{\"type\":\"").unwrap();
            let (t, obj) = rest.split_once("\",\"object\":").unwrap();
            (t.to_string(), obj.strip_suffix('}').unwrap().to_string())
        })
        .collect()
}

/// Versions are kept as their serialized bytes only (the store's module doc): a watch from an
/// old version after many updates replays every version byte for byte as it was served then,
/// a list at an exact old version returns the object as it was, a selector replays the object
/// entering and leaving it (leaving: its previous state at the new version), and once the
/// history has moved past the version the watch gets 410.
#[tokio::test]
async fn replay_after_many_updates_sends_each_version_as_it_was() {
    const UPDATES: usize = 60;
    let (sim, client) = start(SimConfig {
        history: 100,
        ..small()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let from = list_rv(&cms).await;
    let path = "/api/v1/namespaces/default/configmaps/c";
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    let mut served = vec![raw(&client, path).await];
    for i in 0..UPDATES {
        let patch = json!({"metadata": {"labels": {"sel": if i % 3 == 0 { "yes" } else { "no" }}},
                           "data": {"k": format!("v{i}"), "big": "x".repeat(i * 10)}});
        cms.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        served.push(raw(&client, path).await);
    }
    // Every version, as GET served it.
    let all = replay(&client, "", &from).await;
    assert_eq!(all.len(), UPDATES + 1);
    assert_eq!(all[0].0, "ADDED");
    for (i, (t, obj)) in all.iter().enumerate() {
        if i > 0 {
            assert_eq!(t, "MODIFIED");
        }
        assert_eq!(obj, &served[i], "version {i}");
    }
    // A list at an exact version in the middle: the object as it was then.
    let mid: serde_json::Value = serde_json::from_str(&served[UPDATES / 2]).unwrap();
    let mid_rv = mid["metadata"]["resourceVersion"].as_str().unwrap();
    let list: serde_json::Value = serde_json::from_str(
        &raw(
            &client,
            &format!("/api/v1/namespaces/default/configmaps?resourceVersion={mid_rv}&resourceVersionMatch=Exact"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(list["items"][0], mid);
    // With a selector: ADDED as it starts matching, DELETED (its previous state at the new
    // version) as it stops, nothing while it stays out.
    let sel = replay(&client, "&labelSelector=sel%3Dyes", &from).await;
    let mut want = Vec::new();
    for i in 0..UPDATES {
        let v = i + 1; // served[v] is the version after update i
        match (i % 3 == 0, i > 0 && (i - 1) % 3 == 0) {
            (true, _) => want.push(("ADDED".to_string(), served[v].clone())),
            (false, true) => {
                let mut gone: serde_json::Value = serde_json::from_str(&served[v - 1]).unwrap();
                let now: serde_json::Value = serde_json::from_str(&served[v]).unwrap();
                gone["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"].clone();
                want.push(("DELETED".to_string(), serde_json::to_string(&gone).unwrap()));
            }
            _ => {}
        }
    }
    let got: Vec<(String, serde_json::Value)> = sel
        .iter()
        .map(|(t, o)| (t.clone(), serde_json::from_str(o).unwrap()))
        .collect();
    let want: Vec<(String, serde_json::Value)> = want
        .iter()
        .map(|(t, o)| (t.clone(), serde_json::from_str(o).unwrap()))
        .collect();
    assert_eq!(got, want);
    // 100 more writes: the history (100 events) no longer reaches the first version.
    for i in 0..100 {
        let patch = json!({"data": {"k": format!("w{i}")}});
        cms.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let expired = replay(&client, "", &from).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].0, "ERROR");
    assert!(expired[0].1.contains("\"code\":410"), "{}", expired[0].1);
    sim.shutdown().await;
}
