//! The preemption executor: the API calls of the engine's preemptions (`Intent::Preempt`),
//! made off the scheduling path, as kube-scheduler's asynchronous preemption
//! (`SchedulerAsyncPreemption`) makes them; each answered with `Input::PreemptionDone`.
//!
//! The engine has already decided the node and the victims and holds the preemptor out of the
//! queue (`PodState::Preempting`) with its room kept there (`preemption`, `Cache::nominate`).
//! For one preemption, in order:
//!
//! 1. The pods of lower priority nominated to the node lose their nomination
//!    (`status.nominatedNodeName` cleared; a failure is logged, as upstream: not fatal).
//! 2. The preemptor's `status.nominatedNodeName` names the node. If the preemptor is gone, the
//!    preemption stops here: nobody is evicted for a pod that no longer exists.
//! 3. The victims, all but the last concurrently, then the last (upstream's order). Each gets
//!    a strategic-merge patch of `pods/status` adding the `DisruptionTarget` condition (`True`,
//!    reason `PreemptionByScheduler`, message `"<scheduler>: preempting to accommodate a
//!    higher priority pod"`; a victim already gone is done); then a graceful `DELETE` (the
//!    pod's own grace period) with its UID as precondition, so a pod re-created under the same
//!    name is never deleted by mistake (gone is done); then a `Preempted` event on the victim
//!    (Normal, action `Preempting`, related to the preemptor): `"Preempted by pod <uid> on node
//!    <node>"`.
//! 4. `PreemptionDone { Ok }`: the preemptor waits for its victims to leave, woken by the room
//!    they free. On the first failed call (after step 2), `PreemptionDone { Err }`: the engine
//!    reverts the nomination (its condition write clears `status.nominatedNodeName`) and backs
//!    the pod off. Victims already deleted stay deleted, as upstream.
//!
//! Every call takes a token of the main client's budget (`--kube-api-qps`, shared with the
//! bindings and conditions); at most `concurrency` preemptions run at once. No worker and no
//! binding waits on them. `magma_preemption_to_bound_seconds` is the time from a decision to its
//! preemptor bound ([`Decided`]).

use crate::ratelimit::TokenBucket;
use crate::status::{create_event, patch_status, pod_event};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, Preconditions};
use magma_engine::EngineHandle;
use magma_engine::core::{Input, PodRef, PreemptIntent};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How preemptions are carried out.
#[derive(Debug, Clone)]
pub struct PreemptConfig {
    /// Most preemptions whose calls run at once.
    pub concurrency: usize,
    /// Longest one call may take.
    pub timeout: Duration,
}

impl Default for PreemptConfig {
    fn default() -> Self {
        PreemptConfig {
            concurrency: 64,
            timeout: Duration::from_secs(10),
        }
    }
}

/// When each preemption still waiting for its preemptor's binding was decided (uid → instant),
/// for `magma_preemption_to_bound_seconds`. Entries of preemptors that never bind (deleted,
/// decided again elsewhere) are pruned after [`Decided::HORIZON`].
#[derive(Debug, Default)]
pub struct Decided(Mutex<HashMap<Arc<str>, Instant>>);

impl Decided {
    /// Entries older than this are dropped once the map holds [`Decided::PRUNE_AT`] of them.
    pub const HORIZON: Duration = Duration::from_secs(3600);
    pub const PRUNE_AT: usize = 16_384;

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A preemption for `uid` was decided now (a later one for the same pod restarts it).
    pub fn decided(&self, uid: Arc<str>) {
        let now = Instant::now();
        let mut m = self.lock();
        if m.len() >= Self::PRUNE_AT {
            m.retain(|_, t| now.duration_since(*t) < Self::HORIZON);
        }
        m.insert(uid, now);
    }

    /// `uid` was bound: how long after its preemption, if it had one.
    pub fn bound(&self, uid: &str) -> Option<Duration> {
        self.lock().remove(uid).map(|t| t.elapsed())
    }
}

/// The executor (module doc).
pub struct Preemptor {
    /// The main client (pod status patches, deletions).
    pub client: Client,
    /// The events client.
    pub events: Client,
    pub limiter: Arc<TokenBucket>,
    pub engine: EngineHandle,
    /// The scheduler's name: the `DisruptionTarget` message and the events' component.
    pub component: String,
    pub cfg: PreemptConfig,
    pub on_failure: Arc<dyn Fn() + Send + Sync>,
}

