//! Pod conditions and events: every pod that waits says why, every bound pod gets its
//! `Scheduled` event, and neither slows binding.
//!
//! - **Conditions** (`PodScheduled=False`): written on the main client's budget
//!   (`--kube-api-qps`/`--kube-api-burst`, shared with the bindings, as kube-scheduler patches
//!   pod status through its main client), as **priority** callers of its token bucket
//!   (`ratelimit`): a pod's condition is never queued behind a burst of bindings. The queue holds
//!   one write per pod, as client-go's workqueue holds one entry per key: the engine emits a status
//!   intent whenever a pod's message changes; a newer intent for a pod whose write is still queued
//!   replaces it in place (its place in line kept), and the pod's binding cancels it (a
//!   `PodScheduled=False` written after the binding would contradict it). Replaced and cancelled
//!   writes are counted (`magma_status_writes_coalesced_total`). The queue is as long as the pods
//!   waiting for a write, never the attempts; it holds [`CONDITIONS_CAPACITY`] pods. A write the
//!   API server refuses for a reason other than the pod being gone is tried again, up to
//!   [`MAX_TRIES`] times, unless a newer one replaced it. The time from the decision to the
//!   written condition is `magma_condition_write_seconds`.
//! - **Events** (`FailedScheduling` for each condition written, `Scheduled` for each binding):
//!   their own client budget (`--event-qps`/`--event-burst`, by default the main client's, so
//!   the events keep up with the bindings), `FailedScheduling` ahead of `Scheduled`. The queue
//!   holds [`EVENTS_QUEUE_SECONDS`] of that budget: at the default budget it never fills; with a
//!   lower budget set by the user a burst's surplus is shed, counted in
//!   `magma_events_dropped_total{reason}`, and one log line says when shedding starts and one
//!   when it ends. A failed event write is tried again as a condition is.
//! - **Batches**: a lane that is behind its budget waits for [`BATCH_WINDOW`]'s worth of tokens
//!   and sends that many writes together (concurrently, one token each); a lane that is not
//!   behind sends each write as it comes. `magma_status_writes_pending{lane}` (conditions,
//!   events) is what a lane still has queued or in flight.
//!
//! Writes, matching upstream's reasons and messages:
//! - `PodScheduled=False` with reason `Unschedulable` or `SchedulerError` and the engine's
//!   message, by strategic-merge patch of `pods/status` (conditions merge by `type`; no PUT of a
//!   stale copy, so no 409s); a failed binding's condition also clears `status.nominatedNodeName`
//!   (kube-scheduler's `clearNominatedNode`);
//! - `FailedScheduling` (Warning) with the same message, and `Scheduled` (Normal)
//!   `"Successfully assigned <ns>/<name> to <node>"`, as core/v1 Events whose reporting
//!   component is the scheduler name (both show in `kubectl describe pod`).

use crate::ratelimit::TokenBucket;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use magma_engine::core::StatusIntent;
use serde::de::IgnoredAny;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A status write to make.
#[derive(Debug, Clone)]
pub enum StatusMsg {
    /// `PodScheduled=False`, then a `FailedScheduling` event.
    Failed(StatusIntent),
    /// `Scheduled` event.
    Scheduled {
        namespace: Arc<str>,
        name: Arc<str>,
        uid: Arc<str>,
        node: Arc<str>,
    },
}

/// The lanes' counters (shared with the metrics).
#[derive(Debug, Default)]
pub struct EventDrops {
    /// Events dropped because the events queue was full, by reason.
    pub failed_scheduling: AtomicU64,
    pub scheduled: AtomicU64,
    /// Condition writes dropped because [`CONDITIONS_CAPACITY`] other pods were waiting.
    pub conditions: AtomicU64,
    /// Condition writes replaced by a newer one for the same pod, or cancelled by its binding,
    /// before they were sent.
    pub coalesced: AtomicU64,
    /// Writes given up after [`MAX_TRIES`] refusals.
    pub failed_writes: AtomicU64,
    /// Writes queued or in flight, by lane (`magma_status_writes_pending`): 0 once a lane has
    /// written everything it was given.
    pub pending_conditions: AtomicU64,
    pub pending_events: AtomicU64,
    /// The events lane is shedding (for the start/end log lines).
    shedding: AtomicBool,
}

