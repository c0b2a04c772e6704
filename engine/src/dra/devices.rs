//! The devices DRA drivers publish (`ResourceSlice`s) and the classes that select them
//! (`DeviceClass`es), as the structured allocator reads them.
//!
//! - Every device gets a dense id ([`DevId`]) that stays the same while a slice naming it
//!   (driver, pool, device name) exists, so allocations recorded against it stay valid across
//!   slice updates.
//! - A pool's devices count only from the slices of its newest generation. A pool whose slices
//!   of that generation are not all there yet (`resourceSliceCount`) is *incomplete*: nothing
//!   is allocated from it until it is complete. A pool upstream deems invalid (a device name
//!   twice, a counter set defined twice, a device consuming a counter set or counter the pool
//!   does not define) gives nothing either.
//! - Where a device can be used ([`Reach`]): one node (`nodeName`), the nodes a node selector
//!   matches, or every node (`allNodes`); per device when the slice says
//!   `perDeviceNodeSelection`. Devices of one node are listed per node (what a node-local scan
//!   reads); the others are checked against each node's labels.
//! - Selectors are compiled once per expression and evaluated once per (expression, device):
//!   [`Inventory::matching`] memoises the results until the devices change.
//!
//! Owned by the driver (single writer); workers read the immutable [`DevicesView`] published
//! with each snapshot.

use super::cel::{AttrValue, DeviceView, Selector, root_context};
use crate::model::{
    Interner, ModelError, NodeMeta, SelectorRequirementInput, SelectorTermInput, Taint,
    TaintEffect, Term, compile_node_term, parse_scaled,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A device's dense id.
pub type DevId = u32;

/// (driver, pool): a resource pool.
pub type PoolKey = (Arc<str>, Arc<str>);

/// (driver, pool, device name).
pub type DeviceKey = (Arc<str>, Arc<str>, Arc<str>);

/// (driver, pool, counter set, counter): one counter of a partitionable pool.
pub type CounterKey = (Arc<str>, Arc<str>, Arc<str>, Arc<str>);

/// A counter set's counters: (counter, milli-units).
pub type CounterSet = (Arc<str>, Vec<(Arc<str>, i128)>);

/// What a device consumes: (counter set, counter, milli-units).
pub type Consumption = (Arc<str>, Arc<str>, i128);

/// `spec.nodeName` / `nodeSelector` / `allNodes` of a slice (or of one device).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NodesInput {
    Node(String),
    Selector(Vec<SelectorTermInput>),
    #[default]
    All,
    /// `perDeviceNodeSelection`: each device says.
    PerDevice,
}

/// A device taint (`spec.devices[].taints[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceTaintInput {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// One device of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceInput {
    pub name: String,
    /// (qualified name, value): a name without a domain belongs to the driver's.
    pub attributes: Vec<(String, AttrValue)>,
    /// (qualified name, quantity).
    pub capacity: Vec<(String, String)>,
    pub taints: Vec<DeviceTaintInput>,
    /// With `perDeviceNodeSelection`: where this device can be used.
    pub nodes: Option<NodesInput>,
    /// `consumesCounters`: (counter set, [(counter, quantity)]).
    pub consumes_counters: Vec<(String, Vec<(String, String)>)>,
    pub allow_multiple_allocations: bool,
    /// `capacity[].requestPolicy`, by capacity name (devices that allow multiple allocations).
    pub request_policies: Vec<(String, super::capacity::RequestPolicyInput)>,
}

/// A ResourceSlice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceInput {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    pub slice_count: i64,
    pub nodes: NodesInput,
    pub devices: Vec<DeviceInput>,
    /// `sharedCounters`: (counter set, [(counter, quantity)]).
    pub shared_counters: Vec<(String, Vec<(String, String)>)>,
}

/// A DeviceClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassInput {
    pub name: String,
    /// `spec.selectors[].cel.expression`.
    pub selectors: Vec<String>,
    /// `spec.extendedResourceName`: pods asking for this extended resource get devices of the
    /// class (`DRAExtendedResource`).
    pub extended_resource_name: Option<String>,
    /// `metadata.creationTimestamp` (RFC 3339): of two classes naming one extended resource,
    /// the one created later provides it (the first name in order when created together).
    pub created: String,
}

