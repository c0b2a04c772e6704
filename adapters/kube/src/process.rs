//! Process scaffolding shared by both binaries (`agent-scheduler`, `shard-controller`): the
//! common `main` (logging, runtime, exit code), the shutdown signal, the client set-up
//! (`--kubeconfig`/`--master`, HTTP/2 over HTTPS in [`client_for`], API discovery), and the
//! [`Supervisor`] that runs a process's [`Component`]s.
//!
//! Owns: the tokio runtime, the logging set-up, and the life cycle of components: each is
//! started on its own task with its own [`Shutdown`] token and stopped by the wiring that
//! started it, in the order that wiring documents (`app` for the scheduler,
//! `shardctl::controller` for the controller). Knows nothing of what the components do.
//!
//! A component that ends with an error (or panics) while it was not asked to stop is a
//! failure of the process: [`Supervisor::failed`] reports the first one, and the wiring stops
//! the rest and exits with it, rather than running on with a part missing.

use anyhow::Context;
use kube::Client;
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinHandle;

pub use tokio_util::sync::CancellationToken as Shutdown;

/// One part of a process: runs until `shutdown` is cancelled (or until its input closes, for
/// the components whose doc says so), then returns.
pub trait Component: Send + 'static {
    /// For the log and errors.
    fn name(&self) -> &'static str;
    fn run(self, shutdown: Shutdown) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Which component (returned by [`Supervisor::start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentId(usize);

struct Entry {
    name: &'static str,
    token: Shutdown,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Starts components and stops them, one at a time, in the order the caller chooses.
#[derive(Default)]
pub struct Supervisor {
    entries: Vec<Entry>,
    failures: Option<tokio::sync::mpsc::UnboundedSender<(&'static str, String)>>,
    failed_rx: Option<tokio::sync::mpsc::UnboundedReceiver<(&'static str, String)>>,
}

impl Supervisor {
    pub fn new() -> Supervisor {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Supervisor {
            entries: Vec::new(),
            failures: Some(tx),
            failed_rx: Some(rx),
        }
    }

    /// Start `c` on its own task.
    pub fn start<C: Component>(&mut self, c: C) -> ComponentId {
        let name = c.name();
        let token = Shutdown::new();
        let child = token.clone();
        let failures = self.failures.clone();
        let task = tokio::spawn(async move {
            let result = c.run(child.clone()).await;
            if let Err(e) = &result
                && !child.is_cancelled()
                && let Some(f) = failures
            {
                let _ = f.send((name, format!("{e:#}")));
            }
            result
        });
        self.entries.push(Entry {
            name,
            token,
            task: Some(task),
        });
        tracing::debug!(component = name, "started");
        ComponentId(self.entries.len() - 1)
    }

    /// Resolves with the first component that ended with an error without being asked to stop
    /// (never, if none does).
    pub async fn failed(&mut self) -> anyhow::Error {
        let Some(rx) = self.failed_rx.as_mut() else {
            return std::future::pending().await;
        };
        match rx.recv().await {
            Some((name, e)) => anyhow::anyhow!("{name} failed: {e}"),
            None => std::future::pending().await,
        }
    }

    /// The first failure reported so far, without waiting.
    pub fn try_failed(&mut self) -> Option<anyhow::Error> {
        let (name, e) = self.failed_rx.as_mut()?.try_recv().ok()?;
        Some(anyhow::anyhow!("{name} failed: {e}"))
    }

    /// Ask `id` to stop and wait up to `grace` for it to finish; past that it is aborted (with
    /// a warning). Its error, if it returned one, is logged and returned.
    pub async fn stop(&mut self, id: ComponentId, grace: Duration) -> anyhow::Result<()> {
        self.entries[id.0].token.cancel();
        self.join(id, grace).await
    }

    /// Wait up to `grace` for `id` to finish on its own (its input closed), then abort it.
    pub async fn join(&mut self, id: ComponentId, grace: Duration) -> anyhow::Result<()> {
        let e = &mut self.entries[id.0];
        let Some(mut task) = e.task.take() else {
            return Ok(());
        };
        let result = match tokio::time::timeout(grace, &mut task).await {
            Ok(Ok(r)) => r,
            Ok(Err(join)) => Err(anyhow::anyhow!("{} panicked: {join}", e.name)),
            Err(_) => {
                tracing::warn!(component = e.name, ?grace, "did not stop in time; aborted");
                task.abort();
                Ok(())
            }
        };
        if let Err(err) = &result {
            tracing::warn!(component = e.name, error = %format!("{err:#}"), "stopped with an error");
        } else {
            tracing::debug!(component = e.name, "stopped");
        }
        result
    }

    /// Stop every component still running, newest first.
    pub async fn stop_all(&mut self, grace: Duration) {
        for i in (0..self.entries.len()).rev() {
            let _ = self.stop(ComponentId(i), grace).await;
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        for e in &mut self.entries {
            e.token.cancel();
            if let Some(t) = e.task.take() {
                t.abort();
            }
        }
    }
}

/// A component made of a future that runs until shutdown (for small followers).
pub struct Task<F> {
    name: &'static str,
    run: F,
}

impl<F, Fut> Task<F>
where
    F: FnOnce(Shutdown) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    pub fn new(name: &'static str, run: F) -> Self {
        Task { name, run }
    }
}

impl<F, Fut> Component for Task<F>
where
    F: FnOnce(Shutdown) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    fn name(&self) -> &'static str {
        self.name
    }
    fn run(self, shutdown: Shutdown) -> impl Future<Output = anyhow::Result<()>> + Send {
        (self.run)(shutdown)
    }
}

/// Run `fut` until it ends or `shutdown` is cancelled, whichever is first.
pub async fn until<F: Future<Output = ()>>(shutdown: &Shutdown, fut: F) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = fut => {}
    }
}

/// A client for `cfg`. Over HTTPS it speaks HTTP/2 when the server selects it in the TLS
/// handshake (ALPN; kube-apiserver does, and client-go uses it by default), else HTTP/1.1: all
/// of a client's requests and watches share one connection, its binds are multiplexed streams
/// instead of a pool of ≈256 connections, and one connection task reads and writes for all of
/// them, so one wake-up and one syscall carry many requests.
///
/// Which one is settled before the client exists, by one TLS handshake that offers both
/// ([`negotiates_http2`]). A client that learnt it only from its first connection's ALPN
/// would dial once per request sent before that connection was up: at the start of a backlog
/// drain, one connection and one TLS handshake per concurrent bind (270 of them, measured),
/// and again after every lost connection. Knowing it beforehand, the client is HTTP/2-only:
/// while it connects, further requests wait for that one connection.
///
/// The layers are kube-client's own (base URI, retry of 429/503/504 when `default_retry`,
/// authentication, extra headers), minus its per-request debug span; the connection is kept
/// alive by HTTP/2 pings every 30 s (15 s to answer, as client-go's `ReadIdleTimeout` and
/// `PingTimeout`) instead of a read timeout, which would end every stream on an idle
/// connection. Plain HTTP and proxied configurations use kube-client's default HTTP/1.1
/// stack.
pub async fn client_for(cfg: &kube::Config) -> anyhow::Result<Client> {
    if cfg.cluster_url.scheme_str() == Some("https") && cfg.proxy_url.is_none() {
        let http2 = match negotiates_http2(cfg).await {
            Ok(h2) => Some(h2),
            Err(e) => {
                // Not fatal: the request itself reports an unreachable server; the client
                // then learns the protocol from its first connection.
                tracing::warn!(
                    error = %format!("{e:#}"),
                    "cannot learn the API server's protocol ahead of the first request"
                );
                None
            }
        };
        return https_client(cfg, http2).context("building the Kubernetes client");
    }
    Client::try_from(cfg.clone()).context("building the Kubernetes client")
}

/// Whether the server at `cfg.cluster_url` selects HTTP/2 when a TLS handshake offers it
/// beside HTTP/1.1, with the TLS settings of `cfg` (its CA, client certificate and server
/// name); the connection is closed after the handshake.
pub async fn negotiates_http2(cfg: &kube::Config) -> anyhow::Result<bool> {
    use kube::client::ConfigExt;
    use std::sync::Arc;
    use tokio_rustls::rustls::pki_types::ServerName;
    let url = &cfg.cluster_url;
    let host = url
        .host()
        .context("the cluster URL has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url.port_u16().unwrap_or(443);
    let name = cfg.tls_server_name.clone().unwrap_or_else(|| host.clone());
    let name = ServerName::try_from(name.clone())
        .with_context(|| format!("invalid TLS server name {name:?}"))?;
    let mut tls = cfg.rustls_client_config()?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        tokio_rustls::TlsConnector::from(Arc::new(tls))
            .connect(name, tcp)
            .await
    };
    let limit = cfg.connect_timeout.unwrap_or(Duration::from_secs(30));
    let stream = tokio::time::timeout(limit, handshake)
        .await
        .with_context(|| format!("TLS handshake with {host}:{port} timed out after {limit:?}"))?
        .with_context(|| format!("TLS handshake with {host}:{port}"))?;
    Ok(stream.get_ref().1.alpn_protocol() == Some(b"h2"))
}

/// The HTTPS stack: HTTP/2 only (`Some(true)`), HTTP/1.1 only (`Some(false)`), or either as
/// each connection's ALPN says (`None`).
fn https_client(cfg: &kube::Config, http2: Option<bool>) -> anyhow::Result<Client> {
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    use kube::client::ConfigExt;

    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(cfg.connect_timeout);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(cfg.rustls_client_config()?)
        .https_only();
    let tls = match &cfg.tls_server_name {
        Some(name) => tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
            name.clone()
                .try_into()
                .with_context(|| format!("invalid TLS server name {name:?}"))?,
        )),
        None => tls,
    };
    let https = match http2 {
        Some(true) => tls.enable_http2().wrap_connector(http),
        Some(false) => tls.enable_http1().wrap_connector(http),
        None => tls.enable_http1().enable_http2().wrap_connector(http),
    };
    let client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .http2_only(http2 == Some(true))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .http2_keep_alive_while_idle(true)
            .http2_adaptive_window(true)
            .build(https);
    let retry = cfg
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = tower::ServiceBuilder::new()
        .layer(cfg.base_uri_layer())
        .option_layer(retry)
        .option_layer(cfg.auth_layer()?)
        .layer(cfg.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(client);
    Ok(Client::new(service, cfg.default_namespace.clone()))
}

/// A client for `cfg`, once API discovery answered: upstream's binaries refuse to start when
/// it fails; so do ours, with the reason.
pub async fn connect(cfg: &kube::Config) -> anyhow::Result<Client> {
    let client = client_for(cfg).await?;
    let version = client
        .apiserver_version()
        .await
        .context("API server discovery failed")?;
    tracing::info!(server = %version.git_version, "connected to the API server");
    Ok(client)
}

/// The client configuration: `--kubeconfig`, else in-cluster / `KUBECONFIG` / `~/.kube/config`
/// (`Config::infer`); `--master` overrides the server URL in either case.
pub async fn kube_config(kubeconfig: &str, master: &str) -> anyhow::Result<kube::Config> {
    let mut cfg = if !kubeconfig.is_empty() {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading --kubeconfig {kubeconfig}"))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading --kubeconfig {kubeconfig}"))?
    } else if !master.is_empty() {
        kube::Config::new(
            master
                .parse()
                .with_context(|| format!("invalid --master {master:?}"))?,
        )
    } else {
        kube::Config::infer()
            .await
            .context("no --kubeconfig given and no in-cluster or default configuration found")?
    };
    if !master.is_empty() {
        cfg.cluster_url = master
            .parse()
            .with_context(|| format!("invalid --master {master:?}"))?;
    }
    Ok(cfg)
}

/// The binaries' common `main`: `-v` logging to stderr, transparent huge pages off, the runtime
/// (`runtime_threads`), `run`, and the error report and exit code (1 on error; flag errors
/// are the caller's, exit 2).
pub fn run_main<F>(name: &str, verbosity: u8, run: F) -> std::process::ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    init_logging(name, verbosity);
    disable_transparent_huge_pages();
    let mut builder = match runtime_threads() {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("{name}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The runtime's threads: one on a machine of at most two CPUs, else two. The engine runs its
/// own threads beside these (the driver, and `--scheduler-worker-count` workers when more than
/// one: a single worker runs on the driver's thread); the adapter's work (watches, binds,
/// events) is mostly waiting, and a second runtime thread on two CPUs costs more in
/// cross-thread wake-ups than it adds: 10–20% more scheduler CPU per pod in `magma-perf
/// processes` (issue 15, BENCHMARKS.md). One thread is tokio's current-thread
/// runtime, which runs every task on the thread that called `block_on` (`run_main`'s): a
/// multi-thread runtime with one worker kept a second thread (the caller's, parked in
/// `block_on`) and paid for work stealing and cross-thread scheduling it never needed (about
/// 4% of the scheduler's CPU per pod, BENCHMARKS.md, "History"). Nothing in the binaries
/// blocks a runtime thread: blocking work (`Engine::shutdown`) goes to `spawn_blocking`.
fn runtime_threads() -> usize {
    match std::thread::available_parallelism().map_or(1, |n| n.get()) {
        0..=2 => 1,
        _ => 2,
    }
}

/// Transparent huge pages off for this process. mimalloc advises its arenas for huge pages
/// and returns idle memory to the kernel after a delay; under the bursty allocation of a watch
/// relist or a bind burst each refault then zeroes a whole 2 MiB page. That zeroing was 16% of
/// the scheduler's CPU draining a 10,000-pod backlog (issue 15; BENCHMARKS.md). The flag is
/// the process's own (`prctl(PR_SET_THP_DISABLE)`), inherited by nothing but its children, and
/// leaves the system setting alone. Where it cannot be set (not Linux, or refused), the
/// process runs as before.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(error = %e, "cannot disable transparent huge pages");
    }
}