/// Most pods waiting for their condition write at once (far above any pending backlog a
/// scheduler holds; each entry is a few hundred bytes).
pub const CONDITIONS_CAPACITY: usize = 1 << 20;

/// How many seconds of its budget the events queue holds.
pub const EVENTS_QUEUE_SECONDS: f64 = 60.0;

/// Most attempts of one write.
pub const MAX_TRIES: u8 = 5;

/// Capacity of the events queue for a budget: [`EVENTS_QUEUE_SECONDS`] of it (at least its
/// burst), at most 4 Mi events.
pub fn events_capacity(qps: f64, burst: u32) -> usize {
    let secs = if qps > 0.0 && qps.is_finite() {
        (qps * EVENTS_QUEUE_SECONDS).ceil() as usize
    } else {
        usize::MAX / 4
    };
    secs.max(burst as usize).clamp(1, 1 << 22)
}

/// A pod's pending condition: its latest intent, when its first queued intent was decided, and
/// the attempts made so far.
#[derive(Debug, Clone)]
struct PendingCondition {
    intent: StatusIntent,
    decided: Instant,
    tries: u8,
}

/// The conditions lane's pending writes, one per pod (module doc). The channel carries a pod's
/// uid once per entry added here; a uid whose entry was replaced stays in line once, one whose
/// entry was cancelled is skipped when it comes up.
type Pending = Arc<Mutex<HashMap<Arc<str>, PendingCondition>>>;

/// An event to write.
#[derive(Debug, Clone)]
struct EventMsg {
    namespace: Arc<str>,
    name: Arc<str>,
    uid: Arc<str>,
    /// `Scheduled` (Normal) or `FailedScheduling` (Warning).
    scheduled: bool,
    message: Arc<str>,
    tries: u8,
}

/// The sending side: never blocks, drops (and counts) only when a lane is full.
#[derive(Clone)]
pub struct StatusSink {
    conditions: mpsc::Sender<Arc<str>>,
    pending: Pending,
    failed_events: mpsc::Sender<EventMsg>,
    scheduled_events: mpsc::Sender<EventMsg>,
    drops: Arc<EventDrops>,
}

/// The receiving sides, for [`run_writer`].
pub struct StatusLanes {
    conditions: ConditionQueue,
    failed_events: mpsc::Receiver<EventMsg>,
    scheduled_events: mpsc::Receiver<EventMsg>,
}

/// The receiving side of the conditions lane.
pub struct ConditionQueue {
    order: mpsc::Receiver<Arc<str>>,
    pending: Pending,
}

/// One condition write taken from the queue.
#[derive(Debug, Clone)]
pub struct ConditionWrite {
    pub intent: StatusIntent,
    pub decided: Instant,
    tries: u8,
}

impl ConditionQueue {
    /// The next pod's write, with its latest message as it stands once `ready` (the lane's
    /// token) resolves. `None` once every sink is gone.
    pub async fn next(&mut self, ready: impl AsyncFnOnce()) -> Option<ConditionWrite> {
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
    ) -> Option<Vec<ConditionWrite>> {
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
            let batch: Vec<ConditionWrite> = uids
                .drain(..)
                .filter_map(|u| pending.remove(&u))
                .map(|p| ConditionWrite {
                    intent: p.intent,
                    decided: p.decided,
                    tries: p.tries,
                })
                .collect();
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }
}

