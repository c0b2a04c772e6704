//! BalancedAllocation: prefer nodes whose CPU and memory (and `nvidia.com/gpu`, when the pod asks
//! for it) would be used in equal proportions: `(1 - std(fractions)) * 100` over the pod's actual
//! requests, fractions capped at 1, resources the node lacks skipped (kube-scheduler's formula,
//! with Volcano's resource list).

use super::{Cycle, MAX_NODE_SCORE, Node, Scorer, Weight};
use crate::model::{CPU, CompiledPod, MEMORY, Slot};
use crate::snapshot::{Chunk, Row, ZERO_ROW};

pub struct BalancedAllocation;

/// The pod's requests and the current chunk's rows for them.
pub struct BalanceRows<'a> {
    pod: &'a CompiledPod,
    /// The pod's CPU and memory requests (actual, not the non-zero defaults).
    cpu: i64,
    memory: i64,
    /// Slot of `nvidia.com/gpu` when the pod requests some.
    gpu: Option<Slot>,
    alloc: [&'a Row; 2],
    free: [&'a Row; 2],
}

#[inline]
fn fraction(used: i64, req: i64, alloc: i64) -> f64 {
    ((used + req) as f64 / alloc as f64).min(1.0)
}

impl Scorer for BalancedAllocation {
    const NAME: &'static str = "NodeResourcesBalancedAllocation";
    const WEIGHT: Weight = Weight {
        key: "balancedresource.weight",
        default: 1,
    };
    const NORMALIZED: bool = false;
    type State<'a> = BalanceRows<'a>;

    #[inline(always)]
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<BalanceRows<'a>> {
        Some(BalanceRows {
            pod: cx.pod,
            cpu: cx.pod.request(CPU),
            memory: cx.pod.request(MEMORY),
            gpu: cx.snap.gpu_slot.filter(|&g| cx.pod.request(g) > 0),
            alloc: [&ZERO_ROW; 2],
            free: [&ZERO_ROW; 2],
        })
    }

    #[inline(always)]
    fn enter_chunk<'a>(st: &mut BalanceRows<'a>, chunk: &'a Chunk) {
        st.alloc = [chunk.alloc_row(CPU), chunk.alloc_row(MEMORY)];
        st.free = [chunk.free_row(CPU), chunk.free_row(MEMORY)];
    }

    #[inline(always)]
    fn score(st: &BalanceRows<'_>, node: Node<'_>) -> i64 {
        let i = node.i;
        let (ac, am) = (st.alloc[0][i], st.alloc[1][i]);
        if st.gpu.is_none() && ac > 0 && am > 0 {
            // The common case: two resources, std = |f1 - f2| / 2.
            let fc = fraction(ac - st.free[0][i], st.cpu, ac);
            let fm = fraction(am - st.free[1][i], st.memory, am);
            return ((1.0 - ((fc - fm) / 2.0).abs()) * MAX_NODE_SCORE as f64) as i64;
        }
        general(st, node)
    }
}

/// Three resources, or a node lacking one: out of line, off the common path.
#[inline(never)]
fn general(st: &BalanceRows<'_>, node: Node<'_>) -> i64 {
    let i = node.i;
    let (ac, am) = (st.alloc[0][i], st.alloc[1][i]);
    let pod = st.pod;
    let mut fr = [0f64; 3];
    let mut n = 0;
    for (alloc, used, req) in [
        (ac, ac - st.free[0][i], st.cpu),
        (am, am - st.free[1][i], st.memory),
        st.gpu.map_or((0, 0, 0), |g| {
            (
                node.chunk.alloc(g, i),
                node.chunk.used(g, i),
                pod.request(g),
            )
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
