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
    let verbosity = opts.verbosity;
    magma_kube::app::run_main("shard-controller", verbosity, run(opts))
}

async fn run(opts: ControllerOptions) -> anyhow::Result<()> {
    let flag_config = opts
        .flag_config
        .clone()
        .context("the flag configuration is built while parsing")?;
    let client_config = magma_kube::app::kube_config(&opts.kubeconfig, &opts.master).await?;
    let client = magma_kube::app::connect(&client_config).await?;

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
    let m = settings.metrics.clone();
    let encoder = Arc::new(move || m.encode()) as http::MetricsEncoder;
    let servers = http::serve_admin(
        healthz,
        metrics_addr.map(|a| (a, encoder)),
        settings.readiness.clone(),
        stop_rx,
    )
    .await?;

    controller::run(settings, magma_kube::app::shutdown_signal()).await?;
    stop_tx.send_replace(true);
    for s in servers {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), s).await;
    }
    Ok(())
}
