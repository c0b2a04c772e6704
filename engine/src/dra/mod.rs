//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the ResourceClaims pods name, kept by the
//! driver (single writer), and the resolution of a pod's claims when it is handed off
//! ([`PodClaims`], carried by the task to the `DynamicResources` filter), as kube-scheduler's
//! DynamicResources plugin sees them in PreEnqueue and PreFilter.
//!
//! A pod names each claim directly (`resourceClaimName`) or through a template, for which the
//! resource-claim controller makes a claim owned by the pod and records its name in the pod's
//! `status.resourceClaimStatuses` (`resourceclaim.Name`). A claim not made yet, missing, being
//! deleted, or made for another pod holds the pod back with upstream's text.
//!
//! A claim being allocated for another pod (decided, not written yet), or asking for what
//! Magma does not implement (`ClaimInput::unsupported`), holds the pod back too. Otherwise the
//! claims go to the allocator (`allocator`) with the devices published at hand-off; the driver
//! decides the chosen node's devices again and assumes them (`Dra::assume`) until the written
//! allocation is seen. With the profile's DRA switch off
//! (`predicate.DynamicResourceAllocationEnable: false`) a pod with claims is never bound: it
//! stays pending with a `PodScheduled=False` condition that names the claim and says why. A pod
//! held back takes nothing from other pods (the filter rejects every node before any resource
//! is counted). The protocol: `docs/dra.md`.
//!
//! Owns only this view of the claims; it touches nothing else. A bad object is reported without
//! changing how others are handled.

pub mod allocator;
pub mod capacity;
pub mod cel;
pub mod devices;
pub mod extended;

use crate::event::{self, Events};
use crate::model::PodNames;
pub use crate::model::pod_claims::{ClaimSource, PodClaim, PodClaimInput, compile_claims};
use crate::model::{Interner, ModelError, Term};
use crate::resource_version::resource_version_order;
use devices::DevId;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// One request or subrequest of a claim (`exactly`, or an entry of `firstAvailable`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExactInput {
    /// The subrequest's name (empty for `exactly`).
    pub name: String,
    pub class: String,
    /// `selectors[].cel.expression`.
    pub selectors: Vec<String>,
    /// `allocationMode: All`.
    pub all: bool,
    /// `count` (ExactCount; 1 when not set).
    pub count: i64,
    pub admin_access: bool,
    pub tolerations: Vec<crate::model::TolerationInput>,
    /// `capacity.requests`: (capacity name, quantity).
    pub capacity: Vec<(String, String)>,
}

/// `spec.devices.requests[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInput {
    pub name: String,
    pub exactly: Option<ExactInput>,
    pub first_available: Vec<ExactInput>,
}

/// `spec.devices.constraints[]`: `matchAttribute`, or `distinctAttribute` when `distinct`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConstraintInput {
    /// Empty: every request.
    pub requests: Vec<String>,
    /// The attribute (`domain/name`).
    pub match_attribute: String,
    /// A `distinctAttribute` constraint: the devices' values all differ.
    pub distinct: bool,
}

/// A share of a device that allows multiple allocations, in an allocation result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Share {
    /// `shareID`: `None` in an allocation Magma decided until the adapter writes it (it
    /// assigns a new UID).
    pub id: Option<String>,
    /// `consumedCapacity`: (capacity name, quantity).
    pub consumed: Vec<(String, String)>,
}

/// One device of `status.allocation.devices.results[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocatedInput {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub admin_access: bool,
    /// `shareID` and `consumedCapacity`: set for a device that allows multiple allocations.
    pub share: Option<Share>,
}

/// `status.allocation`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocationInput {
    pub devices: Vec<AllocatedInput>,
    /// `nodeSelector`: where pods using the claim may run (`None`: anywhere).
    pub nodes: Option<Vec<crate::model::SelectorTermInput>>,
}

/// A ResourceClaim as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimInput {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The controller owner's UID (`metadata.ownerReferences[controller=true]`).
    pub owner_uid: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `spec.devices`.
    pub requests: Vec<RequestInput>,
    pub constraints: Vec<ConstraintInput>,
    /// `status.allocation`.
    pub allocation: Option<AllocationInput>,
    /// `status.reservedFor[].uid`.
    pub reserved_for: Vec<String>,
    /// What Magma cannot allocate as the claim asks (a feature it does not implement), said by
    /// the adapter: its pods are held back with this text while the claim is unallocated.
    pub unsupported: Option<String>,
    /// `metadata.resourceVersion`: a version older than the one held is not applied (the
    /// adapter shows the engine its own writes as they are answered, ahead of the watch).
    pub resource_version: String,
    /// Annotated `resource.kubernetes.io/extended-resource-claim: "true"`: the claim a
    /// scheduler made for its owner pod's extended resources (`extended`).
    pub extended: bool,
}

/// A change to the ResourceClaims, ResourceSlices or DeviceClasses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraInput {
    Claim(ClaimInput),
    ClaimDelete {
        namespace: String,
        name: String,
    },
    /// A relist: the complete set.
    ClaimReset(Vec<ClaimInput>),
    Slice(devices::SliceInput),
    SliceDelete(String),
    SliceReset(Vec<devices::SliceInput>),
    Class(devices::ClassInput),
    ClassDelete(String),
    ClassReset(Vec<devices::ClassInput>),
}

/// Why no node can take a pod because of its claims. A claim of the pod is named by its
/// position in the pod's `spec.resourceClaims` (`ClaimAt`), the pod by the pod the reason is
/// rendered for (`PodNames`): neither is interned, as both are the pod's own (a template's
/// claim name is unique to its pod, and would stay in the interner for good).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// The profile switches DRA off: (the pod claim).
    SwitchedOff(ClaimAt),
    /// A template's claim is not made yet (`pod "<namespace>/<pod>": ...`).
    NotCreated,
    /// `resourceclaim.resource.k8s.io "X" not found`.
    Missing(ClaimAt),
    /// `resourceclaim "X" is being deleted`.
    Deleting(ClaimAt),
    /// A template's claim owned by someone else (`<namespace>/<claim>`, `<namespace>/<pod>`).
    NotOwner(ClaimAt),
    /// A claim that cannot be allocated anywhere as it is (a missing class, a request Magma
    /// does not support, a selector failing on a device): the whole message is
    /// `PodClaims::invalid`, rendered from `PodNames::claims_invalid` (not interned: it names
    /// the pod's own claim, and a bad template would leave one string per pod for good).
    Invalid,
    /// `resource claim <ns>/<name> is in the process of being allocated`: another pod's
    /// decision gave it devices that are not written yet.
    Allocating(ClaimAt),
    /// On a node: `cannot allocate all claims`.
    CannotAllocate,
    /// On a node: `resourceclaim not available on the node` (an allocated claim does not
    /// allow it).
    Unavailable,
    /// On a node: `invalid resource pools were encountered` (devices that could serve are in
    /// pools upstream skips as invalid).
    InvalidPools,
    /// On every node: `cannot schedule extended resource claim`: the claim made for the pod's
    /// extended resources by an earlier attempt exists (its bind failed); it is deleted
    /// (PostFilter, `Dra::deallocatable`) and the pod tried again.
    StaleExtended,
}

