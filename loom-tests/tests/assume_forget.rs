//! Model 4 — assume / confirm / forget (`core::Core::bind_outcome`, `cache::Cache::forget`).
//!
//! Pod `a` has been claimed and assumed on `n0` (which fits one pod) and its bind is in
//! flight. A worker schedules pod `b` with the real scheduling cycle while the driver learns
//! that `a`'s bind failed, forgets the assumption and republishes.
//!
//! Checks, in every interleaving: the snapshot published after the forget shows the freed
//! capacity; `b` is claimed at most once and only on capacity that was really free; in the end
//! no phantom allocation remains (the cache assumes exactly the binding pods, `a` is backing
//! off, not placed) and every counter increment is in the last snapshot.
//!
//! Mutation `forget_leaks` (the assumption is dropped but its requests stay counted) must fail
//! this model.
#![cfg(loom)]

use magma_engine::core::{BindResult, Input};
use magma_engine::queue::PodState;
use magma_loom_tests::{alloc_cpu, free_cpu, harness, node, pod};

#[test]
fn assume_confirm_forget() {
    magma_loom_tests::model(|| scenario(false));
}

/// The same race, also asking that `b` is not left in the unschedulable pool while the node it
/// fits on is free. This found a lost wake-up: `b`'s cycle can decide on the snapshot that still
/// shows `a`, and its `Unschedulable` result can reach the driver after the forget's
/// `POD_REMOVED` event was applied to the pool. The driver now remembers recent wake-ups by
/// snapshot sequence and retries a pod whose decision predates one that could help it.
#[test]
fn assume_forget_wakes_unschedulable() {
    magma_loom_tests::model(|| scenario(true));
}

fn scenario(check_wakeup: bool) {
    {
        let mut d = harness(1, 1);
        d.input(Input::NodeApply(node("n0", 1000)));
        let slot = d.core().cache().node_slot("n0").unwrap() as usize;
        // Before the race: a is scheduled and assumed, its bind goes out.
        d.input(Input::PodApply(pod("a", 1000)));
        d.flush();
        assert!(d.step(0));
        d.results();
        assert_eq!(d.binds.len(), 1, "a is bound");
        // b is handed off against the snapshot that shows a assumed.
        d.input(Input::PodApply(pod("b", 1000)));
        d.flush();

        let worker = {
            let mut w0 = d.worker(0);
            magma_loom_tests::spawn(move || {
                w0.step();
                w0
            })
        };

        // Racing b's cycle: a's bind failed; the assumption is dropped and republished.
        d.input(Input::BindOutcome {
            uid: "uid-a".into(),
            result: BindResult::Failed("etcd timeout".into()),
        });
        d.flush();
        let snap = d.core().current_snapshot();
        // b requests the whole node: free is all of it unless b's claim was applied already.
        let b_applied = d.binds.len() > 1;
        let expect = if b_applied { 0 } else { alloc_cpu(&snap, slot) };
        assert_eq!(
            free_cpu(&snap, slot),
            expect,
            "the capacity freed by forgetting a is not in the next snapshot"
        );

        let w0 = worker.join().unwrap();
        d.give_back(w0);
        // Settle: an idle queue may hand b off again at once (it pops the first unschedulable
        // backoff early), so step until nothing is in flight.
        loop {
            d.results();
            d.flush();
            if !d.step(0) {
                break;
            }
        }
        let a = d.core().queue().get("uid-a").expect("a is still ours");
        assert!(matches!(a.state(), PodState::Backoff { .. }), "a backs off");
        assert!(
            d.core().cache().placement("uid-a").is_none(),
            "a's assumption is gone"
        );
        d.check_settled();
        if check_wakeup {
            let b = d.core().queue().get("uid-b").expect("b is still ours");
            let free = free_cpu(&d.core().current_snapshot(), slot);
            assert!(
                !(matches!(b.state(), PodState::Unschedulable { .. })
                    && free >= alloc_cpu(&d.core().current_snapshot(), slot)),
                "b waits in the unschedulable pool while n0 is free"
            );
        }
    }
}
