//! Events and pod conditions, on a separate client, in two lanes that never wait for each
//! other: status writes never slow binding, and "why is my pod pending" is never stuck behind
//! a burst's `Scheduled` events.
//!
//! - **Failed** (`PodScheduled=False` + `FailedScheduling`): its own token bucket
//!   (`--event-qps`/`--event-burst`) and a queue that holds at most one write per pod, as
//!   client-go's workqueue holds one entry per key. The engine emits a status intent whenever a
//!   pod's message changes; a newer intent for a pod whose write is still queued replaces it in
//!   place (its place in line kept), and the pod's binding cancels it (a `PodScheduled=False`
//!   written after the binding would contradict it). So a pod retried a hundred times while the
//!   lane is behind gets one write, with its latest message, and every pending pod gets one:
//!   the queue is as long as the pods waiting for a write, never the attempts. Replaced and
//!   cancelled writes are counted (`magma_status_writes_coalesced_total`); a write is dropped
//!   only if 8,192 other pods are waiting for theirs.
//! - **Scheduled** events: their own queue and token bucket, the queue sized to eight seconds of
//!   that budget, so the events tail ends within ten seconds of the last bind. When it is
//!   full, new `Scheduled` events are shed (client-go's event broadcaster also drops when its
//!   queue is full; here it is counted and logged): `magma_events_dropped_total{reason}` counts
//!   them and one log line says when shedding starts and one when it ends.
//! - **Batches**: a lane that is behind its budget waits for [`BATCH_WINDOW`]'s worth of tokens
//!   and sends that many writes together (concurrently, one token each); a lane that is not
//!   behind sends each write as it comes. `magma_status_writes_pending{lane}` is what a lane
//!   still has queued or in flight.
//!
//! Writes, matching upstream's reasons and messages:
//! - `PodScheduled=False` with reason `Unschedulable` or `SchedulerError` and the engine's
//!   message, by strategic-merge patch of `pods/status` (conditions merge by `type`; no PUT of a
//!   stale copy, so no 409s);
//! - `FailedScheduling` (Warning) with the same message, and `Scheduled` (Normal)
//!   `"Successfully assigned <ns>/<name> to <node>"`, as core/v1 Events whose source component is
//!   the scheduler name.

use crate::ratelimit::TokenBucket;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use magma_engine::core::StatusIntent;
use serde::de::IgnoredAny;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::mpsc;

/// A status write to make.
#[derive(Debug, Clone)]
pub enum StatusMsg {
    /// `PodScheduled=False` + `FailedScheduling` event.
    Failed(StatusIntent),
    /// `Scheduled` event.
    Scheduled {
        namespace: Arc<str>,
        name: Arc<str>,
        uid: Arc<str>,
        node: Arc<str>,
    },
}

/// Writes dropped because their lane was full, by event reason (shared with the metrics).
#[derive(Debug, Default)]
pub struct EventDrops {
    pub failed_scheduling: AtomicU64,
    pub scheduled: AtomicU64,
    /// Failed-lane writes replaced by a newer one for the same pod, or cancelled by its binding,
    /// before they were sent.
    pub coalesced: AtomicU64,
    /// Writes queued or in flight, by lane (`magma_status_writes_pending`): 0 once a lane has
    /// written everything it was given.
    pub pending_failed: AtomicU64,
    pub pending_scheduled: AtomicU64,
    /// The Scheduled lane is shedding (for the start/end log lines).
    shedding: AtomicBool,
}

/// Queue capacity of the Failed lane.
pub const FAILED_CAPACITY: usize = 8192;

/// Queue capacity of the Scheduled lane: eight seconds of its budget (at least its burst).
pub fn scheduled_capacity(qps: f64, burst: u32) -> usize {
    ((qps * 8.0).ceil() as usize).max(burst as usize).max(1)
}

/// The Failed lane's pending writes, one per pod (module doc). The channel carries a pod's uid
/// once per entry added here; a uid whose entry was replaced stays in line once, one whose entry
/// was cancelled is skipped when it comes up.
type PendingFailed = Arc<Mutex<HashMap<Arc<str>, StatusIntent>>>;

