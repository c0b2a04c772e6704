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
//!
//! Writes, matching upstream's reasons and messages:
//! - `PodScheduled=False` with reason `Unschedulable` or `SchedulerError` and the engine's
//!   message, by strategic-merge patch of `pods/status` (conditions merge by `type`; no PUT of a
//!   stale copy, so no 409s);
//! - `FailedScheduling` (Warning) with the same message, and `Scheduled` (Normal)
//!   "Successfully assigned <ns>/<name> to <node>", as core/v1 Events whose source component is
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
        let mut ready = Some(ready);
        loop {
            let uid = self.order.recv().await?;
            if !lock(&self.pending).contains_key(&uid) {
                continue; // cancelled by its binding: no token spent
            }
            if let Some(ready) = ready.take() {
                ready().await;
            }
            if let Some(s) = lock(&self.pending).remove(&uid) {
                return Some(s);
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
                }
                let ok = self.scheduled.try_send(msg).is_ok();
                if !ok {
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
        None,
    );
    let scheduled = lane(
        client,
        component,
        scheduled_limiter,
        Source::Scheduled(scheduled),
        Some(drops),
    );
    tokio::join!(failed, scheduled);
}

/// Where a lane takes its writes from.
enum Source {
    Failed(FailedQueue),
    Scheduled(mpsc::Receiver<StatusMsg>),
}

impl Source {
    /// The next write, `limiter`'s token taken for it.
    async fn next(&mut self, limiter: &TokenBucket) -> Option<StatusMsg> {
        match self {
            Source::Failed(q) => q
                .next(async || {
                    limiter.acquire().await;
                })
                .await
                .map(StatusMsg::Failed),
            Source::Scheduled(rx) => {
                let msg = rx.recv().await?;
                limiter.acquire().await;
                Some(msg)
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

async fn lane(
    client: Client,
    component: String,
    limiter: TokenBucket,
    mut source: Source,
    shedding: Option<Arc<EventDrops>>,
) {
    let mut shed_at_start = 0;
    while let Some(msg) = source.next(&limiter).await {
        write(&client, &component, &msg).await;
        if let Some(d) = &shedding
            && source.is_empty()
            && d.shedding.swap(false, Ordering::Relaxed)
        {
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
