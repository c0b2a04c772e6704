//! `agent-scheduler`: Magma's drop-in replacement for Volcano's agent scheduler.
//! Same flags, same configuration file, same NodeShard CRD; see the crate docs.

use anyhow::Context;
use magma_kube::{app, flags, reload};

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
            eprintln!("agent-scheduler: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if opts.version {
        println!("agent-scheduler (magma) {}", env!("CARGO_PKG_VERSION"));
        return std::process::ExitCode::SUCCESS;
    }
    init_logging(opts.verbosity);
    for w in &opts.warnings {
        tracing::warn!("{w}");
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-scheduler: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("agent-scheduler: {e:#}");
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
            "warn,magma_kube={level},magma_engine={level},agent_scheduler={level}"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(opts: flags::Options) -> anyhow::Result<()> {
    let conf_path =
        (!opts.scheduler_conf.is_empty()).then(|| std::path::Path::new(&opts.scheduler_conf));
    let loaded = reload::load(
        conf_path,
        opts.disable_default_scheduler_config,
        opts.sampling()?,
    )
    .context("loading the scheduler configuration")?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    if opts.dry_run {
        // The flags were validated while parsing and the configuration just now; nothing
        // else is checked without a cluster.
        println!("agent-scheduler: flags and scheduler configuration are valid (--dry-run)");
        return Ok(());
    }
    let settings = app::settings_from_options(&opts).await?;
    let settings = app::Settings {
        profile: loaded.profile,
        ..settings
    };
    app::run(settings, shutdown_signal(), None).await?;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
