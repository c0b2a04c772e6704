//! Storage: the PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes the
//! volume plugins need, kept by the driver (single writer), and the resolution of a pod's
//! volumes into what the workers check ([`PodVolumes`], carried by the task).
//!
//! A pod's claims are resolved when it is handed off. What blocks it on every node, checked in
//! kube-scheduler's order (the first found is reported):
//!
//! 1. a missing claim of a `persistentVolumeClaim` volume (VolumeRestrictions PreFilter);
//! 2. per claim in the pod's order (VolumeBinding PreFilter, `podHasPVCs`): missing (an
//!    ephemeral volume's claim: not created yet), refused at input (Magma only, see
//!    [`Blocked::Invalid`]), in phase `Lost`, being deleted, an ephemeral volume's claim the pod
//!    does not own;
//! 3. an unbound claim that is not left to the scheduler (`GetPodVolumeClaims`): a claim is
//!    bound only when it names a volume and the PV controller completed the bind
//!    (`pv.kubernetes.io/bind-completed`, `isPVCFullyBound`); one that names a volume without it
//!    (pre-bound by its user), one without a class, of a missing class or of an `Immediate`
//!    class is `pod has unbound immediate PersistentVolumeClaims`;
//! 4. a bound claim whose PV does not exist;
//! 5. a `ReadWriteOncePod` claim another pod uses (VolumeRestrictions Filter, every node).
//!
//! Bound claims give their PV's node affinity and zone labels (VolumeBinding, VolumeZone) and
//! CSI volume (NodeVolumeLimits); unbound claims of a `WaitForFirstConsumer` class take an
//! existing PV (`matching`) or are provisioned after the claim: the bind intent asks the adapter
//! to write `volume.kubernetes.io/selected-node` on them and wait until they are bound before
//! binding the pod (kube-scheduler's Reserve/PreBind).
//!
//! Owns only this storage view; it touches nothing else. Every input is validated and a bad
//! object is reported without changing how others are handled.

mod matching;

pub use matching::{Assignment, PvCandidate, assign, mode_bits};

use crate::event::{self, Events};
use crate::model::PodNames;
use crate::model::{
    Interner, LabelSelector, LabelSelectorInput, ModelError, SelectorTermInput, Term,
    compile_labels, compile_other_selector, parse_scaled,
};
// A pod's volumes are part of the pod (`model`); the claims they name are resolved here.
pub use crate::model::PodVolumeInput;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// `volume.kubernetes.io/selected-node`: the node the scheduler picked for a WFFC claim.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// Zone and region labels VolumeZone compares (GA and beta keys).
pub const ZONE_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// CSI attach limits by node name id: (driver id, count), sorted by driver.
pub type CsiLimits = BTreeMap<u32, Arc<[(u32, i64)]>>;

/// CSI volumes (driver id, volume handle), each once, sorted: what NodeVolumeLimits counts.
/// A claim not bound to a CSI volume yet counts under its class's provisioner with a handle of
/// its own ([`UNBOUND_HANDLE_PREFIX`]), as kube-scheduler's synthetic handle.
///
/// Handles are kept as strings, not interned: each provisioned volume has one of its own, and
/// an interned handle would stay in the interner for the life of the process (a volume per
/// sandbox, for good). A handle goes with the last PV, claim or placed pod that holds it.
pub type CsiVolumes = Box<[CsiVolume]>;

/// One CSI volume: (driver id, volume handle).
pub type CsiVolume = (u32, Arc<str>);

/// Prefix of the handle an unbound claim counts with (`<prefix><namespace>/<claim>`):
/// kube-scheduler uses a random prefix chosen at start; this one cannot be a CSI volume handle
/// in practice either, and keeps test output readable.
pub const UNBOUND_HANDLE_PREFIX: &str = "\u{0}unbound/";

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvcInput {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub storage_class: Option<String>,
    /// `spec.volumeName`.
    pub volume_name: Option<String>,
    /// `spec.volumeName` is set but the PV controller has not completed the bind (no
    /// `pv.kubernetes.io/bind-completed` annotation): a claim pre-bound by its user, not bound
    /// yet (kube-scheduler's `isPVCFullyBound`). False by default: a claim naming a volume is
    /// bound unless the adapter says otherwise.
    pub prebound: bool,
    /// `status.phase` (`Lost`: its PV is gone).
    pub phase: String,
    pub access_modes: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `metadata.ownerReferences` names this pod uid as its controller (ephemeral volumes).
    pub owner_uid: Option<String>,
    /// `spec.resources.requests.storage`.
    pub request: Option<String>,
    /// `spec.volumeMode` (`Filesystem` when absent).
    pub volume_mode: Option<String>,
    /// `spec.selector`: the labels a PV must have to be bound to it statically.
    pub selector: Option<LabelSelectorInput>,
}

