//! Events and pod conditions, on a separate client with its own rate limit, behind a bounded,
//! lossy queue: status writes never slow binding, and when the API is slow they are dropped
//! (and counted) rather than queued without bound. The engine already emits a status intent
//! only when a pod's message changes.
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
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The sending side: never blocks, drops when full.
#[derive(Clone)]
pub struct StatusSink {
    tx: mpsc::Sender<StatusMsg>,
    dropped: Arc<AtomicU64>,
}

impl StatusSink {
    pub fn new(capacity: usize) -> (StatusSink, mpsc::Receiver<StatusMsg>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            StatusSink {
                tx,
                dropped: Arc::new(AtomicU64::new(0)),
            },
            rx,
        )
    }

    /// Queue a write; returns `false` (and counts it) if the queue is full.
    pub fn offer(&self, msg: StatusMsg) -> bool {
        let ok = self.tx.try_send(msg).is_ok();
        if !ok {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
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

/// Write every queued status message, rate limited, until the channel closes.
pub async fn run_writer(
    client: Client,
    component: String,
    limiter: TokenBucket,
    mut rx: mpsc::Receiver<StatusMsg>,
) {
    while let Some(msg) = rx.recv().await {
        limiter.acquire().await;
        let result = match &msg {
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
                    &component,
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
                    &component,
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
}