/// One of a pod's claims, by its position in the pod's `spec.resourceClaims`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimAt(pub u32);

impl ClaimAt {
    /// The pod claim's name (`spec.resourceClaims[].name`).
    fn pod_claim<'a>(self, pod: &PodNames<'a>) -> &'a str {
        pod.resource_claims
            .get(self.0 as usize)
            .map_or("", |pc| &*pc.name)
    }

    /// The ResourceClaim's name: the one named, or the one made from the template.
    fn claim<'a>(self, pod: &PodNames<'a>) -> &'a str {
        match pod
            .resource_claims
            .get(self.0 as usize)
            .map(|pc| &pc.source)
        {
            Some(ClaimSource::Named(n) | ClaimSource::Template(Some(Some(n)))) => n,
            _ => "",
        }
    }
}

impl Blocked {
    /// Upstream's text (kube-scheduler's DynamicResources PreEnqueue, PreFilter and Filter),
    /// and Magma's where it has no counterpart (the switch), for `pod`, the pod it blocks.
    pub fn message(&self, pod: &PodNames<'_>) -> String {
        let ns = pod.namespace;
        match self {
            Blocked::SwitchedOff(c) => format!(
                "pod resource claim \"{}\": dynamic resource allocation is switched off in this \
                 scheduler profile (predicate.DynamicResourceAllocationEnable: false)",
                c.pod_claim(pod)
            ),
            Blocked::NotCreated => {
                format!("pod \"{ns}/{}\": ResourceClaim not created yet", pod.name)
            }
            Blocked::Missing(c) => {
                format!(
                    "resourceclaim.resource.k8s.io \"{}\" not found",
                    c.claim(pod)
                )
            }
            Blocked::Deleting(c) => format!("resourceclaim \"{}\" is being deleted", c.claim(pod)),
            Blocked::NotOwner(c) => format!(
                "ResourceClaim {ns}/{} was not created for pod {ns}/{} (pod is not owner)",
                c.claim(pod),
                pod.name
            ),
            Blocked::Invalid => pod.claims_invalid.unwrap_or_default().to_owned(),
            Blocked::Allocating(c) => format!(
                "resource claim {ns}/{} is in the process of being allocated",
                c.claim(pod)
            ),
            Blocked::CannotAllocate => allocator::NoFit::CannotAllocate.message().to_owned(),
            Blocked::Unavailable => allocator::NoFit::Unavailable.message().to_owned(),
            Blocked::InvalidPools => allocator::NoFit::InvalidPools.message().to_owned(),
            Blocked::StaleExtended => "cannot schedule extended resource claim".to_owned(),
        }
    }

    /// The cluster events that can unblock it. A change to one of the pod's own claims
    /// (made, allocated, released, deleted) wakes it by name (`Core::claim_waiters`) whatever
    /// the reason; a new profile (the switch) requeues every waiting pod anyway.
    pub fn wake(&self) -> Events {
        match self {
            Blocked::CannotAllocate | Blocked::InvalidPools => {
                event::DEVICES_FREED
                    | event::DEVICES_CHANGED
                    | event::NODE_ADDED
                    | event::NODE_LABELS_CHANGED
            }
            Blocked::Unavailable => event::NODE_ADDED | event::NODE_LABELS_CHANGED,
            // Its deletion frees what it holds, or changes nothing the pod needs (woken by
            // name: `Core::claim_waiters`).
            Blocked::StaleExtended => event::DEVICES_FREED,
            // A missing class, or a selector failing on some device.
            Blocked::Invalid => event::DEVICES_CHANGED,
            Blocked::SwitchedOff(_)
            | Blocked::NotCreated
            | Blocked::Missing(_)
            | Blocked::Deleting(_)
            | Blocked::NotOwner(_)
            | Blocked::Allocating(_) => 0,
        }
    }

    /// Decided before any node is looked at (upstream's PreEnqueue and PreFilter): the driver
    /// holds the pod back itself (`Core::hold_back`), no worker tries it.
    pub fn before_nodes(&self) -> bool {
        !matches!(
            self,
            Blocked::CannotAllocate
                | Blocked::Unavailable
                | Blocked::InvalidPools
                | Blocked::StaleExtended
        )
    }

    /// Upstream's PreEnqueue: the pod never enters activeQ, so it is not an attempt (no
    /// backoff when its claim appears) and PostFilter (preemption) does not run for it.
    pub fn pre_enqueue(&self) -> bool {
        matches!(
            self,
            Blocked::SwitchedOff(_)
                | Blocked::NotCreated
                | Blocked::Missing(_)
                | Blocked::Deleting(_)
                | Blocked::NotOwner(_)
        )
    }
}

/// The claims a change touched: the pods using them are woken by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    None,
    One(ClaimKey),
    /// A relist.
    All,
}

/// The claims a pod names (`<namespace>`, claim name), as far as they are known: a template's
/// claim once the pod's status names it.
pub fn claim_keys<'a>(
    namespace: &'a Arc<str>,
    claims: &'a [PodClaim],
) -> impl Iterator<Item = ClaimKey> + 'a {
    claims.iter().filter_map(move |pc| match &pc.source {
        ClaimSource::Named(n) | ClaimSource::Template(Some(Some(n))) => {
            Some((namespace.clone(), n.clone()))
        }
        ClaimSource::Template(_) => None,
    })
}

