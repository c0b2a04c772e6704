//! The engine's compact object model and the validated conversions into it.
//!
//! Adapters describe nodes and pods with plain strings ([`NodeInput`], [`PodInput`]), the way
//! the Kubernetes API spells them. The cache compiles them ([`compile_node`], [`compile_pod`])
//! into forms built for scanning: resource names become dense slots ([`ResourceRegistry`]),
//! label keys and values, taint keys and node names become integers ([`Interner`]), requests
//! follow Kubernetes' effective-request rule (init containers, sidecars, overhead). Every
//! conversion validates its input and returns a [`ModelError`] naming the offending value.
//!
//! This module owns those types; it touches nothing else.

mod pod_affinity;
mod pod_resources;
mod quantity;

pub use pod_affinity::{
    AffinityTerm, LabelOp, LabelReq, LabelSelector, LabelSelectorInput, NamespaceInput, Namespaces,
    PodAffinity, PodAffinityInput, PodAffinityTermInput, PodInfo, SpreadConstraint,
    TopologySpreadInput, compile_labels, compile_selector, label_value,
};
pub use quantity::{MAX_AMOUNT, parse_scaled};

use smallvec::SmallVec;
use std::sync::Arc;

/// Errors converting outside input into the engine model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("invalid quantity {value:?} for resource {resource:?}: {why}")]
    Quantity {
        resource: String,
        value: String,
        why: &'static str,
    },
    #[error("invalid resource name {0:?}")]
    ResourceName(String),
    #[error("too many distinct resource names (limit {limit}); cannot register {name:?}")]
    TooManyResources { name: String, limit: usize },
    #[error("unknown node selector operator {0:?}")]
    SelectorOperator(String),
    #[error("node selector operator {op} on key {key:?}: {why}")]
    SelectorValues {
        key: String,
        op: &'static str,
        why: String,
    },
    #[error("unsupported field selector key {0:?} (only metadata.name is supported)")]
    FieldSelectorKey(String),
    #[error("unknown toleration operator {0:?}")]
    TolerationOperator(String),
    #[error("toleration with operator Exists must not have a value (key {key:?}, value {value:?})")]
    TolerationExistsWithValue { key: String, value: String },
    #[error("toleration with an empty key must use operator Exists")]
    TolerationEmptyKey,
    #[error("unknown taint effect {0:?}")]
    TaintEffect(String),
    #[error("invalid host port {port} (must be 1..=65535)")]
    HostPort { port: i32 },
    #[error("unknown port protocol {0:?}")]
    Protocol(String),
    #[error("invalid preferred scheduling term weight {0} (must be 1..=100)")]
    PreferredWeight(i32),
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("unknown label selector operator {0:?}")]
    LabelSelectorOperator(String),
    #[error("label selector operator {op} on key {key:?}: {why}")]
    LabelSelectorValues {
        key: String,
        op: String,
        why: String,
    },
    #[error("label key {0:?} is in both matchLabelKeys and mismatchLabelKeys")]
    LabelKeysConflict(String),
    #[error("topology spread constraint on {key:?}: {why}")]
    SpreadConstraint { key: String, why: String },
    #[error("unknown volumeBindingMode {0:?} (must be Immediate or WaitForFirstConsumer)")]
    BindingMode(String),
    #[error("volume {0:?}: a pod volume name must not be empty or repeated")]
    VolumeName(String),
    /// `spec.resourceClaims` the API server would refuse (`dra::compile_claims`).
    #[error("{0}")]
    ResourceClaim(String),
    /// Pod-level resources the API server would refuse, with its causes (`pod_resources`).
    #[error("{}", causes_text(.0))]
    PodResources(Vec<String>),
}

