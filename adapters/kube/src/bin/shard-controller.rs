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
    magma_kube::process::run_main("shard-controller", verbosity, run(opts))
}

async fn run(opts: ControllerOptions) -> anyhow::Result<()> {
    let flag_config = opts
        .flag_config
        .clone()
        .context("the flag configuration is built while parsing")?;
    let client_config = magma_kube::process::kube_config(&opts.kubeconfig, &opts.master).await?;
    let client = magma_kube::process::connect(&client_config).await?;

    let mut settings = ControllerSettings::new(client, flag_config);
    settings.configmap_name = opts.sharding_configmap.clone();
    settings.configmap_namespace = opts.sharding_configmap_namespace.clone();
    settings.lease = opts.lease();
    settings.api_qps = f64::from(opts.kube_api_qps);
    settings.api_burst = opts.kube_api_burst;
    settings.readiness = Arc::new(http::Readiness::new(opts.leader_elect));

    // Admin endpoints (one server when both addresses are the same), under the supervisor
    // both binaries share.
    let mut sup = magma_kube::process::Supervisor::new();
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
    let admin = sup.start(
        http::Admin::bind(
            healthz,
            metrics_addr.map(|a| (a, encoder)),
            settings.readiness.clone(),
        )
        .await?,
    );
    let result = controller::run(settings, magma_kube::process::shutdown_signal()).await;
    // The admin endpoints answer until the controller has stopped.
    let _ = sup.stop(admin, std::time::Duration::from_secs(2)).await;
    Ok(result?)
}
