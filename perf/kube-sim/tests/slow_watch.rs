//! Watches as the real watch cache serves them: a client that stops reading a `spec.nodeName=`
//! pod watch (the indexed trigger, a 10-event buffer) during a burst is force-closed, while a
//! `status.phase!=Succeeded,status.phase!=Failed` watch that reads normally keeps its stream;
//! selectors turn objects entering and leaving them into `ADDED` and `DELETED`; bookmarks come
//! at the configured interval and as a watch ends at its timeout.

use crate::common;

use common::*;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use kube_sim::SimConfig;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NOT_DONE: &str = "status.phase!=Succeeded,status.phase!=Failed";

fn big_pod(name: &str) -> Value {
    let mut p = kube_sim::pod_object("default", name, "magma", "100m", "128Mi");
    p["metadata"]["annotations"] = serde_json::json!({"payload": "x".repeat(64 * 1024)});
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_trigger_watch_is_closed_a_read_one_is_not() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    // The reader: a plain watch (no automatic restart) with the full-buffer selector.
    let pods: Api<Pod> = Api::all(client);
    let mut reading = pods
        .watch(&WatchParams::default().fields(NOT_DONE).timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let added = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (added, ended) = (added.clone(), ended.clone());
        tokio::spawn(async move {
            while let Some(ev) = reading.next().await {
                if let Ok(WatchEvent::Added(_)) = ev {
                    added.fetch_add(1, Ordering::SeqCst);
                }
            }
            ended.fetch_add(1, Ordering::SeqCst);
        })
    };
    // The stalled client: a raw connection with a small receive window that sends its watch
    // request and then reads nothing.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut stalled = sock.connect(sim.addr()).await.unwrap();
    stalled
        .write_all(
            b"GET /api/v1/pods?watch=true&fieldSelector=spec.nodeName%3D HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        )
        .await
        .unwrap();
    eventually(|| async {
        sim.requests()
            .iter()
            .any(|r| r.verb == "watch" && r.code == 200 && r.user_agent.is_empty())
            .then_some(())
    })
    .await;
    // A paced burst: each chunk is read by the reader before the next, so only the stalled
    // watch falls behind, until the kernel buffers and its 10 events are full.
    let mut created = 0usize;
    while sim.stats().watches_forced_closed == 0 {
        assert!(
            created < 2000,
            "the stalled watch was never closed: {:?}",
            sim.stats()
        );
        for _ in 0..20 {
            sim.create("v1", "pods", big_pod(&format!("p{created}")))
                .unwrap();
            created += 1;
        }
        let want = created;
        eventually(|| async { (added.load(Ordering::SeqCst) >= want).then_some(()) }).await;
    }
    assert_eq!(sim.stats().watches_forced_closed, 1, "{:?}", sim.stats());
    // The stalled client, reading now, gets what was buffered and then the end of the stream.
    let mut buf = vec![0u8; 1 << 20];
    let mut tail = Vec::new();
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stalled.read(&mut buf))
            .await
            .expect("the closed watch reaches EOF")
            .unwrap();
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.ends_with(b"\r\n0\r\n\r\n") {
            break;
        }
    }
    assert!(tail.ends_with(b"\r\n0\r\n\r\n"), "a finished chunked body");
    // The reader saw every pod and its stream is still open.
    for i in 0..5 {
        sim.create("v1", "pods", big_pod(&format!("after{i}")))
            .unwrap();
    }
    let want = created + 5;
    eventually(|| async { (added.load(Ordering::SeqCst) >= want).then_some(()) }).await;
    assert_eq!(
        ended.load(Ordering::SeqCst),
        0,
        "the reading watch was not closed"
    );
    assert_eq!(sim.stats().watches_forced_closed, 1);
    reader.abort();
    sim.shutdown().await;
}

