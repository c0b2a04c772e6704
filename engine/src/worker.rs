//! Worker threads: the scheduling cycle.
//!
//! Each cycle: take a pod from the hand-off → announce an epoch and load the current snapshot
//! (one atomic load) → allocate → claim the first free candidate → report the result to the
//! driver through the inbox channel. The worker never blocks on a lock and never allocates in
//! steady state (its buffers live in `Scratch`; the inbox is a lock-free list channel whose
//! blocks are amortised).
//!
//! Epoch protocol (with the driver; loom model `worker_epochs`): before loading a snapshot the
//! worker stores the latest published sequence number into its epoch slot (`SeqCst`), and
//! stores `IDLE` after it has sent its result. The driver, after publishing, reads every epoch:
//! a busy worker's epoch is a lower bound of the sequence of the snapshot it holds. The driver
//! uses that bound to decide when a removed node's slot may be reused, and (sharding) when no
//! worker still schedules against an older node set.

use crate::allocate::{Decision, FailureSummary, Scratch, allocate};
use crate::binder::{BindVersions, Candidate};
use crate::clock::{Clock, Nanos};
use crate::model::CompiledPod;
use crate::snapshot::Snapshot;
use crate::stats::{WorkerCounters, inc};
use crate::sync::{AtomicBool, AtomicU64, Ordering, Published};
use crossbeam_utils::CachePadded;
use std::sync::Arc;

/// Epoch value of a worker that holds no snapshot.
pub const IDLE: u64 = u64::MAX;

/// A pod handed to a worker.
#[derive(Debug, Clone)]
pub struct Task {
    pub pod: Arc<CompiledPod>,
    /// Queue generation when handed off (stale results are detected by it).
    pub generation: u64,
    pub arrived: Nanos,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Claimed {
        candidate: Candidate,
    },
    /// Every candidate was taken by another claim.
    Conflict,
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

/// What a worker shares with the driver.
pub struct Shared {
    pub published: Published<Snapshot>,
    /// Sequence of the latest published snapshot (stored after the snapshot itself).
    pub latest_seq: AtomicU64,
    pub versions: Arc<BindVersions>,
    pub epochs: Box<[CachePadded<AtomicU64>]>,
    /// `false` while not leading: workers stop claiming at once.
    pub leading: AtomicBool,
    pub stop: AtomicBool,
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
        }
    }

    /// Publish a snapshot (driver only).
    pub fn publish(&self, snap: Arc<Snapshot>) {
        let seq = snap.seq;
        // Mutation (loom-tests/run-mutations.sh): the sequence is announced before the snapshot.
        #[cfg(magma_mutation = "publish_seq_first")]
        self.latest_seq.store(seq, Ordering::SeqCst);
        self.published.store(snap);
        #[cfg(not(magma_mutation = "publish_seq_first"))]
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
        // Mutation (loom-tests/run-mutations.sh): load the snapshot before announcing the epoch.
        #[cfg(magma_mutation = "epoch_after_load")]
        let snap = self.published.load();
        let announced = self.latest_seq.load(Ordering::SeqCst);
        self.epochs[worker].store(announced, Ordering::SeqCst);
        #[cfg(not(magma_mutation = "epoch_after_load"))]
        let snap = self.published.load();
        #[cfg(not(magma_mutation = "epoch_after_load"))]
        debug_assert!(snap.seq >= announced);
        snap
    }

    /// Worker: done with its snapshot.
    pub fn leave(&self, worker: usize) {
        self.epochs[worker].store(IDLE, Ordering::SeqCst);
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

    /// One scheduling cycle for `task`. The caller sends the result and then calls `leave`.
    pub fn cycle(
        &mut self,
        shared: &Shared,
        counters: &WorkerCounters,
        clock: &dyn Clock,
        task: Task,
    ) -> WorkerResult {
        let popped = clock.now();
        let snap = shared.enter(self.id);
        let outcome = if !shared.leading.load(Ordering::Acquire) {
            Outcome::Paused
        } else {
            inc(&counters.attempts, 1);
            match allocate(&snap, &task.pod, &shared.versions, &mut self.scratch) {
                Decision::Candidates => {
                    let cands = &self.scratch.candidates;
                    match shared.versions.claim_first(cands) {
                        Some(i) => {
                            inc(&counters.claims, 1);
                            inc(&counters.conflicts, i as u64);
                            Outcome::Claimed {
                                candidate: cands[i],
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
