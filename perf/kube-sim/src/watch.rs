//! Watch streams: newline-delimited `{"type":…,"object":…}` events over a chunked response.
//! A watch starts from the retained history (or the current state when no version is given), then
//! follows the store's broadcast; it sends periodic `BOOKMARK`s when asked (and one as it ends at
//! its timeout), reports an expired version as an `ERROR` event with a `410 Expired` Status, and
//! ends at `timeoutSeconds`, when the fault configuration drops it, when the client goes away, or
//! when it does not keep up.
//!
//! Slow watchers are treated as the real watch cache (`cacher.go`) treats them: each watch has a
//! bounded input buffer sized as `suggestedWatchChannelSize` caps it on a busy server — 10 for a
//! pod watch with an exact `spec.nodeName` field selector (the indexed trigger), 1000 for other
//! pod watches (indexed resource, no trigger), 100 for resources without an index. An event that
//! finds the buffer full waits for room up to the dispatch time budget shared by all watches
//! (refilled 50 ms per second, at most 100 ms); when it runs out the watch is closed ("Forcing …
//! watcher close due to unresponsiveness") and counted in [`crate::SimStats`]. As in the real
//! server the buffer holds every event of the resource for non-trigger watches (selectors are
//! applied as events leave it), and only events whose object had or has the trigger value for
//! trigger watches. Selectors see transitions as the real server shows them: an object that
//! starts matching arrives as `ADDED`, one that stops matching as `DELETED` (its previous state at
//! the new version).
//!
//! Events the handler has already taken out of a watch's buffer leave in as few writes as the
//! real handler makes: `WatchServer.HandleHTTP` (`endpoints/handlers/watch.go`) encodes each
//! event into the response writer and flushes only when its event channel is empty
//! (`if len(ch) == 0 { flusher.Flush() }`), and Go's HTTP writers send their 4 KiB buffer as it
//! fills. So a watch that is behind gets its events in chunks of about 4 KiB (HTTP/2 `DATA`
//! frames, HTTP/1.1 chunks), and one that keeps up gets one chunk per event ([`Coalesce`]).
//!
//! It uses the shared state (`inner`, which holds the dispatch budget, [`crate::inner::TimeBudget`])
//! and the store; the server calls it.

use crate::error::ApiError;
use crate::inner::Inner;
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Event, EventType, Stored, WatchStart};
use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, header};
use serde_json::json;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};

/// `maxWatchChanSizeWithIndexAndTrigger`.
pub(crate) const CHAN_SIZE_TRIGGER: usize = 10;
/// `maxWatchChanSizeWithIndexWithoutTrigger`.
pub(crate) const CHAN_SIZE_INDEX: usize = 1000;
/// `maxWatchChanSizeWithoutIndex`.
pub(crate) const CHAN_SIZE_NO_INDEX: usize = 100;
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

/// An entry of a watch's input buffer.
enum Item {
    /// A store event, filtered by the selectors as it leaves the buffer; with the time it may
    /// be sent (`Faults::watch_delay_ms`), or `None` for at once.
    Event(Arc<Event>, Option<tokio::time::Instant>),
    /// A ready line (bookmark).
    Line(Bytes),
}

impl WatchRequest {
    fn selects(&self, obj: &Stored) -> bool {
        self.labels.matches(obj.index()) && self.fields.matches(obj.index())
    }

    /// The indexed trigger: pods watched with an exact `spec.nodeName`.
    fn trigger(&self) -> Option<&str> {
        (self.def.key.as_ref() == "/pods")
            .then(|| self.fields.exact("spec.nodeName"))
            .flatten()
    }

    /// `suggestedWatchChannelSize` on a busy server.
    fn channel_size(&self) -> usize {
        match (self.def.key.as_ref() == "/pods", self.trigger().is_some()) {
            (true, true) => CHAN_SIZE_TRIGGER,
            (true, false) => CHAN_SIZE_INDEX,
            (false, _) => CHAN_SIZE_NO_INDEX,
        }
    }

    /// Whether the dispatcher puts `ev` into this watch's buffer: the resource and namespace,
    /// and for a trigger watch the trigger value of the object before or after the change.
    fn enqueues(&self, ev: &Event) -> bool {
        if ev.key != self.def.key || self.ns.as_deref().is_some_and(|n| ev.obj.namespace() != n) {
            return false;
        }
        match self.trigger() {
            None => true,
            Some(want) => {
                let node = |o: &Stored| o.index().field("spec.nodeName").unwrap_or("") == want;
                node(&ev.obj) || ev.prev.as_ref().is_some_and(|p| node(p))
            }
        }
    }

