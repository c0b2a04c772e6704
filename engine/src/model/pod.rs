//! Pods: a pod as the adapter sees it ([`PodInput`] and its parts), what the workers need to
//! place it ([`CompiledPod`]), Kubernetes' effective-request rule ([`effective_requests`]:
//! init containers, sidecars, in-place resize, pod-level resources in `resources`, overhead),
//! [`compile_pod`], which validates all of it, and [`PodNames`], the pod's own names that
//! `plugins`, `dra` and `volumes` render their reasons with.
//!
//! Owns these types and that conversion. Uses the rest of the model (`model`'s interner,
//! errors and resource lists, `quantity`, `node`'s taints, `selector`, `pod_affinity`) and,
//! alone in the model, one thing above it: a pod's ResourceClaims are compiled by `dra`
//! ([`super::pod_claims::compile_claims`]), which uses the model's other files only.

mod extended;
mod resources;

pub use extended::{
    DEVICE_CLASS_PREFIX, ExtendedRequest, compile_extended, is_dra_extended_resource_name,
};

use super::node::{Taint, TaintEffect};
use super::pod_affinity::{
    PlainInfos, PodAffinityInput, PodInfo, SpreadConstraint, TopologySpreadInput,
    compile_pod_affinity, compile_pod_labels, compile_spread, mark_own_selector_keys,
};
use super::pod_claims::{PodClaim, PodClaimInput, compile_claims};
use super::quantity::parse_scaled;
use super::selector::{
    SelectorTermInput, Term, Toleration, TolerationInput, compile_term, compile_toleration,
};
use super::{
    CPU, DEFAULT_NONZERO_MEMORY, DEFAULT_NONZERO_MILLI_CPU, Interner, MEMORY, ModelError, PODS,
    ResourceList, ResourceRegistry, Side, Slot, add_into, get, max_into, parse_list, slot_of,
};
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// Inputs (strings, as the API spells them)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn parse(s: &str) -> PodPhase {
        match s {
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            _ => PodPhase::Pending,
        }
    }

    /// Terminal pods hold no resources (upstream keeps counting them; we do not).
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInput {
    /// The container's name (the claim made for extended resources backed by DRA maps its
    /// requests to containers by name).
    pub name: String,
    pub requests: Vec<(String, String)>,
    pub limits: Vec<(String, String)>,
    pub ports: Vec<PortInput>,
    /// Init containers only: `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// In-place resize: what the kubelet reports for the container, when its status has
    /// `resources` (regular containers and sidecars only).
    pub status: Option<ContainerStatusInput>,
}

