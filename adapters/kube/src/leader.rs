//! Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics, so Magma and a
//! Go `agent-scheduler` can share one Lease (same name, namespace, timings and record layout).
//! This module owns the Lease object named by [`LeaseConfig`] and nothing else; it reports
//! leadership through a `watch` channel and never touches the engine.
//!
//! The protocol, as in `k8s.io/client-go/tools/leaderelection`:
//!
//! 1. Every `retry_period` (jittered by up to ×1.2 while not leading, like `wait.JitterUntil`) run
//!    [`LeaderElector::try_acquire_or_renew`]:
//!    - the leader first renews optimistically with the Lease it last wrote (fast path);
//!    - otherwise get the Lease; absent → create it (`leaseTransitions` 0);
//!    - held by another identity whose record has not expired → not leader. Expiry is judged by
//!      *local observation time*: the moment we last saw the record change, plus the record's
//!      own `leaseDurationSeconds`. Clocks of different machines are never compared;
//!    - otherwise update it with `metadata.resourceVersion` as precondition. A `409` means another
//!      candidate wrote first: not leader this round. Our own `acquireTime` and `leaseTransitions`
//!      are kept on renewal; `leaseTransitions` is bumped when the holder changes.
//! 2. Leadership is announced (`true`) the moment an attempt succeeds. While leading, renew every
//!    `retry_period`; with no successful renewal for `renew_deadline` (or on seeing another holder)
//!    leadership is lost and `false` is sent at once. The elector then keeps competing; the
//!    application decides whether a loss is fatal (upstream exits).
//! 3. On shutdown while leading, send `false`, then release like client-go's `ReleaseOnCancel`:
//!    write `holderIdentity: ""`, `leaseDurationSeconds: 1`, `acquireTime = renewTime = now`,
//!    so a standby takes over at its next retry instead of waiting for expiry.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::time::Instant;

/// Maximum jitter factor of the candidate's retry loop (client-go's `JitterFactor`).
pub const JITTER_FACTOR: f64 = 1.2;

/// Where and how to elect; [`Default`] gives upstream's defaults and a fresh identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Upstream's lease name (computed from the default scheduler name).
    pub const DEFAULT_NAME: &'static str = "agent-scheduler";
    pub const DEFAULT_NAMESPACE: &'static str = "volcano-system";
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
    pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
    pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

    /// The checks client-go's `NewLeaderElector` makes.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let bad = |m: String| Err(LeaderError::InvalidConfig(m));
        if self.name.is_empty() || self.namespace.is_empty() {
            return bad("lease name and namespace must not be empty".into());
        }
        if self.identity.is_empty() {
            return bad("lock identity is empty".into());
        }
        if self.retry_period.is_zero() {
            return bad("retryPeriod must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return bad(format!(
                "leaseDuration ({:?}) must be greater than renewDeadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return bad(format!(
                "renewDeadline ({:?}) must be greater than retryPeriod*JitterFactor ({:?}*{JITTER_FACTOR})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as client-go writes it (whole seconds), at least 1.
    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1)
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            name: Self::DEFAULT_NAME.into(),
            namespace: Self::DEFAULT_NAMESPACE.into(),
            identity: default_identity(),
            lease_duration: Self::DEFAULT_LEASE_DURATION,
            renew_deadline: Self::DEFAULT_RENEW_DEADLINE,
            retry_period: Self::DEFAULT_RETRY_PERIOD,
        }
    }
}

/// `<hostname>_<uuid v4>`, the identity upstream uses.
pub fn default_identity() -> String {
    format!("{}_{}", hostname(), uuid::Uuid::new_v4())
}

