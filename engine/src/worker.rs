//! Workers: the scheduling cycle, on threads of their own or, with one worker, on the driver's
//! (`engine` module doc).
//!
//! Each cycle: take a pod from the hand-off → announce an epoch and load the current snapshot
//! (one atomic load) → allocate → claim the first free candidate → report the result to the
//! driver through the inbox channel (a worker on the driver hands it over directly). The
//! worker never blocks on a lock and never allocates in steady state (its buffers live in
//! `Scratch`; the inbox is a lock-free list channel whose blocks are amortised).
//!
//! Epoch protocol (with the driver; loom model `worker_epochs`): before loading a snapshot the
//! worker stores the latest published sequence number into its epoch slot (`SeqCst`), and
//! stores `IDLE` after it has sent its result. The driver, after publishing, reads every epoch:
//! a busy worker's epoch is a lower bound of the sequence of the snapshot it holds. The driver
//! uses that bound to decide when a removed node's slot may be reused, and (sharding) when no
//! worker still schedules against an older node set.

use crate::allocate::{Backlog, Decision, FailureSummary, Scratch, allocate};
use crate::binder::{BindVersions, Candidate};
use crate::clock::{Clock, Nanos};
use crate::model::{CompiledPod, NodeMeta};
use crate::mutation;
use crate::plugins::Reads;
use crate::snapshot::Snapshot;
use crate::stats::{WorkerCounters, inc};
use crate::sync::{AtomicBool, AtomicU64, Ordering, Published};
use crate::volumes::PodVolumes;
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use std::sync::atomic;

/// Epoch value of a worker that holds no snapshot.
pub const IDLE: u64 = u64::MAX;

/// A pod handed to a worker.
#[derive(Debug, Clone)]
pub struct Task {
    pub pod: Arc<CompiledPod>,
    /// Queue generation when handed off (stale results are detected by it).
    pub generation: u64,
    pub arrived: Nanos,
    /// Decided in the lane (`binder` steps 5–7): the only lane task in flight.
    pub lane: bool,
    /// Its claims, resolved when it was handed off (`volumes`).
    pub volumes: Option<Arc<PodVolumes>>,
    /// Its ResourceClaims (DRA), resolved when it was handed off (`dra`).
    pub claims: Option<Arc<crate::dra::PodClaims>>,
    /// The driver's wake-up count when it was handed off: later wake-ups may have changed what
    /// `volumes` resolved.
    pub wakes_seen: u64,
    /// The node slot preemption nominated it to (`preemption`): tried first, and taken alone
    /// when the pod fits there.
    pub nominated: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Claimed {
        candidate: Candidate,
        /// The claim bumped the anti-affinity epoch (`binder` step 5).
        bumped: bool,
    },
    /// The CAS succeeded but the claim does not stand (`binder` steps 5–6): the driver counts
    /// the version increment and retries the pod at once.
    Burned {
        candidate: Candidate,
        bumped: bool,
        /// Its constraint turned out to span several nodes: decide it in the lane from now on.
        to_lane: bool,
    },
    /// Every candidate was taken by another claim.
    Conflict,
    /// The pod's labels were compiled at another label epoch than the snapshot's
    /// (`PodInfo::stale`): not decided; the driver converts them and tries it again at once.
    Stale,
    Unschedulable(FailureSummary),
    /// The engine is not leading: the pod goes back untouched.
    Paused,
}

#[derive(Debug, Clone)]
pub struct WorkerResult {
    pub task: Task,
    pub outcome: Outcome,
    pub worker: usize,
    pub popped: Nanos,
    pub done: Nanos,
    /// Sequence of the snapshot the decision was made on.
    pub snapshot_seq: u64,
}