/// Where a device can be used.
#[derive(Debug, Clone)]
pub enum Reach {
    /// One node (its name id).
    Node(u32),
    /// The nodes any of these terms match; `source` is the selector as the slice gives it
    /// (what an allocation's node selector is made of).
    Selector {
        terms: Arc<[Term]>,
        source: Arc<[SelectorTermInput]>,
    },
    All,
}

/// Where one device of an allocation can be used, for [`allocation_node_selector`].
#[derive(Debug, Clone, Copy)]
pub enum DeviceNodes<'a> {
    /// Local to one node.
    Node,
    /// The nodes the (one-term) selector matches.
    Selector(&'a [SelectorTermInput]),
    /// Every node.
    All,
}

/// `metadata.name In [node]`: the node selector term of an allocation local to `node`.
pub fn node_name_term(node: &str) -> SelectorTermInput {
    SelectorTermInput {
        match_expressions: Vec::new(),
        match_fields: vec![SelectorRequirementInput {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: vec![node.to_owned()],
        }],
    }
}

/// The node selector of an allocation of devices made for the node `node` (upstream's
/// `createNodeSelector`): a device local to a node restricts the allocation to that node (by
/// `metadata.name`); otherwise the requirements of the devices' selectors are put together in
/// one term, each once; `None` when every device is available on every node. A selector of
/// more than one term is an error, as upstream's (the API server accepts one term only).
pub fn allocation_node_selector<'a>(
    devices: impl IntoIterator<Item = DeviceNodes<'a>>,
    node: &str,
) -> Result<Option<SelectorTermInput>, String> {
    let mut term = SelectorTermInput::default();
    for d in devices {
        match d {
            DeviceNodes::Node => return Ok(Some(node_name_term(node))),
            DeviceNodes::Selector(terms) => match terms {
                [] => {}
                [t] => {
                    for r in &t.match_expressions {
                        if !term.match_expressions.contains(r) {
                            term.match_expressions.push(r.clone());
                        }
                    }
                    for r in &t.match_fields {
                        if !term.match_fields.contains(r) {
                            term.match_fields.push(r.clone());
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "unsupported node selector with {} terms",
                        terms.len()
                    ));
                }
            },
            DeviceNodes::All => {}
        }
    }
    Ok((!term.match_expressions.is_empty() || !term.match_fields.is_empty()).then_some(term))
}

impl Reach {
    /// What [`allocation_node_selector`] reads of it.
    pub fn device_nodes(&self) -> DeviceNodes<'_> {
        match self {
            Reach::Node(_) => DeviceNodes::Node,
            Reach::Selector { source, .. } => DeviceNodes::Selector(source),
            Reach::All => DeviceNodes::All,
        }
    }

    pub fn admits(&self, node: &NodeMeta) -> bool {
        match self {
            Reach::Node(n) => *n == node.name_id,
            Reach::Selector { terms, .. } => terms.iter().any(|t| t.matches(node)),
            Reach::All => true,
        }
    }

    /// A device only one node can use (its claims are exact under that node's bind version).
    pub fn is_local(&self) -> bool {
        matches!(self, Reach::Node(_))
    }
}

/// One device, as the allocator reads it.
#[derive(Debug, Clone)]
pub struct Device {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub name: Arc<str>,
    pub reach: Reach,
    /// (domain, name) → value, for `matchAttribute` constraints.
    pub attributes: Arc<[(Arc<str>, AttrValue)]>,
    pub taints: Box<[Taint]>,
    /// Counters it consumes: (counter set, counter name, milli-units).
    pub consumes: Box<[Consumption]>,
    /// The same by counter id (`DevicesView::counters`): what the allocator reads, with no
    /// hashing per device.
    pub counters: Box<[(u32, i128)]>,
    /// `allowMultipleAllocations`: each allocation is a share of its capacities.
    pub multi: bool,
    /// Its capacities (consumable when `multi`).
    pub capacity: Box<[super::capacity::Capacity]>,
    /// Its pool is incomplete (not every slice of the newest generation is known).
    pub incomplete_pool: bool,
    /// Its pool is invalid (see `Inventory::refresh`).
    pub invalid_pool: bool,
    /// The CEL value of `device`.
    value: cel::Value,
}

