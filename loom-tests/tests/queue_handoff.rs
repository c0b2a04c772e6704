//! Model 3 — the queue hand-off (`core::Core` pumping `sync::HandOff`, workers popping).
//!
//! The driver (the real `Core`: queue, cache, pump) hands pods `a` and `b` to two workers
//! through the hand-off (capacity 2; `c` waits in activeQ). Racing the workers' pops, the pod
//! `a` is deleted and the watch delivers it again with a different spec (same uid, a new queue
//! entry), and the driver pumps again. The workers run the real scheduling cycle
//! (`worker::Worker::turn`) on a node that fits two pods.
//!
//! Checks, in every interleaving: a result computed for the deleted entry is recognised as
//! stale (no bind carries the old spec); no pod is bound twice or lost in flight; the cache
//! assumes exactly the binding pods; a pod whose candidates all conflicted is urgent and is the
//! first pod handed off next (starvation bounded by the hand-off capacity).
//!
//! Mutation `no_generation_check` (a worker result is matched to its pod by uid only) must fail
//! this model.
#![cfg(loom)]

use magma_engine::core::Input;
use magma_engine::queue::PodState;
use magma_loom_tests::{cpu_request, harness, node, pod};

#[test]
fn queue_handoff() {
    magma_loom_tests::model(|| {
        let mut d = harness(2, 2);
        d.input(Input::NodeApply(node("n0", 2000)));
        for p in ["a", "b", "c"] {
            d.input(Input::PodApply(pod(p, 1000)));
        }
        d.flush(); // hands off a and b

        let workers: Vec<_> = (0..2)
            .map(|w| {
                let mut worker = d.worker(w);
                magma_loom_tests::spawn(move || {
                    worker.step();
                })
            })
            .collect();

        // Racing the pops: a is deleted and comes back with a new spec; pump again.
        d.input(Input::PodDelete {
            uid: "uid-a".into(),
        });
        d.input(Input::PodApply(pod("a", 500)));
        d.flush();
        d.results();
        for w in workers {
            w.join().unwrap();
        }
        d.results();
        d.drain_handoff();
        d.flush();

        // The first task handed off now: an urgent pod if there is one.
        let next = d.handoff().try_pop();
        let urgent: Vec<String> = d
            .core()
            .queue()
            .iter()
            .filter(|(_, e)| e.urgent() && e.state() != PodState::Binding)
            .map(|(u, _)| u.to_string())
            .collect();
        if !urgent.is_empty() {
            let next = next.as_ref().expect("an urgent pod is waiting");
            assert!(
                urgent.iter().any(|u| **u == *next.pod.uid),
                "urgent {urgent:?} passed over by {}",
                next.pod.uid
            );
        }
        if let Some(task) = next {
            assert!(d.handoff().try_push(task).is_ok());
        }
        d.drain_handoff();

        for b in &d.binds {
            if &*b.pod.uid == "uid-a" {
                assert_eq!(
                    cpu_request(&b.pod),
                    cpu_request(d.core().queue().get("uid-a").unwrap().pod()),
                    "a result for the deleted entry of uid-a was applied to the new one"
                );
            }
        }
        d.check_settled();
    });
}
