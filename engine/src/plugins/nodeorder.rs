//! Scorers, following kube-scheduler's formulas as Volcano's `nodeorder` plugin wraps them.
//! Each raw scorer returns 0..=100; NodeAffinity and TaintToleration are normalised across the
//! feasible nodes afterwards (by [`finish`]), exactly as kube-scheduler's `NormalizeScore` does.

use crate::conf::Weights;
use crate::model::{CPU, CompiledPod, MEMORY, NodeMeta, TaintEffect};
use crate::snapshot::{Chunk, Row, flags};

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

/// The rows of one chunk that scoring reads, resolved once per chunk.
pub struct ScoreRows<'a> {
    alloc: [&'a Row; 2],
    free: [&'a Row; 2],
    nonzero: [&'a Row; 2],
}

impl<'a> ScoreRows<'a> {
    #[inline]
    pub fn new(chunk: &'a Chunk) -> ScoreRows<'a> {
        ScoreRows {
            alloc: [chunk.alloc_row(CPU), chunk.alloc_row(MEMORY)],
            free: [chunk.free_row(CPU), chunk.free_row(MEMORY)],
            nonzero: [&chunk.nonzero_used[0], &chunk.nonzero_used[1]],
        }
    }
}

/// NodeResourcesFit scoring over CPU and memory (equal weights), on non-zero requests.
#[inline]
fn allocation_score(pod: &CompiledPod, r: &ScoreRows<'_>, i: usize, most: bool) -> i64 {
    let mut sum = 0;
    let mut n = 0;
    for (k, pod_req) in [(0, pod.nonzero_cpu), (1, pod.nonzero_memory)] {
        let alloc = r.alloc[k][i];
        if alloc == 0 {
            continue;
        }
        let req = r.nonzero[k][i] + pod_req;
        sum += if most {
            most_requested(req, alloc)
        } else {
            least_requested(req, alloc)
        };
        n += 1;
    }
    if n == 0 { 0 } else { sum / n }
}

#[inline]
fn fraction(used: i64, req: i64, alloc: i64) -> f64 {
    ((used + req) as f64 / alloc as f64).min(1.0)
}

/// BalancedAllocation: `(1 - std(fractions)) * 100` over CPU, memory and, when the pod asks for
/// it, `nvidia.com/gpu`; actual requests, fractions capped at 1, resources the node lacks skipped.
#[inline]
fn balanced(pod: &CompiledPod, chunk: &Chunk, r: &ScoreRows<'_>, i: usize, gpu: Option<u8>) -> i64 {
    let (ac, am) = (r.alloc[0][i], r.alloc[1][i]);
    let gpu_req = gpu.map_or(0, |g| pod.request(g));
    if gpu_req == 0 && ac > 0 && am > 0 {
        // The common case: two resources, std = |f1 - f2| / 2.
        let fc = fraction(ac - r.free[0][i], pod.request(CPU), ac);
        let fm = fraction(am - r.free[1][i], pod.request(MEMORY), am);
        return ((1.0 - ((fc - fm) / 2.0).abs()) * MAX_NODE_SCORE as f64) as i64;
    }
    let mut fr = [0f64; 3];
    let mut n = 0;
    for (alloc, used, req) in [
        (ac, ac - r.free[0][i], pod.request(CPU)),
        (am, am - r.free[1][i], pod.request(MEMORY)),
        gpu.filter(|_| gpu_req > 0).map_or((0, 0, 0), |g| {
            (chunk.alloc(g, i), chunk.used(g, i), gpu_req)
        }),
    ] {
        if alloc > 0 {
            fr[n] = fraction(used, req, alloc);
            n += 1;
        }
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

/// Score node `i` (tests and cold paths; the scan uses [`score_with`]).
pub fn score(pod: &CompiledPod, w: &Weights, chunk: &Chunk, i: usize, gpu: Option<u8>) -> Raw {
    score_with(pod, w, chunk, &ScoreRows::new(chunk), i, gpu)
}

/// Score node `i`; `gpu` is the slot of `nvidia.com/gpu` if registered. The node description is
/// read only when a normalised scorer needs it (preferred terms, PreferNoSchedule taints).
// Always: the scan loop runs it per node (a call per node costs a quarter more).
#[inline(always)]
pub fn score_with(
    pod: &CompiledPod,
    w: &Weights,
    chunk: &Chunk,
    rows: &ScoreRows<'_>,
    i: usize,
    gpu: Option<u8>,
) -> Raw {
    let mut base = 0;
    if w.least_requested != 0 {
        base += w.least_requested * allocation_score(pod, rows, i, false);
    }
    if w.most_requested != 0 {
        base += w.most_requested * allocation_score(pod, rows, i, true);
    }
    if w.balanced_resource != 0 {
        base += w.balanced_resource * balanced(pod, chunk, rows, i, gpu);
    }
    let mut raw = Raw {
        base,
        affinity: 0,
        taints: 0,
    };
    let wants_affinity = w.node_affinity != 0 && !pod.preferred.is_empty();
    let wants_taints = w.taint_toleration != 0 && chunk.flags[i] & flags::SOFT_TAINTS != 0;
    if (wants_affinity || wants_taints)
        && let Some(meta) = chunk.meta[i].as_deref()
    {
        if wants_affinity {
            raw.affinity = node_affinity_raw(pod, meta);
        }
        if wants_taints {
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
