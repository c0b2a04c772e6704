//! Static binding: a `WaitForFirstConsumer` claim given a PersistentVolume that already exists
//! (local PVs made by hand), as kube-scheduler's VolumeBinding does with `FindMatchingVolume`.
//!
//! - **Candidates** (at hand-off, [`matches`], `Storage::candidates`): the PVs a claim could
//!   take on some node, as `FindMatchingVolume` checks them: no `claimRef` to another claim (a
//!   `claimRef` with a uid names the claim only if the claim has that uid), at least the
//!   requested size, the same volume mode, not being deleted; then either pre-bound to this
//!   claim by `claimRef` (whatever its phase, class, selector or access modes), or `Available`,
//!   matching the claim's label selector, of its class, with every access mode it asks for.
//!   Left out as well: PVs reserved for another pod's decision, and (Magma only) PVs that
//!   another claim names in `spec.volumeName` (a claim pre-bound by its user: the PV controller
//!   binds that PV to it, so it is never given to anyone else). Pre-bound ones first, then the
//!   smallest first (kube-scheduler gives a claim the smallest PV that fits).
//! - **Per node** ([`assign`]): the claims in order of increasing request. A claim with a PV
//!   pre-bound to it takes that PV if its node affinity matches the node, and otherwise takes
//!   no PV there (upstream returns no match rather than another PV); any other claim takes the
//!   first candidate whose node affinity matches the node and that no earlier claim of the pod
//!   took. A claim left without one must be provisionable there (its class has a provisioner,
//!   neither empty nor `kubernetes.io/no-provisioner`, and its allowed topologies match) or the
//!   node fails with `node(s) didn't find available persistent volumes to bind`. The filter and the driver
//!   run the same function, so the PVs the driver reserves and binds are the ones the decision
//!   saw.
//! - **Exact under concurrency**: a PV may be reachable from several nodes, so two decisions on
//!   different nodes could both choose it. Pods with candidates are decided in the lane (one at
//!   a time, `docs/constraints.md`), and the driver reserves the chosen PVs for the pod when it
//!   applies the claim, before the next lane pod is resolved; a failed or abandoned bind, or the
//!   pod's deletion, releases them.
//!
//! Owns the matching only; the storage view (`volumes`) holds the objects and reservations.

use super::{PodVolumes, Provision};
use crate::model::{LabelSelector, NodeMeta, Term};
use smallvec::SmallVec;
use std::sync::Arc;

/// A PV a claim may take (`PodVolumes::provision[..].statics`).
#[derive(Debug, Clone, PartialEq)]
pub struct PvCandidate {
    pub name: Arc<str>,
    /// `spec.capacity.storage`, bytes.
    pub capacity: i64,
    /// Its required node affinity (terms ORed); `None`: any node.
    pub node_affinity: Option<Box<[Term]>>,
    /// Its `claimRef` names the claim: the claim takes it or, on a node it does not fit, none.
    pub prebound: bool,
}

/// Access modes as bits (`ReadWriteOnce`, `ReadOnlyMany`, `ReadWriteMany`, `ReadWriteOncePod`).
pub fn mode_bits(modes: &[String]) -> u8 {
    modes.iter().fold(0, |b, m| {
        b | match m.as_str() {
            "ReadWriteOnce" => 1,
            "ReadOnlyMany" => 2,
            "ReadWriteMany" => 4,
            "ReadWriteOncePod" => 8,
            _ => 0,
        }
    })
}

/// What a claim asks of a PV.
pub(super) struct Wanted<'a> {
    pub class: &'a str,
    pub request: i64,
    pub modes: u8,
    pub block: bool,
    pub selector: Option<&'a LabelSelector>,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// What a PV offers.
pub(super) struct Offered<'a> {
    pub class: &'a str,
    pub capacity: i64,
    pub modes: u8,
    pub block: bool,
    pub labels: &'a [(u32, u32)],
    /// `status.phase` is `Available`.
    pub available: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.claimRef` (namespace, name, uid; an empty uid names any claim of that name).
    pub claim_ref: Option<(&'a str, &'a str, &'a str)>,
    /// Another claim names it in `spec.volumeName`.
    pub named: bool,
}

/// Whether the PV can be the claim's, and whether it is pre-bound to it (`FindMatchingVolume`,
/// node affinity aside, in its order of checks).
pub(super) fn matches(w: &Wanted<'_>, o: &Offered<'_>) -> Option<bool> {
    // `IsVolumeBoundToClaim`.
    let prebound = o.claim_ref.is_some_and(|(ns, name, uid)| {
        ns == w.namespace && name == w.name && (uid.is_empty() || uid == w.uid)
    });
    if o.claim_ref.is_some() && !prebound {
        return None;
    }
    if o.capacity < w.request || o.block != w.block || o.terminating {
        return None;
    }
    if prebound {
        return Some(true);
    }
    let fits = o.available
        && !o.named
        && w.selector.is_none_or(|s| s.matches(o.labels))
        && o.class == w.class
        && o.modes & w.modes == w.modes;
    fits.then_some(false)
}

/// Order candidates: pre-bound first, then the smallest, then by name.
pub(super) fn sort(cands: &mut [PvCandidate]) {
    cands.sort_by(|a, b| {
        b.prebound
            .cmp(&a.prebound)
            .then(a.capacity.cmp(&b.capacity))
            .then(a.name.cmp(&b.name))
    });
}

/// `(claim index in PodVolumes::provision, candidate index)` for the claims given a PV.
pub type Assignment = SmallVec<[(u16, u16); 4]>;

/// Give the pod's claims PVs on `node` (the module doc). `None`: some claim can neither take a
/// PV there nor be provisioned there.
pub fn assign(v: &PodVolumes, node: &NodeMeta) -> Option<Assignment> {
    let fits = |terms: &Option<Box<[Term]>>| {
        terms
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t.matches(node)))
    };
    let mut order: SmallVec<[u16; 4]> = (0..v.provision.len() as u16).collect();
    order.sort_by_key(|&i| v.provision[i as usize].request);
    let mut out = Assignment::new();
    for i in order {
        let p: &Provision = &v.provision[i as usize];
        let taken = |c: &PvCandidate| {
            out.iter()
                .any(|&(k, m)| v.provision[k as usize].statics[m as usize].name == c.name)
        };
        // A PV pre-bound to the claim comes first: it is the claim's on a node it fits, and
        // on any other node the claim takes no PV at all (`FindMatchingVolume`).
        let chosen = match p.statics.first() {
            Some(c) if c.prebound => fits(&c.node_affinity).then_some(0),
            _ => p
                .statics
                .iter()
                .position(|c| fits(&c.node_affinity) && !taken(c)),
        };
        match chosen {
            Some(j) => out.push((i, j as u16)),
            None if p.provisionable && fits(&p.allowed) => {}
            None => return None,
        }
    }
    Some(out)
}