/// The kernel's hostname, read where Go's `os.Hostname` reads it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("invalid leader election configuration: {0}")]
    InvalidConfig(String),
    #[error("{op} lease {namespace}/{name}")]
    Api {
        op: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// One candidate for one Lease. Drive it with [`LeaderElector::run`]; the single step
/// [`LeaderElector::try_acquire_or_renew`] is public for tests and tools.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    /// The Lease as last read or written: its `resourceVersion` is the precondition of the next
    /// optimistic renewal.
    lease: Option<Lease>,
    /// The record last observed and the local time it was observed to change.
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, cfg: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            lease: None,
            observed: None,
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// Whether the last observed record names us (client-go's `IsLeader`).
    pub fn is_leader(&self) -> bool {
        self.observed_holder() == Some(self.cfg.identity.as_str())
    }

    /// The holder named by the last observed record, if any.
    pub fn observed_holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .and_then(|(s, _)| s.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
    }

    /// Runs until `shutdown` turns true (or its sender is dropped). Sends `true` on `leading` when
    /// leadership is acquired and `false` when it is lost or given up.
    pub async fn run(
        mut self,
        leading: watch::Sender<bool>,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        self.cfg.validate()?;
        let (retry, renew_deadline) = (self.cfg.retry_period, self.cfg.renew_deadline);
        tracing::info!(
            lease = %format_args!("{}/{}", self.cfg.namespace, self.cfg.name),
            identity = %self.cfg.identity,
            "attempting to acquire leader lease"
        );
        // Some(time the last successful renewal started) while leading.
        let mut renewed: Option<Instant> = None;
        loop {
            let started = Instant::now();
            let deadline = renewed.unwrap_or(started) + renew_deadline;
            let outcome = tokio::select! {
                biased;
                _ = shutdown_requested(&mut shutdown) => break,
                r = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => r,
            };
            match outcome {
                Ok(Ok(true)) => {
                    if renewed.is_none() {
                        tracing::info!(identity = %self.cfg.identity, "successfully acquired lease");
                        leading.send_replace(true);
                    }
                    renewed = Some(started);
                }
                Ok(Ok(false)) => {
                    if renewed.is_some() && !self.is_leader() {
                        tracing::warn!(
                            holder = self.observed_holder().unwrap_or(""),
                            "lease taken by another holder"
                        );
                        renewed = None;
                        leading.send_replace(false);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %anyhow::Error::from(e), "leader election attempt failed")
                }
                Err(_) => tracing::warn!("leader election attempt timed out"),
            }
            let mut wake = if renewed.is_some() {
                Instant::now() + retry
            } else {
                Instant::now() + jittered(retry)
            };
            if let Some(t) = renewed {
                wake = wake.min(t + renew_deadline);
            }
            tokio::select! {
                biased;
                _ = shutdown_requested(&mut shutdown) => break,
                _ = tokio::time::sleep_until(wake) => {}
            }
            if let Some(t) = renewed
                && Instant::now() >= t + renew_deadline
            {
                tracing::warn!(
                    deadline = ?renew_deadline,
                    "failed to renew lease within the renew deadline: leadership lost"
                );
                renewed = None;
                leading.send_replace(false);
            }
        }
        if renewed.is_some() || self.is_leader() {
            leading.send_replace(false);
            match tokio::time::timeout(renew_deadline, self.release()).await {
                Ok(Ok(true)) => tracing::info!("released leader lease"),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => anyhow::bail!("releasing the leader lease timed out"),
            }
        }
        Ok(())
    }

    /// One round of client-go's `tryAcquireOrRenew`. `Ok(false)`: the Lease is validly held by
    /// someone else, or another candidate's write won (409).
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = Instant::now();
        let wall = now_micro();
        let mut record = LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease_duration_seconds()),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };

        // 1. Fast path: the leader renews assuming its last write is still current.
        if self.is_leader()
            && self.lease_valid(now)
            && let Some(mut lease) = self.lease.clone()
        {
            if let Some((old, _)) = &self.observed {
                record.acquire_time = old.acquire_time.clone();
                record.lease_transitions = old.lease_transitions;
            }
            lease.spec = Some(record.clone());
            match self.update(&lease).await {
                Ok(Some(written)) => {
                    self.observe_written(written);
                    return Ok(true);
                }
                Ok(None) => tracing::debug!("optimistic lease renewal conflicted; re-reading"),
                Err(e) => {
                    tracing::debug!(error = %anyhow::Error::from(e), "optimistic lease renewal failed; re-reading")
                }
            }
        }

        // 2. Get or create.
        let current = self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.api_error("get", e))?;
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(record),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(written) => {
                    self.observe_written(written);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.api_error("create", e)),
            };
        };

        // 3. Observe: the expiry clock restarts only when the record changes.
        let spec = current.spec.clone().unwrap_or_default();
        if self.observed.as_ref().map(|(s, _)| s) != Some(&spec) {
            self.observed = Some((spec.clone(), now));
        }
        self.lease = Some(current.clone());
        if self.observed_holder().is_some() && self.lease_valid(now) && !self.is_leader() {
            tracing::debug!(
                holder = self.observed_holder().unwrap_or(""),
                "lease is held by another candidate and has not expired"
            );
            return Ok(false);
        }

        // 4. Take it over, or renew it through the slow path.
        if self.is_leader() {
            record.acquire_time = spec.acquire_time;
            record.lease_transitions = spec.lease_transitions;
        } else {
            record.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        let mut lease = current;
        lease.spec = Some(record);
        match self.update(&lease).await? {
            Some(written) => {
                self.observe_written(written);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// client-go's `release`: if the Lease still names us, hand it over at once.
    async fn release(&mut self) -> Result<bool, LeaderError> {
        let current = self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.api_error("get", e))?;
        let Some(mut lease) = current else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(false);
        }
        let wall = now_micro();
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        match self.update(&lease).await? {
            Some(written) => {
                self.observe_written(written);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// PUT with the object's `resourceVersion` as precondition; `Ok(None)` on 409.
    async fn update(&self, lease: &Lease) -> Result<Option<Lease>, LeaderError> {
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), lease)
            .await
        {
            Ok(l) => Ok(Some(l)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(self.api_error("update", e)),
        }
    }

    fn observe_written(&mut self, written: Lease) {
        self.observed = Some((written.spec.clone().unwrap_or_default(), Instant::now()));
        self.lease = Some(written);
    }

    /// client-go's `isLeaseValid`: observed time + the record's own duration is still ahead.
    fn lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|(spec, at)| {
            let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
            *at + Duration::from_secs(secs) > now
        })
    }

    fn api_error(&self, op: &'static str, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            op,
            namespace: self.cfg.namespace.clone(),
            name: self.cfg.name.clone(),
            source: Box::new(source),
        }
    }
}

