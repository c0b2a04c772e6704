//! NodeResourcesFit: does the pod's effective request fit the node's free capacity (every
//! resource it asks for, extended ones included), does the node have a pod slot left, and
//! kube-scheduler's two allocation scores, LeastAllocated and MostAllocated (CPU and memory,
//! equal weights, on the non-zero requests).
//!
//! Upstream's order (Volcano, `volcano-agent-scheduler.md` §4.2, §5.1): the allocate action's
//! own resource check comes first and, when it fails, no predicate is consulted; the pod count
//! is the first predicate, recorded without stopping the chain.

use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, OnFailure, Reason, Scorer, Verdict, Weight,
};
use crate::dra::extended::Extended;
use crate::event::{self, Events};
use crate::model::{CPU, CompiledPod, MEMORY, PODS, Slot};
use crate::snapshot::{Chunk, Row, ZERO_ROW};

/// What can give a node more room: a new node, a pod leaving one (judged on what it freed), a
/// node growing.
const ROOM: Events = event::NODE_ADDED | event::ROOM_FREED | event::NODE_ALLOCATABLE_GREW;

/// `Insufficient <resource>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Insufficient(pub Slot);

impl Reason for Insufficient {
    fn wake(self) -> Events {
        // A resource beyond the built-in ones may be provided by devices once a DeviceClass
        // names it (`extendedResourceName`): class changes wake such pods too.
        if self.0 > PODS {
            ROOM | event::DEVICES_CHANGED
        } else {
            ROOM
        }
    }

    fn message(self, names: &Names<'_>) -> String {
        format!("Insufficient {}", names.resources.name(self.0))
    }
}

/// The resource fit (every requested resource but the pod slot).
pub struct Fit;

/// Requested resources resolved to rows once per chunk; pods asking for more take the slow path.
const FAST_RESOURCES: usize = 8;

/// The free-capacity rows of the current chunk for what the pod requests, so the per-node check
/// is a few loads and compares.
pub struct FitRows<'a> {
    pod: &'a CompiledPod,
    /// (row, request, slot) of each requested resource but the pod slot.
    rows: [(&'a Row, i64, Slot); FAST_RESOURCES],
    n: usize,
    /// More than `FAST_RESOURCES` requested: read through the node's chunk instead.
    slow: bool,
    /// Extended resources DRA provides where a node does not offer them (allocatable 0): those
    /// nodes are DynamicResources' to judge (`dra::extended`). Read only when a request fails.
    dra: Option<&'a Extended>,
}

impl Filter for Fit {
    const NAME: &'static str = "NodeResourcesFit";
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Insufficient;
    type State<'a> = FitRows<'a>;

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<FitRows<'a>> {
        let n = cx.pod.requests.iter().filter(|&&(s, _)| s != PODS).count();
        if n == 0 {
            return None;
        }
        Some(FitRows {
            pod: cx.pod,
            rows: [(&ZERO_ROW, 0, 0); FAST_RESOURCES],
            n: n.min(FAST_RESOURCES),
            slow: n > FAST_RESOURCES,
            dra: cx.claims.and_then(|c| c.extended.as_deref()),
        })
    }

    #[inline(always)]
    fn enter_chunk<'a>(st: &mut FitRows<'a>, chunk: &'a Chunk) {
        if st.slow {
            return;
        }
        let wanted = st.pod.requests.iter().filter(|&&(s, _)| s != PODS);
        for (k, &(s, r)) in wanted.enumerate() {
            st.rows[k] = (chunk.free_row(s), r, s);
        }
    }

    #[inline(always)]
    fn filter<V: Verdict<Insufficient>>(st: &FitRows<'_>, node: Node<'_>, v: &mut V) -> bool {
        let mut ok = true;
        if st.slow {
            for &(s, r) in st.pod.requests.iter().filter(|&&(s, _)| s != PODS) {
                if node.chunk.free(s, node.i) < r && !st.deferred(s, node) {
                    if !V::EXPLAIN {
                        return false;
                    }
                    v.fail(Insufficient(s));
                    ok = false;
                }
            }
            return ok;
        }
        for &(row, r, s) in &st.rows[..st.n] {
            if row[node.i] < r && !st.deferred(s, node) {
                if !V::EXPLAIN {
                    return false;
                }
                v.fail(Insufficient(s));
                ok = false;
            }
        }
        ok
    }
}

impl FitRows<'_> {
    /// A resource DRA provides on this node (it offers none of it).
    #[inline]
    fn deferred(&self, s: Slot, node: Node<'_>) -> bool {
        self.dra
            .is_some_and(|e| e.defers(s, node.chunk.alloc(s, node.i)))
    }
}