/// The `cel` crate capitalises its errors; cel-go, whose text users know, does not.
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// What a list of selectors matches ([`Inventory::matching`]).
#[derive(Debug, Clone)]
pub struct Matching {
    /// Matching devices, ascending.
    pub devices: Arc<[DevId]>,
    /// Devices a selector failed on, with the error.
    pub errors: Arc<[(DevId, Arc<str>)]>,
}

/// The devices that can serve a request (its selectors match, and it can consume what the
/// request asks of their capacities), with what a share of each consumes
/// ([`Inventory::serving`]).
#[derive(Debug, Clone)]
pub struct Serving {
    /// Ascending.
    pub devices: Arc<[DevId]>,
    pub errors: Arc<[(DevId, Arc<str>)]>,
    /// Parallel to `devices`: what one share of a device that allows multiple allocations
    /// consumes of each capacity (empty for a device taken whole). `None` when no device is
    /// shared and the request asks no capacity (nothing to check).
    pub consumes: Option<Arc<[Box<[i128]>]>>,
}

/// A memo key of [`Inventory::serving`]: the selectors and the capacity asked.
type ServingKey = (Vec<Arc<str>>, Arc<[(Arc<str>, i128)]>);

/// The devices and classes (see the module doc).
#[derive(Default)]
pub struct Inventory {
    /// By id; `None`: an id no slice names any more (kept so ids are stable).
    devices: Vec<Option<Device>>,
    ids: HashMap<DeviceKey, DevId>,
    free_ids: Vec<DevId>,
    /// Slices by name: (driver, pool, generation, its device ids).
    slices: HashMap<Arc<str>, SliceEntry>,
    /// Pools: (driver, pool) → (newest generation, slice count).
    pools: HashMap<(Arc<str>, Arc<str>), PoolEntry>,
    classes: HashMap<Arc<str>, Arc<[Arc<str>]>>,
    /// Each class's `extendedResourceName` and creation time.
    class_extended: HashMap<Arc<str>, (Arc<str>, Arc<str>)>,
    /// The class providing each extended resource named by some class (the API's rule for two
    /// classes naming one resource: the later created, then the first name).
    extended: HashMap<Arc<str>, Arc<str>>,
    /// Memoised selector results: expression → (selector, result per device id: 0 unknown,
    /// 1 match, 2 no match, 3 error).
    selectors: HashMap<Arc<str>, (Selector, Vec<u8>)>,
    /// Memoised answers of [`Inventory::matching`] per selector list.
    sets: HashMap<Vec<Arc<str>>, Matching>,
    /// Memoised answers of [`Inventory::serving`] for requests that consume capacity.
    serving: HashMap<ServingKey, Serving>,
    /// Devices (of any generation) that allow multiple allocations.
    multi_devices: usize,
    root: Option<cel::Context<'static, 'static>>,
    /// How many slices name each device id.
    refs: Vec<u32>,
    /// Per device id: counted (its slice is of its pool's newest generation).
    current: Vec<bool>,
    /// `current` and the published view are stale.
    dirty: bool,
    view: Arc<DevicesView>,
    /// Dense ids of the counters (driver, pool, set, counter) ever seen; never reused, so an
    /// `InUse` built on an older view reads the same counters.
    counter_ids: HashMap<CounterKey, u32>,
}

#[derive(Debug, Clone)]
struct SliceEntry {
    pool: (Arc<str>, Arc<str>),
    generation: i64,
    devices: Vec<DevId>,
    shared_counters: Vec<CounterSet>,
}

#[derive(Debug, Clone, Default)]
struct PoolEntry {
    generation: i64,
    slice_count: i64,
}

/// What workers read of the devices: immutable, published with the snapshot.
#[derive(Debug, Default)]
pub struct DevicesView {
    pub devices: Vec<Option<Device>>,
    /// Node-local devices by node name id.
    pub by_node: HashMap<u32, Vec<DevId>>,
    /// Devices usable on more than one node.
    pub shared: Vec<DevId>,
    /// Counter sets of partitionable devices: capacity in milli-units by counter id (0 for a
    /// counter no current slice defines).
    pub counters: Vec<i128>,
    /// By counter id: the devices that consume it.
    pub by_counter: Vec<Vec<DevId>>,
}