/// A pod's claims, resolved when it is handed off: what holds it back on every node, or the
/// claims the allocator works on (`allocator`), with the devices published at hand-off.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    pub blocked: Option<Blocked>,
    pub claims: Vec<allocator::PodClaim>,
    /// The devices and what was in use when the claims were resolved: what the filter
    /// allocates from (the driver decides the chosen node again against what it holds then,
    /// `Cache::allocate_claims`).
    pub devices: Option<Arc<DraSnapshot>>,
    /// Selectors that failed on some device (`Inventory::matching`): the device's node (`None`:
    /// more than one node reaches it) and the error. The cache holds the pod back when such a
    /// device is on a node of the cluster (`Cache::resolve_claims`), as upstream's Filter error.
    pub selector_errors: Vec<(Option<u32>, Arc<str>)>,
    /// The message of `Blocked::Invalid`, when that is what blocks the pod.
    pub invalid: Option<Arc<str>>,
    /// Extended resources a class provides (`extended`): the special claim is the last of
    /// `claims`, and on each node only the resources the node does not offer are allocated.
    pub extended: Option<Arc<extended::Extended>>,
}

impl PodClaims {
    /// `pod`'s names with what this resolution adds to them (the text of [`Blocked::Invalid`]).
    pub fn names<'a>(&'a self, pod: PodNames<'a>) -> PodNames<'a> {
        PodNames {
            claims_invalid: self.invalid.as_deref(),
            ..pod
        }
    }

    /// The claims to allocate on a node whose allocatable of a resource is `alloc(slot)`.
    pub fn for_node(
        &self,
        alloc: impl Fn(crate::model::Slot) -> i64,
    ) -> Cow<'_, [allocator::PodClaim]> {
        match &self.extended {
            None => Cow::Borrowed(&self.claims),
            Some(e) => e.for_node(&self.claims, e.provided(alloc)),
        }
    }
}

impl PartialEq for PodClaims {
    fn eq(&self, o: &Self) -> bool {
        self.blocked == o.blocked && self.claims == o.claims
    }
}

/// An allocation this scheduler decided and has not seen written yet.
#[derive(Debug, Clone)]
struct Assumed {
    pod: Arc<str>,
    /// Devices taken whole.
    devices: Vec<DevId>,
    /// Shares of devices that allow multiple allocations: what each consumes.
    shares: Vec<(DevId, Box<[i128]>)>,
    nodes: Option<Arc<[Term]>>,
}

impl Assumed {
    /// Every device it takes or shares.
    fn ids(&self) -> Vec<DevId> {
        let mut ids = self.devices.clone();
        ids.extend(self.shares.iter().map(|(id, _)| *id));
        ids
    }
}

/// Count device `id` in use: taken whole, or a share consuming `share`; its counters with the
/// first share.
fn take(
    view: &devices::DevicesView,
    in_use: &mut allocator::InUse,
    id: DevId,
    share: Option<&[i128]>,
) {
    let first = match share {
        Some(amount) => !in_use.add_share(id, amount),
        None => {
            in_use.insert(id);
            true
        }
    };
    if share.is_some()
        && let Some(Some(d)) = view.devices.get(id as usize)
        && let Some(used) = in_use.shared(id)
        && d.capacity.iter().zip(used).any(|(c, u)| {
            let least = capacity::least_share(c);
            least > 0 && c.value - u < least
        })
    {
        in_use.exhaust(id);
    }
    if first && let Some(Some(d)) = view.devices.get(id as usize) {
        for &(k, amount) in d.counters.iter() {
            in_use.consume(k, amount);
        }
        // The devices sharing these counters that no longer fit: the Filter skips them.
        for &(k, _) in d.counters.iter() {
            for &other in view.by_counter.get(k as usize).into_iter().flatten() {
                let Some(Some(o)) = view.devices.get(other as usize) else {
                    continue;
                };
                if o.counters.iter().any(|&(c, need)| {
                    in_use.used(c) + need > view.counters.get(c as usize).copied().unwrap_or(0)
                }) {
                    in_use.counters_out(other);
                }
            }
        }
    }
}

/// A written allocation: its devices (resolved when slices name them) and nodes.
type Written = (Vec<AllocatedInput>, Option<Arc<[Term]>>);

/// A claim, by (namespace, name).
pub type ClaimKey = (Arc<str>, Arc<str>);

#[derive(Debug, Clone)]
struct Claim {
    uid: Arc<str>,
    owner: Option<Arc<str>>,
    deleting: bool,
    requests: Vec<RequestInput>,
    constraints: Vec<ConstraintInput>,
    unsupported: Option<Arc<str>>,
    resource_version: Arc<str>,
    /// The written allocation: its devices (resolved when slices name them) and nodes.
    allocation: Option<Written>,
    assumed: Option<Assumed>,
    /// `status.reservedFor` names some consumer.
    reserved: bool,
    /// The claim made for its owner's extended resources (or the engine's stand-in for it).
    extended: bool,
}

impl Claim {
    fn is_allocated(&self) -> bool {
        self.allocation.is_some() || self.assumed.is_some()
    }

    fn nodes(&self) -> Option<Arc<[Term]>> {
        match (&self.allocation, &self.assumed) {
            (Some((_, n)), _) => n.clone(),
            (None, Some(a)) => a.nodes.clone(),
            (None, None) => None,
        }
    }
}

/// A claim to deallocate: allocated, reserved for nobody, named by a pod that fits nowhere
/// (upstream's DynamicResources PostFilter). The write is conditional on `resource_version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deallocation {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub resource_version: Arc<str>,
    /// Delete the claim instead (the claim an earlier attempt made for the pod's extended
    /// resources, upstream's PostFilter `deleteClaim`: its finalizer removed, then deleted).
    pub delete: bool,
}

/// What a change did (`Dra::apply`).
#[derive(Debug)]
pub struct Applied {
    pub events: Events,
    pub errors: Vec<ModelError>,
    /// Nodes whose devices a claim allocated by someone else now takes.
    pub taken_nodes: Vec<u32>,
    pub touched: Touched,
}

