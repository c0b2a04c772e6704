//! The cluster cache: the single writer of node and assigned-pod state, and the builder of the
//! snapshots the workers read.
//!
//! Owns: node slots (dense, with incarnations; a removed node's slot is reused only once no
//! worker can still hold a snapshot naming it), the accounting of pods placed on nodes (bound by
//! anyone, or assumed by us after a claim), the per-node applied bind-version counts, and the
//! working snapshot arena. It may touch the shared [`BindVersions`] counters (bumps for
//! capacity-reducing changes, see `binder`) and nothing else; it never talks to the queue — it
//! returns the cluster [`event`]s each change amounts to, and the caller moves pods.
//!
//! Completed pods (Succeeded/Failed) stop counting the moment the cache hears of it.

use crate::binder::{BindVersions, Candidate, MAX_SLOTS};
use crate::conf::Profile;
use crate::event::{self, Events};
use crate::index::Indexes;
use crate::index::terms::{MAX_WATCHED, Terms};
use crate::model::{
    AffinityTerm, CPU, CompiledNode, CompiledPod, HOSTNAME_KEY, HostPort, Interner, MEMORY,
    ModelError, NamespaceInput, Namespaces, NodeInput, NodeMeta, PlainInfos, PodInfo, PodInput,
    ResourceList, ResourceRegistry, compile_labels, compile_node, compile_pod_with,
};
use crate::mutation;
use crate::plugins::inter_pod_affinity::scores_others;
use crate::plugins::{self, Names, NodeFacts};
use crate::shard::{NodeBook, View};
use crate::snapshot::{Arena, CHUNK, Nominee, Snapshot};
use crate::volumes::{CsiLimits, CsiVolumes, PodVolumes, Storage, StorageInput};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// What the cache knows about one node slot.
#[derive(Default, Clone)]
struct SlotState {
    /// Version increments of this slot the cache has accounted for (claims + bumps).
    applied: u64,
    incarnation: u32,
    node: Option<CompiledNode>,
    /// Sum of requests of pods counted on the node.
    used: ResourceList,
    nonzero: [i64; 2],
    /// Multiset of host ports in use, sorted.
    ports: Vec<HostPort>,
    /// Pods assumed here after our claim whose binding the watch has not confirmed yet.
    assumed: u32,
    /// The pods counted here, as the cross-node plugins see them (published only once the pod
    /// index is on, see [`Cache::enable_pod_index`]).
    pods: Vec<Arc<PodInfo>>,
    /// The uids and priorities of the pods counted here (preemption looks for victims among
    /// them).
    uids: Vec<(Arc<str>, i32)>,
    /// Pods nominated to this node (`preemption`): their room is kept for them.
    nominees: Vec<Nominee>,
}

/// A pod counted on a node.
#[derive(Debug, Clone)]
struct Placement {
    uid: Arc<str>,
    namespace: Arc<str>,
    name: Arc<str>,
    priority: i32,
    started_unix_ms: Option<i64>,
    /// Being evicted by a scheduler's preemption (its `DisruptionTarget` condition).
    preempted: bool,
    /// Chosen as a victim by one of our preemptions (`Cache::mark_evicting`): its deletion is
    /// in flight. Kept across updates of the pod until it is gone.
    evicting: bool,
    node: Arc<str>,
    requests: ResourceList,
    nonzero: [i64; 2],
    ports: Box<[HostPort]>,
    info: Arc<PodInfo>,
    /// Assumed after our claim, not yet confirmed by the watch.
    assumed: bool,
}

impl Placement {
    fn of(pod: &CompiledPod, info: Arc<PodInfo>, node: Arc<str>, assumed: bool) -> Placement {
        Placement {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            priority: pod.priority,
            started_unix_ms: pod.started_unix_ms,
            preempted: pod.preempted,
            evicting: false,
            node,
            requests: pod.requests.clone(),
            nonzero: [pod.nonzero_cpu, pod.nonzero_memory],
            ports: pod.host_ports.clone(),
            info,
            assumed,
        }
    }

    /// The same pod, counted the same way, in the same place.
    fn same(&self, other: &Placement) -> bool {
        self.node == other.node
            && self.priority == other.priority
            && self.started_unix_ms == other.started_unix_ms
            && self.preempted == other.preempted
            && self.requests == other.requests
            && self.ports == other.ports
            && (Arc::ptr_eq(&self.info, &other.info) || self.info == other.info)
    }
}

/// A claim by (namespace, name).
type ClaimKey = (Arc<str>, Arc<str>);

/// A pod placed on a node, as preemption sees it (`Cache::pods_on`).
#[derive(Debug, Clone, Copy)]
pub struct PlacedView<'a> {
    pub uid: &'a Arc<str>,
    pub namespace: &'a Arc<str>,
    pub name: &'a Arc<str>,
    pub priority: i32,
    pub started_unix_ms: Option<i64>,
    /// Being evicted by a scheduler's preemption.
    pub preempted: bool,
    /// Chosen as a victim by one of our preemptions, its deletion in flight.
    pub evicting: bool,
    pub requests: &'a ResourceList,
    pub info: &'a Arc<PodInfo>,
}

/// Accounting entry for a pod placed on a node.
#[derive(Debug, Clone)]
pub struct PlacedPod<'a> {
    pub node: &'a str,
    pub assumed: bool,
}

pub struct Cache {
    /// Only the cache interns (compiling nodes and pods); everyone else resolves.
    interner: Interner,
    registry: ResourceRegistry,
    versions: Arc<BindVersions>,
    arena: Arena,
    by_name: crate::FastMap<Arc<str>, u32>,
    slots: Vec<SlotState>,
    /// Released slots and the first publication sequence that no longer names them.
    free_slots: VecDeque<(u32, u64)>,
    pods: crate::FastMap<Arc<str>, Placement>,
    /// Placements on nodes the cache has not seen (yet): node name → pod uids.
    orphans: HashMap<Arc<str>, Vec<Arc<str>>>,
    live_nodes: usize,
    dirty: bool,
    /// The label epoch the placed pods were last converted at (`sync_labels`).
    labels_synced: u32,
    seq: u64,
    profile: Arc<Profile>,
    view: View,
    /// Snapshots carry the per-node pod index (see `enable_pod_index`).
    pod_index: bool,
    /// Placed pods on known nodes whose affinity terms score others (`scores_others`), by slot;
    /// those with required anti-affinity are in `anti_terms`. Snapshots share it.
    affinity_pods: crate::index::ScoringPods,
    namespaces: Arc<Namespaces>,
    /// Bumps of the anti-affinity epoch the cache has accounted for (`binder` step 7).
    anti_epoch: u64,
    /// Nodes by topology domain, placed pods by label, required anti-affinity terms by what
    /// they select (`index`), as the next snapshot carries them.
    index: Option<Arc<Indexes>>,
    /// The `PodInfo` pods without labels, terms or claims share, per namespace.
    plain_infos: PlainInfos,
    hostname_key: u32,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes (`volumes`).
    storage: Storage,
    /// ResourceClaims, ResourceSlices, DeviceClasses (`dra`).
    dra: crate::dra::Dra,
    /// CSI attach limits by node name id, as snapshots carry them.
    csi_limits: Arc<CsiLimits>,
    /// Node slots pods left since the last [`Cache::take_freed`] (`event::ROOM_FREED`).
    freed: Vec<u32>,
    /// Pods nominated to a node (`Cache::nominate`), by uid: the node's slot.
    nominations: crate::FastMap<Arc<str>, u32>,
    /// PodDisruptionBudgets (`pdb`), for preemption.
    pdbs: crate::pdb::Pdbs,
    /// Placed pods by the claims they use ((namespace id, claim) → uids): the pods a change to
    /// a claim or its PV re-resolves (`Cache::refresh_csi`).
    claim_users: crate::FastMap<(u32, Arc<str>), Vec<Arc<str>>>,
    /// When each watched term (`index::terms`) was last asked about, on `watch_clock`: the
    /// least recent goes when [`MAX_WATCHED`] are watched.
    watch_asked: crate::FastMap<(AffinityTerm, bool), u64>,
    watch_clock: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("cannot add node {0:?}: the engine holds at most {MAX_SLOTS} nodes")]
    Full(String),
}