/// The API server's rendering of several causes: one alone, or `[a, b, ...]`.
fn causes_text(causes: &[String]) -> String {
    match causes {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------------
// Interning
// ---------------------------------------------------------------------------------------------

/// String interner: label keys and values, taint keys and values, node names, host IPs.
/// Id 0 is reserved for the empty string, and the keys every pod compile needs have fixed ids
/// ([`Interner::HOSTNAME`], [`Interner::UNSCHEDULABLE_TAINT`]) so compiling a pod does not look
/// them up. Owned by the single cache writer.
///
/// The map hashes with foldhash, seeded per interner: the driver interns every label, selector
/// and node name it compiles, and SipHash cost as much as the rest of a pod's compile.
#[derive(Debug)]
pub struct Interner {
    ids: crate::FastMap<Arc<str>, u32>,
    strs: Vec<Arc<str>>,
}

impl Default for Interner {
    fn default() -> Self {
        let mut me = Self {
            ids: crate::FastMap::default(),
            strs: Vec::new(),
        };
        for (want, s) in [
            (0, ""),
            (Self::HOSTNAME, HOSTNAME_KEY),
            (Self::UNSCHEDULABLE_TAINT, UNSCHEDULABLE_TAINT_KEY),
        ] {
            let id = me.intern(s);
            debug_assert_eq!(id, want);
        }
        me
    }
}

impl Interner {
    /// The id of `kubernetes.io/hostname`.
    pub const HOSTNAME: u32 = 1;
    /// The id of `node.kubernetes.io/unschedulable`.
    pub const UNSCHEDULABLE_TAINT: u32 = 2;

    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = u32::try_from(self.strs.len()).expect("interner overflow");
        let a: Arc<str> = Arc::from(s);
        self.strs.push(a.clone());
        self.ids.insert(a, id);
        id
    }

    /// The interned string as a shared `Arc` (no allocation), or `None` for an unknown id.
    pub fn shared(&self, id: u32) -> Option<&Arc<str>> {
        self.strs.get(id as usize)
    }

    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    pub fn resolve(&self, id: u32) -> &str {
        self.strs.get(id as usize).map(|s| &**s).unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.strs.len()
    }

    /// Nothing interned beyond the reserved strings.
    pub fn is_empty(&self) -> bool {
        self.strs.len() <= 3
    }
}

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

/// Slot of a resource name (`ResourceRegistry`).
pub type Slot = u32;

pub const CPU: Slot = 0;
pub const MEMORY: Slot = 1;
pub const EPHEMERAL_STORAGE: Slot = 2;
pub const PODS: Slot = 3;
/// Most distinct resource names nodes may offer (far above any real cluster: a node offering
/// more is rejected, alone). Pods' requests for names no node offers never count against it.
pub const MAX_OFFERED_RESOURCES: usize = 1 << 16;

/// Default non-zero requests kube-scheduler assumes for scoring a container without requests.
pub const DEFAULT_NONZERO_MILLI_CPU: i64 = 100;
pub const DEFAULT_NONZERO_MEMORY: i64 = 200 * 1024 * 1024;

/// Resource name → slot. Slots are never reassigned, so snapshots can index rows by slot.
///
/// Two kinds of slot, so that no pod's spec can change how other pods are scheduled:
/// - **offered** slots, dense from 0, for every name some node has offered (`slot`, called when
///   a node is compiled). Snapshot chunks keep one row per offered slot up to the highest one
///   their own nodes offer, and the fit check indexes rows by slot: no hashing per node.
/// - **requested-only** slots, counted down from `Slot::MAX`, for a name a pod asks for that no
///   node offers (`pod_slot`). No chunk has a row for one, so such a request fits no node
///   (`Insufficient <name>`, as kube-scheduler says), and it takes nothing from the offered
///   range. When a node later offers the name it gets an offered slot, and the driver re-resolves
///   the waiting pods that asked for it ([`ResourceRegistry::resolve`]).
#[derive(Debug, Clone)]
pub struct ResourceRegistry {
    names: Vec<Arc<str>>,
    offered: crate::FastMap<Arc<str>, Slot>,
    /// Names only pods asked for, by `Slot::MAX - slot`.
    requested: Vec<Arc<str>>,
    requested_ids: crate::FastMap<Arc<str>, Slot>,
}

impl Default for ResourceRegistry {
    fn default() -> Self {
        let mut me = Self {
            names: Vec::new(),
            offered: crate::FastMap::default(),
            requested: Vec::new(),
            requested_ids: crate::FastMap::default(),
        };
        for (want, name) in [
            (CPU, "cpu"),
            (MEMORY, "memory"),
            (EPHEMERAL_STORAGE, "ephemeral-storage"),
            (PODS, "pods"),
        ] {
            let slot = me.slot(name).expect("built-in resource names are valid");
            debug_assert_eq!(slot, want);
        }
        me
    }
}

impl ResourceRegistry {
    /// The offered slot of `name`, if some node has offered it.
    pub fn lookup(&self, name: &str) -> Option<Slot> {
        self.offered.get(name).copied()
    }

    /// Offered slot for `name` (a node offers it), registering it if new.
    pub fn slot(&mut self, name: &str) -> Result<Slot, ModelError> {
        if let Some(s) = self.lookup(name) {
            return Ok(s);
        }
        validate_resource_name(name)?;
        if self.names.len() >= MAX_OFFERED_RESOURCES {
            return Err(ModelError::TooManyResources {
                name: name.to_owned(),
                limit: MAX_OFFERED_RESOURCES,
            });
        }
        let slot = self.names.len() as Slot;
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.offered.insert(name, slot);
        Ok(slot)
    }

    /// Slot for a name a pod requests: its offered slot, or else a requested-only one.
    pub fn pod_slot(&mut self, name: &str) -> Result<Slot, ModelError> {
        if let Some(s) = self.lookup(name) {
            return Ok(s);
        }
        if let Some(&s) = self.requested_ids.get(name) {
            return Ok(s);
        }
        validate_resource_name(name)?;
        let slot = Slot::MAX - self.requested.len() as Slot;
        let name: Arc<str> = Arc::from(name);
        self.requested.push(name.clone());
        self.requested_ids.insert(name, slot);
        Ok(slot)
    }

    /// No node offered this slot's name when it was assigned.
    pub fn is_requested_only(slot: Slot) -> bool {
        slot as usize >= MAX_OFFERED_RESOURCES
    }

    /// The offered slot a requested-only slot's name has now, if a node offers it since.
    pub fn resolve(&self, slot: Slot) -> Option<Slot> {
        Self::is_requested_only(slot)
            .then(|| self.lookup(self.name(slot)))
            .flatten()
    }

    pub fn name(&self, slot: Slot) -> &str {
        let name = if Self::is_requested_only(slot) {
            self.requested.get((Slot::MAX - slot) as usize)
        } else {
            self.names.get(slot as usize)
        };
        name.map_or("?", |s| &**s)
    }

    /// Offered slots (every chunk row index is below this).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Scale of the integer unit the engine counts `slot` in (CPU in millicores).
    pub fn scale(slot: Slot) -> i64 {
        if slot == CPU { 1000 } else { 1 }
    }
}

/// Who names a resource: a node offering it (registers an offered slot) or a pod requesting it
/// (never takes an offered slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Node,
    Pod,
}