/// A PersistentVolume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvInput {
    pub name: String,
    pub labels: Vec<(String, String)>,
    /// `spec.nodeAffinity.required.nodeSelectorTerms`.
    pub node_affinity: Option<Vec<SelectorTermInput>>,
    /// `spec.csi`: (driver, volumeHandle).
    pub csi: Option<(String, String)>,
    /// `spec.capacity.storage`.
    pub capacity: Option<String>,
    pub access_modes: Vec<String>,
    /// `spec.volumeMode` (`Filesystem` when absent).
    pub volume_mode: Option<String>,
    /// `spec.storageClassName` (or the beta annotation).
    pub storage_class: Option<String>,
    /// `status.phase`.
    pub phase: String,
    /// `spec.claimRef`: (namespace, name).
    pub claim_ref: Option<(String, String)>,
    /// `spec.claimRef.uid`: when set, the PV is bound to the claim of that uid only.
    pub claim_ref_uid: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

/// A StorageClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageClassInput {
    pub name: String,
    pub provisioner: String,
    /// `Immediate` (default) or `WaitForFirstConsumer`.
    pub binding_mode: String,
    /// `allowedTopologies` as node selector terms (`matchLabelExpressions`, operator In).
    pub allowed_topologies: Vec<SelectorTermInput>,
}

/// A CSINode: per driver, `allocatable.count` (None: no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNodeInput {
    pub node: String,
    pub drivers: Vec<(String, Option<i64>)>,
}

/// A change to the storage objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageInput {
    Pvc(PvcInput),
    PvcDelete { namespace: String, name: String },
    PvcReset(Vec<PvcInput>),
    Pv(PvInput),
    PvDelete(String),
    PvReset(Vec<PvInput>),
    Class(StorageClassInput),
    ClassDelete(String),
    ClassReset(Vec<StorageClassInput>),
    CsiNode(CsiNodeInput),
    CsiNodeDelete(String),
    CsiNodeReset(Vec<CsiNodeInput>),
}

/// Why no node can take the pod because of its volumes (kube-scheduler's PreFilter reasons).
/// A claim of the pod is named by its position among the pod's volume claims (`VolumeAt`), the
/// pod by the pod the reason is rendered for (`PodNames`): neither is interned, as an
/// ephemeral volume's claim name is unique to its pod and would stay in the interner for good.
/// The one text a reason needs beyond those (why a claim was refused, the volume a lost claim
/// names) is kept with the pod's resolution (`PodVolumes::detail`), not interned either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// `persistentvolumeclaim "X" not found`.
    MissingClaim(VolumeAt),
    /// `waiting for ephemeral volume controller to create the persistentvolumeclaim "X"`.
    EphemeralPending(VolumeAt),
    /// `persistentvolumeclaim "X" is being deleted`.
    ClaimDeleted(VolumeAt),
    /// `persistentvolumeclaim "X" bound to non-existent persistentvolume "Y"`: the claim is in
    /// phase `Lost` (`Y`, its `spec.volumeName`, is `PodVolumes::detail`).
    ClaimLost(VolumeAt),
    /// `invalid persistentvolumeclaim "X": <why>`: Magma refused the claim at input (a request
    /// above 2^62 bytes, a selector it cannot compile), so it cannot decide for it (`why` is
    /// `PodVolumes::detail`). Magma only: kube-scheduler would take the claim.
    Invalid(VolumeAt),
    /// `PVC <ns>/<claim> was not created for pod <ns>/<pod> (pod is not owner)`: an ephemeral
    /// volume's claim whose controller is not the pod.
    NotOwner(VolumeAt),
    /// `pod has unbound immediate PersistentVolumeClaims`.
    UnboundImmediate,
    /// `node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)`: VolumeBinding
    /// Filter's reason, the same on every node.
    MissingVolume,
    /// `node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access
    /// mode`.
    ReadWriteOncePod,
}