/// The sending side: never blocks, drops (and counts) when a lane is full.
#[derive(Clone)]
pub struct StatusSink {
    failed: mpsc::Sender<Arc<str>>,
    pending: PendingFailed,
    scheduled: mpsc::Sender<StatusMsg>,
    drops: Arc<EventDrops>,
}

/// The receiving sides, for [`run_writer`].
pub struct StatusLanes {
    failed: FailedQueue,
    scheduled: mpsc::Receiver<StatusMsg>,
}

/// The receiving side of the Failed lane.
pub struct FailedQueue {
    order: mpsc::Receiver<Arc<str>>,
    pending: PendingFailed,
}

impl FailedQueue {
    /// The next pod's write, with its latest message as it stands once `ready` (the lane's token)
    /// resolves: the entry stays queued, and keeps taking newer messages, until then. `None`
    /// once every sink is gone.
    pub async fn next(&mut self, ready: impl AsyncFnOnce()) -> Option<StatusIntent> {
        let mut batch = self.next_batch(1, async move |_| ready().await).await?;
        batch.pop()
    }

    /// The next pods' writes, up to `max` of them: the first in line (waited for) and those
    /// queued behind it (not waited for). `ready(n)` is called once with their number (the
    /// lane's `n` tokens) and each write is taken with its latest message as it stands when
    /// `ready` resolves. Never empty; `None` once every sink is gone.
    pub async fn next_batch(
        &mut self,
        max: usize,
        ready: impl AsyncFnOnce(usize),
    ) -> Option<Vec<StatusIntent>> {
        let mut ready = Some(ready);
        let mut max = max.max(1);
        let mut uids: Vec<Arc<str>> = Vec::with_capacity(max);
        loop {
            let uid = self.order.recv().await?;
            {
                let pending = lock(&self.pending);
                if !pending.contains_key(&uid) {
                    continue; // cancelled by its binding: no token spent
                }
                uids.push(uid);
                while uids.len() < max {
                    let Ok(uid) = self.order.try_recv() else {
                        break;
                    };
                    // A uid cancelled and queued anew is in line twice: one write.
                    if pending.contains_key(&uid) && !uids.contains(&uid) {
                        uids.push(uid);
                    }
                }
            }
            if let Some(ready) = ready.take() {
                ready(uids.len()).await;
                // Paid for: if every one is cancelled meanwhile, the next ones take their
                // tokens, so never more of them.
                max = uids.len();
            }
            let mut pending = lock(&self.pending);
            let batch: Vec<StatusIntent> =
                uids.drain(..).filter_map(|u| pending.remove(&u)).collect();
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

fn lock(p: &PendingFailed) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, StatusIntent>> {
    // A panic while holding it leaves the map consistent (single inserts and removes).
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl StatusSink {
    pub fn new(
        failed_capacity: usize,
        scheduled_capacity: usize,
        drops: Arc<EventDrops>,
    ) -> (StatusSink, StatusLanes) {
        let (ftx, frx) = mpsc::channel(failed_capacity.max(1));
        let (stx, srx) = mpsc::channel(scheduled_capacity.max(1));
        let pending = PendingFailed::default();
        (
            StatusSink {
                failed: ftx,
                pending: pending.clone(),
                scheduled: stx,
                drops,
            },
            StatusLanes {
                failed: FailedQueue {
                    order: frx,
                    pending,
                },
                scheduled: srx,
            },
        )
    }

    /// Queue a write in its lane; returns `false` (and counts it) if that lane is full. A
    /// `Failed` write replaces the pod's queued one; a `Scheduled` event cancels it.
    pub fn offer(&self, msg: StatusMsg) -> bool {
        match msg {
            StatusMsg::Failed(s) => {
                let mut pending = lock(&self.pending);
                let uid = s.uid.clone();
                if let Some(queued) = pending.get_mut(&uid) {
                    *queued = s;
                    self.drops.coalesced.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                // Under the lock, so the uid is in line exactly when its entry is (or was).
                let ok = self.failed.try_send(uid.clone()).is_ok();
                if ok {
                    self.drops.pending_failed.fetch_add(1, Ordering::Relaxed);
                    pending.insert(uid, s);
                } else {
                    self.drops.failed_scheduling.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "condition and FailedScheduling queue full ({FAILED_CAPACITY} pods \
                         waiting): dropping one"
                    );
                }
                ok
            }
            StatusMsg::Scheduled { ref uid, .. } => {
                if lock(&self.pending).remove(uid).is_some() {
                    self.drops.coalesced.fetch_add(1, Ordering::Relaxed);
                    self.drops.pending_failed.fetch_sub(1, Ordering::Relaxed);
                }
                // Counted before it can be taken, so the lane's decrement never comes first.
                self.drops.pending_scheduled.fetch_add(1, Ordering::Relaxed);
                let ok = self.scheduled.try_send(msg).is_ok();
                if !ok {
                    self.drops.pending_scheduled.fetch_sub(1, Ordering::Relaxed);
                    self.drops.scheduled.fetch_add(1, Ordering::Relaxed);
                    if !self.drops.shedding.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "Scheduled events queue full (eight seconds of the --event-qps budget): \
                             shedding Scheduled events until it drains"
                        );
                    }
                }
                ok
            }
        }
    }

    /// The lanes' counters (drops, coalesced writes).
    pub fn counters(&self) -> &EventDrops {
        &self.drops
    }

    /// Writes dropped so far, both lanes.
    pub fn dropped(&self) -> u64 {
        self.drops.failed_scheduling.load(Ordering::Relaxed)
            + self.drops.scheduled.load(Ordering::Relaxed)
    }
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The pod-status patch for a failed scheduling attempt.
pub fn condition_patch(reason: &str, message: &str) -> serde_json::Value {
    json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_time(),
        "lastProbeTime": null,
    }]}})
}

