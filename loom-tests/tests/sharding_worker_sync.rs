//! Model 7 — the sharding coordinator's worker-sync rule (`shard` rules 3–4, as
//! `shard::Sharding::{refresh, status}` apply them for the driver), built on the worker epochs
//! (`worker_epochs`).
//!
//! Hard sharding mode. Our NodeShard desires nodes `x` and `y`, and its status already lists
//! both in use, so both are in the view. Pods `p0` and `p1` are handed off to two workers, which
//! run the real scheduling cycle (`worker::Worker::turn`): on a snapshot with the old view they
//! prefer `x` (more free CPU) and claim it (one may conflict and be retried). Racing them, the
//! driver (the real `Core`) applies the shard controller's move of `x` away
//! (`nodesDesired = [y]`), flushes (publishes the new view and runs the status decision),
//! handles the workers' results, answers the bind intents, and flushes again; every status
//! intent is answered as the API server would (written, then echoed by the watch). Once the
//! workers have exited, the driver settles (a later worker on its thread takes a retried pod;
//! results, binds, flushes) until nothing changes.
//!
//! A model-side ledger (a loom mutex, taken only after the engine's own operations, as in
//! `worker_epochs`) records every successful claim on `x` (by the worker, right after its CAS,
//! before it sends the result and leaves its epoch) and the driver's release of `x` (a status
//! intent whose `nodesInUse` omits it). Whichever side records second checks the other.
//! Checked in every interleaving:
//!
//! - once `x` is released, no claim on it succeeds;
//! - when `x` is released, every claim on it that succeeded has been applied by the driver (the
//!   cache counts it) and its pod has finished binding (bind answered, binding echoed);
//! - liveness: with the workers gone and every bind answered, the final flush releases `x`;
//!   every pod is bound exactly once and nothing stays assumed.
//!
//! The model also checks that it reaches the race it is about: some executions claim `x` on the
//! old view, and release it afterwards.
//!
//! Mutations `shard_release_ignores_workers` (the status is written although a worker may still
//! schedule on the old view), `shard_release_ignores_claims` (a claim not applied yet does not
//! hold the node) and `shard_release_ignores_binds` (a pod still binding does not hold it) must
//! fail this model.
#![cfg(loom)]

use loom::sync::Mutex;
use magma_engine::core::{BindResult, Input};
use magma_engine::shard::{ShardInput, ShardingMode, ShardingOptions, WrittenStatus};
use magma_engine::testing::{Harness, HarnessOptions, WorkerHandle};
use magma_engine::worker::Outcome;
use magma_loom_tests::{node, pod};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SHARD: &str = "agent";
/// Workers, each handed one pod.
const WORKERS: usize = 2;

/// Claims on `x`, and releases of `x` after one, over all executions: the model must reach the
/// race it is about, not only pass.
static CLAIMS_ON_X: AtomicUsize = AtomicUsize::new(0);
static RELEASES_AFTER_CLAIM: AtomicUsize = AtomicUsize::new(0);

#[derive(Default)]
struct Ledger {
    /// The driver emitted a status without `x`: other schedulers may take it.
    released: bool,
    /// Pods whose claim on `x` succeeded.
    claimed_x: Vec<String>,
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The driver, the API server's answers, and what the model knows independently of the engine.
struct Model {
    d: Harness,
    ledger: Arc<Mutex<Ledger>>,
    x_slot: u32,
    /// Our NodeShard as the API server holds it (spec from the controller, status from us).
    own: ShardInput,
    /// Pods whose claim on `x` the driver handed to the engine.
    applied_x: BTreeSet<String>,
    /// Pods whose bind was answered (and the binding echoed by the watch).
    bound: Vec<String>,
    binds_answered: usize,
    statuses_answered: usize,
}

/// What a worker thread holds: a worker of the harness, and the model's ledger.
struct WorkerCtx {
    worker: WorkerHandle,
    ledger: Arc<Mutex<Ledger>>,
    x_slot: u32,
}

impl WorkerCtx {
    /// One turn of the worker loop; a successful claim on `x` is recorded right after the CAS,
    /// before the result is sent and the worker leaves its epoch.
    fn step(&mut self) -> bool {
        let (ledger, x_slot) = (&self.ledger, self.x_slot);
        self.worker.step_observed(|r| {
            if let Outcome::Claimed { candidate, .. } = &r.outcome
                && candidate.slot == x_slot
            {
                let mut l = ledger.lock().unwrap();
                assert!(
                    !l.released,
                    "the claim of {} on x succeeded after x was released",
                    r.task.pod.uid
                );
                l.claimed_x.push(r.task.pod.uid.to_string());
                CLAIMS_ON_X.fetch_add(1, Ordering::Relaxed);
            }
        })
    }
}

impl Model {
    fn worker_ctx(&mut self, w: usize) -> WorkerCtx {
        WorkerCtx {
            worker: self.d.worker(w),
            ledger: self.ledger.clone(),
            x_slot: self.x_slot,
        }
    }

    /// Handle every waiting worker result.
    fn results(&mut self) -> usize {
        let (applied_x, x_slot) = (&mut self.applied_x, self.x_slot);
        self.d.results_observed(|r| {
            if let Outcome::Claimed { candidate, .. } = &r.outcome
                && candidate.slot == x_slot
            {
                applied_x.insert(r.task.pod.uid.to_string());
            }
        })
    }

