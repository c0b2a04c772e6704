//! The bind executor: turns the engine's bind intents into `POST pods/{name}/binding` calls and
//! feeds the outcomes back.
//!
//! - Its own `kube` client and token bucket (`--kube-api-qps/--kube-api-burst`), and a
//!   semaphore bounding concurrent calls (`--bind-concurrency`; over HTTPS they are streams of
//!   the client's one HTTP/2 connection, `process::client_for`).
//! - No polling: each intent is sent as soon as a token and a permit are free.
//! - The binding carries the pod UID, so a pod deleted and re-created under the same name is
//!   never bound by mistake.
//! - Outcomes are classified: success; 409 → already bound (forget the assumption); 404 → the
//!   pod is gone (forget); anything else (429, 5xx, timeouts, connection errors) → failure: the
//!   engine drops the assumption, writes `SchedulerError` and backs the pod off.
//! - After losing leadership nothing new is sent: queued intents are abandoned (the assumption
//!   is dropped and the pod requeued without a status write).
//! - A pod with claims to provision (`BindIntent::provision`) first goes through PreBind
//!   (`prebind`: annotate the claims, wait until they are bound, check the PVs against the
//!   node). While it waits, the pod's `status.nominatedNodeName` names the node, as
//!   kube-scheduler 1.35+ sets it when PreBind has work (`NominatedNodeNameForExpectation`),
//!   so a pod waiting for its volumes shows where it is going. Those waits run as their own
//!   tasks under their own bound (`volume_concurrency`): they hold no permit of the ordinary
//!   binds and never delay them; only the final binding call takes an ordinary permit. A
//!   PreBind failure is reported as `PreBindFailed("binding volumes: …")` (the engine writes the
//!   `SchedulerError` condition, clearing the nomination); losing leadership or stopping while
//!   waiting abandons the pod.
//! - A pod with ResourceClaims (`BindIntent::devices`) goes the same way: after its volumes (as
//!   kube-scheduler runs VolumeBinding's PreBind before DynamicResources'), each claim gets its
//!   allocation and the pod's reservation written (`dra`); a failure there is a PreBind failure
//!   with upstream's text. A bind that does not go through once claims were written (not bound,
//!   nor already bound) unreserves them before its outcome is reported.
//!
//! This is the only write on the hot path: one API call per scheduled pod (pods with claims to
//! provision or ResourceClaims also patch each claim and their nomination). The budget (`--kube-api-qps`) is
//! shared with the condition patches of `status`, which go first; events go through `status`
//! on a separate client.

use crate::dra;
use crate::prebind::{self, Claims, PreBind};
use crate::ratelimit::TokenBucket;
use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use magma_engine::EngineHandle;
use magma_engine::core::{BindIntent, BindResult, Input};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};

/// How binds are sent.
#[derive(Debug, Clone)]
pub struct BindConfig {
    pub qps: f64,
    pub burst: u32,
    pub concurrency: usize,
    pub timeout: Duration,
    /// Most binds waiting for their volumes at once (PreBind); more wait for a turn, within
    /// their volume timeout.
    pub volume_concurrency: usize,
    /// Capacity of the bind queue between the engine and the executor; the engine holds at
    /// most this many pods handed off or binding (`EngineOptions::max_binds_in_flight`), so
    /// the queue never fills and nothing waits behind a bind.
    pub queue: usize,
}

impl Default for BindConfig {
    fn default() -> Self {
        BindConfig {
            qps: 2000.0,
            burst: 2000,
            concurrency: 256,
            timeout: Duration::from_secs(10),
            volume_concurrency: 1024,
            queue: 65_536,
        }
    }
}

/// Called after every bind with the outcome, the time the call took and the throttling wait.
pub type OutcomeHook = Arc<dyn Fn(&BindIntent, &BindResult, Duration, Duration) + Send + Sync>;

