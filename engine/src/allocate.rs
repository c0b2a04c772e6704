//! The allocate action: for one pod and one snapshot, find up to `candidateNodeCount` nodes,
//! best first, or explain why none fits.
//!
//! 1. PreFilter and PreScore the plugins once for the pod (`plugins::Filters`, `Scores`).
//! 2. Scan the node slots the snapshot's sharding [`View`] admits, from the worker's rotating
//!    start, until upstream's sample size of feasible nodes is found
//!    (`Sampling::nodes_to_find`) or every admitted node was seen, filtering each with
//!    `Filters::fits` and scoring the feasible ones on the spot. The view is one mask word per
//!    64-node chunk; soft mode scans the shard's nodes first and the rest only if none fits.
//! 3. Normalise the normalised scorers over the feasible set and keep the best `2K` by
//!    (score, random tie-break): the per-worker random key makes concurrent workers spread over
//!    equally good nodes instead of colliding on the first one.
//! 4. Of those, nodes whose bind version moved since the snapshot (claimed by an in-flight
//!    result not yet published) are tried last; the first `K` become the candidates. Which
//!    fallbacks may be offered at all depends on the scoring (packing or spreading) and, when
//!    packing, on the [`Backlog`] behind the decision (below, "Fallbacks").
//! 5. No feasible node: every node is explained (`Filters::explain`) and the reasons are
//!    counted for upstream's `0/N nodes are unavailable: ...` message.
//!
//! Runs in the workers (threads, or the driver with one worker): no locks, no hashing, and no
//! allocation in steady state (all buffers live in [`Scratch`]); the only shared writes are the
//! worker's own counters.
//!
//! Fallbacks (issue 14, placement under bursts). A fallback is what a pod gets when its best node
//! was claimed by a concurrent decision. Spreading (the default weights): the claimed node got
//! worse, a near-equal node is the right call, and a fallback must score within
//! [`CANDIDATE_SCORE_GAP_PCT`] of the best. Packing (`mostrequested` outweighs
//! `leastrequested`): the claimed node got *better*, and falling back to an empty node opens a
//! bin one sequential worker would not have. Whether that costs a node depends on what follows:
//!
//! - **Strict** packing (few pods wait): a fallback is never an empty node (the pod is re-decided
//!   on the next snapshot instead, an urgent retry), and empty nodes tie by slot, so concurrent
//!   decisions open the same new bin. Ten 4-CPU nodes and eight 1-CPU pods use two nodes at any
//!   worker count.
//! - **Open** packing: while at least `in_flight × pods_per_bin` pods wait behind the decisions in
//!   flight, every bin those decisions may open concurrently (at most one each) is filled by the
//!   pods behind them, fullest first, so opening one costs no node; any of the best `2K` may be a
//!   fallback (no score gap, empty nodes included) and empty nodes tie at random, which keeps
//!   concurrent decisions apart. Bursts of thousands of pods keep the throughput of unbounded
//!   fallbacks (re-deciding every lost claim cost 13–30 % of it at 2–8 workers) and still place
//!   within 0.5 % of one worker (BENCHMARKS.md, "Placement quality under bursts").
//!   `pods_per_bin` is how many pods like this one an empty node like the first feasible one
//!   holds; the backlog is the driver's, published after every flush (advisory: it steers
//!   placement only, never what a claim proves).

use crate::binder::{BindVersions, Candidate};
use crate::dra::PodClaims;
use crate::event::{self, Events};
use crate::model::CompiledPod;
use crate::plugins::{
    Cycle, Failure, Filters, MAX_NODE_SCORE, Names, Node, Ranges, Raw, Reads, Scores,
};
use crate::shard::{self, NodeSet, View};
use crate::snapshot::{CHUNK, Snapshot};
use crate::volumes::PodVolumes;
use std::sync::Arc;

/// How far below the best node's score (in percent of the highest possible total) a fallback
/// candidate may be. Measured in BENCHMARKS.md ("Placement quality under bursts").
pub const CANDIDATE_SCORE_GAP_PCT: i64 = 2;

/// The pods behind a decision, as the driver last published them (`worker::Shared::backlog`):
/// packing opens new bins only while enough of them wait to fill them (module doc, "Fallbacks").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Pods in activeQ, not yet handed off.
    pub waiting: usize,
    /// Pods handed off or being decided: each decision opens at most one bin.
    pub in_flight: usize,
}