    /// Answer the bind intents: bound, and the watch shows the pod on its node.
    fn binds(&mut self) -> usize {
        let new: Vec<_> = self.d.binds[self.binds_answered..].to_vec();
        self.binds_answered = self.d.binds.len();
        for b in &new {
            let uid = b.pod.uid.to_string();
            let name = b.pod.name.to_string();
            self.d.input(Input::BindOutcome {
                uid: uid.clone(),
                result: BindResult::Bound,
            });
            let mut echo = pod(&name, 1000);
            echo.node_name = Some(b.node.to_string());
            echo.phase = magma_engine::model::PodPhase::Running;
            self.d.input(Input::PodApply(echo));
            self.bound.push(uid);
        }
        new.len()
    }

    /// Store our NodeShard as changed (the next resourceVersion) and show it to the engine.
    fn store_own(&mut self) {
        let rv = self
            .own
            .resource_version
            .as_deref()
            .map_or(1, |v| v.parse::<u64>().expect("an integer") + 1);
        self.own.resource_version = Some(rv.to_string());
        self.d.input(Input::ShardApply(self.own.clone()));
    }

    /// Flush, check every status intent it emitted, and answer them (written, then echoed).
    fn flush(&mut self) -> usize {
        self.d.flush();
        let new: Vec<_> = self.d.shard_statuses[self.statuses_answered..].to_vec();
        self.statuses_answered = self.d.shard_statuses.len();
        for w in &new {
            if !w.nodes_in_use.iter().any(|n| n == "x") {
                let mut l = self.ledger.lock().unwrap();
                for uid in &l.claimed_x {
                    assert!(
                        self.applied_x.contains(uid),
                        "x released while the claim of {uid} on it is not applied yet"
                    );
                    assert!(
                        self.bound.contains(uid),
                        "x released while {uid} is still binding to it"
                    );
                }
                if !l.claimed_x.is_empty() {
                    RELEASES_AFTER_CLAIM.fetch_add(1, Ordering::Relaxed);
                }
                l.released = true;
            }
            self.own.nodes_in_use = w.nodes_in_use.clone();
            self.own.nodes_to_add = w.nodes_to_add.clone();
            self.own.nodes_to_remove = w.nodes_to_remove.clone();
            self.store_own();
            self.d.input(Input::ShardStatusWritten(Some(WrittenStatus {
                status: w.lists(),
                resource_version: self.own.resource_version.clone(),
            })));
        }
        new.len()
    }
}

#[test]
fn sharding_worker_sync() {
    magma_loom_tests::model(|| {
        let mut d = Harness::new(HarnessOptions {
            workers: WORKERS,
            handoff_capacity: WORKERS,
            sharding: Some(ShardingOptions {
                mode: ShardingMode::Hard,
                shard_name: SHARD.into(),
                // No predecessor: nothing inherited to hold (rule 5 is not modelled).
                handover_hold: Duration::ZERO,
            }),
            ..HarnessOptions::default()
        });
        d.input(Input::NodeApply(node("x", 4000)));
        d.input(Input::NodeApply(node("y", 2000)));
        let own = ShardInput {
            name: SHARD.into(),
            nodes_desired: names(&["x", "y"]),
            nodes_in_use: names(&["x", "y"]),
            resource_version: Some("1".into()),
            ..Default::default()
        };
        d.input(Input::ShardApply(own.clone()));
        for w in 0..WORKERS {
            d.input(Input::PodApply(pod(&format!("p{w}"), 1000)));
        }
        d.flush(); // view {x, y}; hands off every pod
        assert!(d.shard_statuses.is_empty(), "the status is already right");
        let x_slot = d.core().cache().node_slot("x").expect("x has a slot");
        let mut m = Model {
            d,
            ledger: Arc::new(Mutex::new(Ledger::default())),
            x_slot,
            own,
            applied_x: BTreeSet::new(),
            bound: Vec::new(),
            binds_answered: 0,
            statuses_answered: 0,
        };

        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let mut ctx = m.worker_ctx(w);
                magma_loom_tests::spawn(move || {
                    let had = ctx.step();
                    (ctx.worker, had)
                })
            })
            .collect();

        // The controller moves x away while the workers may be deciding on the old view.
        m.own.nodes_desired = names(&["y"]);
        m.store_own();
        m.flush();
        m.results();
        m.flush();
        m.binds();
        m.flush();

        for w in workers {
            let (worker, had) = w.join().unwrap();
            assert!(had, "every worker had a pod to schedule");
            m.d.give_back(worker);
        }
        // Settle: the workers are gone; handle, answer and flush until nothing changes. A pod
        // whose claim conflicted is handed off again: a later worker (on this thread) takes it.
        let mut late = m.worker_ctx(0);
        while usize::from(late.step()) + m.results() + m.binds() + m.flush() > 0 {}

        // Liveness: nothing of ours can land on x any more, so the last status released it.
        assert_eq!(
            m.own.nodes_in_use,
            ["y"],
            "x still in use with the workers idle and every bind answered"
        );
        assert!(m.ledger.lock().unwrap().released);
        m.bound.sort();
        let pods: Vec<String> = (0..WORKERS).map(|w| format!("uid-p{w}")).collect();
        assert_eq!(m.bound, pods, "every pod bound exactly once");
        let core = m.d.core();
        assert_eq!(core.audit(), vec![], "audit");
        assert!(
            core.queue().iter().next().is_none(),
            "every pod left the queue"
        );
        assert_eq!(core.cache().assumed_on(x_slot), 0);
    });
    assert!(
        CLAIMS_ON_X.load(Ordering::Relaxed) > 0,
        "no execution claimed x on the old view"
    );
    assert!(
        RELEASES_AFTER_CLAIM.load(Ordering::Relaxed) > 0,
        "no execution released x after a claim on it"
    );
}
