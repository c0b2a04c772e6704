//! The allocate action: for one pod and one snapshot, find up to `candidateNodeCount` nodes,
//! best first, or explain why none fits.
//!
//! 1. Scan node slots from the worker's rotating start until upstream's sample size of feasible
//!    nodes is found (`Sampling::nodes_to_find`) or every node was seen, filtering each with
//!    `predicates::fits` and scoring the feasible ones on the spot.
//! 2. Normalise NodeAffinity/TaintToleration over the feasible set and keep the best `2K` by
//!    (score, random tie-break): the per-worker random key makes concurrent workers spread over
//!    equally good nodes instead of colliding on the first one.
//! 3. Of those, nodes whose bind version moved since the snapshot (claimed by an in-flight
//!    result not yet published) are tried last; the first `K` become the candidates.
//! 4. No feasible node: every node is explained (`predicates::explain`) and the reasons are
//!    counted for upstream's `0/N nodes are unavailable: ...` message.
//!
//! Runs on worker threads: no locks, no hashing, and no allocation in steady state (all buffers
//! live in [`Scratch`]); the only shared writes are the worker's own counters.

use crate::binder::{BindVersions, Candidate};
use crate::model::CompiledPod;
use crate::plugins::nodeorder::{self, Raw, ScoreRows};
use crate::plugins::predicates::{self, Failure, FitRows};
use crate::queue::reason::{self, ReasonMask};
use crate::shard::{NodeSet, ShardingMode};
use crate::snapshot::{CHUNK, Snapshot};

/// Reusable per-worker buffers.
pub struct Scratch {
    feasible: Vec<(u32, Raw)>,
    best: Vec<(i64, u64, u32)>,
    pub candidates: Vec<Candidate>,
    rng: u64,
    cursor: usize,
}

impl Scratch {
    pub fn new(seed: u64) -> Scratch {
        Scratch {
            feasible: Vec::with_capacity(1024),
            best: Vec::with_capacity(128),
            candidates: Vec::with_capacity(16),
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cursor: (seed as usize).wrapping_mul(7919),
        }
    }