/// One of a pod's volume claims, by its position among them (`CompiledPod::claims`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VolumeAt(pub u32);

impl VolumeAt {
    fn name<'a>(self, pod: &PodNames<'a>) -> &'a str {
        pod.volume_claims
            .get(self.0 as usize)
            .map_or("", |(n, _)| &**n)
    }
}

impl Blocked {
    /// Upstream's text, for `pod`, the pod it blocks.
    pub fn message(&self, pod: &PodNames<'_>) -> String {
        let detail = pod.volumes_detail.unwrap_or_default();
        let ns = pod.namespace;
        match self {
            Blocked::MissingClaim(c) => {
                format!("persistentvolumeclaim \"{}\" not found", c.name(pod))
            }
            Blocked::EphemeralPending(c) => format!(
                "waiting for ephemeral volume controller to create the persistentvolumeclaim \"{}\"",
                c.name(pod)
            ),
            Blocked::ClaimDeleted(c) => {
                format!("persistentvolumeclaim \"{}\" is being deleted", c.name(pod))
            }
            Blocked::ClaimLost(c) => format!(
                "persistentvolumeclaim \"{}\" bound to non-existent persistentvolume \"{detail}\"",
                c.name(pod),
            ),
            Blocked::Invalid(c) => {
                format!(
                    "invalid persistentvolumeclaim \"{}\": {detail}",
                    c.name(pod),
                )
            }
            Blocked::NotOwner(c) => format!(
                "PVC {ns}/{} was not created for pod {ns}/{} (pod is not owner)",
                c.name(pod),
                pod.name
            ),
            Blocked::UnboundImmediate => "pod has unbound immediate PersistentVolumeClaims".into(),
            Blocked::MissingVolume => {
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)".into()
            }
            Blocked::ReadWriteOncePod => "node has pod using PersistentVolumeClaim with the same \
                 name and ReadWriteOncePod access mode"
                .into(),
        }
    }

    /// What can unblock it.
    pub fn wake(&self) -> Events {
        match self {
            Blocked::ReadWriteOncePod => event::POD_REMOVED | event::STORAGE_CHANGED,
            _ => event::STORAGE_CHANGED,
        }
    }
}

/// A bound claim, as the filters check it.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundVolume {
    /// The PV's required node affinity (terms ORed); `None`: any node.
    pub node_affinity: Option<Box<[Term]>>,
    /// The PV's zone/region labels: (key, allowed values) (a value may list several, `__`).
    pub zones: Box<[(u32, Box<[u32]>)]>,
}

/// A claim to provision on the chosen node (`WaitForFirstConsumer`).
#[derive(Debug, Clone, PartialEq)]
pub struct Provision {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// The class's allowed topologies (terms ORed); `None`: any node.
    pub allowed: Option<Box<[Term]>>,
    /// The class's provisioner (a CSI driver: one new volume for attach limits).
    pub driver: u32,
    /// The class can provision a new volume: its provisioner is neither empty nor
    /// [`NO_PROVISIONER`] (local PVs are created by hand, never provisioned;
    /// `checkVolumeProvisions`).
    pub provisionable: bool,
    /// Its requested storage, bytes.
    pub request: i64,
    /// The existing PVs it could be bound to, best first (`matching`).
    pub statics: Box<[PvCandidate]>,
}

/// The provisioner of classes whose volumes are only ever created by hand (local PVs):
/// kube-scheduler's `NotSupportedProvisioner`.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A pod's volumes, resolved when it is handed off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    pub blocked: Option<Blocked>,
    pub bound: Box<[BoundVolume]>,
    pub provision: Box<[Provision]>,
    /// The CSI volumes it attaches (`Storage::csi_of`), for NodeVolumeLimits.
    pub csi: CsiVolumes,
    /// The text `blocked` needs beyond the pod's own names (`Blocked::Invalid`'s why,
    /// `Blocked::ClaimLost`'s volume).
    pub detail: Option<Arc<str>>,
}

impl PodVolumes {
    /// `pod`'s names with what this resolution adds to them ([`PodVolumes::detail`]).
    pub fn names<'a>(&'a self, pod: PodNames<'a>) -> PodNames<'a> {
        PodNames {
            volumes_detail: self.detail.as_deref(),
            ..pod
        }
    }
}