    /// The line this watch sends for `ev` (`cacheWatcher.convertToWatchEvent`): `ADDED` /
    /// `MODIFIED` / `DELETED` as the object enters, stays in or leaves the selection.
    fn render(&self, ev: &Event) -> Option<Bytes> {
        let cur = self.selects(&ev.obj);
        match ev.etype {
            EventType::Added | EventType::Deleted => {
                cur.then(|| event_line(ev.etype.as_str(), &ev.obj.json()))
            }
            EventType::Modified => {
                let old = ev.prev.as_ref().is_some_and(|p| self.selects(p));
                match (cur, old) {
                    (true, true) => Some(event_line("MODIFIED", &ev.obj.json())),
                    (true, false) => Some(event_line("ADDED", &ev.obj.json())),
                    (false, true) => {
                        let mut gone = ev.prev.as_ref()?.value();
                        crate::meta::metadata_mut(&mut gone)
                            .insert("resourceVersion".into(), json!(ev.rv.to_string()));
                        Some(event_line(
                            "DELETED",
                            &serde_json::to_vec(&gone).unwrap_or_default(),
                        ))
                    }
                    (false, false) => None,
                }
            }
        }
    }
}

fn streaming(rx: mpsc::Receiver<Item>, req: Arc<WatchRequest>) -> Response {
    let lines = ReceiverStream::new(rx)
        .then(|item| async move {
            // Events go out in order, each no earlier than its time (the watch delay).
            if let Item::Event(_, Some(at)) = &item {
                tokio::time::sleep_until(*at).await;
            }
            item
        })
        .filter_map(move |item| match item {
            Item::Event(ev, _) => req.render(&ev),
            Item::Line(b) => Some(b),
        });
    let mut resp = Response::new(Body::from_stream(Coalesce::new(Box::pin(lines))));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// How many bytes the real handler's writer holds before it writes them without a flush: Go's
/// HTTP/2 `handlerChunkWriteSize` (and the HTTP/1.1 chunk writer's buffer), 4 KiB.
const WRITE_BUFFER: usize = 4 << 10;

/// The response body of a watch: the lines that are ready when the connection asks for data go
/// out together, up to [`WRITE_BUFFER`] (the last line may cross it: lines are never split),
/// as the real handler writes them (module doc). A line that is alone is passed on uncopied.
struct Coalesce<S> {
    lines: S,
    ended: bool,
}

impl<S> Coalesce<S> {
    fn new(lines: S) -> Self {
        Coalesce {
            lines,
            ended: false,
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for Coalesce<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let mut first: Option<Bytes> = None;
        let mut more = BytesMut::new();
        loop {
            match Pin::new(&mut self.lines).poll_next(cx) {
                Poll::Ready(Some(line)) => match first.take() {
                    None if more.is_empty() => first = Some(line),
                    f => {
                        if let Some(f) = f {
                            more.reserve(WRITE_BUFFER.max(f.len() + line.len()));
                            more.extend_from_slice(&f);
                        }
                        more.extend_from_slice(&line);
                    }
                },
                Poll::Ready(None) => {
                    self.ended = true;
                    break;
                }
                // The waker is registered: what is taken so far goes out now.
                Poll::Pending => break,
            }
            let taken = first.as_ref().map_or(more.len(), Bytes::len);
            if taken >= WRITE_BUFFER {
                break;
            }
        }
        match (first, more.is_empty()) {
            (Some(line), _) => Poll::Ready(Some(Ok(line))),
            (None, false) => Poll::Ready(Some(Ok(more.freeze()))),
            (None, true) if self.ended => Poll::Ready(None),
            (None, true) => Poll::Pending,
        }
    }
}

/// Opens the watch and returns the streaming response.
pub(crate) fn serve(inner: Arc<Inner>, req: WatchRequest) -> Response {
    let req = Arc::new(req);
    let (tx, rx) = mpsc::channel(req.channel_size());
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
            let _ = tx.try_send(Item::Line(error_line(&e)));
        }
        WatchStart::Ok(backlog, brx, rv) => {
            tokio::spawn(run(inner, req.clone(), backlog, brx, rv, tx));
        }
    }
    streaming(rx, req)
}

/// Puts an event into a watch's buffer as the cacher's `dispatchEvent` does: at once when there
/// is room, otherwise waiting up to the shared budget. False: the watch is to be closed.
async fn dispatch(inner: &Inner, tx: &mpsc::Sender<Item>, item: Item) -> Result<(), bool> {
    let item = match tx.try_send(item) {
        Ok(()) => return Ok(()),
        Err(TrySendError::Closed(_)) => return Err(false),
        Err(TrySendError::Full(item)) => item,
    };
    let budget = inner.budget().take();
    let started = Instant::now();
    let sent = !budget.is_zero()
        && tokio::time::timeout(budget, tx.send(item))
            .await
            .is_ok_and(|r| r.is_ok());
    inner
        .budget()
        .give_back(budget.saturating_sub(started.elapsed()));
    if sent { Ok(()) } else { Err(!tx.is_closed()) }
}