fn lock(p: &Pending) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, PendingCondition>> {
    // A panic while holding it leaves the map consistent (single inserts and removes).
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl StatusSink {
    pub fn new(
        conditions_capacity: usize,
        events_capacity: usize,
        drops: Arc<EventDrops>,
    ) -> (StatusSink, StatusLanes) {
        let (ctx, crx) = mpsc::channel(conditions_capacity.max(1));
        let (ftx, frx) = mpsc::channel(events_capacity.max(1));
        let (stx, srx) = mpsc::channel(events_capacity.max(1));
        let pending = Pending::default();
        (
            StatusSink {
                conditions: ctx,
                pending: pending.clone(),
                failed_events: ftx,
                scheduled_events: stx,
                drops,
            },
            StatusLanes {
                conditions: ConditionQueue {
                    order: crx,
                    pending,
                },
                failed_events: frx,
                scheduled_events: srx,
            },
        )
    }

    /// Queue a write in its lane; returns `false` (and counts it) if that lane is full. A
    /// `Failed` write replaces the pod's queued one; a `Scheduled` event cancels it.
    pub fn offer(&self, msg: StatusMsg) -> bool {
        match msg {
            StatusMsg::Failed(s) => self.offer_condition(s, Instant::now(), 0),
            StatusMsg::Scheduled {
                namespace,
                name,
                uid,
                node,
            } => {
                if lock(&self.pending).remove(&uid).is_some() {
                    self.drops.coalesced.fetch_add(1, Ordering::Relaxed);
                    self.drops
                        .pending_conditions
                        .fetch_sub(1, Ordering::Relaxed);
                }
                let message = format!("Successfully assigned {namespace}/{name} to {node}");
                self.offer_event(EventMsg {
                    namespace,
                    name,
                    uid,
                    scheduled: true,
                    message: message.into(),
                    tries: 0,
                })
            }
        }
    }

    fn offer_condition(&self, s: StatusIntent, decided: Instant, tries: u8) -> bool {
        let mut pending = lock(&self.pending);
        let uid = s.uid.clone();
        if let Some(queued) = pending.get_mut(&uid) {
            if tries == 0 {
                queued.intent = s;
                self.drops.coalesced.fetch_add(1, Ordering::Relaxed);
            }
            // A retry of a write that a newer intent replaced meanwhile: the newer one stands.
            return true;
        }
        // Under the lock, so the uid is in line exactly when its entry is (or was).
        let ok = self.conditions.try_send(uid.clone()).is_ok();
        if ok {
            self.drops
                .pending_conditions
                .fetch_add(1, Ordering::Relaxed);
            pending.insert(
                uid,
                PendingCondition {
                    intent: s,
                    decided,
                    tries,
                },
            );
        } else {
            self.drops.conditions.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "condition queue full ({CONDITIONS_CAPACITY} pods waiting): dropping one"
            );
        }
        ok
    }

    fn offer_event(&self, e: EventMsg) -> bool {
        let scheduled = e.scheduled;
        // Counted before it can be taken, so the lane's decrement never comes first.
        self.drops.pending_events.fetch_add(1, Ordering::Relaxed);
        let queue = if scheduled {
            &self.scheduled_events
        } else {
            &self.failed_events
        };
        let ok = queue.try_send(e).is_ok();
        if !ok {
            self.drops.pending_events.fetch_sub(1, Ordering::Relaxed);
            let counter = if scheduled {
                &self.drops.scheduled
            } else {
                &self.drops.failed_scheduling
            };
            counter.fetch_add(1, Ordering::Relaxed);
            if !self.drops.shedding.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "events queue full ({EVENTS_QUEUE_SECONDS} s of the --event-qps budget): \
                     shedding events until it drains"
                );
            }
        }
        ok
    }

    /// The lanes' counters (drops, coalesced writes).
    pub fn counters(&self) -> &EventDrops {
        &self.drops
    }

    /// Writes dropped so far, every lane.
    pub fn dropped(&self) -> u64 {
        self.drops.failed_scheduling.load(Ordering::Relaxed)
            + self.drops.scheduled.load(Ordering::Relaxed)
            + self.drops.conditions.load(Ordering::Relaxed)
    }
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The pod-status patch for a failed scheduling attempt; `clear_nominated` also clears
/// `status.nominatedNodeName`.
pub fn condition_patch(reason: &str, message: &str, clear_nominated: bool) -> serde_json::Value {
    let mut patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_time(),
        "lastProbeTime": null,
    }]}});
    if clear_nominated {
        patch["status"]["nominatedNodeName"] = serde_json::Value::Null;
    }
    patch
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

