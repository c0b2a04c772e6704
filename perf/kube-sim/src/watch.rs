//! Watch streams: newline-delimited `{"type":…,"object":…}` events over a chunked response.
//! A watch starts from the retained history (or the current state when no version is given), then
//! follows the store's broadcast; it sends periodic `BOOKMARK`s when asked, reports an expired
//! version as an `ERROR` event with a `410 Expired` Status, and ends at `timeoutSeconds`, when the
//! fault configuration drops it, when the client goes away, or when it falls too far behind.

use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::sim::Inner;
use crate::store::{Event, EventType, Stored, WatchStart};
use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, header};
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

/// What a watch request asked for.
#[derive(Debug)]
pub(crate) struct WatchRequest {
    pub def: Arc<ResourceDef>,
    pub ns: Option<String>,
    pub from: Option<u64>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub send_initial_events: bool,
}

fn event_line(etype: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(etype.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

fn bookmark_line(def: &ResourceDef, rv: u64, initial_events_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta});
    event_line("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
}

fn error_line(e: &ApiError) -> Bytes {
    event_line(
        "ERROR",
        &serde_json::to_vec(&e.status()).unwrap_or_default(),
    )
}

impl WatchRequest {
    fn selects(&self, obj: &Stored) -> bool {
        self.labels.matches(&obj.value) && self.fields.matches(&obj.value)
    }

    /// The line this watch sends for `ev`, if any. As the API server's watch cache
    /// (`cacheWatcher.convertToWatchEvent`): a change that makes an object match the selectors
    /// is `ADDED`; one that makes it stop matching is `DELETED`, carrying the previous state
    /// with the change's `resourceVersion`.
    fn line(&self, ev: &Event) -> Option<Bytes> {
        if ev.key != self.def.key || self.ns.as_deref().is_some_and(|n| ev.obj.namespace() != n) {
            return None;
        }
        let now = self.selects(&ev.obj);
        match (ev.etype, &ev.prev) {
            (EventType::Modified, Some(prev)) => match (self.selects(prev), now) {
                (true, true) => Some(event_line("MODIFIED", &ev.obj.json)),
                (false, true) => Some(event_line("ADDED", &ev.obj.json)),
                (true, false) => {
                    let mut last = prev.value.clone();
                    last["metadata"]["resourceVersion"] = json!(ev.rv.to_string());
                    Some(event_line("DELETED", &Stored::new(last).json))
                }
                (false, false) => None,
            },
            _ => now.then(|| event_line(ev.etype.as_str(), &ev.obj.json)),
        }
    }
}

fn streaming(rx: mpsc::Receiver<Result<Bytes, Infallible>>) -> Response {
    let mut resp = Response::new(Body::from_stream(ReceiverStream::new(rx)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Opens the watch and returns the streaming response.
pub(crate) fn serve(inner: Arc<Inner>, req: WatchRequest) -> Response {
    let (tx, rx) = mpsc::channel(256);
    let start = if inner.faults.take_expire() {
        let rv = inner.state().rv();
        WatchStart::Expired(ApiError::expired(req.from.unwrap_or(0), rv))
    } else {
        inner
            .state()
            .watch(&req.def.key, req.ns.as_deref(), req.from)
    };
    match start {
        WatchStart::Expired(e) => {
            let _ = tx.try_send(Ok(error_line(&e)));
        }
        WatchStart::Ok(backlog, brx, rv) => {
            tokio::spawn(run(inner, req, backlog, brx, rv, tx));
        }
    }
    streaming(rx)
}

async fn run(
    inner: Arc<Inner>,
    req: WatchRequest,
    backlog: Vec<Arc<Event>>,
    mut brx: broadcast::Receiver<Arc<Event>>,
    mut seen: u64,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
) {
    let life = match inner.faults.watch_drop_after() {
        Some(d) => d.min(req.timeout),
        None => req.timeout,
    };
    let deadline = tokio::time::sleep(life);
    tokio::pin!(deadline);
    let mut drop_rx = inner.faults.drop_signal();
    drop_rx.borrow_and_update();
    for ev in &backlog {
        if let Some(line) = req.line(ev)
            && tx.send(Ok(line)).await.is_err()
        {
            return;
        }
    }
    if req.send_initial_events
        && req.bookmarks
        && tx
            .send(Ok(bookmark_line(&req.def, seen, true)))
            .await
            .is_err()
    {
        return;
    }
    let period = inner.cfg.bookmark_interval;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = drop_rx.changed() => return,
            _ = tx.closed() => return,
            _ = tick.tick(), if req.bookmarks => {
                if tx.send(Ok(bookmark_line(&req.def, seen, false))).await.is_err() {
                    return;
                }
            }
            r = brx.recv() => match r {
                Ok(ev) => {
                    if ev.rv <= seen {
                        continue;
                    }
                    seen = ev.rv;
                    if let Some(line) = req.line(&ev)
                        && tx.send(Ok(line)).await.is_err()
                    {
                        return;
                    }
                }
                // Too far behind (or shutting down): end the stream; the client resumes from the
                // last version it saw, which the history still covers.
                Err(_) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_ndjson() {
        let l = event_line("ADDED", b"{\"a\":1}");
        assert_eq!(&l[..], b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n");
        let e: serde_json::Value =
            serde_json::from_slice(&error_line(&ApiError::expired(1, 5))).unwrap();
        assert_eq!(e["object"]["code"], 410);
        assert_eq!(e["object"]["reason"], "Expired");
    }
}
