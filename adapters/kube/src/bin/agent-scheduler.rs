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
    let verbosity = opts.verbosity;
    magma_kube::process::run_main("agent-scheduler", verbosity, async move {
        for w in &opts.warnings {
            tracing::warn!("{w}");
        }
        run(opts).await
    })
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
    app::run(settings, magma_kube::process::shutdown_signal()).await?;
    Ok(())
}