#[derive(Debug, Clone)]
struct Claim {
    uid: Arc<str>,
    class: Option<Arc<str>>,
    /// `spec.volumeName`.
    volume: Option<Arc<str>>,
    /// Bound: names a volume and the bind is completed (`isPVCFullyBound`).
    bound: bool,
    /// Phase `Lost`.
    lost: bool,
    /// Why the input was refused ([`Blocked::Invalid`]).
    invalid: Option<Arc<str>>,
    rwop: bool,
    terminating: bool,
    owner: Option<Arc<str>>,
    request: i64,
    modes: u8,
    block: bool,
    selector: Option<LabelSelector>,
}

#[derive(Debug, Clone)]
struct Volume {
    node_affinity: Option<Box<[Term]>>,
    zones: Box<[(u32, Box<[u32]>)]>,
    csi: Option<CsiVolume>,
    class: Arc<str>,
    capacity: i64,
    modes: u8,
    block: bool,
    labels: Box<[(u32, u32)]>,
    /// Phase `Available`.
    available: bool,
    terminating: bool,
    /// `spec.claimRef`: (namespace, name, uid or empty).
    claim_ref: Option<(Arc<str>, Arc<str>, Arc<str>)>,
}

#[derive(Debug, Clone)]
struct Class {
    wffc: bool,
    allowed: Option<Box<[Term]>>,
    provisioner: u32,
    provisionable: bool,
}

/// The storage objects (see the module doc).
#[derive(Debug, Default)]
pub struct Storage {
    claims: HashMap<(Arc<str>, Arc<str>), Claim>,
    volumes: HashMap<Arc<str>, Volume>,
    classes: HashMap<Arc<str>, Class>,
    /// Per node name: driver id → attach limit.
    limits: HashMap<Arc<str>, BTreeMap<u32, i64>>,
    /// Nodes whose attach limits changed since the last `take_limits_changed`.
    limits_dirty: BTreeSet<Arc<str>>,
    /// PVs chosen for a pod by a claimed decision (PV → pod uid), until its bind ends
    /// (`matching`).
    reserved: HashMap<Arc<str>, Arc<str>>,
    /// PVs that claims name in `spec.volumeName` (PV → how many claims): never given to
    /// another claim (`matching`).
    named: HashMap<Arc<str>, u32>,
    /// The claims naming each PV (PV → claim keys): whose placed pods a PV change concerns.
    by_volume: HashMap<Arc<str>, Vec<ClaimKey>>,
}

/// A claim by (namespace, name).
pub type ClaimKey = (Arc<str>, Arc<str>);

fn key(ns: &str, name: &str) -> ClaimKey {
    (Arc::from(ns), Arc::from(name))
}

fn compile_terms(
    terms: &[SelectorTermInput],
    interner: &mut Interner,
) -> Result<Box<[Term]>, ModelError> {
    terms
        .iter()
        .map(|t| crate::model::compile_node_term(t, interner))
        .collect()
}

impl Storage {
    /// Apply a change. Returns the events it amounts to, and an error for a rejected object.
    pub fn apply(
        &mut self,
        input: StorageInput,
        interner: &mut Interner,
    ) -> (Events, Vec<ModelError>) {
        let mut errors = Vec::new();
        match input {
            StorageInput::Pvc(c) => {
                if let Err(e) = self.apply_pvc(c, interner) {
                    errors.push(e);
                }
            }
            StorageInput::PvcDelete { namespace, name } => {
                self.remove_claim(&key(&namespace, &name));
            }
            StorageInput::PvcReset(all) => {
                self.claims.clear();
                self.named.clear();
                self.by_volume.clear();
                for c in all {
                    if let Err(e) = self.apply_pvc(c, interner) {
                        errors.push(e);
                    }
                }
            }
            StorageInput::Pv(v) => {
                if let Err(e) = self.apply_pv(v, interner) {
                    errors.push(e);
                }
            }
            StorageInput::PvDelete(name) => {
                self.volumes.remove(&*name);
            }
            StorageInput::PvReset(all) => {
                self.volumes.clear();
                for v in all {
                    if let Err(e) = self.apply_pv(v, interner) {
                        errors.push(e);
                    }
                }
            }
            StorageInput::Class(c) => {
                if let Err(e) = self.apply_class(c, interner) {
                    errors.push(e);
                }
            }
            StorageInput::ClassDelete(name) => {
                self.classes.remove(&*name);
            }
            StorageInput::ClassReset(all) => {
                self.classes.clear();
                for c in all {
                    if let Err(e) = self.apply_class(c, interner) {
                        errors.push(e);
                    }
                }
            }
            StorageInput::CsiNode(n) => self.apply_csi_node(n, interner),
            StorageInput::CsiNodeDelete(node) => {
                let node: Arc<str> = Arc::from(node);
                self.limits.remove(&node);
                self.limits_dirty.insert(node);
            }
            StorageInput::CsiNodeReset(all) => {
                let old: Vec<Arc<str>> = self.limits.keys().cloned().collect();
                self.limits_dirty.extend(old);
                self.limits.clear();
                for n in all {
                    self.apply_csi_node(n, interner);
                }
            }
        }
        (event::STORAGE_CHANGED, errors)
    }

