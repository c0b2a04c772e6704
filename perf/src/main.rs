//! `magma-perf`: run a scenario and print throughput, latency and integrity.
//!
//! ```text
//! cargo run --release -p magma-perf -- burst --nodes 5000 --pods 100000 --workers 2
//! ```

use clap::Parser;
use magma_perf::runner::{RunOptions, run};
use magma_perf::scenario::{Scenario, build};
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "magma-perf",
    about = "Run a Magma scheduling scenario on an in-process simulated cluster"
)]
struct Cli {
    /// Scenario preset.
    #[arg(value_enum)]
    scenario: Scenario,
    #[arg(long)]
    nodes: Option<usize>,
    #[arg(long)]
    pods: Option<usize>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// candidateNodeCount.
    #[arg(long, default_value_t = 3)]
    candidates: usize,
    /// Offered arrival rate in pods/s (steady, churn).
    #[arg(long)]
    rate: Option<f64>,
    /// Mean pod lifetime in seconds (churn).
    #[arg(long)]
    lifetime: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin worker threads to cores.
    #[arg(long)]
    pin: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Print progress every second.
    #[arg(long)]
    progress: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(cli.workers > 0, "--workers must be greater than 0");
    anyhow::ensure!(
        (1..=64).contains(&cli.candidates),
        "--candidates must be within 1..=64"
    );
    let mut p = cli.scenario.defaults();
    if let Some(n) = cli.nodes {
        p.nodes = n;
    }
    if let Some(n) = cli.pods {
        p.pods = n;
    }
    if let Some(r) = cli.rate {
        anyhow::ensure!(r > 0.0, "--rate must be positive");
        p.rate = Some(r);
    }
    if let Some(l) = cli.lifetime {
        anyhow::ensure!(l > 0.0, "--lifetime must be positive");
        p.lifetime_mean = Duration::from_secs_f64(l);
    }
    p.seed = cli.seed;
    eprintln!(
        "building plan: {} {} nodes, {} pods ...",
        cli.scenario.name(),
        p.nodes,
        p.pods
    );
    let plan = build(cli.scenario, &p);
    let opts = RunOptions {
        workers: cli.workers,
        candidates: cli.candidates,
        pin: cli.pin,
        progress: cli.progress,
        ..Default::default()
    };
    let mut report = run(&plan, &opts, magma_engine::Profile::default())?;
    report.scenario = cli.scenario.name().to_owned();
    report.print();
    if let Some(path) = &cli.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    let v = report.violations();
    if !v.is_empty() {
        anyhow::bail!("integrity violated: {}", v.join("; "));
    }
    Ok(())
}
