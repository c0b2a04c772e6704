//! The conflict-aware binder: one atomic bind-version counter per node slot, and the claim.
//!
//! Protocol (checked by the loom models `binder_cas` and `snapshot_claims` in `loom-tests/`):
//!
//! 1. Every node slot has a counter `c(n)` (cache-line padded, so claims on different nodes never
//!    share a line). Every snapshot `S` records a version `S.v(n)` per node.
//! 2. A worker that decided, on snapshot `S`, that the pod fits node `n` claims it with
//!    `CAS(c(n): S.v(n) → S.v(n)+1)`. It tries its candidates in order; the first successful CAS
//!    wins. When every candidate fails, the pod goes back to the queue as urgent (no backoff).
//! 3. The cache (single writer) counts, per node, every increment it knows of: claims it has
//!    applied and its own bumps. It publishes that count as `S.v(n)`. Hence `S.v(n) ≤ c(n)`, and
//!    when they are equal `S` includes every pod claimed on `n`.
//! 4. Every change that reduces what a node can take (a pod bound by someone else, allocatable
//!    shrinking, a taint, a cordon, a label change, the node's removal) is applied by the cache
//!    together with a bump `c(n) += 1`. So a decision made on a snapshot older than the change can
//!    never be claimed: its CAS expects a value the counter has left.
//!
//! Together: a successful CAS proves the snapshot the decision was made on was complete for that
//! node, so the pod fit the node's true remaining capacity — no double booking, whatever the
//! number of workers. Counters only grow, so ABA cannot happen (2^64 increments never wrap).
//!
//! Constraints over several nodes (`docs/constraints.md`; loom model `cross_node_claims`):
//!
//! 5. A pod decided in the *lane* (one at a time, so lane pods never race each other) whose
//!    decision read other nodes of the claimed node's topology domains: after its CAS, if it has
//!    a required anti-affinity term whose domain holds other nodes, it bumps the anti-affinity
//!    epoch `e` ([`BindVersions::bump_anti_epoch`]); then a `SeqCst` fence; then it loads the
//!    counter of every other node of those domains and compares it with the snapshot
//!    ([`BindVersions::unchanged`]). A counter that moved is a claim the decision could not see:
//!    the claim is burned (the driver counts the increment as a bump; the pod is retried).
//! 6. Every other pod, after its CAS: a `SeqCst` fence, then loads `e`
//!    ([`BindVersions::anti_epoch_after_claim`]); if it differs from the count the snapshot
//!    holds (`Snapshot::anti_epoch`), an anti-affinity pod was claimed that the decision could
//!    not see, and the claim is burned.
//! 7. The driver counts every bump when it applies the lane pod's result (claimed or burned), so
//!    the next snapshot holds it.
//!
//! With the two fences in the single order of `SeqCst` operations, one of the two sides sees the
//! other's write: either the other pod's load of `e` sees the bump, or the lane pod's load sees
//! the other pod's CAS. So two such claims never both stand.
//!
//! Orderings: the CAS is `AcqRel`; the claim itself is delivered to the cache through a channel
//! (happens-before), and snapshots are published with release/acquire (`sync::Published`).

use crate::mutation;
use crate::sync::{AtomicU64, Ordering, fence};
use crossbeam_utils::CachePadded;
use std::sync::OnceLock;

/// Slots per lazily-allocated segment of counters.
#[cfg(not(loom))]
const SEG: usize = 4096;
#[cfg(loom)]
const SEG: usize = 4;
/// Segments: up to `SEG * SEGS` node slots (1,048,576 outside loom).
#[cfg(not(loom))]
const SEGS: usize = 256;
#[cfg(loom)]
const SEGS: usize = 4;

/// Most node slots the engine can hold.
pub const MAX_SLOTS: usize = SEG * SEGS;

/// A candidate node as the worker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub slot: u32,
    /// `S.v(n)` in the snapshot the decision was made on.
    pub version: u64,
    pub incarnation: u32,
}

/// The per-node bind-version counters, shared by the cache and every worker, and the
/// anti-affinity epoch (steps 5–7).
pub struct BindVersions {
    segs: Box<[OnceLock<CounterSegment>]>,
    anti_epoch: CachePadded<AtomicU64>,
}

type CounterSegment = Box<[CachePadded<AtomicU64>]>;

