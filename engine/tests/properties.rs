//! Property tests on the deterministic harness: random pod arrivals, deletions and node changes,
//! interleaved with random scheduling steps (a worker's turn, the driver taking results,
//! flushing, the API server answering, time passing), so the interleaving itself is part of the
//! generated case and a failure replays exactly. After every run: no node over its allocatable,
//! every pod bound exactly once or reported unschedulable, nothing lost or duplicated.

use magma_engine::queue::{PodState, QueueOptions};
use magma_engine::testing::{HarnessOptions, Sim, mk_node, mk_pod, with_labels};
use proptest::prelude::*;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    AddPod {
        cpu_milli: u32,
        mem_mi: u32,
    },
    DeletePod(usize),
    AddNode {
        cpu: u32,
    },
    LabelNode(usize),
    Cordon(usize, bool),
    GrowNode(usize),
    /// One worker's turn (mod the worker count).
    Step(usize),
    /// The driver takes the waiting worker results.
    Results,
    Flush,
    /// The API server answers what the engine asked.
    Answer,
    /// Time passes (milliseconds).
    Advance(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (100u32..2500, 64u32..4096).prop_map(|(c, m)| Op::AddPod { cpu_milli: c, mem_mi: m }),
        2 => any::<usize>().prop_map(Op::DeletePod),
        1 => (1u32..8).prop_map(|cpu| Op::AddNode { cpu }),
        1 => any::<usize>().prop_map(Op::LabelNode),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, b)| Op::Cordon(i, b)),
        1 => any::<usize>().prop_map(Op::GrowNode),
        4 => any::<usize>().prop_map(Op::Step),
        2 => Just(Op::Results),
        2 => Just(Op::Flush),
        2 => Just(Op::Answer),
        1 => any::<u8>().prop_map(Op::Advance),
    ]
}

fn run(workers: usize, initial_nodes: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut c = Sim::new(HarnessOptions {
        queue: QueueOptions {
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_unschedulable: Duration::from_secs(300),
        },
        ..HarnessOptions::workers(workers)
    });
    let mut node_names = Vec::new();
    let mut node_cpu = Vec::new();
    for i in 0..initial_nodes {
        let name = format!("n{i}");
        c.add_node(mk_node(&name, "4", "8Gi", 8));
        node_names.push(name);
        node_cpu.push(4u32);
    }
    let mut pod_uids: Vec<String> = Vec::new();
    let mut next = 0;
    for op in ops {
        match op {
            Op::AddPod { cpu_milli, mem_mi } => {
                let p = mk_pod(
                    &format!("p{next}"),
                    &format!("{cpu_milli}m"),
                    &format!("{mem_mi}Mi"),
                );
                next += 1;
                pod_uids.push(p.uid.clone());
                c.add_pod(p);
            }
            Op::DeletePod(i) if !pod_uids.is_empty() => {
                let uid = pod_uids.swap_remove(i % pod_uids.len());
                c.delete_pod(&uid);
            }
            Op::AddNode { cpu } => {
                let name = format!("n{}", node_names.len());
                c.add_node(mk_node(&name, &cpu.to_string(), "8Gi", 8));
                node_names.push(name);
                node_cpu.push(cpu);
            }
            Op::LabelNode(i) if !node_names.is_empty() => {
                let i = i % node_names.len();
                let n = with_labels(
                    mk_node(&node_names[i], &node_cpu[i].to_string(), "8Gi", 8),
                    &[("touched", "yes")],
                );
                c.add_node(n);
            }
            Op::Cordon(i, on) if !node_names.is_empty() => {
                let i = i % node_names.len();
                let mut n = mk_node(&node_names[i], &node_cpu[i].to_string(), "8Gi", 8);
                n.unschedulable = on;
                c.add_node(n);
            }
            Op::GrowNode(i) if !node_names.is_empty() => {
                let i = i % node_names.len();
                node_cpu[i] += 1;
                c.add_node(mk_node(&node_names[i], &node_cpu[i].to_string(), "8Gi", 8));
            }
            Op::Step(w) => {
                c.h.step(w % workers);
            }
            Op::Results => {
                c.h.results();
            }
            Op::Flush => c.h.flush(),
            Op::Answer => {
                c.answer();
            }
            Op::Advance(ms) => c.h.advance(Duration::from_millis(u64::from(ms))),
            _ => {}
        }
    }
    // Let it settle, with time passing for the backoffs: every live pod bound or reported.
    let settled = |c: &Sim| {
        c.pods
            .values()
            .all(|p| p.node_name.is_some() || c.statuses.iter().any(|s| *s.uid == p.uid))
    };
    c.run_until(Duration::from_secs(10), settled);
    c.run_for(Duration::from_millis(100));
    c.h.stop();
    let core = c.h.core();
    prop_assert!(c.errors.is_empty(), "engine errors: {:?}", c.errors);
    prop_assert_eq!(c.duplicate_bindings(), 0);
    prop_assert!(
        c.overcommitted().is_empty(),
        "overcommitted: {:?}",
        c.overcommitted()
    );
    prop_assert!(core.audit().is_empty(), "audit: {:?}", core.audit());
    for p in c.pods.values() {
        if p.node_name.is_some() {
            continue;
        }
        let entry = core.queue().get(&p.uid);
        prop_assert!(
            entry.is_some(),
            "pod {} neither bound nor queued: lost",
            p.uid
        );
        let state = entry.unwrap().state();
        prop_assert!(
            matches!(
                state,
                PodState::Unschedulable { .. } | PodState::Backoff { .. } | PodState::Active
            ),
            "pod {} in unexpected state {:?}",
            p.uid,
            state
        );
        prop_assert!(
            c.statuses.iter().any(|s| *s.uid == p.uid),
            "pod {} unbound but never reported",
            p.uid
        );
    }
    // Deleted pods are gone from the queue.
    for (uid, _) in core.queue().iter() {
        prop_assert!(
            c.pods.contains_key(&**uid),
            "deleted pod {uid} still queued"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, max_shrink_iters: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_the_invariants(
        workers in 1usize..5,
        nodes in 0usize..6,
        ops in prop::collection::vec(op(), 1..160),
    ) {
        run(workers, nodes, ops)?;
    }
}

#[test]
fn many_workers_on_a_nearly_full_cluster() {
    let ops: Vec<Op> = (0..300)
        .map(|i| Op::AddPod {
            cpu_milli: 300 + (i % 7) * 100,
            mem_mi: 256,
        })
        .collect();
    run(6, 8, ops).unwrap();
}

#[test]
fn relist_resets_keep_every_pod() {
    let mut c = Sim::workers(2);
    for i in 0..4 {
        c.add_node(mk_node(&format!("n{i}"), "4", "8Gi", 110));
    }
    for i in 0..20 {
        c.add_pod(mk_pod(&format!("p{i}"), "500m", "1Gi"));
    }
    // Part of the way: some pods bound, some binding, the rest queued.
    for _ in 0..3 {
        c.round();
    }
    c.hold_binds = true;
    for _ in 0..3 {
        c.round();
    }
    c.hold_binds = false;
    assert!(c.bound_count() > 0 && !c.held.is_empty() && c.bound_count() + c.held.len() < 20);
    // A relist that still has every pod: nothing is lost or bound twice.
    let relist = c.pod_relist();
    c.deliver_pod_relist(relist);
    c.release_binds();
    c.settle();
    assert_eq!(c.bound_count(), 20);
    assert_eq!(c.duplicate_bindings(), 0);
    assert!(c.overcommitted().is_empty());
}