/// What a worker shares with the driver. Every field is part of a protocol (the module doc,
/// `binder`, `shard`), so each is reached through the method that states its role.
pub struct Shared {
    published: Published<Snapshot>,
    /// Sequence of the latest published snapshot (stored after the snapshot itself).
    latest_seq: AtomicU64,
    versions: Arc<BindVersions>,
    epochs: Box<[CachePadded<AtomicU64>]>,
    /// `false` while not leading: workers stop claiming at once.
    leading: AtomicBool,
    stop: AtomicBool,
    /// The driver's backlog after its last flush, `waiting << 32 | in_flight` (each saturated at
    /// `u32::MAX`), one word so a worker reads a consistent pair. Advisory: it steers placement
    /// (`allocate::Backlog`), never what a claim proves, so `Relaxed` suffices, and it is a std
    /// atomic even under loom: no model's outcome may depend on it.
    backlog: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub fn new(workers: usize, first: Arc<Snapshot>, versions: Arc<BindVersions>) -> Shared {
        Shared {
            latest_seq: AtomicU64::new(first.seq),
            published: Published::new(first),
            versions,
            epochs: (0..workers)
                .map(|_| CachePadded::new(AtomicU64::new(IDLE)))
                .collect(),
            leading: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            backlog: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Workers sharing this state.
    pub fn workers(&self) -> usize {
        self.epochs.len()
    }

    /// The per-node bind-version counters (`binder`).
    pub fn versions(&self) -> &Arc<BindVersions> {
        &self.versions
    }

    /// The snapshot workers currently see (one atomic load; not an epoch announcement, so not
    /// for scheduling: workers use [`Shared::enter`]).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.load()
    }

    /// Sequence of the latest published snapshot.
    pub fn latest_seq(&self) -> u64 {
        self.latest_seq.load(Ordering::SeqCst)
    }

    /// Publish a snapshot (driver only).
    pub fn publish(&self, snap: Arc<Snapshot>) {
        let seq = snap.seq;
        // Mutation `publish_seq_first`: the sequence is announced before the snapshot.
        if mutation::publish_seq_first() {
            self.latest_seq.store(seq, Ordering::SeqCst);
        }
        self.published.store(snap);
        self.latest_seq.store(seq, Ordering::SeqCst);
    }

    /// Lowest snapshot sequence any worker may still hold (driver only, after publishing).
    pub fn horizon(&self) -> u64 {
        let latest = self.latest_seq.load(Ordering::SeqCst);
        self.epochs
            .iter()
            .map(|e| e.load(Ordering::SeqCst))
            .fold(latest, u64::min)
    }

    /// Worker: announce and load (see the module doc).
    pub fn enter(&self, worker: usize) -> Arc<Snapshot> {
        // Mutation `epoch_after_load`: the snapshot is loaded before the epoch is announced.
        let early = mutation::epoch_after_load().then(|| self.published.load());
        let announced = self.latest_seq.load(Ordering::SeqCst);
        self.epochs[worker].store(announced, Ordering::SeqCst);
        let snap = early.unwrap_or_else(|| self.published.load());
        debug_assert!(mutation::epoch_after_load() || snap.seq >= announced);
        snap
    }

    /// Worker: done with its snapshot.
    pub fn leave(&self, worker: usize) {
        self.epochs[worker].store(IDLE, Ordering::SeqCst);
    }

    /// Whether workers may claim. The driver learns of a change through an ordered
    /// `Input::Leadership` as well; this flag is what stops the workers at once.
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    pub fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::Release);
    }

    /// Publish the queue's backlog (driver only, after each flush).
    pub fn set_backlog(&self, b: Backlog) {
        let sat = |n: usize| {
            u64::try_from(n)
                .unwrap_or(u64::MAX)
                .min(u64::from(u32::MAX))
        };
        self.backlog.store(
            sat(b.waiting) << 32 | sat(b.in_flight),
            atomic::Ordering::Relaxed,
        );
    }

    /// The backlog as the driver last published it.
    pub fn backlog(&self) -> Backlog {
        let w = self.backlog.load(atomic::Ordering::Relaxed);
        Backlog {
            waiting: (w >> 32) as usize,
            in_flight: (w & u64::from(u32::MAX)) as usize,
        }
    }

    /// Ask the worker loops to exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// Whether a claim stands after steps 5–6 of `binder`.
enum Confirmed {
    Stands { bumped: bool },
    Burned { bumped: bool, to_lane: bool },
}

/// The other nodes of `slot`'s domains for the keys `reads` names, from the snapshot's domain
/// index (`index::Domains`), sorted; `multi_anti` set when an anti-affinity key's domain holds
/// one. `false` when the index cannot say (a key not indexed, or every node read): the caller
/// scans.
fn others_indexed(
    snap: &Snapshot,
    own: &NodeMeta,
    slot: u32,
    reads: &Reads,
    others: &mut Vec<u32>,
    multi_anti: &mut bool,
) -> bool {
    if reads.everywhere {
        return false;
    }
    for &key in &reads.domains {
        let Some(label) = own.label(key) else {
            continue;
        };
        let Some(slots) = snap.index().domains.slots(key, label.value) else {
            return false;
        };
        let before = others.len();
        others.extend(slots.iter().copied().filter(|&m| m != slot));
        *multi_anti |= others.len() > before && reads.anti.contains(&key);
    }
    if reads.domains.len() > 1 {
        // One key's slots come sorted and distinct from the index; several may overlap.
        others.sort_unstable();
        others.dedup();
    }
    true
}

