//! The admin HTTP endpoints. This module owns the routes and the readiness latch; what the
//! metrics contain is [`crate::metrics`]'s business, and which address serves what is the
//! application's (upstream: `/healthz` on `--healthz-address` with `--enable-healthz`; Magma also
//! serves `/metrics` on `--listen-address` with `--enable-metrics`; when both addresses are equal
//! the application builds one router with both and serves it once).
//!
//! | Path | Served when | Answer |
//! |---|---|---|
//! | `GET /healthz`, `GET /healthz/ping` | `healthz` | liveness: `200 ok` while the process serves HTTP (upstream's ping check) |
//! | `GET /readyz` | `healthz` | `200 ok` once caches have synced and this replica leads, is a warm standby, or runs without leader election; otherwise `503` with the reason |
//! | `GET /metrics` | `metrics` is `Some` | Prometheus text format 0.0.4 (`text/plain; version=0.0.4; charset=utf-8`, what Go's client serves and every Prometheus scrapes) |
//!
//! Any other path is `404`.

use crate::metrics::{CONTENT_TYPE, Metrics};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::task::JoinHandle;

/// Readiness: caches synced (a one-way latch) AND (no leader election OR leading OR a warm
/// standby).
#[derive(Debug)]
pub struct Readiness {
    leader_election: bool,
    synced: AtomicBool,
    leading: AtomicBool,
    standby_warm: AtomicBool,
}

impl Readiness {
    /// `leader_election`: whether this replica competes for the lease (`--leader-elect`).
    pub fn new(leader_election: bool) -> Self {
        Self {
            leader_election,
            synced: AtomicBool::new(false),
            leading: AtomicBool::new(false),
            standby_warm: AtomicBool::new(false),
        }
    }

    /// The informer caches have synced; never reverts.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    pub fn set_leader_state(&self, leading: bool, standby_warm: bool) {
        self.leading.store(leading, Ordering::Release);
        self.standby_warm.store(standby_warm, Ordering::Release);
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.synced.load(Ordering::Acquire) {
            return Err("caches not synced");
        }
        if self.leader_election
            && !self.leading.load(Ordering::Acquire)
            && !self.standby_warm.load(Ordering::Acquire)
        {
            return Err("not leading and standby caches are not warm");
        }
        Ok(())
    }

    pub fn is_ready(&self) -> bool {
        self.check().is_ok()
    }
}

/// Produces the `/metrics` body at each scrape (Prometheus text format 0.0.4).
pub type MetricsEncoder = Arc<dyn Fn() -> String + Send + Sync>;

/// The admin router: health routes when `healthz`, `/metrics` when `metrics` is given.
pub fn router(readiness: Arc<Readiness>, metrics: Option<Metrics>, healthz: bool) -> Router {
    router_with(
        readiness,
        metrics.map(|m| Arc::new(move || m.encode()) as MetricsEncoder),
        healthz,
    )
}

/// [`router`] with any metrics source (the sharding controller has its own registry).
pub fn router_with(
    readiness: Arc<Readiness>,
    metrics: Option<MetricsEncoder>,
    healthz: bool,
) -> Router {
    let mut r = Router::new();
    if healthz {
        r = r
            .route("/healthz", get(ok))
            .route("/healthz/ping", get(ok))
            .merge(
                Router::new()
                    .route("/readyz", get(readyz))
                    .with_state(readiness),
            );
    }
    if let Some(m) = metrics {
        r = r.merge(
            Router::new()
                .route("/metrics", get(metrics_text))
                .with_state(m),
        );
    }
    r
}

async fn ok() -> &'static str {
    "ok"
}

async fn readyz(State(r): State<Arc<Readiness>>) -> Response {
    match r.check() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

async fn metrics_text(State(m): State<MetricsEncoder>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], m()).into_response()
}

/// Serve health on `healthz` and metrics on `metrics` (each when given; one server with both
/// when the two addresses are equal) until `stop` turns true. Returns the server tasks.
pub async fn serve_admin(
    healthz: Option<SocketAddr>,
    metrics: Option<(SocketAddr, MetricsEncoder)>,
    readiness: Arc<Readiness>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<JoinHandle<anyhow::Result<()>>>> {
    let mut endpoints: Vec<(SocketAddr, bool, Option<MetricsEncoder>)> = Vec::new();
    match (healthz, metrics) {
        (Some(h), Some((m, enc))) if h == m => endpoints.push((h, true, Some(enc))),
        (h, m) => {
            endpoints.extend(h.map(|a| (a, true, None)));
            endpoints.extend(m.map(|(a, enc)| (a, false, Some(enc))));
        }
    }
    let mut servers = Vec::new();
    for (addr, with_health, encoder) in endpoints {
        let with_metrics = encoder.is_some();
        let router = router_with(readiness.clone(), encoder, with_health);
        let mut stop = stop.clone();
        let (bound, task) = serve(addr, router, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await?;
        tracing::info!(%bound, healthz = with_health, metrics = with_metrics, "HTTP endpoint listening");
        servers.push(task);
    }
    Ok(servers)
}

/// Binds `addr` (port 0 picks one) and serves `router` until `shutdown` resolves. Returns the
/// bound address and the server task.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(SocketAddr, JoinHandle<anyhow::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding the admin server to {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| anyhow::anyhow!("admin server on {local}: {e}"))
    });
    Ok((local, task))
}

/// The admin HTTP servers of either binary, as a component: listening from [`Admin::bind`]
/// (so a port in use fails start-up), serving until shutdown.
pub struct Admin {
    servers: Vec<JoinHandle<anyhow::Result<()>>>,
    stop_tx: tokio::sync::watch::Sender<bool>,
}

impl Admin {
    pub async fn bind(
        healthz: Option<SocketAddr>,
        metrics: Option<(SocketAddr, MetricsEncoder)>,
        readiness: Arc<Readiness>,
    ) -> anyhow::Result<Admin> {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let servers = serve_admin(healthz, metrics, readiness, stop_rx).await?;
        Ok(Admin { servers, stop_tx })
    }
}

impl crate::process::Component for Admin {
    fn name(&self) -> &'static str {
        "admin-http"
    }

    async fn run(self, shutdown: crate::process::Shutdown) -> anyhow::Result<()> {
        let serving = !self.servers.is_empty();
        let mut servers = futures::future::try_join_all(self.servers);
        tokio::select! {
            // A server only ends when told to: one that ends early is a failure.
            r = &mut servers, if serving => {
                anyhow::Context::context(r, "an admin HTTP server panicked")?
                    .into_iter()
                    .collect::<anyhow::Result<()>>()?;
                anyhow::bail!("the admin HTTP servers stopped");
            }
            _ = shutdown.cancelled() => {}
        }
        let _ = self.stop_tx.send(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), servers).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_sync_then_leadership_or_warm_standby() {
        let r = Readiness::new(true);
        assert_eq!(r.check(), Err("caches not synced"));
        r.set_leader_state(true, false);
        assert!(!r.is_ready(), "leading without synced caches is not ready");
        r.set_synced();
        assert!(r.is_ready());
        r.set_leader_state(false, false);
        assert!(!r.is_ready());
        r.set_leader_state(false, true);
        assert!(r.is_ready());

        let no_le = Readiness::new(false);
        no_le.set_synced();
        assert!(no_le.is_ready());
    }
}
