//! What a run of separate processes is asked to do ([`ProcOptions`]): the cluster's size, the
//! scenario, the transport, pinning, the binaries and the scheduler's flags. Plain data: it uses
//! no other module of `procs`.

use std::path::PathBuf;
use std::time::Duration;

/// The options of [`super::run`] (see the `procs` module doc for the scenarios).
#[derive(Debug, Clone)]
pub struct ProcOptions {
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub creators: usize,
    pub backlog: bool,
    /// Serve the simulator over HTTPS (self-signed, as a real API server); needs a kube-sim
    /// with `--tls`.
    pub tls: bool,
    /// The simulator on CPU 0, the scheduler and the harness on the others (see the `procs` module doc).
    pub pin: bool,
    /// Ceiling runs without the scheduler's pod informer (see the `procs` module doc).
    pub bare_ceiling: bool,
    pub scheduler_bin: PathBuf,
    pub sim_bin: PathBuf,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    pub timeout: Duration,
    pub progress: bool,
    /// Every k-th scenario pod is unschedulable (`procs` module doc); `None`: none.
    pub unschedulable_every: Option<usize>,
    /// More flags for the scheduler (e.g. `--event-qps=...`).
    pub scheduler_args: Vec<String>,
}

impl ProcOptions {
    /// The binaries beside this executable (`target/release/` for `cargo run --release`).
    pub fn sibling(name: &str) -> PathBuf {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join(name)))
            .unwrap_or_else(|| PathBuf::from(name))
    }
}