/// Steps 5–6 of `binder` for a successful CAS on `slot`: find the other nodes of its topology
/// domains that the decision read (`Scratch::reads`), then, in the lane, bump the anti-affinity
/// epoch if an anti-affinity domain spans several nodes and check those nodes are unchanged;
/// outside the lane, check the epoch (and leave for the lane if the decision read other nodes).
fn confirm(
    snap: &Snapshot,
    versions: &BindVersions,
    lane: bool,
    s: &mut Scratch,
    slot: u32,
) -> Confirmed {
    let mut multi_anti = false;
    s.others.clear();
    if !s.reads.is_empty()
        && let Some(own) = snap.node(slot as usize)
        && !others_indexed(snap, own, slot, &s.reads, &mut s.others, &mut multi_anti)
    {
        s.others.clear();
        multi_anti = false;
        let reads = &s.reads;
        for m in 0..snap.arena.slots() {
            if m == slot as usize {
                continue;
            }
            let Some(meta) = snap.node(m) else { continue };
            let same = |key: u32| {
                own.label(key)
                    .is_some_and(|l| meta.label(key).is_some_and(|x| x.value == l.value))
            };
            if reads.everywhere || reads.domains.iter().any(|&k| same(k)) {
                s.others.push(m as u32);
                multi_anti |= reads.anti.iter().any(|&k| same(k));
            }
        }
    }
    if !lane {
        if !s.others.is_empty() {
            return Confirmed::Burned {
                bumped: false,
                to_lane: true,
            };
        }
        if !mutation::claim_ignores_epoch() && versions.anti_epoch_after_claim() != snap.anti_epoch
        {
            return Confirmed::Burned {
                bumped: false,
                to_lane: false,
            };
        }
        return Confirmed::Stands { bumped: false };
    }
    if s.others.is_empty() {
        return Confirmed::Stands { bumped: false };
    }
    let early = multi_anti && !mutation::epoch_after_validation();
    if early {
        versions.bump_anti_epoch();
    }
    let unchanged = versions.unchanged(&s.others, |m| snap.version(m as usize));
    if multi_anti && !early {
        versions.bump_anti_epoch();
    }
    if unchanged {
        Confirmed::Stands { bumped: multi_anti }
    } else {
        Confirmed::Burned {
            bumped: multi_anti,
            to_lane: false,
        }
    }
}

/// One worker's state.
pub struct Worker {
    pub id: usize,
    pub scratch: Scratch,
}

impl Worker {
    pub fn new(id: usize) -> Worker {
        Worker {
            id,
            scratch: Scratch::new(id as u64 + 1),
        }
    }

    /// One turn of the worker loop, for `task`: the scheduling cycle, the result handed to
    /// `send`, and only then the epoch left (the module doc: a result may name a node slot the
    /// driver must not reuse before it has the result). Every worker thread runs exactly this
    /// (`engine::Engine`), as do the driver of a single-worker engine, the deterministic harness
    /// (`testing`) and the loom models.
    pub fn turn(
        &mut self,
        shared: &Shared,
        counters: &WorkerCounters,
        clock: &dyn Clock,
        task: Task,
        send: impl FnOnce(WorkerResult),
    ) {
        let result = self.cycle(shared, counters, clock, task);
        send(result);
        shared.leave(self.id);
    }

    /// One scheduling cycle for `task`, inside the worker's epoch ([`Worker::turn`] sends the
    /// result and leaves it).
    pub fn cycle(
        &mut self,
        shared: &Shared,
        counters: &WorkerCounters,
        clock: &dyn Clock,
        task: Task,
    ) -> WorkerResult {
        let popped = clock.now();
        let snap = shared.enter(self.id);
        let outcome = if !shared.leading() {
            Outcome::Paused
        } else if task.pod.info.stale(snap.label_epoch) {
            // Labels kept as strings, split at another label epoch than the snapshot's: one
            // may have a key a selector here reads. The driver converts it and hands it off
            // again (`Cache::converted_pod`).
            inc(&counters.urgent_requeues, 1);
            Outcome::Stale
        } else {
            inc(&counters.attempts, 1);
            let volumes = task.volumes.as_deref();
            match allocate(
                &snap,
                &task.pod,
                volumes,
                task.claims.as_deref(),
                task.nominated,
                &shared.versions,
                shared.backlog(),
                &mut self.scratch,
            ) {
                Decision::Candidates => {
                    let cands = &self.scratch.candidates;
                    match shared.versions.claim_first(cands) {
                        Some(i) => {
                            inc(&counters.conflicts, i as u64);
                            let candidate = cands[i];
                            let s = &mut self.scratch;
                            match confirm(&snap, &shared.versions, task.lane, s, candidate.slot) {
                                Confirmed::Stands { bumped } => {
                                    inc(&counters.claims, 1);
                                    Outcome::Claimed { candidate, bumped }
                                }
                                Confirmed::Burned { bumped, to_lane } => {
                                    inc(&counters.urgent_requeues, 1);
                                    Outcome::Burned {
                                        candidate,
                                        bumped,
                                        to_lane,
                                    }
                                }
                            }
                        }
                        None => {
                            inc(&counters.conflicts, cands.len() as u64);
                            inc(&counters.urgent_requeues, 1);
                            Outcome::Conflict
                        }
                    }
                }
                Decision::Unschedulable(summary) => {
                    inc(&counters.unschedulable, 1);
                    Outcome::Unschedulable(summary)
                }
            }
        };
        let done = clock.now();
        inc(&counters.busy_nanos, done.0.saturating_sub(popped.0));
        WorkerResult {
            task,
            outcome,
            worker: self.id,
            popped,
            done,
            snapshot_seq: snap.seq,
        }
    }
}