/// The ResourceClaims, devices and classes (see the module doc).
#[derive(Debug, Default)]
pub struct Dra {
    claims: HashMap<(Arc<str>, Arc<str>), Claim>,
    pub inventory: devices::Inventory,
    /// Devices allocated or reserved by some claim, as published.
    in_use: Arc<allocator::InUse>,
    in_use_dirty: bool,
    /// The claims each pod's assumptions are on (by pod UID).
    assumed_by: HashMap<Arc<str>, Vec<ClaimKey>>,
    /// The claim made for each pod's extended resources (by owner UID).
    extended_claims: HashMap<Arc<str>, ClaimKey>,
}

/// What workers read of DRA: the devices and what is in use (immutable, with the snapshot).
#[derive(Debug, Default)]
pub struct DraSnapshot {
    pub devices: Arc<devices::DevicesView>,
    pub in_use: Arc<allocator::InUse>,
}

fn key(ns: &str, name: &str) -> (Arc<str>, Arc<str>) {
    (Arc::from(ns), Arc::from(name))
}

/// A claim an allocation gives devices to, as the adapter writes it (`status.allocation`,
/// `status.reservedFor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAllocation {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    /// The devices to write, `None` when the claim is allocated already (only the pod's
    /// reservation is added).
    pub devices: Option<Vec<AllocatedInput>>,
    /// The allocation's node selector (one term), as upstream's allocator makes it: the node
    /// by `metadata.name` when a device is local to it, else the requirements of the selectors
    /// of the slices (or devices) given, `None` when every device is available on every node.
    pub node_selector: Option<crate::model::SelectorTermInput>,
    /// The claim for the pod's extended resources, to create before its allocation is written
    /// (`name` is then the engine's stand-in, `extended::special_name`).
    pub create: Option<extended::NewClaim>,
}

impl Dra {
    /// Apply a change. Returns the events it amounts to, the nodes whose devices a claim
    /// allocated by someone else now takes (their bind versions must move), and the claims it
    /// touched (their pods are woken by name).
    pub fn apply(&mut self, input: DraInput, interner: &mut Interner) -> Applied {
        let mut errors = Vec::new();
        let mut taken_nodes = Vec::new();
        let (events, touched) = match input {
            DraInput::Claim(c) => {
                let k = key(&c.namespace, &c.name);
                let (taken, freed) = self.insert(c, interner, &mut errors);
                taken_nodes = taken;
                let events = if freed { event::DEVICES_FREED } else { 0 };
                (events, Touched::One(k))
            }
            DraInput::ClaimDelete { namespace, name } => {
                let k = key(&namespace, &name);
                let mut events = 0;
                if let Some(c) = self.claims.remove(&k) {
                    if c.is_allocated() {
                        self.in_use_dirty = true;
                    }
                    // A stale claim for extended resources gone lets its pod be tried again.
                    if c.is_allocated() || c.extended {
                        events = event::DEVICES_FREED;
                    }
                    if c.extended
                        && let Some(owner) = &c.owner
                        && self.extended_claims.get(owner) == Some(&k)
                    {
                        self.extended_claims.remove(owner);
                    }
                }
                (events, Touched::One(k))
            }
            DraInput::ClaimReset(all) => {
                // Our assumptions survive a relist: their writes are still in flight. So do the
                // stand-ins for claims not created yet.
                let mut specials = Vec::new();
                let assumed: HashMap<_, _> = self
                    .claims
                    .drain()
                    .filter_map(|(k, c)| {
                        if extended::is_special(&k.1) {
                            specials.push((k, c));
                            return None;
                        }
                        c.assumed.map(|a| (k, a))
                    })
                    .collect();
                self.claims.extend(specials);
                self.extended_claims.clear();
                for c in all {
                    taken_nodes.extend(self.insert(c, interner, &mut errors).0);
                }
                for (k, a) in assumed {
                    if let Some(c) = self.claims.get_mut(&k)
                        && c.allocation.is_none()
                    {
                        c.assumed = Some(a);
                    }
                }
                self.in_use_dirty = true;
                (event::DEVICES_FREED, Touched::All)
            }
            DraInput::Slice(s) => {
                errors.extend(self.inventory.apply_slice(s, interner).err());
                self.in_use_dirty = true;
                (event::DEVICES_CHANGED, Touched::None)
            }
            DraInput::SliceDelete(name) => {
                self.inventory.remove_slice(&name);
                self.in_use_dirty = true;
                (event::DEVICES_CHANGED, Touched::None)
            }
            DraInput::SliceReset(all) => {
                errors.extend(self.inventory.reset_slices(all, interner));
                self.in_use_dirty = true;
                (event::DEVICES_CHANGED, Touched::None)
            }
            DraInput::Class(c) => {
                self.inventory.apply_class(c);
                (event::DEVICES_CHANGED, Touched::None)
            }
            DraInput::ClassDelete(name) => {
                self.inventory.remove_class(&name);
                (event::DEVICES_CHANGED, Touched::None)
            }
            DraInput::ClassReset(all) => {
                self.inventory.reset_classes(all);
                (event::DEVICES_CHANGED, Touched::None)
            }
        };
        Applied {
            events,
            errors,
            taken_nodes,
            touched,
        }
    }