/// The clients and budgets the writer uses.
pub struct Budgets {
    /// The main client and its token bucket (shared with the bindings): conditions.
    pub main: Client,
    pub main_limiter: Arc<TokenBucket>,
    /// The events client and its own token bucket.
    pub events: Client,
    pub events_limiter: TokenBucket,
}

/// Observes each condition written: the time since its decision.
pub type ConditionHook = Arc<dyn Fn(Duration) + Send + Sync>;

/// Write every queued condition and event until the lanes close; neither waits for the other.
pub async fn run_writer(
    budgets: Budgets,
    component: String,
    lanes: StatusLanes,
    sink: StatusSink,
    on_condition: ConditionHook,
) {
    let StatusLanes {
        conditions,
        failed_events,
        scheduled_events,
    } = lanes;
    let Budgets {
        main,
        main_limiter,
        events,
        events_limiter,
    } = budgets;
    let conditions = condition_lane(main, main_limiter, conditions, sink.clone(), on_condition);
    let events = event_lane(
        events,
        component,
        events_limiter,
        failed_events,
        scheduled_events,
        sink,
    );
    tokio::join!(conditions, events);
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
pub const BATCH_WINDOW: Duration = Duration::from_millis(250);

/// The most writes a lane has in flight.
pub const MAX_BATCH: usize = 64;

/// Whether a refused write is worth another try: not when the pod is gone (404) or the write
/// itself is invalid (4xx other than 409 and 429).
fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        _ => true,
    }
}

/// The delay before a refused write is offered again.
fn retry_delay(tries: u8) -> Duration {
    Duration::from_millis(200u64 << tries.min(5))
}

async fn condition_lane(
    client: Client,
    limiter: Arc<TokenBucket>,
    mut queue: ConditionQueue,
    sink: StatusSink,
    on_condition: ConditionHook,
) {
    // The budget is shared with the bindings, whose batches are the bind executor's: a batch
    // here is the window of the whole budget.
    let max = batch_size(&limiter);
    let d = sink.drops.clone();
    while let Some(batch) = queue
        .next_batch(max, async |n| {
            limiter.acquire_n_priority(n as u32).await;
        })
        .await
    {
        let results = futures::future::join_all(batch.iter().map(|w| {
            let s = &w.intent;
            let patch = condition_patch(s.reason.as_str(), &s.message, s.clear_nominated);
            patch_status(&client, &s.namespace, &s.name, patch)
        }))
        .await;
        d.pending_conditions
            .fetch_sub(batch.len() as u64, Ordering::Relaxed);
        for (w, result) in batch.into_iter().zip(results) {
            let s = &w.intent;
            match result {
                Ok(()) => {
                    on_condition(w.decided.elapsed());
                    sink.offer_event(EventMsg {
                        namespace: s.namespace.clone(),
                        name: s.name.clone(),
                        uid: s.uid.clone(),
                        scheduled: false,
                        message: s.message.clone(),
                        tries: 0,
                    });
                }
                Err(e) if retryable(&e) && w.tries + 1 < MAX_TRIES => {
                    tracing::debug!(pod = %format!("{}/{}", s.namespace, s.name), error = %e, "condition patch failed; retrying");
                    let sink = sink.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(retry_delay(w.tries)).await;
                        sink.offer_condition(w.intent, w.decided, w.tries + 1);
                    });
                }
                Err(e) => {
                    if retryable(&e) {
                        d.failed_writes.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::debug!(pod = %format!("{}/{}", s.namespace, s.name), error = %e, "condition patch failed");
                }
            }
        }
    }
}