fn add(list: &mut ResourceList, other: &ResourceList, sign: i64) {
    for &(s, a) in other {
        match list.binary_search_by_key(&s, |&(x, _)| x) {
            Ok(i) => list[i].1 += sign * a,
            Err(i) => list.insert(i, (s, sign * a)),
        }
    }
}

/// Count `info` on the node `meta` (`sign` 1) or off it (−1) in the term aggregates
/// (`index::terms`); nothing for a pod without terms while no term is watched.
fn count_terms(
    index: &mut Option<Arc<Indexes>>,
    meta: Option<&NodeMeta>,
    info: &PodInfo,
    sign: i64,
    ns: &Namespaces,
) {
    let watched = index.as_deref().is_some_and(|i| i.terms.watched_len() > 0);
    if info.affinity.is_none() && !watched {
        return;
    }
    let Indexes { domains, terms, .. } = Arc::make_mut(index.get_or_insert_with(Default::default));
    terms.pod(meta, info, sign, ns, domains);
}

impl Cache {
    pub fn new(versions: Arc<BindVersions>, profile: Arc<Profile>) -> Cache {
        let mut interner = Interner::default();
        let hostname_key = interner.intern(HOSTNAME_KEY);
        Cache {
            interner,
            hostname_key,
            registry: ResourceRegistry::default(),
            versions,
            arena: Arena::default(),
            by_name: Default::default(),
            slots: Vec::new(),
            free_slots: VecDeque::new(),
            pods: Default::default(),
            orphans: HashMap::new(),
            live_nodes: 0,
            dirty: true,
            labels_synced: 0,
            seq: 0,
            profile,
            view: View::All,
            pod_index: false,
            affinity_pods: Default::default(),
            namespaces: Arc::default(),
            anti_epoch: 0,
            index: None,
            plain_infos: PlainInfos::default(),
            storage: Storage::default(),
            dra: crate::dra::Dra::default(),
            csi_limits: Arc::default(),
            freed: Vec::new(),
            claim_users: Default::default(),
            watch_asked: Default::default(),
            watch_clock: 0,
            nominations: Default::default(),
            pdbs: Default::default(),
        }
    }

    /// Label, taint and node-name strings by id.
    pub fn interner(&self) -> &Interner {
        &self.interner
    }

    /// Resource names by slot.
    pub fn registry(&self) -> &ResourceRegistry {
        &self.registry
    }

