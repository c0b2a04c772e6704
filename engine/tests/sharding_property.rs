//! Sharding under random interleavings: the controller moves nodes between our NodeShard, another
//! scheduler's and none, the other scheduler claims and releases them, the NodeShard watch lags
//! behind the answers to writes (as a real API server's watch cache does), status writes fail
//! (before or after the server applied them), this replica loses and regains its lease (with
//! or without a hand-over hold), pods arrive and go, and the engine's steps interleave with all
//! of it. The other scheduler is an oracle that reads
//! the server's state directly: it claims a desired node only while our stored status does not
//! list it, and lets a node go as soon as it is no longer desired (it places no pods).
//!
//! Checked at every binding (`Sim::shard_violations`): the node is listed in use by our stored
//! status and by no other shard's (write before use, drain before release, never two users).
//! After the run, once the watch has caught up: we use exactly the nodes we are given (nothing
//! of ours left pending), every pod is bound or reported, no overcommit, no pod bound twice,
//! and the engine's own audit is clean.

use magma_engine::queue::QueueOptions;
use magma_engine::testing::{HarnessOptions, Sim, mk_node, mk_pod};
use magma_engine::{ShardingMode, ShardingOptions};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;

const NODES: usize = 6;
const OWN: &str = "agent";
const OTHER: &str = "other";

#[derive(Debug, Clone, Copy)]
enum Owner {
    Us,
    Other,
    Nobody,
}

