//! `shard-controller`: Magma's sharding controller (Volcano's `sharding-controller` as a
//! standalone binary). It keeps one NodeShard per configured scheduler; see
//! `docs/shard-controller.md` and [`magma_kube::shardctl`].

use anyhow::Context;
use magma_kube::http;
use magma_kube::shardctl::controller::{self, ControllerSettings};
use magma_kube::shardctl::flags::{self, ControllerOptions};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let opts = match flags::parse(std::env::args()) {
        Ok(o) => o,
        Err(e) if e.is_help() => {
            println!("{e}");
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("shard-controller: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if opts.version {
        println!("shard-controller (magma) {}", env!("CARGO_PKG_VERSION"));
        return std::process::ExitCode::SUCCESS;
    }
    if opts.dry_run {
        // Flags and the --scheduler-configs entries were validated while parsing.
        println!("shard-controller: flags and --scheduler-configs are valid (--dry-run)");
        return std::process::ExitCode::SUCCESS;
    }
    init_logging(opts.verbosity);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shard-controller: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("shard-controller: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_logging(v: u8) {
    let level = match v {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "warn,magma_kube={level},shard_controller={level}"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(opts: ControllerOptions) -> anyhow::Result<()> {
    let flag_config = opts
        .flag_config
        .clone()
        .context("the flag configuration is built while parsing")?;
    let client_config = magma_kube::app::kube_config(&opts.kubeconfig, &opts.master).await?;
    let client = kube::Client::try_from(client_config).context("building the Kubernetes client")?;
    let version = client
        .apiserver_version()
        .await
        .context("API server discovery failed")?;
    tracing::info!(server = %version.git_version, "connected to the API server");

    let mut settings = ControllerSettings::new(client, flag_config);
    settings.configmap_name = opts.sharding_configmap.clone();
    settings.configmap_namespace = opts.sharding_configmap_namespace.clone();
    settings.lease = opts.lease();
    settings.api_qps = f64::from(opts.kube_api_qps);
    settings.api_burst = opts.kube_api_burst;
    settings.readiness = Arc::new(http::Readiness::new(opts.leader_elect));

    // Admin endpoints; one server when both addresses are the same.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let healthz = opts
        .enable_healthz
        .then(|| opts.healthz_addr())
        .transpose()?;
    let metrics_addr = opts
        .enable_metrics
        .then(|| opts.listen_addr())
        .transpose()?;
    let mut endpoints = Vec::new();
    if healthz.is_some() && healthz == metrics_addr {
        endpoints.extend(healthz.map(|a| (a, true, true)));
    } else {
        endpoints.extend(healthz.map(|a| (a, true, false)));
        endpoints.extend(metrics_addr.map(|a| (a, false, true)));
    }
    let mut servers = Vec::new();
    for (addr, with_health, with_metrics) in endpoints {
        let m = settings.metrics.clone();
        let encoder: Option<http::MetricsEncoder> =
            with_metrics.then(|| Arc::new(move || m.encode()) as http::MetricsEncoder);
        let router = http::router_with(settings.readiness.clone(), encoder, with_health);
        let mut stop = stop_rx.clone();
        let (bound, task) = http::serve(addr, router, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .with_context(|| format!("serving HTTP on {addr}"))?;
        tracing::info!(%bound, healthz = with_health, metrics = with_metrics, "HTTP endpoint listening");
        servers.push(task);
    }

    controller::run(settings, shutdown_signal()).await?;
    stop_tx.send_replace(true);
    for s in servers {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), s).await;
    }
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
    }
}
