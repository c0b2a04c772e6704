//! Storage: the PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes the
//! volume plugins need, kept by the driver (single writer), and the resolution of a pod's
//! volumes into what the workers check ([`PodVolumes`], carried by the task).
//!
//! A pod's claims are resolved when it is handed off: missing or deleted claims, unbound claims
//! of an `Immediate` class, and `ReadWriteOncePod` claims another pod uses block it on every
//! node (kube-scheduler's VolumeBinding and VolumeRestrictions PreFilter); bound claims give
//! their PV's node affinity and zone labels (VolumeBinding, VolumeZone) and CSI volume
//! (NodeVolumeLimits); unbound claims of a `WaitForFirstConsumer` class give the class's allowed
//! topologies and are provisioned after the claim: the bind intent asks the adapter to write
//! `volume.kubernetes.io/selected-node` on them and wait until they are bound before binding the
//! pod (kube-scheduler's Reserve/PreBind).
//!
//! Owns only this storage view; it touches nothing else. Every input is validated and a bad
//! object is reported without changing how others are handled.

mod matching;

pub use matching::{Assignment, PvCandidate, assign, mode_bits};

use crate::event::{self, Events};
use crate::model::{
    Interner, LabelSelector, LabelSelectorInput, ModelError, SelectorTermInput, Term,
    compile_labels, compile_selector, parse_scaled,
};
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

/// CSI volumes (driver id, volume handle id), each once, sorted: what NodeVolumeLimits counts.
/// A claim not bound to a CSI volume yet counts under its class's provisioner with a handle of
/// its own ([`UNBOUND_HANDLE_PREFIX`]), as kube-scheduler's synthetic handle.
pub type CsiVolumes = Box<[(u32, u32)]>;

/// Prefix of the handle an unbound claim counts with (`<prefix><namespace>/<claim>`):
/// kube-scheduler uses a random prefix chosen at start; this one cannot be a CSI volume handle
/// in practice either, and keeps test output readable.
pub const UNBOUND_HANDLE_PREFIX: &str = "\u{0}unbound/";

/// A pod volume as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumeInput {
    pub name: String,
    /// `persistentVolumeClaim.claimName`.
    pub claim: Option<String>,
    /// An `ephemeral` volume: its claim is `<pod>-<volume>`, made by the ephemeral controller.
    pub ephemeral: bool,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvcInput {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub storage_class: Option<String>,
    /// `spec.volumeName`.
    pub volume_name: Option<String>,
    /// `status.phase`.
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
/// Names are interned ids (`Interner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// `persistentvolumeclaim "X" not found`.
    MissingClaim(u32),
    /// `waiting for ephemeral volume controller to create the persistentvolumeclaim "X"`.
    EphemeralPending(u32),
    /// `persistentvolumeclaim "X" is being deleted`.
    ClaimDeleted(u32),
    /// `PVC <ns>/<claim> was not created for pod <ns>/<pod> (pod is not owner)`: an ephemeral
    /// volume's claim whose controller is not the pod (`<ns>/<claim>`, `<ns>/<pod>`).
    NotOwner(u32, u32),
    /// `pod has unbound immediate PersistentVolumeClaims`.
    UnboundImmediate,
    /// `storageclass.storage.k8s.io "X" not found`.
    MissingClass(u32),
    /// `node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)`.
    MissingVolume,
    /// `node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access
    /// mode`.
    ReadWriteOncePod,
}