async fn run(
    inner: Arc<Inner>,
    req: Arc<WatchRequest>,
    backlog: Vec<Arc<Event>>,
    mut brx: broadcast::Receiver<Arc<Event>>,
    mut seen: u64,
    tx: mpsc::Sender<Item>,
) {
    let life = match inner.faults.watch_drop_after() {
        Some(d) => d.min(req.timeout),
        None => req.timeout,
    };
    let timed_out = life == req.timeout;
    // Read once: a change of the fault applies to watches opened after it.
    let delay = inner.faults.watch_delay();
    let deadline = tokio::time::sleep(life);
    tokio::pin!(deadline);
    let mut drop_rx = inner.faults.drop_signal();
    drop_rx.borrow_and_update();
    // The initial state and replayed history go straight to the client (the real watcher
    // sends them from its own goroutine before it reads its buffer).
    for ev in &backlog {
        if req.ns.as_deref().is_none_or(|n| ev.obj.namespace() == n)
            && ev.key == req.def.key
            && tx.send(Item::Event(ev.clone(), None)).await.is_err()
        {
            return;
        }
    }
    if req.send_initial_events
        && req.bookmarks
        && tx
            .send(Item::Line(bookmark_line(&req.def, seen, true)))
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
            _ = &mut deadline => {
                // A watch ending at its timeout tells the client how far it got.
                if timed_out && req.bookmarks {
                    let _ = tx.try_send(Item::Line(bookmark_line(&req.def, seen, false)));
                }
                return;
            }
            _ = drop_rx.changed() => return,
            _ = tx.closed() => return,
            _ = tick.tick(), if req.bookmarks => {
                // Bookmarks are best effort: one that finds the buffer full is skipped.
                if let Err(TrySendError::Closed(_)) = tx.try_send(Item::Line(bookmark_line(&req.def, seen, false))) {
                    return;
                }
            }
            r = brx.recv() => match r {
                Ok(ev) => {
                    if ev.rv <= seen {
                        continue;
                    }
                    seen = ev.rv;
                    if !req.enqueues(&ev) {
                        continue;
                    }
                    let at = (!delay.is_zero()).then(|| tokio::time::Instant::now() + delay);
                    match dispatch(&inner, &tx, Item::Event(ev, at)).await {
                        Ok(()) => {}
                        Err(false) => return,
                        Err(true) => {
                            inner.stats.watches_forced_closed.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(
                                resource = %req.def.key,
                                labels = ?req.labels,
                                fields = ?req.fields,
                                buffer = req.channel_size(),
                                "Forcing watcher close due to unresponsiveness"
                            );
                            return;
                        }
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

    /// Lines ready together leave together, up to the write buffer; a line alone is not copied;
    /// nothing is lost or reordered, and the end is reported once the last chunk is out.
    #[tokio::test]
    async fn ready_lines_are_coalesced_up_to_the_write_buffer() {
        let line = |i: usize| Bytes::from(format!("{i:0>999}\n"));
        let (tx, rx) = mpsc::channel::<Bytes>(64);
        let mut body = Coalesce::new(ReceiverStream::new(rx));
        // One line alone: passed on as it is, the same buffer.
        let alone = line(0);
        tx.send(alone.clone()).await.unwrap();
        let got = body.next().await.unwrap().unwrap();
        assert_eq!(got, alone);
        assert_eq!(got.as_ptr(), alone.as_ptr(), "a line alone is not copied");
        // Ten 1,000-byte lines ready at once: 5 lines (5,000 bytes, the fifth crossing 4 KiB),
        // then the other 5 in one chunk.
        for i in 1..=10 {
            tx.send(line(i)).await.unwrap();
        }
        let a = body.next().await.unwrap().unwrap();
        let b = body.next().await.unwrap().unwrap();
        assert_eq!((a.len(), b.len()), (5_000, 5_000));
        let all: Vec<u8> = [a, b].concat();
        let want: Vec<u8> = (1..=10).flat_map(|i| line(i).to_vec()).collect();
        assert_eq!(all, want, "in order, nothing lost");
        // Nothing ready: the body waits.
        assert!(futures::FutureExt::now_or_never(body.next()).is_none());
        // The end: the lines still ready go out, then the stream ends.
        tx.send(line(11)).await.unwrap();
        tx.send(line(12)).await.unwrap();
        drop(tx);
        let last = body.next().await.unwrap().unwrap();
        assert_eq!(last.len(), 2_000);
        assert!(body.next().await.is_none());
        assert!(body.next().await.is_none());
    }

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
