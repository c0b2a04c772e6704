//! Model 1 — snapshot publication vs claims (`binder` steps 1–3, `cache` as single writer).
//!
//! A writer (the real `Cache` + `Shared::publish`) applies claims and republishes while two
//! workers take the current snapshot (`Shared::enter`), read the node's free CPU and version
//! from it, and claim with `BindVersions::try_claim`. The node fits one pod, not two.
//!
//! Checks, in every interleaving: on every snapshot any thread holds, `S.v(n) ≤ c(n)` and
//! equality implies `S` already contains every claimed pod; the requests claimed never exceed
//! allocatable; after the last publication the snapshot has counted every claim.
//!
//! Mutation `version_before_contents` (cache writes the claim's version into the arena before
//! the pod's requests) must fail this model.
#![cfg(loom)]

use loom::thread;
use magma_engine::binder::{BindVersions, Candidate};
use magma_engine::cache::Cache;
use magma_engine::conf::Profile;
use magma_engine::sync::HandOff;
use magma_engine::worker::Shared;
use magma_loom_tests::{
    alloc_cpu, check_version_invariant, compile, cpu_request, free_cpu, node, pod,
};
use std::sync::Arc;

/// Increments of the node's counter that are not claims: the bump of its first incarnation.
const BUMPS: u64 = 1;

#[test]
fn snapshot_publication_vs_claims() {
    magma_loom_tests::model(|| {
        let versions = Arc::new(BindVersions::default());
        let mut cache = Cache::new(versions.clone(), Arc::new(Profile::default()));
        cache.apply_node(&node("n0", 1500), 0).unwrap();
        let slot = cache.node_slot("n0").unwrap() as usize;
        let pods = [
            compile(&mut cache, &pod("a", 1000)),
            compile(&mut cache, &pod("b", 1000)),
        ];
        let request = cpu_request(&pods[0]);
        let first = cache.publish().unwrap();
        let alloc = alloc_cpu(&first, slot);
        let shared = Arc::new(Shared::new(2, first, versions.clone()));
        let inbox: HandOff<(usize, Option<Candidate>)> = HandOff::new(2);

        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (shared, versions, inbox) = (shared.clone(), versions.clone(), inbox.clone());
                thread::spawn(move || {
                    let snap = shared.enter(w);
                    check_version_invariant(&snap, &versions, slot, BUMPS, request);
                    let claim = (free_cpu(&snap, slot) >= request)
                        .then(|| Candidate {
                            slot: slot as u32,
                            version: snap.version(slot),
                            incarnation: snap.incarnation(slot),
                        })
                        .filter(|c| versions.try_claim(slot, c.version));
                    assert!(inbox.try_push((w, claim)).is_ok());
                    shared.leave(w);
                })
            })
            .collect();

        // The writer: apply each claim as its result arrives, republish, check what it published.
        let (mut results, mut claimed) = (0, 0);
        while results < 2 {
            let Some((w, claim)) = inbox.try_pop() else {
                thread::yield_now();
                continue;
            };
            results += 1;
            if let Some(c) = claim {
                claimed += request;
                assert!(cache.apply_claim(c, Some(&pods[w])).is_some());
            }
            if let Some(snap) = cache.publish() {
                shared.publish(snap.clone());
                check_version_invariant(&snap, &versions, slot, BUMPS, request);
            }
        }
        for w in workers {
            w.join().unwrap();
        }
        assert!(
            claimed <= alloc,
            "double booking: {claimed} claimed on a node of {alloc}"
        );
        assert!(claimed > 0, "the node fits one pod: someone must claim it");
        let last = shared.snapshot();
        assert_eq!(
            last.version(slot),
            versions.current(slot),
            "a claim was lost"
        );
    });
}