/// klog's `-v` as a `tracing` filter (0–1 info, 2–4 debug, 5+ trace); `RUST_LOG` overrides.
fn init_logging(name: &str, v: u8) {
    let level = match v {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let bin = name.replace('-', "_");
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "warn,magma_kube={level},magma_engine={level},{bin}={level}"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stops_in_the_order_asked_and_reports_failures() {
        let mut s = Supervisor::new();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mk = |name: &'static str| {
            let order = order.clone();
            Task::new(name, move |sd: Shutdown| async move {
                sd.cancelled().await;
                order.lock().unwrap().push(name);
                Ok(())
            })
        };
        let a = s.start(mk("a"));
        let b = s.start(mk("b"));
        let bad = s.start(Task::new("bad", |_| async { anyhow::bail!("boom") }));
        let err = s.failed().await;
        assert_eq!(err.to_string(), "bad failed: boom");
        assert!(s.join(bad, Duration::from_secs(1)).await.is_err());
        s.stop(b, Duration::from_secs(1)).await.unwrap();
        s.stop(a, Duration::from_secs(1)).await.unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["b", "a"]);
    }

    #[tokio::test]
    async fn a_component_that_ignores_shutdown_is_aborted_after_its_grace() {
        let mut s = Supervisor::new();
        let id = s.start(Task::new("stuck", |_| async {
            std::future::pending::<()>().await;
            Ok(())
        }));
        s.stop(id, Duration::from_millis(10)).await.unwrap();
    }

    #[tokio::test]
    async fn an_error_after_stop_is_not_a_failure() {
        let mut s = Supervisor::new();
        let id = s.start(Task::new("late", |sd: Shutdown| async move {
            sd.cancelled().await;
            anyhow::bail!("stopping")
        }));
        // The task has ended once `stop` returns, so a failure would already be reported.
        assert!(s.stop(id, Duration::from_secs(1)).await.is_err());
        assert!(s.try_failed().is_none(), "a stop is not a failure");
        let bad = s.start(Task::new("bad", |_| async { anyhow::bail!("boom") }));
        assert!(s.join(bad, Duration::from_secs(1)).await.is_err());
        assert!(s.try_failed().is_some(), "an unasked end with an error is");
    }
}
