//! Events and pod conditions, on a separate client, in two lanes that never wait for each
//! other: status writes never slow binding, and "why is my pod pending" is never stuck behind
//! a burst's `Scheduled` events.
//!
//! - **Failed** (`PodScheduled=False` + `FailedScheduling`): its own queue (8,192) and its own
//!   token bucket (`--event-qps`/`--event-burst`). The engine already emits a status intent only
//!   when a pod's message changes, so this lane is small; dropped only if 8,192 are waiting.
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
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use magma_engine::core::StatusIntent;
use serde_json::json;
use std::sync::Arc;
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
    /// The Scheduled lane is shedding (for the start/end log lines).
    shedding: AtomicBool,
}

/// Queue capacity of the Failed lane.
pub const FAILED_CAPACITY: usize = 8192;

/// Queue capacity of the Scheduled lane: eight seconds of its budget (at least its burst).
pub fn scheduled_capacity(qps: f64, burst: u32) -> usize {
    ((qps * 8.0).ceil() as usize).max(burst as usize).max(1)
}

/// The sending side: never blocks, drops (and counts) when a lane is full.
#[derive(Clone)]
pub struct StatusSink {
    failed: mpsc::Sender<StatusMsg>,
    scheduled: mpsc::Sender<StatusMsg>,
    drops: Arc<EventDrops>,
}

/// The receiving sides, for [`run_writer`].
pub struct StatusLanes {
    failed: mpsc::Receiver<StatusMsg>,
    scheduled: mpsc::Receiver<StatusMsg>,
}

impl StatusSink {
    pub fn new(
        failed_capacity: usize,
        scheduled_capacity: usize,
        drops: Arc<EventDrops>,
    ) -> (StatusSink, StatusLanes) {
        let (ftx, frx) = mpsc::channel(failed_capacity.max(1));
        let (stx, srx) = mpsc::channel(scheduled_capacity.max(1));
        (
            StatusSink {
                failed: ftx,
                scheduled: stx,
                drops,
            },
            StatusLanes {
                failed: frx,
                scheduled: srx,
            },
        )
    }

    /// Queue a write in its lane; returns `false` (and counts it) if that lane is full.
    pub fn offer(&self, msg: StatusMsg) -> bool {
        match msg {
            StatusMsg::Failed(_) => {
                let ok = self.failed.try_send(msg).is_ok();
                if !ok {
                    self.drops.failed_scheduling.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("condition and FailedScheduling queue full: dropping one");
                }
                ok
            }
            StatusMsg::Scheduled { .. } => {
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
        failed,
        None,
    );
    let scheduled = lane(client, component, scheduled_limiter, scheduled, Some(drops));
    tokio::join!(failed, scheduled);
}

async fn lane(
    client: Client,
    component: String,
    limiter: TokenBucket,
    mut rx: mpsc::Receiver<StatusMsg>,
    shedding: Option<Arc<EventDrops>>,
) {
    let mut shed_at_start = 0;
    while let Some(msg) = rx.recv().await {
        limiter.acquire().await;
        write(&client, &component, &msg).await;
        if let Some(d) = &shedding
            && rx.is_empty()
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
            let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
            let patch = condition_patch(s.reason.as_str(), &s.message);
            let cond = pods
                .patch_status(&s.name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await;
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
            Api::<Event>::namespaced(client.clone(), &s.namespace)
                .create(&PostParams::default(), &ev)
                .await
                .map(|_| ())
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
            Api::<Event>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &ev)
                .await
                .map(|_| ())
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "event write failed");
    }
}