    /// Both, to render failure reasons with.
    pub fn names(&self) -> Names<'_> {
        Names {
            resources: &self.registry,
            strings: &self.interner,
            pod: Default::default(),
        }
    }

    /// Compile a pod with this cache's interner and registry (the only ones its snapshots'
    /// ids and slots mean anything in).
    ///
    /// A pod whose selector reads a label key no selector read before converts the placed pods
    /// that carry that key (`sync_labels`) before it returns, so the indexes the caller asks
    /// for that key next (`index_label_keys`, `watch_terms`) count them.
    pub fn compile_pod(&mut self, input: &PodInput) -> Result<CompiledPod, ModelError> {
        let pod = compile_pod_with(
            input,
            &mut self.interner,
            &mut self.registry,
            &mut self.plain_infos,
        );
        self.sync_labels();
        pod
    }

    /// `pod` with its labels converted to the current label epoch, when some key of its
    /// `PodInfo::raw` may have become selectable since it was compiled (`None`: it has not).
    /// For a pending pod about to be handed off: the worker refuses one that is stale
    /// against its snapshot.
    pub fn converted_pod(&mut self, pod: &CompiledPod) -> Option<CompiledPod> {
        if !pod.info.stale(self.interner.label_epoch()) {
            return None;
        }
        Some(CompiledPod {
            info: Arc::new(pod.info.converted(&mut self.interner)),
            ..pod.clone()
        })
    }

    /// Convert the placed pods compiled before a label key became selectable (a label of
    /// their `PodInfo::raw` has that key): each is taken off its node, interned for the keys
    /// selectable now and put back, so every index counts it under those keys, before any
    /// selector reading them is used. The next snapshot carries the epoch
    /// (`Snapshot::label_epoch`). Costs O(placed pods) when the epoch moved (the first pod
    /// whose selector reads a key no selector read before), nothing otherwise.
    pub fn sync_labels(&mut self) {
        let epoch = self.interner.label_epoch();
        if epoch == self.labels_synced {
            return;
        }
        self.labels_synced = epoch;
        self.dirty = true;
        let interner = &self.interner;
        let stale: Vec<Arc<str>> = self
            .pods
            .iter()
            .filter(|(_, p)| p.info.has_selectable_raw(interner))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            let Some(mut p) = self.pods.remove(&uid) else {
                continue;
            };
            let slot = self.by_name.get(&*p.node).copied();
            if let Some(slot) = slot {
                self.account(slot, &p, -1);
            }
            p.info = Arc::new(p.info.converted(&mut self.interner));
            if let Some(slot) = slot {
                self.account(slot, &p, 1);
                self.write_slot(slot);
            }
            self.pods.insert(uid, p);
        }
    }

    pub fn versions(&self) -> &Arc<BindVersions> {
        &self.versions
    }

    pub fn live_nodes(&self) -> usize {
        self.live_nodes
    }

    pub fn node_slot(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn node_names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.by_name.keys()
    }

    pub fn placement(&self, uid: &str) -> Option<PlacedPod<'_>> {
        self.pods.get(uid).map(|p| PlacedPod {
            node: &p.node,
            assumed: p.assumed,
        })
    }

    pub fn placed_uids(&self) -> Vec<String> {
        self.pods.keys().map(|u| u.to_string()).collect()
    }

    pub fn placed_pods(&self) -> usize {
        self.pods.len()
    }

    pub fn set_profile(&mut self, profile: Arc<Profile>) {
        self.profile = profile;
        self.dirty = true;
    }

    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// The sharding view, carried by every snapshot from the next publication on.
    pub fn set_view(&mut self, view: View) {
        self.view = view;
        self.dirty = true;
    }

    /// Version increments of `slot` the cache has accounted for (claims it applied and its own
    /// bumps). Below the slot's counter, a claim on it is still on its way to the driver.
    pub fn applied(&self, slot: u32) -> u64 {
        self.slots.get(slot as usize).map_or(0, |s| s.applied)
    }

    /// Pods assumed on `slot` whose binding is not confirmed yet.
    pub fn assumed_on(&self, slot: u32) -> u32 {
        self.slots.get(slot as usize).map_or(0, |s| s.assumed)
    }

    /// Sequence number the next publication will carry.
    pub fn next_seq(&self) -> u64 {
        self.seq + 1
    }

    // -----------------------------------------------------------------------------------------
    // Nodes
    // -----------------------------------------------------------------------------------------

    /// Add or update a node. Returns the events the change amounts to.
    pub fn apply_node(
        &mut self,
        input: &NodeInput,
        reuse_horizon: u64,
    ) -> Result<Events, CacheError> {
        let compiled = compile_node(input, &mut self.interner, &mut self.registry)?;
        if let Some(&slot) = self.by_name.get(input.name.as_str()) {
            let old = self.slots[slot as usize]
                .node
                .as_ref()
                .expect("named slot holds a node");
            let (events, restricts) = diff_nodes(old, &compiled);
            if events == 0
                && !restricts
                && old.meta == compiled.meta
                && old.allocatable == compiled.allocatable
            {
                return Ok(0);
            }
            let old = old.meta.clone();
            let moves = self.index().domains.moves(&old, &compiled.meta);
            if moves {
                // The node's pods move to its new domains, in the term aggregates too.
                let pods = self.slots[slot as usize].pods.clone();
                for p in &pods {
                    count_terms(&mut self.index, Some(&old), p, -1, &self.namespaces);
                }
                let domains = &mut self.index_mut().domains;
                domains.node(slot, &old, -1);
                domains.node(slot, &compiled.meta, 1);
                for p in &pods {
                    count_terms(
                        &mut self.index,
                        Some(&compiled.meta),
                        p,
                        1,
                        &self.namespaces,
                    );
                }
                self.refresh_terms(slot, Some(&compiled.meta));
            }
            let st = &mut self.slots[slot as usize];
            st.node = Some(compiled);
            if restricts {
                self.bump(slot);
            }
            self.write_slot(slot);
            return Ok(events);
        }
        let slot = self.allocate_slot(&input.name, reuse_horizon)?;
        let name = compiled.meta.name.clone();
        if self.index().domains.has_keys() {
            self.index_mut().domains.node(slot, &compiled.meta, 1);
            self.refresh_terms(slot, Some(&compiled.meta));
        }
        {
            let st = &mut self.slots[slot as usize];
            st.incarnation = st.incarnation.wrapping_add(1);
            st.node = Some(compiled);
            st.used = ResourceList::new();
            st.nonzero = [0; 2];
            st.ports.clear();
            st.assumed = 0;
            st.pods.clear();
        }
        // A new incarnation must never be claimable with a version from the previous one.
        self.bump(slot);
        self.by_name.insert(name.clone(), slot);
        self.live_nodes += 1;
        if let Some(uids) = self.orphans.remove(&name) {
            for uid in uids {
                if let Some(p) = self.pods.get(&uid).cloned() {
                    self.account(slot, &p, 1);
                }
            }
        }
        self.write_slot(slot);
        Ok(event::NODE_ADDED)
    }

    fn allocate_slot(&mut self, name: &str, reuse_horizon: u64) -> Result<u32, CacheError> {
        if let Some(&(slot, free_from)) = self.free_slots.front()
            && free_from <= reuse_horizon
        {
            self.free_slots.pop_front();
            return Ok(slot);
        }
        let slot = self.slots.len();
        if slot >= MAX_SLOTS {
            return Err(CacheError::Full(name.to_owned()));
        }
        self.versions.ensure(slot);
        self.slots.push(SlotState::default());
        Ok(slot as u32)
    }

    /// Remove a node. Pods still recorded on it wait as orphans until they are deleted or the
    /// node comes back.
    pub fn delete_node(&mut self, name: &str) -> Events {
        let Some(slot) = self.by_name.remove(name) else {
            return 0;
        };
        self.bump(slot);
        let st = &mut self.slots[slot as usize];
        // Pods nominated here lose their nomination (the slot may go to another node).
        for n in st.nominees.drain(..) {
            self.nominations.remove(&n.uid);
        }
        let node = st.node.take();
        let node_name = node.as_ref().map(|n| n.meta.name.clone());
        st.used = ResourceList::new();
        st.nonzero = [0; 2];
        st.ports.clear();
        st.assumed = 0;
        let pods = std::mem::take(&mut st.pods);
        for p in &pods {
            self.affinity_pods.remove(slot, p);
            if self.pod_index {
                let index = self.index_mut();
                index.pod_labels.pod(slot, p, -1);
                index.anti_terms.pod(slot, p, -1);
            }
            let meta = node.as_ref().map(|n| &*n.meta);
            count_terms(&mut self.index, meta, p, -1, &self.namespaces);
        }
        if let Some(n) = &node
            && self.index().domains.has_keys()
        {
            self.index_mut().domains.node(slot, &n.meta, -1);
            self.refresh_terms(slot, None);
        }
        self.live_nodes -= 1;
        if let Some(node_name) = node_name {
            let uids: Vec<Arc<str>> = self
                .pods
                .iter()
                .filter(|(_, p)| p.node == node_name)
                .map(|(u, _)| u.clone())
                .collect();
            if !uids.is_empty() {
                self.orphans.entry(node_name).or_default().extend(uids);
            }
        }
        self.write_slot(slot);
        self.free_slots.push_back((slot, self.seq + 1));
        // Losing a node helps nobody.
        0
    }

    /// Replace the whole node set (a relist).
    pub fn reset_nodes(
        &mut self,
        nodes: &[NodeInput],
        reuse_horizon: u64,
    ) -> (Events, Vec<CacheError>) {
        let keep: std::collections::HashSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let gone: Vec<Arc<str>> = self
            .by_name
            .keys()
            .filter(|n| !keep.contains(&***n))
            .cloned()
            .collect();
        let mut mask = 0;
        for n in gone {
            mask |= self.delete_node(&n);
        }
        let mut errors = Vec::new();
        for n in nodes {
            match self.apply_node(n, reuse_horizon) {
                Ok(m) => mask |= m,
                Err(e) => errors.push(e),
            }
        }
        (mask, errors)
    }

    // -----------------------------------------------------------------------------------------
    // Pods
    // -----------------------------------------------------------------------------------------

    /// A pod bound to `node` (by anyone), as the watch reports it. Terminal pods are removed.
    pub fn apply_bound_pod(&mut self, pod: &CompiledPod, node: &str, terminal: bool) -> Events {
        if terminal {
            return self.remove_pod(&pod.uid);
        }
        if pod.info.has_required_anti() {
            // Its terms keep matching pods out (the symmetric rule): found through the pod
            // index.
            self.enable_pod_index();
        }
        let info = self.placed_info(pod);
        let mut placement = Placement::of(pod, info, self.intern_name(node), false);
        placement.evicting = self.pods.get(&pod.uid).is_some_and(|old| old.evicting);
        if let Some(old) = self.pods.get_mut(&pod.uid)
            && old.same(&placement)
        {
            // Our own assumption confirmed, or a no-op update.
            if std::mem::take(&mut old.assumed)
                && let Some(&slot) = self.by_name.get(&*old.node)
            {
                let st = &mut self.slots[slot as usize];
                st.assumed = st.assumed.saturating_sub(1);
            }
            return 0;
        }
        let mut mask = self.remove_pod(&pod.uid);
        if let Some(&slot) = self.by_name.get(&*placement.node) {
            mask |= event::POD_ADDED;
            // Someone else's placement (or a changed one) reduces what the node can take.
            if !mutation::skip_external_bump() {
                self.bump(slot);
            }
            self.account(slot, &placement, 1);
            self.write_slot(slot);
        } else {
            self.orphans
                .entry(placement.node.clone())
                .or_default()
                .push(pod.uid.clone());
        }
        self.index_claims(&placement);
        self.pods.insert(pod.uid.clone(), placement);
        mask
    }

    /// Record a placed pod's claims in `claim_users`.
    fn index_claims(&mut self, p: &Placement) {
        for c in p.info.claims.iter() {
            self.claim_users
                .entry((p.info.namespace, c.clone()))
                .or_default()
                .push(p.uid.clone());
        }
    }

    fn unindex_claims(&mut self, p: &Placement) {
        for c in p.info.claims.iter() {
            let k = (p.info.namespace, c.clone());
            if let Some(users) = self.claim_users.get_mut(&k) {
                users.retain(|u| *u != p.uid);
                if users.is_empty() {
                    self.claim_users.remove(&k);
                }
            }
        }
    }

    /// A pod is gone (deleted, completed, or its assumption forgotten): free its resources.
    pub fn remove_pod(&mut self, uid: &str) -> Events {
        self.unnominate(uid);
        let Some(p) = self.pods.remove(uid) else {
            return 0;
        };
        self.unindex_claims(&p);
        if let Some(&slot) = self.by_name.get(&*p.node) {
            self.account(slot, &p, -1);
            self.write_slot(slot);
            self.freed.push(slot);
            event::POD_REMOVED | event::ROOM_FREED
        } else {
            if let Some(list) = self.orphans.get_mut(&p.node) {
                list.retain(|u| &**u != uid);
                if list.is_empty() {
                    self.orphans.remove(&p.node);
                }
            }
            0
        }
    }

    /// Account for a successful claim (the CAS already advanced the counter): count the increment,
    /// and if the pod still exists and the node is the one the worker saw, assume the pod there.
    /// Returns the node name when the pod was assumed.
    pub fn apply_claim(&mut self, cand: Candidate, pod: Option<&CompiledPod>) -> Option<Arc<str>> {
        let slot = cand.slot;
        let st = &mut self.slots[slot as usize];
        st.applied += 1;
        let same_node = st.incarnation == cand.incarnation && st.node.is_some();
        let name = st.node.as_ref().map(|n| n.meta.name.clone());
        if mutation::version_before_contents() {
            self.write_slot(slot);
        }
        let result = match (pod, same_node, name) {
            (Some(pod), true, Some(name)) => {
                if pod.info.has_required_anti() {
                    self.enable_pod_index();
                }
                let info = self.placed_info(pod);
                let placement = Placement::of(pod, info, name.clone(), true);
                self.remove_pod(&pod.uid);
                self.account(slot, &placement, 1);
                self.index_claims(&placement);
                self.pods.insert(pod.uid.clone(), placement);
                Some(name)
            }
            _ => None,
        };
        if !mutation::version_before_contents() {
            self.write_slot(slot);
        }
        result
    }

    /// The node slots pods left since the last call, each once (`event::ROOM_FREED`).
    pub fn take_freed(&mut self) -> Vec<u32> {
        let mut freed = std::mem::take(&mut self.freed);
        freed.sort_unstable();
        freed.dedup();
        freed
    }

    /// A node slot, again, as one whose room is to be judged (a pod woken for it did not take
    /// it).
    pub fn refree(&mut self, slot: u32) {
        self.freed.push(slot);
    }

    /// Drop an assumption after a failed bind. Freed capacity needs no version bump.
    pub fn forget(&mut self, uid: &str) -> Events {
        match self.pods.get(uid) {
            Some(p) if p.assumed && mutation::forget_leaks() => {
                self.pods.remove(uid);
                event::POD_REMOVED
            }
            Some(p) if p.assumed => self.remove_pod(uid),
            _ => 0,
        }
    }

    fn intern_name(&mut self, node: &str) -> Arc<str> {
        if let Some((k, _)) = self.by_name.get_key_value(node) {
            return k.clone();
        }
        let id = self.interner.intern(node);
        Arc::from(self.interner.resolve(id))
    }

    fn account(&mut self, slot: u32, p: &Placement, sign: i64) {
        let st = &mut self.slots[slot as usize];
        if p.assumed {
            st.assumed = st.assumed.saturating_add_signed(sign as i32);
        }
        add(&mut st.used, &p.requests, sign);
        st.nonzero[0] += sign * p.nonzero[0];
        st.nonzero[1] += sign * p.nonzero[1];
        for hp in p.ports.iter() {
            if sign > 0 {
                let i = st.ports.partition_point(|x| x < hp);
                st.ports.insert(i, *hp);
            } else if let Ok(i) = st.ports.binary_search(hp) {
                st.ports.remove(i);
            }
        }
        if self.pod_index {
            let index = self.index_mut();
            index.pod_labels.pod(slot, &p.info, sign);
            index.anti_terms.pod(slot, &p.info, sign);
        }
        if p.info.affinity.is_some() || self.index().terms.watched_len() > 0 {
            if sign > 0 && p.info.affinity.is_some() {
                self.index_domains(Terms::carried_keys(&p.info));
            }
            let meta = self.slots[slot as usize]
                .node
                .as_ref()
                .map(|n| n.meta.clone());
            count_terms(
                &mut self.index,
                meta.as_deref(),
                &p.info,
                sign,
                &self.namespaces,
            );
        }
        let st = &mut self.slots[slot as usize];
        if sign > 0 {
            st.pods.push(p.info.clone());
            st.uids.push((p.uid.clone(), p.priority));
        } else {
            if let Some(i) = st.pods.iter().position(|x| Arc::ptr_eq(x, &p.info)) {
                st.pods.swap_remove(i);
            }
            if let Some(i) = st.uids.iter().position(|(x, _)| *x == p.uid) {
                st.uids.swap_remove(i);
            }
        }
        if scores_others(&p.info) {
            if sign > 0 {
                self.affinity_pods.insert(slot, p.info.clone());
            } else {
                self.affinity_pods.remove(slot, &p.info);
            }
        }
    }

    /// Keep the per-node pod index in snapshots from now on (`Snapshot::pods_on`): the first
    /// pod that needs it (pod affinity terms or topology spread) turns it on, so clusters that
    /// never use those features never pay for it.
    pub fn enable_pod_index(&mut self) {
        if self.pod_index {
            return;
        }
        self.pod_index = true;
        for slot in 0..self.slots.len() as u32 {
            if self.slots[slot as usize].node.is_some() {
                let index = Arc::make_mut(self.index.get_or_insert_with(Default::default));
                for p in &self.slots[slot as usize].pods {
                    index.pod_labels.pod(slot, p, 1);
                    index.anti_terms.pod(slot, p, 1);
                }
                self.write_slot(slot);
            }
        }
    }

    fn index(&self) -> &Indexes {
        self.index.as_deref().unwrap_or(Indexes::empty())
    }

    /// The indexes, to change (copied if a snapshot still shares them).
    fn index_mut(&mut self) -> &mut Indexes {
        Arc::make_mut(self.index.get_or_insert_with(Default::default))
    }

    /// Index placed pods by these label keys from now on (`index::PodLabels`): the keys a
    /// pod's selectors look placed pods up by (`CompiledPod::selector_keys`). A new key costs
    /// one pass over the placed pods.
    pub fn index_label_keys(&mut self, keys: impl IntoIterator<Item = u32>) {
        for key in keys {
            if self.index().pod_labels.indexes(key) {
                continue;
            }
            let index = Arc::make_mut(self.index.get_or_insert_with(Default::default));
            // While the pod index is off no pod is counted (`enable_pod_index` counts them).
            let placed = if self.pod_index { &self.slots[..] } else { &[] };
            let pods = placed
                .iter()
                .enumerate()
                .filter(|(_, st)| st.node.is_some())
                .flat_map(|(i, st)| st.pods.iter().map(move |p| (i as u32, &**p)));
            index.pod_labels.add_key(key, pods);
            self.dirty = true;
        }
    }

    /// Index the nodes by these topology keys from now on (`index::Domains`): the keys a pod's
    /// constraints name, so the post-claim validation finds a domain's other nodes without
    /// scanning every node.
    pub fn index_domains(&mut self, keys: impl IntoIterator<Item = u32>) {
        for key in keys {
            if self.index().domains.indexes(key) {
                continue;
            }
            let nodes = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, st)| Some((i as u32, &*st.node.as_ref()?.meta)));
            Arc::make_mut(self.index.get_or_insert_with(Default::default))
                .domains
                .add_key(key, nodes);
            self.dirty = true;
        }
    }

    pub fn pod_index(&self) -> bool {
        self.pod_index
    }

    /// Aggregate the terms `pod` asks about (its own required anti-affinity and preferred
    /// terms, its one required affinity term, and its topology spread constraints off the
    /// hostname key) by domain from now on
    /// (`index::terms`), so its PreFilter and PreScore read sums instead of scanning placed
    /// pods. Terms already watched are marked as asked.
    pub fn watch_terms(&mut self, pod: &CompiledPod) {
        let a = pod.info.affinity.as_deref();
        let terms = a
            .into_iter()
            .flat_map(|a| {
                // One required affinity term is read from its aggregate; several need a pod
                // matching all of them, which no aggregate counts.
                let required = if a.required.len() == 1 {
                    &a.required[..]
                } else {
                    &[]
                };
                required
                    .iter()
                    .chain(a.required_anti.iter())
                    .chain(a.preferred.iter().map(|(_, t)| t))
                    .chain(a.preferred_anti.iter().map(|(_, t)| t))
            })
            .map(|t| (t.clone(), false));
        let hostname = self.hostname_key;
        let ns = pod.info.namespace;
        let spreads = pod
            .spread
            .iter()
            .filter(|c| c.hard || c.topology_key != hostname)
            .map(|c| (Terms::spread_term(c, ns), true));
        let asked: Vec<(AffinityTerm, bool)> = terms.chain(spreads).collect();
        for key in asked {
            self.watch_clock += 1;
            if let Some(at) = self.watch_asked.get_mut(&key) {
                *at = self.watch_clock;
                continue;
            }
            if self.watch_asked.len() >= MAX_WATCHED
                && let Some(oldest) = self
                    .watch_asked
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(t, _)| t.clone())
            {
                self.watch_asked.remove(&oldest);
                self.index_mut().terms.unwatch((&oldest.0, oldest.1));
            }
            self.watch_now((&key.0, key.1));
            self.watch_asked.insert(key, self.watch_clock);
        }
    }

    /// How many terms are watched (`index::terms`).
    pub fn watched_terms(&self) -> usize {
        self.index().terms.watched_len()
    }

    /// Count `term`'s matching placed pods from scratch and watch it.
    fn watch_now(&mut self, term: (&AffinityTerm, bool)) {
        self.index_domains([term.0.topology_key]);
        let index = Arc::make_mut(self.index.get_or_insert_with(Default::default));
        // Only the nodes holding a pod the term may match, when the label index can say.
        let mut candidates = Vec::new();
        let slots: Vec<u32> =
            if self.pod_index && index.pod_labels.term_slots(term.0, &mut candidates) {
                candidates
            } else {
                (0..self.slots.len() as u32).collect()
            };
        let pods = slots.iter().filter_map(|&i| {
            let st = &self.slots[i as usize];
            Some((i, &*st.node.as_ref()?.meta, &st.pods[..]))
        });
        index
            .terms
            .watch(term, pods, &self.namespaces, &index.domains);
        self.dirty = true;
    }

    /// The node in `slot` is now `meta`: its bits in the term aggregates follow its domain.
    fn refresh_terms(&mut self, slot: u32, meta: Option<&NodeMeta>) {
        if !self.index().terms.is_empty() {
            self.index_mut().terms.refresh_slot(slot, meta);
        }
    }

    /// The pod as others see it once placed: its CSI volumes resolved from the storage objects.
    fn placed_info(&mut self, pod: &CompiledPod) -> Arc<PodInfo> {
        // Compiled before a key of its raw labels became selectable (`sync_labels`).
        let info = if pod.info.stale(self.interner.label_epoch())
            && pod.info.has_selectable_raw(&self.interner)
        {
            Arc::new(pod.info.converted(&mut self.interner))
        } else {
            pod.info.clone()
        };
        if pod.claims.is_empty() {
            return info;
        }
        let csi = self.storage.csi_of(&pod.namespace, &pod.claims);
        if csi == info.csi {
            return info;
        }
        Arc::new(PodInfo {
            csi,
            ..(*info).clone()
        })
    }

    /// Apply a change to the storage objects (`volumes`). Returns its events and the objects it
    /// rejected.
    pub fn apply_storage(&mut self, input: StorageInput) -> (Events, Vec<ModelError>) {
        // What placed pods' CSI volumes are resolved from (`Storage::csi_of`): a claim, the PV
        // its `volumeName` names, its class. A claim or PV change concerns the pods using that
        // claim (or the claims naming that PV); a class change or a relist, every pod.
        let claims_of = |st: &Storage, pv: &str| -> Vec<ClaimKey> { st.claims_naming(pv).to_vec() };
        // `None`: nothing to re-resolve; `Some(None)`: every pod.
        let refresh: Option<Option<Vec<ClaimKey>>> = match &input {
            StorageInput::CsiNode(_)
            | StorageInput::CsiNodeDelete(_)
            | StorageInput::CsiNodeReset(_) => None,
            StorageInput::Pvc(c) => Some(Some(vec![(
                Arc::from(c.namespace.as_str()),
                Arc::from(c.name.as_str()),
            )])),
            StorageInput::PvcDelete { namespace, name } => Some(Some(vec![(
                Arc::from(namespace.as_str()),
                Arc::from(name.as_str()),
            )])),
            StorageInput::Pv(v) => Some(Some(claims_of(&self.storage, &v.name))),
            StorageInput::PvDelete(name) => Some(Some(claims_of(&self.storage, name))),
            _ => Some(None),
        };
        let (events, errors) = self.storage.apply(input, &mut self.interner);
        for node in self.storage.take_limits_changed() {
            let id = self.interner.intern(&node);
            let limits = self.storage.limits(&node);
            let map = Arc::make_mut(&mut self.csi_limits);
            if limits.is_empty() {
                map.remove(&id);
            } else {
                map.insert(id, Arc::from(limits));
            }
            // A lower limit restricts the node: stale decisions must not be claimed.
            if let Some(&slot) = self.by_name.get(&*node) {
                self.bump(slot);
                self.write_slot(slot);
            }
            self.dirty = true;
        }
        if let Some(scope) = refresh {
            self.refresh_csi(scope);
        }
        (events, errors)
    }

    /// Placed pods with claims get their CSI volumes resolved again (a claim, PV or class
    /// changed): those using the claims of `scope` (namespace, name), or every one (`None`). A
    /// node whose pods now attach a volume they did not before can take fewer: its bind
    /// version advances, so a decision made without it is not claimed.
    fn refresh_csi(&mut self, scope: Option<Vec<ClaimKey>>) {
        let with_claims: Vec<(Arc<str>, Arc<PodInfo>)> = match scope {
            None => self
                .pods
                .iter()
                .filter(|(_, p)| !p.info.claims.is_empty())
                .map(|(uid, p)| (uid.clone(), p.info.clone()))
                .collect(),
            Some(claims) => {
                let mut uids: Vec<Arc<str>> = Vec::new();
                for (ns, name) in claims {
                    let Some(ns) = self.interner.get(&ns) else {
                        continue;
                    };
                    if let Some(users) = self.claim_users.get(&(ns, name)) {
                        uids.extend(users.iter().cloned());
                    }
                }
                uids.sort_unstable();
                uids.dedup();
                uids.into_iter()
                    .filter_map(|u| self.pods.get(&u).map(|p| (u, p.info.clone())))
                    .collect()
            }
        };
        let mut stale: Vec<(Arc<str>, CsiVolumes)> = Vec::new();
        for (uid, info) in with_claims {
            let ns = self.interner.resolve(info.namespace).to_owned();
            let claims: Vec<(Arc<str>, bool)> =
                info.claims.iter().map(|c| (c.clone(), false)).collect();
            let csi = self.storage.csi_of(&ns, &claims);
            if csi != info.csi {
                stale.push((uid, csi));
            }
        }
        for (uid, csi) in stale {
            let Some(mut p) = self.pods.get(&uid).cloned() else {
                continue;
            };
            let slot = self.by_name.get(&*p.node).copied();
            if let Some(slot) = slot {
                self.account(slot, &p, -1);
                if csi.iter().any(|v| p.info.csi.binary_search(v).is_err()) {
                    self.bump(slot);
                }
            }
            p.info = Arc::new(PodInfo {
                csi,
                ..(*p.info).clone()
            });
            if let Some(slot) = slot {
                self.account(slot, &p, 1);
                self.write_slot(slot);
            }
            self.pods.insert(uid, p);
        }
    }

    /// Resolve a pod's claims for its hand-off (`volumes::Storage::resolve`). `in_flight(claim)`:
    /// a pod the cache has not placed yet (handed off or binding) uses that ReadWriteOncePod
    /// claim.
    pub fn resolve_volumes(
        &self,
        pod: &CompiledPod,
        in_flight: impl Fn(&str) -> bool,
    ) -> PodVolumes {
        let ns = pod.info.namespace;
        let (pods, uid) = (&self.pods, &pod.uid);
        let placed = |claim: &str| {
            pods.iter().any(|(u, p)| {
                u != uid && p.info.namespace == ns && p.info.claims.iter().any(|c| &**c == claim)
            })
        };
        self.storage
            .resolve(&pod.namespace, &pod.uid, &pod.claims, |claim| {
                placed(claim) || in_flight(claim)
            })
    }

    /// The description of the node in `slot`, if one lives there.
    pub fn node_meta(&self, slot: u32) -> Option<Arc<NodeMeta>> {
        self.slots
            .get(slot as usize)?
            .node
            .as_ref()
            .map(|n| n.meta.clone())
    }

    /// Reserve PVs for a pod whose claimed decision chose them (`volumes::matching`).
    pub fn reserve_pvs(&mut self, uid: &Arc<str>, pvs: impl IntoIterator<Item = Arc<str>>) {
        self.storage.reserve(uid, pvs);
    }

    /// Release the PVs reserved for a pod (its bind ended or it is gone): the PVs it did not
    /// take may go to other pods, which the storage change wakes.
    pub fn release_pvs(&mut self, uid: &str) -> Events {
        if self.storage.release(uid) {
            event::STORAGE_CHANGED
        } else {
            0
        }
    }

    /// Apply a change to the ResourceClaims, ResourceSlices or DeviceClasses (`dra`). Returns
    /// its events and the objects it rejected. A claim allocated by someone else takes devices
    /// of the nodes it names: their versions move, so a decision made without it is not
    /// claimed.
    pub fn apply_dra(
        &mut self,
        input: crate::dra::DraInput,
    ) -> (Events, Vec<ModelError>, crate::dra::Touched) {
        let crate::dra::Applied {
            events,
            errors,
            taken_nodes,
            touched,
        } = self.dra.apply(input, &mut self.interner);
        for node in taken_nodes {
            let name = self.interner.resolve(node).to_owned();
            if let Some(&slot) = self.by_name.get(name.as_str())
                && !mutation::skip_external_bump()
            {
                self.bump(slot);
                self.write_slot(slot);
            }
        }
        self.dirty = true;
        (events, errors, touched)
    }

    /// Resolve a pod's ResourceClaims for its hand-off (`dra::Dra::resolve`), with the
    /// profile's DRA switch.
    pub fn resolve_claims(&mut self, pod: &CompiledPod) -> crate::dra::PodClaims {
        let enabled = self.profile.dynamic_resources;
        let mut claims = self.dra.resolve(
            &pod.namespace,
            &pod.uid,
            &pod.resource_claims,
            enabled,
            &mut self.interner,
        );
        // A selector failing on a device of the cluster holds the pod back (upstream's Filter
        // error: binding it elsewhere would hide the problem).
        let failed = claims.selector_errors.iter().find(|(node, _)| {
            node.is_none_or(|n| self.by_name.contains_key(self.interner.resolve(n)))
        });
        if claims.blocked.is_none()
            && let Some((_, e)) = failed
        {
            claims.invalid = Some(e.clone());
            claims.blocked = Some(crate::dra::Blocked::Invalid);
        }
        // Extended resources a class provides: the claim made for them, last (`dra::extended`).
        if claims.blocked.is_none()
            && enabled
            && let Some(ext) = &pod.extended
        {
            let registry = &self.registry;
            let slot_of = |name: &str| {
                pod.requests
                    .iter()
                    .find(|&&(s, _)| registry.name(s) == name)
                    .map(|&(s, _)| s)
            };
            self.dra.resolve_extended(
                &pod.namespace,
                &pod.uid,
                ext,
                slot_of,
                &mut self.interner,
                &mut claims,
            );
        }
        if claims.blocked.is_none() && !claims.claims.is_empty() {
            claims.devices = Some(self.dra.snapshot());
        }
        claims
    }

    /// The devices for a pod's claims on the node in `slot` with what the cache holds now (not
    /// the hand-off's view: every decision applied since counts), assumed for the pod; what the
    /// adapter writes for each claim. `None`: they no longer fit there (the decision is void).
    pub fn allocate_claims(
        &mut self,
        pod: &CompiledPod,
        handed: &crate::dra::PodClaims,
        slot: u32,
    ) -> Option<Vec<crate::dra::ClaimAllocation>> {
        let meta = self.node_meta(slot)?;
        let fresh;
        let claims = if mutation::dra_trust_worker() {
            handed
        } else {
            // Claims resolved at hand-off may have been allocated since (shared claims), and
            // their devices taken by decisions applied since: resolve them again.
            fresh = self.resolve_claims(pod);
            if fresh.blocked.is_some() {
                return None;
            }
            &fresh
        };
        // The node's allocatable decides which extended resources devices provide there.
        let chunk = self.arena.chunk(slot as usize / crate::snapshot::CHUNK);
        let i = slot as usize % crate::snapshot::CHUNK;
        let mask = claims
            .extended
            .as_ref()
            .map(|e| e.provided(|s| chunk.alloc(s, i)));
        let on_node = claims.for_node(|s| chunk.alloc(s, i));
        if on_node.is_empty() {
            return Some(Vec::new());
        }
        let snap = claims.devices.clone()?;
        let given =
            crate::dra::allocator::allocate(&snap.devices, &snap.in_use, &on_node, &meta).ok()?;
        let mut out = self
            .dra
            .assume(&pod.uid, &on_node, &given, &meta, &mut self.interner);
        if let (Some(e), Some(mask)) = (&claims.extended, mask) {
            for a in out
                .iter_mut()
                .filter(|a| crate::dra::extended::is_special(&a.name))
            {
                a.create = Some(e.new_claim(mask));
            }
        }
        Some(out)
    }

    /// Does the pod ask for extended resources some DeviceClass could provide (its claims are
    /// resolved at hand-off even without `spec.resourceClaims`)?
    pub fn dra_extended(&self, pod: &CompiledPod) -> bool {
        pod.extended.is_some() && self.profile.dynamic_resources && self.dra.any_class()
    }

    /// A claim of `pod` to deallocate because it fits nowhere (`dra::Dra::deallocatable`).
    pub fn deallocatable(&self, pod: &CompiledPod) -> Option<crate::dra::Deallocation> {
        self.dra
            .deallocatable(&pod.namespace, &pod.resource_claims)
            .or_else(|| {
                pod.extended
                    .as_ref()
                    .and_then(|_| self.dra.stale_extended(&pod.uid))
            })
    }

    /// Drop the devices the pod `uid` assumed (its bind did not go through, or it is gone).
    /// Returns the claims it had assumed (their waiting pods are woken by name, and the devices
    /// freed wake the pods that lacked some).
    pub fn release_claims(&mut self, uid: &str) -> Vec<crate::dra::ClaimKey> {
        let keys = self.dra.release(uid);
        if !keys.is_empty() {
            self.dirty = true;
        }
        keys
    }

    /// A lane claim bumped the anti-affinity epoch (`binder` step 7): the next snapshot holds it.
    pub fn count_anti_bump(&mut self) {
        self.anti_epoch += 1;
        self.dirty = true;
    }

    /// A namespace and its labels (for `namespaceSelector`); `None` removes it.
    pub fn set_namespace(&mut self, name: &str, labels: Option<&[(String, String)]>) -> Events {
        self.put_namespace(name, labels);
        self.recount_namespace_terms();
        event::NAMESPACE_CHANGED
    }

    fn put_namespace(&mut self, name: &str, labels: Option<&[(String, String)]>) {
        let id = self.interner.intern(name);
        let ns = Arc::make_mut(&mut self.namespaces);
        match labels {
            Some(l) => ns.set(id, compile_labels(l, &mut self.interner)),
            None => ns.remove(id),
        }
        self.dirty = true;
    }

    /// Count the watched terms with a namespace selector again (a namespace's labels changed).
    fn recount_namespace_terms(&mut self) {
        for (t, live_only) in self.index().terms.watched_by_namespace_labels() {
            self.watch_now((&t, live_only));
        }
    }

    /// Every namespace (a relist).
    pub fn reset_namespaces(&mut self, all: &[NamespaceInput]) -> Events {
        Arc::make_mut(&mut self.namespaces).clear();
        for n in all {
            self.put_namespace(&n.name, Some(&n.labels));
        }
        self.recount_namespace_terms();
        self.dirty = true;
        event::NAMESPACE_CHANGED
    }

    fn bump(&mut self, slot: u32) {
        self.versions.bump(slot as usize);
        self.slots[slot as usize].applied += 1;
    }

    /// Write the slot's state into the working arena (copy-on-write of its chunk).
    fn write_slot(&mut self, slot: u32) {
        self.dirty = true;
        write_state(
            &mut self.arena,
            slot,
            &self.slots[slot as usize],
            self.pod_index,
        );
    }

    /// Publish the working arena as a new snapshot if anything changed since the last one.
    pub fn publish(&mut self) -> Option<Arc<Snapshot>> {
        self.sync_labels();
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        self.seq += 1;
        Some(Arc::new(Snapshot {
            seq: self.seq,
            arena: self.arena.clone(),
            nodes: self.live_nodes,
            profile: self.profile.clone(),
            gpu_slot: self.registry.lookup("nvidia.com/gpu"),
            view: self.view.clone(),
            pods_indexed: self.pod_index,
            affinity_pods: self.affinity_pods.clone(),
            namespaces: self.namespaces.clone(),
            anti_epoch: self.anti_epoch,
            label_epoch: self.labels_synced,
            hostname_key: self.hostname_key,
            csi_limits: self.csi_limits.clone(),
            nominated: self.nominations.len(),
            index: self.index.clone(),
        }))
    }

    /// A snapshot of the cache as it is now, but with the pods `removed` (uids) gone from the
    /// node in `slot`: what preemption asks of the filters (`preemption`). The working arena is
    /// shared, and only that node's chunk is copied; nothing of the cache changes.
    pub fn without(&self, slot: u32, removed: &[Arc<str>]) -> Snapshot {
        let mut st = self.slots[slot as usize].clone();
        let mut gone_infos: Vec<&Arc<PodInfo>> = Vec::new();
        for uid in removed {
            let Some(p) = self
                .pods
                .get(uid)
                .filter(|p| self.by_name.get(&*p.node) == Some(&slot))
            else {
                continue;
            };
            add(&mut st.used, &p.requests, -1);
            st.nonzero[0] -= p.nonzero[0];
            st.nonzero[1] -= p.nonzero[1];
            for hp in p.ports.iter() {
                if let Ok(i) = st.ports.binary_search(hp) {
                    st.ports.remove(i);
                }
            }
            if let Some(i) = st.pods.iter().position(|x| Arc::ptr_eq(x, &p.info)) {
                st.pods.remove(i);
            }
            st.uids.retain(|(u, _)| u != uid);
            gone_infos.push(&p.info);
        }
        let mut arena = self.arena.clone();
        write_state(&mut arena, slot, &st, self.pod_index);
        let mut affinity_pods = self.affinity_pods.clone();
        for g in &gone_infos {
            affinity_pods.remove(slot, g);
        }
        Snapshot {
            seq: self.seq,
            arena,
            nodes: self.live_nodes,
            profile: self.profile.clone(),
            gpu_slot: self.registry.lookup("nvidia.com/gpu"),
            view: self.view.clone(),
            pods_indexed: self.pod_index,
            affinity_pods,
            namespaces: self.namespaces.clone(),
            anti_epoch: self.anti_epoch,
            label_epoch: self.labels_synced,
            hostname_key: self.hostname_key,
            csi_limits: self.csi_limits.clone(),
            nominated: self.nominations.len(),
            // They may still name the slot for the pods gone: their readers check every pod
            // they find on it. The term aggregates would count them: readers scan instead.
            index: self.index.as_ref().map(|i| {
                Arc::new(Indexes {
                    terms: i.terms.partial(),
                    ..(**i).clone()
                })
            }),
        }
    }

    /// The pods counted on the node in `slot`, as preemption weighs them: (uid, namespace,
    /// name, priority, start time, how others see it).
    pub fn pods_on(&self, slot: u32) -> impl Iterator<Item = PlacedView<'_>> {
        self.slots[slot as usize]
            .uids
            .iter()
            .filter_map(|(u, _)| self.pods.get(u))
            .map(|p| PlacedView {
                uid: &p.uid,
                namespace: &p.namespace,
                name: &p.name,
                priority: p.priority,
                started_unix_ms: p.started_unix_ms,
                preempted: p.preempted,
                evicting: p.evicting,
                requests: &p.requests,
                info: &p.info,
            })
    }

    /// Our preemption chose `uid` as a victim: until it is gone it counts as terminating by
    /// preemption (`preemption::eligible`), whatever its updates say meanwhile.
    pub fn mark_evicting(&mut self, uid: &str) {
        if let Some(p) = self.pods.get_mut(uid) {
            p.evicting = true;
        }
    }

    /// Does the node in `slot` hold a pod of priority below `priority`? (No lookups.)
    pub fn has_lower(&self, slot: u32, priority: i32) -> bool {
        self.slots[slot as usize]
            .uids
            .iter()
            .any(|&(_, p)| p < priority)
    }

    /// Node slots (live or not).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Live nodes.
    pub fn node_count(&self) -> usize {
        self.live_nodes
    }

    /// A node lives in `slot` and the sharding view admits it.
    pub fn admits(&self, slot: u32) -> bool {
        let i = slot as usize;
        self.slots.get(i).is_some_and(|s| s.node.is_some())
            && self.view.admits(i / CHUNK) & (1 << (i % CHUNK)) != 0
    }

    /// Some placed pod has pod (anti-)affinity terms (their symmetric rules read other pods).
    pub fn has_affinity_pods(&self) -> bool {
        !self.affinity_pods.is_empty() || !self.index().anti_terms.is_empty()
    }

    /// The name of the node in `slot`.
    pub fn node_name(&self, slot: u32) -> Option<Arc<str>> {
        self.slots
            .get(slot as usize)?
            .node
            .as_ref()
            .map(|n| n.meta.name.clone())
    }

    /// What the pods on the node in `slot` use, and its allocatable.
    pub fn slot_usage(&self, slot: u32) -> (ResourceList, ResourceList) {
        let st = &self.slots[slot as usize];
        let alloc = st
            .node
            .as_ref()
            .map(|n| n.allocatable.clone())
            .unwrap_or_default();
        (st.used.clone(), alloc)
    }

    /// The PodDisruptionBudgets (`pdb`).
    pub fn pdbs(&self) -> &crate::pdb::Pdbs {
        &self.pdbs
    }

    /// Apply a change to the PodDisruptionBudgets; the ones rejected.
    pub fn apply_pdb(&mut self, change: crate::pdb::PdbChange) -> Vec<ModelError> {
        let errors = self.pdbs.apply(change, &mut self.interner);
        // A budget's selector reads placed pods' labels (`pdb::Pdbs::violations`).
        self.sync_labels();
        errors
    }

    /// Nominate `uid` (priority, requests) to the node in `slot` (`preemption`): its room there
    /// is kept for it from now on against pods of no higher priority. That restricts the node
    /// for them, so its version is bumped: a decision made without the nomination is never
    /// claimed. A pod nominated elsewhere before moves.
    pub fn nominate(&mut self, uid: &Arc<str>, slot: u32, priority: i32, requests: ResourceList) {
        self.unnominate(uid);
        let st = &mut self.slots[slot as usize];
        if st.node.is_none() {
            return;
        }
        st.nominees.push(Nominee {
            uid: uid.clone(),
            priority,
            requests,
        });
        self.nominations.insert(uid.clone(), slot);
        if !mutation::nomination_without_bump() {
            self.bump(slot);
        }
        self.write_slot(slot);
    }

    /// Drop `uid`'s nomination, if it has one (placed, gone, or its preemption failed). Freed
    /// room needs no version bump; the node is one whose room is to be judged
    /// (`take_freed`). Returns the node slot it was nominated to.
    pub fn unnominate(&mut self, uid: &str) -> Option<u32> {
        let slot = self.nominations.remove(uid)?;
        let st = &mut self.slots[slot as usize];
        st.nominees.retain(|n| &*n.uid != uid);
        self.freed.push(slot);
        self.write_slot(slot);
        Some(slot)
    }

    /// The node slot `uid` is nominated to.
    pub fn nomination(&self, uid: &str) -> Option<u32> {
        self.nominations.get(uid).copied()
    }

    /// The pods nominated to the node in `slot`.
    pub fn nominees_on(&self, slot: u32) -> &[Nominee] {
        &self.slots[slot as usize].nominees
    }

    /// Sum of requests counted on `node`, and its allocatable, for integrity checks.
    pub fn node_usage(&self, name: &str) -> Option<(ResourceList, ResourceList)> {
        let slot = *self.by_name.get(name)?;
        let st = &self.slots[slot as usize];
        Some((st.used.clone(), st.node.as_ref()?.allocatable.clone()))
    }

    pub fn nonzero_usage(&self, name: &str) -> Option<(i64, i64)> {
        let slot = *self.by_name.get(name)?;
        let st = &self.slots[slot as usize];
        Some((st.nonzero[CPU as usize], st.nonzero[MEMORY as usize]))
    }
}