/// A container's status as in-place resize reads it (`resourcehelper.determineContainerReqs`):
/// while a resize is pending or in progress the pod is counted at the larger of what its spec
/// asks and what the node has allocated and actuated, so a node is never booked below what its
/// pods hold; a resize the kubelet found infeasible counts what it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStatusInput {
    /// `status.containerStatuses[].resources.requests`: what is actuated.
    pub requests: Vec<(String, String)>,
    /// `status.containerStatuses[].allocatedResources`: what the kubelet admitted.
    pub allocated: Vec<(String, String)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortInput {
    pub host_port: i32,
    pub protocol: String,
    pub host_ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAffinityInput {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` (ORed); `None` when
    /// the pod has no required node affinity.
    pub required: Option<Vec<SelectorTermInput>>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`: (weight, term).
    pub preferred: Vec<(i32, SelectorTermInput)>,
}

/// A pod as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInput {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`: set for assigned pods.
    pub node_name: Option<String>,
    /// `status.nominatedNodeName`.
    pub nominated_node_name: Option<String>,
    pub phase: PodPhase,
    pub priority: i32,
    /// Raw value of the `volcano.sh/scheduling-priority` annotation, if present.
    pub scheduling_priority: Option<String>,
    pub containers: Vec<ContainerInput>,
    pub init_containers: Vec<ContainerInput>,
    pub overhead: Vec<(String, String)>,
    pub node_selector: Vec<(String, String)>,
    pub affinity: Option<NodeAffinityInput>,
    pub tolerations: Vec<TolerationInput>,
    pub scheduling_gates: Vec<String>,
    /// `metadata.creationTimestamp` in Unix milliseconds, for upstream's latency metrics.
    pub created_unix_ms: Option<i64>,
    /// `metadata.labels`.
    pub labels: Vec<(String, String)>,
    /// `spec.affinity.podAffinity` / `podAntiAffinity`.
    pub pod_affinity: Option<PodAffinityInput>,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread: Vec<TopologySpreadInput>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.volumes` that use claims (others need no scheduling).
    pub volumes: Vec<PodVolumeInput>,
    /// The `PodResizePending` condition's reason is `Infeasible`: the containers count at their
    /// status (`ContainerInput::status`), not at their spec.
    pub resize_infeasible: bool,
    /// `spec.resources`: pod-level requests and limits (`PodLevelResources`), with what the
    /// kubelet reports of them for in-place resize; `None` when the pod sets none.
    pub resources: Option<PodResourcesInput>,
    /// `spec.resourceClaims` (DRA), resolved against `status.resourceClaimStatuses`.
    pub resource_claims: Vec<PodClaimInput>,
    /// `spec.preemptionPolicy: Never`: it never preempts other pods.
    pub preemption_never: bool,
    /// `status.startTime` in Unix milliseconds (preemption spares the pods that started first).
    pub started_unix_ms: Option<i64>,
    /// Its `DisruptionTarget` condition is `True` with reason `PreemptionByScheduler`: a
    /// scheduler's preemption is evicting it.
    pub preempted: bool,
}

/// A pod volume as the adapter sees it (only those that use claims; `volumes` resolves them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumeInput {
    pub name: String,
    /// `persistentVolumeClaim.claimName`.
    pub claim: Option<String>,
    /// An `ephemeral` volume: its claim is `<pod>-<volume>`, made by the ephemeral controller.
    pub ephemeral: bool,
}

/// Pod-level resources (`spec.resources`, KEP-2837) and the pod-level in-place resize status
/// (`InPlacePodLevelResourcesVerticalScaling`): `status.resources.requests` (actuated) and
/// `status.allocatedResources` (admitted), each `None` when the kubelet reports none. The status
/// is read whether or not the pod sets pod-level resources: when both are reported they are the
/// containers' aggregate the kubelet holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResourcesInput {
    pub requests: Vec<(String, String)>,
    pub limits: Vec<(String, String)>,
    pub status_requests: Option<Vec<(String, String)>>,
    pub allocated: Option<Vec<(String, String)>>,
}

// ---------------------------------------------------------------------------------------------
// Compiled form
// ---------------------------------------------------------------------------------------------

/// A host port: protocol, host IP id (0 = all addresses) and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub protocol: u8,
    pub ip: u32,
    pub port: u16,
}

impl HostPort {
    /// Kubernetes' rule: same protocol and port, and either side binds all addresses or both
    /// bind the same address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.protocol == other.protocol
            && self.port == other.port
            && (self.ip == 0 || other.ip == 0 || self.ip == other.ip)
    }
}

/// Everything the workers need to place one pod, laid out for the filter and score loops.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledPod {
    pub uid: Arc<str>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Effective requests (Kubernetes' rule), including one `pods` unit.
    pub requests: ResourceList,
    /// Effective requests with kube-scheduler's non-zero defaults, CPU and memory, for scoring.
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    pub priority: i32,
    /// Value of `volcano.sh/scheduling-priority` (invalid or missing: 0).
    pub scheduling_priority: i32,
    /// nodeSelector: (key, value) pairs that must all match.
    pub node_selector: Box<[(u32, u32)]>,
    /// Required node affinity terms (ORed); `None` = no requirement.
    pub required: Option<Box<[Term]>>,
    pub preferred: Box<[(i32, Term)]>,
    pub tolerations: Box<[Toleration]>,
    pub host_ports: Box<[HostPort]>,
    pub gated: bool,
    /// Target of the NodeName filter (`spec.nodeName` on a pod handed to the scheduler).
    pub node_name: Option<u32>,
    /// Precomputed: tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
    pub tolerates_unschedulable: bool,
    /// Precomputed: has any node-label constraint (selector or required affinity).
    pub has_node_constraints: bool,
    /// `metadata.creationTimestamp` in Unix milliseconds, if known.
    pub created_unix_ms: Option<i64>,
    /// Namespace, labels and pod (anti-)affinity, as placed pods are seen by others.
    pub info: Arc<PodInfo>,
    pub spread: Box<[SpreadConstraint]>,
    /// Decided in the lane: a required (anti-)affinity or `DoNotSchedule` spread keyed on
    /// something other than `kubernetes.io/hostname` (`docs/constraints.md`).
    pub lane: bool,
    /// The PersistentVolumeClaims it uses: (claim name, ephemeral), resolved against the
    /// storage objects when it is handed off (`volumes`).
    pub claims: Box<[(Arc<str>, bool)]>,
    /// Some request names a resource no node offered when it was compiled (a requested-only
    /// slot, `ResourceRegistry`): re-resolved when nodes offer new names.
    pub requests_unoffered: bool,
    /// `spec.resourceClaims` (DRA), resolved against the ResourceClaims when it is handed off
    /// (`dra`).
    pub resource_claims: Box<[PodClaim]>,
    /// `spec.preemptionPolicy: Never`.
    pub preemption_never: bool,
    /// When it started (`status.startTime`, else its creation), Unix milliseconds: among
    /// preemption victims of equal priority the one that started last goes first.
    pub started_unix_ms: Option<i64>,
    /// Being evicted by a scheduler's preemption (`PodInput::preempted`).
    pub preempted: bool,
    /// Requests for extended resources a DeviceClass may provide (`extended`), per container;
    /// `None` without any.
    pub extended: Option<Arc<[ExtendedRequest]>>,
}

/// The pod a reason is rendered for. A reason about one pod's own objects (its name, its
/// claims) names them by position here instead of by interned id: they are unique to the pod,
/// and interning them would keep every such string for the life of the process.
#[derive(Clone, Copy, Default)]
pub struct PodNames<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// `spec.resourceClaims`, compiled.
    pub resource_claims: &'a [PodClaim],
    /// The claims of the pod's volumes: (claim name, ephemeral).
    pub volume_claims: &'a [(Arc<str>, bool)],
    /// Why its ResourceClaims cannot be allocated as they are, when they cannot
    /// (`dra::PodClaims::invalid`): kept with the pod's resolution, not interned, as the text
    /// names the pod's own claim.
    pub claims_invalid: Option<&'a str>,
    /// The name or text a volume reason needs that the pod does not hold itself
    /// (`volumes::PodVolumes::detail`: why a claim was refused, the missing volume a lost
    /// claim names), kept with the resolution for the same reason.
    pub volumes_detail: Option<&'a str>,
}

impl<'a> PodNames<'a> {
    pub fn of(pod: &'a CompiledPod) -> PodNames<'a> {
        PodNames {
            namespace: &pod.namespace,
            name: &pod.name,
            resource_claims: &pod.resource_claims,
            volume_claims: &pod.claims,
            claims_invalid: None,
            volumes_detail: None,
        }
    }
}

impl CompiledPod {
    /// This pod with its requested-only slots mapped to the offered slots their names have now,
    /// or `None` when nothing changed.
    pub fn reresolved(&self, registry: &ResourceRegistry) -> Option<CompiledPod> {
        if !self.requests_unoffered
            || !self
                .requests
                .iter()
                .any(|&(s, _)| registry.resolve(s).is_some())
        {
            return None;
        }
        let mut requests = ResourceList::new();
        for &(s, a) in &self.requests {
            add_into(&mut requests, registry.resolve(s).unwrap_or(s), a);
        }
        let requests_unoffered = requests
            .iter()
            .any(|&(s, _)| ResourceRegistry::is_requested_only(s));
        Some(CompiledPod {
            requests,
            requests_unoffered,
            ..self.clone()
        })
    }

    fn with_lane(mut self, hostname: u32) -> CompiledPod {
        let lane = self.required_keys().any(|k| k != hostname);
        self.lane = lane;
        self
    }

    /// Has pod affinity terms, spread constraints or claims: the cross-node plugins need the pod
    /// index
    /// (`cache::Cache::enable_pod_index`).
    pub fn needs_pod_index(&self) -> bool {
        self.info.affinity.is_some() || !self.spread.is_empty() || !self.claims.is_empty()
    }

    /// The topology keys of its preferred (anti-)affinity terms (what InterPodAffinity's score
    /// sums by).
    pub fn preferred_keys(&self) -> impl Iterator<Item = u32> + '_ {
        let a = self.info.affinity.as_deref();
        a.into_iter()
            .flat_map(|a| a.preferred.iter().chain(a.preferred_anti.iter()))
            .map(|(_, t)| t.topology_key)
    }

    /// The label keys its affinity terms and spread constraints look placed pods up by (each
    /// selector's `LabelSelector::lookup` key): what the label index (`index::PodLabels`) must
    /// index for this pod's reads to be answered without a scan.
    pub fn selector_keys(&self) -> impl Iterator<Item = u32> + '_ {
        let a = self.info.affinity.as_deref();
        let terms = a.into_iter().flat_map(|a| {
            a.required
                .iter()
                .chain(a.required_anti.iter())
                .chain(a.preferred.iter().map(|(_, t)| t))
                .chain(a.preferred_anti.iter().map(|(_, t)| t))
                .map(|t| &t.selector)
        });
        terms
            .chain(self.spread.iter().map(|c| &c.selector))
            .filter_map(|s| s.lookup())
            .filter(|(_, values)| !values.is_empty())
            .map(|(key, _)| key)
    }

    /// The topology keys of its required (anti-)affinity terms and `DoNotSchedule` spreads.
    pub fn required_keys(&self) -> impl Iterator<Item = u32> + '_ {
        let a = self.info.affinity.as_deref();
        a.into_iter()
            .flat_map(|a| a.required.iter().chain(a.required_anti.iter()))
            .map(|t| t.topology_key)
            .chain(
                self.spread
                    .iter()
                    .filter(|c| c.hard)
                    .map(|c| c.topology_key),
            )
    }

    pub fn request(&self, slot: Slot) -> i64 {
        get(&self.requests, slot)
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

/// Per-container requests, with requests defaulting to limits as the API server does.
/// A container's requests (limits stand in for missing requests, as the API server defaults
/// them), and the same with kube-scheduler's non-zero defaults for CPU and memory it does not
/// request (`schedutil.GetNonzeroRequests`), from one parse of its quantities.
fn container_requests(
    registry: &mut ResourceRegistry,
    side: Side,
    c: &ContainerInput,
    resize_infeasible: bool,
    use_status: bool,
) -> Result<(ResourceList, ResourceList), ModelError> {
    let status = c.status.as_ref().filter(|_| use_status);
    let mut list = parse_list(registry, side, &c.requests)?;
    for (name, q) in &c.limits {
        let slot = slot_of(registry, side, name)?;
        let amount = parse_scaled(name, q, ResourceRegistry::scale(slot))?;
        if !c.requests.iter().any(|(n, _)| n == name) && amount > 0 {
            add_into(&mut list, slot, amount);
        }
    }
    // In-place resize (`ContainerStatusInput`): max(spec, actuated, allocated), or without the
    // spec when the resize is infeasible.
    let from_spec = !(resize_infeasible && status.is_some());
    if let Some(st) = status {
        let mut held = parse_list(registry, side, &st.requests)?;
        max_into(&mut held, &parse_list(registry, side, &st.allocated)?);
        if from_spec {
            max_into(&mut list, &held);
        } else {
            list = held;
        }
    }
    // kube-scheduler's non-zero defaults fill in what no list names.
    let named = |n: &str| {
        from_spec && c.requests.iter().any(|(k, _)| k == n)
            || status.is_some_and(|st| st.requests.iter().chain(&st.allocated).any(|(k, _)| k == n))
    };
    let mut nonzero = list.clone();
    if get(&list, CPU) == 0 && !named("cpu") {
        add_into(&mut nonzero, CPU, DEFAULT_NONZERO_MILLI_CPU);
    }
    if get(&list, MEMORY) == 0 && !named("memory") {
        add_into(&mut nonzero, MEMORY, DEFAULT_NONZERO_MEMORY);
    }
    Ok((list, nonzero))
}

/// Kubernetes' effective pod request (`resourcehelper.PodRequests`): the sum of the regular
/// containers plus all sidecars, or the largest need at any init step (each init container plus
/// the sidecars started before it), whichever is larger; pod-level requests in place of that
/// for the resources they set (`resources`); plus the pod overhead.
pub fn effective_requests(
    registry: &mut ResourceRegistry,
    pod: &PodInput,
    nonzero: bool,
) -> Result<ResourceList, ModelError> {
    let (requests, nz) = effective_requests_both(registry, Side::Node, pod)?;
    Ok(if nonzero { nz } else { requests })
}

/// [`effective_requests`] without and with the non-zero defaults, parsing each quantity once.
fn effective_requests_both(
    registry: &mut ResourceRegistry,
    side: Side,
    pod: &PodInput,
) -> Result<(ResourceList, ResourceList), ModelError> {
    #[derive(Default)]
    struct Sum {
        reqs: ResourceList,
        sidecars: ResourceList,
        init_max: ResourceList,
    }
    impl Sum {
        fn init(&mut self, own: ResourceList, restartable: bool) {
            let step = if restartable {
                for &(s, a) in &own {
                    add_into(&mut self.sidecars, s, a);
                }
                self.sidecars.clone()
            } else {
                let mut step = own;
                for &(s, a) in &self.sidecars {
                    add_into(&mut step, s, a);
                }
                step
            };
            max_into(&mut self.init_max, &step);
        }
        /// The containers' aggregate (`AggregateContainerRequests`).
        fn containers(mut self) -> ResourceList {
            for &(s, a) in &self.sidecars {
                add_into(&mut self.reqs, s, a);
            }
            max_into(&mut self.reqs, &self.init_max);
            self.reqs
        }
    }
    // The kubelet reports the pod's aggregate (`status.resources.requests` and
    // `status.allocatedResources`, InPlacePodLevelResourcesVerticalScaling): it stands in for
    // the containers' statuses (`AggregateContainerRequests`).
    let pod_status = pod
        .resources
        .as_ref()
        .and_then(|r| Some((r.status_requests.as_ref()?, r.allocated.as_ref()?)));
    let use_status = pod_status.is_none();
    let (mut plain, mut nonzero) = (Sum::default(), Sum::default());
    for c in &pod.containers {
        let (own, own_nz) =
            container_requests(registry, side, c, pod.resize_infeasible, use_status)?;
        for (s, a) in own {
            add_into(&mut plain.reqs, s, a);
        }
        for (s, a) in own_nz {
            add_into(&mut nonzero.reqs, s, a);
        }
    }
    for c in &pod.init_containers {
        let (own, own_nz) =
            container_requests(registry, side, c, pod.resize_infeasible, use_status)?;
        plain.init(own, c.restartable);
        nonzero.init(own_nz, c.restartable);
    }
    let overhead = parse_list(registry, side, &pod.overhead)?;
    let (mut plain, mut nonzero) = (plain.containers(), nonzero.containers());
    if let Some((actuated, allocated)) = pod_status {
        // max(spec, actuated, allocated), or what the pod holds while its resize is infeasible.
        let mut held = parse_list(registry, side, actuated)?;
        max_into(&mut held, &parse_list(registry, side, allocated)?);
        if pod.resize_infeasible {
            plain = held.clone();
            nonzero = held;
        } else {
            max_into(&mut plain, &held);
            max_into(&mut nonzero, &held);
        }
    }
    if let Some(r) = &pod.resources {
        resources::apply(registry, side, pod, r, &overhead, &mut plain, &mut nonzero)?;
    }
    for &(s, a) in &overhead {
        add_into(&mut plain, s, a);
        add_into(&mut nonzero, s, a);
    }
    Ok((plain, nonzero))
}

pub(super) fn compile_port(
    p: &PortInput,
    interner: &mut Interner,
) -> Result<Option<HostPort>, ModelError> {
    if p.host_port == 0 {
        return Ok(None);
    }
    let port = u16::try_from(p.host_port)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(ModelError::HostPort { port: p.host_port })?;
    let protocol = match p.protocol.as_str() {
        "" | "TCP" => 0,
        "UDP" => 1,
        "SCTP" => 2,
        other => return Err(ModelError::Protocol(other.to_owned())),
    };
    let ip = match p.host_ip.as_str() {
        "" | "0.0.0.0" | "::" => 0,
        ip => interner.intern(ip),
    };
    Ok(Some(HostPort { protocol, ip, port }))
}

/// Parse the `volcano.sh/scheduling-priority` annotation like upstream: an integer, anything
/// else counts as 0 (Normal).
pub fn parse_scheduling_priority(value: Option<&str>) -> i32 {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

pub fn compile_pod(
    input: &PodInput,
    interner: &mut Interner,
    registry: &mut ResourceRegistry,
) -> Result<CompiledPod, ModelError> {
    compile_pod_with(input, interner, registry, &mut PlainInfos::default())
}

/// [`compile_pod`], a pod with nothing others select or see apart taking its namespace's shared
/// `PodInfo` from `plain` (no allocation for constraint state it does not use).
pub fn compile_pod_with(
    input: &PodInput,
    interner: &mut Interner,
    registry: &mut ResourceRegistry,
    plain: &mut PlainInfos,
) -> Result<CompiledPod, ModelError> {
    if input.uid.is_empty() {
        return Err(ModelError::Empty { what: "pod uid" });
    }
    if input.name.is_empty() {
        return Err(ModelError::Empty { what: "pod name" });
    }
    if let Some(r) = &input.resources {
        resources::validate(input, r)?;
    }
    let (mut requests, nz) = effective_requests_both(registry, Side::Pod, input)?;
    add_into(&mut requests, PODS, 1);
    let mut node_selector: Vec<(u32, u32)> = input
        .node_selector
        .iter()
        .map(|(k, v)| (interner.intern(k), interner.intern(v)))
        .collect();
    node_selector.sort_unstable();
    node_selector.dedup();
    let (required, preferred) = match &input.affinity {
        None => (None, Vec::new()),
        Some(a) => {
            let required = a
                .required
                .as_ref()
                .map(|terms| {
                    terms
                        .iter()
                        .map(|t| compile_term(t, interner))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?
                .map(Vec::into_boxed_slice);
            let preferred = a
                .preferred
                .iter()
                .map(|(w, t)| {
                    if !(1..=100).contains(w) {
                        return Err(ModelError::PreferredWeight(*w));
                    }
                    Ok((*w, compile_term(t, interner)?))
                })
                .collect::<Result<Vec<_>, _>>()?;
            (required, preferred)
        }
    };
    let tolerations = input
        .tolerations
        .iter()
        .map(|t| compile_toleration(t, interner))
        .collect::<Result<Vec<_>, _>>()?;
    let mut host_ports = Vec::new();
    let port_containers = input
        .containers
        .iter()
        .chain(input.init_containers.iter().filter(|c| c.restartable));
    for c in port_containers {
        for p in &c.ports {
            if let Some(hp) = compile_port(p, interner)? {
                host_ports.push(hp);
            }
        }
    }
    host_ports.sort_unstable();
    host_ports.dedup();
    let unsched_taint = Taint {
        key: Interner::UNSCHEDULABLE_TAINT,
        value: 0,
        effect: TaintEffect::NoSchedule,
    };
    let tolerates_unschedulable = tolerations.iter().any(|t| t.tolerates(&unsched_taint));
    let has_node_constraints = !node_selector.is_empty() || required.is_some();
    let namespace = interner.intern(&input.namespace);
    mark_own_selector_keys(
        input.pod_affinity.as_ref(),
        &input.topology_spread,
        interner,
    );
    let (labels, raw) = compile_pod_labels(&input.labels, interner);
    // The epoch the labels were split at: a selector compiled below that marks a key of `raw`
    // leaves the pod stale, to be converted (`PodInfo::stale`).
    let split_at = interner.label_epoch();
    let affinity = match &input.pod_affinity {
        Some(a) => {
            compile_pod_affinity(a, namespace, &labels, interner)?.map(|a| plain.share_affinity(a))
        }
        None => None,
    };
    let spread = compile_spread(&input.topology_spread, &labels, interner)?;
    let mut claims: Vec<(Arc<str>, bool)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for v in &input.volumes {
        if v.name.is_empty() || !seen.insert(v.name.as_str()) {
            return Err(ModelError::VolumeName(v.name.clone()));
        }
        if v.ephemeral {
            claims.push((Arc::from(format!("{}-{}", input.name, v.name)), true));
        } else if let Some(c) = v.claim.as_deref() {
            if c.is_empty() {
                return Err(ModelError::Empty {
                    what: "persistentVolumeClaim.claimName",
                });
            }
            claims.push((Arc::from(c), false));
        }
    }
    let requests_unoffered = requests
        .iter()
        .any(|&(s, _)| ResourceRegistry::is_requested_only(s));
    let resource_claims = if input.resource_claims.is_empty() {
        Box::default()
    } else {
        compile_claims(&input.resource_claims)?
    };
    Ok(CompiledPod {
        uid: Arc::from(input.uid.as_str()),
        namespace: interner.shared(namespace).expect("just interned").clone(),
        name: Arc::from(input.name.as_str()),
        requests,
        nonzero_cpu: get(&nz, CPU),
        nonzero_memory: get(&nz, MEMORY),
        priority: input.priority,
        scheduling_priority: parse_scheduling_priority(input.scheduling_priority.as_deref()),
        node_selector: node_selector.into(),
        required,
        preferred: preferred.into(),
        tolerations: tolerations.into(),
        host_ports: host_ports.into(),
        gated: !input.scheduling_gates.is_empty(),
        node_name: input
            .node_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(|n| interner.intern(n)),
        tolerates_unschedulable,
        has_node_constraints,
        created_unix_ms: input.created_unix_ms,
        info: if labels.is_empty()
            && raw.is_empty()
            && affinity.is_none()
            && !input.terminating
            && claims.is_empty()
        {
            plain.get(namespace)
        } else {
            Arc::new(PodInfo {
                namespace,
                labels,
                raw,
                epoch: split_at,
                affinity,
                terminating: input.terminating,
                csi: Box::new([]),
                claims: claims.iter().map(|(c, _)| c.clone()).collect(),
            })
        },
        spread,
        lane: false,
        claims: claims.clone().into(),
        requests_unoffered,
        resource_claims,
        preemption_never: input.preemption_never,
        started_unix_ms: input.started_unix_ms.or(input.created_unix_ms),
        preempted: input.preempted,
        extended: compile_extended(&input.init_containers, &input.containers),
    }
    .with_lane(Interner::HOSTNAME))
}