    #[inline]
    fn next_rand(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Why a pod fits nowhere: how many nodes were evaluated and how often each reason occurred.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureSummary {
    pub nodes: usize,
    pub reasons: Vec<(Failure, u32)>,
    pub mask: ReasonMask,
    /// Hard sharding mode and the scheduler's own NodeShard does not exist.
    pub shard_missing: bool,
}

impl FailureSummary {
    fn add(&mut self, f: Failure) {
        self.mask |= match f {
            Failure::Insufficient(_) => reason::RESOURCES,
            Failure::TooManyPods => reason::PODS,
            Failure::Unschedulable => reason::UNSCHEDULABLE,
            Failure::NodeName => reason::NODE_NAME,
            Failure::Affinity => reason::AFFINITY,
            Failure::Taint { .. } => reason::TAINT,
            Failure::Ports => reason::PORTS,
            Failure::NotInShard => reason::SHARD,
        };
        match self.reasons.iter_mut().find(|(r, _)| *r == f) {
            Some((_, n)) => *n += 1,
            None => self.reasons.push((f, 1)),
        }
    }
}

/// The outcome of one allocate run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Candidates are in `Scratch::candidates`, best first.
    Candidates,
    Unschedulable(FailureSummary),
}

/// Run the allocate action for `pod` on `snap`.
pub fn allocate(
    snap: &Snapshot,
    pod: &CompiledPod,
    versions: &BindVersions,
    s: &mut Scratch,
) -> Decision {
    let profile = &*snap.profile;
    let weights = &profile.weights;
    let k = profile.candidate_node_count.max(1);
    let n_slots = snap.arena.slots();
    s.feasible.clear();
    s.candidates.clear();
    if snap.nodes == 0 || n_slots == 0 {
        return Decision::Unschedulable(FailureSummary {
            nodes: 0,
            reasons: Vec::new(),
            mask: reason::NO_NODES,
            shard_missing: false,
        });
    }
    // The sharding mode is a node-set view (DESIGN.md §3): a mask word per chunk, not a
    // per-node predicate.
    let maxima = match (snap.sharding, snap.shard.as_deref()) {
        (ShardingMode::None, _) | (ShardingMode::Soft, None) => {
            let to_find = profile.sampling.nodes_to_find(snap.nodes);
            scan(snap, pod, s, to_find, Eligible::All)
        }
        (ShardingMode::Hard, None) => {
            return Decision::Unschedulable(explain_all(snap, pod));
        }
        (ShardingMode::Hard, Some(set)) => {
            let to_find = profile.sampling.nodes_to_find(set.count);
            scan(snap, pod, s, to_find, Eligible::In(set))
        }
        (ShardingMode::Soft, Some(set)) => {
            // Every shard node is considered before any other, so the preference is exact.
            let to_find = profile.sampling.nodes_to_find(set.count);
            let maxima = scan(snap, pod, s, to_find, Eligible::In(set));
            if s.feasible.is_empty() {
                // Nothing was feasible, so nothing was scored: the fallback starts afresh.
                let rest = snap.nodes.saturating_sub(set.count);
                let to_find = profile.sampling.nodes_to_find(rest);
                scan(snap, pod, s, to_find, Eligible::Out(set))
            } else {
                maxima
            }
        }
    };
    if s.feasible.is_empty() {
        return Decision::Unschedulable(explain_all(snap, pod));
    }
    // Keep the best 2K by (score, random key).
    let keep = (2 * k).min(s.feasible.len());
    s.best.clear();
    for idx in 0..s.feasible.len() {
        let (slot, raw) = s.feasible[idx];
        let score = nodeorder::finish(raw, weights, maxima.0, maxima.1);
        let key = s.next_rand();
        if s.best.len() == keep {
            let (ls, lk, _) = s.best[keep - 1];
            if (score, key) <= (ls, lk) {
                continue;
            }
            s.best.pop();
        }
        let pos = s
            .best
            .partition_point(|&(bs, bk, _)| (bs, bk) > (score, key));
        s.best.insert(pos, (score, key, slot));
    }
    // Current nodes first, then those already claimed by results not yet in the snapshot.
    for pass in [true, false] {
        for &(_, _, slot) in &s.best {
            if s.candidates.len() == k {
                break;
            }
            let version = snap.version(slot as usize);
            let current = versions.current(slot as usize) == version;
            if current == pass {
                s.candidates.push(Candidate {
                    slot,
                    version,
                    incarnation: snap.incarnation(slot as usize),
                });
            }
        }
    }
    Decision::Candidates
}

/// Which slots a scan visits.
#[derive(Clone, Copy)]
enum Eligible<'a> {
    All,
    /// The shard's nodes.
    In(&'a NodeSet),
    /// The nodes outside the shard (soft mode's fallback).
    Out(&'a NodeSet),
}

impl Eligible<'_> {
    /// Eligible slots of chunk `c`, one bit each.
    #[inline]
    fn mask(self, c: usize) -> u64 {
        match self {
            Eligible::All => u64::MAX,
            Eligible::In(set) => set.mask(c),
            Eligible::Out(set) => !set.mask(c),
        }
    }
}

/// Step 1 over the `eligible` slots: from the worker's rotating cursor, filter and score until
/// `to_find` feasible nodes are found or every slot was seen. Returns the highest raw
/// NodeAffinity and TaintToleration scores of the feasible nodes it found. One instance, kept out
/// of line: the filter and score functions inline into its loop (inlined into `allocate` three
/// times over they did not, and every node cost a quarter more).
#[inline(never)]
fn scan(
    snap: &Snapshot,
    pod: &CompiledPod,
    s: &mut Scratch,
    to_find: usize,
    eligible: Eligible<'_>,
) -> (i64, i64) {
    let profile = &*snap.profile;
    let (preds, weights, gpu_slot) = (profile.predicates, &profile.weights, snap.gpu_slot);
    let (mut max_aff, mut max_taint) = (0i64, 0i64);
    let n_slots = snap.arena.slots();
    let start = s.cursor % n_slots;
    let mut slot = start;
    let mut scanned = 0;
    // Filter and score node `$i` of `$chunk`; leave the scan once enough nodes are feasible.
    macro_rules! visit {
        ($scan:lifetime, $chunk:expr, $fit:expr, $score:expr, $ci:expr, $i0:expr, $i:expr) => {
            if predicates::fits_with(pod, preds, $chunk, $fit, $i) {
                let raw = nodeorder::score_with(pod, weights, $chunk, $score, $i, gpu_slot);
                max_aff = max_aff.max(raw.affinity);
                max_taint = max_taint.max(raw.taints);
                s.feasible.push((($ci * CHUNK + $i) as u32, raw));
                if s.feasible.len() >= to_find {
                    scanned += $i + 1 - $i0;
                    break $scan;
                }
            }
        };
    }
    'scan: while scanned < n_slots {
        let ci = slot / CHUNK;
        let i0 = slot % CHUNK;
        let end = CHUNK.min(i0 + (n_slots - scanned));
        // Bits i0..end of the chunk's eligible slots.
        let window = (u64::MAX << i0) & (u64::MAX >> (CHUNK - end));
        let mut bits = eligible.mask(ci) & window;
        if bits != 0 {
            let chunk = snap.arena.chunk(ci);
            let fit_rows = FitRows::new(pod, chunk);
            let score_rows = ScoreRows::new(chunk);
            if bits == window {
                // Every slot eligible (mode none, or a chunk wholly in the view): a plain
                // counted loop.
                for i in i0..end {
                    visit!('scan, chunk, &fit_rows, &score_rows, ci, i0, i);
                }
            } else {
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    visit!('scan, chunk, &fit_rows, &score_rows, ci, i0, i);
                }
            }
        }
        scanned += end - i0;
        slot = (ci * CHUNK + end) % n_slots;
    }
    s.cursor = start + scanned;
    (max_aff, max_taint)
}

/// Every live node's reasons for rejecting the pod. Runs only when nothing fits. In hard
/// sharding mode a node outside the shard fails with upstream's "not in shard" reason only.
pub fn explain_all(snap: &Snapshot, pod: &CompiledPod) -> FailureSummary {
    let preds = snap.profile.predicates;
    let mut summary = FailureSummary::default();
    let hard = snap.sharding == ShardingMode::Hard;
    summary.shard_missing = hard && snap.shard.is_none();
    if summary.shard_missing && snap.nodes > 0 {
        // No shard: every node fails for the same reason, without looking at it.
        summary.nodes = snap.nodes;
        summary.mask = reason::SHARD;
        summary
            .reasons
            .push((Failure::NotInShard, snap.nodes as u32));
        return summary;
    }
    for ci in 0..snap.arena.num_chunks() {
        let chunk = snap.arena.chunk(ci);
        let in_shard = snap.shard.as_ref().map_or(0, |set| set.mask(ci));
        for i in 0..CHUNK {
            if chunk.meta[i].is_none() {
                continue;
            }
            summary.nodes += 1;
            if hard && in_shard & (1 << i) == 0 {
                summary.add(Failure::NotInShard);
                continue;
            }
            predicates::explain(pod, preds, chunk, i, &mut |f| summary.add(f));
        }
    }
    if summary.nodes == 0 {
        summary.mask |= reason::NO_NODES;
    }
    summary
}

/// Upstream's `FitErrors.Error()`: `0/N nodes are unavailable: <count> <reason>, ....` with the
/// "count reason" strings sorted, or `all nodes are unavailable` when there are no nodes.
pub fn failure_message(
    summary: &FailureSummary,
    resource_name: impl Fn(u8) -> String,
    string: impl Fn(u32) -> String,
) -> String {
    if summary.nodes == 0 {
        return "0/0 nodes are unavailable".to_owned();
    }
    let mut parts: Vec<String> = summary
        .reasons
        .iter()
        .map(|(f, n)| {
            let text = match f {
                Failure::Insufficient(s) => format!("Insufficient {}", resource_name(*s)),
                Failure::TooManyPods => "node(s) pod number exceeded".to_owned(),
                Failure::Unschedulable => "node(s) were unschedulable".to_owned(),
                Failure::NodeName => "node(s) didn't match the requested node name".to_owned(),
                Failure::Affinity => "node(s) didn't match Pod's node affinity/selector".to_owned(),
                Failure::Taint { key, value } => {
                    format!(
                        "node(s) had untolerated taint {{{}: {}}}",
                        string(*key),
                        string(*value)
                    )
                }
                Failure::Ports => {
                    "node(s) didn't have free ports for the requested pod ports".to_owned()
                }
                Failure::NotInShard => "node isn't in scheduler node shard".to_owned(),
            };
            format!("{n} {text}")
        })
        .collect();
    parts.sort();
    // Taint reasons with different keys are distinct reasons; identical strings merge.
    parts.dedup();
    if parts.is_empty() {
        return format!("0/{} nodes are unavailable", summary.nodes);
    }
    format!(
        "0/{} nodes are unavailable: {}.",
        summary.nodes,
        parts.join(", ")
    )
}