    /// Keep a claim. One Magma cannot take (a request above 2^62 bytes, a selector it cannot
    /// compile) is kept as refused, so its pods are told why ([`Blocked::Invalid`]), and the
    /// error is returned.
    fn apply_pvc(&mut self, c: PvcInput, interner: &mut Interner) -> Result<(), ModelError> {
        let rwop = c.access_modes.iter().any(|m| m == "ReadWriteOncePod");
        let request = match &c.request {
            Some(q) => parse_scaled("storage", q, 1),
            None => Ok(0),
        };
        let selector = c
            .selector
            .as_ref()
            .map(|s| compile_other_selector(Some(s), interner))
            .transpose();
        let error = request.as_ref().err().or(selector.as_ref().err()).cloned();
        let volume: Option<Arc<str>> = c.volume_name.filter(|s| !s.is_empty()).map(Arc::from);
        let claim = Claim {
            uid: Arc::from(c.uid),
            class: c.storage_class.filter(|s| !s.is_empty()).map(Arc::from),
            bound: volume.is_some() && !c.prebound,
            volume,
            lost: c.phase == "Lost",
            invalid: error.as_ref().map(|e| Arc::from(e.to_string())),
            rwop,
            terminating: c.terminating,
            owner: c.owner_uid.map(Arc::from),
            request: request.unwrap_or(0),
            modes: mode_bits(&c.access_modes),
            block: c.volume_mode.as_deref() == Some("Block"),
            selector: selector.unwrap_or(None),
        };
        self.put_claim(key(&c.namespace, &c.name), claim);
        error.map_or(Ok(()), Err)
    }

    fn put_claim(&mut self, key: (Arc<str>, Arc<str>), claim: Claim) {
        if let Some(old) = self.claims.remove(&key) {
            self.unname(&old, &key);
        }
        if let Some(v) = &claim.volume {
            *self.named.entry(v.clone()).or_default() += 1;
            self.by_volume
                .entry(v.clone())
                .or_default()
                .push(key.clone());
        }
        self.claims.insert(key, claim);
    }

    fn remove_claim(&mut self, key: &(Arc<str>, Arc<str>)) {
        if let Some(old) = self.claims.remove(key) {
            self.unname(&old, key);
        }
    }

