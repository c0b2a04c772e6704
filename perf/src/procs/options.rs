//! What a run of separate processes is asked to do ([`ProcOptions`]): the cluster's size, the
//! scenario, the transport, pinning, the binaries and the scheduler's flags. Plain data: it uses
//! no other module of `procs`.

use super::instructions::Counter;
use std::path::PathBuf;
use std::time::Duration;

/// What the scenario's pods ask of their placement besides resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Constraint {
    #[default]
    None,
    /// Required pod anti-affinity to each other on `kubernetes.io/hostname`: one pod per node
    /// (so at most `nodes` pods).
    HostnameAntiAffinity,
    /// A hard topology spread over `topology.kubernetes.io/zone` (maxSkew 1, DoNotSchedule)
    /// across `zones` zones, which the harness labels the nodes with round-robin (kube-sim's
    /// nodes have no zone).
    ZoneSpread { zones: usize },
}

impl std::str::FromStr for Constraint {
    type Err = String;
    fn from_str(s: &str) -> Result<Constraint, String> {
        match s {
            "none" => Ok(Constraint::None),
            "hostname-anti-affinity" => Ok(Constraint::HostnameAntiAffinity),
            "zone-spread" => Ok(Constraint::ZoneSpread { zones: 10 }),
            _ => match s.strip_prefix("zone-spread:").map(str::parse::<usize>) {
                Some(Ok(zones)) if zones > 0 => Ok(Constraint::ZoneSpread { zones }),
                _ => Err(format!(
                    "{s:?}: expected none, hostname-anti-affinity, zone-spread or zone-spread:<zones>"
                )),
            },
        }
    }
}

impl Constraint {
    pub fn describe(self) -> String {
        match self {
            Constraint::None => "none".into(),
            Constraint::HostnameAntiAffinity => "required hostname anti-affinity".into(),
            Constraint::ZoneSpread { zones } => {
                format!("zone spread (maxSkew 1, DoNotSchedule, {zones} zones)")
            }
        }
    }
}

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
    /// The scenario's pods' placement constraint.
    pub constraint: Constraint,
    /// Count the scheduler's instructions over the measured span (see `instructions`).
    pub instructions: Option<Counter>,
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
