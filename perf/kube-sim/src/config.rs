//! Simulator configuration: address, fake nodes, KWOK-like pod lifecycle (including how long the
//! simulated kubelet takes to finish a terminating pod), watch history and buffers, namespace
//! policy, the volume provisioner, the resource claim and disruption controllers, the admission
//! plugins switched off, and the initial fault configuration.

use crate::faults::Faults;
use std::net::SocketAddr;
use std::time::Duration;

/// How the simulator starts; `Default` is a loopback server on a free port with 10 nodes.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Listen address (`127.0.0.1:0` picks a free port).
    pub addr: SocketAddr,
    /// Fake nodes created at start, named `node-00000`, `node-00001`, ...
    pub nodes: usize,
    /// Node CPU capacity/allocatable (a Kubernetes quantity).
    pub node_cpu: String,
    /// Node memory capacity/allocatable.
    pub node_memory: String,
    /// Node pod capacity/allocatable.
    pub node_pods: u32,
    /// Delay after a bind (or the creation of a pre-bound pod) before the pod becomes Running;
    /// None leaves bound pods Pending.
    pub running_delay: Option<Duration>,
    /// Time a Running pod lives before it becomes Succeeded and is deleted; None = forever. A pod
    /// annotation `kube-sim.magma.io/lifetime-ms` overrides it per pod.
    pub pod_lifetime: Option<Duration>,
    /// Watch events retained for resuming watches; older versions get `410 Expired`.
    pub history: usize,
    /// Keep retained versions packed once no longer young (`pack`; a thread of its own packs
    /// them, off the state lock): about 2.7 KB per bound pod at 40k pods instead of 7.3. On by
    /// default; off keeps every version plain (`kube-sim --pack-versions=false`).
    pub pack_versions: bool,
    /// Per-watcher broadcast buffer; a watcher that falls further behind is closed.
    pub watch_buffer: usize,
    /// Period of `BOOKMARK` events for watches that ask for them.
    pub bookmark_interval: Duration,
    /// Creating into a missing namespace creates it (the real server answers 404).
    pub auto_create_namespaces: bool,
    /// Register the NodeShard CRD (`shard.volcano.sh/v1alpha1`) at start.
    pub install_nodeshard_crd: bool,
    /// Write and binding records kept for assertions (oldest dropped first).
    pub record_limit: usize,
    /// Dynamic provisioning and binding of PersistentVolumeClaims (a PV controller plus a CSI
    /// external provisioner); off by default.
    pub provisioner: Provisioner,
    /// Run kube-controller-manager's resource claim controller (claims made from templates for
    /// pods, `status.resourceClaimStatuses`, reservations of scheduled pods, release and
    /// deallocation when consumers are gone) and the garbage collection of claims whose owning
    /// pods are gone; on by default, as in a real cluster.
    pub resource_claim_controller: bool,
    /// How long the simulated kubelet takes to finish a pod deleted gracefully (bound, not yet
    /// Succeeded or Failed): after `min(termination_delay, deletionGracePeriodSeconds)` it
    /// reports the pod terminated (a terminal phase) and deletes it with grace period 0, as a
    /// kubelet does once the containers have stopped. The real kubelet takes as long as the
    /// containers need to stop (at most the grace period, 30 s by default); the default here,
    /// 100 ms, keeps tests fast while a terminating pod stays observable. None: the kubelet
    /// never finishes terminating pods (they keep their `deletionTimestamp`, as on a node that
    /// is down).
    pub termination_delay: Option<Duration>,
    /// Run kube-controller-manager's disruption controller: the status of every
    /// PodDisruptionBudget (`expectedPods`, `currentHealthy`, `desiredHealthy`,
    /// `disruptionsAllowed`, `observedGeneration`, the `DisruptionAllowed` condition), kept up to
    /// date as pods and budgets change, and the reset of stale `DisruptionTarget` pod conditions;
    /// on by default, as in a real cluster.
    pub disruption_controller: bool,
    /// How long a pod may carry a `DisruptionTarget=True` condition (set by someone other than
    /// the kubelet) without being deleted before the disruption controller sets it to False
    /// (`stalePodDisruptionTimeout`, 2 minutes upstream).
    pub stale_disruption_condition_timeout: Duration,
    /// Serve HTTPS with a self-signed CA generated at start (the handle's `ca_pem`, and its
    /// kubeconfig carries it), as a real API server; plain HTTP when false (the default).
    pub tls: bool,
    /// Admission plugins switched off, by their kube-apiserver names, as
    /// `--disable-admission-plugins` takes them. `Priority` (priority classes resolved into
    /// pods' `spec.priority` and `spec.preemptionPolicy`), `DefaultStorageClass` and
    /// `PersistentVolumeClaimResize` change what kube-sim does; the other names kube-apiserver
    /// registers are accepted and change nothing (kube-sim does not run those plugins); an
    /// unknown name fails [`crate::Sim::start`] as it fails kube-apiserver's start
    /// (`disable-admission-plugins plugin "X" is unknown`). kube-scheduler's integration
    /// harness (scheduler_perf) runs without `Priority`, so its pods keep the `spec.priority`
    /// their templates set.
    pub disable_admission_plugins: Vec<String>,
    /// Initial faults (changeable at runtime).
    pub faults: Faults,
}

/// How the simulated PV controller and CSI provisioner behave ([`SimConfig::provisioner`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Provisioner {
    /// No storage controllers: claims stay as they are created (the default).
    #[default]
    Off,
    /// The PV controller hands eligible claims to the provisioner at once (the
    /// `volume.kubernetes.io/storage-provisioner` annotations), and the provisioner creates and
    /// binds their volume after this delay; claims pre-bound by a PV's `claimRef` are bound at
    /// once, volumes bound to no claim become `Available`; a deleted bound volume makes its claim
    /// `Lost`; a deleted claim releases its volume, which is deleted after the delay when it was
    /// provisioned and its reclaim policy is `Delete`.
    After(Duration),
    /// The PV controller runs as with [`Provisioner::After`] but the provisioner never creates a
    /// volume (nor deletes a released one): claims needing provisioning stay `Pending`.
    Never,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodes: 10,
            node_cpu: "32".into(),
            node_memory: "256Gi".into(),
            node_pods: 110,
            running_delay: Some(Duration::ZERO),
            pod_lifetime: None,
            history: 100_000,
            pack_versions: true,
            watch_buffer: 65_536,
            bookmark_interval: Duration::from_secs(1),
            auto_create_namespaces: false,
            install_nodeshard_crd: false,
            record_limit: 1_000_000,
            provisioner: Provisioner::Off,
            resource_claim_controller: true,
            termination_delay: Some(Duration::from_millis(100)),
            disruption_controller: true,
            stale_disruption_condition_timeout: Duration::from_secs(120),
            tls: false,
            disable_admission_plugins: Vec::new(),
            faults: Faults::default(),
        }
    }
}

/// Parses a Go-style duration (`1h2m3s`, `500ms`, `1.5s`, `250us`); a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Ok(Duration::from_secs_f64(secs));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(format!("missing unit in {s:?}"))?;
        let n: f64 = rest[..num_end]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            u => return Err(format!("unknown unit {u:?} in duration {s:?}")),
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("3x").is_err());
    }
}