impl std::fmt::Debug for Inventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inventory")
            .field("devices", &self.devices.len())
            .field("slices", &self.slices.len())
            .finish_non_exhaustive()
    }
}

/// The dense id of a counter, given on first sight.
fn counter_id(ids: &mut HashMap<CounterKey, u32>, k: CounterKey) -> u32 {
    let next = ids.len() as u32;
    *ids.entry(k).or_insert(next)
}

fn split_qualified(driver: &str, name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((d, n)) => (d.to_owned(), n.to_owned()),
        None => (driver.to_owned(), name.to_owned()),
    }
}

fn milli(what: &str, q: &str) -> Result<i128, ModelError> {
    parse_scaled(what, q, 1000).map(i128::from)
}

impl Inventory {
    fn compile_nodes(
        nodes: &NodesInput,
        interner: &mut Interner,
    ) -> Result<Option<Reach>, ModelError> {
        Ok(Some(match nodes {
            NodesInput::Node(n) => Reach::Node(interner.intern(n)),
            // The API server accepts exactly one term; so does the allocation's node selector.
            NodesInput::Selector(terms) if terms.len() != 1 => {
                return Err(ModelError::ResourceClaim(format!(
                    "nodeSelector must have exactly one node selector term, not {}",
                    terms.len()
                )));
            }
            NodesInput::Selector(terms) => Reach::Selector {
                terms: terms
                    .iter()
                    .map(|t| compile_node_term(t, interner))
                    .collect::<Result<Vec<_>, _>>()?
                    .into(),
                source: terms.clone().into(),
            },
            NodesInput::All => Reach::All,
            NodesInput::PerDevice => return Ok(None),
        }))
    }