/// A core/v1 Event about a pod.
pub fn pod_event(
    component: &str,
    ns: &str,
    name: &str,
    uid: &str,
    type_: &str,
    reason: &str,
    message: &str,
) -> Event {
    let now = now_time();
    let suffix: u64 = rand::random();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{suffix:016x}")),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(ns.to_owned()),
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            ..Default::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some(type_.to_owned()),
        count: Some(1),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now.clone()),
        event_time: Some(MicroTime(now.0)),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: None,
        }),
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(component.to_owned()),
        action: Some(if type_ == "Normal" {
            "Binding".into()
        } else {
            "Scheduling".into()
        }),
        ..Default::default()
    }
}

/// Write every queued status message until both lanes close: each lane with its own token
/// bucket, so neither waits for the other.
pub async fn run_writer(
    client: Client,
    component: String,
    failed_limiter: TokenBucket,
    scheduled_limiter: TokenBucket,
    lanes: StatusLanes,
    drops: Arc<EventDrops>,
) {
    let StatusLanes { failed, scheduled } = lanes;
    let failed = lane(
        client.clone(),
        component.clone(),
        failed_limiter,
        Source::Failed(failed),
        drops.clone(),
    );
    let scheduled = lane(
        client,
        component,
        scheduled_limiter,
        Source::Scheduled(scheduled),
        drops,
    );
    tokio::join!(failed, scheduled);
}

/// Where a lane takes its writes from.
enum Source {
    Failed(FailedQueue),
    Scheduled(mpsc::Receiver<StatusMsg>),
}