    fn insert(
        &mut self,
        c: ClaimInput,
        interner: &mut Interner,
        errors: &mut Vec<ModelError>,
    ) -> (Vec<u32>, bool) {
        let k = key(&c.namespace, &c.name);
        // An older version than the one held (the watch delivering what a write of ours has
        // already shown us) changes nothing.
        if let Some(o) = self.claims.get(&k)
            && *o.uid == *c.uid
            && resource_version_order(&c.resource_version, &o.resource_version)
                .is_some_and(|ord| ord.is_lt())
        {
            return (Vec::new(), false);
        }
        let mut old = self.claims.remove(&k);
        if c.extended
            && let Some(owner) = c.owner_uid.as_deref().filter(|o| !o.is_empty())
        {
            let owner: Arc<str> = Arc::from(owner);
            // The claim this scheduler is creating for the pod: the devices assumed for its
            // stand-in are now assumed for it.
            if old.is_none() {
                let stand_in = (k.0.clone(), extended::special_name(&owner));
                if let Some(s) = self.claims.remove(&stand_in) {
                    if let Some(keys) = self.assumed_by.get_mut(&owner) {
                        for x in keys.iter_mut().filter(|x| **x == stand_in) {
                            *x = k.clone();
                        }
                    }
                    old = Some(s);
                }
            }
            self.extended_claims.insert(owner, k.clone());
        }
        let allocation = match &c.allocation {
            None => None,
            Some(a) => {
                let nodes = match &a.nodes {
                    None => None,
                    Some(terms) => match terms
                        .iter()
                        .map(|t| crate::model::compile_node_term(t, interner))
                        .collect::<Result<Vec<_>, _>>()
                    {
                        Ok(t) => Some(Arc::from(t)),
                        Err(e) => {
                            errors.push(e);
                            None
                        }
                    },
                };
                Some((a.devices.clone(), nodes))
            }
        };
        // Devices newly taken by an allocation we did not decide: the nodes they belong to
        // restrict (a decision made before must not be claimed).
        let ours: Vec<DevId> = old
            .as_ref()
            .and_then(|o| o.assumed.as_ref())
            .map(Assumed::ids)
            .unwrap_or_default();
        let had = old.as_ref().is_some_and(|o| o.allocation.is_some());
        let mut taken_nodes = Vec::new();
        if let Some((devs, _)) = &allocation
            && !had
        {
            for d in devs {
                if let Some(id) = self.inventory.id(&d.driver, &d.pool, &d.device)
                    && !ours.contains(&id)
                    && let Some(dev) = self.inventory.device(id)
                    && let devices::Reach::Node(n) = dev.reach
                {
                    taken_nodes.push(n);
                }
            }
        }
        // The allocation written is the one assumed (our own write seen back), or the claim
        // is unchanged in what it takes: what is in use stays as published.
        let same_devices = |o: &Claim| match (&o.allocation, &allocation, &o.assumed) {
            (None, None, _) => true,
            (Some((a, _)), Some((b, _)), _) => a == b,
            (None, Some((b, _)), Some(a)) => {
                let mut written: Vec<DevId> = b
                    .iter()
                    .filter(|d| !d.admin_access)
                    .filter_map(|d| self.inventory.id(&d.driver, &d.pool, &d.device))
                    .collect();
                let mut assumed = a.ids();
                written.sort_unstable();
                assumed.sort_unstable();
                written == assumed
            }
            _ => false,
        };
        // A claim new to us takes devices only if it comes allocated.
        let unchanged = match &old {
            Some(o) => same_devices(o),
            None => allocation.is_none(),
        };
        // Devices it held (written or assumed) are given back.
        let freed = !unchanged
            && old
                .as_ref()
                .is_some_and(|o| o.allocation.is_some() || o.assumed.is_some());
        // Our assumption ends once the allocation is written (or the claim's spec changed).
        let assumed = old.and_then(|o| o.assumed).filter(|_| allocation.is_none());
        self.claims.insert(
            k,
            Claim {
                uid: Arc::from(c.uid.as_str()),
                owner: c.owner_uid.filter(|o| !o.is_empty()).map(Arc::from),
                deleting: c.deleting,
                requests: c.requests,
                constraints: c.constraints,
                unsupported: c.unsupported.map(|u| Arc::from(u.as_str())),
                resource_version: Arc::from(c.resource_version.as_str()),
                allocation,
                assumed,
                reserved: !c.reserved_for.is_empty(),
                extended: c.extended,
            },
        );
        self.in_use_dirty |= !unchanged;
        (taken_nodes, freed)
    }

    /// The published DRA view, rebuilt when something changed.
    pub fn snapshot(&mut self) -> Arc<DraSnapshot> {
        let devices = self.inventory.view();
        if self.in_use_dirty {
            self.in_use_dirty = false;
            let mut in_use = allocator::InUse::default();
            for c in self.claims.values() {
                if let Some((devs, _)) = &c.allocation {
                    for d in devs {
                        let Some(id) = self.inventory.id(&d.driver, &d.pool, &d.device) else {
                            continue;
                        };
                        // Admin access takes nothing.
                        if d.admin_access {
                            continue;
                        }
                        match (&d.share, devices.devices.get(id as usize)) {
                            (Some(share), Some(Some(dev))) => {
                                let amount = capacity::read_consumed(
                                    &dev.capacity,
                                    &dev.driver,
                                    &share.consumed,
                                );
                                take(&devices, &mut in_use, id, Some(&amount));
                            }
                            _ => take(&devices, &mut in_use, id, None),
                        }
                    }
                } else if let Some(a) = &c.assumed {
                    for &id in &a.devices {
                        take(&devices, &mut in_use, id, None);
                    }
                    for (id, amount) in &a.shares {
                        take(&devices, &mut in_use, *id, Some(amount));
                    }
                }
            }
            self.in_use = Arc::new(in_use);
        }
        Arc::new(DraSnapshot {
            devices,
            in_use: self.in_use.clone(),
        })
    }

    /// Resolve a pod's claims (`foreachPodResourceClaim`, then the requests): the first that
    /// holds the pod back, or the claims for the allocator. `enabled`: the profile's DRA switch.
    pub fn resolve(
        &mut self,
        namespace: &str,
        pod_uid: &str,
        claims: &[PodClaim],
        enabled: bool,
        interner: &mut Interner,
    ) -> PodClaims {
        let mut out = PodClaims::default();
        for (at, pc) in claims.iter().enumerate() {
            let at = ClaimAt(at as u32);
            if !enabled {
                out.blocked = Some(Blocked::SwitchedOff(at));
                return out;
            }
            let (name, must_own) = match &pc.source {
                ClaimSource::Named(n) => (n.clone(), false),
                ClaimSource::Template(None) => {
                    out.blocked = Some(Blocked::NotCreated);
                    return out;
                }
                // The controller decided no claim is needed.
                ClaimSource::Template(Some(None)) => continue,
                ClaimSource::Template(Some(Some(n))) => (n.clone(), true),
            };
            let Some(c) = self.claims.get(&key(namespace, &name)) else {
                out.blocked = Some(Blocked::Missing(at));
                return out;
            };
            if c.deleting {
                out.blocked = Some(Blocked::Deleting(at));
                return out;
            }
            if must_own && c.owner.as_deref() != Some(pod_uid) {
                out.blocked = Some(Blocked::NotOwner(at));
                return out;
            }
            let uid = c.uid.clone();
            // Another pod's decision is allocating it (its PreBind has not written the
            // allocation yet): wait for the allocation, as upstream's PreFilter does.
            if c.allocation.is_none() && c.assumed.as_ref().is_some_and(|a| *a.pod != *pod_uid) {
                out.blocked = Some(Blocked::Allocating(at));
                return out;
            }
            if !c.is_allocated()
                && let Some(why) = &c.unsupported
            {
                out.invalid = Some(why.clone());
                out.blocked = Some(Blocked::Invalid);
                return out;
            }
            if c.is_allocated() {
                out.claims.push(allocator::PodClaim {
                    namespace: Arc::from(namespace),
                    name: name.clone(),
                    uid,
                    state: allocator::ClaimState::Allocated { nodes: c.nodes() },
                });
                continue;
            }
            let (requests, constraints) = (c.requests.clone(), c.constraints.clone());
            match self.compile_requests(
                namespace,
                &name,
                &requests,
                &constraints,
                interner,
                &mut out.selector_errors,
            ) {
                Ok((requests, constraints)) => {
                    out.claims.push(allocator::PodClaim {
                        namespace: Arc::from(namespace),
                        name,
                        uid,
                        state: allocator::ClaimState::Unallocated {
                            requests,
                            constraints,
                        },
                    });
                }
                Err(message) => {
                    out.invalid = Some(Arc::from(message));
                    out.blocked = Some(Blocked::Invalid);
                    return out;
                }
            }
        }
        out
    }