    /// Add or replace a slice. A slice Magma cannot take is left out (its older version too)
    /// and the error returned.
    pub fn apply_slice(
        &mut self,
        s: SliceInput,
        interner: &mut Interner,
    ) -> Result<(), ModelError> {
        let name: Arc<str> = Arc::from(s.name.as_str());
        self.remove_slice(&name);
        let driver: Arc<str> = Arc::from(s.driver.as_str());
        let pool: Arc<str> = Arc::from(s.pool.as_str());
        let slice_reach = Self::compile_nodes(&s.nodes, interner)?;
        let mut shared_counters = Vec::new();
        for (set, counters) in &s.shared_counters {
            let mut cs = Vec::new();
            for (c, q) in counters {
                cs.push((Arc::from(c.as_str()), milli("counter", q)?));
            }
            shared_counters.push((Arc::from(set.as_str()), cs));
        }
        let mut compiled = Vec::with_capacity(s.devices.len());
        for d in &s.devices {
            let reach = match (&slice_reach, &d.nodes) {
                (Some(r), _) => r.clone(),
                (None, Some(n)) => Self::compile_nodes(n, interner)?.unwrap_or(Reach::All),
                (None, None) => {
                    return Err(ModelError::ResourceClaim(format!(
                        "resourceslice {:?}: device {:?} says nowhere it can be used",
                        s.name, d.name
                    )));
                }
            };
            let mut attributes: Vec<(Arc<str>, AttrValue)> = Vec::new();
            let mut view_attrs = Vec::new();
            for (q, v) in &d.attributes {
                let (domain, id) = split_qualified(&s.driver, q);
                attributes.push((Arc::from(format!("{domain}/{id}").as_str()), v.clone()));
                view_attrs.push((domain, id, v.clone()));
            }
            attributes.sort_by(|a, b| a.0.cmp(&b.0));
            let mut capacity = Vec::new();
            for (q, v) in &d.capacity {
                let (domain, id) = split_qualified(&s.driver, q);
                capacity.push((domain, id, milli("capacity", v)?));
            }
            // A device taint's effect `None` only informs: it repels nothing.
            let taints = d
                .taints
                .iter()
                .filter(|t| t.effect != "None")
                .map(|t| {
                    Ok(Taint {
                        key: interner.intern(&t.key),
                        value: interner.intern(&t.value),
                        effect: TaintEffect::parse(&t.effect)?,
                    })
                })
                .collect::<Result<Vec<_>, ModelError>>()?;
            let mut consumes = Vec::new();
            for (set, counters) in &d.consumes_counters {
                if counters.is_empty() {
                    // Consumes nothing, but names the set: the pool must define it.
                    consumes.push((Arc::from(set.as_str()), Arc::from(""), 0));
                }
                for (c, q) in counters {
                    consumes.push((
                        Arc::from(set.as_str()),
                        Arc::from(c.as_str()),
                        milli("counter", q)?,
                    ));
                }
            }
            let consumable = super::capacity::compile(&s.driver, &d.capacity, &d.request_policies)?;
            let view = DeviceView {
                driver: s.driver.clone(),
                attributes: view_attrs,
                capacity,
                allow_multiple_allocations: d.allow_multiple_allocations,
            };
            compiled.push(Device {
                driver: driver.clone(),
                pool: pool.clone(),
                name: Arc::from(d.name.as_str()),
                reach,
                attributes: attributes.into(),
                taints: taints.into(),
                consumes: consumes.into(),
                counters: Box::new([]),
                multi: d.allow_multiple_allocations,
                capacity: consumable,
                incomplete_pool: false,
                invalid_pool: false,
                value: view.to_value(),
            });
        }
        let mut ids = Vec::with_capacity(compiled.len());
        for d in compiled {
            let key = (d.driver.clone(), d.pool.clone(), d.name.clone());
            let id = match self.ids.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.free_ids.pop().unwrap_or_else(|| {
                        self.devices.push(None);
                        self.refs.push(0);
                        (self.devices.len() - 1) as DevId
                    });
                    self.ids.insert(key, id);
                    id
                }
            };
            self.devices[id as usize] = Some(d);
            self.refs[id as usize] += 1;
            ids.push(id);
        }
        let pool_key = (driver, pool);
        let entry = self.pools.entry(pool_key.clone()).or_default();
        if s.generation >= entry.generation {
            entry.generation = s.generation;
            entry.slice_count = s.slice_count;
        }
        self.slices.insert(
            name,
            SliceEntry {
                pool: pool_key,
                generation: s.generation,
                devices: ids,
                shared_counters,
            },
        );
        self.changed();
        Ok(())
    }

    pub fn remove_slice(&mut self, name: &str) {
        let Some(old) = self.slices.remove(name) else {
            return;
        };
        for id in old.devices {
            // Another slice may name the same device (a newer generation): keep it then.
            let refs = &mut self.refs[id as usize];
            *refs -= 1;
            if *refs == 0
                && let Some(Some(d)) = self.devices.get_mut(id as usize).map(Option::take)
            {
                self.ids.remove(&(d.driver, d.pool, d.name));
                self.free_ids.push(id);
            }
        }
        if !self.slices.values().any(|s| s.pool == old.pool) {
            self.pools.remove(&old.pool);
        }
        self.changed();
    }

    pub fn reset_slices(
        &mut self,
        all: Vec<SliceInput>,
        interner: &mut Interner,
    ) -> Vec<ModelError> {
        *self = Inventory {
            classes: std::mem::take(&mut self.classes),
            class_extended: std::mem::take(&mut self.class_extended),
            extended: std::mem::take(&mut self.extended),
            root: self.root.take(),
            ..Inventory::default()
        };
        all.into_iter()
            .filter_map(|s| self.apply_slice(s, interner).err())
            .collect()
    }

    pub fn apply_class(&mut self, c: ClassInput) {
        self.insert_class(c);
        self.map_extended();
    }

    fn insert_class(&mut self, c: ClassInput) {
        let name: Arc<str> = Arc::from(c.name.as_str());
        self.classes.insert(
            name.clone(),
            c.selectors.iter().map(|s| Arc::from(s.as_str())).collect(),
        );
        match c.extended_resource_name.filter(|e| !e.is_empty()) {
            Some(e) => {
                let v = (Arc::from(e.as_str()), Arc::from(c.created.as_str()));
                self.class_extended.insert(name, v);
            }
            None => {
                self.class_extended.remove(&name);
            }
        }
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
        if self.class_extended.remove(name).is_some() {
            self.map_extended();
        }
    }

    pub fn reset_classes(&mut self, all: Vec<ClassInput>) {
        self.classes.clear();
        self.class_extended.clear();
        for c in all {
            self.insert_class(c);
        }
        self.map_extended();
    }

    /// Rebuild which class provides each explicitly named extended resource (O(classes), on a
    /// class change only).
    fn map_extended(&mut self) {
        let mut best: HashMap<Arc<str>, (&Arc<str>, &Arc<str>)> = HashMap::new();
        for (class, (resource, created)) in &self.class_extended {
            let e = best.entry(resource.clone()).or_insert((created, class));
            // Later created wins; created together, the first name.
            if (created, std::cmp::Reverse(class)) > (e.0, std::cmp::Reverse(e.1)) {
                *e = (created, class);
            }
        }
        self.extended = best.into_iter().map(|(r, (_, c))| (r, c.clone())).collect();
    }

    /// The class whose devices provide the extended resource `resource`: the class a class's
    /// implicit name (`deviceclass.resource.kubernetes.io/<class>`) names if it exists, else
    /// the class naming it in `extendedResourceName`.
    pub fn extended_class(&self, resource: &str) -> Option<Arc<str>> {
        if let Some(class) = resource.strip_prefix(crate::model::DEVICE_CLASS_PREFIX) {
            return self.classes.get_key_value(class).map(|(k, _)| k.clone());
        }
        self.extended.get(resource).cloned()
    }

    /// Some class provides an extended resource explicitly or could implicitly (any class at
    /// all): pods with extended resource requests are resolved against the classes.
    pub fn any_class(&self) -> bool {
        !self.classes.is_empty()
    }

    /// A class's selectors, `None` when it does not exist.
    pub fn class(&self, name: &str) -> Option<&Arc<[Arc<str>]>> {
        self.classes.get(name)
    }

    fn changed(&mut self) {
        self.dirty = true;
        self.sets.clear();
        self.serving.clear();
        for (_, results) in self.selectors.values_mut() {
            results.clear();
        }
    }

    /// The id of a device by (driver, pool, name).
    pub fn id(&self, driver: &str, pool: &str, name: &str) -> Option<DevId> {
        self.ids
            .get(&(Arc::from(driver), Arc::from(pool), Arc::from(name)))
            .copied()
    }

    pub fn device(&self, id: DevId) -> Option<&Device> {
        self.devices.get(id as usize).and_then(Option::as_ref)
    }

    /// Recompute what depends on every slice (which devices count, which pools are
    /// incomplete) and the published view, once per batch of changes.
    fn refresh(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.multi_devices = self.devices.iter().flatten().filter(|d| d.multi).count();
        self.current = vec![false; self.devices.len()];
        let mut have: HashMap<(Arc<str>, Arc<str>), i64> = HashMap::new();
        for s in self.slices.values() {
            if self
                .pools
                .get(&s.pool)
                .is_some_and(|p| p.generation == s.generation)
            {
                *have.entry(s.pool.clone()).or_default() += 1;
                for &id in &s.devices {
                    self.current[id as usize] = true;
                }
            }
        }
        // Pools upstream skips as invalid (`GatherPools`/`validatePool`): a device name twice in
        // the pool's current slices, a counter set defined twice, a device consuming a counter
        // set or counter the pool does not define. Nothing is allocated from them.
        let mut invalid: std::collections::HashSet<PoolKey> = Default::default();
        let mut seen = vec![false; self.devices.len()];
        let mut sets: HashMap<PoolKey, HashMap<Arc<str>, Vec<Arc<str>>>> = HashMap::new();
        for s in self.slices.values() {
            if self
                .pools
                .get(&s.pool)
                .is_none_or(|p| p.generation != s.generation)
            {
                continue;
            }
            for &id in &s.devices {
                if std::mem::replace(&mut seen[id as usize], true) {
                    invalid.insert(s.pool.clone());
                }
            }
            let pool_sets = sets.entry(s.pool.clone()).or_default();
            for (set, cs) in &s.shared_counters {
                let names = cs.iter().map(|(c, _)| c.clone()).collect();
                if pool_sets.insert(set.clone(), names).is_some() {
                    invalid.insert(s.pool.clone());
                }
            }
        }
        for (id, d) in self.devices.iter().enumerate() {
            let Some(dev) = d else { continue };
            if !self.current[id] {
                continue;
            }
            let key = (dev.driver.clone(), dev.pool.clone());
            let defined = sets.get(&key);
            let ok = dev.consumes.iter().all(|(set, c, _)| {
                defined
                    .and_then(|m| m.get(set))
                    .is_some_and(|cs| c.is_empty() || cs.contains(c))
            });
            if !ok {
                invalid.insert(key);
            }
        }
        let mut by_node: HashMap<u32, Vec<DevId>> = HashMap::new();
        let mut shared = Vec::new();
        let mut by_counter: Vec<Vec<DevId>> = Vec::new();
        let mut devices = self.devices.clone();
        for (id, d) in devices.iter_mut().enumerate() {
            let Some(dev) = d else { continue };
            if !self.current[id] {
                *d = None;
                continue;
            }
            if !dev.consumes.is_empty() {
                let ids = &mut self.counter_ids;
                dev.counters = dev
                    .consumes
                    .iter()
                    .map(|(set, c, amount)| {
                        let k = (dev.driver.clone(), dev.pool.clone(), set.clone(), c.clone());
                        (counter_id(ids, k), *amount)
                    })
                    .collect();
                for &(k, _) in dev.counters.iter() {
                    if by_counter.len() <= k as usize {
                        by_counter.resize_with(k as usize + 1, Vec::new);
                    }
                    by_counter[k as usize].push(id as DevId);
                }
            }
            let key = (dev.driver.clone(), dev.pool.clone());
            let want = self.pools.get(&key).map_or(i64::MAX, |p| p.slice_count);
            dev.incomplete_pool = have.get(&key).copied().unwrap_or(0) < want;
            dev.invalid_pool = invalid.contains(&key);
            match dev.reach {
                Reach::Node(n) => by_node.entry(n).or_default().push(id as DevId),
                _ => shared.push(id as DevId),
            }
        }
        let mut counters = Vec::new();
        for s in self.slices.values() {
            for (set, cs) in &s.shared_counters {
                for (c, v) in cs {
                    let k = (s.pool.0.clone(), s.pool.1.clone(), set.clone(), c.clone());
                    let id = counter_id(&mut self.counter_ids, k) as usize;
                    if counters.len() <= id {
                        counters.resize(id + 1, 0);
                    }
                    counters[id] = *v;
                }
            }
        }
        self.view = Arc::new(DevicesView {
            devices,
            by_node,
            shared,
            counters,
            by_counter,
        });
    }

    /// The devices that can serve a request with `selectors` asking `capacity` (memoised):
    /// those the selectors match ([`Inventory::matching`]) that have what it asks, with what a
    /// share of each consumes (`capacity::consumption`, computed once per device and request
    /// instead of per node and device in the Filter). Requests that ask no capacity on
    /// clusters without shared devices pay only for `matching`.
    pub fn serving(
        &mut self,
        selectors: &[Arc<str>],
        capacity: &Arc<[(Arc<str>, i128)]>,
    ) -> Serving {
        let m = self.matching(selectors);
        if capacity.is_empty() && self.multi_devices == 0 {
            return Serving {
                devices: m.devices,
                errors: m.errors,
                consumes: None,
            };
        }
        let key = (selectors.to_vec(), capacity.clone());
        if let Some(hit) = self.serving.get(&key) {
            return hit.clone();
        }
        let mut devices = Vec::with_capacity(m.devices.len());
        let mut consumes = Vec::with_capacity(m.devices.len());
        for &id in m.devices.iter() {
            let Some(Some(d)) = self.devices.get(id as usize) else {
                continue;
            };
            let Some(amount) = super::capacity::consumption(capacity, &d.driver, &d.capacity)
            else {
                continue;
            };
            devices.push(id);
            consumes.push(if d.multi { amount } else { Box::default() });
        }
        let answer = Serving {
            devices: devices.into(),
            errors: m.errors,
            consumes: Some(consumes.into()),
        };
        self.serving.insert(key, answer.clone());
        answer
    }

    /// The devices every one of `selectors` matches (memoised), and those on which a selector
    /// failed (does not compile, reads a missing key), each with its error.
    pub fn matching(&mut self, selectors: &[Arc<str>]) -> Matching {
        self.refresh();
        if let Some(hit) = self.sets.get(selectors) {
            return hit.clone();
        }
        let (out, errors) = self.evaluate(selectors);
        let answer = Matching {
            devices: out.into(),
            errors: errors.into(),
        };
        self.sets.insert(selectors.to_vec(), answer.clone());
        answer
    }

    fn evaluate(&mut self, selectors: &[Arc<str>]) -> (Vec<DevId>, Vec<(DevId, Arc<str>)>) {
        let n = self.devices.len();
        let root = self.root.get_or_insert_with(root_context);
        let mut errors = Vec::new();
        let mut out = Vec::new();
        for id in 0..n as DevId {
            let Some(Some(d)) = self.devices.get(id as usize) else {
                continue;
            };
            if !self.current[id as usize] {
                continue;
            }
            let mut all = true;
            for src in selectors {
                let (sel, results) = self
                    .selectors
                    .entry(src.clone())
                    .or_insert_with(|| (Selector::compile(src), Vec::new()));
                if results.len() < n {
                    results.resize(n, 0);
                }
                let r = &mut results[id as usize];
                if *r == 0 {
                    *r = match sel.matches(root, &d.value) {
                        Ok(true) => 1,
                        Ok(false) => 2,
                        Err(e) => {
                            let i = selectors.iter().position(|x| x == src).unwrap_or(0);
                            errors.push((
                                id,
                                Arc::from(format!(
                                    "selector #{i} on device {}/{}/{}: CEL runtime error: {}",
                                    d.driver,
                                    d.pool,
                                    d.name,
                                    lower_first(&e.to_string())
                                )),
                            ));
                            3
                        }
                    };
                }
                if *r == 3 && !errors.iter().any(|(e, _)| *e == id) {
                    // Memoised earlier: evaluate again for its text (errors are rare).
                    if let Err(e) = sel.matches(root, &d.value) {
                        let i = selectors.iter().position(|x| x == src).unwrap_or(0);
                        errors.push((
                            id,
                            Arc::from(format!(
                                "selector #{i} on device {}/{}/{}: CEL runtime error: {}",
                                d.driver,
                                d.pool,
                                d.name,
                                lower_first(&e.to_string())
                            )),
                        ));
                    }
                }
                if *r != 1 {
                    all = false;
                    break;
                }
            }
            if all {
                out.push(id);
            }
        }
        (out, errors)
    }

    /// The view workers read, rebuilt when the devices changed.
    pub fn view(&mut self) -> Arc<DevicesView> {
        self.refresh();
        self.view.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `createNodeSelector`: a node-local device wins; selectors of one term are put
    /// together, each requirement once; devices every node reaches add nothing.
    #[test]
    fn the_allocation_node_selector_as_create_node_selector() {
        let term = |key: &str| SelectorTermInput {
            match_expressions: vec![SelectorRequirementInput {
                key: key.into(),
                operator: "In".into(),
                values: vec!["true".into()],
            }],
            match_fields: vec![],
        };
        let (a, b) = ([term("a")], [term("b")]);
        let on_n1 = allocation_node_selector([DeviceNodes::Selector(&a), DeviceNodes::Node], "n1");
        let n1 = on_n1.unwrap().unwrap();
        assert_eq!(n1.match_fields[0].key, "metadata.name");
        assert_eq!(n1.match_fields[0].values, ["n1"]);
        assert!(n1.match_expressions.is_empty());
        let both = allocation_node_selector(
            [
                DeviceNodes::Selector(&a),
                DeviceNodes::All,
                DeviceNodes::Selector(&b),
                DeviceNodes::Selector(&a),
            ],
            "n1",
        );
        let keys: Vec<_> = both
            .unwrap()
            .unwrap()
            .match_expressions
            .into_iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(allocation_node_selector([DeviceNodes::All], "n1"), Ok(None));
        let two = [term("a"), term("b")];
        assert!(allocation_node_selector([DeviceNodes::Selector(&two)], "n1").is_err());
    }
}
