//! Model 5 — shutdown (`Shared::stop`, `Worker::turn`, worker epochs, the driver draining the hand-off).
//!
//! Two workers run the engine's worker loop (check `stop` → pop → `Worker::turn`: the real
//! scheduling cycle, send, leave) over pods `a`, `b` (handed off) and `c` (waiting in activeQ). The driver handles
//! whatever results already arrived, pumps, then stops the engine exactly as
//! `Engine::shutdown` + `engine::drive` do: set `stop`, join the workers, handle every result,
//! drain the hand-off, publish, drain again.
//!
//! Checks, in every interleaving: every pod ends in a defined state — claimed and reported
//! (binding, with one bind intent and an assumption in the cache) or back in the queue —
//! never lost in flight; and every claim is counted in the last snapshot.
//!
//! Mutation `drain_without_unpop` (the drain drops the tasks it takes back) must fail this
//! model.
#![cfg(loom)]

use magma_engine::core::Input;
use magma_engine::queue::PodState;
use magma_loom_tests::{harness, node, pod};

/// Pops each worker makes before it gives up (if `stop` is not set first).
const TURNS: usize = 2;

#[test]
fn shutdown_mid_cycle() {
    magma_loom_tests::model(|| {
        let mut d = harness(2, 2);
        d.input(Input::NodeApply(node("n0", 2000)));
        for p in ["a", "b", "c"] {
            d.input(Input::PodApply(pod(p, 1000)));
        }
        d.flush();

        let workers: Vec<_> = (0..2)
            .map(|w| {
                let mut worker = d.worker(w);
                magma_loom_tests::spawn(move || {
                    // The loop of `Engine::start`. Its pop waits with a timeout; here a pop
                    // finds a task or not, and a worker makes at most `TURNS` of them (a spin
                    // until `stop` would exceed loom's branch budget).
                    for _ in 0..TURNS {
                        if worker.shared().stopping() {
                            break;
                        }
                        worker.step();
                    }
                })
            })
            .collect();

        // One driver turn while the workers run, then shutdown.
        d.results();
        d.flush();
        d.shared().stop();
        for w in workers {
            w.join().unwrap();
        }
        d.stop();

        for uid in ["uid-a", "uid-b", "uid-c"] {
            let e = d.core().queue().get(uid).expect("no pod may vanish");
            let bound = d.binds.iter().any(|b| &*b.pod.uid == uid);
            match e.state() {
                PodState::Binding => assert!(bound, "{uid} is binding but was never reported"),
                PodState::Active => assert!(!bound, "{uid} was reported but is queued again"),
                other => panic!("{uid} ended in {other:?}"),
            }
        }
        d.check_settled();
    });
}