impl Default for BindVersions {
    fn default() -> Self {
        Self {
            segs: (0..SEGS).map(|_| OnceLock::new()).collect(),
            anti_epoch: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl BindVersions {
    /// Make sure the counter of `slot` exists (cache only, before the slot is published).
    pub fn ensure(&self, slot: usize) {
        assert!(
            slot < MAX_SLOTS,
            "node slot {slot} beyond the engine's limit of {MAX_SLOTS}"
        );
        self.segs[slot / SEG].get_or_init(|| {
            (0..SEG)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect()
        });
    }

    #[inline]
    fn counter(&self, slot: usize) -> &AtomicU64 {
        let seg = self.segs[slot / SEG]
            .get()
            .expect("slot published before its counter existed");
        debug_assert!(slot % SEG < seg.len());
        &seg[slot % SEG]
    }

    /// Current counter value.
    #[inline]
    pub fn current(&self, slot: usize) -> u64 {
        self.counter(slot).load(Ordering::Acquire)
    }

    /// Claim `slot` if its counter still equals `seen` (step 2 of the protocol).
    #[inline]
    pub fn try_claim(&self, slot: usize, seen: u64) -> bool {
        if mutation::split_claim() {
            let c = self.counter(slot);
            if c.load(Ordering::Acquire) != seen {
                return false;
            }
            c.store(seen + 1, Ordering::Release);
            return true;
        }
        self.counter(slot)
            .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Advance the counter for a capacity-reducing change (step 4). Returns the new value.
    pub fn bump(&self, slot: usize) -> u64 {
        self.counter(slot).fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Step 5, first half: a lane pod with a multi-node anti-affinity domain announces its claim.
    pub fn bump_anti_epoch(&self) {
        self.anti_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Step 5, second half: after the fence, whether every slot in `slots` still has the version
    /// `seen(slot)` (the snapshot's). Mutation `lane_skips_validation` skips the check.
    pub fn unchanged(&self, slots: &[u32], seen: impl Fn(u32) -> u64) -> bool {
        fence(Ordering::SeqCst);
        if mutation::lane_skips_validation() {
            return true;
        }
        slots
            .iter()
            .all(|&s| self.counter(s as usize).load(Ordering::Acquire) == seen(s))
    }

    /// Step 6: after its CAS, the epoch a pod outside the lane must find equal to its
    /// snapshot's.
    pub fn anti_epoch_after_claim(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.anti_epoch.load(Ordering::Acquire)
    }

    /// Try the candidates in order; the index of the first one claimed, if any.
    pub fn claim_first(&self, candidates: &[Candidate]) -> Option<usize> {
        candidates
            .iter()
            .position(|c| self.try_claim(c.slot as usize, c.version))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! Cases ported from Volcano's `pkg/agentscheduler/cache/binder_test.go`
    //! (Apache-2.0, volcano-sh/volcano): no record, equal generation = conflict, higher = ok,
    //! first non-conflicting candidate wins, all conflicting → no selection.
    use super::*;

    fn cand(slot: u32, version: u64) -> Candidate {
        Candidate {
            slot,
            version,
            incarnation: 0,
        }
    }

    fn table(n: usize) -> BindVersions {
        let v = BindVersions::default();
        for s in 0..n {
            v.ensure(s);
        }
        v
    }

    #[test]
    fn no_record_is_claimable() {
        let v = table(3);
        assert_eq!(v.claim_first(&[cand(0, 0)]), Some(0));
        assert_eq!(v.current(0), 1);
    }

    #[test]
    fn decision_on_the_version_before_a_claim_conflicts() {
        // Upstream: snapshot generation equal to the record = conflict.
        let v = table(1);
        assert!(v.try_claim(0, 0));
        assert!(
            !v.try_claim(0, 0),
            "a second decision made on the same snapshot must lose"
        );
    }

    #[test]
    fn decision_on_a_newer_snapshot_wins() {
        // Upstream: snapshot generation higher than the record = OK.
        let v = table(1);
        assert!(v.try_claim(0, 0));
        assert!(v.try_claim(0, 1));
        assert_eq!(v.current(0), 2);
    }

    #[test]
    fn first_non_conflicting_candidate_wins() {
        let v = table(3);
        v.bump(0);
        assert_eq!(
            v.claim_first(&[cand(0, 0), cand(1, 0), cand(2, 0)]),
            Some(1)
        );
        assert_eq!(v.current(2), 0, "later candidates are untouched");
        v.bump(2);
        assert_eq!(
            v.claim_first(&[cand(0, 0), cand(1, 0), cand(2, 0)]),
            None,
            "all conflict"
        );
        assert_eq!(
            v.claim_first(&[cand(0, 0), cand(2, 1)]),
            Some(1),
            "second candidate picked"
        );
    }

    #[test]
    fn external_bump_invalidates_stale_decisions() {
        let v = table(1);
        assert_eq!(v.bump(0), 1);
        assert!(!v.try_claim(0, 0));
        assert!(v.try_claim(0, 1));
    }

    #[test]
    fn concurrent_claims_exactly_one_winner_per_version() {
        let v = std::sync::Arc::new(table(4));
        let wins = std::sync::Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let v = v.clone();
                let wins = wins.clone();
                s.spawn(move || {
                    for round in 0..1000u64 {
                        if v.try_claim(0, round) {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(v.current(0), wins.load(Ordering::Relaxed));
        assert!(wins.load(Ordering::Relaxed) <= 1000);
    }
}