async fn event_lane(
    client: Client,
    component: String,
    limiter: TokenBucket,
    mut failed: mpsc::Receiver<EventMsg>,
    mut scheduled: mpsc::Receiver<EventMsg>,
    sink: StatusSink,
) {
    let max = batch_size(&limiter);
    let d = sink.drops.clone();
    let mut shed_at_start = 0;
    let mut batch: Vec<EventMsg> = Vec::with_capacity(max);
    loop {
        // FailedScheduling first; either kind starts a batch.
        let first = tokio::select! {
            biased;
            Some(e) = failed.recv() => e,
            Some(e) = scheduled.recv() => e,
            else => return,
        };
        batch.push(first);
        while batch.len() < max {
            match failed.try_recv().or_else(|_| scheduled.try_recv()) {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        limiter.acquire_n(batch.len() as u32).await;
        let results = futures::future::join_all(batch.iter().map(|e| {
            let (type_, reason) = if e.scheduled {
                ("Normal", "Scheduled")
            } else {
                ("Warning", "FailedScheduling")
            };
            let ev = pod_event(
                &component,
                &e.namespace,
                &e.name,
                &e.uid,
                type_,
                reason,
                &e.message,
            );
            create_event(&client, &e.namespace, ev)
        }))
        .await;
        d.pending_events
            .fetch_sub(batch.len() as u64, Ordering::Relaxed);
        for (e, result) in batch.drain(..).zip(results) {
            match result {
                Ok(()) => {}
                Err(err) if retryable(&err) && e.tries + 1 < MAX_TRIES => {
                    let sink = sink.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(retry_delay(e.tries)).await;
                        sink.offer_event(EventMsg {
                            tries: e.tries + 1,
                            ..e
                        });
                    });
                }
                Err(err) => {
                    if retryable(&err) {
                        d.failed_writes.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::debug!(error = %err, "event write failed");
                }
            }
        }
        if failed.is_empty() && scheduled.is_empty() && d.shedding.swap(false, Ordering::Relaxed) {
            let total =
                d.scheduled.load(Ordering::Relaxed) + d.failed_scheduling.load(Ordering::Relaxed);
            tracing::info!(
                dropped = total - shed_at_start,
                "events queue drained: shedding stopped"
            );
            shed_at_start = total;
        }
    }
}

/// Strategic-merge patch of `pods/{name}/status`. The answer (the whole pod, `managedFields`
/// and all) is only checked for success: skipped, not decoded.
pub async fn patch_status(
    client: &Client,
    ns: &str,
    name: &str,
    patch: serde_json::Value,
) -> kube::Result<()> {
    let req = kube::core::Request::new(<Pod as kube::Resource>::url_path(&(), Some(ns)))
        .patch_subresource(
            "status",
            name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    client.request::<IgnoredAny>(req).await.map(|_| ())
}

/// `POST events`; the answer (the event) is skipped, not decoded.
pub(crate) async fn create_event(client: &Client, ns: &str, ev: Event) -> kube::Result<()> {
    let body = serde_json::to_vec(&ev).map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(<Event as kube::Resource>::url_path(&(), Some(ns)))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request::<IgnoredAny>(req).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use magma_engine::StatusReason;

    fn intent(uid: &str, message: &str) -> StatusIntent {
        StatusIntent {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            reason: StatusReason::Unschedulable,
            message: message.into(),
            clear_nominated: false,
        }
    }

    fn failed(uid: &str, message: &str) -> StatusMsg {
        StatusMsg::Failed(intent(uid, message))
    }

    fn scheduled(uid: &str) -> StatusMsg {
        StatusMsg::Scheduled {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
            node: "n0".into(),
        }
    }

    /// What the conditions lane writes next, without waiting.
    fn next_now(lanes: &mut StatusLanes) -> Option<(String, String)> {
        let fut = lanes.conditions.next(async || {});
        let got = futures::FutureExt::now_or_never(fut).flatten();
        got.map(|w| (w.intent.uid.to_string(), w.intent.message.to_string()))
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
        assert_eq!(drops.conditions.load(Ordering::Relaxed), 0);
    }

    /// A retry of a refused write never overrides a newer intent for the pod.
    #[test]
    fn a_retry_yields_to_a_newer_intent() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(4, 4, drops.clone());
        sink.offer(failed("a", "new"));
        assert!(sink.offer_condition(intent("a", "old"), Instant::now(), 1));
        assert_eq!(next_now(&mut lanes), pair("a", "new"));
        // Nothing newer: the retry is queued with its attempt count.
        assert!(sink.offer_condition(intent("a", "old"), Instant::now(), 2));
        let w = futures::FutureExt::now_or_never(lanes.conditions.next(async || {}))
            .flatten()
            .unwrap();
        assert_eq!((&*w.intent.message, w.tries), ("old", 2));
    }

    /// The pod next in line keeps taking newer messages while its write waits for a token.
    #[tokio::test]
    async fn a_write_waiting_for_its_token_takes_the_latest_message() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(4, 4, drops.clone());
        sink.offer(failed("a", "a1"));
        let (go, token) = tokio::sync::oneshot::channel::<()>();
        let writer = tokio::spawn(async move {
            let s = lanes.conditions.next(async || drop(token.await)).await;
            s.map(|w| w.intent.message.to_string())
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
        sink.conditions.capacity() == sink.conditions.max_capacity()
            && !lock(&sink.pending).is_empty()
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
        assert_eq!(drops.pending_conditions.load(Ordering::Relaxed), 3);
        assert_eq!(drops.pending_events.load(Ordering::Relaxed), 1);
        let asked = std::cell::Cell::new(0);
        let batch = lanes
            .conditions
            .next_batch(8, async |n| {
                asked.set(n);
                sink.offer(failed("a", "a2"));
            })
            .await
            .unwrap();
        let got: Vec<_> = batch
            .iter()
            .map(|w| (&*w.intent.uid, &*w.intent.message))
            .collect();
        assert_eq!(got, [("a", "a2"), ("b", "b2"), ("c", "c1")]);
        assert_eq!(asked.get(), 3);
        // `max` bounds a batch.
        for uid in ["d", "e", "f"] {
            sink.offer(failed(uid, uid));
        }
        let batch = lanes.conditions.next_batch(2, async |_| {}).await.unwrap();
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
            .conditions
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
        let got: Vec<_> = batch.iter().map(|w| &*w.intent.uid).collect();
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

    /// The events queue holds a minute of its budget: at the default budget (the main
    /// client's, 2000/s) a 10,000-pod burst never fills it.
    #[test]
    fn the_events_queue_holds_a_minute_of_its_budget() {
        assert_eq!(events_capacity(2000.0, 2000), 120_000);
        assert_eq!(events_capacity(0.5, 2), 30);
        assert_eq!(events_capacity(0.01, 2), 2);
        assert!(events_capacity(0.0, 1) >= 1 << 20);
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
    fn the_conditions_lane_is_bounded_by_pods_not_attempts() {
        let drops = Arc::new(EventDrops::default());
        let (sink, mut lanes) = StatusSink::new(2, 1, drops.clone());
        for round in 0..50 {
            for uid in ["a", "b"] {
                assert!(sink.offer(failed(uid, &format!("{uid}{round}"))));
            }
        }
        // A third pod finds both places taken: dropped, counted.
        assert!(!sink.offer(failed("c", "c0")));
        assert_eq!(drops.conditions.load(Ordering::Relaxed), 1);
        assert_eq!(next_now(&mut lanes), pair("a", "a49"));
        assert!(sink.offer(failed("c", "c1")));
        assert_eq!(next_now(&mut lanes), pair("b", "b49"));
        assert_eq!(next_now(&mut lanes), pair("c", "c1"));
    }

    /// The events queue sheds only when full, counted by reason.
    #[test]
    fn a_full_events_queue_sheds_and_counts() {
        let drops = Arc::new(EventDrops::default());
        let (sink, _lanes) = StatusSink::new(4, 1, drops.clone());
        assert!(sink.offer(scheduled("a")));
        assert!(!sink.offer(scheduled("b")));
        assert_eq!(drops.scheduled.load(Ordering::Relaxed), 1);
        assert_eq!(drops.pending_events.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_failed_bindings_condition_clears_the_nomination() {
        let p = condition_patch("SchedulerError", "m", true);
        assert!(p["status"]["nominatedNodeName"].is_null());
        assert!(
            p["status"]
                .as_object()
                .unwrap()
                .contains_key("nominatedNodeName")
        );
        let p = condition_patch("Unschedulable", "m", false);
        assert!(
            !p["status"]
                .as_object()
                .unwrap()
                .contains_key("nominatedNodeName")
        );
    }
}
