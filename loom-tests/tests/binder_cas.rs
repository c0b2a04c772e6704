//! Model 2 — the binder's CAS (`binder` steps 2 and 4).
//!
//! Three workers decide on the snapshot they hold (`Shared::enter`) and claim overlapping
//! candidate lists with `BindVersions::claim_first`, while the cache applies a pod another
//! scheduler bound on `n1` (`Cache::apply_bound_pod`, a capacity-reducing change that bumps the
//! counter) and republishes. Each node fits one of our pods.
//!
//! Checks, in every interleaving: exactly one winner per (node, version); a worker returns the
//! first candidate it won and has lost every earlier one, or `None` (→ urgent requeue); a
//! decision made on a snapshot without the foreign pod is never claimed once the cache has
//! applied that pod; once the cache has applied the claims, its snapshot's version of each
//! node equals the counter (no increment lost).
//!
//! Mutations `split_claim` (check-then-store instead of one CAS) and `skip_external_bump` (no
//! bump for a foreign pod) must fail this model.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use magma_engine::binder::{BindVersions, Candidate};
use magma_engine::cache::Cache;
use magma_engine::conf::Profile;
use magma_engine::worker::Shared;
use magma_loom_tests::{compile, cpu_request, free_cpu, node, pod};
use std::sync::Arc;

#[test]
fn binder_cas() {
    magma_loom_tests::model(|| {
        let versions = Arc::new(BindVersions::default());
        let mut cache = Cache::new(versions.clone(), Arc::new(Profile::default()));
        cache.apply_node(&node("n0", 1000), 0).unwrap();
        cache.apply_node(&node("n1", 1000), 0).unwrap();
        let slots = [
            cache.node_slot("n0").unwrap() as usize,
            cache.node_slot("n1").unwrap() as usize,
        ];
        let request = cpu_request(&compile(&mut cache, &pod("ours", 1000)));
        let foreign = compile(&mut cache, &pod("foreign", 1000));
        let first = cache.publish().unwrap();
        let initial = slots.map(|s| first.version(s));
        let shared = Arc::new(Shared::new(3, first, versions.clone()));
        // Set by the cache thread once the foreign pod (and its bump) is applied.
        let foreign_applied = Arc::new(AtomicBool::new(false));

        let orders: [[usize; 2]; 3] = [[0, 1], [1, 0], [0, 1]];
        let workers: Vec<_> = orders
            .into_iter()
            .enumerate()
            .map(|(w, order)| {
                let (shared, versions) = (shared.clone(), versions.clone());
                let foreign_applied = foreign_applied.clone();
                thread::spawn(move || {
                    let snap = shared.enter(w);
                    let candidates: Vec<Candidate> = order
                        .iter()
                        .map(|&i| slots[i])
                        .filter(|&s| free_cpu(&snap, s) >= request)
                        .map(|s| Candidate {
                            slot: s as u32,
                            version: snap.version(s),
                            incarnation: snap.incarnation(s),
                        })
                        .collect();
                    // Anything the cache applied before this load happens-before the claim.
                    let applied_before = foreign_applied.load(Ordering::Acquire);
                    let won = versions.claim_first(&candidates);
                    shared.leave(w);
                    let stale_n1 = snap.version(slots[1]) == initial[1];
                    (candidates, won, applied_before && stale_n1)
                })
            })
            .collect();

        // The cache: another scheduler's pod shows up bound on n1.
        cache.apply_bound_pod(&foreign, "n1", false);
        foreign_applied.store(true, Ordering::Release);
        if let Some(snap) = cache.publish() {
            shared.publish(snap);
        }

        let mut wins = [0u64; 2];
        let mut claimed: Vec<(u32, u64)> = Vec::new();
        for w in workers {
            let (candidates, won, decided_before_foreign) = w.join().unwrap();
            let Some(i) = won else {
                continue; // every candidate conflicted: urgent requeue
            };
            let c = candidates[i];
            assert!(
                !claimed.contains(&(c.slot, c.version)),
                "two winners for slot {} at version {}",
                c.slot,
                c.version
            );
            claimed.push((c.slot, c.version));
            let n = slots.iter().position(|&s| s == c.slot as usize).unwrap();
            wins[n] += 1;
            assert!(
                !(n == 1 && decided_before_foreign),
                "a decision made before a foreign pod landed on n1 was claimed after the cache applied it"
            );
            for earlier in &candidates[..i] {
                assert!(
                    versions.current(earlier.slot as usize) != earlier.version,
                    "claim_first skipped a claimable candidate"
                );
            }
        }
        for (n, &won) in wins.iter().enumerate() {
            assert!(won <= 1, "node n{n} fits one pod but {won} claimed it");
        }
        // No claim lost: once the cache has applied every claim, its snapshot has counted every
        // increment of every counter (claims and its own bumps).
        for (slot, version) in claimed {
            let c = Candidate {
                slot,
                version,
                incarnation: shared.snapshot().incarnation(slot as usize),
            };
            cache.apply_claim(c, None);
        }
        let last = cache.publish().unwrap();
        for (n, &slot) in slots.iter().enumerate() {
            assert_eq!(
                last.version(slot),
                versions.current(slot),
                "node n{n}: counter vs claims + bumps"
            );
        }
    });
}