    /// A claim's requests for the allocator: each alternative's candidate devices (the
    /// class's and the request's selectors, memoised).
    #[allow(clippy::type_complexity)]
    fn compile_requests(
        &mut self,
        namespace: &str,
        claim: &str,
        requests: &[RequestInput],
        constraints: &[ConstraintInput],
        interner: &mut Interner,
        errors: &mut Vec<(Option<u32>, Arc<str>)>,
    ) -> Result<(Box<[allocator::Request]>, Box<[allocator::Constraint]>), String> {
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            let subs: Vec<&ExactInput> = match (&r.exactly, r.first_available.is_empty()) {
                (Some(e), true) => vec![e],
                (None, false) => r.first_available.iter().collect(),
                _ => {
                    return Err(format!(
                        "resource claim {namespace}/{claim}, request {}: unknown request type",
                        r.name
                    ));
                }
            };
            let mut alternatives = Vec::with_capacity(subs.len());
            for e in subs {
                let name: Arc<str> = if e.name.is_empty() {
                    Arc::from(r.name.as_str())
                } else {
                    Arc::from(format!("{}/{}", r.name, e.name).as_str())
                };
                if e.class.is_empty() {
                    return Err(format!("request {name}: unsupported request type"));
                }
                let Some(class) = self.inventory.class(&e.class).cloned() else {
                    // Upstream's PreFilter text (a subrequest is `request <req>/<sub>`).
                    return Err(format!(
                        "request {name}: device class {} does not exist",
                        e.class
                    ));
                };
                let mut selectors: Vec<Arc<str>> = class.to_vec();
                selectors.extend(e.selectors.iter().map(|s| Arc::from(s.as_str())));
                // A selector that fails on some device (does not compile, reads a missing
                // attribute) holds the pod back, as upstream's Filter error does: binding it
                // elsewhere would hide the problem.
                let capacity: Arc<[(Arc<str>, i128)]> = e
                    .capacity
                    .iter()
                    .map(|(n, q)| {
                        crate::model::parse_scaled("capacity", q, 1000)
                            .map(|m| (Arc::from(n.as_str()), i128::from(m)))
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|err| format!("claim {namespace}/{claim}, request {name}: {err}"))?
                    .into();
                let m = self.inventory.serving(&selectors, &capacity);
                for (id, e) in m.errors.iter() {
                    let node = self.inventory.device(*id).and_then(|d| match d.reach {
                        devices::Reach::Node(n) => Some(n),
                        _ => None,
                    });
                    errors.push((node, e.clone()));
                }
                let candidates = m.devices;
                let count = if e.all {
                    allocator::Count::All
                } else {
                    allocator::Count::Exact(u32::try_from(e.count.max(1)).unwrap_or(u32::MAX))
                };
                let tolerations = e
                    .tolerations
                    .iter()
                    .map(|t| crate::model::compile_toleration(t, interner))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|err| format!("claim {namespace}/{claim}, request {name}: {err}"))?;
                alternatives.push(allocator::Alternative {
                    name,
                    candidates,
                    consumes: m.consumes,
                    count,
                    admin: e.admin_access,
                    tolerations: tolerations.into(),
                    capacity,
                });
            }
            out.push(allocator::Request {
                name: Arc::from(r.name.as_str()),
                alternatives: alternatives.into(),
            });
        }
        // Upstream refuses a claim whose requests need more devices than an allocation holds
        // (each request at its smallest alternative; `All` counts one here).
        let least: usize = out
            .iter()
            .map(|r: &allocator::Request| {
                r.alternatives
                    .iter()
                    .map(|a| match a.count {
                        allocator::Count::Exact(n) => n as usize,
                        allocator::Count::All => 1,
                    })
                    .min()
                    .unwrap_or(0)
            })
            .sum();
        if least > allocator::MAX_RESULTS {
            return Err(format!(
                "claim {namespace}/{claim}: exceeds the claim limit of {} devices",
                allocator::MAX_RESULTS
            ));
        }
        let constraints = constraints
            .iter()
            .map(|c| allocator::Constraint {
                requests: c.requests.iter().map(|r| Arc::from(r.as_str())).collect(),
                attribute: Arc::from(c.match_attribute.as_str()),
                distinct: c.distinct,
            })
            .collect();
        Ok((out.into(), constraints))
    }

    /// Assume the devices `given` (the allocator's answer for the pod `pod` on `node`) for its
    /// claims; returns what the adapter writes for each claim the pod uses.
    pub fn assume(
        &mut self,
        pod: &Arc<str>,
        claims: &[allocator::PodClaim],
        given: &allocator::Allocation,
        node: &crate::model::NodeMeta,
        interner: &mut Interner,
    ) -> Vec<ClaimAllocation> {
        let view = self.inventory.view();
        let mut out = Vec::with_capacity(claims.len());
        for (c, g) in claims.iter().zip(given) {
            if extended::is_special(&c.name) {
                // The stand-in holds the devices until the claim is created (`insert`).
                self.claims
                    .entry((c.namespace.clone(), c.name.clone()))
                    .or_insert_with(|| Claim {
                        uid: c.uid.clone(),
                        owner: Some(pod.clone()),
                        deleting: false,
                        requests: Vec::new(),
                        constraints: Vec::new(),
                        unsupported: None,
                        resource_version: Arc::from(""),
                        allocation: None,
                        assumed: None,
                        reserved: false,
                        extended: true,
                    });
            }
            let Some(entry) = self.claims.get_mut(&key(&c.namespace, &c.name)) else {
                continue;
            };
            let mut node_selector = None;
            let devices = match c.state {
                allocator::ClaimState::Allocated { .. } => None,
                allocator::ClaimState::Unallocated { .. } => {
                    let written: Vec<AllocatedInput> = g
                        .iter()
                        .filter_map(|x| {
                            let d = view.devices.get(x.device as usize)?.as_ref()?;
                            Some(AllocatedInput {
                                request: x.request.to_string(),
                                driver: d.driver.to_string(),
                                pool: d.pool.to_string(),
                                device: d.name.to_string(),
                                admin_access: x.admin,
                                share: x.consumed.as_ref().map(|amount| Share {
                                    id: None,
                                    consumed: d
                                        .capacity
                                        .iter()
                                        .zip(amount.iter())
                                        .map(|(c, m)| {
                                            (c.name.to_string(), capacity::format_milli(*m))
                                        })
                                        .collect(),
                                }),
                            })
                        })
                        .collect();
                    let reach = g.iter().filter_map(|x| {
                        let d = view.devices.get(x.device as usize)?.as_ref()?;
                        Some(d.reach.device_nodes())
                    });
                    // Slices with selectors of one term only are taken, and requirements that
                    // compiled once compile together: the fallback (the node) is never used.
                    let pin_node = || crate::model::Term {
                        expressions: Box::new([]),
                        fields: Box::new([crate::model::Requirement::name_in(node.name_id)]),
                    };
                    node_selector = devices::allocation_node_selector(reach, &node.name)
                        .unwrap_or_else(|_| Some(devices::node_name_term(&node.name)));
                    let nodes = node_selector.as_ref().map(|t| {
                        Arc::from([crate::model::compile_node_term(t, interner)
                            .unwrap_or_else(|_| pin_node())])
                    });
                    let mut devices = Vec::new();
                    let mut shares = Vec::new();
                    for x in g.iter().filter(|x| !x.admin) {
                        match &x.consumed {
                            Some(amount) => shares.push((x.device, amount.clone())),
                            None => devices.push(x.device),
                        }
                    }
                    // What is in use moves by these devices only: no rebuild unless something
                    // else changed it (a burst of pods with claims costs O(devices) each).
                    if !self.in_use_dirty {
                        let in_use = Arc::make_mut(&mut self.in_use);
                        for &id in &devices {
                            take(&view, in_use, id, None);
                        }
                        for (id, amount) in &shares {
                            take(&view, in_use, *id, Some(amount));
                        }
                    }
                    entry.assumed = Some(Assumed {
                        pod: pod.clone(),
                        devices,
                        shares,
                        nodes,
                    });
                    self.assumed_by
                        .entry(pod.clone())
                        .or_default()
                        .push(key(&c.namespace, &c.name));
                    Some(written)
                }
            };
            out.push(ClaimAllocation {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                uid: c.uid.clone(),
                devices,
                node_selector,
                create: None,
            });
        }
        out
    }

    /// Drop what the pod `pod` assumed (its bind did not go through, or it is gone). Whether
    /// it held anything.
    /// PostFilter (upstream's DynamicResources): of the claims a pod that fits nowhere names,
    /// the first whose written allocation nobody reserves (nor is being given by a decision of
    /// ours, nor is being deleted): deallocated, it can be allocated again where the pod fits.
    pub fn deallocatable(&self, namespace: &Arc<str>, claims: &[PodClaim]) -> Option<Deallocation> {
        claim_keys(namespace, claims).find_map(|k| {
            let c = self.claims.get(&k)?;
            (c.allocation.is_some() && c.assumed.is_none() && !c.reserved && !c.deleting).then(
                || Deallocation {
                    namespace: k.0.clone(),
                    name: k.1.clone(),
                    uid: c.uid.clone(),
                    resource_version: c.resource_version.clone(),
                    delete: false,
                },
            )
        })
    }

    /// The claim an earlier attempt made for the extended resources of pod `pod_uid` (its bind
    /// failed), not being given devices by a decision of ours: deleted, the pod is tried anew.
    pub fn stale_extended(&self, pod_uid: &str) -> Option<Deallocation> {
        if self.extended_claims.is_empty() {
            return None;
        }
        let k = self.extended_claims.get(pod_uid)?;
        let c = self.claims.get(k)?;
        (c.assumed.is_none() && !c.deleting).then(|| Deallocation {
            namespace: k.0.clone(),
            name: k.1.clone(),
            uid: c.uid.clone(),
            resource_version: c.resource_version.clone(),
            delete: true,
        })
    }

    /// Resolve the pod's extended resources backed by DRA (upstream's
    /// `preFilterExtendedResources`) into `out`: the special claim, last, with a request per
    /// container and resource a class provides (`extended`). `slot_of`: the resource's slot in
    /// the pod's requests. Nothing when no class provides any of them.
    pub fn resolve_extended(
        &mut self,
        namespace: &str,
        pod_uid: &str,
        requests: &[crate::model::ExtendedRequest],
        slot_of: impl Fn(&str) -> Option<crate::model::Slot>,
        interner: &mut Interner,
        out: &mut PodClaims,
    ) {
        let mut resources: Vec<(Arc<str>, Arc<str>, crate::model::Slot)> = Vec::new();
        for r in requests {
            if resources.iter().any(|(n, ..)| *n == r.resource) {
                continue;
            }
            if let (Some(class), Some(slot)) = (
                self.inventory.extended_class(&r.resource),
                slot_of(&r.resource),
            ) {
                resources.push((r.resource.clone(), class, slot));
            }
        }
        if resources.is_empty() {
            return;
        }
        resources.sort_by(|a, b| a.0.cmp(&b.0));
        resources.truncate(extended::MAX_RESOURCES);
        let classes: Vec<(Arc<str>, Arc<str>)> = resources
            .iter()
            .map(|(r, c, _)| (r.clone(), c.clone()))
            .collect();
        let (claim_requests, mappings) = extended::requests_and_mappings(requests, &classes);
        let name = extended::special_name(pod_uid);
        let inputs: Vec<RequestInput> = claim_requests.iter().map(|r| r.input()).collect();
        match self.compile_requests(
            namespace,
            &name,
            &inputs,
            &[],
            interner,
            &mut out.selector_errors,
        ) {
            Ok((compiled, constraints)) => {
                out.claims.push(allocator::PodClaim {
                    namespace: Arc::from(namespace),
                    name,
                    uid: Arc::from(format!("extended-resources-{pod_uid}").as_str()),
                    state: allocator::ClaimState::Unallocated {
                        requests: compiled,
                        constraints,
                    },
                });
                out.extended = Some(Arc::new(extended::Extended {
                    resources: resources.into_iter().map(|(r, _, s)| (s, r)).collect(),
                    requests: claim_requests.into(),
                    mappings: mappings.into(),
                }));
                // Upstream's Filter: a claim left by an earlier attempt fails every node (its
                // resources stay DynamicResources' to judge, not NodeResourcesFit's).
                if self.stale_extended(pod_uid).is_some() {
                    out.blocked = Some(Blocked::StaleExtended);
                }
            }
            Err(message) => {
                out.invalid = Some(Arc::from(message));
                out.blocked = Some(Blocked::Invalid);
            }
        }
    }

    /// Some DeviceClass exists: pods with extended resource requests are resolved against the
    /// classes (`resolve_extended`).
    pub fn any_class(&self) -> bool {
        self.inventory.any_class()
    }

    pub fn release(&mut self, pod: &str) -> Vec<ClaimKey> {
        // Clusters without DRA pay no lookup per deleted pod.
        if self.assumed_by.is_empty() {
            return Vec::new();
        }
        let Some(keys) = self.assumed_by.remove(pod) else {
            return Vec::new();
        };
        for k in &keys {
            if extended::is_special(&k.1) {
                // Never created: the stand-in goes.
                if self.claims.remove(k).is_some() {
                    self.in_use_dirty = true;
                }
                continue;
            }
            if let Some(c) = self.claims.get_mut(k)
                && c.assumed.as_ref().is_some_and(|a| &*a.pod == pod)
            {
                c.assumed = None;
                self.in_use_dirty = true;
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, claim: &str) -> PodClaimInput {
        PodClaimInput {
            name: name.into(),
            claim: Some(claim.into()),
            ..Default::default()
        }
    }

    fn templated(name: &str, made: Option<Option<&str>>) -> PodClaimInput {
        PodClaimInput {
            name: name.into(),
            template: Some("tpl".into()),
            made: made.map(|m| m.map(str::to_owned)),
            ..Default::default()
        }
    }

    fn claim(name: &str, owner: Option<&str>) -> ClaimInput {
        ClaimInput {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            owner_uid: owner.map(str::to_owned),
            ..Default::default()
        }
    }

    fn message(claims: &mut Dra, inputs: &[PodClaimInput], enabled: bool) -> Option<String> {
        let mut interner = Interner::default();
        let compiled = compile_claims(inputs).unwrap();
        let r = claims.resolve("ns", "pod-uid", &compiled, enabled, &mut interner);
        let pod = r.names(PodNames {
            namespace: "ns",
            name: "p",
            resource_claims: &compiled,
            ..PodNames::default()
        });
        r.blocked.map(|b| b.message(&pod))
    }

    fn apply(claims: &mut Dra, input: DraInput) {
        let errors = claims.apply(input, &mut Interner::default()).errors;
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn every_way_a_claim_holds_a_pod_back() {
        let mut claims = Dra::default();
        assert_eq!(
            message(&mut claims, &[named("gpu", "c1")], true).as_deref(),
            Some("resourceclaim.resource.k8s.io \"c1\" not found")
        );
        assert_eq!(
            message(&mut claims, &[templated("gpu", None)], true).as_deref(),
            Some("pod \"ns/p\": ResourceClaim not created yet")
        );
        assert_eq!(
            message(&mut claims, &[templated("gpu", Some(None))], true),
            None
        );
        let mut c1 = claim("c1", None);
        c1.requests = vec![RequestInput {
            name: "gpu".into(),
            exactly: Some(ExactInput {
                class: "missing".into(),
                count: 1,
                ..Default::default()
            }),
            ..Default::default()
        }];
        apply(&mut claims, DraInput::Claim(c1.clone()));
        apply(
            &mut claims,
            DraInput::Claim(claim("p-gpu-x", Some("other"))),
        );
        assert_eq!(
            message(
                &mut claims,
                &[templated("gpu", Some(Some("p-gpu-x")))],
                true
            )
            .as_deref(),
            Some("ResourceClaim ns/p-gpu-x was not created for pod ns/p (pod is not owner)")
        );
        assert!(
            message(&mut claims, &[named("gpu", "c1")], true)
                .unwrap()
                .ends_with("request gpu: device class missing does not exist")
        );
        assert!(
            message(&mut claims, &[named("gpu", "c1")], false)
                .unwrap()
                .contains("\"gpu\": dynamic resource allocation is switched off")
        );
        let mut deleting = c1;
        deleting.deleting = true;
        apply(&mut claims, DraInput::Claim(deleting));
        assert_eq!(
            message(&mut claims, &[named("gpu", "c1")], true).as_deref(),
            Some("resourceclaim \"c1\" is being deleted")
        );
        apply(&mut claims, DraInput::ClaimReset(vec![]));
        assert!(message(&mut claims, &[named("gpu", "c1")], true).is_some());
    }

    #[test]
    fn the_api_servers_rules_for_pod_claims() {
        assert!(compile_claims(&[named("a", "x"), named("a", "y")]).is_err());
        assert!(
            compile_claims(&[PodClaimInput {
                name: "a".into(),
                ..Default::default()
            }])
            .is_err()
        );
        assert!(
            compile_claims(&[PodClaimInput {
                name: "a".into(),
                claim: Some("x".into()),
                template: Some("t".into()),
                made: None,
            }])
            .is_err()
        );
        assert_eq!(compile_claims(&[]).unwrap().len(), 0);
    }
}
