//! `kube-sim` binary: starts the simulator on 127.0.0.1:PORT with fake nodes, writes a kubeconfig,
//! and runs until SIGTERM/SIGINT.

use anyhow::Context;
use clap::Parser;
use kube_sim::{ErrorRule, Faults, Provisioner, Sim, SimConfig, parse_duration};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

// glibc's malloc/free were about a third of the simulator's CPU per write (`perf record`,
// BENCHMARKS.md "kube-sim's memory"); the scheduler's binaries and `magma-perf` use mimalloc too.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "kube-sim",
    about = "Kubernetes API server simulator for Magma's tests and benchmarks"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Fake nodes created at start.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Where to write a kubeconfig for the server.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Node CPU capacity.
    #[arg(long, default_value = "32")]
    node_cpu: String,
    /// Node memory capacity.
    #[arg(long, default_value = "256Gi")]
    node_memory: String,
    /// Node pod capacity.
    #[arg(long, default_value_t = 110)]
    node_pods: u32,
    /// Delay before a bound pod becomes Running (Go duration); "never" keeps bound pods Pending.
    #[arg(long, default_value = "0s")]
    running_delay: String,
    /// Lifetime of a Running pod before it succeeds and is deleted (Go duration).
    #[arg(long)]
    pod_lifetime: Option<String>,
    /// Error injection `VERB[:RESOURCE]=RATE[:CODE]` (CODE 500 or 429); repeatable.
    #[arg(long = "error-rate")]
    error_rates: Vec<String>,
    /// Latency added to every request (ms).
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Close watch streams after this long (ms).
    #[arg(long)]
    drop_watches_after_ms: Option<u64>,
    /// Send every watch event this long after its commit (ms), in order: watches lag behind
    /// the answers to writes, as the real server's watch cache does.
    #[arg(long, default_value_t = 0)]
    watch_delay_ms: u64,
    /// Watch events retained for resuming watches.
    #[arg(long, default_value_t = 100_000)]
    history: usize,
    /// Keep retained versions zstd-packed once no longer young (by a thread of its own, off the
    /// state lock): about 2.7 KB per bound pod instead of 7.3 at 40k pods;
    /// `--pack-versions=false` keeps them plain
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pack_versions: bool,
    /// Create missing namespaces on demand instead of answering 404.
    #[arg(long)]
    auto_create_namespaces: bool,
    /// Register the NodeShard CRD at start.
    #[arg(long)]
    install_nodeshard_crd: bool,
    /// Run the storage controllers: PersistentVolumeClaims of an existing StorageClass get a CSI
    /// PersistentVolume and are bound after this delay (Go duration; WaitForFirstConsumer classes
    /// once the claim has `volume.kubernetes.io/selected-node`). Off when not given.
    #[arg(long, conflicts_with = "provisioner_never")]
    provisioner_delay: Option<String>,
    /// Run the storage controllers with a provisioner that never provisions (claims needing a new
    /// volume stay Pending).
    #[arg(long)]
    provisioner_never: bool,
    /// Do not run the resource claim controller (on by default, as kube-controller-manager
    /// runs it): no claims from templates, reservations, releases or claim garbage collection.
    #[arg(long)]
    no_resource_claim_controller: bool,
    /// How long the simulated kubelet takes to finish a pod deleted gracefully (Go duration,
    /// capped by the pod's grace period): it then reports the pod terminated and deletes it
    /// with grace period 0. "never" leaves deleted pods terminating.
    #[arg(long, default_value = "100ms")]
    termination_delay: String,
    /// Do not run the disruption controller (on by default, as kube-controller-manager runs
    /// it): PodDisruptionBudget statuses stay as created.
    #[arg(long)]
    no_disruption_controller: bool,
    /// Serve HTTPS with a self-signed CA generated at start (the kubeconfig embeds it), as a real
    /// API server; plain HTTP otherwise.
    #[arg(long)]
    tls: bool,
    /// Also write the CA certificate (PEM) here (with --tls).
    #[arg(long, requires = "tls")]
    ca_out: Option<PathBuf>,
    /// Admission plugins to switch off (comma-separated kube-apiserver names, as
    /// kube-apiserver's flag): `Priority` (pods keep the `spec.priority` they carry, as in
    /// kube-scheduler's integration harness), `DefaultStorageClass`,
    /// `PersistentVolumeClaimResize`; other registered names change nothing, unknown ones are
    /// refused.
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
}

fn config(a: &Args) -> anyhow::Result<SimConfig> {
    let errors = a
        .error_rates
        .iter()
        .map(|s| ErrorRule::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let running_delay = match a.running_delay.as_str() {
        "never" => None,
        s => Some(
            parse_duration(s)
                .map_err(anyhow::Error::msg)
                .context("--running-delay")?,
        ),
    };
    let pod_lifetime: Option<Duration> = a
        .pod_lifetime
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--pod-lifetime")?;
    let termination_delay = match a.termination_delay.as_str() {
        "never" => None,
        s => Some(
            parse_duration(s)
                .map_err(anyhow::Error::msg)
                .context("--termination-delay")?,
        ),
    };
    let provisioner = match (&a.provisioner_delay, a.provisioner_never) {
        (_, true) => Provisioner::Never,
        (Some(d), false) => Provisioner::After(
            parse_duration(d)
                .map_err(anyhow::Error::msg)
                .context("--provisioner-delay")?,
        ),
        (None, false) => Provisioner::Off,
    };
    Ok(SimConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], a.port)),
        nodes: a.nodes,
        node_cpu: a.node_cpu.clone(),
        node_memory: a.node_memory.clone(),
        node_pods: a.node_pods,
        running_delay,
        pod_lifetime,
        history: a.history,
        pack_versions: a.pack_versions,
        auto_create_namespaces: a.auto_create_namespaces,
        install_nodeshard_crd: a.install_nodeshard_crd,
        provisioner,
        resource_claim_controller: !a.no_resource_claim_controller,
        termination_delay,
        disruption_controller: !a.no_disruption_controller,
        tls: a.tls,
        disable_admission_plugins: a.disable_admission_plugins.clone(),
        faults: Faults {
            errors,
            latency_ms: a.latency_ms,
            drop_watches_after_ms: a.drop_watches_after_ms,
            watch_delay_ms: a.watch_delay_ms,
            ..Faults::default()
        },
        ..SimConfig::default()
    })
}

async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let sim = Sim::start(config(&args)?)
        .await
        .context("starting kube-sim")?;
    if let (Some(path), Some(pem)) = (&args.ca_out, sim.ca_pem()) {
        std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
    }
    // Written last (through a rename, so a reader never sees half a file): once it is there, the
    // server and the CA file are ready.
    if let Some(path) = &args.kubeconfig_out {
        let tmp = path.with_extension("tmp");
        sim.write_kubeconfig(&tmp)
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    tracing::info!(addr = %sim.addr(), nodes = args.nodes, "kube-sim serving");
    println!("kube-sim listening on {}", sim.url());
    terminated().await;
    sim.shutdown().await;
    Ok(())
}