impl Backlog {
    /// Whether enough pods wait to fill every bin the decisions in flight may open, each holding
    /// `pods_per_bin` pods.
    fn fills(self, pods_per_bin: usize) -> bool {
        self.waiting > 0 && self.waiting >= self.in_flight.max(1).saturating_mul(pods_per_bin)
    }
}

/// Reusable per-worker buffers.
pub struct Scratch {
    feasible: Vec<(u32, Raw)>,
    best: Vec<(i64, u64, u32)>,
    pub candidates: Vec<Candidate>,
    /// What the candidates' verdicts read beyond their own nodes (`plugins::Reads`).
    pub reads: Reads,
    /// The other nodes a claim must find unchanged (`binder` step 5), reused by the worker.
    pub others: Vec<u32>,
    rng: u64,
    cursor: usize,
}

impl Scratch {
    pub fn new(seed: u64) -> Scratch {
        Scratch {
            feasible: Vec::with_capacity(1024),
            best: Vec::with_capacity(128),
            candidates: Vec::with_capacity(16),
            reads: Reads::default(),
            others: Vec::new(),
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
    /// The cluster events that can make the pod fit (the union of its reasons' wake-ups).
    pub wake: Events,
    /// Hard sharding mode and this NodeShard does not exist (its name, for the message).
    pub missing_shard: Option<Arc<str>>,
    /// Nodes no pod's removal can make fit (upstream's `UnschedulableAndUnresolvable`): one of
    /// their reasons wakes on neither a pod's removal nor freed room, the pod asks for more
    /// than their allocatable, or they are outside this scheduler's shard. Preemption skips
    /// them and counts them as `Preemption is not helpful for scheduling`.
    pub unresolvable: u32,
    /// The other nodes' slots, where preemption may help (`preemption`).
    pub resolvable: Vec<u32>,
}

impl FailureSummary {
    fn add(&mut self, f: Failure) {
        self.wake |= f.wake();
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

/// Run the allocate action for `pod` on `snap`. A pod nominated to a node by preemption
/// (`nominated`) is tried there first and, when it fits, offered that node alone (upstream's
/// `evaluateNominatedNode`: the node its victims were evicted for).
#[allow(clippy::too_many_arguments)]
pub fn allocate(
    snap: &Snapshot,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
    nominated: Option<u32>,
    versions: &BindVersions,
    backlog: Backlog,
    s: &mut Scratch,
) -> Decision {
    let profile = &*snap.profile;
    // Packing or spreading decides which fallbacks are offered (module doc, "Fallbacks").
    let packing = profile.weights.most_allocated > profile.weights.least_allocated;
    let k = profile.candidate_node_count.max(1);
    s.feasible.clear();
    s.candidates.clear();
    if snap.nodes == 0 || snap.arena.slots() == 0 {
        return Decision::Unschedulable(FailureSummary {
            wake: event::NODE_ADDED,
            ..FailureSummary::default()
        });
    }
    let cx = Cycle {
        pod,
        snap,
        volumes,
        claims,
    };
    let mut filters = Filters::new(cx);
    if let Some(slot) = nominated
        && (slot as usize) < snap.arena.slots()
        && snap.view.admits(slot as usize / CHUNK) & (1 << (slot as usize % CHUNK)) != 0
    {
        let chunk = snap.arena.chunk(slot as usize / CHUNK);
        filters.enter_chunk(chunk);
        if filters.fits(Node::new(chunk, slot as usize % CHUNK)) {
            s.candidates.push(Candidate {
                slot,
                version: snap.version(slot as usize),
                incarnation: snap.incarnation(slot as usize),
            });
            return Decision::Candidates;
        }
    }
    let mut scores = Scores::new(cx);
    let mut ranges = Ranges::default();
    let sample = |n: usize| profile.sampling.nodes_to_find(n);
    // The sharding view is a mask word per chunk (DESIGN.md §3), never a per-node predicate.
    match &snap.view {
        View::All => {
            let to_find = sample(snap.nodes);
            scan(
                snap,
                &mut filters,
                &mut scores,
                &mut ranges,
                s,
                to_find,
                Eligible::All,
            );
        }
        View::Only(set) => {
            let to_find = sample(set.count);
            scan(
                snap,
                &mut filters,
                &mut scores,
                &mut ranges,
                s,
                to_find,
                Eligible::In(set),
            );
        }
        View::First(set) => {
            // Every shard node is considered before any other, so the preference is exact.
            let to_find = sample(set.count);
            scan(
                snap,
                &mut filters,
                &mut scores,
                &mut ranges,
                s,
                to_find,
                Eligible::In(set),
            );
            if s.feasible.is_empty() {
                let to_find = sample(snap.nodes.saturating_sub(set.count));
                scan(
                    snap,
                    &mut filters,
                    &mut scores,
                    &mut ranges,
                    s,
                    to_find,
                    Eligible::Out(set),
                );
            }
        }
        View::Missing(_) => {}
    }
    if s.feasible.is_empty() {
        return Decision::Unschedulable(explain_all(snap, pod, volumes, claims));
    }
    filters.reads(&mut s.reads);
    // Strict packing (module doc): no fallback to an empty node, and empty nodes tie by slot.
    let strict = packing && !backlog.fills(pods_per_bin(snap, s.feasible[0].0, pod));
    // Keep the best 2K by (score, random key).
    let keep = (2 * k).min(s.feasible.len());
    s.best.clear();
    for idx in 0..s.feasible.len() {
        let (slot, raw) = s.feasible[idx];
        let score = scores.finish(&raw, &ranges);
        // Strict packing: empty nodes tie deterministically (lowest slot first), so concurrent
        // decisions open the same new bin rather than one each.
        let key = if strict && is_empty(snap, slot) {
            u64::MAX - u64::from(slot)
        } else {
            s.next_rand()
        };
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
    // Spreading: a fallback must be nearly as good as the best: a node that loses more than
    // `CANDIDATE_SCORE_GAP_PCT` of the highest possible total is not offered, so losing the best
    // node to a concurrent claim means re-deciding on the next snapshot (an urgent retry)
    // rather than settling for a much worse node. Strict packing: any node already in use will
    // do, an empty one never. Open packing: any node (the backlog fills what it opens).
    let floor = if packing {
        i64::MIN
    } else {
        s.best[0].0 - profile.weights.max_total() * MAX_NODE_SCORE * CANDIDATE_SCORE_GAP_PCT / 100
    };
    let best_slot = s.best[0].2;
    // Current nodes first, then those already claimed by results not yet in the snapshot.
    for pass in [true, false] {
        for &(score, _, slot) in &s.best {
            if s.candidates.len() == k {
                break;
            }
            if slot != best_slot && (score < floor || (strict && is_empty(snap, slot))) {
                continue;
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

/// How many pods like `pod` an empty node like `slot` holds (its allocatable over the pod's
/// requests, the pod count included). Once per decision, never per node.
fn pods_per_bin(snap: &Snapshot, slot: u32, pod: &CompiledPod) -> usize {
    let (chunk, i) = (
        snap.arena.chunk(slot as usize / CHUNK),
        slot as usize % CHUNK,
    );
    pod.requests
        .iter()
        .filter(|&&(_, q)| q > 0)
        .map(|&(r, q)| usize::try_from(chunk.alloc(r, i) / q).unwrap_or(0))
        .min()
        .unwrap_or(usize::MAX)
}

/// No pod is counted on the node in this snapshot.
fn is_empty(snap: &Snapshot, slot: u32) -> bool {
    let slot = slot as usize;
    snap.arena
        .chunk(slot / CHUNK)
        .used(crate::model::PODS, slot % CHUNK)
        == 0
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

/// Step 2 over the `eligible` slots: from the worker's rotating cursor, filter and score until
/// `to_find` feasible nodes are found or every slot was seen, widening `ranges` by the
/// normalised scores of the feasible nodes it finds. One instance, kept out of line: the
/// filter and score chains inline into its loop (inlined into `allocate` three times over they
/// did not, and every node cost a quarter more).
///
/// Two instances, in fact: `RARE` false for pods no rare plugin (pod affinity, spread, volumes)
/// has anything to check, whose per-node loop then has no trace of those plugins.
fn scan<'a>(
    snap: &'a Snapshot,
    filters: &mut Filters<'a>,
    scores: &mut Scores<'a>,
    ranges: &mut Ranges,
    s: &mut Scratch,
    to_find: usize,
    eligible: Eligible<'_>,
) {
    if filters.rare() || scores.rare() {
        scan_in::<true>(snap, filters, scores, ranges, s, to_find, eligible)
    } else {
        scan_in::<false>(snap, filters, scores, ranges, s, to_find, eligible)
    }
}

#[inline(never)]
fn scan_in<'a, const RARE: bool>(
    snap: &'a Snapshot,
    filters: &mut Filters<'a>,
    scores: &mut Scores<'a>,
    ranges: &mut Ranges,
    s: &mut Scratch,
    to_find: usize,
    eligible: Eligible<'_>,
) {
    let n_slots = snap.arena.slots();
    let start = s.cursor % n_slots;
    let mut slot = start;
    let mut scanned = 0;
    // Filter and score node `$i` of `$chunk`; leave the scan once enough nodes are feasible.
    macro_rules! visit {
        ($scan:lifetime, $chunk:expr, $ci:expr, $i0:expr, $i:expr) => {
            let node = Node::new($chunk, $i);
            if filters.fits_in::<RARE>(node) {
                let raw = scores.score_in::<RARE>(node, ranges);
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
            filters.enter_chunk(chunk);
            scores.enter_chunk(chunk);
            if bits == window {
                // Every slot eligible (mode none, or a chunk wholly in the view): a plain
                // counted loop.
                for i in i0..end {
                    visit!('scan, chunk, ci, i0, i);
                }
            } else {
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    visit!('scan, chunk, ci, i0, i);
                }
            }
        }
        scanned += end - i0;
        slot = (ci * CHUNK + end) % n_slots;
    }
    s.cursor = start + scanned;
}

/// Every live node's reasons for rejecting the pod. Runs only when nothing fits. Nodes the
/// sharding view does not admit (hard mode) fail with upstream's "not in shard" reason only.
pub fn explain_all(
    snap: &Snapshot,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
) -> FailureSummary {
    let mut summary = FailureSummary::default();
    if let View::Missing(shard) = &snap.view {
        // No shard: every node fails for the same reason, without looking at it.
        summary.missing_shard = Some(shard.clone());
        if snap.nodes > 0 {
            summary.nodes = snap.nodes;
            summary.wake = shard::NOT_IN_SHARD_WAKE;
            summary
                .reasons
                .push((Failure::NotInShard, snap.nodes as u32));
            summary.unresolvable = snap.nodes as u32;
            return summary;
        }
    }
    let mut filters = Filters::new(Cycle {
        pod,
        snap,
        volumes,
        claims,
    });
    for ci in 0..snap.arena.num_chunks() {
        let chunk = snap.arena.chunk(ci);
        let admitted = snap.view.admits(ci);
        filters.enter_chunk(chunk);
        for i in 0..CHUNK {
            if chunk.meta[i].is_none() {
                continue;
            }
            summary.nodes += 1;
            if admitted & (1 << i) == 0 {
                summary.add(Failure::NotInShard);
                summary.unresolvable += 1;
                continue;
            }
            let mut unresolvable = pod.requests.iter().any(|&(s, r)| r > chunk.alloc(s, i));
            filters.explain(Node::new(chunk, i), &mut |f| {
                unresolvable |= f.wake() & (event::POD_REMOVED | event::ROOM_FREED) == 0;
                summary.add(f)
            });
            if unresolvable {
                summary.unresolvable += 1;
            } else {
                summary.resolvable.push((ci * CHUNK + i) as u32);
            }
        }
    }
    if summary.nodes == 0 {
        summary.wake |= event::NODE_ADDED;
    }
    summary
}

/// Upstream's `FitErrors.Error()`: `0/N nodes are unavailable: <count> <reason>, ....` with the
/// "count reason" strings sorted, then, while this scheduler's NodeShard is missing in hard
/// mode, a sentence saying so.
pub fn failure_message(summary: &FailureSummary, names: &Names<'_>) -> String {
    let mut message = if summary.nodes == 0 {
        "0/0 nodes are unavailable".to_owned()
    } else {
        let mut parts: Vec<String> = summary
            .reasons
            .iter()
            .map(|(f, n)| format!("{n} {}", f.message(names)))
            .collect();
        parts.sort();
        // Taint reasons with different keys are distinct reasons; identical strings merge.
        parts.dedup();
        if parts.is_empty() {
            format!("0/{} nodes are unavailable", summary.nodes)
        } else {
            format!(
                "0/{} nodes are unavailable: {}.",
                summary.nodes,
                parts.join(", ")
            )
        }
    };
    if let Some(shard) = &summary.missing_shard {
        message.push_str(&shard::missing_shard_note(shard));
    }
    message
}