fn slot_of(registry: &mut ResourceRegistry, side: Side, name: &str) -> Result<Slot, ModelError> {
    match side {
        Side::Node => registry.slot(name),
        Side::Pod => registry.pod_slot(name),
    }
}

/// A resource name is a qualified name: an optional DNS prefix and `/`, then a name of
/// alphanumerics, `-`, `_`, `.` (e.g. `cpu`, `hugepages-2Mi`, `nvidia.com/gpu`).
fn validate_resource_name(name: &str) -> Result<(), ModelError> {
    let bad = || ModelError::ResourceName(name.to_owned());
    let (prefix, local) = match name.split_once('/') {
        Some((p, l)) => (Some(p), l),
        None => (None, name),
    };
    let ok_chars = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
    };
    if !ok_chars(local) || local.len() > 63 {
        return Err(bad());
    }
    if let Some(p) = prefix
        && (!ok_chars(p) || p.contains('/'))
    {
        return Err(bad());
    }
    Ok(())
}

/// A list of (slot, amount) pairs, sorted by slot, zero amounts omitted.
pub type ResourceList = SmallVec<[(Slot, i64); 6]>;

fn add_into(list: &mut ResourceList, slot: Slot, amount: i64) {
    match list.binary_search_by_key(&slot, |&(s, _)| s) {
        Ok(i) => list[i].1 = list[i].1.saturating_add(amount).min(MAX_AMOUNT),
        Err(i) => list.insert(i, (slot, amount.min(MAX_AMOUNT))),
    }
}

fn get(list: &ResourceList, slot: Slot) -> i64 {
    list.binary_search_by_key(&slot, |&(s, _)| s)
        .map(|i| list[i].1)
        .unwrap_or(0)
}

fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for &(s, a) in other {
        match list.binary_search_by_key(&s, |&(x, _)| x) {
            Ok(i) => list[i].1 = list[i].1.max(a),
            Err(i) => list.insert(i, (s, a)),
        }
    }
}

/// Parse a `name: quantity` map into slots.
pub fn parse_resource_list(
    registry: &mut ResourceRegistry,
    pairs: &[(String, String)],
) -> Result<ResourceList, ModelError> {
    parse_list(registry, Side::Node, pairs)
}