impl NodeBook for Cache {
    fn slot(&self, node: &str) -> Option<u32> {
        self.node_slot(node)
    }

    fn applied(&self, slot: u32) -> u64 {
        Cache::applied(self, slot)
    }

    fn counter(&self, slot: u32) -> u64 {
        self.versions.current(slot as usize)
    }

    fn binding(&self, slot: u32) -> u32 {
        self.assumed_on(slot)
    }
}

/// What changed between two versions of a node: the events it amounts to, and whether it
/// restricts the node (so stale decisions must be invalidated by a version bump: any change a
/// filter could read that can only make fewer pods fit).
fn diff_nodes(old: &CompiledNode, new: &CompiledNode) -> (Events, bool) {
    let mut events = 0;
    let mut restricts = false;
    if old.meta.labels != new.meta.labels {
        events |= event::NODE_LABELS_CHANGED;
        restricts = true;
    }
    if old.meta.taints != new.meta.taints {
        let removed = old.meta.taints.iter().any(|t| !new.meta.taints.contains(t));
        let added = new.meta.taints.iter().any(|t| !old.meta.taints.contains(t));
        if removed {
            events |= event::NODE_TAINT_REMOVED;
        }
        restricts |= added;
    }
    if old.meta.unschedulable != new.meta.unschedulable {
        if new.meta.unschedulable {
            restricts = true;
        } else {
            events |= event::NODE_SCHEDULABLE;
        }
    }
    let get = |l: &ResourceList, s| l.iter().find(|&&(x, _)| x == s).map_or(0, |&(_, a)| a);
    for &(s, a) in &new.allocatable {
        if a > get(&old.allocatable, s) {
            events |= event::NODE_ALLOCATABLE_GREW;
        }
    }
    for &(s, a) in &old.allocatable {
        if get(&new.allocatable, s) < a {
            restricts = true;
        }
    }
    (events, restricts)
}