impl Preemptor {
    /// Carry out every preemption of `queue` until it closes, then wait for those in flight.
    pub async fn run(self, queue: flume::Receiver<PreemptIntent>) {
        let permits = Arc::new(Semaphore::new(self.cfg.concurrency.max(1)));
        let ctx = Arc::new(self);
        while let Ok(intent) = queue.recv_async().await {
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore never closed");
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let result = ctx.execute(&intent).await;
                if let Err(e) = &result {
                    tracing::info!(
                        preemptor = %key(&intent.preemptor),
                        node = %intent.node,
                        error = %e,
                        "preemption failed"
                    );
                    (ctx.on_failure)();
                }
                ctx.engine.send(Input::PreemptionDone {
                    uid: intent.preemptor.uid.to_string(),
                    result,
                });
                drop(permit);
            });
        }
        // Every permit back: the calls in flight are done.
        let _ = permits
            .acquire_many(self_concurrency(&ctx.cfg))
            .await
            .expect("semaphore never closed");
    }

    /// Steps 1–3 for one preemption.
    async fn execute(&self, p: &PreemptIntent) -> Result<(), String> {
        // 1.
        for n in &p.unnominate {
            let patch = json!({"status": {"nominatedNodeName": null}});
            if let Err(e) = self.patch(n, patch).await {
                tracing::debug!(pod = %key(n), error = %e, "clearing a lower-priority nomination failed");
            }
        }
        // 2.
        let patch = json!({"status": {"nominatedNodeName": &*p.node}});
        match self.patch(&p.preemptor, patch).await {
            Ok(()) => {}
            Err(Call::Gone) => return Err("the preemptor is gone".into()),
            Err(e) => return Err(format!("nominating node {}: {e}", p.node)),
        }
        // 3.
        if let Some((last, rest)) = p.victims.split_last() {
            let results = futures::future::join_all(rest.iter().map(|v| self.evict(p, v))).await;
            for r in results {
                r?;
            }
            self.evict(p, last).await?;
        }
        Ok(())
    }

    /// Step 3 for one victim.
    async fn evict(&self, p: &PreemptIntent, v: &PodRef) -> Result<(), String> {
        let condition = json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{}: preempting to accommodate a higher priority pod", self.component),
            "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now()
            ),
        }]}});
        match self.patch(v, condition).await {
            Ok(()) => {}
            Err(Call::Gone) => return Ok(()),
            Err(e) => return Err(format!("marking victim {}: {e}", key(v))),
        }
        self.limiter.acquire().await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &v.namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(v.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match tokio::time::timeout(self.cfg.timeout, pods.delete(&v.name, &params)).await {
            Err(_) => return Err(format!("deleting victim {}: timed out", key(v))),
            Ok(Ok(_)) => {}
            // Gone, or a different pod under its name now (the UID precondition): done.
            Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => return Ok(()),
            Ok(Err(e)) => return Err(format!("deleting victim {}: {e}", key(v))),
        }
        let mut ev = pod_event(
            &self.component,
            &v.namespace,
            &v.name,
            &v.uid,
            "Normal",
            "Preempted",
            &format!("Preempted by pod {} on node {}", p.preemptor.uid, p.node),
        );
        ev.action = Some("Preempting".into());
        ev.related = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(p.preemptor.namespace.to_string()),
            name: Some(p.preemptor.name.to_string()),
            uid: Some(p.preemptor.uid.to_string()),
            ..Default::default()
        });
        self.limiter.acquire().await;
        if let Err(e) = create_event(&self.events, &v.namespace, ev).await {
            tracing::debug!(pod = %key(v), error = %e, "Preempted event failed");
        }
        Ok(())
    }

    /// A strategic-merge patch of a pod's status, on the budget, within the timeout.
    async fn patch(&self, pod: &PodRef, patch: serde_json::Value) -> Result<(), Call> {
        self.limiter.acquire().await;
        match tokio::time::timeout(
            self.cfg.timeout,
            patch_status(&self.client, &pod.namespace, &pod.name, patch),
        )
        .await
        {
            Err(_) => Err(Call::Failed("timed out".into())),
            Ok(Ok(())) => Ok(()),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Err(Call::Gone),
            Ok(Err(e)) => Err(Call::Failed(e.to_string())),
        }
    }
}

fn self_concurrency(cfg: &PreemptConfig) -> u32 {
    u32::try_from(cfg.concurrency.max(1)).unwrap_or(u32::MAX)
}

/// Why a call did not go through.
#[derive(Debug)]
enum Call {
    /// 404: the pod is gone.
    Gone,
    Failed(String),
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Call::Gone => f.write_str("not found"),
            Call::Failed(e) => f.write_str(e),
        }
    }
}

fn key(p: &PodRef) -> String {
    format!("{}/{}", p.namespace, p.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preemptors_time_is_taken_once_and_old_entries_are_pruned() {
        let d = Decided::default();
        d.decided("a".into());
        assert!(d.bound("a").is_some());
        assert!(d.bound("a").is_none(), "taken once");
        assert!(d.bound("never").is_none());
        let Some(old) = Instant::now().checked_sub(Decided::HORIZON + Duration::from_secs(1))
        else {
            return; // a machine up for less than the horizon
        };
        {
            let mut m = d.lock();
            for i in 0..Decided::PRUNE_AT {
                m.insert(format!("old-{i}").into(), old);
            }
        }
        d.decided("fresh".into());
        assert_eq!(d.lock().len(), 1, "the stale entries are pruned");
    }
}