/// Classify a failed binding call.
pub fn classify(err: &kube::Error) -> BindResult {
    match err {
        kube::Error::Api(s) if s.code == 409 => BindResult::AlreadyBound,
        kube::Error::Api(s) if s.code == 404 => BindResult::PodGone,
        kube::Error::Api(s) => BindResult::Failed(format!("{} ({})", s.message, s.code)),
        other => BindResult::Failed(other.to_string()),
    }
}

/// The binding object for `pod` → `node`.
pub fn binding(intent: &BindIntent) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(intent.pod.name.to_string()),
            namespace: Some(intent.pod.namespace.to_string()),
            uid: Some(intent.pod.uid.to_string()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(intent.node.to_string()),
            ..Default::default()
        },
    }
}

pub struct BindExecutor {
    client: Client,
    engine: EngineHandle,
    limiter: Arc<TokenBucket>,
    permits: Arc<Semaphore>,
    volume_permits: Arc<Semaphore>,
    claims: Arc<Claims>,
    cfg: BindConfig,
    leading: watch::Receiver<bool>,
    hook: Option<OutcomeHook>,
}

/// `POST /api/v1/namespaces/{namespace}/pods/{name}/binding` with the [`binding`] as JSON:
/// the request `Api::<Pod>::create_subresource` sends, built directly, since that call
/// erases the resource type and formats its URL through kube's resource machinery on every
/// bind. Namespace and name come from the API server, which admits only DNS labels and
/// subdomains: nothing to escape.
pub fn binding_request(intent: &BindIntent) -> http::Request<Vec<u8>> {
    let pod = &intent.pod;
    let body = serde_json::to_vec(&binding(intent)).expect("a Binding always serializes");
    http::Request::post(format!(
        "/api/v1/namespaces/{}/pods/{}/binding",
        pod.namespace, pod.name
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(body)
    .expect("a path and a static header are a valid request")
}

/// `POST pods/{name}/binding`, classified.
async fn post_binding(client: Client, intent: &BindIntent, timeout: Duration) -> BindResult {
    // The answer (a `Status`) is only checked for success: skipped, not decoded.
    let call = client.request::<serde::de::IgnoredAny>(binding_request(intent));
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(_)) => BindResult::Bound,
        Ok(Err(e)) => classify(&e),
        Err(_) => BindResult::Failed(format!("binding timed out after {timeout:?}")),
    }
}

impl BindExecutor {
    /// `claims`: the registry the PersistentVolumeClaim watch feeds (`watch::spawn`).
    /// `limiter`: the main client's budget (`--kube-api-qps`), shared with the condition
    /// patches.
    pub fn new(
        client: Client,
        engine: EngineHandle,
        cfg: BindConfig,
        limiter: Arc<TokenBucket>,
        leading: watch::Receiver<bool>,
        claims: Arc<Claims>,
    ) -> BindExecutor {
        BindExecutor {
            client,
            engine,
            limiter,
            permits: Arc::new(Semaphore::new(cfg.concurrency.max(1))),
            volume_permits: Arc::new(Semaphore::new(cfg.volume_concurrency.max(1))),
            claims,
            cfg,
            leading,
            hook: None,
        }
    }

