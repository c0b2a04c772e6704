//! Engine counters. Workers each own a cache-line-padded block of relaxed atomics (no
//! contention between workers); the driver owns another. Readers sum them.

use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

#[derive(Default)]
pub struct WorkerCounters {
    pub attempts: AtomicU64,
    pub claims: AtomicU64,
    /// Candidates lost to another claim (each failed CAS).
    pub conflicts: AtomicU64,
    /// Pods sent back because every candidate conflicted.
    pub urgent_requeues: AtomicU64,
    pub unschedulable: AtomicU64,
    /// Nanoseconds spent in allocate+claim.
    pub busy_nanos: AtomicU64,
}

#[derive(Default)]
pub struct DriverCounters {
    pub publications: AtomicU64,
    pub publish_nanos: AtomicU64,
    pub bind_intents: AtomicU64,
    pub binds_confirmed: AtomicU64,
    pub bind_failures: AtomicU64,
    pub rejected_pods: AtomicU64,
    pub status_intents: AtomicU64,
    pub stale_results: AtomicU64,
    /// Claimed decisions voided because their devices (DRA) were taken by a decision applied
    /// first (`Cache::allocate_claims`).
    pub device_conflicts: AtomicU64,
    /// Pods their ResourceClaims held back before any node was tried (a claim not made yet,
    /// missing, being deleted or allocated for another pod: `Core::hold_back`).
    pub claim_holds: AtomicU64,
    /// ResourceClaims asked to be deallocated: allocated, reserved for nobody, named by a pod
    /// that fits nowhere (`Intent::Deallocate`).
    pub deallocations: AtomicU64,
    /// Pending-pod updates that changed nothing the scheduler reads (ignored).
    pub unchanged_updates: AtomicU64,
    /// Times the hand-off stopped because `max_binds_in_flight` pods were handed off or
    /// binding (the bind executor is the bottleneck).
    pub bind_backpressure: AtomicU64,
    pub shard_status_intents: AtomicU64,
    /// Sharding gauges as of the last flush: desired, view, in use, draining, missing (0/1).
    pub shard: [AtomicU64; 5],
    /// Queue depths as of the last flush (gauges): active, backoff, unschedulable, gated,
    /// in flight, binding, preempting.
    pub depths: [AtomicU64; 7],
    /// Unschedulable pods that ran DefaultPreemption (`scheduler_preemption_attempts_total`).
    pub preemption_attempts: AtomicU64,
    /// Preemptions decided (a node and its victims chosen), and their victims.
    pub preemptions: AtomicU64,
    pub preemption_victims: AtomicU64,
    /// Unschedulable pods that looked for a preemption and found none.
    pub preemptions_unhelpful: AtomicU64,
}

/// All counters of one engine.
pub struct Stats {
    pub workers: Box<[CachePadded<WorkerCounters>]>,
    pub driver: CachePadded<DriverCounters>,
}

/// A point-in-time sum of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub attempts: u64,
    pub claims: u64,
    pub conflicts: u64,
    pub urgent_requeues: u64,
    pub unschedulable: u64,
    pub worker_busy_nanos: u64,
    pub publications: u64,
    pub publish_nanos: u64,
    pub bind_intents: u64,
    pub binds_confirmed: u64,
    pub bind_failures: u64,
    pub rejected_pods: u64,
    pub status_intents: u64,
    pub stale_results: u64,
    pub device_conflicts: u64,
    pub claim_holds: u64,
    pub deallocations: u64,
    pub unchanged_updates: u64,
    pub bind_backpressure: u64,
    pub shard_status_intents: u64,
    pub shard: crate::shard::ShardGauges,
    pub preemption_attempts: u64,
    pub preemptions: u64,
    pub preemption_victims: u64,
    pub preemptions_unhelpful: u64,
}

impl Stats {
    /// Queue depths as of the driver's last flush.
    pub fn queue_depths(&self) -> crate::queue::QueueDepths {
        let d = &self.driver.depths;
        let r = |i: usize| d[i].load(Ordering::Relaxed) as usize;
        crate::queue::QueueDepths {
            active: r(0),
            backoff: r(1),
            unschedulable: r(2),
            gated: r(3),
            in_flight: r(4),
            binding: r(5),
            preempting: r(6),
        }
    }

    pub(crate) fn set_shard_gauges(&self, g: crate::shard::ShardGauges) {
        let d = &self.driver.shard;
        for (i, v) in [
            g.desired,
            g.view,
            g.in_use,
            g.draining,
            usize::from(g.missing),
        ]
        .into_iter()
        .enumerate()
        {
            d[i].store(v as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn set_queue_depths(&self, q: crate::queue::QueueDepths) {
        let d = &self.driver.depths;
        for (i, v) in [
            q.active,
            q.backoff,
            q.unschedulable,
            q.gated,
            q.in_flight,
            q.binding,
            q.preempting,
        ]
        .into_iter()
        .enumerate()
        {
            d[i].store(v as u64, Ordering::Relaxed);
        }
    }

    pub fn new(workers: usize) -> Stats {
        Stats {
            workers: (0..workers)
                .map(|_| CachePadded::new(WorkerCounters::default()))
                .collect(),
            driver: CachePadded::new(DriverCounters::default()),
        }
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = StatsSnapshot::default();
        for w in self.workers.iter() {
            s.attempts += r(&w.attempts);
            s.claims += r(&w.claims);
            s.conflicts += r(&w.conflicts);
            s.urgent_requeues += r(&w.urgent_requeues);
            s.unschedulable += r(&w.unschedulable);
            s.worker_busy_nanos += r(&w.busy_nanos);
        }
        let d = &self.driver;
        s.publications = r(&d.publications);
        s.publish_nanos = r(&d.publish_nanos);
        s.bind_intents = r(&d.bind_intents);
        s.binds_confirmed = r(&d.binds_confirmed);
        s.bind_failures = r(&d.bind_failures);
        s.rejected_pods = r(&d.rejected_pods);
        s.status_intents = r(&d.status_intents);
        s.stale_results = r(&d.stale_results);
        s.device_conflicts = r(&d.device_conflicts);
        s.claim_holds = r(&d.claim_holds);
        s.deallocations = r(&d.deallocations);
        s.unchanged_updates = r(&d.unchanged_updates);
        s.shard_status_intents = r(&d.shard_status_intents);
        s.preemption_attempts = r(&d.preemption_attempts);
        s.preemptions = r(&d.preemptions);
        s.preemption_victims = r(&d.preemption_victims);
        s.preemptions_unhelpful = r(&d.preemptions_unhelpful);
        s.bind_backpressure = r(&d.bind_backpressure);
        let g = |i: usize| r(&d.shard[i]) as usize;
        s.shard = crate::shard::ShardGauges {
            desired: g(0),
            view: g(1),
            in_use: g(2),
            draining: g(3),
            missing: g(4) != 0,
        };
        s
    }
}

#[inline]
pub(crate) fn inc(a: &AtomicU64, by: u64) {
    a.fetch_add(by, Ordering::Relaxed);
}
