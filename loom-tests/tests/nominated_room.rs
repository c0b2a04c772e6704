//! Model 11 — the room kept for a nominated pod (`preemption`, `Cache::nominate`,
//! `plugins::nominated_room`).
//!
//! Node `x` has 2000m; a victim of priority 0 uses 1500m, so 500m are free. A pod `L` of
//! priority 0 asking for 500m fits there now. The driver (the cache, on this thread) nominates a
//! preemptor `H` of priority 100 asking for 2000m to `x` — the room its victim will free is
//! kept for it against every pod of no higher priority — and publishes. Meanwhile a worker runs
//! the real allocate action for `L` on the snapshot it holds and claims its candidate.
//!
//! Checked in every interleaving: a decision for `L` made on a snapshot with the nomination
//! offers no candidate on `x` (the filter honours the kept room); and a decision made before the
//! nomination is never claimed once the cache has applied the nomination (the nomination bumps
//! the node's bind version, so the claim protocol refuses the stale decision). Either way `L`
//! never takes room kept for a pod of higher priority.
//!
//! Mutation `nomination_without_bump` (the nomination keeps the room without bumping the
//! version) must fail this model: a decision made before the nomination is claimed after it.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use magma_engine::allocate::{Backlog, Decision, Scratch, allocate};
use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::conf::Profile;
use magma_engine::worker::Shared;
use magma_loom_tests::{compile, node, pod};
use std::sync::Arc;

#[test]
fn nominated_room() {
    magma_loom_tests::model(|| {
        let versions = Arc::new(BindVersions::default());
        let mut cache = Cache::new(versions.clone(), Arc::new(Profile::default()));
        cache.apply_node(&node("x", 2000), 0).unwrap();
        let x = cache.node_slot("x").unwrap();
        let victim = compile(&mut cache, &pod("victim", 1500));
        cache.apply_bound_pod(&victim, "x", false);
        let low = compile(&mut cache, &pod("low", 500));
        let mut high_input = pod("high", 2000);
        high_input.priority = 100;
        let high = compile(&mut cache, &high_input);
        let shared = Arc::new(Shared::new(1, cache.publish().unwrap(), versions.clone()));
        // Set by the driver once the nomination (and its bump) is applied.
        let nominated = Arc::new(AtomicBool::new(false));

        let worker = {
            let (shared, versions, nominated) =
                (shared.clone(), versions.clone(), nominated.clone());
            magma_loom_tests::spawn(move || {
                let snap = shared.enter(0);
                let seen = snap.nominated > 0;
                let mut scratch = Scratch::new(1);
                let decision = allocate(
                    &snap,
                    &low,
                    None,
                    None,
                    None,
                    &versions,
                    Backlog::default(),
                    &mut scratch,
                );
                let offered = decision == Decision::Candidates
                    && scratch.candidates.iter().any(|c| c.slot == x);
                // Anything the driver applied before this load happens-before the claim.
                let applied_before = nominated.load(Ordering::Acquire);
                let won = (decision == Decision::Candidates)
                    .then(|| versions.claim_first(&scratch.candidates))
                    .flatten()
                    .map(|i| scratch.candidates[i].slot);
                shared.leave(0);
                (seen, offered, applied_before, won)
            })
        };

        // The driver: preemption nominates the high pod to x.
        cache.nominate(&high.uid, x, high.priority, high.requests.clone());
        nominated.store(true, Ordering::Release);
        if let Some(snap) = cache.publish() {
            shared.publish(snap);
        }

        let (seen, offered, applied_before, won) = worker.join().unwrap();
        assert!(
            !(seen && offered),
            "a decision made with the nomination in view offered the kept room to a lower pod"
        );
        assert!(
            !(applied_before && won == Some(x)),
            "a decision made before the nomination was claimed after the cache applied it: \
             the lower pod took the room kept for the nominee"
        );
    });
}