/// Resolves when shutdown is requested or its sender is gone.
async fn shutdown_requested(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// `wait.Jitter(d, 1.2)`: uniformly in `[d, 2.2·d)`.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(1.0 + JITTER_FACTOR * rand::random::<f64>())
}

/// Wall-clock now at the microsecond precision a `MicroTime` carries on the wire.
fn now_micro() -> MicroTime {
    let micros = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    MicroTime(k8s_openapi::jiff::Timestamp::from_microsecond(micros).unwrap_or_default())
}

/// Leader election: releases the Lease when stopped.
pub struct Elector {
    elector: LeaderElector,
    leading: watch::Sender<bool>,
}

impl Elector {
    /// `leading` hears every change of leadership.
    pub fn new(elector: LeaderElector, leading: watch::Sender<bool>) -> Elector {
        Elector { elector, leading }
    }
}

impl crate::process::Component for Elector {
    fn name(&self) -> &'static str {
        "elector"
    }

    async fn run(self, shutdown: crate::process::Shutdown) -> anyhow::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let run = self.elector.run(self.leading, stop_rx);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => return r.map_err(|e| e.context("leader election")),
            _ = shutdown.cancelled() => {}
        }
        let _ = stop_tx.send(true);
        run.await.map_err(|e| e.context("leader election"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_upstream() {
        let c = LeaseConfig::default();
        assert_eq!(c.name, "agent-scheduler");
        assert_eq!(c.namespace, "volcano-system");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert_eq!(c.lease_duration_seconds(), 15);
        c.validate().expect("upstream defaults are valid");
    }

    #[test]
    fn identity_is_hostname_underscore_uuid_v4() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').expect("underscore");
        assert!(!host.is_empty());
        let parts: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(default_identity(), id);
    }

    #[test]
    fn validation_follows_client_go() {
        let ok = LeaseConfig {
            identity: "me".into(),
            lease_duration: Duration::from_secs(1),
            renew_deadline: Duration::from_millis(600),
            retry_period: Duration::from_millis(200),
            ..LeaseConfig::default()
        };
        ok.validate().expect("valid");
        let renew_too_long = LeaseConfig {
            renew_deadline: Duration::from_secs(1),
            ..ok.clone()
        };
        assert!(renew_too_long.validate().is_err());
        let retry_too_long = LeaseConfig {
            retry_period: Duration::from_millis(500),
            ..ok.clone()
        };
        assert!(retry_too_long.validate().is_err());
        let no_identity = LeaseConfig {
            identity: String::new(),
            ..ok
        };
        assert!(no_identity.validate().is_err());
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let d = Duration::from_millis(100);
        for _ in 0..1000 {
            let j = jittered(d);
            assert!(j >= d && j < Duration::from_millis(221), "{j:?}");
        }
    }
}