impl Blocked {
    pub fn message(&self, names: &Interner) -> String {
        let n = |id: &u32| names.resolve(*id).to_owned();
        match self {
            Blocked::MissingClaim(c) => format!("persistentvolumeclaim \"{}\" not found", n(c)),
            Blocked::EphemeralPending(c) => format!(
                "waiting for ephemeral volume controller to create the persistentvolumeclaim \"{}\"",
                n(c)
            ),
            Blocked::ClaimDeleted(c) => {
                format!("persistentvolumeclaim \"{}\" is being deleted", n(c))
            }
            Blocked::NotOwner(c, p) => format!(
                "PVC {} was not created for pod {} (pod is not owner)",
                n(c),
                n(p)
            ),
            Blocked::UnboundImmediate => "pod has unbound immediate PersistentVolumeClaims".into(),
            Blocked::MissingClass(c) => {
                format!("storageclass.storage.k8s.io \"{}\" not found", n(c))
            }
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
    /// CSI (driver, volume handle), for attach limits.
    pub csi: Option<(u32, u32)>,
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
}

#[derive(Debug, Clone)]
struct Claim {
    class: Option<Arc<str>>,
    volume: Option<Arc<str>>,
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
    csi: Option<(u32, u32)>,
    class: Arc<str>,
    capacity: i64,
    modes: u8,
    block: bool,
    labels: Box<[(u32, u32)]>,
    /// `Available` and not being deleted.
    available: bool,
    claim_ref: Option<(Arc<str>, Arc<str>)>,
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
}

fn key(ns: &str, name: &str) -> (Arc<str>, Arc<str>) {
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
                self.claims.remove(&key(&namespace, &name));
            }
            StorageInput::PvcReset(all) => {
                self.claims.clear();
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

    fn apply_pvc(&mut self, c: PvcInput, interner: &mut Interner) -> Result<(), ModelError> {
        let rwop = c.access_modes.iter().any(|m| m == "ReadWriteOncePod");
        let request = match &c.request {
            Some(q) => parse_scaled("storage", q, 1)?,
            None => 0,
        };
        let selector = c
            .selector
            .as_ref()
            .map(|s| compile_selector(Some(s), interner))
            .transpose()?;
        self.claims.insert(
            key(&c.namespace, &c.name),
            Claim {
                class: c.storage_class.filter(|s| !s.is_empty()).map(Arc::from),
                volume: c.volume_name.filter(|s| !s.is_empty()).map(Arc::from),
                rwop,
                terminating: c.terminating,
                owner: c.owner_uid.map(Arc::from),
                request,
                modes: mode_bits(&c.access_modes),
                block: c.volume_mode.as_deref() == Some("Block"),
                selector,
            },
        );
        Ok(())
    }

    fn apply_pv(&mut self, v: PvInput, interner: &mut Interner) -> Result<(), ModelError> {
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
            .map(|(d, h)| (interner.intern(d), interner.intern(h)));
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
                available: v.phase == "Available" && !v.terminating,
                claim_ref: v
                    .claim_ref
                    .map(|(ns, n)| (Arc::from(ns.as_str()), Arc::from(n.as_str()))),
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

    /// The existing PVs a claim could be bound to (`matching::candidates`'s rule), best first,
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
        };
        let mut out: Vec<(bool, PvCandidate)> = self
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
                    claim_ref: v.claim_ref.as_ref().map(|(a, b)| (&**a, &**b)),
                };
                let prebound = matching::matches(&wanted, &offered)?;
                Some((
                    prebound,
                    PvCandidate {
                        name: pv.clone(),
                        capacity: v.capacity,
                        node_affinity: v.node_affinity.clone(),
                    },
                ))
            })
            .collect();
        matching::sort(&mut out);
        out.into_iter().map(|(_, c)| c).collect()
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
    pub fn csi_of(
        &self,
        namespace: &str,
        claims: &[(Arc<str>, bool)],
        interner: &mut Interner,
    ) -> CsiVolumes {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for (name, _) in claims {
            let Some(c) = self.claims.get(&key(namespace, name)) else {
                continue;
            };
            let pv = c.volume.as_ref().and_then(|v| self.volumes.get(v));
            let vol = match pv {
                Some(pv) => pv.csi,
                None => c
                    .class
                    .as_ref()
                    .and_then(|class| self.classes.get(class))
                    .map(|class| {
                        let handle = format!("{UNBOUND_HANDLE_PREFIX}{namespace}/{name}");
                        (class.provisioner, interner.intern(&handle))
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
        pod_name: &str,
        claims: &[(Arc<str>, bool)],
        interner: &mut Interner,
        rwop_in_use: impl Fn(&str) -> bool,
    ) -> PodVolumes {
        let mut out = PodVolumes::default();
        let (mut bound, mut provision) = (Vec::new(), Vec::new());
        for (name, ephemeral) in claims {
            let id = interner.intern(name);
            let Some(c) = self.claims.get(&key(namespace, name)) else {
                out.blocked = Some(if *ephemeral {
                    Blocked::EphemeralPending(id)
                } else {
                    Blocked::MissingClaim(id)
                });
                return out;
            };
            if *ephemeral && c.owner.as_deref() != Some(pod_uid) {
                // An ephemeral volume's claim the pod does not control (made for another pod,
                // or by hand): `ephemeral.VolumeIsForPod` refuses it.
                out.blocked = Some(Blocked::NotOwner(
                    interner.intern(&format!("{namespace}/{name}")),
                    interner.intern(&format!("{namespace}/{pod_name}")),
                ));
                return out;
            }
            if c.terminating {
                out.blocked = Some(Blocked::ClaimDeleted(id));
                return out;
            }
            if c.rwop && rwop_in_use(name) {
                out.blocked = Some(Blocked::ReadWriteOncePod);
                return out;
            }
            match &c.volume {
                Some(v) => match self.volumes.get(v) {
                    Some(pv) => bound.push(BoundVolume {
                        node_affinity: pv.node_affinity.clone(),
                        zones: pv.zones.clone(),
                        csi: pv.csi,
                    }),
                    None => {
                        out.blocked = Some(Blocked::MissingVolume);
                        return out;
                    }
                },
                None => {
                    let Some(class_name) = &c.class else {
                        // No class and no volume: nothing will ever bind it here.
                        out.blocked = Some(Blocked::UnboundImmediate);
                        return out;
                    };
                    let Some(class) = self.classes.get(class_name) else {
                        out.blocked = Some(Blocked::MissingClass(interner.intern(class_name)));
                        return out;
                    };
                    if !class.wffc {
                        out.blocked = Some(Blocked::UnboundImmediate);
                        return out;
                    }
                    provision.push(Provision {
                        namespace: Arc::from(namespace),
                        name: name.clone(),
                        allowed: class.allowed.clone(),
                        driver: class.provisioner,
                        provisionable: class.provisionable,
                        request: c.request,
                        statics: self.candidates(namespace, name, class_name, c, pod_uid),
                    });
                }
            }
        }
        out.bound = bound.into();
        out.provision = provision.into();
        out.csi = self.csi_of(namespace, claims, interner);
        out
    }
}
