//! The engine's compact object model and the validated conversions into it.
//!
//! Adapters describe nodes and pods with plain strings ([`NodeInput`], [`PodInput`]), the way
//! the Kubernetes API spells them. The cache compiles them ([`compile_node`], [`compile_pod`])
//! into forms built for scanning: resource names become dense slots ([`ResourceRegistry`]),
//! label keys and values, taint keys and node names become integers ([`Interner`]), requests
//! follow Kubernetes' effective-request rule (init containers, sidecars, overhead). Every
//! conversion validates its input and returns a [`ModelError`] naming the offending value.
//!
//! The files, each using only the ones before it (and this one):
//! - this file: what every part shares: [`ModelError`], the [`Interner`], resource slots and
//!   lists ([`ResourceRegistry`], [`ResourceList`]), and the re-exports that make up the
//!   model's API (`crate::model::X` whatever file `X` lives in);
//! - `quantity`: resource quantities;
//! - `node`: node compilation ([`NodeMeta`], [`compile_node`]);
//! - `selector`: selector compilation: node selector terms and tolerations ([`Term`],
//!   [`Toleration`]), for pods, volumes and devices;
//! - `pod_affinity`: pod labels, label selectors, pod (anti-)affinity, topology spread;
//! - `pod`: pod compilation ([`CompiledPod`], [`compile_pod`]; pod-level resources in
//!   `pod/resources.rs`).
//!
//! - `pod_claims`: the pod's `spec.resourceClaims` (which claims, from where), compiled with
//!   the pod; `dra` re-exports them at their old paths.
//!
//! Owns those types and touches nothing else of the engine: `dra` and `volumes` use the model,
//! never the other way round.

mod node;
mod pod;
mod pod_affinity;
pub mod pod_claims;
mod quantity;
mod selector;

pub use node::{
    CompiledNode, Label, NodeInput, NodeMeta, Taint, TaintEffect, TaintInput, compile_node,
};
pub use pod::{
    CompiledPod, ContainerInput, ContainerStatusInput, DEVICE_CLASS_PREFIX, ExtendedRequest,
    HostPort, NodeAffinityInput, PodInput, PodNames, PodPhase, PodResourcesInput, PodVolumeInput,
    PortInput, compile_pod, compile_pod_with, effective_requests, is_dra_extended_resource_name,
    parse_scheduling_priority,
};
pub use pod_affinity::{
    AffinityTerm, LabelOp, LabelReq, LabelSelector, LabelSelectorInput, NamespaceInput, Namespaces,
    PlainInfos, PodAffinity, PodAffinityInput, PodAffinityTermInput, PodInfo, SpreadConstraint,
    TopologySpreadInput, compile_labels, compile_other_selector, compile_pod_labels,
    compile_selector, label_value, mark_own_selector_keys,
};
pub use quantity::{MAX_AMOUNT, parse_scaled};
pub(crate) use selector::compile_toleration;
pub use selector::{
    Requirement, SelectorOp, SelectorRequirementInput, SelectorTermInput, Term, Toleration,
    TolerationInput, compile_node_term,
};

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
    /// `spec.resourceClaims` the API server would refuse (`pod_claims::compile_claims`).
    #[error("{0}")]
    ResourceClaim(String),
    /// Pod-level resources the API server would refuse, with its causes (`pod::resources`).
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
///
/// It also knows which label keys some label selector reads (`mark_selectable`): a pod's label
/// values are interned only for those keys, the others are kept as strings in its `PodInfo`
/// (`compile_pod_labels`), so labels no selector reads (a sandbox id, a Job's uid) are not
/// kept here for the life of the process. Label keys are always interned. The number of such keys is the label epoch
/// (`label_epoch`); `Cache::sync_labels` converts the pods compiled before a key became
/// selectable (`docs/constraints.md`, "Labels no selector reads").
#[derive(Debug)]
pub struct Interner {
    ids: crate::FastMap<Arc<str>, u32>,
    strs: Vec<Arc<str>>,
    /// Label keys some selector reads.
    selectable: crate::FastSet<u32>,
}

impl Default for Interner {
    fn default() -> Self {
        let mut me = Self {
            ids: crate::FastMap::default(),
            strs: Vec::new(),
            selectable: crate::FastSet::default(),
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

    /// Label key `key` is read by some label selector: pods compiled from now on intern their
    /// values for it. Never undone.
    pub fn mark_selectable(&mut self, key: u32) {
        self.selectable.insert(key);
    }

    pub fn is_selectable(&self, key: u32) -> bool {
        self.selectable.contains(&key)
    }

    /// How many label keys are selectable: grows whenever one becomes so.
    pub fn label_epoch(&self) -> u32 {
        u32::try_from(self.selectable.len()).expect("label keys fit the interner")
    }
}

/// The per-node topology key: constraints keyed on it need no lane.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// Key of the taint kubectl cordon implies.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

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

#[cfg(test)]
mod tests;
