//! Filters. [`fits`] is the hot path: a branch-light check over one node slot that consults the
//! node's description only when the pod or the node needs it. [`explain`] recomputes, for a
//! node that failed, every reason it failed (for the `FailedScheduling` message); it runs only
//! when a pod fits nowhere.

use crate::conf::PredicateSet;
use crate::model::{CompiledPod, NodeMeta, PODS, Slot, TaintEffect};
use crate::snapshot::{Chunk, Row, ZERO_ROW, flags};

/// One reason a node cannot take a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// `Insufficient <resource>`.
    Insufficient(Slot),
    /// `node(s) pod number exceeded`.
    TooManyPods,
    /// `node(s) were unschedulable`.
    Unschedulable,
    /// `node(s) didn't match the requested node name`.
    NodeName,
    /// `node(s) didn't match Pod's node affinity/selector`.
    Affinity,
    /// `node(s) had untolerated taint {key: value}` (taint key and value ids).
    Taint { key: u32, value: u32 },
    /// `node(s) didn't have free ports for the requested pod ports`.
    Ports,
    /// `node isn't in scheduler node shard` (hard sharding mode; upstream's text).
    NotInShard,
}

/// Most requested resources resolved to rows up front; pods asking for more take the slow path.
const FAST_RESOURCES: usize = 8;

/// The free-capacity rows of one chunk for the resources a pod requests, resolved once per
/// chunk so the per-node check is a few loads and compares.
pub struct FitRows<'a> {
    rows: [(&'a Row, i64); FAST_RESOURCES],
    n: usize,
    slow: bool,
}

impl<'a> FitRows<'a> {
    #[inline]
    pub fn new(pod: &CompiledPod, chunk: &'a Chunk) -> FitRows<'a> {
        let mut rows = [(&ZERO_ROW, 0i64); FAST_RESOURCES];
        let slow = pod.requests.len() > FAST_RESOURCES;
        let mut n = 0;
        if !slow {
            for &(s, r) in &pod.requests {
                rows[n] = (chunk.free_row(s), r);
                n += 1;
            }
        }
        FitRows { rows, n, slow }
    }

    /// Does the pod's resource request fit node `i`?
    #[inline]
    pub fn fits(&self, pod: &CompiledPod, chunk: &Chunk, i: usize) -> bool {
        if self.slow {
            return pod.requests.iter().all(|&(s, r)| chunk.free(s, i) >= r);
        }
        self.rows[..self.n].iter().all(|(row, r)| row[i] >= *r)
    }
}

/// NodeName, nodeSelector and required node affinity.
#[inline]
pub fn node_affinity_matches(pod: &CompiledPod, meta: &NodeMeta) -> bool {
    if !pod
        .node_selector
        .iter()
        .all(|&(k, v)| meta.label(k).is_some_and(|l| l.value == v))
    {
        return false;
    }
    match &pod.required {
        None => true,
        Some(terms) => terms.iter().any(|t| t.matches(meta)),
    }
}

/// The first NoSchedule/NoExecute taint the pod does not tolerate.
#[inline]
pub fn untolerated_taint(pod: &CompiledPod, meta: &NodeMeta) -> Option<(u32, u32)> {
    meta.taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !pod.tolerations.iter().any(|tol| tol.tolerates(t)))
        .map(|t| (t.key, t.value))
}

#[inline]
fn ports_conflict(pod: &CompiledPod, chunk: &Chunk, i: usize) -> bool {
    match &chunk.ports[i] {
        Some(used) => pod
            .host_ports
            .iter()
            .any(|p| used.iter().any(|u| p.conflicts(u))),
        None => false,
    }
}

/// The filter for one node (tests and cold paths; the scan uses [`fits_with`]).
pub fn fits(pod: &CompiledPod, preds: PredicateSet, chunk: &Chunk, i: usize) -> bool {
    fits_with(pod, preds, chunk, &FitRows::new(pod, chunk), i)
}

/// The hot-path filter: `true` if the pod can go on node `i` of `chunk`.
// Always: the scan loop runs it per node (a call per node costs a quarter more).
#[inline(always)]
pub fn fits_with(
    pod: &CompiledPod,
    preds: PredicateSet,
    chunk: &Chunk,
    rows: &FitRows<'_>,
    i: usize,
) -> bool {
    let f = chunk.flags[i];
    if f & flags::PRESENT == 0 || !rows.fits(pod, chunk, i) {
        return false;
    }
    if f & flags::UNSCHEDULABLE != 0 && !pod.tolerates_unschedulable {
        return false;
    }
    let needs_meta = pod.node_name.is_some()
        || (preds.node_affinity && pod.has_node_constraints)
        || (preds.taint_toleration && f & flags::HARD_TAINTS != 0);
    if needs_meta {
        let Some(meta) = chunk.meta[i].as_deref() else {
            return false;
        };
        if pod.node_name.is_some_and(|n| n != meta.name_id) {
            return false;
        }
        if preds.node_affinity && pod.has_node_constraints && !node_affinity_matches(pod, meta) {
            return false;
        }
        if preds.taint_toleration
            && f & flags::HARD_TAINTS != 0
            && untolerated_taint(pod, meta).is_some()
        {
            return false;
        }
    }
    if preds.node_ports
        && f & flags::PORTS != 0
        && !pod.host_ports.is_empty()
        && ports_conflict(pod, chunk, i)
    {
        return false;
    }
    true
}

/// Every reason node `i` rejects the pod, in upstream's order: resource fit first (if it fails,
/// the predicate chain is not consulted), then pod count, NodeUnschedulable, NodeName,
/// NodeAffinity, TaintToleration, NodePorts.
pub fn explain(
    pod: &CompiledPod,
    preds: PredicateSet,
    chunk: &Chunk,
    i: usize,
    out: &mut impl FnMut(Failure),
) {
    let f = chunk.flags[i];
    let Some(meta) = chunk.meta[i].as_deref() else {
        return;
    };
    if f & flags::PRESENT == 0 {
        return;
    }
    let mut resource_failed = false;
    for &(s, r) in &pod.requests {
        if s != PODS && chunk.free(s, i) < r {
            out(Failure::Insufficient(s));
            resource_failed = true;
        }
    }
    if resource_failed {
        return;
    }
    if chunk.free(PODS, i) < 1 {
        out(Failure::TooManyPods);
    }
    if f & flags::UNSCHEDULABLE != 0 && !pod.tolerates_unschedulable {
        out(Failure::Unschedulable);
        return;
    }
    if pod.node_name.is_some_and(|n| n != meta.name_id) {
        out(Failure::NodeName);
        return;
    }
    if preds.node_affinity && !node_affinity_matches(pod, meta) {
        out(Failure::Affinity);
        return;
    }
    if preds.taint_toleration
        && let Some((key, value)) = untolerated_taint(pod, meta)
    {
        out(Failure::Taint { key, value });
        return;
    }
    if preds.node_ports && !pod.host_ports.is_empty() && ports_conflict(pod, chunk, i) {
        out(Failure::Ports);
    }
}