impl Source {
    /// The next writes, up to `max` (at least one: the first waited for, the rest already
    /// queued behind it), into `out`, `limiter`'s tokens taken for them together. `false` once
    /// the lane is closed.
    async fn next_batch(
        &mut self,
        limiter: &TokenBucket,
        max: usize,
        out: &mut Vec<StatusMsg>,
    ) -> bool {
        match self {
            Source::Failed(q) => {
                let batch = q
                    .next_batch(max, async |n| {
                        limiter.acquire_n(n as u32).await;
                    })
                    .await;
                batch.is_some_and(|b| {
                    out.extend(b.into_iter().map(StatusMsg::Failed));
                    true
                })
            }
            Source::Scheduled(rx) => {
                let Some(msg) = rx.recv().await else {
                    return false;
                };
                out.push(msg);
                while out.len() < max {
                    let Ok(msg) = rx.try_recv() else {
                        break;
                    };
                    out.push(msg);
                }
                limiter.acquire_n(out.len() as u32).await;
                true
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Source::Failed(q) => q.is_empty(),
            Source::Scheduled(rx) => rx.is_empty(),
        }
    }
}

/// The most writes a lane sends at once: the tokens that accrue in [`BATCH_WINDOW`] (at least
/// one, at most the burst and [`MAX_BATCH`]).
pub fn batch_size(limiter: &TokenBucket) -> usize {
    let Some(qps) = limiter.qps() else {
        return MAX_BATCH;
    };
    let window = (qps * BATCH_WINDOW.as_secs_f64()).ceil();
    (window as usize).clamp(1, (limiter.burst() as usize).min(MAX_BATCH))
}

/// How long a lane that is behind its budget lets tokens accrue before it sends: it then sends
/// the writes those tokens allow together. One write at a time, each on its own timer expiry,
/// cost 0.5 ms of CPU apiece (cold caches, a wake-up and two socket writes for every one) and
/// was a fifth of the scheduler's CPU in a 10,000-pod burst (issue 15, BENCHMARKS.md). A lane
/// that is not behind sends each write at once; the rate is the bucket's either way. Only a lane
/// already behind waits for a batch: the first write of a batch then goes out up to a window
/// later than it would alone, the last one no later.
pub const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// The most writes a lane has in flight.
pub const MAX_BATCH: usize = 64;

async fn lane(
    client: Client,
    component: String,
    limiter: TokenBucket,
    mut source: Source,
    drops: Arc<EventDrops>,
) {
    let max = batch_size(&limiter);
    let d = &*drops;
    let scheduled = matches!(source, Source::Scheduled(_));
    let pending = if scheduled {
        &d.pending_scheduled
    } else {
        &d.pending_failed
    };
    let mut shed_at_start = 0;
    let mut batch = Vec::with_capacity(max);
    while source.next_batch(&limiter, max, &mut batch).await {
        futures::future::join_all(batch.iter().map(|m| write(&client, &component, m))).await;
        pending.fetch_sub(batch.len() as u64, Ordering::Relaxed);
        batch.clear();
        if scheduled && source.is_empty() && d.shedding.swap(false, Ordering::Relaxed) {
            let total = d.scheduled.load(Ordering::Relaxed);
            tracing::info!(
                dropped = total - shed_at_start,
                "Scheduled events queue drained: shedding stopped"
            );
            shed_at_start = total;
        }
    }
}

async fn write(client: &Client, component: &str, msg: &StatusMsg) {
    let result = match msg {
        StatusMsg::Failed(s) => {
            let patch = condition_patch(s.reason.as_str(), &s.message);
            let cond = patch_condition(client, &s.namespace, &s.name, &patch).await;
            if let Err(e) = &cond {
                tracing::debug!(pod = %format!("{}/{}", s.namespace, s.name), error = %e, "condition patch failed");
            }
            let ev = pod_event(
                component,
                &s.namespace,
                &s.name,
                &s.uid,
                "Warning",
                "FailedScheduling",
                &s.message,
            );
            create_event(client, &s.namespace, &ev).await
        }
        StatusMsg::Scheduled {
            namespace,
            name,
            uid,
            node,
        } => {
            let message = format!("Successfully assigned {namespace}/{name} to {node}");
            let ev = pod_event(
                component,
                namespace,
                name,
                uid,
                "Normal",
                "Scheduled",
                &message,
            );
            create_event(client, namespace, &ev).await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "event write failed");
    }
}

/// Strategic-merge patch of `pods/{name}/status`. The answer (the whole pod, `managedFields`
/// and all) is only checked for success: skipped, not decoded.
async fn patch_condition(
    client: &Client,
    ns: &str,
    name: &str,
    patch: &serde_json::Value,
) -> kube::Result<()> {
    let req = kube::core::Request::new(<Pod as kube::Resource>::url_path(&(), Some(ns)))
        .patch_subresource(
            "status",
            name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    client.request::<IgnoredAny>(req).await.map(|_| ())
}

/// `POST events`; the answer (the event) is skipped, not decoded.
async fn create_event(client: &Client, ns: &str, ev: &Event) -> kube::Result<()> {
    let body = serde_json::to_vec(ev).map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(<Event as kube::Resource>::url_path(&(), Some(ns)))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request::<IgnoredAny>(req).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use magma_engine::StatusReason;

    fn failed(uid: &str, message: &str) -> StatusMsg {
        StatusMsg::Failed(StatusIntent {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            reason: StatusReason::Unschedulable,
            message: message.into(),
        })
    }

    fn scheduled(uid: &str) -> StatusMsg {
        StatusMsg::Scheduled {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
            node: "n0".into(),
        }
    }

    /// What the Failed lane writes next, without waiting.
    fn next_now(lanes: &mut StatusLanes) -> Option<(String, String)> {
        let fut = lanes.failed.next(async || {});
        let got = futures::FutureExt::now_or_never(fut).flatten();
        got.map(|s| (s.uid.to_string(), s.message.to_string()))
    }

    fn pair(uid: &str, message: &str) -> Option<(String, String)> {
        Some((uid.to_owned(), message.to_owned()))
    }

    #[test]
    fn a_pods_queued_write_is_replaced_by_its_latest_message_in_its_place() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(4, 4, drops.clone());
        assert!(sink.offer(failed("a", "0/1 nodes: 1 Insufficient cpu")));
        assert!(sink.offer(failed("b", "b1")));
        for i in 2..100 {
            assert!(sink.offer(failed("a", &format!("0/{i} nodes"))));
        }
        assert_eq!(next_now(&mut lanes), pair("a", "0/99 nodes"));
        assert_eq!(next_now(&mut lanes), pair("b", "b1"));
        assert_eq!(next_now(&mut lanes), None);
        assert_eq!(drops.coalesced.load(Ordering::Relaxed), 98);
        assert_eq!(drops.failed_scheduling.load(Ordering::Relaxed), 0);
    }

    /// The pod next in line keeps taking newer messages while its write waits for a token.
    #[tokio::test]
    async fn a_write_waiting_for_its_token_takes_the_latest_message() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(4, 4, drops.clone());
        sink.offer(failed("a", "a1"));
        let (go, token) = tokio::sync::oneshot::channel::<()>();
        let writer = tokio::spawn(async move {
            let s = lanes.failed.next(async || drop(token.await)).await;
            s.map(|s| s.message.to_string())
        });
        // The writer has taken `a` from the line and waits for its token.
        while !writer_has_its_turn(&sink) {
            tokio::task::yield_now().await;
        }
        sink.offer(failed("a", "a2"));
        go.send(()).unwrap();
        assert_eq!(writer.await.unwrap().as_deref(), Some("a2"));
        assert_eq!(drops.coalesced.load(Ordering::Relaxed), 1);
    }