async fn next_event(
    s: &mut (impl futures::Stream<Item = Result<WatchEvent<Pod>, kube::Error>> + Unpin),
) -> (String, String, String) {
    let ev = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .expect("an event within 5 s")
        .expect("stream open")
        .unwrap();
    let (t, p) = match ev {
        WatchEvent::Added(p) => ("ADDED", p),
        WatchEvent::Modified(p) => ("MODIFIED", p),
        WatchEvent::Deleted(p) => ("DELETED", p),
        other => panic!("unexpected {other:?}"),
    };
    let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
    let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
    (t.to_string(), phase, node)
}

#[tokio::test]
async fn selectors_see_objects_enter_and_leave() {
    let (sim, client) = start(SimConfig {
        running_delay: None,
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let rv = sim.resource_version().to_string();
    let mut pending = pods
        .watch(&WatchParams::default().fields("spec.nodeName="), &rv)
        .await
        .unwrap()
        .boxed();
    let mut not_done = pods
        .watch(&WatchParams::default().fields(NOT_DONE), &rv)
        .await
        .unwrap()
        .boxed();
    sim.create_pod("default", "p", "magma", "100m", "1Mi")
        .unwrap();
    assert_eq!(next_event(&mut pending).await.0, "ADDED");
    assert_eq!(next_event(&mut not_done).await.0, "ADDED");
    bind(&pods, "p", "node-00000").await.unwrap();
    // Leaving `spec.nodeName=`: DELETED with the state before the bind.
    assert_eq!(
        next_event(&mut pending).await,
        ("DELETED".into(), "Pending".into(), String::new())
    );
    assert_eq!(next_event(&mut not_done).await.0, "MODIFIED");
    let mut p = sim.get("v1", "pods", "default", "p").unwrap();
    p["status"]["phase"] = "Succeeded".into();
    sim.update_status("v1", "pods", p).unwrap();
    // Leaving the not-finished selection: DELETED (as Running/Pending, its previous phase).
    assert_eq!(
        next_event(&mut not_done).await,
        ("DELETED".into(), "Pending".into(), "node-00000".into())
    );
    // Its real deletion later is not seen by either watch; a new pod is.
    sim.delete("v1", "pods", "default", "p").unwrap();
    sim.create_pod("default", "q", "magma", "100m", "1Mi")
        .unwrap();
    assert_eq!(next_event(&mut pending).await.0, "ADDED");
    assert_eq!(next_event(&mut not_done).await.0, "ADDED");
    sim.shutdown().await;
}

#[tokio::test]
async fn bookmarks_at_the_interval_and_at_the_timeout() {
    // Periodic: with a 50 ms interval the first event of a quiet watch is a bookmark carrying only
    // the kind, apiVersion and resourceVersion.
    let (sim, client) = start(SimConfig {
        bookmark_interval: Duration::from_millis(50),
        ..small()
    })
    .await;
    let rv = sim.resource_version().to_string();
    let req = http::Request::get(format!(
        "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"
    ))
    .body(Vec::new())
    .unwrap();
    let mut lines = Box::pin(client.request_stream(req).await.unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next())
        .await
        .expect("a bookmark within 5 s")
        .unwrap()
        .unwrap();
    let ev: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        ev,
        serde_json::json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}}})
    );
    sim.shutdown().await;

    // At the end: with an hour's interval, a one-second watch gets exactly one bookmark, as it
    // times out.
    let (sim, client) = start(SimConfig {
        bookmark_interval: Duration::from_secs(3600),
        ..small()
    })
    .await;
    let pods: Api<Pod> = Api::all(client);
    let rv = sim.resource_version().to_string();
    let mut s = pods
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    let mut bookmarks = Vec::new();
    while let Some(ev) = s.next().await {
        if let WatchEvent::Bookmark(b) = ev.unwrap() {
            bookmarks.push(b.metadata.resource_version);
        }
    }
    assert_eq!(bookmarks, [rv]);
    sim.shutdown().await;
}