/// `node(s) pod number exceeded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TooManyPods;

impl Reason for TooManyPods {
    fn wake(self) -> Events {
        ROOM
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) pod number exceeded".to_owned()
    }
}

/// The node's `pods` allocatable against the pods counted on it (Volcano's first predicate).
pub struct PodCount;

impl Filter for PodCount {
    const NAME: &'static str = "NodeResourcesFit";
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Continue;
    type Reason = TooManyPods;
    /// The free `pods` row of the current chunk.
    type State<'a> = &'a Row;

    #[inline(always)]
    fn pre_filter<'a>(_: Cycle<'a>) -> Option<&'a Row> {
        Some(&ZERO_ROW)
    }

    #[inline(always)]
    fn enter_chunk<'a>(row: &mut &'a Row, chunk: &'a Chunk) {
        *row = chunk.free_row(PODS);
    }

    #[inline(always)]
    fn filter<V: Verdict<TooManyPods>>(row: &&Row, node: Node<'_>, v: &mut V) -> bool {
        if row[node.i] < 1 {
            v.fail(TooManyPods);
            return false;
        }
        true
    }
}

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

/// What both allocation scores read: the pod's non-zero CPU and memory requests, and the
/// current chunk's allocatable and non-zero-requested rows for them.
pub struct AllocationRows<'a> {
    pod: [i64; 2],
    alloc: [&'a Row; 2],
    nonzero: [&'a Row; 2],
}

impl<'a> AllocationRows<'a> {
    #[inline(always)]
    fn new(pod: &CompiledPod) -> AllocationRows<'a> {
        AllocationRows {
            pod: [pod.nonzero_cpu, pod.nonzero_memory],
            alloc: [&ZERO_ROW; 2],
            nonzero: [&ZERO_ROW; 2],
        }
    }

    #[inline(always)]
    fn enter(&mut self, chunk: &'a Chunk) {
        self.alloc = [chunk.alloc_row(CPU), chunk.alloc_row(MEMORY)];
        self.nonzero = [&chunk.nonzero_used[0], &chunk.nonzero_used[1]];
    }

    /// The mean over CPU and memory (resources the node lacks skipped) of `f(requested,
    /// capacity)`.
    #[inline(always)]
    fn score(&self, i: usize, f: impl Fn(i64, i64) -> i64) -> i64 {
        let mut sum = 0;
        let mut n = 0;
        for k in 0..2 {
            let alloc = self.alloc[k][i];
            if alloc == 0 {
                continue;
            }
            sum += f(self.nonzero[k][i] + self.pod[k], alloc);
            n += 1;
        }
        if n == 0 { 0 } else { sum / n }
    }
}

/// LeastAllocated: prefer the node with the most room left (spreading).
pub struct LeastAllocated;

impl Scorer for LeastAllocated {
    const NAME: &'static str = "NodeResourcesFit";
    const WEIGHT: Weight = Weight {
        key: "leastrequested.weight",
        default: 1,
    };
    const NORMALIZED: bool = false;
    type State<'a> = AllocationRows<'a>;

    #[inline(always)]
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<AllocationRows<'a>> {
        Some(AllocationRows::new(cx.pod))
    }

    #[inline(always)]
    fn enter_chunk<'a>(st: &mut AllocationRows<'a>, chunk: &'a Chunk) {
        st.enter(chunk);
    }

    #[inline(always)]
    fn score(st: &AllocationRows<'_>, node: Node<'_>) -> i64 {
        st.score(node.i, least_requested)
    }
}

/// MostAllocated: prefer the fullest node that fits (binpacking).
pub struct MostAllocated;

impl Scorer for MostAllocated {
    const NAME: &'static str = "NodeResourcesFit";
    const RARE: bool = true;
    const WEIGHT: Weight = Weight {
        key: "mostrequested.weight",
        default: 0,
    };
    const NORMALIZED: bool = false;
    type State<'a> = AllocationRows<'a>;

    #[inline(always)]
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<AllocationRows<'a>> {
        Some(AllocationRows::new(cx.pod))
    }

    #[inline(always)]
    fn enter_chunk<'a>(st: &mut AllocationRows<'a>, chunk: &'a Chunk) {
        st.enter(chunk);
    }

    #[inline(always)]
    fn score(st: &AllocationRows<'_>, node: Node<'_>) -> i64 {
        st.score(node.i, most_requested)
    }
}