fn parse_list(
    registry: &mut ResourceRegistry,
    side: Side,
    pairs: &[(String, String)],
) -> Result<ResourceList, ModelError> {
    let mut out = ResourceList::new();
    for (name, q) in pairs {
        let slot = slot_of(registry, side, name)?;
        let amount = parse_scaled(name, q, ResourceRegistry::scale(slot))?;
        if amount > 0 {
            add_into(&mut out, slot, amount);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Inputs (strings, as the API spells them)
// ---------------------------------------------------------------------------------------------

/// A node as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInput {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub taints: Vec<TaintInput>,
    pub unschedulable: bool,
    /// `status.allocatable`; resources missing here fall back to `capacity`.
    pub allocatable: Vec<(String, String)>,
    pub capacity: Vec<(String, String)>,
    /// The `Ready` condition is `True`. Like kube-scheduler, readiness is enforced through the
    /// `node.kubernetes.io/not-ready` taint the node lifecycle controller adds, not as a filter;
    /// it is kept for reporting.
    pub ready: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaintInput {
    pub key: String,
    pub value: String,
    pub effect: String,
}

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
pub struct SelectorRequirementInput {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorTermInput {
    pub match_expressions: Vec<SelectorRequirementInput>,
    pub match_fields: Vec<SelectorRequirementInput>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAffinityInput {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` (ORed); `None` when
    /// the pod has no required node affinity.
    pub required: Option<Vec<SelectorTermInput>>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`: (weight, term).
    pub preferred: Vec<(i32, SelectorTermInput)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TolerationInput {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
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
    pub resource_claims: Vec<crate::dra::PodClaimInput>,
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
// Compiled forms
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Result<TaintEffect, ModelError> {
        match s {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(ModelError::TaintEffect(other.to_owned())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: u32,
    pub value: u32,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    pub key: u32,
    pub value: u32,
    /// The value parsed as an integer, for `Gt`/`Lt`.
    pub num: Option<i64>,
}

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

/// The node's immutable description, shared by every snapshot until the node changes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeMeta {
    pub name: Arc<str>,
    pub name_id: u32,
    /// Sorted by key.
    pub labels: Box<[Label]>,
    pub taints: Box<[Taint]>,
    pub unschedulable: bool,
    pub ready: bool,
}

impl NodeMeta {
    pub fn label(&self, key: u32) -> Option<&Label> {
        self.labels
            .binary_search_by_key(&key, |l| l.key)
            .ok()
            .map(|i| &self.labels[i])
    }
}

/// A compiled node: its description and its allocatable resources.
#[derive(Debug, Clone)]
pub struct CompiledNode {
    pub meta: Arc<NodeMeta>,
    pub allocatable: ResourceList,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl SelectorOp {
    fn parse(s: &str) -> Result<SelectorOp, ModelError> {
        Ok(match s {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            "Gt" => SelectorOp::Gt,
            "Lt" => SelectorOp::Lt,
            other => return Err(ModelError::SelectorOperator(other.to_owned())),
        })
    }

    fn name(self) -> &'static str {
        match self {
            SelectorOp::In => "In",
            SelectorOp::NotIn => "NotIn",
            SelectorOp::Exists => "Exists",
            SelectorOp::DoesNotExist => "DoesNotExist",
            SelectorOp::Gt => "Gt",
            SelectorOp::Lt => "Lt",
        }
    }
}

/// One requirement of a node selector term.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    pub key: u32,
    pub op: SelectorOp,
    /// Sorted value ids (In/NotIn).
    pub values: Box<[u32]>,
    /// Gt/Lt bound.
    pub bound: i64,
}

impl Requirement {
    /// `metadata.name In [node]` (a field requirement: `Term::fields`).
    pub fn name_in(node_name_id: u32) -> Requirement {
        Requirement {
            key: 0,
            op: SelectorOp::In,
            values: Box::new([node_name_id]),
            bound: 0,
        }
    }

    fn matches_label(&self, label: Option<&Label>) -> bool {
        match self.op {
            SelectorOp::In => label.is_some_and(|l| self.values.binary_search(&l.value).is_ok()),
            SelectorOp::NotIn => label.is_none_or(|l| self.values.binary_search(&l.value).is_err()),
            SelectorOp::Exists => label.is_some(),
            SelectorOp::DoesNotExist => label.is_none(),
            SelectorOp::Gt => label.and_then(|l| l.num).is_some_and(|n| n > self.bound),
            SelectorOp::Lt => label.and_then(|l| l.num).is_some_and(|n| n < self.bound),
        }
    }
}

/// A node selector term: all expressions and all field requirements must match. An empty term
/// matches nothing (Kubernetes semantics).
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub expressions: Box<[Requirement]>,
    /// `metadata.name` requirements (In/NotIn over node-name ids).
    pub fields: Box<[Requirement]>,
}

impl Term {
    pub fn matches(&self, node: &NodeMeta) -> bool {
        if self.expressions.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.expressions
            .iter()
            .all(|r| r.matches_label(node.label(r.key)))
            && self.fields.iter().all(|r| {
                let name = Label {
                    key: 0,
                    value: node.name_id,
                    num: None,
                };
                r.matches_label(Some(&name))
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toleration {
    /// `None`: empty key (with Exists: tolerates every key).
    pub key: Option<u32>,
    pub exists: bool,
    pub value: u32,
    /// `None`: every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != t.effect) {
            return false;
        }
        match self.key {
            None => self.exists,
            Some(k) if k != t.key => false,
            Some(_) => self.exists || self.value == t.value,
        }
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
    pub resource_claims: Box<[crate::dra::PodClaim]>,
    /// `spec.preemptionPolicy: Never`.
    pub preemption_never: bool,
    /// When it started (`status.startTime`, else its creation), Unix milliseconds: among
    /// preemption victims of equal priority the one that started last goes first.
    pub started_unix_ms: Option<i64>,
    /// Being evicted by a scheduler's preemption (`PodInput::preempted`).
    pub preempted: bool,
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

/// The per-node topology key: constraints keyed on it need no lane.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// Key of the taint kubectl cordon implies.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

pub fn compile_node(
    input: &NodeInput,
    interner: &mut Interner,
    registry: &mut ResourceRegistry,
) -> Result<CompiledNode, ModelError> {
    if input.name.is_empty() {
        return Err(ModelError::Empty { what: "node name" });
    }
    let mut labels: Vec<Label> = input
        .labels
        .iter()
        .map(|(k, v)| Label {
            key: interner.intern(k),
            value: interner.intern(v),
            num: v.parse().ok(),
        })
        .collect();
    labels.sort_by_key(|l| l.key);
    labels.dedup_by_key(|l| l.key);
    let taints = input
        .taints
        .iter()
        .map(|t| {
            Ok(Taint {
                key: interner.intern(&t.key),
                value: interner.intern(&t.value),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let mut allocatable = parse_resource_list(registry, &input.allocatable)?;
    // Allocatable defaults to capacity for resources it does not list.
    for (name, q) in &input.capacity {
        let slot = registry.slot(name)?;
        if !input.allocatable.iter().any(|(n, _)| n == name) {
            let amount = parse_scaled(name, q, ResourceRegistry::scale(slot))?;
            if amount > 0 {
                add_into(&mut allocatable, slot, amount);
            }
        } else {
            // Validate capacity too, even when allocatable wins.
            parse_scaled(name, q, ResourceRegistry::scale(slot))?;
        }
    }
    let name_id = interner.intern(&input.name);
    Ok(CompiledNode {
        meta: Arc::new(NodeMeta {
            name: interner.strs[name_id as usize].clone(),
            name_id,
            labels: labels.into(),
            taints: taints.into(),
            unschedulable: input.unschedulable,
            ready: input.ready,
        }),
        allocatable,
    })
}

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
/// for the resources they set (`pod_resources`); plus the pod overhead.
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
        pod_resources::apply(registry, side, pod, r, &overhead, &mut plain, &mut nonzero)?;
    }
    for &(s, a) in &overhead {
        add_into(&mut plain, s, a);
        add_into(&mut nonzero, s, a);
    }
    Ok((plain, nonzero))
}

/// Compile a node selector term (a PV's node affinity, a class's allowed topologies).
pub fn compile_node_term(
    term: &SelectorTermInput,
    interner: &mut Interner,
) -> Result<Term, ModelError> {
    compile_term(term, interner)
}

fn compile_term(term: &SelectorTermInput, interner: &mut Interner) -> Result<Term, ModelError> {
    let expressions = term
        .match_expressions
        .iter()
        .map(|r| compile_requirement(r, interner))
        .collect::<Result<Vec<_>, _>>()?;
    let fields = term
        .match_fields
        .iter()
        .map(|r| {
            if r.key != "metadata.name" {
                return Err(ModelError::FieldSelectorKey(r.key.clone()));
            }
            let req = compile_requirement(r, interner)?;
            if !matches!(req.op, SelectorOp::In | SelectorOp::NotIn) {
                return Err(ModelError::SelectorValues {
                    key: r.key.clone(),
                    op: req.op.name(),
                    why: "field selectors support only In and NotIn".into(),
                });
            }
            if req.values.len() != 1 {
                return Err(ModelError::SelectorValues {
                    key: r.key.clone(),
                    op: req.op.name(),
                    why: "metadata.name requires exactly one value".into(),
                });
            }
            Ok(req)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Term {
        expressions: expressions.into(),
        fields: fields.into(),
    })
}

fn compile_requirement(
    r: &SelectorRequirementInput,
    interner: &mut Interner,
) -> Result<Requirement, ModelError> {
    let op = SelectorOp::parse(&r.operator)?;
    let err = |why: &str| ModelError::SelectorValues {
        key: r.key.clone(),
        op: op.name(),
        why: why.into(),
    };
    if r.key.is_empty() {
        return Err(ModelError::Empty {
            what: "node selector requirement key",
        });
    }
    let mut bound = 0;
    match op {
        SelectorOp::In | SelectorOp::NotIn if r.values.is_empty() => {
            return Err(err("requires at least one value"));
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !r.values.is_empty() => {
            return Err(err("must not have values"));
        }
        SelectorOp::Gt | SelectorOp::Lt => {
            if r.values.len() != 1 {
                return Err(err("requires exactly one value"));
            }
            bound = r.values[0]
                .parse::<i64>()
                .map_err(|_| err(&format!("value {:?} is not an integer", r.values[0])))?;
        }
        _ => {}
    }
    let mut values: Vec<u32> = match op {
        SelectorOp::In | SelectorOp::NotIn => r.values.iter().map(|v| interner.intern(v)).collect(),
        _ => Vec::new(),
    };
    values.sort_unstable();
    values.dedup();
    Ok(Requirement {
        key: interner.intern(&r.key),
        op,
        values: values.into(),
        bound,
    })
}

pub(crate) fn compile_toleration(
    t: &TolerationInput,
    interner: &mut Interner,
) -> Result<Toleration, ModelError> {
    let exists = match t.operator.as_str() {
        "Exists" => true,
        "Equal" | "" => false,
        other => return Err(ModelError::TolerationOperator(other.to_owned())),
    };
    if exists && !t.value.is_empty() {
        return Err(ModelError::TolerationExistsWithValue {
            key: t.key.clone(),
            value: t.value.clone(),
        });
    }
    if t.key.is_empty() && !exists {
        return Err(ModelError::TolerationEmptyKey);
    }
    let effect = if t.effect.is_empty() {
        None
    } else {
        Some(TaintEffect::parse(&t.effect)?)
    };
    Ok(Toleration {
        key: if t.key.is_empty() {
            None
        } else {
            Some(interner.intern(&t.key))
        },
        exists,
        value: interner.intern(&t.value),
        effect,
    })
}

fn compile_port(p: &PortInput, interner: &mut Interner) -> Result<Option<HostPort>, ModelError> {
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
    if input.uid.is_empty() {
        return Err(ModelError::Empty { what: "pod uid" });
    }
    if input.name.is_empty() {
        return Err(ModelError::Empty { what: "pod name" });
    }
    if let Some(r) = &input.resources {
        pod_resources::validate(input, r)?;
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
    let labels = compile_labels(&input.labels, interner);
    let affinity = match &input.pod_affinity {
        Some(a) => pod_affinity::compile_pod_affinity(a, namespace, &labels, interner)?,
        None => None,
    };
    let spread = pod_affinity::compile_spread(&input.topology_spread, &labels, interner)?;
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
        crate::dra::compile_claims(&input.resource_claims)?
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
        info: Arc::new(PodInfo {
            namespace,
            labels,
            affinity,
            terminating: input.terminating,
            csi: Box::new([]),
            claims: claims.iter().map(|(c, _)| c.clone()).collect(),
        }),
        spread,
        lane: false,
        claims: claims.clone().into(),
        requests_unoffered,
        resource_claims,
        preemption_never: input.preemption_never,
        started_unix_ms: input.started_unix_ms.or(input.created_unix_ms),
        preempted: input.preempted,
    }
    .with_lane(Interner::HOSTNAME))
}

#[cfg(test)]
mod tests;