    pub fn on_outcome(mut self, hook: OutcomeHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Bind every intent received until the channel closes, then wait for in-flight calls
    /// (binds still waiting for their volumes are abandoned).
    pub async fn run(self, rx: flume::Receiver<BindIntent>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        while let Ok(intent) = rx.recv_async().await {
            if !*self.leading.borrow() {
                self.engine.send(Input::BindOutcome {
                    uid: intent.pod.uid.to_string(),
                    result: BindResult::Abandoned,
                });
                continue;
            }
            if !intent.provision.is_empty()
                || !intent.bind_pvs.is_empty()
                || !intent.devices.is_empty()
            {
                self.spawn_with_prebind(intent, stop_rx.clone());
                continue;
            }
            let throttled = self.limiter.acquire().await;
            let permit = self
                .permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore never closed");
            let (client, engine, hook, timeout) = (
                self.client.clone(),
                self.engine.clone(),
                self.hook.clone(),
                self.cfg.timeout,
            );
            tokio::spawn(async move {
                let start = Instant::now();
                let result = post_binding(client, &intent, timeout).await;
                let took = start.elapsed();
                if let Some(h) = &hook {
                    h(&intent, &result, took, throttled);
                }
                engine.send(Input::BindOutcome {
                    uid: intent.pod.uid.to_string(),
                    result,
                });
                drop(permit);
            });
        }
        // Drain: binds waiting for volumes give up, then every in-flight call finishes.
        let _ = stop_tx.send(true);
        let _ = self
            .volume_permits
            .acquire_many(self.cfg.volume_concurrency.max(1) as u32)
            .await;
        let _ = self
            .permits
            .acquire_many(self.cfg.concurrency.max(1) as u32)
            .await;
    }

    /// PreBind (volumes, then ResourceClaims), then the binding, as a task of its own under
    /// the PreBind bound (`volume_concurrency`). A bind that does not go through after claims
    /// were written unreserves them first (`dra::unreserve`).
    fn spawn_with_prebind(&self, intent: BindIntent, stop: watch::Receiver<bool>) {
        let deadline = tokio::time::Instant::now() + intent.volume_timeout;
        let ctx = prebind::Context {
            calls: crate::apicall::Caller {
                client: self.client.clone(),
                limiter: self.limiter.clone(),
                call_timeout: self.cfg.timeout,
            },
            claims: self.claims.clone(),
            leading: self.leading.clone(),
            stop,
        };
        let (engine, hook, timeout) = (self.engine.clone(), self.hook.clone(), self.cfg.timeout);
        let (volume_permits, permits, limiter) = (
            self.volume_permits.clone(),
            self.permits.clone(),
            self.limiter.clone(),
        );
        tokio::spawn(async move {
            let abandon = |engine: &EngineHandle| {
                engine.send(Input::BindOutcome {
                    uid: intent.pod.uid.to_string(),
                    result: BindResult::Abandoned,
                });
            };
            let mut stopping = ctx.stop.clone();
            let turn = tokio::select! {
                p = volume_permits.acquire_owned() => p.expect("semaphore never closed"),
                _ = stopping.wait_for(|s| *s) => return abandon(&engine),
            };
            nominate(&ctx.calls.client, &limiter, &intent).await;
            let mut outcome = if intent.provision.is_empty() && intent.bind_pvs.is_empty() {
                PreBind::Ready
            } else {
                prebind::bind_volumes(
                    &ctx,
                    &intent.node,
                    &intent.provision,
                    &intent.bind_pvs,
                    deadline,
                )
                .await
            };
            let pod = dra::PodRef {
                namespace: &intent.pod.namespace,
                name: &intent.pod.name,
                uid: &intent.pod.uid,
            };
            let mut written = Vec::new();
            if outcome == PreBind::Ready && !intent.devices.is_empty() {
                let interrupted = !*ctx.leading.borrow() || *ctx.stop.borrow();
                outcome = if interrupted {
                    PreBind::Abandoned
                } else {
                    let claims = &ctx.claims.resource;
                    match dra::bind_claims(&ctx.calls, claims, pod, &intent.devices).await {
                        Ok(w) => {
                            written = w;
                            PreBind::Ready
                        }
                        Err(msg) => PreBind::Failed(msg),
                    }
                };
            }
            let result = match outcome {
                PreBind::Ready => {
                    let throttled = limiter.acquire().await;
                    let permit = permits
                        .acquire_owned()
                        .await
                        .expect("semaphore never closed");
                    let start = Instant::now();
                    let result = post_binding(ctx.calls.client.clone(), &intent, timeout).await;
                    if let Some(h) = &hook {
                        h(&intent, &result, start.elapsed(), throttled);
                    }
                    drop(permit);
                    result
                }
                PreBind::Failed(msg) => {
                    tracing::debug!(pod = %intent.pod.key(), node = %intent.node, reason = %msg, "PreBind failed");
                    BindResult::PreBindFailed(msg)
                }
                PreBind::Abandoned => return abandon(&engine),
            };
            // Unreserve: the pod will not run with these claims (a pod bound already keeps
            // them).
            if !written.is_empty()
                && !matches!(result, BindResult::Bound | BindResult::AlreadyBound)
            {
                dra::unreserve(&ctx.calls, &ctx.claims.resource, pod, &written).await;
            }
            // The claims as our writes left them reach the engine before the outcome: it
            // releases the pod's devices only once it holds what the server gives the claims.
            if !intent.devices.is_empty() {
                for c in ctx.claims.resource.take_echoes() {
                    engine.send(Input::Dra(magma_engine::dra::DraInput::Claim(c)));
                }
            }
            engine.send(Input::BindOutcome {
                uid: intent.pod.uid.to_string(),
                result,
            });
            // Held to the end: the drain waits for the binding call too.
            drop(turn);
        });
    }
}

/// Set the pod's `status.nominatedNodeName` to the node its PreBind waits for (a failure is only
/// logged, as kube-scheduler does: binding goes on).
async fn nominate(client: &Client, limiter: &TokenBucket, intent: &BindIntent) {
    limiter.acquire().await;
    let patch = serde_json::json!({"status": {"nominatedNodeName": &*intent.node}});
    let pod = &intent.pod;
    if let Err(e) = crate::status::patch_status(client, &pod.namespace, &pod.name, patch).await {
        tracing::debug!(pod = %pod.key(), error = %e, "nominating the node PreBind waits for failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": reason, "message": format!("{reason} message"),
        }))
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn the_binding_request_is_the_one_kubes_api_builds() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::Resource;
        use magma_engine::model::{Interner, PodInput, ResourceRegistry, compile_pod};
        let input = PodInput {
            uid: "uid-1".into(),
            namespace: "ns-1".into(),
            name: "pod-1".into(),
            ..Default::default()
        };
        let pod = compile_pod(
            &input,
            &mut Interner::default(),
            &mut ResourceRegistry::default(),
        )
        .unwrap();
        let intent = BindIntent {
            pod: Arc::new(pod),
            node: Arc::from("node-7"),
            provision: Vec::new(),
            bind_pvs: Vec::new(),
            devices: Vec::new(),
            volume_timeout: Duration::ZERO,
            arrived: magma_engine::Nanos(0),
            popped: magma_engine::Nanos(0),
            claimed: magma_engine::Nanos(0),
        };
        let ours = binding_request(&intent);
        let kubes = kube::core::Request::new(Pod::url_path(&(), Some("ns-1")))
            .create_subresource(
                "binding",
                "pod-1",
                &kube::api::PostParams::default(),
                serde_json::to_vec(&binding(&intent)).unwrap(),
            )
            .unwrap();
        assert_eq!(ours.method(), kubes.method());
        // kube's builder leaves an empty query (`…/binding?`): the same request.
        assert_eq!(ours.uri().path(), kubes.uri().path());
        assert_eq!(ours.uri().query(), None);
        assert_eq!(kubes.uri().query().unwrap_or(""), "");
        assert_eq!(
            ours.headers().get(http::header::CONTENT_TYPE),
            kubes.headers().get(http::header::CONTENT_TYPE)
        );
        assert_eq!(ours.body(), kubes.body());
        let body: serde_json::Value = serde_json::from_slice(ours.body()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "pod-1", "namespace": "ns-1", "uid": "uid-1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"},
            })
        );
    }

    #[test]
    fn outcomes_are_classified_like_the_design_says() {
        assert_eq!(
            classify(&api_error(409, "Conflict")),
            BindResult::AlreadyBound
        );
        assert_eq!(classify(&api_error(404, "NotFound")), BindResult::PodGone);
        for (code, reason) in [
            (429, "TooManyRequests"),
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (422, "Invalid"),
        ] {
            assert!(
                matches!(classify(&api_error(code, reason)), BindResult::Failed(m) if m.contains(&code.to_string())),
                "{code}"
            );
        }
    }
}