/// Write a slot's state into an arena (copy-on-write of its chunk): the working arena, or a
/// what-if copy of it (`Cache::without`).
fn write_state(arena: &mut Arena, slot: u32, st: &SlotState, pod_index: bool) {
    let i = slot as usize % CHUNK;
    let chunk = arena.chunk_mut(slot as usize);
    chunk.version[i] = st.applied;
    chunk.incarnation[i] = st.incarnation;
    let Some(node) = &st.node else {
        chunk.flags[i] = 0;
        if chunk.meta[i].is_some() {
            Arc::make_mut(&mut chunk.meta)[i] = None;
        }
        if chunk.ports[i].is_some() {
            Arc::make_mut(&mut chunk.ports)[i] = None;
        }
        if chunk.pods[i].is_some() {
            Arc::make_mut(&mut chunk.pods)[i] = None;
        }
        chunk.csi_refs[i] = 0;
        if chunk.nominees[i].is_some() {
            Arc::make_mut(&mut chunk.nominees)[i] = None;
        }
        for r in chunk.free.iter_mut().chain(chunk.alloc.iter_mut()) {
            r[i] = 0;
        }
        chunk.nonzero_used[0][i] = 0;
        chunk.nonzero_used[1][i] = 0;
        return;
    };
    // Rows up to the highest slot this node offers (`allocatable` is sorted by slot): a
    // chunk never holds rows for names none of its nodes offer.
    if let Some(&(top, _)) = node.allocatable.last() {
        chunk.ensure_rows(top);
    }
    for r in 0..chunk.free.len() {
        chunk.alloc[r][i] = 0;
        chunk.free[r][i] = 0;
    }
    for &(s, a) in &node.allocatable {
        chunk.alloc[s as usize][i] = a;
        chunk.free[s as usize][i] = a;
    }
    let rows = chunk.free.len();
    for &(s, u) in &st.used {
        // No row: no node of this chunk offers the name (a pod bound by someone else asked
        // for it); its free amount reads as 0, which no positive request fits.
        if (s as usize) < rows {
            chunk.free[s as usize][i] -= u;
        }
    }
    chunk.nonzero_used[0][i] = st.nonzero[0];
    chunk.nonzero_used[1][i] = st.nonzero[1];
    let meta: &Arc<NodeMeta> = &node.meta;
    let f = plugins::node_flags(&NodeFacts {
        meta,
        ports: &st.ports,
        nominated: !st.nominees.is_empty(),
    });
    let same = match &chunk.nominees[i] {
        Some(n) => **n == *st.nominees,
        None => st.nominees.is_empty(),
    };
    if !same {
        Arc::make_mut(&mut chunk.nominees)[i] =
            (!st.nominees.is_empty()).then(|| Arc::from(st.nominees.as_slice()));
    }
    if !st.ports.is_empty() {
        let same = chunk.ports[i].as_deref().is_some_and(|p| *p == *st.ports);
        if !same {
            Arc::make_mut(&mut chunk.ports)[i] = Some(Arc::from(st.ports.as_slice()));
        }
    } else if chunk.ports[i].is_some() {
        Arc::make_mut(&mut chunk.ports)[i] = None;
    }
    chunk.flags[i] = f;
    if pod_index {
        let same = match &chunk.pods[i] {
            Some(p) => {
                p.len() == st.pods.len() && p.iter().zip(&st.pods).all(|(a, b)| Arc::ptr_eq(a, b))
            }
            None => st.pods.is_empty(),
        };
        if !same {
            Arc::make_mut(&mut chunk.pods)[i] =
                (!st.pods.is_empty()).then(|| Arc::from(st.pods.as_slice()));
            let refs: usize = st.pods.iter().map(|p| p.csi.len()).sum();
            chunk.csi_refs[i] = u16::try_from(refs).unwrap_or(u16::MAX);
        }
    }
    if !chunk.meta[i].as_ref().is_some_and(|m| Arc::ptr_eq(m, meta)) {
        Arc::make_mut(&mut chunk.meta)[i] = Some(meta.clone());
    }
}

#[cfg(test)]
mod tests;