    /// The writer took the pod's turn from the line (now empty) and waits for its token: the
    /// entry is still pending.
    fn writer_has_its_turn(sink: &StatusSink) -> bool {
        sink.failed.capacity() == sink.failed.max_capacity() && !lock(&sink.pending).is_empty()
    }

    /// A batch is the first pod in line and those queued behind it, each with its latest
    /// message as it stands when the batch's tokens come, and one token request for all.
    #[tokio::test]
    async fn a_batch_takes_the_queued_pods_with_their_latest_messages() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(8, 4, drops.clone());
        for uid in ["a", "b", "c"] {
            sink.offer(failed(uid, &format!("{uid}1")));
        }
        // `b` is cancelled by its binding and unschedulable again: in line twice, written once.
        sink.offer(scheduled("b"));
        sink.offer(failed("b", "b2"));
        // Pending: three conditions (b's first one cancelled) and one Scheduled event.
        assert_eq!(drops.pending_failed.load(Ordering::Relaxed), 3);
        assert_eq!(drops.pending_scheduled.load(Ordering::Relaxed), 1);
        let asked = std::cell::Cell::new(0);
        let batch = lanes
            .failed
            .next_batch(8, async |n| {
                asked.set(n);
                sink.offer(failed("a", "a2"));
            })
            .await
            .unwrap();
        let got: Vec<_> = batch.iter().map(|s| (&*s.uid, &*s.message)).collect();
        assert_eq!(got, [("a", "a2"), ("b", "b2"), ("c", "c1")]);
        assert_eq!(asked.get(), 3);
        // `max` bounds a batch.
        for uid in ["d", "e", "f"] {
            sink.offer(failed(uid, uid));
        }
        let batch = lanes.failed.next_batch(2, async |_| {}).await.unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(next_now(&mut lanes), pair("f", "f"));
        assert_eq!(next_now(&mut lanes), None);
    }

    /// Tokens paid for a batch cancelled while it waited go to the next pods, never to more
    /// of them than were paid for.
    #[tokio::test]
    async fn a_batch_cancelled_while_it_waits_pays_for_as_many_as_it_took() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(8, 8, drops.clone());
        for uid in ["a", "b"] {
            sink.offer(failed(uid, uid));
        }
        let asked = std::cell::Cell::new(0);
        let batch = lanes
            .failed
            .next_batch(8, async |n| {
                asked.set(n);
                sink.offer(scheduled("a"));
                sink.offer(scheduled("b"));
                for uid in ["c", "d", "e"] {
                    sink.offer(failed(uid, uid));
                }
            })
            .await
            .unwrap();
        assert_eq!(asked.get(), 2);
        let got: Vec<_> = batch.iter().map(|s| &*s.uid).collect();
        assert_eq!(got, ["c", "d"]);
        assert_eq!(next_now(&mut lanes), pair("e", "e"));
    }

    #[test]
    fn a_batch_is_the_budget_of_its_window() {
        assert_eq!(batch_size(&TokenBucket::new(50.0, 100)), 13);
        assert_eq!(batch_size(&TokenBucket::new(2.0, 2)), 1);
        assert_eq!(batch_size(&TokenBucket::new(0.2, 1)), 1);
        assert_eq!(batch_size(&TokenBucket::new(1000.0, 10)), 10);
        assert_eq!(batch_size(&TokenBucket::new(1e6, 1_000_000)), MAX_BATCH);
        assert_eq!(batch_size(&TokenBucket::new(0.0, 1)), MAX_BATCH);
    }

    #[test]
    fn a_binding_cancels_the_pods_queued_condition() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(4, 4, drops.clone());
        sink.offer(failed("a", "a1"));
        sink.offer(failed("b", "b1"));
        sink.offer(scheduled("a"));
        assert_eq!(next_now(&mut lanes), pair("b", "b1"));
        assert_eq!(next_now(&mut lanes), None);
        // Unschedulable again after the cancel: queued anew, written once.
        sink.offer(failed("a", "a2"));
        sink.offer(failed("a", "a3"));
        assert_eq!(next_now(&mut lanes), pair("a", "a3"));
        assert_eq!(next_now(&mut lanes), None);
        assert_eq!(drops.coalesced.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_failed_lane_is_bounded_by_pods_not_attempts() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(2, 1, drops.clone());
        for round in 0..50 {
            for uid in ["a", "b"] {
                assert!(sink.offer(failed(uid, &format!("{uid}{round}"))));
            }
        }
        // A third pod finds both places taken: dropped, counted.
        assert!(!sink.offer(failed("c", "c0")));
        assert_eq!(drops.failed_scheduling.load(Ordering::Relaxed), 1);
        assert_eq!(next_now(&mut lanes), pair("a", "a49"));
        assert!(sink.offer(failed("c", "c1")));
        assert_eq!(next_now(&mut lanes), pair("b", "b49"));
        assert_eq!(next_now(&mut lanes), pair("c", "c1"));
    }
}
