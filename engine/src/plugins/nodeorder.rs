//! Scorers, following kube-scheduler's formulas as Volcano's `nodeorder` plugin wraps them.
//! Each raw scorer returns 0..=100; NodeAffinity and TaintToleration are normalised across the
//! feasible nodes afterwards (by [`finish`]), exactly as kube-scheduler's `NormalizeScore` does.

use crate::conf::Weights;
use crate::model::{CPU, CompiledPod, MEMORY, NodeMeta, TaintEffect};
use crate::snapshot::Chunk;

pub const MAX_NODE_SCORE: i64 = 100;

/// `((capacity - requested) * 100) / capacity`, 0 when over capacity.
#[inline]
fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// `(requested * 100) / capacity`, requested capped at capacity.
#[inline]
fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// NodeResourcesFit scoring over CPU and memory (equal weights), on non-zero requests.
#[inline]
fn allocation_score(pod: &CompiledPod, chunk: &Chunk, i: usize, most: bool) -> i64 {
    let mut sum = 0;
    let mut n = 0;
    for (r, slot, pod_req) in [(0, CPU, pod.nonzero_cpu), (1, MEMORY, pod.nonzero_memory)] {
        let alloc = chunk.alloc(slot, i);
        if alloc == 0 {
            continue;
        }
        let req = chunk.nonzero_used[r][i] + pod_req;
        sum += if most {
            most_requested(req, alloc)
        } else {
            least_requested(req, alloc)
        };
        n += 1;
    }
    if n == 0 { 0 } else { sum / n }
}

/// BalancedAllocation: `(1 - std(fractions)) * 100` over CPU, memory and, when the pod asks for
/// it, `nvidia.com/gpu`; actual requests, fractions capped at 1.
#[inline]
fn balanced(pod: &CompiledPod, chunk: &Chunk, i: usize, gpu: Option<u8>) -> i64 {
    let mut fr = [0f64; 3];
    let mut n = 0;
    let mut consider = |slot: u8, always: bool| {
        let req = pod.request(slot);
        if !always && req == 0 {
            return;
        }
        let alloc = chunk.alloc(slot, i);
        if alloc <= 0 {
            return;
        }
        let f = ((chunk.used(slot, i) + req) as f64 / alloc as f64).min(1.0);
        fr[n] = f;
        n += 1;
    };
    consider(CPU, true);
    consider(MEMORY, true);
    if let Some(g) = gpu {
        consider(g, false);
    }
    let std = match n {
        0 | 1 => 0.0,
        2 => ((fr[0] - fr[1]) / 2.0).abs(),
        _ => {
            let mean = fr[..n].iter().sum::<f64>() / n as f64;
            (fr[..n].iter().map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Sum of the weights of the preferred terms the node matches.
#[inline]
pub fn node_affinity_raw(pod: &CompiledPod, meta: &NodeMeta) -> i64 {
    pod.preferred
        .iter()
        .filter(|(_, t)| t.matches(meta))
        .map(|(w, _)| *w as i64)
        .sum()
}

/// Number of PreferNoSchedule taints not tolerated by the pod's tolerations whose effect is
/// empty or PreferNoSchedule.
#[inline]
pub fn intolerable_prefer_taints(pod: &CompiledPod, meta: &NodeMeta) -> i64 {
    meta.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| {
            !pod.tolerations
                .iter()
                .filter(|tol| {
                    tol.effect
                        .is_none_or(|e| e == TaintEffect::PreferNoSchedule)
                })
                .any(|tol| tol.tolerates(t))
        })
        .count() as i64
}

/// Raw score parts of one feasible node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Raw {
    /// Weighted sum of the scorers that need no normalisation.
    pub base: i64,
    pub affinity: i64,
    pub taints: i64,
}

/// Score node `i`; `gpu` is the slot of `nvidia.com/gpu` if registered.
#[inline]
pub fn score(pod: &CompiledPod, w: &Weights, chunk: &Chunk, i: usize, gpu: Option<u8>) -> Raw {
    let mut base = 0;
    if w.least_requested != 0 {
        base += w.least_requested * allocation_score(pod, chunk, i, false);
    }
    if w.most_requested != 0 {
        base += w.most_requested * allocation_score(pod, chunk, i, true);
    }
    if w.balanced_resource != 0 {
        base += w.balanced_resource * balanced(pod, chunk, i, gpu);
    }
    let mut raw = Raw {
        base,
        affinity: 0,
        taints: 0,
    };
    let meta = chunk.meta[i].as_deref();
    if let Some(meta) = meta {
        if w.node_affinity != 0 && !pod.preferred.is_empty() {
            raw.affinity = node_affinity_raw(pod, meta);
        }
        if w.taint_toleration != 0 && !meta.taints.is_empty() {
            raw.taints = intolerable_prefer_taints(pod, meta);
        }
    }
    raw
}

/// Final score given the maxima of the normalised parts over the feasible nodes.
#[inline]
pub fn finish(raw: Raw, w: &Weights, max_affinity: i64, max_taints: i64) -> i64 {
    let mut s = raw.base;
    if max_affinity > 0 {
        s += w.node_affinity * (raw.affinity * MAX_NODE_SCORE / max_affinity);
    }
    // Reverse normalisation: no intolerable taints anywhere → everyone gets 100.
    s += w.taint_toleration
        * if max_taints > 0 {
            MAX_NODE_SCORE - raw.taints * MAX_NODE_SCORE / max_taints
        } else {
            MAX_NODE_SCORE
        };
    s
}