#[derive(Debug, Clone)]
enum Op {
    /// The controller gives node `i` (mod the node count) to a shard, or to none.
    Move(usize, Owner),
    /// The other scheduler writes its status as the server's state asks.
    OtherSync,
    /// The NodeShard watch starts or stops lagging.
    Lag(bool),
    /// The watch delivers some of what it held back.
    Deliver(usize),
    /// The next status write of ours fails, applied or not.
    FailWrite(bool),
    /// This replica loses or regains the lease.
    Lead(bool),
    AddPod(u32),
    DeletePod(usize),
    Step(usize),
    Results,
    Flush,
    Answer,
    Advance(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let owner = prop_oneof![Just(Owner::Us), Just(Owner::Other), Just(Owner::Nobody)];
    prop_oneof![
        3 => (any::<usize>(), owner).prop_map(|(i, o)| Op::Move(i, o)),
        2 => Just(Op::OtherSync),
        2 => any::<bool>().prop_map(Op::Lag),
        3 => (0usize..4).prop_map(Op::Deliver),
        1 => any::<bool>().prop_map(Op::FailWrite),
        1 => any::<bool>().prop_map(Op::Lead),
        3 => (500u32..2500).prop_map(Op::AddPod),
        1 => any::<usize>().prop_map(Op::DeletePod),
        3 => any::<usize>().prop_map(Op::Step),
        2 => Just(Op::Results),
        3 => Just(Op::Flush),
        3 => Just(Op::Answer),
        1 => (0u8..50).prop_map(Op::Advance),
    ]
}

fn names(set: &BTreeSet<usize>) -> Vec<String> {
    set.iter().map(|i| format!("n{i}")).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The other scheduler, as the server's state asks: it keeps what it holds while desired, lets
/// go of the rest, and claims desired nodes our stored status does not list.
fn other_sync(c: &mut Sim, other_desired: &BTreeSet<usize>) {
    let ours: BTreeSet<String> = c.in_use(OWN).into_iter().collect();
    let held: BTreeSet<String> = c.in_use(OTHER).into_iter().collect();
    let want: Vec<String> = names(other_desired)
        .into_iter()
        .filter(|n| held.contains(n) || !ours.contains(n))
        .collect();
    if want.iter().cloned().collect::<BTreeSet<_>>() != held {
        c.set_shard_in_use(OTHER, &refs(&want));
    }
}

fn run(workers: usize, hold_ms: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut c = Sim::new(HarnessOptions {
        queue: QueueOptions {
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_unschedulable: Duration::from_secs(300),
        },
        sharding: Some(ShardingOptions {
            mode: ShardingMode::Hard,
            shard_name: OWN.into(),
            handover_hold: Duration::from_millis(hold_ms),
        }),
        ..HarnessOptions::workers(workers)
    });
    for i in 0..NODES {
        c.add_node(mk_node(&format!("n{i}"), "4", "8Gi", 110));
    }
    let mut owner = [
        Owner::Us,
        Owner::Us,
        Owner::Us,
        Owner::Other,
        Owner::Other,
        Owner::Other,
    ];
    let desired = |owner: &[Owner; NODES], which: fn(Owner) -> bool| -> BTreeSet<usize> {
        (0..NODES).filter(|&i| which(owner[i])).collect()
    };
    let ours = |o: Owner| matches!(o, Owner::Us);
    let theirs = |o: Owner| matches!(o, Owner::Other);
    c.set_shard(OWN, &refs(&names(&desired(&owner, ours))));
    c.set_shard(OTHER, &refs(&names(&desired(&owner, theirs))));
    other_sync(&mut c, &desired(&owner, theirs));
    c.settle();
    let mut uids: Vec<String> = Vec::new();
    let mut next = 0;
    for op in ops {
        match op {
            Op::Move(i, to) => {
                let i = i % NODES;
                let from = std::mem::replace(&mut owner[i], to);
                for (shard, which) in [(OWN, ours as fn(Owner) -> bool), (OTHER, theirs)] {
                    if which(from) != which(to) {
                        c.set_shard(shard, &refs(&names(&desired(&owner, which))));
                    }
                }
            }
            Op::OtherSync => other_sync(&mut c, &desired(&owner, theirs)),
            Op::Lag(on) => c.hold_shard_watch = on,
            Op::Deliver(k) => c.release_shard_events(k),
            Op::FailWrite(applied) => c.fail_shard_write = Some(applied),
            Op::Lead(on) => c.h.set_leading(on),
            Op::AddPod(milli) => {
                let p = mk_pod(&format!("p{next}"), &format!("{milli}m"), "256Mi");
                next += 1;
                uids.push(p.uid.clone());
                c.add_pod(p);
            }
            Op::DeletePod(i) if !uids.is_empty() => {
                let uid = uids.swap_remove(i % uids.len());
                c.delete_pod(&uid);
            }
            Op::DeletePod(_) => {}
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
        }
        prop_assert!(c.shard_violations.is_empty(), "{:?}", c.shard_violations);
    }
    // The watch catches up and everything settles, the other scheduler keeping in step.
    c.hold_shard_watch = false;
    c.fail_shard_write = None;
    c.h.set_leading(true);
    c.release_shard_events(usize::MAX);
    // Long enough for a failed write's retry (after 1 s).
    for _ in 0..4 {
        c.run_for(Duration::from_millis(600));
        other_sync(&mut c, &desired(&owner, theirs));
    }
    c.run_for(Duration::from_millis(600));
    prop_assert!(c.shard_violations.is_empty(), "{:?}", c.shard_violations);
    // Liveness: nothing of ours is left pending; we use exactly what the controller gave us,
    // and every pod is bound or reported.
    let ours_now = names(&desired(&owner, ours));
    prop_assert_eq!(c.in_use(OWN), ours_now.clone());
    prop_assert_eq!(c.h.stats().snapshot().shard.view, ours_now.len());
    for p in c.pods.values() {
        prop_assert!(
            p.node_name.is_some() || c.statuses.iter().any(|s| *s.uid == p.uid),
            "{} neither bound nor reported",
            p.uid
        );
    }
    c.h.stop();
    prop_assert!(c.errors.is_empty(), "engine errors: {:?}", c.errors);
    prop_assert_eq!(c.duplicate_bindings(), 0);
    prop_assert!(
        c.overcommitted().is_empty(),
        "overcommitted: {:?}",
        c.overcommitted()
    );
    let audit = c.h.core().audit();
    prop_assert!(audit.is_empty(), "audit: {:?}", audit);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_moves_claims_and_lagging_watches_never_share_a_node(
        workers in 1usize..3,
        hold_ms in prop_oneof![Just(0u64), Just(200)],
        ops in prop::collection::vec(op(), 1..200),
    ) {
        run(workers, hold_ms, ops)?;
    }
}