    fn unname(&mut self, old: &Claim, key: &(Arc<str>, Arc<str>)) {
        let Some(v) = &old.volume else {
            return;
        };
        if let Some(n) = self.named.get_mut(v) {
            *n -= 1;
            if *n == 0 {
                self.named.remove(v);
            }
        }
        if let Some(keys) = self.by_volume.get_mut(v) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_volume.remove(v);
            }
        }
    }

    /// The claims (namespace, name) naming the PV `pv` in `spec.volumeName`.
    pub fn claims_naming(&self, pv: &str) -> &[(Arc<str>, Arc<str>)] {
        self.by_volume.get(pv).map_or(&[], Vec::as_slice)
    }

    /// Keep a PV. One Magma cannot take (a capacity above 2^62 bytes, a node affinity it cannot
    /// compile) is left out, as if it did not exist (an older version of it too), and the error
    /// is returned.
    fn apply_pv(&mut self, v: PvInput, interner: &mut Interner) -> Result<(), ModelError> {
        let name = v.name.clone();
        let kept = self.compile_pv(v, interner);
        if kept.is_err() {
            self.volumes.remove(name.as_str());
        }
        kept
    }

    fn compile_pv(&mut self, v: PvInput, interner: &mut Interner) -> Result<(), ModelError> {
        let node_affinity = v
            .node_affinity
            .as_deref()
            .map(|t| compile_terms(t, interner))
            .transpose()?;
        let zones = v
            .labels
            .iter()
            .filter(|(k, _)| ZONE_LABELS.contains(&k.as_str()))
            .map(|(k, val)| {
                let mut values: Vec<u32> = val.split("__").map(|x| interner.intern(x)).collect();
                values.sort_unstable();
                (interner.intern(k), values.into())
            })
            .collect();
        let csi = v
            .csi
            .as_ref()
            .map(|(d, h)| (interner.intern(d), Arc::from(h.as_str())));
        // A PV seen taken (bound, or pre-bound by our PreBind) needs no reservation any more.
        if v.phase != "Available" || v.claim_ref.is_some() {
            self.reserved.remove(v.name.as_str());
        }
        let capacity = match &v.capacity {
            Some(q) => parse_scaled("storage", q, 1)?,
            None => 0,
        };
        self.volumes.insert(
            Arc::from(v.name),
            Volume {
                node_affinity,
                zones,
                csi,
                class: Arc::from(v.storage_class.as_deref().unwrap_or("")),
                capacity,
                modes: mode_bits(&v.access_modes),
                block: v.volume_mode.as_deref() == Some("Block"),
                labels: compile_labels(&v.labels, interner),
                available: v.phase == "Available",
                terminating: v.terminating,
                claim_ref: v.claim_ref.map(|(ns, n)| {
                    (
                        Arc::from(ns),
                        Arc::from(n),
                        Arc::from(v.claim_ref_uid.unwrap_or_default()),
                    )
                }),
            },
        );
        Ok(())
    }

    fn apply_class(
        &mut self,
        c: StorageClassInput,
        interner: &mut Interner,
    ) -> Result<(), ModelError> {
        let wffc = match c.binding_mode.as_str() {
            "" | "Immediate" => false,
            "WaitForFirstConsumer" => true,
            other => return Err(ModelError::BindingMode(other.to_owned())),
        };
        let allowed = (!c.allowed_topologies.is_empty())
            .then(|| compile_terms(&c.allowed_topologies, interner))
            .transpose()?;
        self.classes.insert(
            Arc::from(c.name),
            Class {
                wffc,
                allowed,
                provisioner: interner.intern(&c.provisioner),
                // `checkVolumeProvisions`: an empty provisioner cannot provision either.
                provisionable: !c.provisioner.is_empty() && c.provisioner != NO_PROVISIONER,
            },
        );
        Ok(())
    }

    fn apply_csi_node(&mut self, n: CsiNodeInput, interner: &mut Interner) {
        let limits: BTreeMap<u32, i64> = n
            .drivers
            .iter()
            .filter_map(|(d, count)| count.map(|c| (interner.intern(d), c.max(0))))
            .collect();
        let node: Arc<str> = Arc::from(n.node);
        self.limits.insert(node.clone(), limits);
        self.limits_dirty.insert(node);
    }

    /// The existing PVs a claim could be bound to (`matching::matches`'s rule), best first,
    /// leaving out those reserved for another pod.
    fn candidates(
        &self,
        namespace: &str,
        name: &str,
        class: &str,
        c: &Claim,
        pod_uid: &str,
    ) -> Box<[PvCandidate]> {
        let wanted = matching::Wanted {
            class,
            request: c.request,
            modes: c.modes,
            block: c.block,
            selector: c.selector.as_ref(),
            namespace,
            name,
            uid: &c.uid,
        };
        let mut out: Vec<PvCandidate> = self
            .volumes
            .iter()
            .filter(|(pv, _)| self.reserved.get(*pv).is_none_or(|u| &**u == pod_uid))
            .filter_map(|(pv, v)| {
                let offered = matching::Offered {
                    class: &v.class,
                    capacity: v.capacity,
                    modes: v.modes,
                    block: v.block,
                    labels: &v.labels,
                    available: v.available,
                    terminating: v.terminating,
                    claim_ref: v.claim_ref.as_ref().map(|(a, b, u)| (&**a, &**b, &**u)),
                    named: self.named.contains_key(pv),
                };
                let prebound = matching::matches(&wanted, &offered)?;
                Some(PvCandidate {
                    name: pv.clone(),
                    capacity: v.capacity,
                    node_affinity: v.node_affinity.clone(),
                    prebound,
                })
            })
            .collect();
        matching::sort(&mut out);
        out.into()
    }

    /// Reserve `pvs` for the pod `uid` (a claimed decision chose them).
    pub fn reserve(&mut self, uid: &Arc<str>, pvs: impl IntoIterator<Item = Arc<str>>) {
        for pv in pvs {
            self.reserved.insert(pv, uid.clone());
        }
    }

    /// Release the PVs reserved for the pod `uid` (its bind ended or it is gone). Whether any
    /// were.
    pub fn release(&mut self, uid: &str) -> bool {
        let before = self.reserved.len();
        self.reserved.retain(|_, u| &**u != uid);
        self.reserved.len() != before
    }

    /// Nodes whose attach limits changed since the last call.
    pub fn take_limits_changed(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.limits_dirty).into_iter().collect()
    }

    /// A node's CSI attach limits: (driver id, count), sorted.
    pub fn limits(&self, node: &str) -> Box<[(u32, i64)]> {
        self.limits
            .get(node)
            .map(|l| l.iter().map(|(&d, &c)| (d, c)).collect())
            .unwrap_or_default()
    }

    /// Whether `namespace/claim` has the ReadWriteOncePod access mode.
    pub fn is_rwop(&self, namespace: &str, claim: &str) -> bool {
        self.claims
            .get(&key(namespace, claim))
            .is_some_and(|c| c.rwop)
    }

    /// The CSI volumes a pod's claims attach on its node, for attach limits, as
    /// kube-scheduler's NodeVolumeLimits counts them (`filterAttachableVolumes`): a claim bound to
    /// a PV with `spec.csi` is (driver, handle); a claim bound to a PV that is missing, or not
    /// bound yet, counts under its StorageClass's provisioner with a handle of its own, so two
    /// pods sharing it count it once; a claim without a class (or whose class is missing) and a
    /// PV that is not CSI count nothing. Missing claims count nothing (VolumeBinding rejects the
    /// pod).
    pub fn csi_of(&self, namespace: &str, claims: &[(Arc<str>, bool)]) -> CsiVolumes {
        let mut out: Vec<CsiVolume> = Vec::new();
        for (name, _) in claims {
            let Some(c) = self.claims.get(&key(namespace, name)) else {
                continue;
            };
            let pv = c.volume.as_ref().and_then(|v| self.volumes.get(v));
            let vol = match pv {
                Some(pv) => pv.csi.clone(),
                None => c
                    .class
                    .as_ref()
                    .and_then(|class| self.classes.get(class))
                    .map(|class| {
                        let handle = format!("{UNBOUND_HANDLE_PREFIX}{namespace}/{name}");
                        (class.provisioner, Arc::from(handle))
                    }),
            };
            out.extend(vol);
        }
        out.sort_unstable();
        out.dedup();
        out.into()
    }

    /// Resolve the claims of a pod (namespace, uid, name, its claim names; see the module
    /// doc). `claims` lists `(claim name, ephemeral)`.
    /// `rwop_in_use(claim)`: another pod uses that ReadWriteOncePod claim.
    pub fn resolve(
        &self,
        namespace: &str,
        pod_uid: &str,
        claims: &[(Arc<str>, bool)],
        rwop_in_use: impl Fn(&str) -> bool,
    ) -> PodVolumes {
        match self.claims_of(namespace, pod_uid, claims, rwop_in_use) {
            Ok((bound, provision)) => PodVolumes {
                blocked: None,
                bound: bound.into(),
                provision: provision.into(),
                csi: self.csi_of(namespace, claims),
                detail: None,
            },
            Err(blocked) => PodVolumes {
                blocked: Some(blocked),
                detail: self.detail(namespace, claims, blocked),
                ..PodVolumes::default()
            },
        }
    }

    /// The text `blocked` needs beyond the pod's own names ([`PodVolumes::detail`]).
    fn detail(
        &self,
        namespace: &str,
        claims: &[(Arc<str>, bool)],
        blocked: Blocked,
    ) -> Option<Arc<str>> {
        let claim = |at: VolumeAt| {
            let (name, _) = claims.get(at.0 as usize)?;
            self.claims.get(&key(namespace, name))
        };
        match blocked {
            Blocked::Invalid(at) => claim(at)?.invalid.clone(),
            Blocked::ClaimLost(at) => Some(claim(at)?.volume.clone().unwrap_or_default()),
            _ => None,
        }
    }

    /// The pod's bound claims and claims to bind, or what blocks it (the module doc's order).
    fn claims_of(
        &self,
        namespace: &str,
        pod_uid: &str,
        claims: &[(Arc<str>, bool)],
        rwop_in_use: impl Fn(&str) -> bool,
    ) -> Result<(Vec<BoundVolume>, Vec<Provision>), Blocked> {
        // Each volume's claim, looked up once: (position, name, ephemeral, claim).
        let found: Vec<(VolumeAt, &Arc<str>, bool, Option<&Claim>)> = claims
            .iter()
            .enumerate()
            .map(|(i, (name, eph))| {
                let at = VolumeAt(i as u32);
                (at, name, *eph, self.claims.get(&key(namespace, name)))
            })
            .collect();
        // 1. VolumeRestrictions PreFilter: the claims of `persistentVolumeClaim` volumes exist.
        if let Some(&(at, ..)) = found.iter().find(|(_, _, eph, c)| !eph && c.is_none()) {
            return Err(Blocked::MissingClaim(at));
        }
        // 2. VolumeBinding PreFilter, `podHasPVCs`: claim by claim.
        for &(at, _, ephemeral, c) in &found {
            let Some(c) = c else {
                return Err(if ephemeral {
                    Blocked::EphemeralPending(at)
                } else {
                    Blocked::MissingClaim(at)
                });
            };
            if c.invalid.is_some() {
                return Err(Blocked::Invalid(at));
            }
            if c.lost {
                return Err(Blocked::ClaimLost(at));
            }
            if c.terminating {
                return Err(Blocked::ClaimDeleted(at));
            }
            if ephemeral && c.owner.as_deref() != Some(pod_uid) {
                // An ephemeral volume's claim the pod does not control (made for another pod,
                // or by hand): `ephemeral.VolumeIsForPod` refuses it.
                return Err(Blocked::NotOwner(at));
            }
        }
        // 3. `GetPodVolumeClaims`: bound, to bind (a `WaitForFirstConsumer` class, no
        // `spec.volumeName`), or unbound immediate (anything else, pre-bound claims included).
        let (mut bound, mut to_bind) = (Vec::new(), Vec::new());
        for &(_, name, _, c) in &found {
            let Some(c) = c else { continue };
            if c.bound {
                bound.push(c);
                continue;
            }
            let class = c
                .class
                .as_ref()
                .and_then(|n| Some((n, self.classes.get(n)?)))
                .filter(|(_, class)| class.wffc && c.volume.is_none());
            match class {
                Some((class_name, class)) => to_bind.push((name, c, class_name, class)),
                None => return Err(Blocked::UnboundImmediate),
            }
        }
        // 4. The bound claims' PVs exist.
        let bound = bound
            .into_iter()
            .map(|c| {
                let pv = c.volume.as_ref().and_then(|v| self.volumes.get(v));
                let pv = pv.ok_or(Blocked::MissingVolume)?;
                Ok(BoundVolume {
                    node_affinity: pv.node_affinity.clone(),
                    zones: pv.zones.clone(),
                })
            })
            .collect::<Result<Vec<_>, Blocked>>()?;
        // 5. VolumeRestrictions Filter: a ReadWriteOncePod claim another pod uses.
        let rwop = found
            .iter()
            .any(|(_, name, _, c)| c.is_some_and(|c| c.rwop) && rwop_in_use(name));
        if rwop {
            return Err(Blocked::ReadWriteOncePod);
        }
        let provision = to_bind
            .into_iter()
            .map(|(name, c, class_name, class)| Provision {
                namespace: Arc::from(namespace),
                name: name.clone(),
                allowed: class.allowed.clone(),
                driver: class.provisioner,
                provisionable: class.provisionable,
                request: c.request,
                statics: self.candidates(namespace, name, class_name, c, pod_uid),
            })
            .collect();
        Ok((bound, provision))
    }
}
